// SPDX-License-Identifier: MIT OR Apache-2.0
// Matrix products: matmul and its fixed-rank forms (mm, bmm, mv, dot), outer, the add-products
// (addmm, addmv, baddbmm) and linear. Everything lowers to the rank-3 MatMul primitive
// [B, M, K] x [B, K, N]; batch dims are folded into B (or into M) with views where the layout
// allows, and broadcast batch dims become stride-0 views, never copies of their own.
#include "kiln/matmul.h"

#include "ops/dispatch.h"

namespace kiln {

using detail::make_op;
using ir::OpKind;

namespace {

const char* dname(DType t) { return dtype_name(t).data(); }

void check_operands(const char* api, const Tensor& a, const Tensor& b, const char* a_name = "input",
                    const char* b_name = "other") {
  detail::check_defined(api, a);
  detail::check_defined(api, b);
  detail::check_same_device(api, a, a_name, b, b_name);
  KILN_CHECK(a.dtype() == b.dtype(), api,
             "expected both operands to have the same dtype, but got "
                 << dname(a.dtype()) << " != " << dname(b.dtype()) << " (shapes " << a.shape() << " and " << b.shape()
                 << "); convert one operand, e.g. " << b_name << ".to(" << dname(a.dtype()) << ")");
  KILN_CHECK(a.dtype() != DType::Bool, api,
             "not implemented for bool (shapes " << a.shape() << " and " << b.shape() << ")");
}

/// The MatMul primitive on rank-3 operands with equal batch size (either may have batch stride 0),
/// plus bias [N] when it is defined (ops.def).
Tensor matmul3(const char* api, const Tensor& a, const Tensor& b, const Tensor& bias = {}) {
  ir::Op op = make_op(OpKind::MatMul);
  return bias.defined() ? detail::run1(api, op, {a, b, bias}) : detail::run1(api, op, {a, b});
}

/// [batch..., R, C] -> [prod(batch), R, C]: a view when the batch dims fold, else a copy.
Tensor fold_batch(const Tensor& t, int64_t batch) {
  int64_t r = t.dim();
  Shape s{batch, t.size(r - 2), t.size(r - 1)};
  return t.reshape(s);
}

/// a [..., M, K] x b [..., K, N] with rank >= 2 each (the general case of matmul) [+ bias [N]].
Tensor matmul_nd(const char* api, const Tensor& a, const Tensor& b, const Tensor& a0, const Tensor& b0,
                 const Tensor& bias = {}) {
  const int64_t ra = a.dim(), rb = b.dim();
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  KILN_CHECK(b.size(-2) == K, api,
             "shapes " << a0.shape() << " and " << b0.shape() << " cannot be multiplied (" << M << "x" << K << " and "
                       << b.size(-2) << "x" << N << ")");
  // Broadcast batch dims.
  const int64_t nb = std::max(ra, rb) - 2;
  Shape batch(static_cast<size_t>(nb), int64_t{1});
  for (int64_t i = 0; i < nb; ++i) {
    int64_t ia = i - (nb - (ra - 2)), ib = i - (nb - (rb - 2));
    int64_t sa = ia >= 0 ? a.size(ia) : 1, sb = ib >= 0 ? b.size(ib) : 1;
    KILN_CHECK(sa == sb || sa == 1 || sb == 1, api,
               "batch dims of " << a0.shape() << " and " << b0.shape() << " do not broadcast (" << sa << " vs " << sb
                                << " at batch dim " << i << ")");
    batch[static_cast<size_t>(i)] = sa == 1 ? sb : sa;
  }
  const int64_t B = shape_numel(batch);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  // b has no batch of its own: a's batch+rows fold into rows, one [1, B*M, K] x [1, K, N] (a
  // copy of a when its layout does not fold, as PyTorch: one product instead of B small ones;
  // not for a batch broadcast from one matrix, which the batched product reads in place).
  int64_t b_batch = 1;
  for (int64_t i = 0; i < rb - 2; ++i) b_batch *= b.size(i);
  int64_t a_batch = 1;
  for (int64_t i = 0; i < ra - 2; ++i) a_batch *= a.size(i);
  bool expanded = false;  // a batch dim broadcast by stride 0: folding would copy it B times over
  for (int64_t i = 0; i < ra - 2; ++i) expanded = expanded || (a.size(i) > 1 && a.stride(i) == 0);
  if (b_batch == 1 && a_batch == B && B > 1 && !expanded) {
    Tensor a3 = a.reshape({1, B * M, K});
    Tensor b3 = b.reshape({1, K, N});
    return matmul3(api, a3, b3, bias).view(out_shape);
  }
  Shape ea = batch, eb = batch;
  ea.push_back(M);
  ea.push_back(K);
  eb.push_back(K);
  eb.push_back(N);
  Tensor a3 = fold_batch(a.expand(ea), B);
  Tensor b3 = fold_batch(b.expand(eb), B);
  return matmul3(api, a3, b3, bias).view(out_shape);
}

/// Scales t by s (a no-op for 1); integer tensors use the integer value of s, as PyTorch.
Tensor scaled(const Tensor& t, const Scalar& s) {
  if (is_floating(t.dtype())) {
    double v = s.to_double();
    return v == 1.0 ? t : mul(t, Scalar(v));
  }
  int64_t v = s.to_int();
  return v == 1 ? t : mul(t, Scalar(v));
}

/// beta * input + alpha * prod, with input broadcast to prod's shape.
Tensor add_scaled(const char* api, const Tensor& input, const Tensor& prod, const AddmmOptions& o) {
  detail::check_defined(api, input);
  Shape bs = broadcast_shapes(input.shape(), prod.shape(), api);
  KILN_CHECK(bs == prod.shape(), api,
             "input of shape " << input.shape() << " does not broadcast to the product's shape " << prod.shape());
  KILN_CHECK(
      input.dtype() == prod.dtype(), api,
      "expected input to have the product's dtype, but got " << dname(input.dtype()) << " != " << dname(prod.dtype()));
  Tensor p = scaled(prod, o.alpha);
  bool beta_zero = is_floating(input.dtype()) ? o.beta.to_double() == 0.0 : o.beta.to_int() == 0;
  if (beta_zero) return p;
  return add(scaled(input, o.beta), p);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const char* api = "matmul";
  check_operands(api, a, b);
  const int64_t ra = a.dim(), rb = b.dim();
  KILN_CHECK(ra >= 1 && rb >= 1, api,
             "both arguments to matmul need to be at least 1D, but they are " << ra << "D and " << rb << "D");
  // The inner sizes are checked here, so that the error names matmul, not the dot or mm it calls.
  const int64_t ka = a.size(-1), kb = rb == 1 ? b.size(0) : b.size(-2);
  KILN_CHECK(ka == kb, api,
             "shapes " << a.shape() << " and " << b.shape() << " cannot be multiplied (" << (ra == 1 ? 1 : a.size(-2))
                       << "x" << ka << " and " << kb << "x" << (rb == 1 ? 1 : b.size(-1)) << ")");
  if (ra == 1 && rb == 1) return dot(a, b);
  if (ra == 2 && rb == 2) return mm(a, b);
  Tensor a2 = ra == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = rb == 1 ? b.unsqueeze(1) : b;
  Tensor r = matmul_nd(api, a2, b2, a, b);
  if (rb == 1) r = r.squeeze({-1});
  if (ra == 1) r = r.squeeze({-2 + (rb == 1 ? 1 : 0)});
  return r;
}

Tensor mm(const Tensor& a, const Tensor& b) {
  const char* api = "mm";
  check_operands(api, a, b);
  KILN_CHECK(a.dim() == 2, api, "self must be a matrix, got shape " << a.shape());
  KILN_CHECK(b.dim() == 2, api, "mat2 must be a matrix, got shape " << b.shape());
  KILN_CHECK(a.size(1) == b.size(0), api,
             "mat1 and mat2 shapes cannot be multiplied (" << a.size(0) << "x" << a.size(1) << " and " << b.size(0)
                                                           << "x" << b.size(1) << ")");
  return matmul3(api, a.unsqueeze(0), b.unsqueeze(0)).squeeze({0});
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  const char* api = "bmm";
  check_operands(api, a, b);
  KILN_CHECK(a.dim() == 3, api, "batch1 must be a 3D tensor, got shape " << a.shape());
  KILN_CHECK(b.dim() == 3, api, "batch2 must be a 3D tensor, got shape " << b.shape());
  KILN_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2), api,
             "expected size for first two dimensions of batch2 tensor to be: ["
                 << a.size(0) << ", " << a.size(2) << "] but got: [" << b.size(0) << ", " << b.size(1) << "] (shapes "
                 << a.shape() << " and " << b.shape() << ")");
  return matmul3(api, a, b);
}

Tensor mv(const Tensor& mat, const Tensor& vec) {
  const char* api = "mv";
  check_operands(api, mat, vec);
  KILN_CHECK(mat.dim() == 2 && vec.dim() == 1, api,
             "vector + matrix @ vector expected, got shapes " << mat.shape() << " and " << vec.shape());
  KILN_CHECK(mat.size(1) == vec.size(0), api,
             "size mismatch, got input (" << mat.size(0) << "), mat (" << mat.size(0) << "x" << mat.size(1)
                                          << "), vec (" << vec.size(0) << ")");
  return matmul3(api, mat.unsqueeze(0), vec.view({1, vec.size(0), 1})).view({mat.size(0)});
}

Tensor dot(const Tensor& a, const Tensor& b) {
  const char* api = "dot";
  check_operands(api, a, b);
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, api,
             "1D tensors expected, but got " << a.dim() << "D and " << b.dim() << "D tensors (shapes " << a.shape()
                                             << " and " << b.shape() << ")");
  KILN_CHECK(a.size(0) == b.size(0), api,
             "inconsistent tensor size, expected tensor " << a.shape() << " and " << b.shape()
                                                          << " to have the same number of elements");
  const int64_t n = a.size(0);
  Tensor a3 = a.as_strided({1, 1, n}, {0, 0, a.stride(0)}, a.storage_offset());
  Tensor b3 = b.as_strided({1, n, 1}, {0, b.stride(0), 0}, b.storage_offset());
  return matmul3(api, a3, b3).view(Shape{});
}

Tensor outer(const Tensor& a, const Tensor& b) {
  const char* api = "outer";
  detail::check_defined(api, a);
  detail::check_defined(api, b);
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, api,
             "expected 1-D tensors, got shapes " << a.shape() << " and " << b.shape());
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const AddmmOptions& o) {
  const char* api = "addmm";
  check_operands(api, mat1, mat2);
  KILN_CHECK(mat1.dim() == 2, api, "mat1 must be a matrix, got shape " << mat1.shape());
  KILN_CHECK(mat2.dim() == 2, api, "mat2 must be a matrix, got shape " << mat2.shape());
  KILN_CHECK(mat1.size(1) == mat2.size(0), api,
             "mat1 and mat2 shapes cannot be multiplied (" << mat1.size(0) << "x" << mat1.size(1) << " and "
                                                           << mat2.size(0) << "x" << mat2.size(1) << ")");
  // input + mat1 @ mat2 with an [N] input of the operands' f32 / f64 dtype: one product onto it.
  if (input.defined() && input.dim() == 1 && input.size(0) == mat2.size(1) && input.dtype() == mat1.dtype() &&
      (input.dtype() == DType::F32 || input.dtype() == DType::F64) && o.alpha.to_double() == 1.0 &&
      o.beta.to_double() == 1.0) {
    detail::check_same_device(api, mat1, input);
    return matmul3(api, mat1.unsqueeze(0), mat2.unsqueeze(0), input).squeeze({0});
  }
  return add_scaled(api, input, mm(mat1, mat2), o);
}

Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const AddmmOptions& o) {
  return add_scaled("addmv", input, mv(mat, vec), o);
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const AddmmOptions& o) {
  return add_scaled("baddbmm", input, bmm(batch1, batch2), o);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const char* api = "linear";
  check_operands(api, x, weight, "input", "weight");
  KILN_CHECK(x.dim() >= 1, api, "input must have at least 1 dim, got shape " << x.shape());
  KILN_CHECK(weight.dim() == 1 || weight.dim() == 2, api,
             "weight must be [out, in] or [in], got shape " << weight.shape());
  KILN_CHECK(x.size(-1) == weight.size(-1), api,
             "input shape " << x.shape() << " and weight shape " << weight.shape()
                            << " cannot be multiplied (in_features " << x.size(-1) << " vs " << weight.size(-1) << ")");
  if (!bias.defined()) return matmul(x, weight.dim() == 2 ? weight.t() : weight);
  KILN_CHECK(weight.dim() != 2 || bias.dim() != 1 || bias.size(0) == weight.size(0) || bias.size(0) == 1, api,
             "bias shape " << bias.shape() << " does not match weight shape " << weight.shape()
                           << ": bias must be [out_features] = [" << weight.size(0) << "]");
  detail::check_same_device(api, x, "input", bias, "bias");
  KILN_CHECK(bias.dtype() == x.dtype(), api,
             "expected bias to have the input's dtype, but got " << dname(bias.dtype()) << " != " << dname(x.dtype()));
  // A [out] bias of an f32 / f64 product is part of the product (one op, accumulated onto it).
  if (weight.dim() == 2 && bias.dim() == 1 && bias.size(0) == weight.size(0) &&
      (x.dtype() == DType::F32 || x.dtype() == DType::F64)) {
    const Tensor w = weight.t();
    if (x.dim() == 1) return matmul_nd(api, x.unsqueeze(0), w, x, weight, bias).squeeze({-2});
    if (x.dim() == 2) return matmul3(api, x.unsqueeze(0), w.unsqueeze(0), bias).squeeze({0});
    return matmul_nd(api, x, w, x, weight, bias);
  }
  Tensor y = matmul(x, weight.dim() == 2 ? weight.t() : weight);
  Shape bs = broadcast_shapes(bias.shape(), y.shape(), api);
  KILN_CHECK(bs == y.shape(), api,
             "bias of shape " << bias.shape() << " does not broadcast to the output shape " << y.shape());
  return add(y, bias);
}

namespace nn::functional {
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) { return kiln::linear(x, weight, bias); }
}  // namespace nn::functional

// ---- Tensor methods ---------------------------------------------------------------------------
Tensor Tensor::matmul(const Tensor& other) const { return kiln::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return kiln::mm(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return kiln::bmm(*this, other); }
Tensor Tensor::dot(const Tensor& other) const { return kiln::dot(*this, other); }
Tensor Tensor::outer(const Tensor& other) const { return kiln::outer(*this, other); }

}  // namespace kiln
