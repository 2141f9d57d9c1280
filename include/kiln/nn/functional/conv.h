// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Convolutions: conv1d/2d/3d, conv_transpose1d/2d/3d, unfold, fold.
#include "kiln/tensor.h"
