# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases at the lengths that reach each vector loop's body and remainder at every SIMD
# width (4, 8 and 16 f32 lanes: SSE4, AVX2, AVX-512) and cross a 256-element program chunk, for
# every elementwise family and the reductions (exec'd inside scripts/gen_golden.py, after the
# other families, so the earlier cases keep their indices and inputs). The float ops also take
# integer inputs whose values leave their domain (<= 0 for the logarithms): those compute in a
# float buffer the op overwrites in place, a path that short cases never reached.

VEC_LENGTHS = [1, 15, 16, 17, 63, 64, 65, 257]
VEC_INT_LENGTHS = [17, 65, 257]


def _vec_unary(op):
    lo, hi = UNARY_DOMAIN[op]
    tol = 0 if op in EXACT_UNARY else (4.0 if op in TRANSCENDENTAL else 1.0)
    at = UNARY_ATTRS.get(op, [{}])[0]
    for n in VEC_LENGTHS:
        add(op, [T([n], "f32", "u", lo=lo, hi=hi)], at, tol=tol)
    # Integers from below the domain to past it: NaN and -inf lanes among ordinary ones.
    ilo, ihi = int(math.floor(min(lo, 0))) - 3, int(math.ceil(hi)) + 3
    for n in VEC_INT_LENGTHS:
        add(op, [T([n], "i32", "i", lo=ilo, hi=ihi)], at, tol=tol)
    add(op, [T([64], "i64", "i", lo=ilo, hi=ihi)], at, tol=tol)
    add(op, [T([65], "f32", "u", "S", lo, hi)], at, tol=tol)  # strided, same lengths
    add(op, [T([63], "f32", "sp", values=UNARY_SPECIALS.get(op))], at, tol=tol)


def _vec_binary(op, da, db, cls, tol):
    ints = cls in ("int", "ishift")
    dt = "i32" if ints else "f32"

    def X(n, d, dom, layout="c"):
        if d in FLOATS:
            return T([n], d, "u", layout, lo=dom[0], hi=dom[1])
        return T([n], d, "i", layout, lo=max(dom[0], IRANGE[d][0]), hi=min(dom[1], IRANGE[d][1]))

    for n in VEC_LENGTHS:
        add(op, [X(n, dt, da), X(n, dt, db)], tol=tol)
    add(op, [X(65, dt, da), S(2 if ints else 1.5)], tol=tol)  # scalar operand: the broadcast loop
    add(op, [X(257, dt, da, "F"), X(257, dt, db, "S")], tol=tol)
    if not ints:
        for n in VEC_INT_LENGTHS:
            add(op, [X(n, "i32", da), X(n, "i32", db)], tol=tol)
        add(op, [T([63], "f32", "sp"), T([63], "f32", "sp")], tol=tol)


for _op in UNARY_DOMAIN:
    _vec_unary(_op)
for _op, (_da, _db, _cls, _tol) in BINARY.items():
    _vec_binary(_op, _da, _db, _cls, _tol)
for _n in VEC_LENGTHS:
    for _op in ("sum", "mean", "amax", "amin"):
        add(_op, [T([_n], "f32")], {}, tol=0 if _op in ("amax", "amin") else RED_TOL)
    add("sum", [T([_n], "i32", "i", lo=-50, hi=50)], {}, tol=RED_TOL)
    add("amax", [T([_n], "i32", "i", lo=-50, hi=50)], {}, tol=0)
    add("sum", [T([3, _n], "f32")], {"dims": [1]}, tol=RED_TOL)
    add("sum", [T([_n, 3], "f32")], {"dims": [0]}, tol=RED_TOL)
    add("softmax", [T([2, _n], "f32", scale=3)], {"dim": 1}, tol=RED_TOL)
    add("log_softmax", [T([2, _n], "f32", scale=3)], {"dim": 1}, tol=RED_TOL)
    add("cumsum", [T([_n], "f32", "u", lo=-3, hi=3)], {"dim": 0}, tol=RED_TOL)
for _op in ("where", "lerp"):
    for _n in VEC_LENGTHS:
        if _op == "where":
            add(_op, [T([_n], "bool"), T([_n], "f32"), T([_n], "f32")], tol=0)
        else:
            add(_op, [T([_n], "f32"), T([_n], "f32"), T([_n], "f32", "u", lo=0, hi=1)], tol=1.0)
