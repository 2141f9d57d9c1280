# SPDX-License-Identifier: MIT OR Apache-2.0
"""PyTorch eager side of bench/kiln_bench_fusion.cpp: the same chains, ids prefixed torch_.

    python3 bench/torch_fusion_bench.py [--threads N] [--reps R]
"""
import argparse
import math
import time

import torch


def best_of(reps, f):
    f()
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def gelu_erf(x):
    return x * 0.5 * (torch.erf(x / math.sqrt(2.0)) + 1.0)


def chain5(x):
    return torch.tanh(torch.relu(x * 1.5 + 0.25) - x) * 0.5


def gelu_sin_sum(x):
    return (x * 0.5 * (torch.erf(x * 0.70710678) + 1.0) + torch.sin(x) * 0.1).sum()


def softmax_rows(x):
    r = x.reshape(-1, 1024)
    e = (r - r.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def softmax_grad_rows(x):
    y = x.reshape(-1, 1024)
    return y * (y - (y * y).sum(-1, keepdim=True))


def layernorm_rows(x):
    r = x.reshape(-1, 1024)
    d = r - r.mean(-1, keepdim=True)
    return d * ((d * d).mean(-1, keepdim=True) + 1e-5).rsqrt() * 0.5 + 0.25


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=10)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    for n in (8 << 20, 16 << 20):
        tag = f"{n >> 20}M"
        x = torch.randn(n)
        nbytes = 2 * n * 4
        for name, f in (("gelu_erf", gelu_erf), ("chain5", chain5), ("gelu_sin_sum", gelu_sin_sum), ("softmax_rows", softmax_rows),
                        ("softmax_grad_rows", softmax_grad_rows), ("layernorm_rows", layernorm_rows)):
            t = best_of(a.reps, lambda: f(x))
            print(f"torch_fusion_{name}_{tag}_eager\t{t:.6g}\t{nbytes}\tok")
    print(f"torch_fusion_train_layernorm_8192x1024_eager\t{train_layernorm(8192, a.reps):.6g}\t0\tok")
    conv_res, conv_bn, conv_relu6 = conv_epilogues(a.reps)
    print(f"torch_fusion_epilogue_conv_residual_relu_16x64x28x28_eager\t{conv_res:.6g}\t0\tok")
    print(f"torch_fusion_epilogue_conv_bn_relu_16x64x28x28_eager\t{conv_bn:.6g}\t0\tok")
    print(f"torch_fusion_epilogue_conv_bn_relu6_16x64x28x28_eager\t{conv_relu6:.6g}\t0\tok")


def conv_epilogues(reps):
    """kiln_bench_fusion's convolution epilogues: relu(conv2d(h, w) + h), and a batch norm in eval
    mode with a residual, relu(bn(conv2d(h, w)) + h), and ReLU6 after a batch norm,
    clamp(bn(conv2d(h, w)), 0, 6); [16, 64, 28, 28], no grad."""
    torch.manual_seed(3)
    h = torch.randn(16, 64, 28, 28)
    w = torch.randn(64, 64, 3, 3)
    bn = torch.nn.BatchNorm2d(64)
    bn(torch.randn(16, 64, 28, 28))  # some running statistics
    bn.eval()
    with torch.no_grad():
        res = best_of(reps, lambda: torch.relu(torch.nn.functional.conv2d(h, w, padding=1) + h))
        with_bn = best_of(reps, lambda: torch.relu(bn(torch.nn.functional.conv2d(h, w, padding=1)) + h))
        relu6 = best_of(reps, lambda: torch.clamp(bn(torch.nn.functional.conv2d(h, w, padding=1)), 0, 6))
    return res, with_bn, relu6


def train_layernorm(rows, reps):
    """A layer norm's forward and backward passes, as kiln_bench_fusion's train_layernorm case."""
    torch.manual_seed(4)
    x = torch.randn(rows, 1024, requires_grad=True)
    w = torch.randn(1024, requires_grad=True)
    b = torch.randn(1024, requires_grad=True)
    go = torch.randn(rows, 1024)

    def step():
        x.grad = w.grad = b.grad = None
        y = torch.nn.functional.layer_norm(x, (1024,), w, b)
        (y * go).sum().backward()
        x.grad.sum().item()
        w.grad.sum().item()

    return best_of(reps, step)


if __name__ == "__main__":
    main()
