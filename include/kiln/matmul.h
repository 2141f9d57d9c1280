// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Matrix products: matmul, mm, bmm, mv, dot, outer, addmm, addmv, baddbmm, linear, einsum.
// Operands share one dtype (no promotion, as PyTorch); bool is rejected; integers multiply in
// their own type (wrapping); f16/bf16 accumulate in f32. Inputs may have any strides.
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

/// PyTorch's torch.matmul:
///   1-d x 1-d: dot product, 0-d result;   2-d x 2-d: [M, K] x [K, N] -> [M, N];
///   1-d x n-d: a 1 is prepended to a and removed from the result;
///   n-d x 1-d: a 1 is appended to b and removed from the result;
///   batched: [..., M, K] x [..., K, N] -> [broadcast(...), M, N] (batch dims broadcast).
/// Throws for 0-d operands, mismatched K, unbroadcastable batch dims, different dtypes, bool.
Tensor matmul(const Tensor& a, const Tensor& b);
/// [M, K] x [K, N] -> [M, N]; both exactly 2-d.
Tensor mm(const Tensor& a, const Tensor& b);
/// [B, M, K] x [B, K, N] -> [B, M, N]; both exactly 3-d with the same B (no broadcasting).
Tensor bmm(const Tensor& a, const Tensor& b);
/// [M, K] x [K] -> [M].
Tensor mv(const Tensor& mat, const Tensor& vec);
/// [N] . [N] -> 0-d.
Tensor dot(const Tensor& a, const Tensor& b);
/// [M] x [N] -> [M, N], out[i, j] = a[i] * b[j] (type promotion as mul).
Tensor outer(const Tensor& a, const Tensor& b);

/// Scaling of the add-products: beta * input + alpha * product. With beta == 0, input is
/// ignored (NaN in it does not propagate). Integer tensors use the scalars' integer value.
struct AddmmOptions {
  Scalar beta = 1;
  Scalar alpha = 1;
};
/// beta * input + alpha * (mat1 [M, K] x mat2 [K, N]); input broadcasts to [M, N].
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const AddmmOptions& o = {});
/// beta * input + alpha * (mat [M, K] x vec [K]); input broadcasts to [M].
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const AddmmOptions& o = {});
/// beta * input + alpha * bmm(batch1 [B, M, K], batch2 [B, K, N]); input broadcasts to [B, M, N].
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const AddmmOptions& o = {});

/// x [..., in] x weight [out, in]^T (+ bias [out]) -> [..., out]. A 1-d weight [in] gives
/// [...]. weight is used through its transposed view (no copy). bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

/// Einstein summation, as torch.einsum: "ij,jk->ik", "bij,bjk->bik", "ii->i" (diagonal),
/// "ii" (trace), "...ij,...jk" (ellipsis broadcasts), implicit output (ellipsis dims, then the
/// letters used once, in alphabetical order). Letters are a-z and A-Z; size-1 dims broadcast.
/// Contractions run pairwise (smallest intermediate first) as batched matrix products.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

namespace nn::functional {
/// x [..., in] x weight [out, in]^T (+ bias [out]) -> [..., out] (see kiln::linear).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
}  // namespace nn::functional

}  // namespace kiln
