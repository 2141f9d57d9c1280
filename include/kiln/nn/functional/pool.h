// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Pooling, interpolation, grid sampling and pixel shuffle.
#include "kiln/tensor.h"
