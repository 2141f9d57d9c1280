#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Remakes the ResNet page's model and reference (examples/web/resnet): trains the ResNet on
# Fashion-MNIST with Kiln (web_resnet_train, about 3 epochs, a few minutes on 2 cores), exports it
# to model.onnx, then writes reference.json with web_resnet_reference (the generated code's class
# probabilities of the 16 sample images). Run from the repository root after `make build`.
#   scripts/gen_web_resnet.sh [--epochs N]
set -euo pipefail
cd "$(dirname "$0")/.."
demo=examples/web/resnet
cmake --build build/release --target web_resnet_train
./build/release/examples/web/web_resnet_train "$demo/model.onnx.tmp" "$@"
mv "$demo/model.onnx.tmp" "$demo/model.onnx"
cmake --build build/release --target web_resnet_reference
./build/release/examples/web/web_resnet_reference examples/web/fashion-mnist/samples.bin > "$demo/reference.json.tmp"
mv "$demo/reference.json.tmp" "$demo/reference.json"
echo "wrote $demo/model.onnx and $demo/reference.json"
