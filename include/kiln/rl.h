// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// kiln::rl: environments with Gymnasium's dynamics, vectorised environments, wrappers, replay
// and rollout buffers, schedules and action distributions over Kiln tensors (library kiln::rl,
// part of the umbrella kiln::kiln). docs/rl.md.
#include "kiln/rl/buffers.h"
#include "kiln/rl/distributions.h"
#include "kiln/rl/env.h"
#include "kiln/rl/envs.h"
#include "kiln/rl/schedule.h"
#include "kiln/rl/vector_env.h"
#include "kiln/rl/wrappers.h"
