#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes the ONNX models of the micro target's tests and example (docs/micro.md).

  tests/micro/models/{conv_net,mlp,depthwise}.onnx   small graphs with seeded random weights that
      cover the micro kernels (conv with padding/stride/groups/dilation, BN, pools, Gemm, MatMul,
      broadcast Add/Sub/Mul/Div, activations, Softmax, Reshape/Transpose/Concat)
  examples/micro/fashion_micro.onnx   a small Fashion-MNIST CNN (conv8-BN-ReLU-pool,
      conv16-BN-ReLU-pool, linear 784->10; ~9k parameters) trained here with PyTorch for two
      epochs, written with onnx.helper (no exporter), and examples/micro/test_images.h, the first
      test images with their labels.

Needs numpy and onnx (pip install onnx); torch only for the Fashion-MNIST model (--no-train
skips it). The outputs are checked in; rerun after changing a model.
"""
import argparse
import gzip
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSET = 13


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="gen_micro_models")
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)
    print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")


def conv_net(rng):
    """Conv(pad)-BN-Relu-MaxPool, Conv(stride 2, no bias)-Clip(0,6), AvgPool(pad), GAP, Gemm, Softmax."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.3
    inits = [
        init("w1", r(8, 3, 3, 3)), init("b1", r(8)),
        init("g1", 1 + 0.1 * r(8)), init("be1", r(8)), init("m1", r(8)), init("v1", 0.5 + np.abs(r(8))),
        init("w2", r(12, 8, 3, 3)),
        init("lo", np.array(0, np.float32)), init("hi", np.array(6, np.float32)),
        init("fw", r(5, 12)), init("fb", r(5)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g1", "be1", "m1", "v1"], ["n1"], epsilon=1e-3),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
        helper.make_node("AveragePool", ["r2"], ["p2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("GlobalAveragePool", ["p2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    g = helper.make_graph(nodes, "conv_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    return g


def mlp(rng):
    """MatMul+Add, Tanh, Gemm(alpha, beta, transB), Sigmoid, broadcast Mul/Sub/Div, Reshape, Transpose,
    Softmax, Concat with a constant, LeakyRelu; two outputs."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.4
    inits = [
        init("w1", r(20, 16)), init("b1", r(16)),
        init("w2", r(16, 16)), init("c2", r(1, 16)),
        init("s", r(1, 16)), init("t", np.array(0.25, np.float32)), init("d", 1.5 + np.abs(r(4, 1, 1))),
        numpy_helper.from_array(np.array([2, 4, 4], np.int64), "shape"),
        init("k", r(2, 4, 2)),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"]),
        helper.make_node("Add", ["h1", "b1"], ["a1"]),
        helper.make_node("Tanh", ["a1"], ["t1"]),
        helper.make_node("Gemm", ["t1", "w2", "c2"], ["h2"], alpha=0.5, beta=2.0, transB=1),
        helper.make_node("Sigmoid", ["h2"], ["s2"]),
        helper.make_node("Mul", ["s2", "s"], ["m2"]),
        helper.make_node("Sub", ["m2", "t"], ["u2"]),
        helper.make_node("Reshape", ["u2", "shape"], ["r3"]),
        helper.make_node("Transpose", ["r3"], ["q3"], perm=[1, 0, 2]),
        helper.make_node("Div", ["q3", "d"], ["v3"]),
        helper.make_node("Softmax", ["v3"], ["y"], axis=1),
        helper.make_node("Concat", ["r3", "k"], ["c4"], axis=2),
        helper.make_node("LeakyRelu", ["c4"], ["z"], alpha=0.2),
    ]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 20])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 2, 4]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4, 6])], inits)
    return g


def depthwise(rng):
    """Depthwise 3x3 (groups = C) + Clip, pointwise 1x1 + BN, residual Add of two run-time values,
    grouped dilated conv with stride 2 and asymmetric pads, LeakyRelu, MaxPool (ceil_mode),
    Exp, Reshape, MatMul by a run-time transpose."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.3
    inits = [
        init("dw", r(8, 1, 3, 3)), init("db", r(8)),
        init("lo", np.array(0, np.float32)), init("hi", np.array(6, np.float32)),
        init("pw", r(8, 8, 1, 1)),
        init("g", 1 + 0.1 * r(8)), init("be", r(8)), init("m", r(8)), init("v", 0.5 + np.abs(r(8))),
        init("gw", r(8, 4, 3, 3)), init("gb", r(8)),
        numpy_helper.from_array(np.array([1, 8, 12], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "dw", "db"], ["d1"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Clip", ["d1", "lo", "hi"], ["d2"]),
        helper.make_node("Conv", ["d2", "pw"], ["p1"]),
        helper.make_node("BatchNormalization", ["p1", "g", "be", "m", "v"], ["p2"]),
        helper.make_node("Add", ["p2", "x"], ["s1"]),
        helper.make_node("Conv", ["s1", "gw", "gb"], ["c1"], pads=[2, 1, 1, 2], strides=[2, 2], dilations=[2, 1],
                         group=2),
        helper.make_node("LeakyRelu", ["c1"], ["l1"], alpha=0.1),
        helper.make_node("MaxPool", ["l1"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("Exp", ["mp"], ["e1"]),
        helper.make_node("Reshape", ["e1", "shape"], ["f1"]),
        helper.make_node("Transpose", ["f1"], ["ft"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["f1", "ft"], ["y"]),
    ]
    g = helper.make_graph(nodes, "depthwise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8])], inits)
    return g


def refused():
    """Models the generator must refuse: a symbolic batch dim (fixed only with --dim), and ops the
    micro target does not run (Sin, TopK)."""
    w = numpy_helper.from_array(np.array([0.5, -1.0, 2.0, 0.25], np.float32), "w")
    dyn = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "w"], ["y"])], "dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [w])
    k = numpy_helper.from_array(np.array([2], np.int64), "k")
    bad = helper.make_graph(
        [helper.make_node("Sin", ["x"], ["y"], name="sine"),
         helper.make_node("TopK", ["x", "k"], ["z", "zi"], name="top")], "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 2])], [k])
    return dyn, bad


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion(out_dir):
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    torch.set_num_threads(2)
    src = "/usr/share/datasets/fashion-mnist"
    xtr = torch.tensor(read_idx(f"{src}/train-images-idx3-ubyte.gz"), dtype=torch.float32).unsqueeze(1) / 255
    ytr = torch.tensor(read_idx(f"{src}/train-labels-idx1-ubyte.gz"), dtype=torch.long)
    xte_u8 = read_idx(f"{src}/t10k-images-idx3-ubyte.gz")
    xte = torch.tensor(xte_u8, dtype=torch.float32).unsqueeze(1) / 255
    yte = read_idx(f"{src}/t10k-labels-idx1-ubyte.gz")
    mean, std = 0.2860, 0.3530
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for epoch in range(2):
        net.train()
        perm = torch.randperm(len(xtr))
        for i in range(0, len(xtr), 128):
            idx = perm[i:i + 128]
            loss = nn.functional.cross_entropy(net((xtr[idx] - mean) / std), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        acc = (net((xte - mean) / std).argmax(1).numpy() == yte).mean()
    print(f"fashion-mnist test accuracy {acc:.4f}")
    sd = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    inits = [init("mean", np.array(mean, np.float32)), init("inv_std", np.array(1 / std, np.float32))]
    nodes = [helper.make_node("Sub", ["image", "mean"], ["c"]), helper.make_node("Mul", ["c", "inv_std"], ["h0"])]
    h = "h0"
    for blk, (ci, bi) in enumerate([(0, 1), (4, 5)]):
        p = f"b{blk}"
        inits += [init(f"{p}.w", sd[f"{ci}.weight"]), init(f"{p}.b", sd[f"{ci}.bias"]),
                  init(f"{p}.g", sd[f"{bi}.weight"]), init(f"{p}.be", sd[f"{bi}.bias"]),
                  init(f"{p}.m", sd[f"{bi}.running_mean"]), init(f"{p}.v", sd[f"{bi}.running_var"])]
        nodes += [helper.make_node("Conv", [h, f"{p}.w", f"{p}.b"], [f"{p}.c"], pads=[1, 1, 1, 1]),
                  helper.make_node("BatchNormalization", [f"{p}.c", f"{p}.g", f"{p}.be", f"{p}.m", f"{p}.v"],
                                   [f"{p}.n"]),
                  helper.make_node("Relu", [f"{p}.n"], [f"{p}.r"]),
                  helper.make_node("MaxPool", [f"{p}.r"], [f"{p}.p"], kernel_shape=[2, 2], strides=[2, 2])]
        h = f"{p}.p"
    inits += [init("fc.w", sd["9.weight"]), init("fc.b", sd["9.bias"])]
    nodes += [helper.make_node("Flatten", [h], ["flat"]),
              helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1)]
    g = helper.make_graph(nodes, "fashion_micro",
                          [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 28, 28])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    save(g, os.path.join(out_dir, "fashion_micro.onnx"))
    # The first test images (uint8) with their labels, for the example.
    n = 4
    lines = ["// Generated by scripts/gen_micro_models.py: the first Fashion-MNIST test images (uint8, 28x28).",
             "// clang-format off", "#pragma once", "#include <stdint.h>", f"static const int kTestImages = {n};",
             "static const int kTestLabels[" + str(n) + "] = {" + ", ".join(str(int(v)) for v in yte[:n]) + "};",
             f"static const uint8_t kTestPixels[{n}][784] = {{"]
    for i in range(n):
        flat = xte_u8[i].reshape(-1)
        lines.append("    {" + ",".join(str(int(v)) for v in flat) + "},")
    lines.append("};")
    with open(os.path.join(out_dir, "test_images.h"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-train", action="store_true", help="skip the Fashion-MNIST model (needs torch)")
    args = ap.parse_args()
    rng = np.random.default_rng(35)
    tests = os.path.join(ROOT, "tests", "micro", "models")
    save(conv_net(rng), os.path.join(tests, "conv_net.onnx"))
    save(mlp(rng), os.path.join(tests, "mlp.onnx"))
    save(depthwise(rng), os.path.join(tests, "depthwise.onnx"))
    dyn, bad = refused()
    save(dyn, os.path.join(tests, "dynamic.onnx"))
    save(bad, os.path.join(tests, "unsupported.onnx"))
    if not args.no_train:
        fashion(os.path.join(ROOT, "examples", "micro"))


if __name__ == "__main__":
    main()
