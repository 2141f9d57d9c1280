// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The nn library: modules, layers, losses, initialisers (`#include <kiln/nn.h>`).
#include "kiln/nn/activation.h"
#include "kiln/nn/decoder_only.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/fused.h"
#include "kiln/nn/init.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/module.h"
#include "kiln/nn/norm_layers.h"
#include "kiln/nn/recurrent.h"
#include "kiln/nn/transformer.h"
#include "kiln/optim.h"
