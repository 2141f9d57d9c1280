# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the unsigned dtypes u16, u32 and u64 (run inside scripts/gen_golden.py).
#
# PyTorch stores these types but implements few ops on them (casts, eq, mul, bitwise ops, sum,
# prod, cumsum, sort, unique, indexing, movement; not add, sub, lt, amax, argmax, where, ...),
# and refuses to promote them with any type but a float. Kiln implements every integer op on
# them, with this promotion (src/core/dtype.cpp): an unsigned type with bool or a narrower
# unsigned one keeps the wider; with a signed one it widens to the next signed type that holds
# both (u16 with i8/i16/i32 -> i32, u32 with i8..i64 -> i64); u64 with a signed type is refused.
#
# Where PyTorch implements the op its result is the reference. Where it does not, the reference
# is a second implementation: the same PyTorch op on the values widened to i64 (exact, since
# the inputs stay below 2**62), with an integer result cast back to the promoted unsigned type,
# which wraps modulo 2**bits as C++ unsigned arithmetic does; add, sub and mul are also checked
# against NumPy's own unsigned arithmetic here.

_KORDER = {"bool": 0, "u8": 1, "u16": 2, "u32": 3, "u64": 4}
_SIGNED_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
_UBITS = {"u8": 8, "u16": 16, "u32": 32, "u64": 64}


def kiln_promote(a, b):
    """Kiln's promote_types for two dtype names (a ValueError where Kiln refuses)."""
    if a == b:
        return a
    if a in FLOATS and b in FLOATS:
        return FROM_TD[torch.promote_types(TD[a], TD[b])]
    if a in FLOATS or b in FLOATS:
        return a if a in FLOATS else b
    if a in _KORDER and b in _KORDER:
        return a if _KORDER[a] > _KORDER[b] else b
    u, s = (a, b) if a in _KORDER else (b, a)
    if u not in _KORDER:  # both signed
        return FROM_TD[torch.promote_types(TD[a], TD[b])]
    if u in ("bool", "u8"):
        return FROM_TD[torch.promote_types(TD[a], TD[b])]
    if u == "u64":
        raise ValueError("u64 with a signed type")
    need = 2 * _UBITS[u]
    return "i" + str(max(need, _SIGNED_BITS[s]))


def _result_dtype(args):
    """Promoted dtype of the tensor arguments (Python ints take the tensors' type)."""
    dts = [FROM_TD[a.dtype] for a in args if isinstance(a, torch.Tensor) and a.dtype != torch.bool]
    if not dts:
        return "bool"
    r = dts[0]
    for d in dts[1:]:
        r = kiln_promote(r, d)
    return r


def _widen(a):
    if isinstance(a, torch.Tensor) and a.dtype in WIDE_UNSIGNED:
        w = a.to(torch.int64)
        assert a.dtype != torch.uint64 or bool((w >= 0).all()), "second implementation needs u64 < 2**63"
        return w
    return a


def unsigned_reference(op, args, attrs):
    kind = UNSIGNED_REF[op]
    if kind == "attr_dtype":  # a creation op: made in i64, then cast
        return PY[op](args, dict(attrs, dtype="i64")).to(TD[attrs["dtype"]])
    out = PY[op]([_widen(a) for a in args], attrs)
    if kind == "bool" or kind == "index":
        return out
    target = TD[_result_dtype(args[1:] if kind == "promoted_tail" else args)]
    if isinstance(out, tuple):  # (values, indices)
        return (out[0].to(target),) + tuple(out[1:])
    return out.to(target) if out.dtype == torch.int64 else out


_NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def _check_numpy(op, args):
    """add/sub/mul of two same-dtype tensors: the widened reference equals NumPy's uint result."""
    a, b = args
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype):
        return
    got = unsigned_reference(op, args, {})
    want = _NUMPY[op](a.numpy(), b.numpy())
    assert np.array_equal(got.numpy(), want), f"{op}: second implementation disagrees with NumPy"


for _op in ("add", "sub", "mul", "floor_divide", "remainder", "maximum", "minimum", "bitwise_and",
            "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "abs", "neg", "square",
            "sign", "bitwise_not", "clamp", "masked_fill", "amax", "amin", "max", "min", "max_dim", "min_dim",
            "topk", "op_add", "op_sub", "op_neg", "op_invert", "full_like"):
    UNSIGNED_REF[_op] = "promoted"
UNSIGNED_REF["where"] = "promoted_tail"
for _op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "op_lt", "isin"):
    UNSIGNED_REF[_op] = "bool"
for _op in ("argmax", "argmin", "nonzero", "count_nonzero", "argsort", "sum", "cumsum"):
    UNSIGNED_REF[_op] = "index"

_WIDE = ("u16", "u32", "u64")
_HI = {"u16": 2**16 - 1, "u32": 2**32 - 1, "u64": 2**64 - 1}

# ---- elementwise binary: same type, broadcast, strided views, scalars, wraparound, promotion -----
for op, hi in (("add", 300), ("sub", 300), ("mul", 300), ("floor_divide", 300), ("remainder", 300),
               ("maximum", 300), ("minimum", 300), ("bitwise_and", 300), ("bitwise_or", 300),
               ("bitwise_xor", 300), ("eq", 3), ("ne", 3), ("lt", 3), ("le", 3), ("gt", 3), ("ge", 3),
               ("logical_and", 2), ("logical_or", 2)):
    lo_b = 1 if op in ("floor_divide", "remainder") else 0
    for dt in _WIDE:
        add(op, [T([3, 7], dt, "i", lo=0, hi=hi), T([3, 7], dt, "i", lo=lo_b, hi=hi)], tol=0)
    add(op, [T([3, 4], "u32", "i", "T", lo=0, hi=hi), T([4], "u32", "i", "F", lo=lo_b, hi=hi)], tol=0)
    add(op, [T([4, 5], "u16", "i", "X", lo=0, hi=hi), T([4, 1], "u16", "i", lo=lo_b, hi=hi)], tol=0)
    add(op, [T([2, 3], "u64", "i", "S", lo=0, hi=hi), S(2)], tol=0)
    add(op, [T([], "u32", "i", lo=0, hi=hi), T([], "u32", "i", lo=lo_b, hi=hi)], tol=0)
    add(op, [T([0, 3], "u16"), T([3], "u16", "i", lo=lo_b, hi=hi)], tol=0)
    add(op, [T([67], "u32", "i", lo=0, hi=hi), T([67], "u32", "i", lo=lo_b, hi=hi)], tol=0)
    # promotion: with a narrower unsigned type, with bool, with signed types, with a float
    add(op, [T([6], "u16", "i", lo=0, hi=hi), T([6], "u8", "i", lo=lo_b, hi=min(hi, 255))], tol=0)
    add(op, [T([6], "u32", "i", lo=0, hi=hi), T([6], "u16", "i", lo=lo_b, hi=hi)], tol=0)
    add(op, [T([6], "u64", "i", lo=0, hi=hi), T([6], "u32", "i", lo=lo_b, hi=hi)], tol=0)
    add(op, [T([6], "u16", "i", lo=0, hi=hi), T([6], "i32", "i", lo=lo_b, hi=hi)], tol=0)
    add(op, [T([6], "i8", "i", lo=0, hi=min(hi, 127)), T([6], "u32", "i", lo=lo_b, hi=hi)], tol=0)
    if op not in ("floor_divide", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and",
                  "logical_or"):
        add(op, [T([6], "u32", "i", lo=0, hi=hi), T([6], "f32", "i", lo=lo_b, hi=hi)], tol=0)
# wraparound: sums and products past 2**bits, differences below zero
for dt in _WIDE:
    big = min(_HI[dt], 2**62)
    for op in ("add", "sub", "mul"):
        a = T([8], dt, "i", lo=big // 2, hi=big)
        b = T([8], dt, "i", lo=big // 3, hi=big)
        add(op, [a, b], tol=0)
        rng = np.random.default_rng(7)
        av = torch.from_numpy(rng.integers(big // 2, big, 8, dtype=np.int64)).to(TD[dt])
        bv = torch.from_numpy(rng.integers(big // 3, big, 8, dtype=np.int64)).to(TD[dt])
        _check_numpy(op, [av, bv])
# values above 2**63 and the type's maximum: ops PyTorch implements on u64 (eq, mul, bitwise, max)
_TOP = [2**64 - 1, 2**63, 2**63 + 5, 0, 1, 2**64 - 2, 12345, 2**63 - 1]
for op in ("eq", "mul", "bitwise_and", "bitwise_xor", "maximum", "minimum"):
    add(op, [T([8], "u64", "v", values=_TOP), T([8], "u64", "v", values=_TOP[::-1])], tol=0)
# shifts
for dt in _WIDE:
    bits = _UBITS[dt]
    add("bitwise_left_shift", [T([8], dt, "i", lo=0, hi=1000), T([8], dt, "i", lo=0, hi=bits - 1)], tol=0)
    add("bitwise_right_shift", [T([8], dt, "i", lo=0, hi=min(_HI[dt], 2**62)), T([8], dt, "i", lo=0, hi=bits - 1)],
        tol=0)
# true division gives the default float
for dt in _WIDE:
    add("div", [T([6], dt, "i", lo=0, hi=50), T([6], dt, "i", lo=1, hi=9)])
# C++ operators
add("op_add", [T([3, 4], "u32", "i", lo=0, hi=9), T([4], "u32", "i", lo=0, hi=9)], tol=0)
add("op_sub", [T([5], "u16", "i", lo=0, hi=9), S(4)], tol=0)
add("op_lt", [T([5], "u64", "i", lo=0, hi=9), S(4)], tol=0)
add("op_neg", [T([5], "u32", "i", lo=0, hi=9)], tol=0)
add("op_invert", [T([5], "u16", "i", lo=0, hi=9)], tol=0)

# ---- unary ------------------------------------------------------------------------------------
for dt in _WIDE:
    for op in ("abs", "neg", "square", "sign", "bitwise_not", "logical_not"):
        add(op, [T([3, 5], dt, "i", lo=0, hi=300)], tol=0)
    for op in ("sqrt", "exp", "sigmoid"):  # float ops lift to the default float
        add(op, [T([3, 5], dt, "i", lo=0, hi=9)])
    for op in ("isnan", "isinf", "isfinite"):
        add(op, [T([4], dt, "i", lo=0, hi=9)], tol=0)
    add("clamp", [T([3, 4], dt, "i", lo=0, hi=20), S(3), S(11)], tol=0)
    add("clamp", [T([3, 4], dt, "i", "T", lo=0, hi=20), S(None), S(5)], tol=0)

# ---- casts: every dtype to and from each unsigned type ---------------------------------------
for dt in _WIDE:
    for other in DTYPES:
        if other == dt:
            continue
        if other in FLOATS:
            src_vals = [0.0, 1.0, 2.5, 7.9, 100.0, 1000.0, 3.0, 42.0]
        elif other == "bool":
            src_vals = [0, 1, 1, 0, 1, 0, 0, 1]
        else:
            lo, hi = IRANGE[other]
            src_vals = [0, 1, 7, hi, max(lo, 0), 100 % (hi + 1), hi // 2, 3]
        add("cast", [T([8], other, "v", values=src_vals)], {"dtype": dt}, tol=0)
        add("cast", [T([8], dt, "v", values=[0, 1, 7, 200, 255, _HI[dt], _HI[dt] // 2, 3])], {"dtype": other}, tol=0)
    add("cast", [T([3, 4], dt, "i", "X", lo=0, hi=1000)], {"dtype": "f32"}, tol=0)
    add("cast", [T([3, 4], "f64", "u", "T", lo=0, hi=1000)], {"dtype": dt}, tol=0)
add("cast", [T([8], "u64", "v", values=_TOP)], {"dtype": "f64"}, tol=0)
add("cast", [T([8], "u64", "v", values=_TOP)], {"dtype": "i64"}, tol=0)
add("cast", [T([8], "u64", "v", values=_TOP)], {"dtype": "u32"}, tol=0)
add("cast", [T([6], "i32", "v", values=[-1, -2, -70000, 5, 0, -2**31])], {"dtype": "u16"}, tol=0)

# ---- reductions, scans, sorting ---------------------------------------------------------------
for dt in _WIDE:
    add("sum", [T([4, 6], dt, "i", lo=0, hi=1000)], {}, tol=0)
    add("sum", [T([4, 6], dt, "i", "T", lo=0, hi=1000)], {"dims": [1], "keepdim": True}, tol=0)
    add("prod", [T([4, 3], dt, "i", lo=0, hi=9)], {"dims": [1]}, tol=0)
    for op in ("amax", "amin"):
        add(op, [T([4, 6], dt, "i", lo=0, hi=1000)], {"dims": [1]}, tol=0)
        add(op, [T([67], dt, "i", lo=0, hi=1000)], {}, tol=0)
    for op in ("argmax", "argmin"):
        add(op, [T([4, 6], dt, "d")], {"dim": 1}, tol=0)
    for op in ("max_dim", "min_dim"):
        add(op, [T([4, 6], dt, "d", "F")], {"dim": 0}, tol=0)
    for op in ("max", "min"):
        add(op, [T([5, 3], dt, "i", lo=0, hi=1000)], tol=0)
    for op in ("any", "all"):
        add(op, [T([4, 5], dt, "i", lo=0, hi=2)], {"dims": [1]}, tol=0)
    add("count_nonzero", [T([4, 5], dt, "i", lo=0, hi=2)], {"dims": [1]}, tol=0)
    add("cumsum", [T([4, 6], dt, "i", lo=0, hi=100)], {"dim": 1}, tol=0)
    for op in ("sort", "argsort"):
        for desc in (False, True):
            add(op, [T([3, 9], dt, "i", lo=0, hi=6)], {"dim": -1, "descending": desc}, tol=0)
    add("topk", [T([3, 9], dt, "d")], {"k": 4, "dim": 1, "largest": True}, tol=0)
    add("topk", [T([3, 9], dt, "d", "T")], {"k": 2, "dim": 0, "largest": False}, tol=0)
    add("unique", [T([3, 7], dt, "i", lo=0, hi=5)], null=False, tol=0)
for op in ("sort", "argsort"):
    add(op, [T([8], "u64", "v", values=_TOP)], {"dim": 0, "descending": False}, tol=0)

# ---- indexing, selection, movement, creation --------------------------------------------------
for dt in _WIDE:
    add("index_select", [T([4, 5], dt, "i", lo=0, hi=1000), T([3], "i64", "v", values=[3, 0, 3])], {"dim": 0}, tol=0)
    add("gather", [T([3, 4], dt, "i", lo=0, hi=1000), T([3, 2], "i64", "i", lo=0, hi=3)], {"dim": 1}, tol=0)
    add("scatter_add", [T([3, 4], dt, "i", lo=0, hi=100), T([3, 2], "i64", "i", lo=0, hi=3),
                        T([3, 2], dt, "i", lo=0, hi=100)], {"dim": 1}, tol=0)
    add("masked_fill", [T([3, 4], dt, "i", lo=0, hi=100), T([3, 4], "bool"), S(7)], tol=0)
    add("where", [T([3, 4], "bool"), T([3, 4], dt, "i", lo=0, hi=100), T([4], dt, "i", lo=0, hi=100)], tol=0)
    add("nonzero", [T([3, 4], dt, "i", lo=0, hi=1)], null=False, tol=0)
    add("cat", [T([2, 3], dt, "i", lo=0, hi=100), T([1, 3], dt, "i", "F", lo=0, hi=100)], {"dim": 0}, tol=0)
    add("flip", [T([3, 4], dt, "i", lo=0, hi=100)], {"dims": [0, 1]}, tol=0)
    add("roll", [T([3, 4], dt, "i", lo=0, hi=100)], {"shifts": [1], "dims": [1]}, tol=0)
    add("repeat", [T([2, 3], dt, "i", "T", lo=0, hi=100)], {"repeats": [2, 1]}, tol=0)
    add("full", [S(_HI[dt] // 3)], {"shape": [2, 3], "dtype": dt}, tol=0)
    add("arange", [S(0), S(10), S(3)], {"dtype": dt}, tol=0)
    for op in ("zeros", "ones"):
        add(op, [], {"shape": [2, 3], "dtype": dt}, tol=0)
    add("full_like", [T([2, 3], dt, "i", lo=0, hi=9), S(5)], tol=0)
UNSIGNED_REF["arange"] = "attr_dtype"
