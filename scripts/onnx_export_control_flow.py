#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes tests/fixtures/onnx/control_flow/: a small model with nested control flow built with
onnx.helper, and test sets holding its inputs and ONNX Runtime's outputs (set_<k>/input_<i>.pb,
output_<i>.pb, as scripts/onnx_export_models.py). Needs onnx, onnxruntime and numpy (not `make test`).

The graph (opset 17), inputs x [n, 4] float, thresh [] float, max_steps [] int64:
  Loop, trip count n = Shape(x)[0] (dynamic) and a condition computed in the body
  (iteration + 1 < max_steps); loop-carried acc [4] and count [1] (with a 0-d count, ONNX Runtime 1.32
  returned it with shape [1] in this graph, though a minimal Loop keeps it 0-d; the fixture
  sidesteps that); scan output s [steps].
  Its body reads the outer x, thresh and weight W, and holds an If (sum(h) > thresh) whose else
  branch holds another If (iteration even?): three levels of subgraphs.
  Then a Scan over x's axis 1 in reverse, state m [n] (running max), scan output on axis 1.
Outputs: acc, count, s, m, y.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "onnx", "control_flow")
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def const(name, arr):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name + "_v"))


def build():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 4)).astype(np.float32) * 0.5

    # Inner If (else branch of the outer If): iteration even -> acc - 0.5 h, else 0.9 acc.
    even_then = helper.make_graph(
        [const("half", np.float32(0.5)), helper.make_node("Mul", ["h", "half"], ["hh"]),
         helper.make_node("Sub", ["acc_in", "hh"], ["acc_even"])],
        "even_then", [], [helper.make_tensor_value_info("acc_even", F, [4])])
    even_else = helper.make_graph(
        [const("decay", np.float32(0.9)), helper.make_node("Mul", ["acc_in", "decay"], ["acc_odd"])],
        "even_else", [], [helper.make_tensor_value_info("acc_odd", F, [4])])
    outer_else = helper.make_graph(
        [const("two", np.int64(2)), const("zero", np.int64(0)), helper.make_node("Mod", ["iter", "two"], ["parity"]),
         helper.make_node("Equal", ["parity", "zero"], ["is_even"]),
         helper.make_node("If", ["is_even"], ["acc_else"], name="if_even", then_branch=even_then,
                          else_branch=even_else)],
        "outer_else", [], [helper.make_tensor_value_info("acc_else", F, [4])])
    outer_then = helper.make_graph(
        [helper.make_node("Tanh", ["h"], ["th"]), helper.make_node("Add", ["acc_in", "th"], ["acc_then"])],
        "outer_then", [], [helper.make_tensor_value_info("acc_then", F, [4])])

    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "iter"], ["row"], axis=0),
         helper.make_node("MatMul", ["row", "W"], ["h"]),
         helper.make_node("ReduceSum", ["h"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "thresh"], ["big"]),
         helper.make_node("If", ["big"], ["acc_out"], name="if_big", then_branch=outer_then, else_branch=outer_else),
         const("one", np.int64(1)), const("one_1", np.ones(1, np.int64)),
         helper.make_node("Add", ["count_in", "one_1"], ["count_out"]),
         helper.make_node("Add", ["iter", "one"], ["next_iter"]),
         helper.make_node("Less", ["next_iter", "max_steps"], ["cond_out"])],
        "loop_body",
        [helper.make_tensor_value_info("iter", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("acc_in", F, [4]), helper.make_tensor_value_info("count_in", I64, [1])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("acc_out", F, [4]),
         helper.make_tensor_value_info("count_out", I64, [1]), helper.make_tensor_value_info("s", F, [])])

    scan_body = helper.make_graph(
        [helper.make_node("Max", ["m_in", "col"], ["m_out"]), const("two_f", np.float32(2.0)),
         helper.make_node("Mul", ["m_out", "two_f"], ["y_step"])],
        "scan_body", [helper.make_tensor_value_info("m_in", F, ["n"]), helper.make_tensor_value_info("col", F, ["n"])],
        [helper.make_tensor_value_info("m_out", F, ["n"]), helper.make_tensor_value_info("y_step", F, ["n"])])

    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"]),
        const("idx0", np.array([0], np.int64)),
        helper.make_node("Gather", ["x_shape", "idx0"], ["n_rows1"], axis=0),
        helper.make_node("Squeeze", ["n_rows1"], ["n_rows"]),
        const("start_cond", np.bool_(True)),
        const("acc0", np.zeros(4, np.float32)),
        const("count0", np.zeros(1, np.int64)),
        helper.make_node("Loop", ["n_rows", "start_cond", "acc0", "count0"], ["acc", "count", "s_steps"], name="rows",
                         body=body),
        helper.make_node("ReduceMin", ["x"], ["m0"], axes=[1], keepdims=0),
        helper.make_node("Scan", ["m0", "x"], ["m", "y"], name="columns", body=scan_body, num_scan_inputs=1,
                         scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1]),
    ]
    graph = helper.make_graph(
        nodes, "control_flow",
        [helper.make_tensor_value_info("x", F, ["n", 4]), helper.make_tensor_value_info("thresh", F, []),
         helper.make_tensor_value_info("max_steps", I64, [])],
        [helper.make_tensor_value_info("acc", F, [4]), helper.make_tensor_value_info("count", I64, [1]),
         helper.make_tensor_value_info("s_steps", F, ["steps"]), helper.make_tensor_value_info("m", F, ["n"]),
         helper.make_tensor_value_info("y", F, ["n", 4])],
        initializer=[numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-fixture")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def write_pb(path, arr):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(arr)).SerializeToString())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else OUT
    os.makedirs(out, exist_ok=True)
    model = build()
    path = os.path.join(out, "model.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(11)
    # set 0: 6 rows, all run; set 1: 9 rows, the body's condition stops it after 5.
    for k, (n, steps) in enumerate([(6, 100), (9, 5)]):
        feeds = {"x": rng.standard_normal((n, 4)).astype(np.float32), "thresh": np.array(0.25, np.float32),
                 "max_steps": np.array(steps, np.int64)}
        outs = sess.run(None, feeds)
        sd = os.path.join(out, "set_%d" % k)
        os.makedirs(sd, exist_ok=True)
        for i, name in enumerate(["x", "thresh", "max_steps"]):
            write_pb(os.path.join(sd, "input_%d.pb" % i), feeds[name])
        for i, o in enumerate(outs):
            write_pb(os.path.join(sd, "output_%d.pb" % i), o)
        print("set %d: steps %d, acc %s" % (k, outs[1][0], np.round(outs[0], 3)))
        assert [o.shape for o in outs] == [(4,), (1,), (outs[1][0],), (n,), (n, 4)], [o.shape for o in outs]
    print("%s: %d bytes" % (path, os.path.getsize(path)))


if __name__ == "__main__":
    main()
