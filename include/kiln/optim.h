// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Optimizers, gradient clipping / accumulation and learning-rate schedulers
// (`#include <kiln/optim.h>`; docs/optimizers.md).
#include "kiln/optim/lr_scheduler.h"
#include "kiln/optim/optimizer.h"
