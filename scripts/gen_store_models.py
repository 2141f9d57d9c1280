#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes the PyTorch models of tests/unit/test_store_load.cpp to tests/fixtures/store/:

  resnet_block.safetensors / .pt   state_dict of a ResNet basic block with a downsample path
                                   (conv-bn-relu-conv-bn + conv1x1-bn, stride 2, no conv bias),
                                   run in train mode a few times so the running stats are not
                                   trivial, then put in eval mode
  resnet_block_io.safetensors      "input" [2, 4, 8, 8] and PyTorch's eval-mode "output"
  transformer_layer.safetensors / .pt
                                   nn.TransformerEncoderLayer(d_model=16, nhead=4,
                                   dim_feedforward=32, batch_first=True, dropout=0)
  transformer_layer_io.safetensors "input" [2, 5, 16] and "output"

The .pt files are torch.save(state_dict) (the zip format). The test builds the same modules with
kiln::nn, loads each state dict strictly with no remapping, and compares the outputs.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pip_ensure import ensure  # noqa: E402

ensure("safetensors", ["safetensors"])

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "store")


class BasicBlock(torch.nn.Module):
    def __init__(self, cin=4, cout=8, stride=2):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.downsample = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False),
                                              torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.downsample(x))


def save(name, model, x):
    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, os.path.join(OUT, f"{name}.safetensors"))
    torch.save(model.state_dict(), os.path.join(OUT, f"{name}.pt"))
    with torch.no_grad():
        y = model(x)
    save_file({"input": x.contiguous(), "output": y.contiguous()}, os.path.join(OUT, f"{name}_io.safetensors"))
    print(f"{name}: {len(sd)} tensors, output {tuple(y.shape)}")


def main():
    os.makedirs(OUT, exist_ok=True)

    torch.manual_seed(0)
    block = BasicBlock()
    # Non-trivial affine parameters and running statistics.
    with torch.no_grad():
        for bn in (block.bn1, block.bn2, block.downsample[1]):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
    block.train()
    with torch.no_grad():
        for _ in range(3):
            block(torch.randn(4, 4, 8, 8) * 2 + 0.5)
    block.eval()
    save("resnet_block", block, torch.randn(2, 4, 8, 8))

    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True, dropout=0.0)
    with torch.no_grad():
        for n in (layer.norm1, layer.norm2):
            n.weight.uniform_(0.5, 1.5)
            n.bias.uniform_(-0.2, 0.2)
        layer.self_attn.in_proj_bias.uniform_(-0.1, 0.1)
        layer.self_attn.out_proj.bias.uniform_(-0.1, 0.1)
    layer.eval()
    save("transformer_layer", layer, torch.randn(2, 5, 16))


if __name__ == "__main__":
    main()
