// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// scaled_dot_product_attention.
#include "kiln/tensor.h"
