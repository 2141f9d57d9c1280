// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The file helpers of kiln::store live in core (core/file_util.h, built into kiln::core) so that
// layers below the store library (the CPU backend's compiled-programs cache) may use them.
#include "core/file_util.h"
