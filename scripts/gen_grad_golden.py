#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Regenerates the autodiff reference data tests/golden/grad_<case>.bin from PyTorch autograd.

Each case is a small graph (an MLP, a conv net, an attention block, layer norm, a gradient
penalty step and a Hessian-vector product) run in float64. Inputs and parameters are not
stored: both sides generate them from a seed with the same integer hash (splitmix64), so the
values are bit-identical. The files hold the seeds, integer labels, and PyTorch's loss and
gradients; tests/unit/test_autodiff_system.cpp runs the same graphs with Kiln and compares.

Usage: python3 scripts/gen_grad_golden.py [--out DIR]
Installs torch and numpy with pip when they are missing.

File format (little-endian):
  "KGRAD1\\n", u32 nentries, then per entry:
    str name, u8 kind, u8 ndim, i64 shape[ndim], then by kind:
      0 generated f64 input: u64 seed, f64 scale, f64 offset
        (value i = offset + scale * (2 u_i - 1), u_i = (splitmix64(seed + (i + 1) * GOLDEN) >> 11) * 2^-53)
      1 int64 values: i64 values[numel]
      2 expected f64 values: f64 values[numel]
      3 expected f64 sample (large tensors): i64 step, f64 sum, f64 sum of squares,
        f64 values[ceil(numel / step)] (flat indices 0, step, 2 step, ...)
  str: u32 length + UTF-8 bytes.
"""
import argparse
import os
import struct
import subprocess
import sys


from pip_ensure import ensure as _ensure  # noqa: E402


_ensure("numpy", ["numpy"])
_ensure("torch", ["torch"])

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)

GOLDEN = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1
SAMPLE_LIMIT = 1024  # tensors with more elements are stored as a strided sample


def splitmix_uniform(seed, n):
    """u_i in [0, 1), i < n: the same integer hash as gen_uniform in the C++ test."""
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(seed) + i * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)


class Case:
    def __init__(self, name):
        self.name = name
        self.entries = []  # (name, kind, shape, payload bytes)

    def gen(self, name, shape, seed, scale=1.0, offset=0.0, requires_grad=True):
        n = int(np.prod(shape)) if shape else 1
        v = offset + scale * (2.0 * splitmix_uniform(seed, n) - 1.0)
        self.entries.append((name, 0, list(shape), struct.pack("<Qdd", seed, scale, offset)))
        t = torch.tensor(v, dtype=torch.float64).reshape(shape)
        return t.requires_grad_(requires_grad)

    def ints(self, name, values, shape):
        self.entries.append((name, 1, list(shape), struct.pack(f"<{len(values)}q", *values)))
        return torch.tensor(values, dtype=torch.int64).reshape(shape)

    def expect(self, name, t):
        t = t.detach().to(torch.float64).contiguous()
        flat = t.reshape(-1).numpy()
        shape = list(t.shape)
        if flat.size <= SAMPLE_LIMIT:
            self.entries.append((name, 2, shape, flat.astype("<f8").tobytes()))
        else:
            step = -(-flat.size // SAMPLE_LIMIT)
            head = struct.pack("<qdd", step, float(flat.sum()), float((flat * flat).sum()))
            self.entries.append((name, 3, shape, head + flat[::step].astype("<f8").tobytes()))

    def write(self, out_dir):
        def s(x):
            b = x.encode()
            return struct.pack("<I", len(b)) + b

        buf = bytearray(b"KGRAD1\n")
        buf += struct.pack("<I", len(self.entries))
        for name, kind, shape, payload in self.entries:
            buf += s(name) + struct.pack("<BB", kind, len(shape))
            buf += struct.pack(f"<{len(shape)}q", *shape) + payload
        path = os.path.join(out_dir, f"grad_{self.name}.bin")
        with open(path, "wb") as f:
            f.write(buf)
        return path, len(buf)


def expect_grads(c, loss, params):
    c.expect("loss", loss)
    grads = torch.autograd.grad(loss, [p for _, p in params])
    for (name, _), g in zip(params, grads):
        c.expect("grad/" + name, g)


def cross_entropy(logits, labels):
    # What the C++ side computes: -mean(log_softmax(logits)[i, labels[i]]).
    ref = F.cross_entropy(logits, labels)
    ours = -logits.log_softmax(-1).gather(1, labels.unsqueeze(1)).mean()
    assert torch.allclose(ref, ours)
    return ours


def mlp():
    c = Case("mlp")
    x = c.gen("x", [8, 784], 11, requires_grad=False)
    y = c.ints("y", [3, 1, 4, 1, 5, 9, 2, 6], [8])
    w1 = c.gen("W1", [64, 784], 12, scale=784 ** -0.5)
    b1 = c.gen("b1", [64], 13, scale=0.1)
    w2 = c.gen("W2", [10, 64], 14, scale=64 ** -0.5)
    b2 = c.gen("b2", [10], 15, scale=0.1)
    logits = F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)
    expect_grads(c, cross_entropy(logits, y), [("W1", w1), ("b1", b1), ("W2", w2), ("b2", b2)])
    return c


def convnet():
    c = Case("convnet")
    x = c.gen("x", [2, 1, 12, 12], 21)
    y = c.ints("y", [2, 0], [2])
    cw = c.gen("conv_w", [4, 1, 3, 3], 22, scale=1 / 3)
    cb = c.gen("conv_b", [4], 23, scale=0.1)
    lw = c.gen("fc_w", [3, 100], 24, scale=0.1)
    lb = c.gen("fc_b", [3], 25, scale=0.1)
    h = F.max_pool2d(F.relu(F.conv2d(x, cw, cb)), 2)
    logits = F.linear(h.flatten(1), lw, lb)
    expect_grads(c, cross_entropy(logits, y), [("x", x), ("conv_w", cw), ("conv_b", cb), ("fc_w", lw), ("fc_b", lb)])
    return c


def attention():
    c = Case("attention")
    B, L, D, H = 2, 6, 16, 2
    x = c.gen("x", [B, L, D], 31)
    wq = c.gen("Wq", [D, D], 32, scale=D ** -0.5)
    wk = c.gen("Wk", [D, D], 33, scale=D ** -0.5)
    wv = c.gen("Wv", [D, D], 34, scale=D ** -0.5)
    wo = c.gen("Wo", [D, D], 35, scale=D ** -0.5)
    bo = c.gen("bo", [D], 36, scale=0.1)
    t = c.gen("target", [B, L, D], 37, requires_grad=False)

    def heads(z):
        return z.reshape(B, L, H, D // H).transpose(1, 2)

    a = F.scaled_dot_product_attention(heads(F.linear(x, wq)), heads(F.linear(x, wk)), heads(F.linear(x, wv)),
                                       is_causal=True)
    out = F.linear(a.transpose(1, 2).reshape(B, L, D), wo, bo)
    loss = (out * t).sum()
    expect_grads(c, loss, [("x", x), ("Wq", wq), ("Wk", wk), ("Wv", wv), ("Wo", wo), ("bo", bo)])
    return c


def layer_norm():
    c = Case("layer_norm")
    x = c.gen("x", [4, 3, 10], 41, scale=2.0, offset=0.5)
    w = c.gen("w", [3, 10], 42, offset=1.0, scale=0.5)
    b = c.gen("b", [3, 10], 43, scale=0.5)
    t = c.gen("target", [4, 3, 10], 44, requires_grad=False)
    loss = (F.layer_norm(x, [3, 10], w, b) * t).sum()
    expect_grads(c, loss, [("x", x), ("w", w), ("b", b)])
    return c


def gradient_penalty():
    # WGAN-GP-like step: loss = mean(D(x)) + lambda * sum(|dD/dx|^2); backward through the
    # input gradient (second order).
    c = Case("gradient_penalty")
    x = c.gen("x", [4, 6], 51)
    w1 = c.gen("W1", [8, 6], 52, scale=0.5)
    b1 = c.gen("b1", [8], 53, scale=0.1)
    w2 = c.gen("W2", [1, 8], 54, scale=0.5)
    b2 = c.gen("b2", [1], 55, scale=0.1)
    d = F.linear(torch.tanh(F.linear(x, w1, b1)), w2, b2).mean()
    (gx,) = torch.autograd.grad(d, [x], create_graph=True)
    loss = d + 0.5 * (gx * gx).sum()
    c.expect("grad_x", gx)
    expect_grads(c, loss, [("x", x), ("W1", w1), ("b1", b1), ("W2", w2), ("b2", b2)])
    return c


def hvp():
    # Hessian-vector product of a cross-entropy MLP loss with respect to W1, along v.
    c = Case("hvp")
    x = c.gen("x", [5, 4], 61, requires_grad=False)
    y = c.ints("y", [0, 2, 1, 2, 0], [5])
    w1 = c.gen("W1", [6, 4], 62, scale=0.7)
    w2 = c.gen("W2", [3, 6], 63, scale=0.7)
    v = c.gen("v", [6, 4], 64, requires_grad=False)
    loss = cross_entropy(F.linear(torch.tanh(F.linear(x, w1)), w2), y)
    (g,) = torch.autograd.grad(loss, [w1], create_graph=True)
    (hv,) = torch.autograd.grad((g * v).sum(), [w1])
    c.expect("loss", loss)
    c.expect("grad/W1", g)
    c.expect("hvp/W1", hv)
    return c


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "golden"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    total = 0
    for make in (mlp, convnet, attention, layer_norm, gradient_penalty, hvp):
        path, n = make().write(a.out)
        total += n
        print(f"{os.path.relpath(path)}: {n} bytes")
    print(f"total {total} bytes (torch {torch.__version__})")


if __name__ == "__main__":
    main()
