// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The everyday set of Kiln headers.
#include "kiln/autodiff.h"
#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/fft.h"
#include "kiln/linalg.h"
#include "kiln/matmul.h"
#include "kiln/nn/functional.h"
#include "kiln/ops.h"
#include "kiln/scalar.h"
#include "kiln/shape.h"
#include "kiln/tensor.h"
