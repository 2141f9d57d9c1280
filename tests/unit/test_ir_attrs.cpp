// SPDX-License-Identifier: MIT OR Apache-2.0
// Typed attributes (ir/attrs.h): each family's struct encodes then decodes to itself, and
// re-encoding what decode reads from the ops the frontends build gives back their exact ints
// and reals (the serialised form does not change).
#include <gtest/gtest.h>
#include <kiln/capture.h>
#include <kiln/fft.h>
#include <kiln/kiln.h>
#include <kiln/linalg.h>
#include <kiln/nn.h>

#include <set>
#include <string>

#include "ir/attrs.h"

using namespace kiln;
using namespace kiln::ir;
namespace F = kiln::nn::functional;

namespace {

Op op_of(OpKind k) {
  Op op;
  op.kind = k;
  return op;
}

/// Attrs after decoding op's with the family's struct and encoding them again (dtype kept);
/// false in `typed` when no struct covers the op.
Attrs reencode(const Op& op, bool& typed) {
  Op o = op;
  typed = true;
  switch (op.kind) {
    case OpKind::CumSum:
    case OpKind::CumProd:
    case OpKind::CumMax:
    case OpKind::CumMin:
    case OpKind::Sort:
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::Cat:
      ScanAttrs::decode(op).encode(o);
      break;
    case OpKind::IndexSelect:
    case OpKind::Gather:
    case OpKind::IndexAdd:
    case OpKind::IndexCopy:
      IndexAttrs::decode(op).encode(o);
      break;
    case OpKind::Scatter:
      ScatterAttrs::decode(op).encode(o);
      break;
    case OpKind::Pad:
      PadAttrs::decode(op).encode(o);
      break;
    case OpKind::Fft:
    case OpKind::Rfft:
    case OpKind::Irfft:
      FftAttrs::decode(op).encode(o);
      break;
    case OpKind::LuFactor:
    case OpKind::Cholesky:
    case OpKind::Qr:
    case OpKind::Svd:
    case OpKind::Eigh:
    case OpKind::TriangularSolve:
      LinalgAttrs::decode(op).encode(o);
      break;
    case OpKind::LayerNorm:
      NormAttrs::decode(op).encode(o);
      break;
    case OpKind::Conv:
    case OpKind::ConvTranspose:
    case OpKind::ConvWeightGrad:
      ConvAttrs::decode(op).encode(o);
      break;
    case OpKind::Clamp:
      ClampAttrs::decode(op).encode(o);
      break;
    case OpKind::Round:
    case OpKind::IsInf:
    case OpKind::Logit:
    case OpKind::LeakyRelu:
    case OpKind::Elu:
    case OpKind::Softplus:
    case OpKind::NanToNum:
      UnaryAttrs::decode(op).encode(o);
      break;
    default:
      if (op_family(op.kind) == Family::Creation || op.kind == OpKind::Bernoulli) {
        CreationAttrs::decode(op).encode(o);
      } else if (op_family(op.kind) == Family::Reduce) {
        ReduceAttrs::decode(op).encode(o);
      } else if (op_family(op.kind) == Family::Pool) {
        PoolAttrs::decode(op).encode(o);
      } else {
        typed = false;
      }
  }
  return o.attrs;
}

}  // namespace

TEST(IrAttrs, EncodeThenDecodeGivesTheStruct) {
  Op sort = op_of(OpKind::Sort);
  ScanAttrs{.dim = 2, .descending = true}.encode(sort);
  EXPECT_EQ(sort.attrs.ints, (SmallVec<int64_t, 8>{2, 1}));
  EXPECT_EQ(ScanAttrs::decode(sort).dim, 2);
  EXPECT_TRUE(ScanAttrs::decode(sort).descending);

  Op gather = op_of(OpKind::Gather);
  IndexAttrs{.dim = 1, .wrap = true}.encode(gather);
  EXPECT_EQ(gather.attrs.ints.size(), 1u);  // Gather has no wrap flag
  Op add = op_of(OpKind::IndexAdd);
  IndexAttrs{.dim = 1, .wrap = true, .alpha = 2.5}.encode(add);
  const IndexAttrs ia = IndexAttrs::decode(add);
  EXPECT_EQ(ia.dim, 1);
  EXPECT_TRUE(ia.wrap);
  EXPECT_EQ(ia.alpha, 2.5);

  Op sc = op_of(OpKind::Scatter);
  ScatterAttrs{.dim = 0, .reduce = ScatterAttrs::kAmax, .include_self = false}.encode(sc);
  const ScatterAttrs sa = ScatterAttrs::decode(sc);
  EXPECT_EQ(sa.reduce, ScatterAttrs::kAmax);
  EXPECT_FALSE(sa.include_self);

  Op var = op_of(OpKind::Var);
  ReduceAttrs{.keepdim = true, .dims = {0, 2}, .correction = 0, .sqrt = true}.encode(var);
  const ReduceAttrs ra = ReduceAttrs::decode(var);
  EXPECT_TRUE(ra.keepdim);
  EXPECT_EQ(ra.dims, (Dims{0, 2}));
  EXPECT_EQ(ra.correction, 0);
  EXPECT_TRUE(ra.sqrt);

  Op pad = op_of(OpKind::Pad);
  PadAttrs{.mode = PadAttrs::kReflect, .pads = {1, 2, 3, 4}, .value = 0}.encode(pad);
  EXPECT_EQ(PadAttrs::decode(pad).npad(), 2u);
  EXPECT_EQ(PadAttrs::decode(pad).pads, (Dims{1, 2, 3, 4}));

  Op irfft = op_of(OpKind::Irfft);
  FftAttrs{.dim = 1, .n = 10, .scale = 0.1}.encode(irfft);
  EXPECT_EQ(FftAttrs::decode(irfft).n, 10);
  EXPECT_EQ(FftAttrs::decode(irfft).scale, 0.1);

  Op ts = op_of(OpKind::TriangularSolve);
  LinalgAttrs{.upper = true, .left = false, .unitriangular = true}.encode(ts);
  const LinalgAttrs la = LinalgAttrs::decode(ts);
  EXPECT_TRUE(la.upper && !la.left && la.unitriangular);

  Op ln = op_of(OpKind::LayerNorm);
  NormAttrs{.ndims = 3, .has_weight = true, .groups = 4, .eps = 1e-6}.encode(ln);
  const NormAttrs na = NormAttrs::decode(ln);
  EXPECT_EQ(na.ndims, 3);
  EXPECT_TRUE(na.has_weight && !na.has_bias && !na.rms);
  EXPECT_EQ(na.groups, 4);
  EXPECT_EQ(na.eps, 1e-6);

  Op mp = op_of(OpKind::MaxPool);
  PoolAttrs{.nsp = 2, .kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .dilation = {1, 2}, .with_indices = true}
      .encode(mp);
  const PoolAttrs pa = PoolAttrs::decode(mp);
  EXPECT_EQ(pa.dilation, (Dims{1, 2}));
  EXPECT_TRUE(pa.with_indices);
  EXPECT_FALSE(pa.ceil_mode);

  Op conv = op_of(OpKind::Conv);
  ConvAttrs c{.groups = 2, .nsp = 2, .stride = {1, 2}, .padding = {0, 1}, .dilation = {1, 1}};
  c.has_epilogue = true;
  c.epilogue = kConvScale | kConvClamp | kConvMaxPool;
  c.pool_kernel = {2, 2};
  c.pool_stride = {2, 2};
  c.pool_padding = {0, 1};
  c.clamp_lo = -1;
  c.clamp_hi = 6;
  c.encode(conv);
  EXPECT_EQ(conv.attrs.ints.size(), ConvAttrs::geometry_ints(2) + 1 + kConvPoolInts);
  const ConvAttrs cd = ConvAttrs::decode(conv);
  EXPECT_EQ(cd.epilogue, c.epilogue);
  EXPECT_EQ(cd.pool_padding, (Dims{0, 1}));
  EXPECT_EQ(cd.activation(), 2);
  EXPECT_EQ(cd.clamp_hi, 6);
  EXPECT_TRUE(cd.has_pool() && cd.has_scale() && !cd.has_shift() && !cd.has_residual());
  EXPECT_EQ(conv_epilogue(conv), c.epilogue);
  Op again = op_of(OpKind::Conv);
  cd.encode(again);
  EXPECT_EQ(again.attrs, conv.attrs);

  Op ri = op_of(OpKind::RandInt);
  CreationAttrs{.shape = {2, 3}, .seed = 0x123456789abcULL, .offset = 7, .low = -5, .high = 9}.encode(ri);
  EXPECT_EQ(ri.attrs.ints.size(), CreationAttrs::shape_start(OpKind::RandInt) + 2);
  const CreationAttrs ca = CreationAttrs::decode(ri);
  EXPECT_EQ(ca.seed, 0x123456789abcULL);
  EXPECT_EQ(ca.offset, 7u);
  EXPECT_EQ(ca.low, -5);
  EXPECT_EQ(ca.high, 9);
  EXPECT_EQ(ca.shape, (Shape{2, 3}));

  Op cl = op_of(OpKind::Clamp);
  ClampAttrs{.has_min = false, .has_max = true, .min = 0, .max = 3}.encode(cl);
  EXPECT_FALSE(ClampAttrs::decode(cl).has_min);
  EXPECT_EQ(ClampAttrs::decode(cl).max, 3);
}

TEST(IrAttrs, FrontendOpsReencodeToTheirInts) {
  std::set<OpKind> seen;
  CapturedGraph g = capture(
      [](const std::vector<Tensor>& in) {
        const Tensor& x = in[0];  // [2, 3, 8, 8]
        const TensorOptions f{.device = x.device()}, i64{.dtype = DType::I64, .device = x.device()};
        const Tensor idx = zeros({2}, i64);
        std::vector<Tensor> out;
        out.push_back(x.sum(Dims{1, 2}, true));
        out.push_back(var(x, {0}, 0));
        out.push_back(kiln::std(x, {3}, 1, true));
        out.push_back(argmax(x, 1));
        out.push_back(cumsum(x, 2));
        out.push_back(cummax(x, 1).first);
        out.push_back(sort(x, 3, true).first);
        out.push_back(softmax(x, -1));
        out.push_back(cat({x, x}, 1));
        out.push_back(index_select(x, 2, idx));
        out.push_back(gather(x, 0, zeros({1, 3, 8, 8}, i64)));
        out.push_back(scatter_reduce(x, 1, zeros({2, 1, 8, 8}, i64), x, "amax", false));
        out.push_back(index_add(x, 3, idx, ones({2, 3, 8, 2}, f), 2));
        out.push_back(index_copy(x, 2, idx, ones({2, 3, 2, 8}, f)));
        out.push_back(pad(x, {1, 2, 0, 1}, "reflect"));
        out.push_back(clamp(x, Scalar(-1.0), std::nullopt));
        out.push_back(F::max_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true}));
        out.push_back(F::avg_pool2d(x, 2, {.count_include_pad = false, .divisor_override = 3}));
        out.push_back(F::adaptive_avg_pool2d(x, Dims{2, 3}));
        out.push_back(F::adaptive_max_pool2d(x, Dims{4, 4}));
        out.push_back(F::layer_norm(x, {8, 8}, ones({8, 8}, f)));
        out.push_back(F::group_norm(x, 3));
        out.push_back(F::conv2d(x, ones({4, 3, 3, 3}, f), ones({4}, f), {.stride = 2, .padding = 1}));
        out.push_back(F::conv_transpose2d(x, ones({3, 2, 3, 3}, f), {}, {.stride = 2, .output_padding = 1}));
        out.push_back(fft::rfft(x, {}, 2));
        out.push_back(fft::irfft(fft::fft(fft::rfft(x)), 8, 2));
        out.push_back(round(x, 2));
        out.push_back(isneginf(x));
        out.push_back(logit(x, 0.1));
        out.push_back(leaky_relu(x, 0.2));
        out.push_back(celu(x, 2.0));
        out.push_back(softplus(x, 2.0, 10.0));
        out.push_back(nan_to_num(x, 1.0, std::nullopt, -5.0));
        out.push_back(full({2, 2}, 3, f));
        out.push_back(full({3}, 0.5, f));
        out.push_back(arange(1, 7, 2, DType::F32, x.device()));
        out.push_back(rand({4}, f));
        out.push_back(randn({4}, f));
        out.push_back(randint(-3, 5, {2}, i64));
        out.push_back(bernoulli(full({3}, 0.5, f)));
        const Tensor a = x.slice(2, 0, 3).slice(3, 0, 3);
        out.push_back(linalg::cholesky(a, true));
        out.push_back(linalg::qr(a, "complete").Q);
        out.push_back(linalg::svdvals(a));
        out.push_back(linalg::eigh(a, "U").eigenvalues);
        out.push_back(linalg::solve_triangular(a, a, true, false, true));
        return out;
      },
      {zeros({2, 3, 8, 8})});
  size_t typed_ops = 0;
  for (const CapturedNode& n : g.nodes) {
    bool typed = false;
    const Attrs again = reencode(*n.op, typed);
    if (!typed) continue;
    ++typed_ops;
    seen.insert(n.op->kind);
    EXPECT_EQ(again.ints, n.op->attrs.ints) << op_name(n.op->kind);
    EXPECT_EQ(again.reals, n.op->attrs.reals) << op_name(n.op->kind);
  }
  EXPECT_GE(typed_ops, 30u) << g.str();
  for (OpKind k : {OpKind::Sum,
                   OpKind::Var,
                   OpKind::Sort,
                   OpKind::Cat,
                   OpKind::Scatter,
                   OpKind::IndexAdd,
                   OpKind::Pad,
                   OpKind::MaxPool,
                   OpKind::AvgPool,
                   OpKind::AdaptiveMaxPool,
                   OpKind::LayerNorm,
                   OpKind::Conv,
                   OpKind::ConvTranspose,
                   OpKind::Irfft,
                   OpKind::Fft,
                   OpKind::Svd,
                   OpKind::TriangularSolve,
                   OpKind::Clamp,
                   OpKind::Fill,
                   OpKind::Arange,
                   OpKind::RandNormal,
                   OpKind::RandInt,
                   OpKind::Bernoulli,
                   OpKind::Round,
                   OpKind::IsInf,
                   OpKind::Logit,
                   OpKind::LeakyRelu,
                   OpKind::Elu,
                   OpKind::Softplus,
                   OpKind::NanToNum})
    EXPECT_TRUE(seen.count(k)) << op_name(k) << " was not built";
}
