// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Normalisation: layer_norm, rms_norm, group_norm, instance_norm, batch_norm, local_response_norm, normalize.
#include "kiln/tensor.h"
