#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Regenerates the conformance reference data in tests/golden/ from PyTorch.

Each op case is described once below (op name, inputs with shape/dtype/value kind/layout,
attributes, tolerance). The script builds the inputs, runs PyTorch on them and writes one
binary file per op, tests/golden/<op>.kgl, holding the exact input values, the layout
transforms that make the non-contiguous view, and PyTorch's outputs. The C++ harness in
tests/conformance/ rebuilds the same views and compares Kiln's results.

Usage: python3 scripts/gen_golden.py [--out DIR] [--only OP[,OP...]]
Installs torch and numpy with pip when they are missing. See tests/conformance/README.md.

File format (little-endian):
  "KGLD1\\n", u32 ncases, then per case:
    str op, str name, str attrs ("k=v;k=v"), u8 flags (bit 0: run the Device::null() check),
    u32 ninputs, inputs, u32 noutputs, outputs.
  str: u32 length + UTF-8 bytes.
  input: u8 kind (0 tensor, 1 int scalar, 2 float scalar, 3 bool scalar, 4 absent)
    tensor: u8 dtype, u8 ndim, i64 base_shape[ndim], str transforms, raw contiguous base values
    int: i64; float: f64; bool: u8
  output: u8 dtype, u8 ndim, i64 shape[ndim], f64 rtol, f64 atol, raw contiguous values
  transforms: "|"-separated steps applied to the base tensor in order:
    T:a:b (transpose), S:dim:start:stop:step (slice), E:s0:s1.. (expand), F:d0:d1.. (flip)
  dtype codes: 0 bool, 1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f16, 7 bf16, 8 f32, 9 f64, 10 u16, 11 u32,
    12 u64
"""
import argparse
import math
import os
import struct
import subprocess
import sys
import warnings
import zlib
from collections import OrderedDict


from pip_ensure import ensure as _ensure  # noqa: E402


_ensure("numpy", ["numpy"])
_ensure("torch", ["torch"])

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

warnings.filterwarnings("ignore")
torch.set_num_threads(1)

DTYPES = ["bool", "u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "u16", "u32", "u64"]
TD = {
    "bool": torch.bool, "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
    "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
    "f64": torch.float64, "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64,
}
FROM_TD = {v: k for k, v in TD.items()}
FLOATS = ["f32", "f64", "f16", "bf16"]
INTS = ["u8", "i8", "i16", "i32", "i64"]
IRANGE = {"bool": (0, 1), "u8": (0, 255), "i8": (-128, 127), "i16": (-32768, 32767),
          "i32": (-2**31, 2**31 - 1), "i64": (-2**63, 2**63 - 1), "u16": (0, 2**16 - 1),
          "u32": (0, 2**32 - 1), "u64": (0, 2**63 - 1)}
# Unsigned types: their default integer range starts at 0.
UNSIGNED = ("u8", "u16", "u32", "u64")

# Default tolerances (rtol, atol) by output dtype; ints and bools are always exact.
TOL = {"f64": (1e-10, 1e-12), "f32": (1e-5, 1e-6), "f16": (2e-3, 1e-5), "bf16": (1.6e-2, 1e-4)}

SPECIALS = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.0,
            -2.0, 1e-3, 100.0, -100.0, 1e30, -1e30, 1e-40]
# Reductions: no +-1e30, whose products/squares overflow f32 in an order-dependent way.
RED_SPECIALS = [v for v in SPECIALS if abs(v) != 1e30]
# Per-op specials where PyTorch's answer is a known PyTorch quirk rather than the op's meaning:
# gelu(+inf) is NaN in PyTorch's CPU kernel (the true limit is +inf); 1e30 is +inf in f16.
UNARY_SPECIALS = {"gelu": [v for v in SPECIALS if v not in (math.inf, 1e30)]}


# ---- input descriptions --------------------------------------------------------------------
class T:
    """A tensor input: view shape, dtype, value kind and layout.

    kind: 'n' normal*scale, 'u' uniform [lo, hi), 'i' integers in [lo, hi], 'b' bools,
          'sp' specials (NaN, +-inf, -0.0, ...) then normal, 'd' distinct values (a permutation),
          'v' explicit values (given in `values`, row-major over the view).
    Integer and bool dtypes turn 'n'/'u'/'sp' into integers in [lo, hi] (default [-9, 9]).
    layout: 'c' contiguous, 'T' transposed view, 'S' sliced with step 2, 'E' expanded (stride 0
            on dim 0), 'F' flipped on every dim, 'X' sliced + transposed + flipped.
    """

    def __init__(self, shape, dtype="f32", kind="n", layout="c", lo=None, hi=None, values=None, scale=1.0):
        self.shape = list(shape)
        self.dtype = dtype
        self.kind = kind
        self.layout = layout
        self.lo, self.hi, self.values, self.scale = lo, hi, values, scale

    def desc(self):
        s = "x".join(map(str, self.shape)) if self.shape else "0d"
        lay = "" if self.layout == "c" else "." + self.layout
        return f"{self.dtype}[{s}]{lay}"


class S:
    """A Python scalar input (int, float, bool) or None (an absent optional)."""

    def __init__(self, v):
        self.v = v

    def desc(self):
        return "None" if self.v is None else repr(self.v)


def layout_plan(shape, layout):
    """Base shape and transforms that turn a contiguous base into a view of `shape`."""
    nd = len(shape)
    s = list(shape)
    if layout == "c" or nd == 0:
        return s, []
    if layout == "T" and nd >= 2:
        b = s[:]
        b[-1], b[-2] = b[-2], b[-1]
        return b, [("T", nd - 2, nd - 1)]
    if layout == "S" or (layout == "T" and nd < 2):
        b = s[:]
        b[-1] = 2 * s[-1] + 1
        return b, [("S", nd - 1, 1, b[-1], 2)]
    if layout == "E":
        b = s[:]
        b[0] = 1
        return b, [("E",) + tuple(s)]
    if layout == "F":
        return s, [("F",) + tuple(range(nd))]
    if layout == "X":
        if nd < 2:
            return layout_plan(shape, "S")
        # base -> slice dim 0 step 2 -> transpose last two -> flip dim 0
        t = s[:]
        t[-1], t[-2] = t[-2], t[-1]
        b = t[:]
        b[0] = 2 * t[0]
        return b, [("S", 0, 0, b[0], 2), ("T", nd - 2, nd - 1), ("F", 0)]
    raise ValueError(layout)


def apply_transforms(t, tr):
    for step in tr:
        if step[0] == "T":
            t = t.transpose(step[1], step[2])
        elif step[0] == "S":
            idx = [slice(None)] * t.dim()
            idx[step[1]] = slice(step[2], step[3], step[4])
            t = t[tuple(idx)]
        elif step[0] == "E":
            t = t.expand(*step[1:])
        elif step[0] == "F":
            t = torch.flip(t, list(step[1:]))
    return t


def encode_transforms(tr):
    return "|".join(":".join(str(x) for x in step) for step in tr)


def gen_values(rng, spec, n):
    """Values (float64 or int64 numpy array of n) for the base tensor of spec."""
    dt, kind = spec.dtype, spec.kind
    if kind == "v":
        vals = spec.values
        if dt in FLOATS:
            return np.array(vals, dtype=np.float64)
        if dt == "u64":  # may exceed the int64 range
            return np.array([int(v) for v in vals], dtype=np.uint64)
        return np.array([int(v) for v in vals], dtype=np.int64)
    if dt == "bool" or kind == "b":
        if dt in FLOATS:
            return rng.integers(0, 2, n).astype(np.float64)
        return rng.integers(0, 2, n).astype(np.int64)
    if kind == "d":
        perm = rng.permutation(n).astype(np.float64)
        if dt in FLOATS:
            return (perm - n // 2) * (0.5 if n < 200 else 1.0) * spec.scale
        lo = spec.lo if spec.lo is not None else (0 if dt in UNSIGNED else -(n // 2))
        return (perm + lo).astype(np.int64)
    if dt not in FLOATS:
        lo = spec.lo if spec.lo is not None else (0 if dt in UNSIGNED else -9)
        hi = spec.hi if spec.hi is not None else 9
        lo = max(int(math.floor(lo)), IRANGE[dt][0])
        hi = min(int(math.ceil(hi)), IRANGE[dt][1])
        return rng.integers(lo, hi + 1, n, dtype=np.int64)
    if kind == "i":
        lo = spec.lo if spec.lo is not None else -9
        hi = spec.hi if spec.hi is not None else 9
        return rng.integers(int(lo), int(hi) + 1, n).astype(np.float64)
    if kind == "u":
        return rng.uniform(spec.lo, spec.hi, n)
    v = rng.standard_normal(n) * spec.scale
    if kind == "sp":
        sp = spec.values if spec.values is not None else SPECIALS
        k = min(n, len(sp))
        v[:k] = sp[:k]
    return v


def build_input(rng, spec):
    """(view tensor for torch, base tensor, transforms)."""
    base_shape, tr = layout_plan(spec.shape, spec.layout)
    n = int(np.prod(base_shape)) if base_shape else 1
    if spec.kind == "v":
        # explicit values describe the view; store them contiguous (layout must be 'c')
        assert spec.layout == "c", "explicit values need a contiguous layout"
    vals = gen_values(rng, spec, n)
    base = torch.from_numpy(vals).reshape(base_shape).to(TD[spec.dtype])
    return apply_transforms(base, tr), base, tr


# ---- the case list -------------------------------------------------------------------------
CASES = OrderedDict()  # op -> list of (inputs, attrs, null, tolscale)


def add(op, inputs, attrs=None, null=True, tol=1.0):
    """Describes one case. tol: multiplier of the default float tolerance (0 = exact)."""
    CASES.setdefault(op, []).append((inputs, attrs or {}, null, tol))


def fmt_attr(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return ",".join(fmt_attr(x) for x in v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def enc_attrs(at):
    return ";".join(f"{k}={fmt_attr(v)}" for k, v in at.items())


# ---- PyTorch reference functions: op -> fn(args, attrs) ------------------------------------
PY = {}


def with_grads(fn):
    """A reference that returns fn's result and the gradients of its sum with respect to the
    first `ng` inputs (attribute, default 1; 0 for the result only)."""
    def run(a, at):
        a = list(a)
        ng = at.get("ng", 1)
        if ng == 0:
            return fn(a, at)
        xs = []
        for i in range(ng):
            a[i] = a[i].detach().clone().requires_grad_(True)
            xs.append(a[i])
        out = fn(a, at)
        out.sum().backward()
        return (out.detach(),) + tuple(x.grad if x.grad is not None else torch.zeros_like(x) for x in xs)
    return run


def wrap_scalar(v):
    return torch.tensor(v) if isinstance(v, (bool, int, float)) else v


def call_binary(fn, a, b):
    try:
        return fn(a, b)
    except TypeError:
        return fn(wrap_scalar(a), wrap_scalar(b))


def dims_arg(x, at):
    d = at.get("dims", [])
    return tuple(d) if d else tuple(range(x.dim()))


def dt_arg(at, key="dtype"):
    return TD[at[key]] if key in at else None


# ---- unary --------------------------------------------------------------------------------
UNARY_SIMPLE = {
    "abs": torch.abs, "neg": torch.neg, "sign": torch.sign, "exp": torch.exp, "exp2": torch.exp2,
    "expm1": torch.expm1, "log": torch.log, "log2": torch.log2, "log10": torch.log10,
    "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
    "square": torch.square, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin,
    "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh,
    "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf,
    "erfinv": torch.erfinv, "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc,
    "frac": torch.frac, "sigmoid": torch.sigmoid, "relu": torch.relu, "selu": F.selu, "silu": F.silu,
    "mish": F.mish, "softsign": F.softsign, "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish,
    "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite, "isposinf": torch.isposinf,
    "isneginf": torch.isneginf, "logical_not": torch.logical_not, "bitwise_not": torch.bitwise_not,
    "relu6": F.relu6,
}
for _n, _f in UNARY_SIMPLE.items():
    PY[_n] = (lambda f: lambda a, at: f(a[0]))(_f)
PY["round"] = lambda a, at: torch.round(a[0], decimals=at.get("decimals", 0))
PY["logit"] = lambda a, at: torch.logit(a[0], eps=at.get("eps"))
PY["leaky_relu"] = lambda a, at: F.leaky_relu(a[0], at["negative_slope"])
PY["elu"] = lambda a, at: F.elu(a[0], at["alpha"])
PY["celu"] = lambda a, at: F.celu(a[0], at["alpha"])
PY["gelu"] = lambda a, at: F.gelu(a[0], approximate=at["approximate"])
PY["softplus"] = lambda a, at: F.softplus(a[0], at["beta"], at["threshold"])
PY["hardtanh"] = lambda a, at: F.hardtanh(a[0], at["min_val"], at["max_val"])
PY["clamp"] = lambda a, at: torch.clamp(a[0], a[1], a[2])
PY["clamp_min"] = lambda a, at: torch.clamp_min(a[0], a[1])
PY["clamp_max"] = lambda a, at: torch.clamp_max(a[0], a[1])
PY["nan_to_num"] = lambda a, at: torch.nan_to_num(a[0], at.get("nan", 0.0), at.get("posinf"), at.get("neginf"))
PY["cast"] = lambda a, at: a[0].to(TD[at["dtype"]])

# name: (lo, hi) of the uniform float domain; integers are drawn from the same range.
UNARY_DOMAIN = {
    "abs": (-5, 5), "neg": (-5, 5), "sign": (-3, 3), "exp": (-5, 5), "exp2": (-6, 6), "expm1": (-3, 3),
    "log": (0.01, 10), "log2": (0.01, 10), "log10": (0.01, 10), "log1p": (-0.9, 10), "sqrt": (0, 10),
    "rsqrt": (0.1, 10), "reciprocal": (-5, 5), "square": (-5, 5), "sin": (-6, 6), "cos": (-6, 6),
    "tan": (-1.4, 1.4), "asin": (-0.99, 0.99), "acos": (-0.99, 0.99), "atan": (-5, 5), "sinh": (-4, 4),
    "cosh": (-4, 4), "tanh": (-4, 4), "asinh": (-5, 5), "acosh": (1, 10), "atanh": (-0.99, 0.99),
    "erf": (-3, 3), "erfinv": (-0.99, 0.99), "floor": (-5, 5), "ceil": (-5, 5), "round": (-5, 5),
    "trunc": (-5, 5), "frac": (-5, 5), "sigmoid": (-8, 8), "logit": (0.01, 0.99), "relu": (-3, 3),
    "leaky_relu": (-3, 3), "elu": (-3, 3), "selu": (-3, 3), "celu": (-3, 3), "gelu": (-4, 4),
    "silu": (-5, 5), "mish": (-5, 5), "softplus": (-5, 25), "softsign": (-5, 5),
    "hardtanh": (-3, 3), "hardsigmoid": (-4, 4), "hardswish": (-4, 4), "relu6": (-3, 9),
    "isnan": (-3, 3), "isinf": (-3, 3), "isfinite": (-3, 3), "isposinf": (-3, 3), "isneginf": (-3, 3),
    "logical_not": (-2, 2), "nan_to_num": (-3, 3),
}
UNARY_ATTRS = {
    "round": [{}, {"decimals": 2}, {"decimals": -1}],
    "logit": [{}, {"eps": 0.001}],
    "leaky_relu": [{"negative_slope": 0.01}, {"negative_slope": 0.2}],
    "elu": [{"alpha": 1.0}, {"alpha": 0.5}],
    "celu": [{"alpha": 1.0}, {"alpha": 2.0}],
    "gelu": [{"approximate": "none"}, {"approximate": "tanh"}],
    "softplus": [{"beta": 1.0, "threshold": 20.0}, {"beta": 2.0, "threshold": 1.0}],
    "hardtanh": [{"min_val": -1.0, "max_val": 1.0}, {"min_val": -2.0, "max_val": 0.5}],
    "nan_to_num": [{}, {"nan": 1.0, "posinf": 100.0, "neginf": -100.0}],
}
TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
                  "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfinv",
                  "sigmoid", "logit", "elu", "selu", "celu", "gelu", "silu", "mish", "softplus", "rsqrt"}
EXACT_UNARY = {"abs", "neg", "sign", "floor", "ceil", "trunc", "relu", "isnan", "isinf", "isfinite",
               "isposinf", "isneginf", "logical_not", "bitwise_not", "hardtanh", "relu6", "nan_to_num",
               "square", "clamp", "clamp_min", "clamp_max"}


def unary_cases(op):
    lo, hi = UNARY_DOMAIN[op]
    tol = 0 if op in EXACT_UNARY else (4.0 if op in TRANSCENDENTAL else 1.0)
    for j, at in enumerate(UNARY_ATTRS.get(op, [{}])):
        add(op, [T([7, 19], "f32", "u", lo=lo, hi=hi)], at, tol=tol)  # contiguous: vector body + tail
        sp = UNARY_SPECIALS.get(op)
        add(op, [T([3, 4], "f32", "sp", values=sp)], at, tol=tol)
        add(op, [T([3, 4], "f64", "u", "T", lo, hi)], at, tol=tol)
        if j > 0:
            continue
        add(op, [T([37], "f64", "u", lo=lo, hi=hi)], at, tol=tol)
        add(op, [T([45], "f16", "u", lo=lo, hi=hi)], at, tol=tol)
        add(op, [T([3, 5], "f16", "u", "S", lo, hi)], at, tol=tol)
        add(op, [T([41], "bf16", "u", lo=lo, hi=hi)], at, tol=tol)
        add(op, [T([3, 4], "bf16", "u", "F", lo, hi)], at, tol=tol)
        add(op, [T([4, 5], "f32", "u", "E", lo, hi)], at, tol=tol)
        add(op, [T([3, 4, 5], "f32", "u", "X", lo, hi)], at, tol=tol)
        add(op, [T([], "f32", "u", lo=lo, hi=hi)], at, tol=tol)
        add(op, [T([0, 3], "f32")], at, tol=tol)
        add(op, [T([4, 5], "f64", "sp", values=sp)], at, tol=tol)
        add(op, [T([4, 6], "f16", "sp", values=sp)], at, tol=tol)
        add(op, [T([4, 6], "bf16", "sp", values=sp)], at, tol=tol)
        # integer / bool inputs: keep their dtype or promote to f32, as PyTorch does
        add(op, [T([9], "i32", "u", lo=lo, hi=hi)], at, tol=tol)
        add(op, [T([2, 3], "i64", "u", "T", lo, hi)], at, tol=tol)
        add(op, [T([6], "i16", "u", lo=lo, hi=hi)], at, tol=tol)
        add(op, [T([6], "i8", "u", lo=lo, hi=hi)], at, tol=tol)
        add(op, [T([6], "u8", "u", lo=max(lo, 0), hi=max(hi, 3))], at, tol=tol)
        add(op, [T([6], "bool", "b")], at, tol=tol)
        add(op, [T([], "i64", "u", lo=lo, hi=hi)], at, tol=tol)


for _op in UNARY_DOMAIN:
    unary_cases(_op)

# bitwise_not: integers and bools only
for dt in INTS + ["bool"]:
    add("bitwise_not", [T([11], dt, lo=IRANGE[dt][0] if dt != "i64" else -1000, hi=IRANGE[dt][1] if dt != "i64" else 1000)])
add("bitwise_not", [T([3, 4], "i32", layout="T")])
add("bitwise_not", [T([3, 4], "i64", layout="F")])
add("bitwise_not", [T([3, 4], "u8", layout="E")])
add("bitwise_not", [T([], "i32")])
add("bitwise_not", [T([0], "i16")])

# clamp: optional scalar bounds, tensor bounds, int tensors, NaN inputs
for dt in ["f32", "f64", "f16", "bf16"]:
    add("clamp", [T([4, 5], dt, "sp"), S(-1.5), S(2.0)], tol=0)
add("clamp", [T([7, 19], "f32", "n", scale=3), S(-1.0), S(1.0)], tol=0)
add("clamp", [T([3, 4], "f32", "n", "T"), S(None), S(0.5)], tol=0)
add("clamp", [T([3, 4], "f32", "n", "F"), S(-0.5), S(None)], tol=0)
add("clamp", [T([3, 4], "f32"), S(1.0), S(-1.0)], tol=0)  # min > max -> max
add("clamp", [T([3, 4], "i32"), S(-3), S(4)], tol=0)
add("clamp", [T([3, 4], "i64", layout="S"), S(-3), S(None)], tol=0)
add("clamp", [T([3, 4], "u8"), S(2), S(6)], tol=0)
add("clamp", [T([3, 4], "i32"), S(-2.5), S(3.5)], tol=0)  # float bounds promote an int tensor
add("clamp", [T([], "f32"), S(-0.1), S(0.1)], tol=0)
add("clamp", [T([0, 4], "f32"), S(-0.1), S(0.1)], tol=0)
add("clamp", [T([3, 4], "f32", "sp"), T([4], "f32", "u", lo=-2, hi=-1), T([3, 1], "f32", "u", lo=0, hi=1)], tol=0)
add("clamp", [T([3, 4], "f64", layout="T"), T([], "f64", "v", values=[-0.5]), T([4], "f64", "u", lo=0, hi=1)], tol=0)
add("clamp", [T([3, 4], "i32"), T([3, 4], "i32", lo=-5, hi=0), T([4], "i32", lo=0, hi=5)], tol=0)
for op, v in (("clamp_min", 0.25), ("clamp_max", -0.25)):
    add(op, [T([4, 5], "f32", "sp"), S(v)], tol=0)
    add(op, [T([3, 4], "f64", layout="T"), S(v)], tol=0)
    add(op, [T([3, 4], "f16", layout="F"), S(v)], tol=0)
    add(op, [T([3, 4], "i32"), S(2)], tol=0)
    add(op, [T([], "f32"), S(v)], tol=0)
    add(op, [T([0], "f32"), S(v)], tol=0)

# casts between every pair of dtypes
CAST_VALUES = {
    # float sources: per destination, a range PyTorch defines (no out-of-range float -> int)
    "to_bool": [0.0, -0.0, 0.1, -2.5, math.nan, math.inf, 1.0, 0.0, -1e-30, 3.0, 0.0, 7.5],
    "to_u8": [0.0, 0.9, 1.5, 2.999, 127.7, 200.2, 254.9, 3.0, 10.5, 0.4, 99.99, 64.0],
    "to_i8": [0.0, -0.9, 1.5, -2.999, 126.7, -127.9, 5.5, -5.5, 10.25, -0.4, 99.99, -64.0],
    "to_i16": [0.0, -0.9, 1.5, -2.999, 30000.5, -32000.7, 5.5, -5.5, 1000.25, -0.4, 99.99, -64.0],
    "to_i32": [0.0, -0.9, 1.5, -2.999, 2e9, -2e9, 5.5, -5.5, 1e6 + 0.5, -0.4, 65504.0, -64.0],
    "to_i64": [0.0, -0.9, 1.5, -2.999, 2e9, -2e9, 5.5, -5.5, 1e6 + 0.5, -0.4, 65504.0, -64.0],
    "to_f": [math.nan, math.inf, -math.inf, -0.0, 1.0 / 3, 65504.0, 65520.0, 1e5, -1e-7, 1e-40, 3.4e38, 1e39],
}
INT_CAST_VALUES = [0, 1, -1, 127, -128, 255, 300, -300, 65535, 70000, 2**31 - 1, -2**31, 2**40 + 1, 16777217]
for src in DTYPES[:10]:  # u16, u32, u64: scripts/golden_cases/wide_unsigned.py
    for dst in DTYPES[:10]:
        if src in FLOATS:
            key = "to_f" if dst in FLOATS else "to_" + dst
            vals = CAST_VALUES[key]
            if src != "f64" and key == "to_i64":
                vals = [v for v in vals if abs(v) < 1e9] + [0.0, 0.0]
            if src in ("f16", "bf16") and dst in INTS:
                vals = [v for v in vals if abs(v) <= 250] + [0.0] * 12
                vals = vals[:12]
            add("cast", [T([12], src, "v", values=vals[:12])], {"dtype": dst}, tol=0)
        elif src == "bool":
            add("cast", [T([6], src, "v", values=[0, 1, 1, 0, 1, 0])], {"dtype": dst}, tol=0)
        else:
            lo, hi = IRANGE[src]
            vals = [v for v in INT_CAST_VALUES if lo <= v <= hi][:12]
            add("cast", [T([len(vals)], src, "v", values=vals)], {"dtype": dst}, tol=0)
for src, dst in (("f32", "f16"), ("f32", "i32"), ("i64", "f32"), ("f16", "f32"), ("i32", "bool"), ("bf16", "f64")):
    add("cast", [T([3, 4], src, "n", "T", scale=5)], {"dtype": dst}, tol=0)
    add("cast", [T([3, 4], src, "n", "X", scale=5)], {"dtype": dst}, tol=0)
add("cast", [T([3, 4], "f32", "n", "E", scale=5)], {"dtype": "f64"}, tol=0)
add("cast", [T([], "f64", scale=5)], {"dtype": "i16"}, tol=0)
add("cast", [T([0, 2], "i32")], {"dtype": "f16"}, tol=0)
add("cast", [T([67], "f32", "n", scale=3)], {"dtype": "bf16"}, tol=0)
add("cast", [T([67], "f32", "n", scale=3)], {"dtype": "f16"}, tol=0)
add("cast", [T([67], "f32", "n", scale=50)], {"dtype": "i32"}, tol=0)


# ---- binary ---------------------------------------------------------------------------------
def _div(a, at):
    rm = at.get("rounding_mode") or None
    return call_binary(lambda x, y: torch.div(x, y, rounding_mode=rm), a[0], a[1])


PY["add"] = lambda a, at: (torch.add(a[0], a[1], alpha=at["alpha"]) if "alpha" in at else call_binary(torch.add, a[0], a[1])) if not isinstance(a[0], (int, float, bool)) else a[0] + a[1]
PY["sub"] = lambda a, at: (torch.sub(a[0], a[1], alpha=at["alpha"]) if "alpha" in at else call_binary(torch.sub, a[0], a[1])) if not isinstance(a[0], (int, float, bool)) else a[0] - a[1]
PY["div"] = _div
BINARY_TORCH = {
    "mul": torch.mul, "remainder": torch.remainder, "fmod": torch.fmod, "pow": torch.pow,
    "atan2": torch.atan2, "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax,
    "fmin": torch.fmin, "hypot": torch.hypot, "logaddexp": torch.logaddexp,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
    "bitwise_left_shift": torch.bitwise_left_shift, "bitwise_right_shift": torch.bitwise_right_shift,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "floor_divide": torch.floor_divide,
}
for _n, _f in BINARY_TORCH.items():
    PY[_n] = (lambda f: lambda a, at: call_binary(f, a[0], a[1]))(_f)
PY["mul"] = lambda a, at: a[0] * a[1] if isinstance(a[0], (int, float, bool)) else call_binary(torch.mul, a[0], a[1])
PY["remainder"] = lambda a, at: torch.remainder(a[0], a[1])
PY["pow"] = lambda a, at: torch.pow(a[0], a[1])

# op: (float domain of a, float domain of b, dtype class, tolerance scale)
# dtype class: 'all' (every dtype), 'num' (no bool), 'int' (integers + bool), 'ishift' (integers)
BINARY = {
    "add": ((-5, 5), (-5, 5), "all", 1), "sub": ((-5, 5), (-5, 5), "num", 1),
    "mul": ((-5, 5), (-5, 5), "all", 1), "div": ((-5, 5), (0.5, 4), "num", 1),
    "remainder": ((-9, 9), (1, 4), "num", 1), "fmod": ((-9, 9), (1, 4), "num", 1),
    "pow": ((0.1, 3), (-2, 2.5), "num", 4), "atan2": ((-3, 3), (-3, 3), "num", 4),
    "maximum": ((-5, 5), (-5, 5), "all", 0), "minimum": ((-5, 5), (-5, 5), "all", 0),
    "fmax": ((-5, 5), (-5, 5), "num", 0), "fmin": ((-5, 5), (-5, 5), "num", 0),
    "hypot": ((-5, 5), (-5, 5), "float", 1), "logaddexp": ((-5, 5), (-5, 5), "float", 4),
    "bitwise_and": ((-50, 50), (-50, 50), "int", 0), "bitwise_or": ((-50, 50), (-50, 50), "int", 0),
    "bitwise_xor": ((-50, 50), (-50, 50), "int", 0),
    "bitwise_left_shift": ((-20, 20), (0, 5), "ishift", 0), "bitwise_right_shift": ((-100, 100), (0, 6), "ishift", 0),
    "logical_and": ((-2, 2), (-2, 2), "all", 0), "logical_or": ((-2, 2), (-2, 2), "all", 0),
    "logical_xor": ((-2, 2), (-2, 2), "all", 0),
    "eq": ((-2, 2), (-2, 2), "all", 0), "ne": ((-2, 2), (-2, 2), "all", 0), "lt": ((-2, 2), (-2, 2), "all", 0),
    "le": ((-2, 2), (-2, 2), "all", 0), "gt": ((-2, 2), (-2, 2), "all", 0), "ge": ((-2, 2), (-2, 2), "all", 0),
    "floor_divide": ((-9, 9), (1, 4), "num", 1),
}


def _bk(dt, dom, kind="u"):
    """Kind and range for a binary operand of dtype dt over float domain dom."""
    if dt in FLOATS:
        return dict(kind=kind, lo=dom[0], hi=dom[1])
    return dict(kind="i", lo=max(dom[0], IRANGE[dt][0]), hi=min(dom[1], IRANGE[dt][1]))


def binary_cases(op, da, db, cls, tol, attrs=None):
    at = attrs or {}
    if cls in ("int", "ishift"):
        main = ["i32", "i64", "i16", "i8", "u8"] + (["bool"] if cls == "int" else [])
    else:
        main = ["f32", "f64", "f16", "bf16"] + ([] if cls == "float" else ["i32", "i64"])

    def A(shape, dt, layout="c", kind="u"):
        d = da
        if dt == "u8":
            d = (max(da[0], 0), max(da[1], 3))
        return T(shape, dt, layout=layout, **_bk(dt, d, kind))

    def B(shape, dt, layout="c", kind="u"):
        d = db
        if dt == "u8":
            d = (max(db[0], 0), max(db[1], 3))
        return T(shape, dt, layout=layout, **_bk(dt, d, kind))

    f = main[0]
    add(op, [A([5, 13], f), B([5, 13], f)], at, tol=tol)  # contiguous, same shape
    for dt in main[1:]:
        add(op, [A([3, 7], dt), B([3, 7], dt)], at, tol=tol)
    add(op, [A([3, 4], f), B([4], f)], at, tol=tol)  # broadcast row
    add(op, [A([3, 1], main[1]), B([1, 4], main[1])], at, tol=tol)  # outer broadcast
    add(op, [A([2, 3, 4], main[2], "T"), B([3, 1], main[2])], at, tol=tol)
    add(op, [A([4, 5], main[3], "F"), B([4, 5], main[3], "S")], at, tol=tol)
    add(op, [A([4, 5], f, "E"), B([4, 5], f, "X")], at, tol=tol)
    add(op, [A([3, 4, 5], f, "X"), B([5], f, "F")], at, tol=tol)
    add(op, [A([], f), B([3, 4], f)], at, tol=tol)  # 0-d with n-d
    add(op, [A([], main[1]), B([], main[1])], at, tol=tol)  # 0-d with 0-d
    add(op, [A([0, 4], f), B([4], f)], at, tol=tol)  # empty
    add(op, [A([2, 0], f), B([1], f)], at, tol=tol)
    if cls in ("int", "ishift"):
        # promotion between integer types and with bool
        add(op, [A([6], "i32"), B([6], "i64")], at, tol=tol)
        add(op, [A([6], "u8"), B([6], "i8")], at, tol=tol)
        add(op, [A([6], "i16"), B([6], "u8")], at, tol=tol)
        add(op, [A([2, 3], "i64"), B([], "i32")], at, tol=tol)  # 0-d tensor counts less
        add(op, [A([6], "i32"), S(3)], at, tol=tol)
        add(op, [A([6], "u8"), S(2)], at, tol=tol)
        if cls == "int":
            add(op, [A([6], "bool"), B([6], "i32")], at, tol=tol)
            add(op, [A([6], "bool"), S(True)], at, tol=tol)
            add(op, [A([6], "i64"), S(-7)], at, tol=tol)
        return
    # type promotion
    add(op, [A([6], "i32"), B([6], "f32")], at, tol=tol)
    add(op, [A([6], "f16"), B([6], "bf16")], at, tol=tol)
    add(op, [A([6], "i64"), B([6], "f16")], at, tol=tol)
    add(op, [A([6], "f32"), B([6], "f64")], at, tol=tol)
    add(op, [A([2, 3], "f32"), B([], "f64")], at, tol=tol)  # 0-d f64 does not widen f32
    add(op, [A([2, 3], "i32"), B([], "f32")], at, tol=tol)  # ... but lifts ints to its category
    add(op, [A([6], "f16"), S(2.5)], at, tol=tol)  # python float keeps f16
    add(op, [A([6], "f32"), S(-1.5)], at, tol=tol)
    add(op, [A([6], "f64"), S(2)], at, tol=tol)
    if cls != "float":
        add(op, [A([6], "i32"), B([6], "i64")], at, tol=tol)
        add(op, [A([6], "u8"), B([6], "i8")], at, tol=tol)
        add(op, [A([2, 3], "i64"), B([], "i32")], at, tol=tol)
        add(op, [A([6], "i32"), S(3)], at, tol=tol)  # python int keeps i32
        add(op, [A([6], "i16"), S(2.5)], at, tol=tol)  # python float -> f32
        add(op, [A([6], "u8"), S(2)], at, tol=tol)
        if cls == "all":
            add(op, [A([6], "bool"), B([6], "i32")], at, tol=tol)
            add(op, [A([6], "bool"), S(2)], at, tol=tol)
            add(op, [A([6], "bool"), B([6], "bool")], at, tol=tol)
            add(op, [A([6], "bool"), S(1.5)], at, tol=tol)


SCALAR_FIRST = {"add", "sub", "mul", "div", "pow", "remainder"}
for op, (da, db, cls, tol) in BINARY.items():
    binary_cases(op, da, db, cls, tol)
    if cls not in ("int", "ishift"):
        # NaN / inf / -0.0 against each other: all pairs through an outer broadcast
        for dt in ("f32", "f64", "bf16"):
            add(op, [T([20, 1], dt, "sp"), T([1, 20], dt, "sp")], tol=tol)
    if op in SCALAR_FIRST or op in ("fmod", "eq", "lt"):
        # a Python float that f16/bf16 cannot hold: PyTorch computes with it in f32
        add(op, [T([6], "f16", "u", lo=0.5, hi=3), S(0.1)], tol=tol)
        add(op, [T([6], "bf16", "u", lo=0.5, hi=3), S(0.3)], tol=tol)
    if op in SCALAR_FIRST:
        add(op, [S(2), T([6], "f32", "u", lo=0.5, hi=3)], tol=tol)
        add(op, [S(2.5), T([6], "i32", "i", lo=1, hi=3)], tol=tol)
        add(op, [S(3), T([2, 3], "i64", "i", lo=1, hi=3)], tol=tol)
        add(op, [S(1.5), T([2, 3], "f16", "u", "T", lo=0.5, hi=3)], tol=tol)

# add / sub with alpha
for op in ("add", "sub"):
    add(op, [T([3, 4]), T([4])], {"alpha": 2.5})
    add(op, [T([3, 4], "i32"), T([3, 4], "i32")], {"alpha": 3}, tol=0)
    add(op, [T([3, 4], "f16", layout="T"), T([3, 4], "f16")], {"alpha": -0.5})
    add(op, [T([3, 4], "i64", layout="F"), T([4], "i32")], {"alpha": -2}, tol=0)
# division rounding modes
for rm in ("trunc", "floor"):
    binary_cases("div", (-9, 9), (1, 4), "num", 1, {"rounding_mode": rm})
    for dt in ("f32", "f64"):
        add("div", [T([20, 1], dt, "sp"), T([1, 20], dt, "sp")], {"rounding_mode": rm})
    add("div", [T([8], "i32", "i", lo=-9, hi=9), T([8], "i32", "v", values=[-3, -2, -1, 1, 2, 3, 4, -4])], {"rounding_mode": rm}, tol=0)
    add("div", [T([8], "i32", "i", lo=-9, hi=9), S(-2)], {"rounding_mode": rm}, tol=0)
    add("div", [S(7), T([8], "i64", "v", values=[-3, -2, -1, 1, 2, 3, 4, -4])], {"rounding_mode": rm}, tol=0)
    add("div", [T([8], "u8", "i", lo=0, hi=100), T([8], "u8", "i", lo=1, hi=7)], {"rounding_mode": rm}, tol=0)
add("div", [T([6], "i32", "i", lo=-9, hi=9), T([6], "i32", "i", lo=1, hi=4)])  # true division -> f32
add("div", [T([6], "i64", "i", lo=-9, hi=9), S(4)])
# integer remainder / fmod / floor_divide with negative operands
for op in ("remainder", "fmod", "floor_divide"):
    add(op, [T([8], "i32", "i", lo=-9, hi=9), T([8], "i32", "v", values=[-3, -2, -1, 1, 2, 3, 4, -4])], tol=0)
    add(op, [T([8], "i64", "i", lo=-9, hi=9), S(-3)], tol=0)
    add(op, [T([8], "i8", "i", lo=-100, hi=100), T([8], "i8", "v", values=[-3, -2, -1, 1, 2, 3, 4, -4])], tol=0)
# pow: integer powers, negative bases, scalar exponents
add("pow", [T([8], "i32", "i", lo=-5, hi=5), T([8], "i32", "i", lo=0, hi=4)], tol=0)
add("pow", [T([8], "i64", "i", lo=-5, hi=5), S(3)], tol=0)
add("pow", [T([8], "u8", "i", lo=0, hi=5), S(2)], tol=0)
add("pow", [T([8], "f32", "u", lo=-3, hi=3), S(2)])
add("pow", [T([8], "f32", "u", lo=-3, hi=3), S(0.5)])
add("pow", [T([8], "f32", "u", lo=-3, hi=3), S(-1)])
add("pow", [T([8], "f64", "u", lo=-3, hi=3), T([8], "f64", "i", lo=-3, hi=3)])
add("pow", [T([8], "f32", "u", lo=-3, hi=3), S(3.0)])
add("pow", [T([8], "i32", "i", lo=1, hi=5), S(-0.5)])
# bitwise shifts: also unsigned and larger shifts
add("bitwise_left_shift", [T([8], "u8", "i", lo=0, hi=255), T([8], "u8", "i", lo=0, hi=7)], tol=0)
add("bitwise_right_shift", [T([8], "i8", "i", lo=-128, hi=127), T([8], "i8", "i", lo=0, hi=7)], tol=0)
add("bitwise_left_shift", [T([8], "i64", "i", lo=-1000, hi=1000), S(40)], tol=0)
add("bitwise_right_shift", [T([8], "i64", "i", lo=-10**12, hi=10**12), S(33)], tol=0)
# comparisons mixing float and int, NaN
for op in ("eq", "ne", "lt", "le", "gt", "ge"):
    add(op, [T([6], "f32", "i", lo=-2, hi=2), T([6], "i64", "i", lo=-2, hi=2)], tol=0)
    add(op, [T([6], "f32", "sp"), S(0.5)], tol=0)
    add(op, [T([6], "i32", "i", lo=-2, hi=2), S(0.5)], tol=0)
    add(op, [T([67], "f32", "i", lo=-2, hi=2), T([67], "f32", "i", lo=-2, hi=2)], tol=0)

# C++ operators (a few cases each; the functions above carry the full coverage)
OPERATORS = {"op_add": "add", "op_sub": "sub", "op_mul": "mul", "op_div": "div", "op_mod": "remainder",
             "op_and": "bitwise_and", "op_or": "bitwise_or", "op_xor": "bitwise_xor", "op_eq": "eq",
             "op_ne": "ne", "op_lt": "lt", "op_le": "le", "op_gt": "gt", "op_ge": "ge"}
for op, ref in OPERATORS.items():
    PY[op] = PY[ref]
    if ref.startswith("bitwise"):
        add(op, [T([3, 4], "i32"), T([4], "i32")], tol=0)
        add(op, [T([5], "bool"), T([5], "bool")], tol=0)
    else:
        add(op, [T([3, 4], "f32", "u", lo=1, hi=3), T([4], "f32", "u", lo=1, hi=3)])
        add(op, [T([3, 4], "i32", "i", lo=1, hi=5), T([3, 4], "i32", "i", lo=1, hi=5, layout="T")])
        add(op, [T([5], "i32", "i", lo=1, hi=5), S(2)])
        add(op, [T([5], "f16", "u", lo=1, hi=3), S(1.5)])
        if ref in ("add", "sub", "mul", "div"):
            add(op, [S(2), T([5], "f32", "u", lo=1, hi=3)])
PY["op_neg"] = lambda a, at: -a[0]
PY["op_invert"] = lambda a, at: ~a[0]
PY["op_lshift"] = lambda a, at: a[0] << a[1]
PY["op_rshift"] = lambda a, at: a[0] >> a[1]
add("op_neg", [T([3, 4], "f32")], tol=0)
add("op_neg", [T([5], "i64")], tol=0)
add("op_invert", [T([5], "i32")], tol=0)
add("op_invert", [T([5], "bool")], tol=0)
add("op_lshift", [T([5], "i32", "i", lo=-9, hi=9), S(3)], tol=0)
add("op_rshift", [T([5], "i64", "i", lo=-99, hi=99), S(2)], tol=0)

# where / masked_fill / lerp / isclose / allclose / equal
PY["where"] = lambda a, at: torch.where(a[0], a[1], a[2])
add("where", [T([3, 4], "bool"), T([3, 4]), T([3, 4])], tol=0)
add("where", [T([7, 19], "bool"), T([7, 19]), T([7, 19])], tol=0)
add("where", [T([3, 4], "bool", layout="T"), T([3, 4], layout="F"), T([4])], tol=0)
add("where", [T([4], "bool"), T([3, 1], "f64"), T([3, 4], "f64", layout="S")], tol=0)
add("where", [T([3, 4], "bool", layout="E"), T([3, 4], "i32"), T([3, 4], "f32")], tol=0)
add("where", [T([3, 4], "bool"), T([3, 4], "i32"), T([3, 4], "i64")], tol=0)
add("where", [T([3, 4], "bool"), T([3, 4], "f16"), T([3, 4], "bf16")], tol=0)
add("where", [T([3, 4], "bool"), T([3, 4], "f32", "sp"), S(0.0)], tol=0)
add("where", [T([3, 4], "bool"), S(-1), T([3, 4], "i16")], tol=0)
add("where", [T([3, 4], "bool"), S(1.5), S(0.0)], tol=0)
add("where", [T([3, 4], "bool"), S(1), S(0)], tol=0)
add("where", [T([3, 4], "bool"), T([3, 4], "u8"), T([3, 4], "bool")], tol=0)
add("where", [T([], "bool"), T([2, 3]), T([2, 3])], tol=0)
add("where", [T([], "bool"), T([], "f64"), T([], "f64")], tol=0)
add("where", [T([0, 3], "bool"), T([3]), T([0, 3])], tol=0)

PY["masked_fill"] = lambda a, at: torch.masked_fill(a[0], a[1], a[2])
add("masked_fill", [T([3, 4]), T([3, 4], "bool"), S(-1.5)], tol=0)
add("masked_fill", [T([7, 19]), T([7, 19], "bool"), S(0.0)], tol=0)
add("masked_fill", [T([3, 4], layout="T"), T([4], "bool"), S(math.inf)], tol=0)
add("masked_fill", [T([3, 4], "f64", layout="F"), T([3, 1], "bool"), S(math.nan)], tol=0)
add("masked_fill", [T([3, 4], "f16", layout="S"), T([3, 4], "bool", layout="T"), S(2.0)], tol=0)
add("masked_fill", [T([3, 4], "bf16"), T([3, 4], "bool"), S(2.0)], tol=0)
add("masked_fill", [T([3, 4], "i32"), T([3, 4], "bool"), S(7)], tol=0)
add("masked_fill", [T([3, 4], "i64"), T([3, 4], "bool"), S(-7)], tol=0)
add("masked_fill", [T([3, 4], "bool"), T([3, 4], "bool"), S(True)], tol=0)
add("masked_fill", [T([3, 4], "u8"), T([3, 4], "bool"), S(200)], tol=0)
add("masked_fill", [T([3, 4]), T([3, 4], "bool"), T([], "f32", "v", values=[9.0])], tol=0)
add("masked_fill", [T([3, 4], layout="E"), T([3, 4], "bool"), S(1.0)], tol=0)
add("masked_fill", [T([]), T([], "bool", "v", values=[1]), S(3.0)], tol=0)
add("masked_fill", [T([0, 4]), T([4], "bool"), S(3.0)], tol=0)

PY["lerp"] = lambda a, at: torch.lerp(a[0], a[1], a[2])
add("lerp", [T([7, 19]), T([7, 19]), S(0.3)])
add("lerp", [T([3, 4]), T([4]), S(0.75)])
add("lerp", [T([3, 4], layout="T"), T([3, 4], layout="F"), T([3, 4], "f32", "u", lo=0, hi=1)])
add("lerp", [T([3, 4], "f64", layout="S"), T([3, 1], "f64"), T([4], "f64", "u", lo=-0.5, hi=1.5)])
add("lerp", [T([3, 4], "f16"), T([3, 4], "f16"), S(0.6)])
add("lerp", [T([3, 4], "bf16"), T([3, 4], "bf16"), T([3, 4], "bf16", "u", lo=0, hi=1)])
add("lerp", [T([4, 5], "f32", "sp"), T([4, 5]), S(0.5)])
add("lerp", [T([]), T([2, 3]), T([], "f32", "v", values=[0.25])])
add("lerp", [T([0, 3]), T([3]), S(0.5)])

PY["isclose"] = lambda a, at: torch.isclose(a[0], a[1], at["rtol"], at["atol"], at["equal_nan"])
PY["allclose"] = lambda a, at: torch.tensor(torch.allclose(a[0], a[1], at["rtol"], at["atol"], at["equal_nan"]))
PY["equal"] = lambda a, at: torch.tensor(torch.equal(a[0], a[1]))
_ic = {"rtol": 1e-5, "atol": 1e-8, "equal_nan": False}
_sp = [math.nan, math.inf, -math.inf, 1.0, 1.0, 0.0, 1e-9, 100.0, -2.0, 5.0]
_sp2 = [math.nan, math.inf, math.inf, 1.0 + 1e-6, 1.001, 1e-9, 0.0, 100.0005, -2.0, math.nan]
for op in ("isclose", "allclose"):
    nn = op == "allclose"
    add(op, [T([10], "f32", "v", values=_sp), T([10], "f32", "v", values=_sp2)], _ic, null=not nn, tol=0)
    add(op, [T([10], "f64", "v", values=_sp), T([10], "f64", "v", values=_sp2)], dict(_ic, equal_nan=True), null=not nn, tol=0)
    add(op, [T([10], "f32", "v", values=_sp), T([10], "f32", "v", values=_sp2)], {"rtol": 1e-3, "atol": 1e-6, "equal_nan": True}, null=not nn, tol=0)
    add(op, [T([3, 4]), T([4])], _ic, null=not nn, tol=0)
    add(op, [T([3, 4], layout="T"), T([3, 4], layout="T")], _ic, null=not nn, tol=0)
    add(op, [T([3, 4], "i32", "i", lo=0, hi=2), T([3, 4], "i32", "i", lo=0, hi=2)], _ic, null=not nn, tol=0)
    add(op, [T([0, 4]), T([4])], _ic, null=not nn, tol=0)
    add(op, [T([6], "f16", "i", lo=0, hi=2), T([6], "f16", "i", lo=0, hi=2)], {"rtol": 0.1, "atol": 0.5, "equal_nan": False}, null=not nn, tol=0)
add("allclose", [T([3, 4], "f64"), T([3, 4], "f64")], _ic, null=False, tol=0)
add("equal", [T([3, 4], "i32", "i", lo=0, hi=0), T([3, 4], "i32", "i", lo=0, hi=0)], null=False, tol=0)
add("equal", [T([3, 4], "i32", "i", lo=0, hi=1), T([3, 4], "i32", "i", lo=0, hi=1)], null=False, tol=0)
add("equal", [T([3, 4], "i32", "i", lo=0, hi=0), T([4], "i32", "i", lo=0, hi=0)], null=False, tol=0)
add("equal", [T([2, 3], "f32", "v", values=[1, 2, 3, 4, 5, math.nan]), T([2, 3], "f32", "v", values=[1, 2, 3, 4, 5, math.nan])], null=False, tol=0)
add("equal", [T([0, 3]), T([0, 3])], null=False, tol=0)

# ---- reductions ------------------------------------------------------------------------------
RED_TOL = 4.0


def _sum(a, at):
    x = a[0]
    return torch.sum(x, dims_arg(x, at), keepdim=at.get("keepdim", False), dtype=dt_arg(at))


def _prod(a, at):
    x = a[0]
    dims = sorted(set(d % max(x.dim(), 1) for d in dims_arg(x, at)), reverse=True)
    dt = dt_arg(at)
    if x.dim() == 0:
        return torch.prod(x, dtype=dt)
    if len(dims) == x.dim() and not at.get("keepdim", False):
        return torch.prod(x, dtype=dt)
    r = x
    for d in dims:
        r = torch.prod(r, d, keepdim=True, dtype=dt)
        dt = None
    if not at.get("keepdim", False):
        for d in dims:
            r = r.squeeze(d)
    return r


PY["sum"] = _sum
PY["mean"] = lambda a, at: torch.mean(a[0], dims_arg(a[0], at), keepdim=at.get("keepdim", False))
PY["prod"] = _prod
PY["amax"] = lambda a, at: torch.amax(a[0], dims_arg(a[0], at), keepdim=at.get("keepdim", False))
PY["amin"] = lambda a, at: torch.amin(a[0], dims_arg(a[0], at), keepdim=at.get("keepdim", False))
PY["argmax"] = lambda a, at: torch.argmax(a[0], at.get("dim"), keepdim=at.get("keepdim", False))
PY["argmin"] = lambda a, at: torch.argmin(a[0], at.get("dim"), keepdim=at.get("keepdim", False))
PY["max_dim"] = lambda a, at: tuple(torch.max(a[0], at["dim"], keepdim=at.get("keepdim", False)))
PY["min_dim"] = lambda a, at: tuple(torch.min(a[0], at["dim"], keepdim=at.get("keepdim", False)))
PY["max"] = lambda a, at: torch.max(a[0])
PY["min"] = lambda a, at: torch.min(a[0])
PY["var"] = lambda a, at: torch.var(a[0], dims_arg(a[0], at), correction=at["correction"], keepdim=at.get("keepdim", False))
PY["std"] = lambda a, at: torch.std(a[0], dims_arg(a[0], at), correction=at["correction"], keepdim=at.get("keepdim", False))
PY["var_mean"] = lambda a, at: tuple(torch.var_mean(a[0], dims_arg(a[0], at), correction=at["correction"], keepdim=at.get("keepdim", False)))
PY["norm"] = lambda a, at: torch.linalg.vector_norm(a[0], at["p"], dims_arg(a[0], at), keepdim=at.get("keepdim", False))
PY["logsumexp"] = lambda a, at: torch.logsumexp(a[0], dims_arg(a[0], at), keepdim=at.get("keepdim", False))
PY["any"] = lambda a, at: torch.any(a[0], dims_arg(a[0], at), keepdim=at.get("keepdim", False))
PY["all"] = lambda a, at: torch.all(a[0], dims_arg(a[0], at), keepdim=at.get("keepdim", False))
PY["count_nonzero"] = lambda a, at: torch.count_nonzero(a[0], dims_arg(a[0], at))
PY["cumsum"] = lambda a, at: torch.cumsum(a[0], at["dim"], dtype=dt_arg(at))
PY["cumprod"] = lambda a, at: torch.cumprod(a[0], at["dim"], dtype=dt_arg(at))
PY["cummax"] = lambda a, at: tuple(torch.cummax(a[0], at["dim"]))
PY["cummin"] = lambda a, at: tuple(torch.cummin(a[0], at["dim"]))
PY["sort"] = lambda a, at: tuple(torch.sort(a[0], dim=at["dim"], descending=at["descending"], stable=True))
PY["argsort"] = lambda a, at: torch.argsort(a[0], dim=at["dim"], descending=at["descending"], stable=True)
PY["topk"] = lambda a, at: tuple(torch.topk(a[0], at["k"], at["dim"], largest=at["largest"], sorted=True))
PY["kthvalue"] = lambda a, at: tuple(torch.kthvalue(a[0], at["k"], at["dim"], keepdim=at.get("keepdim", False)))
PY["median"] = lambda a, at: torch.median(a[0])
PY["median_dim"] = lambda a, at: tuple(torch.median(a[0], at["dim"], keepdim=at.get("keepdim", False)))
PY["nanmedian"] = lambda a, at: torch.nanmedian(a[0])
PY["unique"] = lambda a, at: tuple(torch.unique(a[0], sorted=True, return_inverse=True, return_counts=True))
PY["softmax"] = lambda a, at: torch.softmax(a[0], at["dim"], dtype=dt_arg(at))
PY["log_softmax"] = lambda a, at: torch.log_softmax(a[0], at["dim"], dtype=dt_arg(at))


def reduce_cases(op, dtypes, kind="n", lo=None, hi=None, extra=None, tol=RED_TOL):
    ex = extra or {}

    def X(shape, dt, layout="c", k=None):
        return T(shape, dt, k or kind, layout, lo=lo, hi=hi)

    f = dtypes[0]
    add(op, [X([4, 5, 6], f)], dict(ex), tol=tol)
    add(op, [X([4, 5, 6], f)], dict(ex, dims=[1]), tol=tol)
    add(op, [X([4, 5, 6], f)], dict(ex, dims=[0, 2], keepdim=True), tol=tol)
    add(op, [X([4, 5, 6], f)], dict(ex, dims=[-1]), tol=tol)
    add(op, [X([4, 5, 6], f)], dict(ex, dims=[0]), tol=tol)
    add(op, [X([4, 5, 6], f)], dict(ex, keepdim=True), tol=tol)
    add(op, [X([300], f)], dict(ex), tol=tol)  # long contiguous run: vector body + tail
    add(op, [X([3, 257], f)], dict(ex, dims=[1]), tol=tol)
    add(op, [X([3, 4, 5], f, "T")], dict(ex, dims=[1]), tol=tol)
    add(op, [X([3, 4, 5], f, "X")], dict(ex, dims=[0, 1]), tol=tol)
    add(op, [X([4, 5], f, "E")], dict(ex, dims=[0]), tol=tol)
    add(op, [X([4, 5], f, "F")], dict(ex, dims=[1], keepdim=True), tol=tol)
    add(op, [X([4, 5], f, "S")], dict(ex), tol=tol)
    add(op, [X([], f)], dict(ex), tol=tol)
    add(op, [X([], f)], dict(ex, dims=[0], keepdim=True), tol=tol)
    add(op, [X([0, 3], f)], dict(ex, dims=[1]), tol=tol)
    add(op, [X([0, 3], f)], dict(ex, dims=[0]), tol=tol)
    add(op, [X([0, 3], f)], dict(ex), tol=tol)
    for dt in dtypes[1:]:
        add(op, [X([3, 7], dt)], dict(ex, dims=[1]), tol=tol)
        add(op, [X([3, 7], dt, "T")], dict(ex), tol=tol)
    if f in FLOATS:
        add(op, [T([4, 5], f, "sp", values=RED_SPECIALS)], dict(ex, dims=[1]), tol=tol)
        add(op, [T([20], f, "sp", values=RED_SPECIALS)], dict(ex), tol=tol)


ALL = ["f32", "f64", "f16", "bf16", "i32", "i64", "i16", "i8", "u8", "bool"]
reduce_cases("sum", ALL)
add("sum", [T([3, 4], "i32")], {"dims": [1], "dtype": "f64"}, tol=RED_TOL)
add("sum", [T([3, 4], "f16")], {"dims": [0], "dtype": "f32"}, tol=RED_TOL)
add("sum", [T([3, 4], "f32")], {"dtype": "f64"}, tol=RED_TOL)
add("sum", [T([1000], "f32", "u", lo=0, hi=1)], {}, tol=RED_TOL)
reduce_cases("mean", ["f32", "f64", "f16", "bf16"])
add("mean", [T([1000], "f32", "u", lo=0, hi=1)], {}, tol=RED_TOL)
reduce_cases("prod", ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"], "u", 0.6, 1.6)
add("prod", [T([3, 4], "i32", "i", lo=-3, hi=3)], {"dims": [1]}, tol=0)
add("prod", [T([3, 4], "i16", "i", lo=-3, hi=3)], {"dims": [1], "dtype": "f32"}, tol=RED_TOL)
for op in ("amax", "amin"):
    reduce_cases(op, ALL, tol=0)
for op in ("argmax", "argmin"):
    for dt in ("f32", "f64", "f16", "i32", "u8"):
        add(op, [T([4, 5, 6], dt, "d")], {}, tol=0)
        add(op, [T([4, 5, 6], dt, "d")], {"dim": 1}, tol=0)
        add(op, [T([4, 5, 6], dt, "d", "T")], {"dim": -1, "keepdim": True}, tol=0)
    add(op, [T([3, 8], "i32", "i", lo=0, hi=2)], {"dim": 1}, tol=0)  # ties: first occurrence
    add(op, [T([3, 8], "bool")], {"dim": 1}, tol=0)
    add(op, [T([4, 5], "f32", "sp")], {"dim": 1}, tol=0)  # NaN wins
    add(op, [T([4, 5], "f32", "d", "F")], {"dim": 0}, tol=0)
    add(op, [T([4, 5], "f32", "d", "E")], {"dim": 0}, tol=0)
    add(op, [T([300], "f32", "d")], {}, tol=0)
    add(op, [T([], "f32")], {}, tol=0)
    add(op, [T([], "f32")], {"dim": 0}, tol=0)
    add(op, [T([0, 3])], {"dim": 1}, tol=0)
for op in ("max_dim", "min_dim"):
    for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "u8"):
        add(op, [T([4, 5, 6], dt, "d")], {"dim": 1}, tol=0)
    add(op, [T([4, 5, 6], "f32", "d", "X")], {"dim": 0, "keepdim": True}, tol=0)
    add(op, [T([4, 5], "f32", "sp")], {"dim": 1}, tol=0)
    add(op, [T([3, 8], "i32", "i", lo=0, hi=2)], {"dim": -1}, tol=0)
    add(op, [T([3, 8], "bool")], {"dim": 1}, tol=0)
    add(op, [T([], "f32")], {"dim": 0}, tol=0)
    add(op, [T([0, 3])], {"dim": 1}, tol=0)
for op in ("max", "min"):
    for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "i8", "u8", "bool"):
        add(op, [T([4, 7], dt)], tol=0)
    add(op, [T([300], "f32", "d")], tol=0)
    add(op, [T([4, 5], "f32", "sp")], tol=0)
    add(op, [T([3, 4], "f32", layout="X")], tol=0)
    add(op, [T([], "i32")], tol=0)
for op in ("var", "std", "var_mean"):
    for c in (1, 0, 2):
        if c == 1:
            reduce_cases(op, ["f32", "f64", "f16", "bf16"], extra={"correction": float(c)})
        add(op, [T([4, 5, 6], "f32")], {"correction": float(c), "dims": [1]}, tol=RED_TOL)
        add(op, [T([4, 5, 6], "f64", layout="T")], {"correction": float(c), "dims": [0, 2], "keepdim": True}, tol=RED_TOL)
    add(op, [T([1], "f32")], {"correction": 1.0}, tol=RED_TOL)  # N - correction = 0 -> nan/inf
    add(op, [T([1000], "f32", "n", scale=3)], {"correction": 1.0}, tol=RED_TOL)
    add(op, [T([100], "f32", "n", scale=0.01)], {"correction": 1.0}, tol=RED_TOL)
    add(op, [T([4, 5], "f32", "n", scale=1e20)], {"correction": 1.0, "dims": [1]}, tol=RED_TOL)  # squares overflow f32
    add(op, [T([50], "f32", "n", scale=1.0)], {"correction": 1.0}, tol=RED_TOL)
for p in (2.0, 1.0, math.inf, -math.inf, 0.0, 3.0):
    add("norm", [T([4, 5, 6], "f32")], {"p": p}, tol=RED_TOL)
    add("norm", [T([4, 5, 6], "f32", layout="T")], {"p": p, "dims": [1]}, tol=RED_TOL)
    add("norm", [T([4, 5], "f64", layout="F")], {"p": p, "dims": [0], "keepdim": True}, tol=RED_TOL)
    add("norm", [T([3, 7], "f16")], {"p": p, "dims": [1]}, tol=RED_TOL)
reduce_cases("norm", ["f32", "f64", "f16", "bf16"], extra={"p": 2.0})
for args in ({"dims": [1]}, {"dims": [0, 2], "keepdim": True}, {"dims": [-1]}, {"dims": [0, 1, 2]}):
    add("logsumexp", [T([4, 5, 6], "f32", scale=5)], args, tol=RED_TOL)
    add("logsumexp", [T([4, 5, 6], "f64", layout="X", scale=5)], args, tol=RED_TOL)
add("logsumexp", [T([3, 7], "f16")], {"dims": [1]}, tol=RED_TOL)
add("logsumexp", [T([3, 7], "bf16")], {"dims": [1]}, tol=RED_TOL)
add("logsumexp", [T([4, 5], "f32", "sp")], {"dims": [1]}, tol=RED_TOL)
add("logsumexp", [T([2, 3], "f32", "v", values=[-math.inf] * 3 + [math.inf, 1, 2])], {"dims": [1]}, tol=RED_TOL)
add("logsumexp", [T([3, 300], "f32", scale=10)], {"dims": [1]}, tol=RED_TOL)
add("logsumexp", [T([], "f32")], {"dims": [0]}, tol=RED_TOL)
add("logsumexp", [T([0, 3], "f32")], {"dims": [0]}, tol=RED_TOL)
add("logsumexp", [T([3, 4], "i32")], {"dims": [1]}, tol=RED_TOL)
for op in ("any", "all"):
    reduce_cases(op, ["bool", "f32", "i32", "u8", "f16", "i64"], "i", 0, 1, tol=0)
    add(op, [T([4, 5], "f32", "sp")], {"dims": [1]}, tol=0)
    add(op, [T([3, 4], "bool", "v", values=[1] * 12)], {"dims": [1]}, tol=0)
    add(op, [T([3, 4], "bool", "v", values=[0] * 12)], {"dims": [1]}, tol=0)
reduce_cases("count_nonzero", ["f32", "i32", "bool", "f64", "u8", "f16"], "i", 0, 2, tol=0)
add("count_nonzero", [T([4, 5], "f32", "sp")], {"dims": [1]}, tol=0)
for op in ("cumsum", "cumprod"):
    lo, hi = (0.5, 1.5) if op == "cumprod" else (-3, 3)
    for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool", "i8"):
        add(op, [T([4, 6], dt, "u", lo=lo, hi=hi)], {"dim": 1}, tol=RED_TOL)
    add(op, [T([4, 6], "f32", "u", "T", lo, hi)], {"dim": 0}, tol=RED_TOL)
    add(op, [T([3, 4, 5], "f32", "u", "X", lo, hi)], {"dim": -2}, tol=RED_TOL)
    add(op, [T([4, 6], "f32", "u", "E", lo, hi)], {"dim": 0}, tol=RED_TOL)
    add(op, [T([4, 6], "f32", "u", "F", lo, hi)], {"dim": 1}, tol=RED_TOL)
    add(op, [T([300], "f32", "u", lo=lo, hi=hi)], {"dim": 0}, tol=RED_TOL)
    add(op, [T([4, 6], "i32", "i", lo=-3, hi=3)], {"dim": 1, "dtype": "f64"}, tol=RED_TOL)
    add(op, [T([4, 6], "f16", "u", lo=lo, hi=hi)], {"dim": 1, "dtype": "f32"}, tol=RED_TOL)
    add(op, [T([4, 5], "f32", "sp")], {"dim": 1}, tol=RED_TOL)
    add(op, [T([], "f32")], {"dim": 0}, tol=RED_TOL)
    add(op, [T([0, 3], "f32")], {"dim": 0}, tol=RED_TOL)
    add(op, [T([0, 3], "f32")], {"dim": 1}, tol=RED_TOL)
for op in ("cummax", "cummin"):
    for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"):
        add(op, [T([4, 8], dt, "i", lo=-3, hi=3)], {"dim": 1}, tol=0)  # ties: last occurrence
    add(op, [T([4, 6], "f32", "n", "T")], {"dim": 0}, tol=0)
    add(op, [T([3, 4, 5], "f32", "n", "X")], {"dim": 2}, tol=0)
    add(op, [T([4, 5], "f32", "sp")], {"dim": 1}, tol=0)
    add(op, [T([8, 1], "f32", "v", values=[1, math.nan, 3, 0, math.nan, 5, -1, 2])], {"dim": 0}, tol=0)
    add(op, [T([], "f32")], {"dim": 0}, tol=0)
    add(op, [T([0, 3], "f32")], {"dim": 1}, tol=0)
for op in ("sort", "argsort"):
    for desc in (False, True):
        at = {"dim": -1, "descending": desc}
        for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "i16", "i8", "u8", "bool"):
            add(op, [T([3, 9], dt, "i", lo=-4, hi=4)], at, tol=0)  # ties: stable order
        add(op, [T([4, 5], "f32", "sp")], at, tol=0)
        add(op, [T([4, 5, 6], "f32", "d", "X")], dict(at, dim=1), tol=0)
        add(op, [T([4, 6], "f32", "d", "T")], dict(at, dim=0), tol=0)
        add(op, [T([4, 6], "f64", "d", "E")], dict(at, dim=0), tol=0)
        add(op, [T([4, 6], "i32", "d", "F")], at, tol=0)
        add(op, [T([300], "f32", "d")], at, tol=0)
        add(op, [T([], "f32")], dict(at, dim=0), tol=0)
        add(op, [T([0, 3], "f32")], at, tol=0)
        add(op, [T([3, 0], "f32")], at, tol=0)
for largest in (True, False):
    for k, dim in ((3, -1), (1, 0), (6, 1), (0, 1)):
        add("topk", [T([4, 6], "f32", "d")], {"k": k, "dim": dim, "largest": largest}, tol=0)
    for dt in ("f64", "f16", "bf16", "i32", "i64", "u8"):
        add("topk", [T([3, 9], dt, "d")], {"k": 4, "dim": 1, "largest": largest}, tol=0)
    add("topk", [T([4, 5, 6], "f32", "d", "X")], {"k": 2, "dim": 1, "largest": largest}, tol=0)
    add("topk", [T([300], "f32", "d")], {"k": 10, "dim": 0, "largest": largest}, tol=0)
    add("topk", [T([], "f32")], {"k": 1, "dim": 0, "largest": largest}, tol=0)
    add("topk", [T([0, 5], "f32")], {"k": 2, "dim": 1, "largest": largest}, tol=0)
    add("topk", [T([2, 5], "f32", "v", values=[1, math.nan, 3, 0, 2, math.nan, math.inf, -math.inf, 0, 1])], {"k": 2, "dim": 1, "largest": largest}, tol=0)
for k, dim, kd in ((1, -1, False), (3, 1, True), (4, 0, False), (6, 1, False)):
    add("kthvalue", [T([4, 6], "f32", "d")], {"k": k, "dim": dim, "keepdim": kd}, tol=0)
for dt in ("f64", "f16", "bf16", "i32", "i64", "u8"):
    add("kthvalue", [T([3, 9], dt, "d")], {"k": 5, "dim": 1}, tol=0)
add("kthvalue", [T([4, 5, 6], "f32", "d", "X")], {"k": 2, "dim": 0}, tol=0)
add("kthvalue", [T([4, 6], "f32", "d", "E")], {"k": 2, "dim": 1}, tol=0)
add("kthvalue", [T([], "f32")], {"k": 1, "dim": 0}, tol=0)
add("kthvalue", [T([2, 4], "f32", "v", values=[3, math.nan, 1, 2, 5, 4, 6, 7])], {"k": 4, "dim": 1}, tol=0)
for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "u8"):
    add("median", [T([4, 6], dt, "d")], tol=0)
    add("median", [T([5, 3], dt, "d", "T")], tol=0)
    add("median_dim", [T([4, 6], dt, "d")], {"dim": 1}, tol=0)
add("median", [T([4, 5], "f32", "sp")], tol=0)
add("median", [T([], "f32")], tol=0)
add("median", [T([301], "f32", "d")], tol=0)
add("median_dim", [T([4, 5, 6], "f32", "d", "X")], {"dim": 0, "keepdim": True}, tol=0)
add("median_dim", [T([4, 5], "f32", "d", "F")], {"dim": -1}, tol=0)
add("median_dim", [T([2, 5], "f32", "v", values=[1, math.nan, 3, 0, 2, 5, 4, 6, 7, 8])], {"dim": 1}, tol=0)
add("median_dim", [T([], "f32")], {"dim": 0}, tol=0)
add("nanmedian", [T([2, 5], "f32", "v", values=[1, math.nan, 3, 0, 2, 5, 4, math.nan, 7, 8])], tol=0)
add("nanmedian", [T([4, 6], "f64", "d")], tol=0)
add("nanmedian", [T([3], "f32", "v", values=[math.nan] * 3)], tol=0)
for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "i8", "u8", "bool"):
    add("unique", [T([3, 7], dt, "i", lo=-3, hi=3)], null=False, tol=0)
add("unique", [T([3, 7], "i32", "i", lo=-3, hi=3, layout="X")], null=False, tol=0)
add("unique", [T([4, 4], "i64", "i", lo=-3, hi=3, layout="E")], null=False, tol=0)
add("unique", [T([], "f32")], null=False, tol=0)
add("unique", [T([0], "f32")], null=False, tol=0)
add("unique", [T([6], "f32", "v", values=[1.0, -0.0, 0.0, 2.0, 1.0, -1.0])], null=False, tol=0)
for op in ("softmax", "log_softmax"):
    for dim in (-1, 0, 1):
        add(op, [T([4, 5, 6], "f32", scale=3)], {"dim": dim}, tol=RED_TOL)
    add(op, [T([3, 300], "f32", scale=5)], {"dim": 1}, tol=RED_TOL)
    add(op, [T([3, 300], "f32", scale=5)], {"dim": 0}, tol=RED_TOL)
    for dt in ("f64", "f16", "bf16"):
        add(op, [T([3, 7], dt, scale=3)], {"dim": 1}, tol=RED_TOL)
    add(op, [T([3, 7], "f16", scale=3)], {"dim": 1, "dtype": "f32"}, tol=RED_TOL)
    add(op, [T([3, 7], "f32", scale=3)], {"dim": 1, "dtype": "f64"}, tol=RED_TOL)
    add(op, [T([4, 5, 6], "f32", "n", "X")], {"dim": 1}, tol=RED_TOL)
    add(op, [T([4, 5], "f32", "n", "T")], {"dim": 1}, tol=RED_TOL)
    add(op, [T([4, 5], "f32", "n", "E")], {"dim": 0}, tol=RED_TOL)
    add(op, [T([4, 5], "f64", "n", "F")], {"dim": -1}, tol=RED_TOL)
    add(op, [T([3, 3], "f32", "v", values=[-math.inf, 0, 1, -math.inf, -math.inf, -math.inf, 1000, 1000, -1000])], {"dim": 1}, tol=RED_TOL)
    add(op, [T([4, 5], "f32", "sp")], {"dim": 1}, tol=RED_TOL)
    add(op, [T([], "f32")], {"dim": 0}, tol=RED_TOL)
    add(op, [T([0, 3], "f32")], {"dim": 1}, tol=RED_TOL)
    add(op, [T([3, 0], "f32")], {"dim": 1}, tol=RED_TOL)

# ---- indexing --------------------------------------------------------------------------------
HR = np.random.default_rng(20240611)  # for index values built at description time


def perm_index(shape, dim, n):
    """Index values (row-major) of `shape`, distinct along dim, each in [0, n)."""
    arr = np.zeros(shape, np.int64)
    moved = np.moveaxis(arr, dim, -1)
    for pos in np.ndindex(*moved.shape[:-1]):
        moved[pos] = HR.permutation(n)[: shape[dim]]
    return arr.flatten().tolist()


def rand_index(shape, lo, hi):
    return HR.integers(lo, hi + 1, int(np.prod(shape)) if shape else 1).tolist()


def IDX(shape, lo, hi, dt="i64"):
    return T(shape, dt, "v", values=rand_index(shape, lo, hi))


def parse_index_spec(spec, args):
    """"1,::2,None,...,T2" -> a tuple for torch indexing (T<k> = input k)."""
    out = []
    for item in spec.split(","):
        if item == "None":
            out.append(None)
        elif item == "...":
            out.append(Ellipsis)
        elif item.startswith("T"):
            out.append(args[int(item[1:])])
        elif ":" in item:
            parts = [int(p) if p else None for p in item.split(":")]
            parts += [None] * (3 - len(parts))
            out.append(slice(*parts))
        else:
            out.append(int(item))
    return tuple(out)


def _setitem(a, at):
    y = a[0].clone()
    y[parse_index_spec(at["idx"], a)] = a[1]
    return y


PY["index_select"] = lambda a, at: torch.index_select(a[0], at["dim"], a[1])
PY["gather"] = lambda a, at: torch.gather(a[0], at["dim"], a[1])
PY["scatter"] = lambda a, at: (torch.scatter(a[0], at["dim"], a[1], a[2], reduce=at["reduce"]) if at.get("reduce") else torch.scatter(a[0], at["dim"], a[1], a[2]))
PY["scatter_add"] = lambda a, at: torch.scatter_add(a[0], at["dim"], a[1], a[2])
PY["scatter_reduce"] = lambda a, at: torch.scatter_reduce(a[0], at["dim"], a[1], a[2], at["reduce"], include_self=at["include_self"])
PY["index_add"] = lambda a, at: torch.index_add(a[0], at["dim"], a[1], a[2], alpha=a[3])
PY["index_copy"] = lambda a, at: torch.index_copy(a[0], at["dim"], a[1], a[2])
PY["index_fill"] = lambda a, at: torch.index_fill(a[0], at["dim"], a[1], a[2])
PY["index_put"] = lambda a, at: torch.index_put(a[0], tuple(a[2:]), a[1], accumulate=at["accumulate"])
PY["masked_select"] = lambda a, at: torch.masked_select(a[0], a[1])
PY["masked_scatter"] = lambda a, at: torch.masked_scatter(a[0], a[1], a[2])
PY["nonzero"] = lambda a, at: torch.nonzero(a[0])
PY["take"] = lambda a, at: torch.take(a[0], a[1])
PY["take_along_dim"] = lambda a, at: torch.take_along_dim(a[0], a[1], at.get("dim"))
PY["select"] = lambda a, at: torch.select(a[0], at["dim"], at["index"]).contiguous()
PY["narrow"] = lambda a, at: torch.narrow(a[0], at["dim"], at["start"], at["length"])
PY["getitem"] = lambda a, at: a[0][parse_index_spec(at["idx"], a)]
PY["setitem"] = _setitem
PY["tril"] = lambda a, at: torch.tril(a[0], at.get("diagonal", 0))
PY["triu"] = lambda a, at: torch.triu(a[0], at.get("diagonal", 0))
PY["diag"] = lambda a, at: torch.diag(a[0], at.get("diagonal", 0))
PY["diag_embed"] = lambda a, at: torch.diag_embed(a[0], at["offset"], at["dim1"], at["dim2"])
PY["diagonal"] = lambda a, at: torch.diagonal(a[0], at["offset"], at["dim1"], at["dim2"])
PY["one_hot"] = lambda a, at: F.one_hot(a[0], at["num_classes"])
PY["embedding"] = lambda a, at: F.embedding(a[0], a[1])

for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"):
    add("index_select", [T([5, 4], dt), IDX([6], 0, 4)], {"dim": 0}, tol=0)
add("index_select", [T([5, 4], layout="T"), IDX([3], 0, 3)], {"dim": 1}, tol=0)
add("index_select", [T([3, 4, 5], layout="X"), IDX([4], 0, 3, "i32")], {"dim": -2}, tol=0)
add("index_select", [T([5, 4], layout="E"), IDX([2], 0, 4)], {"dim": 0}, tol=0)
add("index_select", [T([5, 4], layout="F"), IDX([0], 0, 3)], {"dim": 1}, tol=0)
add("index_select", [T([5, 4]), IDX([], 0, 3)], {"dim": 1}, tol=0)
add("index_select", [T([]), IDX([1], 0, 0)], {"dim": 0}, tol=0)
add("index_select", [T([0, 4]), IDX([2], 0, 3)], {"dim": 1}, tol=0)

for dt in ("f32", "f64", "f16", "i32", "i64", "bool"):
    add("gather", [T([4, 5], dt), IDX([3, 5], 0, 3)], {"dim": 0}, tol=0)
add("gather", [T([4, 5]), IDX([4, 7], 0, 4)], {"dim": 1}, tol=0)
add("gather", [T([3, 4, 5], layout="X"), IDX([2, 4, 3], 0, 4, "i64")], {"dim": -1}, tol=0)
add("gather", [T([4, 5], layout="T"), IDX([2, 3], 0, 3)], {"dim": 0}, tol=0)
add("gather", [T([4, 5], layout="E"), IDX([4, 2], 0, 4)], {"dim": 1}, tol=0)
add("gather", [T([]), IDX([], 0, 0)], {"dim": 0}, tol=0)
add("gather", [T([4, 5]), IDX([0, 5], 0, 3)], {"dim": 0}, tol=0)

for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "bool"):
    add("scatter", [T([5, 4], dt), T([3, 4], "i64", "v", values=perm_index([3, 4], 0, 5)), T([3, 4], dt)], {"dim": 0}, tol=0)
add("scatter", [T([4, 6]), T([4, 3], "i64", "v", values=perm_index([4, 3], 1, 6)), T([4, 5], layout="T")], {"dim": 1}, tol=0)
add("scatter", [T([4, 6], layout="F"), T([2, 3], "i64", "v", values=perm_index([2, 3], 1, 6)), T([4, 5], layout="S")], {"dim": 1}, tol=0)
add("scatter", [T([5, 4]), T([3, 4], "i64", "v", values=perm_index([3, 4], 0, 5)), S(-2.5)], {"dim": 0}, tol=0)
add("scatter", [T([5, 4], "i32"), T([3, 4], "i64", "v", values=perm_index([3, 4], 0, 5)), S(7)], {"dim": 0}, tol=0)
for red in ("add", "multiply"):
    add("scatter", [T([5, 4]), IDX([6, 4], 0, 4), T([6, 4])], {"dim": 0, "reduce": red}, tol=RED_TOL)
    add("scatter", [T([5, 4], "i64"), IDX([6, 4], 0, 4), T([6, 4], "i64")], {"dim": 0, "reduce": red}, tol=0)
    add("scatter", [T([5, 4]), IDX([6, 4], 0, 4), S(1.5)], {"dim": 0, "reduce": red}, tol=RED_TOL)
add("scatter", [T([]), T([], "i64", "v", values=[0]), T([])], {"dim": 0}, tol=0)
add("scatter", [T([5, 4]), T([0, 4], "i64"), T([0, 4])], {"dim": 0}, tol=0)

for dt in ("f32", "f64", "f16", "bf16", "i32", "i64"):
    add("scatter_add", [T([5, 4], dt), IDX([7, 4], 0, 4), T([7, 4], dt)], {"dim": 0}, tol=RED_TOL)
add("scatter_add", [T([4, 5], layout="T"), IDX([4, 9], 0, 4), T([4, 10], layout="S")], {"dim": 1}, tol=RED_TOL)
add("scatter_add", [T([3, 4, 5], layout="X"), IDX([3, 4, 2], 0, 4), T([3, 4, 5])], {"dim": 2}, tol=RED_TOL)
add("scatter_add", [T([6]), IDX([50], 0, 5), T([50])], {"dim": 0}, tol=RED_TOL)
add("scatter_add", [T([]), T([], "i64", "v", values=[0]), T([])], {"dim": 0}, tol=RED_TOL)
add("scatter_add", [T([5, 4]), T([0, 4], "i64"), T([0, 4])], {"dim": 0}, tol=RED_TOL)

for red in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
        at = {"dim": 0, "reduce": red, "include_self": inc}
        add("scatter_reduce", [T([5, 4], "f32", "u", lo=0.5, hi=2), IDX([7, 4], 0, 4), T([7, 4], "f32", "u", lo=0.5, hi=2)], at, tol=RED_TOL)
        add("scatter_reduce", [T([5, 4], "i64"), IDX([7, 4], 0, 4), T([7, 4], "i64", "i", lo=-3, hi=3)], at, tol=RED_TOL)
        add("scatter_reduce", [T([4, 5], "f64", layout="T"), IDX([4, 8], 0, 4), T([4, 8], "f64", layout="F")], dict(at, dim=1), tol=RED_TOL)
    add("scatter_reduce", [T([5, 4], "f16", "u", lo=0.5, hi=2), IDX([7, 4], 0, 4), T([7, 4], "f16", "u", lo=0.5, hi=2)], {"dim": 0, "reduce": red, "include_self": True}, tol=RED_TOL)
    add("scatter_reduce", [T([5, 4], "i32"), IDX([7, 4], 0, 4), T([7, 4], "i32")], {"dim": 0, "reduce": red, "include_self": False}, tol=RED_TOL)

for dt in ("f32", "f64", "f16", "i32", "i64"):
    add("index_add", [T([5, 4], dt), IDX([6], 0, 4), T([6, 4], dt), S(1)], {"dim": 0}, tol=RED_TOL)
add("index_add", [T([5, 4]), IDX([6], 0, 4), T([6, 4]), S(-2.5)], {"dim": 0}, tol=RED_TOL)
add("index_add", [T([4, 5], layout="T"), IDX([3], 0, 4, "i32"), T([4, 3], layout="F"), S(2)], {"dim": 1}, tol=RED_TOL)
add("index_add", [T([3, 4, 5], layout="X"), IDX([6], 0, 3), T([3, 6, 5]), S(0.5)], {"dim": 1}, tol=RED_TOL)
add("index_add", [T([5, 4]), IDX([0], 0, 4), T([0, 4]), S(1)], {"dim": 0}, tol=RED_TOL)
add("index_add", [T([]), IDX([1], 0, 0), T([]), S(1)], {"dim": 0}, tol=RED_TOL)

for dt in ("f32", "i64", "f16", "bool"):
    add("index_copy", [T([5, 4], dt), T([3], "i64", "v", values=[4, 0, 2]), T([3, 4], dt)], {"dim": 0}, tol=0)
add("index_copy", [T([4, 5], layout="T"), T([2], "i64", "v", values=[3, 1]), T([4, 2], layout="F")], {"dim": 1}, tol=0)
add("index_copy", [T([5, 4]), T([0], "i64"), T([0, 4])], {"dim": 0}, tol=0)
for dt, v in (("f32", -1.5), ("i32", 7), ("bool", True), ("f16", math.inf)):
    add("index_fill", [T([5, 4], dt), IDX([3], 0, 3), S(v)], {"dim": 1}, tol=0)
add("index_fill", [T([4, 5], layout="X"), IDX([2], -4, 3), S(0.0)], {"dim": 0}, tol=0)
add("index_fill", [T([4, 5]), IDX([0], 0, 3), S(0.0)], {"dim": 0}, tol=0)

_pos = HR.permutation(20)[:6]
_r, _c = (_pos // 5).tolist(), (_pos % 5).tolist()
for dt in ("f32", "f64", "f16", "i32", "i64", "bool"):
    add("index_put", [T([4, 5], dt), T([6], dt), T([6], "i64", "v", values=_r), T([6], "i64", "v", values=_c)], {"accumulate": False}, tol=0)
add("index_put", [T([4, 5]), T([2, 5]), T([2], "i64", "v", values=[3, -4])], {"accumulate": False}, tol=0)
add("index_put", [T([4, 5], layout="T"), T([]), T([2], "i64", "v", values=[0, 2])], {"accumulate": False}, tol=0)
add("index_put", [T([4, 5], layout="F"), T([5]), T([3], "i64", "v", values=[1, 2, 3])], {"accumulate": False}, tol=0)
add("index_put", [T([4, 5]), T([3, 1]), T([3, 1], "i64", "v", values=[0, 1, 3]), T([1, 2], "i64", "v", values=[4, 0])], {"accumulate": False}, tol=0)
add("index_put", [T([4, 5]), T([7]), IDX([7], 0, 3), IDX([7], 0, 4)], {"accumulate": True}, tol=RED_TOL)
add("index_put", [T([4, 5], "i64"), T([7], "i64"), IDX([7], 0, 3), IDX([7], 0, 4)], {"accumulate": True}, tol=0)
add("index_put", [T([6]), T([9]), IDX([9], -6, 5)], {"accumulate": True}, tol=RED_TOL)
add("index_put", [T([4, 5]), T([0, 5]), T([0], "i64")], {"accumulate": False}, tol=0)

for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"):
    add("masked_select", [T([3, 5], dt), T([3, 5], "bool")], null=False, tol=0)
add("masked_select", [T([3, 5], layout="T"), T([5], "bool")], null=False, tol=0)
add("masked_select", [T([3, 1], layout="F"), T([3, 4], "bool", layout="X")], null=False, tol=0)
add("masked_select", [T([3, 4], layout="E"), T([3, 4], "bool")], null=False, tol=0)
add("masked_select", [T([]), T([], "bool", "v", values=[1])], null=False, tol=0)
add("masked_select", [T([0, 3]), T([3], "bool")], null=False, tol=0)
add("masked_select", [T([3, 4]), T([3, 4], "bool", "v", values=[0] * 12)], null=False, tol=0)
for dt in ("f32", "i64", "f16", "bool"):
    add("masked_scatter", [T([3, 4], dt), T([3, 4], "bool"), T([14], dt)], tol=0)
add("masked_scatter", [T([3, 4], layout="T"), T([4], "bool"), T([3, 5], layout="S")], tol=0)
add("masked_scatter", [T([0, 4]), T([4], "bool"), T([2])], tol=0)

for dt in ("f32", "f64", "f16", "i32", "i64", "u8", "bool"):
    add("nonzero", [T([4, 5], dt, "i", lo=0, hi=2)], null=False, tol=0)
add("nonzero", [T([2, 3, 4], "i32", "i", lo=0, hi=1, layout="X")], null=False, tol=0)
add("nonzero", [T([3, 4], "f32", "sp", layout="T")], null=False, tol=0)
add("nonzero", [T([20], "f32", "sp")], null=False, tol=0)
add("nonzero", [T([], "i32", "v", values=[3])], null=False, tol=0)
add("nonzero", [T([], "i32", "v", values=[0])], null=False, tol=0)
add("nonzero", [T([0, 3], "f32")], null=False, tol=0)
add("nonzero", [T([3, 4], "f32", "v", values=[0] * 12)], null=False, tol=0)

for dt in ("f32", "f64", "i32", "f16", "bool"):
    add("take", [T([3, 4], dt), IDX([2, 3], -12, 11)], tol=0)
add("take", [T([3, 4], layout="T"), IDX([5], 0, 11)], tol=0)
add("take", [T([3, 4], layout="X"), IDX([5], 0, 11)], tol=0)
add("take", [T([]), IDX([3], 0, 0)], tol=0)
add("take", [T([3, 4]), IDX([0], 0, 0)], tol=0)
add("take_along_dim", [T([3, 4]), IDX([3, 2], 0, 3)], {"dim": 1}, tol=0)
add("take_along_dim", [T([3, 4], "i64", layout="T"), IDX([1, 4], 0, 2)], {"dim": 0}, tol=0)
add("take_along_dim", [T([3, 4], layout="F"), IDX([5], 0, 11)], tol=0)

for dt in ("f32", "i64", "bool", "bf16"):
    add("select", [T([3, 4, 5], dt)], {"dim": 1, "index": 2}, tol=0)
add("select", [T([3, 4, 5], layout="X")], {"dim": -1, "index": -1}, tol=0)
add("select", [T([3, 4], layout="T")], {"dim": 0, "index": 0}, tol=0)
add("select", [T([4])], {"dim": 0, "index": -2}, tol=0)
add("select", [T([0, 4])], {"dim": 1, "index": 3}, tol=0)
for dt in ("f32", "i32", "f16"):
    add("narrow", [T([4, 6], dt)], {"dim": 1, "start": 1, "length": 3}, tol=0)
add("narrow", [T([4, 6], layout="T")], {"dim": 0, "start": -3, "length": 2}, tol=0)
add("narrow", [T([4, 6], layout="F")], {"dim": 1, "start": 6, "length": 0}, tol=0)
add("narrow", [T([4, 6])], {"dim": 0, "start": 0, "length": 4}, tol=0)

GETITEM = [
    ("1", []), ("1:3", []), ("::2,1", []), ("-1,...", []), ("None,1:", []), ("...,None", []), ("1:-1,::3", []),
    ("0,T1", [IDX([3], 0, 4)]), ("T1", [IDX([2, 2], -4, 3)]), ("T1,T2", [IDX([3], 0, 3), IDX([3], 0, 4)]),
    ("1:3,T1", [IDX([4], 0, 4)]), ("T1", [T([4, 5], "bool")]), ("T1", [T([4], "bool")]),
]
for spec, idx in GETITEM:
    add("getitem", [T([4, 5], "f32")] + idx, {"idx": spec}, null=not any(t.dtype == "bool" for t in idx), tol=0)
add("getitem", [T([4, 5], "i32", layout="X"), IDX([3], 0, 4)], {"idx": "1:,T1"}, tol=0)
add("getitem", [T([4, 5], "f16", layout="T")], {"idx": "...,1"}, tol=0)
add("getitem", [T([2, 3, 4], "f32", layout="X")], {"idx": "1,...,::2"}, tol=0)
SETITEM = [
    ("1:3,::2", [T([2, 3])]), ("1", [T([5])]), ("...,0", [S(-1.0)]), ("::2,1:4", [T([3])]),
    ("0,T2", [T([3]), IDX([3], 0, 4)]), ("T2", [S(9.0), T([4, 5], "bool")]), ("T2,T3", [T([3]), IDX([3], 0, 3), IDX([3], 0, 4)]),
    ("None,1", [T([1, 5])]), ("2:0", [S(1.0)]),
]
for spec, rest in SETITEM:
    add("setitem", [T([4, 5], "f32")] + rest, {"idx": spec}, null=False, tol=0)
add("setitem", [T([4, 5], "f32", layout="T"), T([4, 2], "f32")], {"idx": "...,1:3"}, null=False, tol=0)
add("setitem", [T([4, 5], "i32", layout="X"), S(3)], {"idx": "1:3,::2"}, null=False, tol=0)
add("setitem", [T([4, 5], "f32"), T([2, 5], "i32")], {"idx": "1:3"}, null=False, tol=0)  # cast on assignment

for op in ("tril", "triu"):
    for k in (0, 1, -1, 3, -5):
        add(op, [T([4, 5])], {"diagonal": k}, tol=0)
    for dt in ("f64", "f16", "i32", "i64", "bool", "u8"):
        add(op, [T([3, 3], dt)], {}, tol=0)
    add(op, [T([2, 3, 4], layout="X")], {"diagonal": 1}, tol=0)
    add(op, [T([4, 3], layout="T")], {}, tol=0)
    add(op, [T([4, 4], layout="E")], {"diagonal": -1}, tol=0)
    add(op, [T([0, 3])], {}, tol=0)
    add(op, [T([2, 0, 3])], {}, tol=0)
for k in (0, 1, -2):
    add("diag", [T([4])], {"diagonal": k}, tol=0)
    add("diag", [T([4, 5])], {"diagonal": k}, tol=0)
add("diag", [T([4], "i64", layout="F")], {}, tol=0)
add("diag", [T([4, 3], "f16", layout="T")], {"diagonal": 1}, tol=0)
add("diag", [T([3, 3], "bool")], {"diagonal": 5}, tol=0)
add("diag", [T([0])], {}, tol=0)
add("diag_embed", [T([2, 3])], {"offset": 0, "dim1": -2, "dim2": -1}, tol=0)
add("diag_embed", [T([2, 3], "i32", layout="T")], {"offset": 1, "dim1": 0, "dim2": 2}, tol=0)
add("diag_embed", [T([3])], {"offset": -1, "dim1": -2, "dim2": -1}, tol=0)
add("diagonal", [T([4, 5])], {"offset": 0, "dim1": 0, "dim2": 1}, tol=0)
add("diagonal", [T([2, 4, 5], layout="X")], {"offset": -1, "dim1": 1, "dim2": 2}, tol=0)
add("diagonal", [T([2, 4, 5], "i64")], {"offset": 2, "dim1": 2, "dim2": 0}, tol=0)

add("one_hot", [IDX([5], 0, 3)], {"num_classes": 5}, tol=0)
add("one_hot", [IDX([2, 3], 0, 4)], {"num_classes": -1}, null=False, tol=0)
add("one_hot", [T([2, 3], "i64", "i", lo=0, hi=2, layout="T")], {"num_classes": 3}, tol=0)
add("one_hot", [T([], "i64", "v", values=[2])], {"num_classes": 4}, tol=0)
add("one_hot", [T([0], "i64")], {"num_classes": 3}, tol=0)
for dt in ("f32", "f64", "f16", "bf16"):
    add("embedding", [IDX([2, 3], 0, 9), T([10, 4], dt)], tol=0)
add("embedding", [IDX([2, 3], 0, 9, "i32"), T([10, 4], "f32", layout="T")], tol=0)
add("embedding", [IDX([], 0, 9), T([10, 4], "f32")], tol=0)
add("embedding", [IDX([0], 0, 9), T([10, 4], "f32")], tol=0)

# ---- movement --------------------------------------------------------------------------------
PY["reshape"] = lambda a, at: torch.reshape(a[0], at["shape"])
PY["view"] = lambda a, at: a[0].view(at["shape"])
PY["flatten"] = lambda a, at: torch.flatten(a[0], at["start_dim"], at["end_dim"])
PY["unflatten"] = lambda a, at: torch.unflatten(a[0], at["dim"], at["sizes"])
PY["permute"] = lambda a, at: torch.permute(a[0], at["dims"])
PY["transpose"] = lambda a, at: torch.transpose(a[0], at["d0"], at["d1"])
PY["movedim"] = lambda a, at: torch.movedim(a[0], at["src"], at["dst"])
PY["squeeze"] = lambda a, at: torch.squeeze(a[0], tuple(at["dims"])) if at.get("dims") else torch.squeeze(a[0])
PY["unsqueeze"] = lambda a, at: torch.unsqueeze(a[0], at["dim"])
PY["expand"] = lambda a, at: a[0].expand(at["shape"])
PY["broadcast_to"] = lambda a, at: torch.broadcast_to(a[0], at["shape"])
PY["broadcast_tensors"] = lambda a, at: tuple(torch.broadcast_tensors(*a))
PY["repeat"] = lambda a, at: a[0].repeat(at["repeats"])
PY["tile"] = lambda a, at: torch.tile(a[0], at["reps"])
PY["repeat_interleave"] = lambda a, at: torch.repeat_interleave(a[0], a[1], dim=at.get("dim"))
PY["cat"] = lambda a, at: torch.cat(a, at["dim"])
PY["concat"] = lambda a, at: torch.concat(a, at["dim"])
PY["stack"] = lambda a, at: torch.stack(a, at["dim"])
PY["hstack"] = lambda a, at: torch.hstack(a)
PY["vstack"] = lambda a, at: torch.vstack(a)
PY["split"] = lambda a, at: tuple(torch.split(a[0], at["split_size"] if "split_size" in at else at["sizes"], at["dim"]))
PY["chunk"] = lambda a, at: tuple(torch.chunk(a[0], at["chunks"], at["dim"]))
PY["unbind"] = lambda a, at: tuple(torch.unbind(a[0], at["dim"]))
PY["flip"] = lambda a, at: torch.flip(a[0], at["dims"])
PY["fliplr"] = lambda a, at: torch.fliplr(a[0])
PY["flipud"] = lambda a, at: torch.flipud(a[0])
PY["roll"] = lambda a, at: torch.roll(a[0], at["shifts"], at["dims"] if at.get("dims") else None)
PY["pad"] = lambda a, at: F.pad(a[0], at["pads"], at["mode"], at.get("value", 0.0) if at["mode"] == "constant" else None)
PY["meshgrid"] = lambda a, at: tuple(torch.meshgrid(*a, indexing=at["indexing"]))

MOVE_DT = ("f32", "f64", "f16", "bf16", "i64", "i32", "u8", "bool")
for dt in MOVE_DT[:4]:
    add("reshape", [T([2, 3, 4], dt)], {"shape": [4, -1]}, tol=0)
add("reshape", [T([3, 4], "i64", layout="T")], {"shape": [12]}, tol=0)
add("reshape", [T([2, 3, 4], layout="X")], {"shape": [2, 2, 6]}, tol=0)
add("reshape", [T([3, 4], layout="E")], {"shape": [2, 6]}, tol=0)
add("reshape", [T([])], {"shape": [1, 1]}, tol=0)
add("reshape", [T([1, 1])], {"shape": []}, tol=0)
add("reshape", [T([0, 4])], {"shape": [2, 0, 5]}, tol=0)
add("view", [T([2, 3, 4])], {"shape": [6, 4]}, tol=0)
add("view", [T([2, 3, 4], "i32")], {"shape": [-1]}, tol=0)
add("view", [T([2, 3, 4], layout="S")], {"shape": [6, 4]}, tol=0)
add("flatten", [T([2, 3, 4])], {"start_dim": 0, "end_dim": -1}, tol=0)
add("flatten", [T([2, 3, 4], layout="X")], {"start_dim": 1, "end_dim": 2}, tol=0)
add("flatten", [T([2, 3, 4], "bool")], {"start_dim": 0, "end_dim": 1}, tol=0)
add("flatten", [T([])], {"start_dim": 0, "end_dim": -1}, tol=0)
add("unflatten", [T([2, 12])], {"dim": 1, "sizes": [3, -1]}, tol=0)
add("unflatten", [T([6, 2], "i32", layout="T")], {"dim": 0, "sizes": [2, 3, 1]}, tol=0)
add("permute", [T([2, 3, 4])], {"dims": [2, 0, 1]}, tol=0)
add("permute", [T([2, 3, 4], "f16", layout="X")], {"dims": [1, -1, 0]}, tol=0)
add("permute", [T([])], {"dims": []}, tol=0)
add("transpose", [T([2, 3, 4])], {"d0": 0, "d1": 2}, tol=0)
add("transpose", [T([3, 4], "i64", layout="F")], {"d0": -1, "d1": 0}, tol=0)
add("movedim", [T([2, 3, 4])], {"src": [0], "dst": [2]}, tol=0)
add("movedim", [T([2, 3, 4, 5], layout="T")], {"src": [0, 1], "dst": [-1, 0]}, tol=0)
add("squeeze", [T([1, 3, 1, 4])], {}, tol=0)
add("squeeze", [T([1, 3, 1, 4], layout="F")], {"dims": [2]}, tol=0)
add("squeeze", [T([1, 3, 1, 4])], {"dims": [0, 1, 2]}, tol=0)
add("squeeze", [T([])], {}, tol=0)
add("unsqueeze", [T([3, 4])], {"dim": 0}, tol=0)
add("unsqueeze", [T([3, 4], layout="T")], {"dim": -1}, tol=0)
add("unsqueeze", [T([])], {"dim": 0}, tol=0)
add("expand", [T([3, 1])], {"shape": [2, 3, 4]}, tol=0)
add("expand", [T([3, 1], "i32", layout="F")], {"shape": [-1, 5]}, tol=0)
add("expand", [T([])], {"shape": [2, 2]}, tol=0)
add("broadcast_to", [T([4])], {"shape": [3, 4]}, tol=0)
add("broadcast_to", [T([3, 1], "bool")], {"shape": [3, 0]}, tol=0)
add("broadcast_tensors", [T([3, 1]), T([4]), T([], "i32")], tol=0)
add("broadcast_tensors", [T([2, 1, 4], "f16"), T([3, 1], "f16")], tol=0)
for dt in MOVE_DT:
    add("repeat", [T([2, 3], dt)], {"repeats": [2, 1, 3]}, tol=0)
add("repeat", [T([2, 3], layout="T")], {"repeats": [1, 2]}, tol=0)
add("repeat", [T([])], {"repeats": [3]}, tol=0)
add("repeat", [T([2, 3])], {"repeats": [0, 2]}, tol=0)
add("tile", [T([2, 3])], {"reps": [2]}, tol=0)
add("tile", [T([2, 3], "i32", layout="X")], {"reps": [2, 1, 2]}, tol=0)
add("tile", [T([3])], {"reps": [2, 2]}, tol=0)
add("repeat_interleave", [T([2, 3]), S(2)], {}, tol=0)
add("repeat_interleave", [T([2, 3], "i64", layout="T"), S(3)], {"dim": 1}, tol=0)
add("repeat_interleave", [T([2, 3], "f16"), S(2)], {"dim": 0}, tol=0)
add("repeat_interleave", [T([2, 3]), T([3], "i64", "v", values=[1, 0, 3])], {"dim": 1}, null=False, tol=0)
add("repeat_interleave", [T([4], "bool"), T([4], "i64", "v", values=[2, 1, 0, 2])], {}, null=False, tol=0)
add("repeat_interleave", [T([]), S(2)], {}, tol=0)
add("repeat_interleave", [T([0, 2]), S(2)], {"dim": 0}, tol=0)
for op in ("cat", "concat"):
    add(op, [T([2, 3]), T([4, 3]), T([1, 3])], {"dim": 0}, tol=0)
    add(op, [T([2, 3], layout="T"), T([2, 1], layout="F"), T([2, 2], layout="S")], {"dim": -1}, tol=0)
for dt in MOVE_DT:
    add("cat", [T([2, 3], dt), T([2, 3], dt)], {"dim": 1}, tol=0)
add("cat", [T([2, 3], "i32"), T([2, 3], "f16")], {"dim": 0}, tol=0)  # promotion
add("cat", [T([2, 3], "bool"), T([2, 3], "u8"), T([1, 3], "i8")], {"dim": 0}, tol=0)
add("cat", [T([2, 3]), T([0])], {"dim": 0}, tol=0)  # 1-d empty skipped
add("cat", [T([2, 3]), T([2, 0])], {"dim": 1}, tol=0)
add("cat", [T([3, 2, 1], layout="E"), T([3, 2, 4], layout="X")], {"dim": 2}, tol=0)
add("cat", [T([5])], {"dim": 0}, tol=0)
for dim in (0, 1, 2, -1):
    add("stack", [T([2, 3]), T([2, 3], layout="F"), T([2, 3], layout="T")], {"dim": dim}, tol=0)
add("stack", [T([2, 3], "i32"), T([2, 3], "i64")], {"dim": 0}, tol=0)
add("stack", [T([]), T([])], {"dim": 0}, tol=0)
add("stack", [T([0, 2]), T([0, 2])], {"dim": 1}, tol=0)
add("hstack", [T([2, 3]), T([2, 1])], tol=0)
add("hstack", [T([3]), T([2], "i32")], tol=0)
add("vstack", [T([2, 3]), T([1, 3])], tol=0)
add("vstack", [T([3]), T([3])], tol=0)
add("split", [T([5, 4])], {"split_size": 2, "dim": 0}, tol=0)
add("split", [T([5, 4], "i32", layout="T")], {"split_size": 3, "dim": 1}, tol=0)
add("split", [T([5, 4])], {"sizes": [1, 0, 3], "dim": 1}, tol=0)
add("split", [T([0, 4])], {"split_size": 2, "dim": 0}, tol=0)
add("chunk", [T([5, 4])], {"chunks": 3, "dim": 0}, tol=0)
add("chunk", [T([5, 4], layout="F")], {"chunks": 2, "dim": 1}, tol=0)
add("chunk", [T([6, 4])], {"chunks": 4, "dim": 0}, tol=0)
add("unbind", [T([3, 4])], {"dim": 0}, tol=0)
add("unbind", [T([3, 4], "bool", layout="X")], {"dim": 1}, tol=0)
for dt in MOVE_DT:
    add("flip", [T([3, 4], dt)], {"dims": [0]}, tol=0)
add("flip", [T([2, 3, 4], layout="X")], {"dims": [0, 2]}, tol=0)
add("flip", [T([2, 3, 4])], {"dims": [-1]}, tol=0)
add("flip", [T([3, 4], layout="F")], {"dims": [0, 1]}, tol=0)
add("flip", [T([67])], {"dims": [0]}, tol=0)
add("flip", [T([])], {"dims": []}, tol=0)
add("flip", [T([0, 3])], {"dims": [1]}, tol=0)
add("fliplr", [T([3, 4], layout="T")], tol=0)
add("flipud", [T([3, 4, 2])], tol=0)
add("roll", [T([3, 4])], {"shifts": [1], "dims": [0]}, tol=0)
add("roll", [T([3, 4], "i32", layout="T")], {"shifts": [-1, 5], "dims": [1, 0]}, tol=0)
add("roll", [T([3, 4])], {"shifts": [5]}, tol=0)
add("roll", [T([3, 4], layout="X")], {"shifts": [-7]}, tol=0)
add("roll", [T([0, 4])], {"shifts": [1], "dims": [1]}, tol=0)
for dt in ("f32", "f64", "f16", "i64", "bool"):
    add("pad", [T([3, 4], dt)], {"pads": [1, 2], "mode": "constant", "value": 0.0}, tol=0)
add("pad", [T([3, 4])], {"pads": [1, 2, 0, 1], "mode": "constant", "value": -1.5}, tol=0)
add("pad", [T([2, 3, 4], layout="X")], {"pads": [1, 1, 2, 0, 1, 1], "mode": "constant", "value": 2.0}, tol=0)
add("pad", [T([3, 4])], {"pads": [-1, 1], "mode": "constant", "value": 0.0}, tol=0)
add("pad", [T([0, 2])], {"pads": [1, 1], "mode": "constant", "value": 3.0}, tol=0)
for mode in ("reflect", "replicate", "circular"):
    add("pad", [T([2, 5])], {"pads": [2, 3], "mode": mode}, tol=0)
    add("pad", [T([2, 3, 4], layout="T")], {"pads": [1, 2, 2, 1], "mode": mode}, tol=0)
    add("pad", [T([1, 2, 3, 4, 3], "f64", layout="F")], {"pads": [1, 1, 2, 1, 0, 1], "mode": mode}, tol=0)
    add("pad", [T([2, 5], "f16")], {"pads": [0, 3], "mode": mode}, tol=0)
add("meshgrid", [T([3]), T([4])], {"indexing": "ij"}, tol=0)
add("meshgrid", [T([3]), T([4]), T([2])], {"indexing": "xy"}, tol=0)
add("meshgrid", [T([3], "i32", layout="F"), T([2], "i32")], {"indexing": "xy"}, tol=0)
add("meshgrid", [T([3]), T([0])], {"indexing": "ij"}, tol=0)

# ---- creation ----------------------------------------------------------------------------
PY["arange"] = lambda a, at: torch.arange(*a, dtype=dt_arg(at))
PY["linspace"] = lambda a, at: torch.linspace(at["start"], at["end"], at["steps"], dtype=dt_arg(at))
PY["logspace"] = lambda a, at: torch.logspace(at["start"], at["end"], at["steps"], at["base"], dtype=dt_arg(at))
PY["eye"] = lambda a, at: torch.eye(at["n"], at.get("m", at["n"]), dtype=dt_arg(at))
PY["full"] = lambda a, at: torch.full(at["shape"], a[0], dtype=dt_arg(at))
PY["zeros"] = lambda a, at: torch.zeros(at["shape"], dtype=dt_arg(at))
PY["ones"] = lambda a, at: torch.ones(at["shape"], dtype=dt_arg(at))
PY["zeros_like"] = lambda a, at: torch.zeros_like(a[0])
PY["ones_like"] = lambda a, at: torch.ones_like(a[0])
PY["full_like"] = lambda a, at: torch.full_like(a[0], a[1])
PY["scalar_tensor"] = lambda a, at: torch.tensor(a[0], dtype=dt_arg(at))

for args, dt in (([S(5)], None), ([S(2.5)], None), ([S(1), S(10), S(3)], None), ([S(10), S(1), S(-2)], None),
                 ([S(0.0), S(1.0), S(0.1)], None), ([S(-1), S(1), S(0.25)], None), ([S(0), S(5), S(1)], "f64"),
                 ([S(0), S(5), S(1)], "f16"), ([S(0), S(200), S(3)], "i32"), ([S(0), S(10), S(1)], "u8"),
                 ([S(3), S(3), S(1)], None), ([S(0), S(100), S(1)], "f32"), ([S(1.0), S(2.0), S(0.3)], "f64"),
                 ([S(0)], "i64")):
    add("arange", args, {"dtype": dt} if dt else {}, tol=1.0)
for st, en, n, dt in ((0.0, 1.0, 5, "f32"), (-2.0, 3.0, 1, "f32"), (0.0, 1.0, 0, "f32"), (1.0, 0.0, 7, "f64"),
                      (0.0, 10.0, 101, "f32"), (0.0, 1.0, 11, "f16"), (-5.0, 5.0, 4, "i64"), (0.0, 7.0, 6, "bf16")):
    add("linspace", [], {"start": st, "end": en, "steps": n, "dtype": dt})
for st, en, n, b, dt in ((0.0, 2.0, 5, 10.0, "f32"), (-1.0, 1.0, 4, 2.0, "f64"), (0.0, 1.0, 1, 10.0, "f32")):
    add("logspace", [], {"start": st, "end": en, "steps": n, "base": b, "dtype": dt}, tol=4.0)
for n, m, dt in ((3, None, "f32"), (2, 4, "i64"), (4, 2, "bool"), (0, None, "f32"), (3, 0, "f16")):
    at = {"n": n, "dtype": dt}
    if m is not None:
        at["m"] = m
    add("eye", [], at, tol=0)
for v, dt in ((7, "i64"), (2.5, "f32"), (True, "bool"), (1.5, "f64"), (-3, "i8"), (math.inf, "f16"), (2.7, "i32"), (200, "u8")):
    add("full", [S(v)], {"shape": [2, 3], "dtype": dt}, tol=0)
add("full", [S(1.0)], {"shape": [], "dtype": "f32"}, tol=0)
add("full", [S(1.0)], {"shape": [0, 3], "dtype": "f32"}, tol=0)
for op in ("zeros", "ones"):
    for dt in ("f32", "i64", "bool", "bf16"):
        add(op, [], {"shape": [2, 3], "dtype": dt}, tol=0)
    add(op, [], {"shape": [], "dtype": "f64"}, tol=0)
    add(op, [], {"shape": [3, 0], "dtype": "f32"}, tol=0)
for op in ("zeros_like", "ones_like"):
    add(op, [T([3, 4], "i32", layout="T")], tol=0)
    add(op, [T([2], "f16")], tol=0)
    add(op, [T([], "bool")], tol=0)
add("full_like", [T([3, 4], "i32"), S(2.7)], tol=0)
add("full_like", [T([3, 4], "f64", layout="X"), S(-1.5)], tol=0)
add("full_like", [T([2], "bool"), S(1)], tol=0)
for v, dt in ((3, None), (2.5, None), (True, None), (2.5, "f64"), (-1, "i8"), (70000, "f16")):
    add("scalar_tensor", [S(v)], {"dtype": dt} if dt else {}, tol=0)


# ---- writing -------------------------------------------------------------------------------
def to_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes() if t.dim() > 0 else t.reshape(1).view(torch.int16).numpy().tobytes()
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy().tobytes()
    return t.numpy().tobytes()


def pstr(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def pshape(shape):
    return struct.pack("<B", len(shape)) + b"".join(struct.pack("<q", int(d)) for d in shape)


def reference(op, args, attrs):
    """PyTorch's result for the case; for u16/u32/u64 inputs of an op PyTorch does not implement
    on them (it supports few), the second implementation of scripts/golden_cases/wide_unsigned.py."""
    try:
        return PY[op](args, attrs)
    except (RuntimeError, NotImplementedError):
        wide = any(isinstance(a, torch.Tensor) and a.dtype in WIDE_UNSIGNED for a in args)
        if op in UNSIGNED_REF and (wide or TD.get(attrs.get("dtype")) in WIDE_UNSIGNED):
            return unsigned_reference(op, args, attrs)
        raise


UNSIGNED_REF = {}  # op -> result kind; filled by scripts/golden_cases/wide_unsigned.py
WIDE_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def run_case(op, idx, inputs, attrs, null, tolscale):
    rng = np.random.default_rng(zlib.crc32(f"{op}/{idx}".encode()))
    args, blobs, names = [], [], []
    for spec in inputs:
        if isinstance(spec, S):
            v = spec.v
            args.append(v)
            names.append(spec.desc())
            if v is None:
                blobs.append(struct.pack("<B", 4))
            elif isinstance(v, bool):
                blobs.append(struct.pack("<BB", 3, int(v)))
            elif isinstance(v, int):
                blobs.append(struct.pack("<Bq", 1, v))
            else:
                blobs.append(struct.pack("<Bd", 2, v))
            continue
        view, base, tr = build_input(rng, spec)
        args.append(view)
        names.append(spec.desc())
        blobs.append(struct.pack("<BB", 0, DTYPES.index(spec.dtype)) + pshape(base.shape)
                     + pstr(encode_transforms(tr)) + to_bytes(base))
    out = reference(op, args, attrs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    outs = [o if isinstance(o, torch.Tensor) else torch.tensor(o) for o in outs]
    enc_out = b""
    for o in outs:
        dt = FROM_TD[o.dtype]
        if dt in TOL and tolscale:
            rtol, atol = TOL[dt]
            rtol *= tolscale
            atol = rtol * 10 if tolscale >= RED_TOL else atol * tolscale
        else:
            rtol = atol = 0.0
        enc_out += struct.pack("<B", DTYPES.index(dt)) + pshape(o.shape) + struct.pack("<dd", rtol, atol) + to_bytes(o)
    name = f"{idx}:" + ",".join(names)
    rec = (pstr(op) + pstr(name) + pstr(enc_attrs(attrs)) + struct.pack("<B", 1 if null else 0)
           + struct.pack("<I", len(blobs)) + b"".join(blobs) + struct.pack("<I", len(outs)) + enc_out)
    return rec


# Cases of further op families live in scripts/golden_cases/<family>.py, one file per family,
# written against the helpers above (add, T, S, PY, ...) and run in this module's namespace.
_CASES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden_cases")
if os.path.isdir(_CASES_DIR):
    for _f in sorted(os.listdir(_CASES_DIR)):
        if _f.endswith(".py"):
            with open(os.path.join(_CASES_DIR, _f)) as _fh:
                exec(compile(_fh.read(), os.path.join(_CASES_DIR, _f), "exec"), globals())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "golden"))
    ap.add_argument("--only", default="", help="comma-separated op names to regenerate")
    opts = ap.parse_args()
    only = set(filter(None, opts.only.split(",")))
    os.makedirs(opts.out, exist_ok=True)
    if not only:
        for f in os.listdir(opts.out):
            if f.endswith(".kgl") and f[:-4] not in CASES:
                os.remove(os.path.join(opts.out, f))
    total_bytes = total_cases = 0
    skipped = []
    for op, cases in CASES.items():
        if only and op not in only:
            continue
        recs = []
        for i, (inputs, attrs, null, tol) in enumerate(cases):
            try:
                recs.append(run_case(op, i, inputs, attrs, null, tol))
            except (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError) as e:
                msg = str(e).split("\n")[0][:90]
                skipped.append(f"{op}#{i} [{', '.join(s.desc() for s in inputs)}]: {msg}")
        data = b"KGLD1\n" + struct.pack("<I", len(recs)) + b"".join(recs)
        with open(os.path.join(opts.out, op + ".kgl"), "wb") as f:
            f.write(data)
        total_bytes += len(data)
        total_cases += len(recs)
    for s in skipped:
        print("skipped (PyTorch rejects it):", s)
    print(f"gen_golden: {total_cases} cases for {len(CASES) if not only else len(only)} ops, "
          f"{total_bytes / 1024:.0f} KiB, {len(skipped)} skipped, torch {torch.__version__}")


if __name__ == "__main__":
    main()
