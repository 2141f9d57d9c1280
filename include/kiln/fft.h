// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Discrete Fourier transforms (kiln::fft).
#include "kiln/tensor.h"
