#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""safetensors interoperability fixtures for tests/unit/test_store_safetensors.cpp.

    python3 scripts/gen_safetensors_fixtures.py            # writes the Python-made fixtures
    python3 scripts/gen_safetensors_fixtures.py --check    # checks the Kiln-written fixture

Writes, under tests/fixtures/safetensors/:
  py_all_dtypes.safetensors  every dtype Kiln has (incl. 0-d, empty, f16/bf16 special values)
                             and metadata, written by Python's `safetensors.torch.save_file`;
  py_all_dtypes.json         the expected contents: per tensor its dtype, shape and the raw
                             little-endian bytes as hex (a second encoding the C++ test compares
                             against), plus the metadata.
The C++ test loads the file, checks it against the JSON, saves the same tensors with Kiln and
requires the bytes to equal the checked-in kiln_written.safetensors (regenerate that with
`KILN_REGEN_FIXTURES=1 ./kiln_tests --gtest_filter='Safetensors.PythonFixture*'`). --check then
loads kiln_written.safetensors with safetensors (torch and numpy front ends) and with PyTorch
tensors, and asserts it equals what this script wrote.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pip_ensure import ensure  # noqa: E402

ensure("safetensors", ["safetensors"])
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import load_file as np_load  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "safetensors")
NAMES = {torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16", torch.int32: "I32",
         torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32",
         torch.float64: "F64", torch.uint16: "U16", torch.uint32: "U32", torch.uint64: "U64"}
METADATA = {"format": "pt", "source": "python safetensors", "unicode": "größe ✓"}


def tensors():
    g = torch.Generator().manual_seed(0)
    t = {}
    t["bool"] = torch.tensor([[True, False, True], [False, False, True]])
    t["u8"] = torch.tensor([0, 1, 127, 128, 255], dtype=torch.uint8)
    t["i8"] = torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8)
    t["i16"] = torch.tensor([[-32768, 32767], [-1, 7]], dtype=torch.int16)
    t["i32"] = torch.tensor([-2**31, 2**31 - 1, 0, 42], dtype=torch.int32).reshape(2, 1, 2)
    t["i64"] = torch.tensor([-2**63, 2**63 - 1, 3], dtype=torch.int64)
    special = [0.0, -0.0, 1.0, -2.5, float("inf"), float("-inf"), float("nan"), 6.0e-8, 65504.0, 1e-40]
    t["f16"] = torch.tensor(special, dtype=torch.float32).to(torch.float16)
    t["bf16"] = torch.tensor(special + [3.0e38], dtype=torch.float32).to(torch.bfloat16)
    t["f32"] = torch.randn(3, 4, generator=g)
    t["f64"] = torch.randn(2, 3, generator=g, dtype=torch.float64)
    t["scalar_f32"] = torch.tensor(3.25)
    t["scalar_i64"] = torch.tensor(-7, dtype=torch.int64)
    t["empty_f32"] = torch.zeros(0, 3)
    t["empty_i16"] = torch.zeros(2, 0, dtype=torch.int16)
    t["layer.0.weight"] = torch.randn(4, 2, generator=g).to(torch.float16)
    t["u16"] = torch.tensor([0, 1, 40000, 65535], dtype=torch.uint16)
    t["u32"] = torch.tensor([[0, 2**31], [2**32 - 1, 7]], dtype=torch.uint32)
    t["u64"] = torch.tensor([0, 2**63, 2**64 - 1], dtype=torch.uint64)
    return t


def raw_hex(x):
    """The tensor's little-endian bytes as hex (bool as 0/1 bytes)."""
    x = x.contiguous().reshape(-1)
    if x.numel() == 0:
        return ""
    return (x.to(torch.uint8) if x.dtype == torch.bool else x.view(torch.uint8)).numpy().tobytes().hex()


def generate():
    os.makedirs(OUT, exist_ok=True)
    t = tensors()
    save_file(t, os.path.join(OUT, "py_all_dtypes.safetensors"), metadata=METADATA)
    expected = {"metadata": METADATA, "tensors": {
        k: {"dtype": NAMES[v.dtype], "shape": list(v.shape), "hex": raw_hex(v)} for k, v in t.items()}}
    with open(os.path.join(OUT, "py_all_dtypes.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    os.chmod(os.path.join(OUT, "py_all_dtypes.safetensors"), 0o644)
    # Sanity: the file reads back in Python.
    back = load_file(os.path.join(OUT, "py_all_dtypes.safetensors"))
    for k, v in t.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape and raw_hex(back[k]) == raw_hex(v), k
    print("wrote", OUT)


def check():
    path = os.path.join(OUT, "kiln_written.safetensors")
    want = tensors()
    got = load_file(path)  # safetensors -> torch
    assert set(got) == set(want), (sorted(got), sorted(want))
    for k, v in want.items():
        g = got[k]
        assert g.dtype == v.dtype and g.shape == v.shape, (k, g.dtype, g.shape, v.dtype, v.shape)
        assert raw_hex(g) == raw_hex(v), k  # bit for bit, NaN payloads included
    with safe_open(path, framework="pt") as f:
        assert f.metadata() == METADATA, f.metadata()
    # numpy front end (no bfloat16 in numpy)
    try:
        arrays = np_load(path)
        for k, v in want.items():
            if v.dtype != torch.bfloat16:
                assert arrays[k].tobytes().hex() == raw_hex(v), k
    except (TypeError, ValueError) as e:  # older safetensors refuse BF16 in numpy entirely
        print("numpy front end skipped:", e)
    # PyTorch's own comparison (NaN equal to NaN, no tolerance).
    for k, v in want.items():
        torch.testing.assert_close(got[k], v, rtol=0, atol=0, equal_nan=True)
    print("ok:", path, "loads in Python safetensors and PyTorch and matches")


if __name__ == "__main__":
    check() if "--check" in sys.argv[1:] else generate()
