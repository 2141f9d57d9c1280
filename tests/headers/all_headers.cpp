// SPDX-License-Identifier: MIT OR Apache-2.0
// Every public header, included together in one translation unit that is compiled with
// -Wall -Wextra -Wpedantic -Werror (tests/headers/CMakeLists.txt): users build with these
// warnings on, so Kiln's headers must not raise any.
#include <kiln/autodiff.h>
#include <kiln/data.h>
#include <kiln/data/batch.h>
#include <kiln/data/dataset.h>
#include <kiln/data/image.h>
#include <kiln/data/loader.h>
#include <kiln/data/sources.h>
#include <kiln/device.h>
#include <kiln/dist.h>
#include <kiln/dtype.h>
#include <kiln/error.h>
#include <kiln/fft.h>
#include <kiln/half.h>
#include <kiln/kernel.h>
#include <kiln/kiln.h>
#include <kiln/linalg.h>
#include <kiln/matmul.h>
#include <kiln/nn.h>
#include <kiln/nn/activation.h>
#include <kiln/nn/config.h>
#include <kiln/nn/functional.h>
#include <kiln/nn/functional/attention.h>
#include <kiln/nn/functional/common.h>
#include <kiln/nn/functional/conv.h>
#include <kiln/nn/functional/norm.h>
#include <kiln/nn/functional/pool.h>
#include <kiln/nn/init.h>
#include <kiln/nn/layers.h>
#include <kiln/nn/linear.h>
#include <kiln/nn/loss.h>
#include <kiln/nn/module.h>
#include <kiln/nn/norm_layers.h>
#include <kiln/nn/recurrent.h>
#include <kiln/nn/transformer.h>
#include <kiln/onnx.h>
#include <kiln/ops.h>
#include <kiln/optim.h>
#include <kiln/optim/lr_scheduler.h>
#include <kiln/optim/optimizer.h>
#include <kiln/rl.h>
#include <kiln/rl/buffers.h>
#include <kiln/rl/distributions.h>
#include <kiln/rl/env.h>
#include <kiln/rl/envs.h>
#include <kiln/rl/schedule.h>
#include <kiln/rl/vector_env.h>
#include <kiln/rl/wrappers.h>
#include <kiln/scalar.h>
#include <kiln/shape.h>
#include <kiln/small_vector.h>
#include <kiln/store.h>
#include <kiln/tensor.h>
#include <kiln/train.h>
#include <kiln/train/learner.h>
#include <kiln/train/metrics.h>
#include <kiln/train/renderer.h>
#include <kiln/vision.h>
#include <kiln/vision/boxes.h>
#include <kiln/vision/deform.h>
#include <kiln/vision/image.h>
#include <kiln/vision/roi.h>
#include <kiln/vision/transforms.h>

int main() { return 0; }
