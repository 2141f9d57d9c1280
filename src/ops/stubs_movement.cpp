// SPDX-License-Identifier: MIT OR Apache-2.0
// STUB: placeholders until this family is implemented; delete when done.
#include "kiln/ops.h"

namespace kiln {

Tensor reshape(const Tensor& x, const Shape& shape) { KILN_CHECK(false, "reshape", "not implemented yet"); }
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) { KILN_CHECK(false, "flatten", "not implemented yet"); }
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) { KILN_CHECK(false, "unflatten", "not implemented yet"); }
Tensor permute(const Tensor& x, const Dims& dims) { KILN_CHECK(false, "permute", "not implemented yet"); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) { KILN_CHECK(false, "transpose", "not implemented yet"); }
Tensor movedim(const Tensor& x, const Dims& src, const Dims& dst) { KILN_CHECK(false, "movedim", "not implemented yet"); }
Tensor squeeze(const Tensor& x, const Dims& dims) { KILN_CHECK(false, "squeeze", "not implemented yet"); }
Tensor unsqueeze(const Tensor& x, int64_t dim) { KILN_CHECK(false, "unsqueeze", "not implemented yet"); }
Tensor expand(const Tensor& x, const Shape& shape) { KILN_CHECK(false, "expand", "not implemented yet"); }
Tensor broadcast_to(const Tensor& x, const Shape& shape) { KILN_CHECK(false, "broadcast_to", "not implemented yet"); }
std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& xs) { KILN_CHECK(false, "broadcast_tensors", "not implemented yet"); }
Tensor repeat(const Tensor& x, const Shape& repeats) { KILN_CHECK(false, "repeat", "not implemented yet"); }
Tensor tile(const Tensor& x, const Shape& reps) { KILN_CHECK(false, "tile", "not implemented yet"); }
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) { KILN_CHECK(false, "repeat_interleave", "not implemented yet"); }
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) { KILN_CHECK(false, "repeat_interleave", "not implemented yet"); }
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) { KILN_CHECK(false, "cat", "not implemented yet"); }
Tensor concat(const std::vector<Tensor>& xs, int64_t dim) { KILN_CHECK(false, "concat", "not implemented yet"); }
Tensor stack(const std::vector<Tensor>& xs, int64_t dim) { KILN_CHECK(false, "stack", "not implemented yet"); }
Tensor hstack(const std::vector<Tensor>& xs) { KILN_CHECK(false, "hstack", "not implemented yet"); }
Tensor vstack(const std::vector<Tensor>& xs) { KILN_CHECK(false, "vstack", "not implemented yet"); }
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) { KILN_CHECK(false, "split", "not implemented yet"); }
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) { KILN_CHECK(false, "split", "not implemented yet"); }
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) { KILN_CHECK(false, "chunk", "not implemented yet"); }
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) { KILN_CHECK(false, "unbind", "not implemented yet"); }
Tensor flip(const Tensor& x, const Dims& dims) { KILN_CHECK(false, "flip", "not implemented yet"); }
Tensor fliplr(const Tensor& x) { KILN_CHECK(false, "fliplr", "not implemented yet"); }
Tensor flipud(const Tensor& x) { KILN_CHECK(false, "flipud", "not implemented yet"); }
Tensor roll(const Tensor& x, const Shape& shifts, const Dims& dims) { KILN_CHECK(false, "roll", "not implemented yet"); }
Tensor pad(const Tensor& x, const Shape& pads, const std::string& mode, double value) { KILN_CHECK(false, "pad", "not implemented yet"); }
std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, const std::string& indexing) { KILN_CHECK(false, "meshgrid", "not implemented yet"); }

}  // namespace kiln
