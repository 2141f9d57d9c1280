// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Matrix products: matmul, mm, bmm, addmm, baddbmm, linear, dot, outer, einsum.
#include "kiln/tensor.h"
