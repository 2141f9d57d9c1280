#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Exports small real-architecture models with PyTorch to ONNX and runs them with ONNX Runtime.

Writes tests/fixtures/onnx/<name>/model.onnx plus, per test set k, input_<i>.pb / output_<i>.pb
(TensorProto files) under <name>/set_<k>/. Models with dynamic axes get two sets with different
batch sizes / sequence lengths. Random weights, fixed seeds; the outputs are ONNX Runtime's.

Models: resnet (conv/bn/relu, basic blocks, strided downsample, global pool, fc), mobilenet
(MobileNetV2: depthwise convs, ReLU6, inverted residuals), bert (token + position embeddings,
multi-head self-attention, GELU, LayerNorm; dynamic batch and sequence length, attention mask),
lstm (2-layer LSTM + linear head; dynamic batch and sequence length), unet (encoder/decoder with
max pools, transposed convs, bilinear and nearest resizes, skip concats).

Usage: python3 scripts/onnx_export_models.py [out_dir]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pip_ensure import ensure  # noqa: E402

ensure("onnx", ["onnx"])
ensure("onnxruntime", ["onnxruntime"])

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import numpy_helper  # noqa: E402

OPSET = 17


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet(nn.Module):
    def __init__(self, width=16, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = BasicBlock(width, width, 1)
        self.layer2 = BasicBlock(width, 2 * width, 2)
        self.layer3 = BasicBlock(2 * width, 4 * width, 2)
        self.fc = nn.Linear(4 * width, classes)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = self.layer3(self.layer2(self.layer1(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hid = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.ReLU6()]
        layers += [
            nn.Conv2d(hid, hid, 3, stride, 1, groups=hid, bias=False),
            nn.BatchNorm2d(hid),
            nn.ReLU6(),
            nn.Conv2d(hid, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        cfg = [(1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2), (6, 24, 1, 1)]
        layers = [nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6()]
        cin = 8
        for t, c, n, s in cfg:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.dropout = nn.Dropout(0.2)
        self.classifier = nn.Linear(64, classes)

    def forward(self, x):
        x = self.features(x)
        x = x.mean([2, 3])
        return self.classifier(self.dropout(x))


class Bert(nn.Module):
    def __init__(self, vocab=100, d=32, heads=4, layers=2, ff=64, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.ln = nn.LayerNorm(d)
        self.heads = heads
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(
                nn.ModuleDict(
                    dict(
                        qkv=nn.Linear(d, 3 * d),
                        proj=nn.Linear(d, d),
                        ln1=nn.LayerNorm(d),
                        ff1=nn.Linear(d, ff),
                        ff2=nn.Linear(ff, d),
                        ln2=nn.LayerNorm(d),
                    )
                )
            )
        self.pool = nn.Linear(d, d)

    def forward(self, ids, mask):
        b, s = ids.shape
        pos = torch.arange(s, device=ids.device).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos))
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
        d = x.shape[-1]
        hd = d // self.heads
        for blk in self.blocks:
            q, k, v = blk["qkv"](x).split(d, dim=-1)
            q = q.reshape(b, s, self.heads, hd).transpose(1, 2)
            k = k.reshape(b, s, self.heads, hd).transpose(1, 2)
            v = v.reshape(b, s, self.heads, hd).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-1, -2) / (hd**0.5) + bias, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, d)
            x = blk["ln1"](x + blk["proj"](y))
            x = blk["ln2"](x + blk["ff2"](F.gelu(blk["ff1"](x))))
        pooled = torch.tanh(self.pool(x[:, 0]))
        return x, pooled


class LSTMNet(nn.Module):
    def __init__(self, inp=12, hid=24, classes=5):
        super().__init__()
        self.lstm = nn.LSTM(inp, hid, num_layers=2, batch_first=True)
        self.head = nn.Linear(hid, classes)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return self.head(y), h


class UNet(nn.Module):
    def __init__(self, cin=3, w=8, cout=2):
        super().__init__()

        def block(a, b):
            return nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(),
                                 nn.Conv2d(b, b, 3, padding=1), nn.ReLU())

        self.enc1 = block(cin, w)
        self.enc2 = block(w, 2 * w)
        self.mid = block(2 * w, 4 * w)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = block(4 * w, 2 * w)
        self.up1 = nn.ConvTranspose2d(2 * w, w, 3, stride=2, padding=1, output_padding=1)
        self.dec1 = block(2 * w, w)
        self.side = nn.Conv2d(4 * w, w, 1)
        self.out = nn.Conv2d(2 * w, cout, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        side = F.interpolate(self.side(m), scale_factor=4, mode="bilinear", align_corners=False)
        d1n = F.interpolate(F.interpolate(d1, scale_factor=0.5, mode="nearest"), scale_factor=2, mode="nearest")
        return self.out(torch.cat([d1n, side], 1))


def randomize_bn(model, g):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)


def write_pb(path, arr):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(arr)).SerializeToString())


def export(name, model, args, input_names, output_names, dynamic_axes, test_sets, out_dir, keep_bn=False):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    model.eval()
    torch.onnx.export(model, args, path, input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes, opset_version=OPSET, dynamo=False, do_constant_folding=True,
                      # keep_bn: BatchNormalization nodes stay (eval semantics) instead of being folded into Conv
                      training=torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL)
    onnx.checker.check_model(onnx.load(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    for k, inputs in enumerate(test_sets):
        sd = os.path.join(d, "set_%d" % k)
        os.makedirs(sd, exist_ok=True)
        feeds = {n: t.numpy() for n, t in zip(input_names, inputs)}
        outs = sess.run(None, feeds)
        with torch.no_grad():
            ref = model(*inputs)
        ref = ref if isinstance(ref, tuple) else (ref,)
        for o, r in zip(outs, ref):
            assert np.abs(o - r.numpy()).max() < 1e-4, name
        for i, n in enumerate(input_names):
            write_pb(os.path.join(sd, "input_%d.pb" % i), feeds[n])
        for i, o in enumerate(outs):
            write_pb(os.path.join(sd, "output_%d.pb" % i), o)
    print("%-9s %7d bytes  ops: %s" % (name, os.path.getsize(path), " ".join(ops)))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "onnx")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)

    m = ResNet()
    randomize_bn(m, g)
    export("resnet", m, (torch.randn(1, 3, 32, 32),), ["x"], ["logits"], {"x": {0: "batch"}, "logits": {0: "batch"}},
           [(torch.randn(1, 3, 32, 32, generator=g),), (torch.randn(3, 3, 32, 32, generator=g),)], out_dir, keep_bn=True)

    m = MobileNetV2()
    randomize_bn(m, g)
    export("mobilenet", m, (torch.randn(1, 3, 32, 32),), ["x"], ["logits"],
           {"x": {0: "batch"}, "logits": {0: "batch"}},
           [(torch.randn(1, 3, 32, 32, generator=g),), (torch.randn(2, 3, 32, 32, generator=g),)], out_dir)

    m = Bert()

    def bert_inputs(b, s):
        ids = torch.randint(0, 100, (b, s), generator=g)
        mask = torch.ones(b, s, dtype=torch.int64)
        mask[-1, s - 2:] = 0
        return ids, mask

    export("bert", m, bert_inputs(2, 8), ["input_ids", "attention_mask"], ["hidden", "pooled"],
           {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "hidden": {0: "batch", 1: "seq"}, "pooled": {0: "batch"}},
           [bert_inputs(1, 7), bert_inputs(3, 16)], out_dir)

    m = LSTMNet()
    export("lstm", m, (torch.randn(2, 6, 12),), ["x"], ["y", "h"],
           {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}, "h": {1: "batch"}},
           [(torch.randn(1, 5, 12, generator=g),), (torch.randn(4, 11, 12, generator=g),)], out_dir)

    m = UNet()
    randomize_bn(m, g)
    export("unet", m, (torch.randn(1, 3, 32, 32),), ["x"], ["y"], {"x": {0: "batch"}, "y": {0: "batch"}},
           [(torch.randn(1, 3, 32, 32, generator=g),), (torch.randn(2, 3, 32, 32, generator=g),)], out_dir, keep_bn=True)


if __name__ == "__main__":
    main()
