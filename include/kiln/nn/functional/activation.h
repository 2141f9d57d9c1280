// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// torch.nn.functional's activations, dropouts and embedding: the functional form of every
// activation, dropout and embedding module of kiln::nn, with PyTorch's names and defaults.
#include <cstdint>
#include <optional>

#include "kiln/ops.h"

namespace kiln::nn::functional {

// Activations that are plain tensor functions of kiln:: (same signature as F.*).
using ::kiln::celu;
using ::kiln::elu;
using ::kiln::gelu;
using ::kiln::hardsigmoid;
using ::kiln::hardswish;
using ::kiln::hardtanh;
using ::kiln::leaky_relu;
using ::kiln::log_softmax;
using ::kiln::mish;
using ::kiln::one_hot;
using ::kiln::relu;
using ::kiln::relu6;
using ::kiln::selu;
using ::kiln::sigmoid;
using ::kiln::silu;
using ::kiln::softmax;
using ::kiln::softplus;
using ::kiln::tanh;

/// log(sigmoid(x)), computed as min(x, 0) - log1p(exp(-|x|)) (no overflow for large |x|).
Tensor logsigmoid(const Tensor& x);
/// x where |x| > lambd, else 0 (lambd >= 0).
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
/// x - lambd where x > lambd, x + lambd where x < -lambd, else 0 (lambd >= 0).
Tensor softshrink(const Tensor& x, double lambd = 0.5);
/// x - tanh(x).
Tensor tanhshrink(const Tensor& x);
/// x where x > threshold, else value.
Tensor threshold(const Tensor& x, double threshold, double value);
/// Randomized leaky ReLU: in training the negative slope of each element is drawn uniformly
/// from [lower, upper]; in evaluation it is (lower + upper) / 2.
Tensor rrelu(const Tensor& x, double lower = 1.0 / 8, double upper = 1.0 / 3, bool training = false);

/// max(0, x) + weight * min(0, x); weight [1] or [C] with x [N, C, *] (or [C] unbatched).
Tensor prelu(const Tensor& x, const Tensor& weight);
/// a * sigmoid(b) where a, b are the halves of x along dim (its size must be even).
Tensor glu(const Tensor& x, int64_t dim = -1);

/// In training, zeroes each element with probability p and scales the rest by 1 / (1 - p);
/// returns x unchanged when training is false or p is 0. p in [0, 1]; x floating, any shape.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
/// Channel dropout (F.dropout1d/2d/3d): zeroes whole channels of [N, C, *sp] or [C, *sp]
/// (one spatial dim for 1d, two for 2d, three for 3d), scaling the rest by 1 / (1 - p).
Tensor dropout1d(const Tensor& x, double p = 0.5, bool training = true);
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);
Tensor dropout3d(const Tensor& x, double p = 0.5, bool training = true);
/// SELU-preserving dropout: dropped elements take SELU's negative saturation value and the
/// result is rescaled to keep zero mean and unit variance. As PyTorch, training defaults to false.
Tensor alpha_dropout(const Tensor& x, double p = 0.5, bool training = false);
/// alpha_dropout with one draw per channel of x [N, C, *] (dim >= 2).
Tensor feature_alpha_dropout(const Tensor& x, double p = 0.5, bool training = false);

/// Looks up rows of weight [num_embeddings, embedding_dim] for integer indices [*]:
/// -> [*, embedding_dim]. padding_idx's row gets no gradient (< 0 counts from the end);
/// with max_norm, looked-up rows whose norm_type-norm exceeds it are first rescaled in place.
Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx = {},
                 std::optional<double> max_norm = {}, double norm_type = 2.0);

/// y = x1ᵀ W x2 + b: x1 [*, in1], x2 [*, in2], weight [out, in1, in2], bias [out] -> [*, out].
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias = {});

}  // namespace kiln::nn::functional
