// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Linear algebra (kiln::linalg).
#include "kiln/tensor.h"
