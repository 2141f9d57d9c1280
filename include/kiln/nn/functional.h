// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The NN functional ops, `kiln::nn::functional` (PyTorch's torch.nn.functional). Shorten it
// with `namespace F = kiln::nn::functional;`.
#include "kiln/nn/functional/activation.h"
#include "kiln/nn/functional/attention.h"
#include "kiln/nn/functional/common.h"
#include "kiln/nn/functional/conv.h"
#include "kiln/nn/functional/distance.h"
#include "kiln/nn/functional/norm.h"
#include "kiln/nn/functional/pool.h"
#include "kiln/nn/functional/sampling.h"
