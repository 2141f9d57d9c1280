// SPDX-License-Identifier: MIT OR Apache-2.0
// Bad-input suite, tensor ops: creation, views, indexing, elementwise (integer division by
// zero on every integer dtype), reductions, scans and sorting, movement. Each case must throw
// kiln::Error starting with the op's "[name]" where PyTorch raises (harness: bad_input.h).
#include <limits>

#include "unit/bad_input.h"

using namespace kiln;
using kiln::test::bad::Case;
using kiln::test::bad::Env;
using kiln::test::bad::kAll;
using kiln::test::bad::kCpus;

namespace {

constexpr int64_t kBig = int64_t{1} << 62;

std::vector<Case> creation_and_views() {
  return {
      CASE(arange_step_zero, "arange", kAll, arange(0, 10, 0, {}, e.dev)),
      CASE(arange_wrong_sign, "arange", kAll, arange(10, 0, 1, {}, e.dev)),
      CASE(arange_nan_end, "arange", kAll, arange(0, std::numeric_limits<double>::quiet_NaN(), 1, {}, e.dev)),
      CASE(linspace_negative_steps, "linspace", kAll, linspace(0, 1, -1, {.device = e.dev})),
      CASE(eye_negative_n, "eye", kAll, eye(-1, {}, {.device = e.dev})),
      CASE(eye_negative_m, "eye", kAll, eye(2, -3, {.device = e.dev})),
      CASE(randint_empty_range, "randint", kAll, randint(5, 5, {3}, {.dtype = i64, .device = e.dev})),
      CASE(randperm_negative, "randperm", kAll, randperm(-1, e.dev)),
      CASE(uniform_low_above_high, "uniform", kAll, uniform({3}, 1, 0, {.device = e.dev})),
      CASE(normal_negative_std, "normal", kAll, normal({3}, 0, -1, {.device = e.dev})),
      CASE(bernoulli_p_above_one, "bernoulli", kAll, bernoulli({3}, 1.5, {.device = e.dev})),
      CASE(bernoulli_p_negative, "bernoulli", kAll, bernoulli({3}, -0.5, {.device = e.dev})),
      CASE(reshape_wrong_numel, "reshape", kAll, e.f({6}).reshape({4})),
      CASE(reshape_two_inferred, "reshape", kAll, e.f({6}).reshape({-1, -1})),
      CASE(reshape_bad_negative, "reshape", kAll, e.f({6}).reshape({-2, -3})),
      CASE(view_needs_copy, "view", kAll, e.f({2, 3}).t().view({6})),
      CASE(permute_too_few, "permute", kAll, e.f({2, 3}).permute({0})),
      CASE(permute_repeated, "permute", kAll, e.f({2, 3}).permute({0, 0})),
      CASE(permute_out_of_range, "permute", kAll, e.f({2, 3}).permute({0, 5})),
      CASE(transpose_out_of_range, "transpose", kAll, e.f({2, 3}).transpose(0, 2)),
      CASE(squeeze_out_of_range, "squeeze", kAll, squeeze(e.f({2, 1}), {3})),
      CASE(unsqueeze_out_of_range, "unsqueeze", kAll, e.f({2, 3}).unsqueeze(4)),
      CASE(expand_shrinks, "expand", kAll, e.f({3}).expand({2})),
      CASE(expand_fewer_dims, "expand", kAll, e.f({2, 3}).expand({3})),
      CASE(expand_new_dim_inferred, "expand", kAll, e.f({3}).expand({-1, 3})),
      CASE(narrow_past_end, "narrow", kAll, e.f({3}).narrow(0, 2, 5)),
      CASE(narrow_negative_length, "narrow", kAll, e.f({3}).narrow(0, 0, -1)),
      CASE(select_out_of_range, "select", kAll, e.f({3}).select(0, 3)),
      CASE(select_dim_out_of_range, "select", kAll, e.f({3}).select(1, 0)),
      CASE(select_on_0d, "select", kAll, e.f({}).select(0, 0)),
      CASE(slice_step_zero, "slice", kAll, e.f({4}).slice(0, 0, 4, 0)),
      CASE(slice_negative_step, "slice", kAll, e.f({4}).slice(0, 0, 4, -1)),
      CASE(flatten_start_after_end, "flatten", kAll, flatten(e.f({2, 3, 4}), 2, 1)),
      CASE(unflatten_wrong_product, "unflatten", kAll, unflatten(e.f({6}), 0, {4, 2})),
      CASE(movedim_repeated, "movedim", kAll, movedim(e.f({2, 3}), {0, 0}, {0, 1})),
      CASE(movedim_length_mismatch, "movedim", kAll, movedim(e.f({2, 3}), {0}, {0, 1})),
      CASE(diagonal_same_dims, "diagonal", kAll, diagonal(e.f({3, 3}), 0, 1, 1)),
      CASE(split_size_zero, "split", kAll, split(e.f({4}), 0)),
      CASE(split_sizes_wrong_sum, "split", kAll, split(e.f({4}), std::vector<int64_t>{1, 2})),
      CASE(chunk_zero, "chunk", kAll, chunk(e.f({4}), 0)),
      CASE(unbind_out_of_range, "unbind", kAll, unbind(e.f({4}), 1)),
      CASE(repeat_fewer_dims, "repeat", kAll, e.f({2, 3}).repeat({2})),
      CASE(repeat_negative, "repeat", kAll, e.f({2}).repeat({-1})),
      CASE(roll_shift_dim_mismatch, "roll", kAll, roll(e.f({2, 3}), {1, 1}, {0})),
      CASE(roll_dim_out_of_range, "roll", kAll, roll(e.f({2, 3}), {1}, {2})),
      CASE(flip_repeated_dim, "flip", kAll, flip(e.f({2, 3}), {0, 0})),
      CASE(flip_out_of_range, "flip", kAll, flip(e.f({2, 3}), {2})),
      CASE(tril_on_1d, "tril", kAll, tril(e.f({3}))),
      CASE(triu_on_1d, "triu", kAll, triu(e.f({3}))),
      CASE(diag_on_3d, "diag", kAll, diag(e.f({2, 2, 2}))),
      CASE(diag_embed_same_dims, "diag_embed", kAll, diag_embed(e.f({3}), 0, 0, 0)),
  };
}

std::vector<Case> indexing() {
  return {
      CASE(index_select_float_index, "index_select", kAll, index_select(e.f({3}), 0, e.f({2}))),
      CASE(index_select_2d_index, "index_select", kAll, index_select(e.f({3}), 0, e.i({0, 1, 0, 1}, {2, 2}))),
      CASE(index_select_dim_out_of_range, "index_select", kAll, index_select(e.f({3}), 1, e.i({0}, {1}))),
      CASE(index_select_index_too_big, "index_select", kCpus, e.read(index_select(e.f({3}), 0, e.i({3}, {1})))),
      CASE(index_select_index_negative, "index_select", kCpus, e.read(index_select(e.f({3}), 0, e.i({-1}, {1})))),
      CASE(gather_rank_mismatch, "gather", kAll, gather(e.f({2, 3}), 1, e.i({0}, {1}))),
      CASE(gather_float_index, "gather", kAll, gather(e.f({2, 3}), 1, e.f({2, 1}))),
      CASE(gather_index_too_big, "gather", kCpus, e.read(gather(e.f({2, 3}), 1, e.i({0, 3}, {2, 1})))),
      CASE(scatter_index_too_big, "scatter", kCpus, e.read(scatter(e.f({3}), 0, e.i({7}, {1}), e.f({1})))),
      CASE(scatter_bad_reduce, "scatter", kAll, scatter(e.f({3}), 0, e.i({0}, {1}), e.f({1}), "avg")),
      CASE(scatter_src_too_small, "scatter_add", kAll, scatter_add(e.f({3}), 0, e.i({0, 1}, {2}), e.f({1}))),
      CASE(scatter_reduce_bad_reduce, "scatter_reduce", kAll,
           scatter_reduce(e.f({3}), 0, e.i({0}, {1}), e.f({1}), "median")),
      CASE(index_add_index_too_big, "index_add", kCpus, e.read(index_add(e.f({3}), 0, e.i({5}, {1}), e.f({1})))),
      CASE(index_add_src_shape, "index_add", kAll, index_add(e.f({3, 2}), 0, e.i({0}, {1}), e.f({1, 3}))),
      CASE(index_copy_src_shape, "index_copy", kAll, index_copy(e.f({3}), 0, e.i({0, 1}, {2}), e.f({3}))),
      CASE(index_fill_index_too_big, "index_fill", kCpus, e.read(index_fill(e.f({3}), 0, e.i({3}, {1}), 1))),
      CASE(index_put_too_many, "index_put", kAll, index_put(e.f({3}), {e.i({0}, {1}), e.i({0}, {1})}, e.f({1}))),
      CASE(index_put_index_too_big, "index_put", kCpus, e.read(index_put(e.f({3}), {e.i({4}, {1})}, e.f({1})))),
      CASE(masked_select_float_mask, "masked_select", kAll, masked_select(e.f({3}), e.f({3}))),
      CASE(masked_fill_float_mask, "masked_fill", kAll, masked_fill(e.f({3}), e.f({3}), 0)),
      CASE(masked_fill_value_not_0d, "masked_fill", kAll, masked_fill(e.f({3}), e.b({3}), e.f({2}))),
      CASE(masked_fill_mask_shape, "masked_fill", kAll, masked_fill(e.f({3}), e.b({4}), 0)),
      CASE(masked_scatter_source_short, "masked_scatter", kCpus, e.read(masked_scatter(e.f({3}), e.b({3}), e.f({2})))),
      CASE(take_index_too_big, "take", kCpus, e.read(take(e.f({2, 2}), e.i({4}, {1})))),
      CASE(take_along_dim_rank, "take_along_dim", kAll, take_along_dim(e.f({2, 2}), e.i({0}, {1}), 1)),
      CASE(one_hot_negative_class, "one_hot", kCpus, e.read(one_hot(e.i({-1}, {1}), 3))),
      CASE(one_hot_class_too_big, "one_hot", kCpus, e.read(one_hot(e.i({3}, {1}), 3))),
      CASE(one_hot_float_input, "one_hot", kAll, one_hot(e.f({2}), 3)),
      CASE(embedding_index_too_big, "embedding", kCpus, e.read(embedding(e.i({4}, {1}), e.f({4, 2})))),
      CASE(embedding_weight_1d, "embedding", kAll, embedding(e.i({0}, {1}), e.f({4}))),
  };
}

std::vector<Case> elementwise() {
  return {
      CASE(add_broadcast, "add", kAll, add(e.f({2, 3}), e.f({4}))),
      CASE(mul_broadcast, "mul", kAll, mul(e.f({2, 3}), e.f({2}))),
      CASE(sub_bool, "sub", kAll, sub(e.b({2}), e.b({2}))),
      CASE(add_undefined, "add", kAll, add(e.f({2}), Tensor())),
      CASE(abs_undefined, "abs", kAll, abs(Tensor())),
      CASE(exp_undefined, "exp", kAll, exp(Tensor())),
      CASE(div_bad_mode, "div", kAll, div(e.f({2}), e.f({2}), "round")),
      CASE(bitwise_and_float, "bitwise_and", kAll, bitwise_and(e.f({2}), e.f({2}))),
      CASE(bitwise_or_float, "bitwise_or", kAll, bitwise_or(e.f({2}), e.f({2}))),
      CASE(shift_float, "bitwise_left_shift", kAll, bitwise_left_shift(e.f({2}), e.f({2}))),
      CASE(pow_int_negative_exponent, "pow", kAll, pow(e.i({2, 3}, {2}), -1)),
      CASE(where_shape, "where", kAll, where(e.b({2}), e.f({3}), e.f({3}))),
      CASE(where_float_cond, "where", kAll, where(e.f({3}), e.f({3}), e.f({3}))),
      CASE(lerp_shape, "lerp", kAll, lerp(e.f({2}), e.f({3}), 0.5)),
      CASE(clamp_no_bounds, "clamp", kAll, clamp(e.f({2}), std::nullopt, std::nullopt)),
      CASE(gelu_bad_approximate, "gelu", kAll, gelu(e.f({2}), "fast")),
      CASE(hardtanh_min_above_max, "hardtanh", kAll, hardtanh(e.f({2}), 2, 1)),
      CASE(add_inplace_broadcast_out, "add_", kAll, e.f({3}).add_(e.f({2, 3}))),
      CASE(mul_inplace_int_by_float, "mul_", kAll, e.i({1, 2}, {2}).mul_(e.f({2}))),
      CASE(copy_shape_mismatch, "copy_", kAll, e.f({3}).copy_(e.f({4}))),
  };
}

/// Integer division by 0 (PyTorch: ZeroDivisionError) for every integer dtype and form: a
/// scalar 0 on every device, a 0 in a divisor tensor where there are values.
std::vector<Case> integer_division() {
  std::vector<Case> r;
  struct Form {
    const char* name;
    const char* op;
    Tensor (*by_tensor)(const Tensor&, const Tensor&);
    Tensor (*by_scalar)(const Tensor&, Scalar);
  };
  static const Form forms[] = {
      {"floor_div", "div", [](const Tensor& a, const Tensor& b) { return div(a, b, "floor"); },
       [](const Tensor& a, Scalar b) { return div(a, b, "floor"); }},
      {"trunc_div", "div", [](const Tensor& a, const Tensor& b) { return div(a, b, "trunc"); },
       [](const Tensor& a, Scalar b) { return div(a, b, "trunc"); }},
      {"floor_divide", "div", [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); },
       [](const Tensor& a, Scalar b) { return floor_divide(a, b); }},
      {"remainder", "remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); },
       [](const Tensor& a, Scalar b) { return remainder(a, b); }},
      {"fmod", "fmod", [](const Tensor& a, const Tensor& b) { return fmod(a, b); },
       [](const Tensor& a, Scalar b) { return fmod(a, b); }},
  };
  for (DType dt : {DType::U8, DType::I8, DType::I16, DType::I32, DType::I64}) {
    const std::string tag = dtype_name(dt).data();
    for (const Form& f : forms) {
      auto bt = f.by_tensor;
      auto bs = f.by_scalar;
      r.push_back({f.name + std::string("_") + tag + "_by_tensor_zero", f.op,
                   [bt, dt](const Env& e) {
                     e.read(bt(e.i({5, 7, 9}, {3}, dt), e.i({1, 0, 2}, {3}, dt)));
                   },
                   kCpus});
      r.push_back({f.name + std::string("_") + tag + "_by_scalar_zero", f.op,
                   [bs, dt](const Env& e) {
                     e.read(bs(e.i({5, 7}, {2}, dt), 0));
                   },
                   kAll});
    }
  }
  // Large enough to run through the parallel and the vectorised loops.
  r.push_back(CASE(floor_div_big_tensor_one_zero, "div", kCpus, {
    Tensor b = full({1 << 16}, 3, {.dtype = i32, .device = e.dev});
    b = index_fill(b, 0, e.i({40000}, {1}), 0);
    e.read(div(full({1 << 16}, 7, {.dtype = i32, .device = e.dev}), b, "floor"));
  }));
  r.push_back(CASE(remainder_broadcast_zero_row, "remainder", kCpus,
                   e.read(remainder(e.i({1, 2, 3, 4, 5, 6}, {2, 3}), e.i({1, 0, 1}, {3})))));
  r.push_back(CASE(mod_operator_zero, "remainder", kCpus, e.read(e.i({4, 5}, {2}) % e.i({0, 1}, {2}))));
  r.push_back(CASE(floor_divide_transposed_zero, "div", kCpus,
                   e.read(floor_divide(e.i({1, 2, 3, 4}, {2, 2}).t(), e.i({1, 1, 0, 1}, {2, 2}).t()))));
  return r;
}

std::vector<Case> reductions() {
  return {
      CASE(sum_dim_out_of_range, "sum", kAll, sum(e.f({2, 3}), {5})),
      CASE(sum_repeated_dim, "sum", kAll, sum(e.f({2, 3}), {0, 0})),
      CASE(mean_int, "mean", kAll, mean(e.i({1, 2}, {2}))),
      CASE(mean_dim_out_of_range, "mean", kAll, mean(e.f({2}), {-3})),
      CASE(prod_dim_out_of_range, "prod", kAll, prod(e.f({2}), {1})),
      CASE(amax_empty, "amax", kAll, amax(e.f({0}))),
      CASE(amin_empty_dim, "amin", kAll, amin(e.f({2, 0}), {1})),
      CASE(max_empty, "max", kAll, max(e.f({0}))),
      CASE(min_empty_dim, "min", kAll, min(e.f({0, 2}), 0)),
      CASE(argmax_dim_out_of_range, "argmax", kAll, argmax(e.f({2}), 1)),
      CASE(argmin_empty, "argmin", kAll, argmin(e.f({0}))),
      CASE(var_dim_out_of_range, "var", kAll, var(e.f({2}), {2})),
      CASE(std_dim_out_of_range, "std", kAll, kiln::std(e.f({2}), {2})),
      CASE(norm_dim_out_of_range, "norm", kAll, norm(e.f({2}), 2, {1})),
      CASE(logsumexp_dim_out_of_range, "logsumexp", kAll, logsumexp(e.f({2}), {3})),
      CASE(any_dim_out_of_range, "any", kAll, any(e.b({2}), {1})),
      CASE(all_dim_out_of_range, "all", kAll, all(e.b({2}), {1})),
      CASE(count_nonzero_dim_out_of_range, "count_nonzero", kAll, count_nonzero(e.f({2}), {1})),
      CASE(cumsum_dim_out_of_range, "cumsum", kAll, cumsum(e.f({2}), 1)),
      CASE(cumprod_dim_out_of_range, "cumprod", kAll, cumprod(e.f({2}), -2)),
      CASE(cummax_dim_out_of_range, "cummax", kAll, cummax(e.f({2}), 1)),
      CASE(cummin_dim_out_of_range, "cummin", kAll, cummin(e.f({2}), 1)),
      CASE(sort_dim_out_of_range, "sort", kAll, sort(e.f({2}), 1)),
      CASE(argsort_dim_out_of_range, "argsort", kAll, argsort(e.f({2}), 1)),
      CASE(topk_k_too_big, "topk", kAll, topk(e.f({3}), 4)),
      CASE(topk_k_negative, "topk", kAll, topk(e.f({3}), -1)),
      CASE(kthvalue_k_zero, "kthvalue", kAll, kthvalue(e.f({3}), 0)),
      CASE(kthvalue_k_too_big, "kthvalue", kAll, kthvalue(e.f({3}), 4)),
      CASE(median_dim_out_of_range, "median", kAll, median(e.f({3}), 1)),
      CASE(softmax_dim_out_of_range, "softmax", kAll, softmax(e.f({2, 3}), 2)),
      CASE(log_softmax_dim_out_of_range, "log_softmax", kAll, log_softmax(e.f({2, 3}), -3)),
  };
}

std::vector<Case> movement() {
  return {
      CASE(cat_empty_list, "cat", kAll, cat({})),
      CASE(cat_rank_mismatch, "cat", kAll, cat({e.f({2, 3}), e.f({2, 3, 1})})),
      CASE(cat_size_mismatch, "cat", kAll, cat({e.f({2, 3}), e.f({2, 4})}, 0)),
      CASE(cat_dim_out_of_range, "cat", kAll, cat({e.f({2}), e.f({2})}, 1)),
      CASE(cat_0d, "cat", kAll, cat({e.f({}), e.f({})})),
      CASE(cat_undefined, "cat", kAll, cat({e.f({2}), Tensor()})),
      CASE(cat_summed_size_overflows, "cat", kAll,
           cat({e.f({1}).expand({kBig}), e.f({1}).expand({kBig}), e.f({1}).expand({kBig})})),
      CASE(cat_bytes_overflow, "cat", kAll,
           cat({e.f({1, 1}).expand({int64_t{1} << 31, int64_t{1} << 31}),
                e.f({1, 1}).expand({int64_t{1} << 31, int64_t{1} << 31})})),
      CASE(stack_shape_mismatch, "stack", kAll, stack({e.f({2}), e.f({3})})),
      CASE(stack_empty_list, "stack", kAll, stack({})),
      CASE(stack_dim_out_of_range, "stack", kAll, stack({e.f({2}), e.f({2})}, 3)),
      CASE(hstack_empty_list, "hstack", kAll, hstack({})),
      CASE(vstack_empty_list, "vstack", kAll, vstack({})),
      CASE(pad_odd_length, "pad", kAll, pad(e.f({2, 3}), {1})),
      CASE(pad_too_many, "pad", kAll, pad(e.f({3}), {1, 1, 1, 1})),
      CASE(pad_bad_mode, "pad", kAll, pad(e.f({1, 2, 3}), {1, 1}, "wrap")),
      CASE(pad_reflect_too_wide, "pad", kAll, pad(e.f({1, 2, 3}), {3, 3}, "reflect")),
      CASE(pad_negative_past_size, "pad", kAll, pad(e.f({3}), {-2, -2})),
      CASE(meshgrid_bad_indexing, "meshgrid", kAll, meshgrid({e.f({2}), e.f({3})}, "zy")),
      CASE(meshgrid_2d_input, "meshgrid", kAll, meshgrid({e.f({2, 2}), e.f({3})})),
      CASE(broadcast_tensors_incompatible, "broadcast_tensors", kAll, broadcast_tensors({e.f({3}), e.f({4})})),
      CASE(repeat_interleave_negative, "repeat_interleave", kAll, repeat_interleave(e.f({3}), -1)),
      CASE(repeat_interleave_count_mismatch, "repeat_interleave", kAll,
           repeat_interleave(e.f({3}), e.i({1, 2}, {2}), 0)),
      CASE(tile_negative, "tile", kAll, tile(e.f({2}), {-2})),
  };
}

const std::vector<Case>& ops_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> all;
    for (auto part : {creation_and_views(), indexing(), elementwise(), integer_division(), reductions(), movement()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return cases;
}

}  // namespace

KILN_BAD_INPUT_SUITE(BadInputOps, ops_cases);

// INT_MIN / -1 wraps (two's complement) instead of trapping; the remainder is 0 (docs/tensors.md).
TEST(BadInputIntDivision, MinByMinusOneWraps) {
  for (Device d : {Device::cpu(), Device::cpu().without_fusion()}) {
    const int64_t m64 = std::numeric_limits<int64_t>::min();
    Tensor a = tensor(std::vector<int64_t>{m64, 7, -7}, {3}, d);
    Tensor neg = full({3}, -1, {.dtype = i64, .device = d});
    for (const char* mode : {"floor", "trunc"}) {
      EXPECT_EQ(div(a, neg, mode).to_vector<int64_t>(), (std::vector<int64_t>{m64, -7, 7})) << mode;
      EXPECT_EQ(div(a, -1, mode).to_vector<int64_t>(), (std::vector<int64_t>{m64, -7, 7})) << mode;
    }
    EXPECT_EQ(remainder(a, neg).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
    EXPECT_EQ(fmod(a, -1).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
    const int32_t m32 = std::numeric_limits<int32_t>::min();
    Tensor b = tensor(std::vector<int32_t>{m32, 9}, {2}, d);
    EXPECT_EQ(floor_divide(b, -1).to_vector<int32_t>(), (std::vector<int32_t>{m32, -9}));
    EXPECT_EQ(div(b, -1, "trunc").to_vector<int32_t>(), (std::vector<int32_t>{m32, -9}));
    EXPECT_EQ(remainder(b, -1).to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
    EXPECT_EQ(fmod(b, -1).to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
    // Division by nonzero values still floors and truncates as before.
    Tensor c = tensor(std::vector<int32_t>{-7, 7}, {2}, d);
    EXPECT_EQ(floor_divide(c, 2).to_vector<int32_t>(), (std::vector<int32_t>{-4, 3}));
    EXPECT_EQ(remainder(c, -2).to_vector<int32_t>(), (std::vector<int32_t>{-1, -1}));
  }
}
