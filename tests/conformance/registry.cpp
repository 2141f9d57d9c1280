// SPDX-License-Identifier: MIT OR Apache-2.0
// The conformance registry: one entry per op name of scripts/gen_golden.py, calling the Kiln
// API with the case's arguments (in) and attributes (at) on device dev.
#include <stdexcept>

#include "conformance/registry_util.h"

namespace kiln::conformance {

namespace {
using namespace reg;

/// "1,::2,None,...,T1" -> Tensor::index arguments (T<k> = input k).
std::vector<TensorIndex> index_spec(const std::string& spec, A in) {
  std::vector<TensorIndex> out;
  size_t start = 0;
  while (true) {
    size_t p = spec.find(',', start);
    std::string item = spec.substr(start, p == std::string::npos ? std::string::npos : p - start);
    if (item == "None") {
      out.emplace_back(None);
    } else if (item == "...") {
      out.emplace_back(Ellipsis);
    } else if (item[0] == 'T') {
      out.emplace_back(in.at(std::stoul(item.substr(1))).t);
    } else if (item.find(':') != std::string::npos) {
      Slice s;
      std::optional<int64_t> parts[3];
      size_t b = 0;
      for (int k = 0; k < 3; ++k) {
        size_t e = item.find(':', b);
        std::string part = item.substr(b, e == std::string::npos ? std::string::npos : e - b);
        if (!part.empty()) parts[k] = std::stoll(part);
        if (e == std::string::npos) break;
        b = e + 1;
      }
      s.start = parts[0];
      s.stop = parts[1];
      s.step = parts[2].value_or(1);
      out.emplace_back(s);
    } else {
      out.emplace_back(static_cast<int64_t>(std::stoll(item)));
    }
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

#define UNARY(name)                          \
  OP(name) { return {kiln::name(in[0].t)}; } \
  END
// Tensor-tensor, tensor-scalar and scalar-tensor forms.
#define BINARY(name)                                     \
  OP(name) {                                             \
    if (in[0].s) return {kiln::name(*in[0].s, in[1].t)}; \
    if (in[1].s) return {kiln::name(in[0].t, *in[1].s)}; \
    return {kiln::name(in[0].t, in[1].t)};               \
  }                                                      \
  END
#define OPERATOR(name, sym)                      \
  OP(name) {                                     \
    if (in[1].s) return {in[0].t sym * in[1].s}; \
    return {in[0].t sym in[1].t};                \
  }                                              \
  END
// Tensor-tensor only (the bitwise operators).
#define OPERATOR_TT(name, sym)               \
  OP(name) { return {in[0].t sym in[1].t}; } \
  END
#define OPERATOR_RS(name, sym)                   \
  OP(name) {                                     \
    if (in[0].s) return {*in[0].s sym in[1].t};  \
    if (in[1].s) return {in[0].t sym * in[1].s}; \
    return {in[0].t sym in[1].t};                \
  }                                              \
  END

const std::map<std::string, OpFn>& build() {
  static const std::map<std::string, OpFn> m = {
      // ---- unary ----
      UNARY(abs), UNARY(neg), UNARY(sign), UNARY(exp), UNARY(exp2), UNARY(expm1), UNARY(log), UNARY(log2), UNARY(log10),
      UNARY(log1p), UNARY(sqrt), UNARY(rsqrt), UNARY(reciprocal), UNARY(square), UNARY(sin), UNARY(cos), UNARY(tan),
      UNARY(asin), UNARY(acos), UNARY(atan), UNARY(sinh), UNARY(cosh), UNARY(tanh), UNARY(asinh), UNARY(acosh),
      UNARY(atanh), UNARY(erf), UNARY(erfinv), UNARY(floor), UNARY(ceil), UNARY(trunc), UNARY(frac), UNARY(sigmoid),
      UNARY(relu), UNARY(selu), UNARY(silu), UNARY(mish), UNARY(softsign), UNARY(hardsigmoid), UNARY(hardswish),
      UNARY(isnan), UNARY(isinf), UNARY(isfinite), UNARY(isposinf), UNARY(isneginf), UNARY(logical_not),
      UNARY(bitwise_not), UNARY(relu6), OP(round){return {kiln::round(in[0].t, at.i_or("decimals", 0))};
}
END, OP(logit) { return {kiln::logit(in[0].t, at.opt_f("eps"))}; }
END, OP(leaky_relu) { return {kiln::leaky_relu(in[0].t, at.f("negative_slope"))}; }
END, OP(elu) { return {kiln::elu(in[0].t, at.f("alpha"))}; }
END, OP(celu) { return {kiln::celu(in[0].t, at.f("alpha"))}; }
END, OP(gelu) { return {kiln::gelu(in[0].t, at.str("approximate"))}; }
END, OP(softplus) { return {kiln::softplus(in[0].t, at.f("beta"), at.f("threshold"))}; }
END, OP(hardtanh) { return {kiln::hardtanh(in[0].t, at.f("min_val"), at.f("max_val"))}; }
END, OP(clamp) {
  if (in[1].is_tensor()) return {kiln::clamp(in[0].t, in[1].t, in[2].t)};
  return {kiln::clamp(in[0].t, opt_scalar(in[1]), opt_scalar(in[2]))};
}
END, OP(clamp_min) { return {kiln::clamp_min(in[0].t, *in[1].s)}; }
END, OP(clamp_max) { return {kiln::clamp_max(in[0].t, *in[1].s)}; }
END, OP(nan_to_num) { return {kiln::nan_to_num(in[0].t, at.f_or("nan", 0.0), at.opt_f("posinf"), at.opt_f("neginf"))}; }
END, OP(cast) { return {kiln::cast(in[0].t, *at.dtype("dtype"))}; }
END,

    // ---- binary ----
    OP(add) {
  if (at.has("alpha")) return {kiln::add(in[0].t, in[1].t, at.scalar("alpha"))};
  if (in[0].s) return {kiln::add(*in[0].s, in[1].t)};
  if (in[1].s) return {kiln::add(in[0].t, *in[1].s)};
  return {kiln::add(in[0].t, in[1].t)};
}
END, OP(sub) {
  if (at.has("alpha")) return {kiln::sub(in[0].t, in[1].t, at.scalar("alpha"))};
  if (in[0].s) return {kiln::sub(*in[0].s, in[1].t)};
  if (in[1].s) return {kiln::sub(in[0].t, *in[1].s)};
  return {kiln::sub(in[0].t, in[1].t)};
}
END, OP(div) {
  std::string rm = at.str_or("rounding_mode", "");
  if (in[0].s) return {kiln::div(*in[0].s, in[1].t, rm)};
  if (in[1].s) return {kiln::div(in[0].t, *in[1].s, rm)};
  return {kiln::div(in[0].t, in[1].t, rm)};
}
END, OP(floor_divide) {
  if (in[1].s) return {kiln::floor_divide(in[0].t, *in[1].s)};
  return {kiln::floor_divide(in[0].t, in[1].t)};
}
END, BINARY(mul), BINARY(remainder), BINARY(fmod), BINARY(pow), BINARY(atan2), BINARY(maximum), BINARY(minimum),
    BINARY(fmax), BINARY(fmin), BINARY(hypot), BINARY(logaddexp), BINARY(bitwise_and), BINARY(bitwise_or),
    BINARY(bitwise_xor), BINARY(bitwise_left_shift), BINARY(bitwise_right_shift), BINARY(logical_and),
    BINARY(logical_or), BINARY(logical_xor), BINARY(eq), BINARY(ne), BINARY(lt), BINARY(le), BINARY(gt), BINARY(ge),
    // the C++ operators
    OPERATOR_RS(op_add, +), OPERATOR_RS(op_sub, -), OPERATOR_RS(op_mul, *), OPERATOR_RS(op_div, /), OPERATOR(op_mod, %),
    OPERATOR_TT(op_and, &), OPERATOR_TT(op_or, |), OPERATOR_TT(op_xor, ^), OPERATOR(op_eq, ==), OPERATOR(op_ne, !=),
    OPERATOR(op_lt, <), OPERATOR(op_le, <=), OPERATOR(op_gt, >), OPERATOR(op_ge, >=), OP(op_neg) {
  return {-in[0].t};
}
END, OP(op_invert) { return {~in[0].t}; }
END, OP(op_lshift) { return {in[0].t << *in[1].s}; }
END, OP(op_rshift) { return {in[0].t >> *in[1].s}; }
END, OP(where) {
  if (in[1].s && in[2].s) return {kiln::where(in[0].t, *in[1].s, *in[2].s)};
  if (in[1].s) return {kiln::where(in[0].t, *in[1].s, in[2].t)};
  if (in[2].s) return {kiln::where(in[0].t, in[1].t, *in[2].s)};
  return {kiln::where(in[0].t, in[1].t, in[2].t)};
}
END, OP(masked_fill) {
  if (in[2].s) return {kiln::masked_fill(in[0].t, in[1].t, *in[2].s)};
  return {kiln::masked_fill(in[0].t, in[1].t, in[2].t)};
}
END, OP(lerp) {
  if (in[2].s) return {kiln::lerp(in[0].t, in[1].t, *in[2].s)};
  return {kiln::lerp(in[0].t, in[1].t, in[2].t)};
}
END, OP(isclose) { return {kiln::isclose(in[0].t, in[1].t, at.f("rtol"), at.f("atol"), at.b("equal_nan"))}; }
END, OP(allclose) {
  return {scalar_tensor(kiln::allclose(in[0].t, in[1].t, at.f("rtol"), at.f("atol"), at.b("equal_nan")), bool_, dev)};
}
END, OP(equal) { return {scalar_tensor(kiln::equal(in[0].t, in[1].t), bool_, dev)}; }
END,

    // ---- reductions ----
    OP(sum) {
  return {kiln::sum(in[0].t, at.dims("dims"), at.b("keepdim"), at.dtype("dtype"))};
}
END, OP(mean) { return {kiln::mean(in[0].t, at.dims("dims"), at.b("keepdim"))}; }
END, OP(prod) { return {kiln::prod(in[0].t, at.dims("dims"), at.b("keepdim"), at.dtype("dtype"))}; }
END, OP(amax) { return {kiln::amax(in[0].t, at.dims("dims"), at.b("keepdim"))}; }
END, OP(amin) { return {kiln::amin(in[0].t, at.dims("dims"), at.b("keepdim"))}; }
END, OP(argmax) { return {kiln::argmax(in[0].t, at.opt_i("dim"), at.b("keepdim"))}; }
END, OP(argmin) { return {kiln::argmin(in[0].t, at.opt_i("dim"), at.b("keepdim"))}; }
END, OP(max_dim) { return pair_out(kiln::max(in[0].t, at.i("dim"), at.b("keepdim"))); }
END, OP(min_dim) { return pair_out(kiln::min(in[0].t, at.i("dim"), at.b("keepdim"))); }
END, OP(max) { return {kiln::max(in[0].t)}; }
END, OP(min) { return {kiln::min(in[0].t)}; }
END, OP(var) { return {kiln::var(in[0].t, at.dims("dims"), at.f("correction"), at.b("keepdim"))}; }
END, OP(std) { return {kiln::std(in[0].t, at.dims("dims"), at.f("correction"), at.b("keepdim"))}; }
END, OP(var_mean) { return pair_out(kiln::var_mean(in[0].t, at.dims("dims"), at.f("correction"), at.b("keepdim"))); }
END, OP(norm) { return {kiln::norm(in[0].t, at.f("p"), at.dims("dims"), at.b("keepdim"))}; }
END, OP(logsumexp) { return {kiln::logsumexp(in[0].t, at.dims("dims"), at.b("keepdim"))}; }
END, OP(any) { return {kiln::any(in[0].t, at.dims("dims"), at.b("keepdim"))}; }
END, OP(all) { return {kiln::all(in[0].t, at.dims("dims"), at.b("keepdim"))}; }
END, OP(count_nonzero) { return {kiln::count_nonzero(in[0].t, at.dims("dims"))}; }
END, OP(cumsum) { return {kiln::cumsum(in[0].t, at.i("dim"), at.dtype("dtype"))}; }
END, OP(cumprod) { return {kiln::cumprod(in[0].t, at.i("dim"), at.dtype("dtype"))}; }
END, OP(cummax) { return pair_out(kiln::cummax(in[0].t, at.i("dim"))); }
END, OP(cummin) { return pair_out(kiln::cummin(in[0].t, at.i("dim"))); }
END, OP(sort) { return pair_out(kiln::sort(in[0].t, at.i("dim"), at.b("descending"), true)); }
END, OP(argsort) { return {kiln::argsort(in[0].t, at.i("dim"), at.b("descending"), true)}; }
END, OP(topk) { return pair_out(kiln::topk(in[0].t, at.i("k"), at.i("dim"), at.b("largest"), true)); }
END, OP(kthvalue) { return pair_out(kiln::kthvalue(in[0].t, at.i("k"), at.i("dim"), at.b("keepdim"))); }
END, OP(median) { return {kiln::median(in[0].t)}; }
END, OP(median_dim) { return pair_out(kiln::median(in[0].t, at.i("dim"), at.b("keepdim"))); }
END, OP(nanmedian) { return {kiln::nanmedian(in[0].t)}; }
END, OP(unique) {
  auto r = kiln::unique(in[0].t, true, true, true);
  return {r.values, r.inverse, r.counts};
}
END, OP(softmax) { return {kiln::softmax(in[0].t, at.i("dim"), at.dtype("dtype"))}; }
END, OP(log_softmax) { return {kiln::log_softmax(in[0].t, at.i("dim"), at.dtype("dtype"))}; }
END,

    // ---- indexing ----
    OP(index_select) {
  return {kiln::index_select(in[0].t, at.i("dim"), in[1].t)};
}
END, OP(gather) { return {kiln::gather(in[0].t, at.i("dim"), in[1].t)}; }
END, OP(scatter) {
  std::string red = at.str_or("reduce", "");
  if (in[2].s) return {kiln::scatter(in[0].t, at.i("dim"), in[1].t, *in[2].s, red)};
  return {kiln::scatter(in[0].t, at.i("dim"), in[1].t, in[2].t, red)};
}
END, OP(scatter_add) { return {kiln::scatter_add(in[0].t, at.i("dim"), in[1].t, in[2].t)}; }
END, OP(scatter_reduce) {
  return {kiln::scatter_reduce(in[0].t, at.i("dim"), in[1].t, in[2].t, at.str("reduce"), at.b("include_self"))};
}
END, OP(index_add) { return {kiln::index_add(in[0].t, at.i("dim"), in[1].t, in[2].t, *in[3].s)}; }
END, OP(index_copy) { return {kiln::index_copy(in[0].t, at.i("dim"), in[1].t, in[2].t)}; }
END, OP(index_fill) { return {kiln::index_fill(in[0].t, at.i("dim"), in[1].t, *in[2].s)}; }
END, OP(index_put) { return {kiln::index_put(in[0].t, tensors(in, 2), in[1].t, at.b("accumulate"))}; }
END, OP(masked_select) { return {kiln::masked_select(in[0].t, in[1].t)}; }
END, OP(masked_scatter) { return {kiln::masked_scatter(in[0].t, in[1].t, in[2].t)}; }
END, OP(nonzero) { return {kiln::nonzero(in[0].t)}; }
END, OP(take) { return {kiln::take(in[0].t, in[1].t)}; }
END, OP(take_along_dim) { return {kiln::take_along_dim(in[0].t, in[1].t, at.opt_i("dim"))}; }
END, OP(select) { return {kiln::select(in[0].t, at.i("dim"), at.i("index"))}; }
END, OP(narrow) { return {kiln::narrow(in[0].t, at.i("dim"), at.i("start"), at.i("length"))}; }
END, OP(getitem) { return {in[0].t.index(index_spec(at.str("idx"), in))}; }
END, OP(setitem) {
  Tensor y = in[0].t.clone();
  auto idx = index_spec(at.str("idx"), in);
  if (in[1].s)
    y.index_put_(idx, *in[1].s);
  else
    y.index_put_(idx, in[1].t);
  return {y};
}
END, OP(tril) { return {kiln::tril(in[0].t, at.i_or("diagonal", 0))}; }
END, OP(triu) { return {kiln::triu(in[0].t, at.i_or("diagonal", 0))}; }
END, OP(diag) { return {kiln::diag(in[0].t, at.i_or("diagonal", 0))}; }
END, OP(diag_embed) { return {kiln::diag_embed(in[0].t, at.i("offset"), at.i("dim1"), at.i("dim2"))}; }
END, OP(diagonal) { return {kiln::diagonal(in[0].t, at.i("offset"), at.i("dim1"), at.i("dim2"))}; }
END, OP(one_hot) { return {kiln::one_hot(in[0].t, at.i("num_classes"))}; }
END, OP(embedding) { return {kiln::embedding(in[0].t, in[1].t)}; }
END,

    // ---- movement ----
    OP(reshape) {
  return {kiln::reshape(in[0].t, at.shape("shape"))};
}
END, OP(view) { return {in[0].t.view(at.shape("shape"))}; }
END, OP(flatten) { return {kiln::flatten(in[0].t, at.i("start_dim"), at.i("end_dim"))}; }
END, OP(unflatten) { return {kiln::unflatten(in[0].t, at.i("dim"), at.shape("sizes"))}; }
END, OP(permute) { return {kiln::permute(in[0].t, at.dims("dims"))}; }
END, OP(transpose) { return {kiln::transpose(in[0].t, at.i("d0"), at.i("d1"))}; }
END, OP(movedim) { return {kiln::movedim(in[0].t, at.dims("src"), at.dims("dst"))}; }
END, OP(squeeze) { return {kiln::squeeze(in[0].t, at.dims("dims"))}; }
END, OP(unsqueeze) { return {kiln::unsqueeze(in[0].t, at.i("dim"))}; }
END, OP(expand) { return {kiln::expand(in[0].t, at.shape("shape"))}; }
END, OP(broadcast_to) { return {kiln::broadcast_to(in[0].t, at.shape("shape"))}; }
END, OP(broadcast_tensors) { return kiln::broadcast_tensors(tensors(in)); }
END, OP(repeat) { return {kiln::repeat(in[0].t, at.shape("repeats"))}; }
END, OP(tile) { return {kiln::tile(in[0].t, at.shape("reps"))}; }
END, OP(repeat_interleave) {
  if (in[1].s) return {kiln::repeat_interleave(in[0].t, in[1].s->to_int(), at.opt_i("dim"))};
  return {kiln::repeat_interleave(in[0].t, in[1].t, at.opt_i("dim"))};
}
END, OP(cat) { return {kiln::cat(tensors(in), at.i("dim"))}; }
END, OP(concat) { return {kiln::concat(tensors(in), at.i("dim"))}; }
END, OP(stack) { return {kiln::stack(tensors(in), at.i("dim"))}; }
END, OP(hstack) { return {kiln::hstack(tensors(in))}; }
END, OP(vstack) { return {kiln::vstack(tensors(in))}; }
END, OP(split) {
  if (at.has("split_size")) return kiln::split(in[0].t, at.i("split_size"), at.i("dim"));
  return kiln::split(in[0].t, at.ints("sizes"), at.i("dim"));
}
END, OP(chunk) { return kiln::chunk(in[0].t, at.i("chunks"), at.i("dim")); }
END, OP(unbind) { return kiln::unbind(in[0].t, at.i("dim")); }
END, OP(flip) { return {kiln::flip(in[0].t, at.dims("dims"))}; }
END, OP(fliplr) { return {kiln::fliplr(in[0].t)}; }
END, OP(flipud) { return {kiln::flipud(in[0].t)}; }
END, OP(roll) { return {kiln::roll(in[0].t, at.shape("shifts"), at.dims("dims"))}; }
END, OP(pad) { return {kiln::pad(in[0].t, at.shape("pads"), at.str("mode"), at.f_or("value", 0.0))}; }
END, OP(meshgrid) { return kiln::meshgrid(tensors(in), at.str("indexing")); }
END,

    // ---- creation ----
    OP(arange) {
  if (in.size() == 1) return {kiln::arange(*in[0].s, at.dtype("dtype"), dev)};
  return {kiln::arange(*in[0].s, *in[1].s, *in[2].s, at.dtype("dtype"), dev)};
}
END, OP(linspace) { return {kiln::linspace(at.f("start"), at.f("end"), at.i("steps"), opts(at, dev))}; }
END, OP(logspace) { return {kiln::logspace(at.f("start"), at.f("end"), at.i("steps"), at.f("base"), opts(at, dev))}; }
END, OP(eye) { return {kiln::eye(at.i("n"), at.opt_i("m"), opts(at, dev))}; }
END, OP(full) { return {kiln::full(at.shape("shape"), *in[0].s, opts(at, dev))}; }
END, OP(zeros) { return {kiln::zeros(at.shape("shape"), opts(at, dev))}; }
END, OP(ones) { return {kiln::ones(at.shape("shape"), opts(at, dev))}; }
END, OP(zeros_like) { return {kiln::zeros_like(in[0].t)}; }
END, OP(ones_like) { return {kiln::ones_like(in[0].t)}; }
END, OP(full_like) { return {kiln::full_like(in[0].t, *in[1].s)}; }
END, OP(scalar_tensor) { return {kiln::scalar_tensor(*in[0].s, at.dtype("dtype"), dev)}; }
END,
};  // namespace
return m;
}  // namespace kiln::conformance
#undef UNARY
#undef BINARY
#undef OPERATOR
#undef OPERATOR_RS
#undef OPERATOR_TT

std::map<std::string, OpFn>& parts() {
  static std::map<std::string, OpFn> m;
  return m;
}

}  // namespace

RegistryPart::RegistryPart(std::map<std::string, OpFn> entries) {
  for (auto& [name, fn] : entries) {
    if (!parts().emplace(name, std::move(fn)).second)
      throw std::logic_error("conformance op registered twice: " + name);
  }
}

const std::map<std::string, OpFn>& registry() {
  static const std::map<std::string, OpFn> all = [] {
    std::map<std::string, OpFn> m = build();
    for (const auto& [name, fn] : parts())
      if (!m.emplace(name, fn).second) throw std::logic_error("conformance op registered twice: " + name);
    return m;
  }();
  return all;
}

}  // namespace kiln::conformance
