// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// kiln::train: the Learner, metrics, renderers (dashboard, plain lines, CSV and PNG chart).
#include "kiln/train/evaluator.h"
#include "kiln/train/learner.h"
#include "kiln/train/metrics.h"
#include "kiln/train/renderer.h"
#include "kiln/train/text_metrics.h"
