// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX set ops: Unique (of the elements, or of the slices along an axis), on the host.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "onnx/ops.h"

namespace kiln::onnx {

namespace {

/// NaN-aware order of keys: NaN after every number, NaNs equal to each other (as NumPy's
/// unique).
template <class K>
bool key_less(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}
template <class K>
bool key_equal(K a, K b) {
  if constexpr (std::is_floating_point_v<K>)
    if (std::isnan(a) && std::isnan(b)) return true;
  return a == b;
}

/// The groups of equal rows of keys [rows, len]: for each group (in sorted order, or in order
/// of first occurrence), the first row's index and the count; inverse: each row's group.
template <class K>
void group_rows(const std::vector<K>& keys, int64_t rows, int64_t len, bool sorted, std::vector<int64_t>& first,
                std::vector<int64_t>& inverse, std::vector<int64_t>& counts) {
  auto row = [&](int64_t r) { return keys.begin() + r * len; };
  auto less = [&](int64_t a, int64_t b) {
    return std::lexicographical_compare(row(a), row(a) + len, row(b), row(b) + len, key_less<K>);
  };
  auto equal = [&](int64_t a, int64_t b) { return std::equal(row(a), row(a) + len, row(b), key_equal<K>); };
  std::vector<int64_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);  // equal rows keep their input order
  inverse.assign(static_cast<size_t>(rows), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || !equal(order[i], first.back())) {
      first.push_back(order[i]);
      counts.push_back(0);
    }
    inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(first.size()) - 1;
    ++counts.back();
  }
  if (sorted) return;
  std::vector<int64_t> by_first(first.size()), rank(first.size());
  std::iota(by_first.begin(), by_first.end(), 0);
  std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
  std::vector<int64_t> f2(first.size()), c2(first.size());
  for (size_t g = 0; g < by_first.size(); ++g) {
    rank[static_cast<size_t>(by_first[g])] = static_cast<int64_t>(g);
    f2[g] = first[static_cast<size_t>(by_first[g])];
    c2[g] = counts[static_cast<size_t>(by_first[g])];
  }
  first.swap(f2);
  counts.swap(c2);
  for (int64_t& v : inverse) v = rank[static_cast<size_t>(v)];
}

/// x (and axis: the slices along it, else the flattened elements) -> unique values y, the index
/// of each one's first occurrence, each input's index into y, and the counts; sorted (default)
/// or in order of first occurrence.
void unique(OpContext& c) {
  const Tensor& x = c.x(0);
  const bool has_axis = c.has_attr("axis");
  const int64_t a = has_axis ? axis_of(c, c.attr_i("axis", 0), x.dim()) : 0;
  const Tensor src = has_axis ? x : x.reshape({-1});
  const int64_t rows = src.size(a), len = rows ? src.numel() / rows : 0;
  const Tensor as_rows = movedim(src, {a}, {0}).contiguous().reshape({rows, len});
  const bool sorted = c.attr_i("sorted", 1) != 0;
  std::vector<int64_t> first, inverse, counts;
  if (is_floating(x.dtype()))
    group_rows(as_rows.to(f64).to_vector<double>(), rows, len, sorted, first, inverse, counts);
  else
    group_rows(as_rows.to(i64).to_vector<int64_t>(), rows, len, sorted, first, inverse, counts);
  const auto k = static_cast<int64_t>(first.size());
  const Device dev = x.device();
  c.set(0, index_select(src, a, tensor(first, {k}, dev)));
  c.set(1, tensor(first, {k}, dev));
  c.set(2, tensor(inverse, {rows}, dev));
  c.set(3, tensor(counts, {k}, dev));
}

}  // namespace

void register_set(Registry& r) { r["Unique"] = unique; }

}  // namespace kiln::onnx
