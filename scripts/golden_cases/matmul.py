# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the matrix-product family: matmul, mm, bmm, mv, dot, outer, addmm,
# addmv, baddbmm, linear, einsum, scaled_dot_product_attention. Exec'd inside
# scripts/gen_golden.py (uses its add, T, S, PY, RED_TOL); Kiln calls in
# tests/conformance/registry_matmul.cpp.

PY["matmul"] = lambda a, at: torch.matmul(a[0], a[1])
PY["mm"] = lambda a, at: torch.mm(a[0], a[1])
PY["bmm"] = lambda a, at: torch.bmm(a[0], a[1])
PY["mv"] = lambda a, at: torch.mv(a[0], a[1])
PY["dot"] = lambda a, at: torch.dot(a[0], a[1])
PY["outer"] = lambda a, at: torch.outer(a[0], a[1])
PY["addmm"] = lambda a, at: torch.addmm(a[0], a[1], a[2], beta=at.get("beta", 1.0), alpha=at.get("alpha", 1.0))
PY["addmv"] = lambda a, at: torch.addmv(a[0], a[1], a[2], beta=at.get("beta", 1.0), alpha=at.get("alpha", 1.0))
PY["baddbmm"] = lambda a, at: torch.baddbmm(a[0], a[1], a[2], beta=at.get("beta", 1.0), alpha=at.get("alpha", 1.0))
PY["linear"] = lambda a, at: F.linear(a[0], a[1], a[2])
PY["einsum"] = lambda a, at: torch.einsum(at["eq"], *a)
PY["scaled_dot_product_attention"] = lambda a, at: F.scaled_dot_product_attention(
    a[0], a[1], a[2], attn_mask=a[3], is_causal=at.get("is_causal", False), scale=at.get("scale"),
    enable_gqa=at.get("enable_gqa", False))

MM_TOL = RED_TOL

# matmul: every rank combination, broadcast batch, non-contiguous operands, dtypes.
for sa, sb in [([4], [4]), ([3, 4], [4]), ([4], [4, 5]), ([3, 4], [4, 5]), ([2, 3, 4], [4]), ([4], [2, 4, 5]),
               ([2, 3, 4], [4, 5]), ([3, 4], [2, 4, 5]), ([2, 3, 4], [2, 4, 5]), ([2, 1, 3, 4], [3, 4, 5]),
               ([1, 3, 4], [2, 1, 4, 5]), ([2, 2, 3, 4], [2, 2, 4, 1])]:
    add("matmul", [T(sa), T(sb)], tol=MM_TOL)
for la, lb in [("T", "c"), ("c", "T"), ("S", "X"), ("E", "F"), ("X", "E")]:
    add("matmul", [T([3, 5, 4], layout=la), T([3, 4, 6], layout=lb)], tol=MM_TOL)
add("matmul", [T([5, 4], layout="T"), T([4, 3], layout="S")], tol=MM_TOL)
add("matmul", [T([2, 3, 5, 4], layout="E"), T([4, 6], layout="T")], tol=MM_TOL)
for dt in ["f64", "f16", "bf16", "i32", "i64"]:
    add("matmul", [T([2, 3, 7], dt), T([7, 5], dt, layout="T")], tol=MM_TOL)
    add("matmul", [T([6], dt), T([6], dt)], tol=MM_TOL)
add("matmul", [T([3, 0], "f32"), T([0, 4], "f32")])  # K = 0: zeros
add("matmul", [T([0, 3], "f32"), T([3, 4], "f32")])
add("matmul", [T([2, 0, 3], "f32"), T([3, 4], "f32")])
add("matmul", [T([17, 35]), T([35, 23])], tol=MM_TOL)  # odd sizes

add("mm", [T([3, 4]), T([4, 5])], tol=MM_TOL)
add("mm", [T([3, 4], "f64", layout="T"), T([4, 5], "f64", layout="S")], tol=MM_TOL)
add("mm", [T([3, 4], "i64"), T([4, 2], "i64", layout="F")])
add("mm", [T([3, 4], "bf16"), T([4, 2], "bf16")], tol=MM_TOL)
add("bmm", [T([2, 3, 4]), T([2, 4, 5])], tol=MM_TOL)
add("bmm", [T([2, 3, 4], layout="X"), T([2, 4, 5], layout="E")], tol=MM_TOL)
add("bmm", [T([2, 3, 4], "f16"), T([2, 4, 5], "f16", layout="T")], tol=MM_TOL)
add("bmm", [T([2, 3, 4], "i32"), T([2, 4, 5], "i32")])
add("mv", [T([3, 4]), T([4])], tol=MM_TOL)
add("mv", [T([3, 4], "f64", layout="T"), T([4], "f64", layout="S")], tol=MM_TOL)
add("mv", [T([3, 4], "i32"), T([4], "i32")])
add("dot", [T([7]), T([7])], tol=MM_TOL)
add("dot", [T([7], "f64", layout="S"), T([7], "f64", layout="F")], tol=MM_TOL)
add("dot", [T([5], "i64"), T([5], "i64")])
add("dot", [T([0]), T([0])])
add("outer", [T([3]), T([4])])
add("outer", [T([3], "f64", layout="S"), T([2], "f64")])
add("outer", [T([3], "i32"), T([4], "i32")])

add("addmm", [T([3, 5]), T([3, 4]), T([4, 5])], tol=MM_TOL)
add("addmm", [T([5]), T([3, 4], layout="T"), T([4, 5])], {"beta": 0.5, "alpha": 2.0}, tol=MM_TOL)
add("addmm", [T([3, 1], "f64"), T([3, 4], "f64"), T([4, 5], "f64", layout="S")], {"beta": 2.0}, tol=MM_TOL)
add("addmm", [T([3, 5], "f32", "sp"), T([3, 4]), T([4, 5])], {"beta": 0.0}, tol=MM_TOL)  # beta=0 ignores NaN
add("addmv", [T([3]), T([3, 4]), T([4])], {"beta": 0.5, "alpha": -1.0}, tol=MM_TOL)
add("addmv", [T([1], "f64"), T([3, 4], "f64", layout="T"), T([4], "f64")], tol=MM_TOL)
add("baddbmm", [T([2, 3, 5]), T([2, 3, 4]), T([2, 4, 5])], tol=MM_TOL)
add("baddbmm", [T([1, 5]), T([2, 3, 4], layout="X"), T([2, 4, 5])], {"beta": 0.25, "alpha": 3.0}, tol=MM_TOL)

add("linear", [T([3, 4]), T([5, 4]), T([5])], tol=MM_TOL)
add("linear", [T([3, 4]), T([5, 4]), S(None)], tol=MM_TOL)
add("linear", [T([4]), T([5, 4]), T([5])], tol=MM_TOL)
add("linear", [T([2, 3, 4]), T([5, 4]), T([5])], tol=MM_TOL)
add("linear", [T([2, 3, 4], layout="X"), T([5, 4], layout="T"), S(None)], tol=MM_TOL)
add("linear", [T([2, 3, 4], "f64"), T([5, 4], "f64"), T([5], "f64")], tol=MM_TOL)
add("linear", [T([2, 3, 4], "bf16"), T([5, 4], "bf16"), T([5], "bf16")], tol=MM_TOL)

# einsum: one case per equation form.
EINSUM = [
    ("ij,jk->ik", [[3, 4], [4, 5]]),
    ("bij,bjk->bik", [[2, 3, 4], [2, 4, 5]]),
    ("ii->i", [[4, 4]]),
    ("ii", [[4, 4]]),
    ("ii->", [[4, 4]]),
    ("i,i->", [[5], [5]]),
    ("ij->ji", [[3, 4]]),
    ("...ij,...jk", [[2, 3, 4], [4, 5]]),
    ("...ij,...jk->...ik", [[2, 1, 3, 4], [3, 4, 5]]),
    ("bhqd,bhkd->bhqk", [[2, 3, 4, 5], [2, 3, 6, 5]]),
    ("abc,cd,de->abe", [[2, 3, 4], [4, 5], [5, 6]]),
    ("i,j->ij", [[3], [4]]),
    ("ij,kj", [[3, 4], [5, 4]]),
    ("iij->j", [[3, 3, 4]]),
    ("bij,bj->bi", [[2, 3, 4], [1, 4]]),  # size-1 broadcast
    ("ij,jk,kl->il", [[3, 4], [4, 5], [5, 2]]),
    ("ijk->", [[2, 3, 4]]),
    ("Ab,bc->Ac", [[2, 3], [3, 4]]),
    ("i,i,i->i", [[4], [4], [4]]),
]
for eq, shapes in EINSUM:
    add("einsum", [T(s) for s in shapes], {"eq": eq}, tol=MM_TOL)
add("einsum", [T([3, 4], "f64", layout="T"), T([4, 5], "f64", layout="S")], {"eq": "ij,jk->ik"}, tol=MM_TOL)
add("einsum", [T([2, 3, 4], layout="E"), T([2, 4, 5], layout="X")], {"eq": "bij,bjk->bik"}, tol=MM_TOL)
add("einsum", [T([3, 4], "i64"), T([4, 5], "i64")], {"eq": "ij,jk->ik"})
add("einsum", [T([3, 4], "f16"), T([4, 5], "f16")], {"eq": "ij,jk"}, tol=MM_TOL)

# scaled_dot_product_attention: masks (bool / float), causal, scale, gqa, dtypes.
SDPA = "scaled_dot_product_attention"
add(SDPA, [T([2, 3, 5, 4]), T([2, 3, 6, 4]), T([2, 3, 6, 7]), S(None)], tol=MM_TOL)
add(SDPA, [T([5, 4]), T([6, 4]), T([6, 3]), S(None)], tol=MM_TOL)
add(SDPA, [T([2, 3, 5, 4]), T([2, 3, 6, 4]), T([2, 3, 6, 7]), T([5, 6], "bool")], tol=MM_TOL)
add(SDPA, [T([2, 3, 5, 4]), T([2, 3, 6, 4]), T([2, 3, 6, 7]), T([2, 1, 5, 6])], tol=MM_TOL)
add(SDPA, [T([2, 3, 5, 4]), T([2, 3, 6, 4]), T([2, 3, 6, 7]),
           T([5, 6], "bool", "v", values=[0] * 6 + [1] * 24)], tol=MM_TOL)  # a fully masked row
add(SDPA, [T([2, 3, 5, 4]), T([2, 3, 5, 4]), T([2, 3, 5, 4]), S(None)], {"is_causal": True}, tol=MM_TOL)
add(SDPA, [T([1, 2, 6, 4]), T([1, 2, 4, 4]), T([1, 2, 4, 3]), S(None)], {"is_causal": True}, tol=MM_TOL)
add(SDPA, [T([2, 5, 4]), T([2, 6, 4]), T([2, 6, 3]), S(None)], {"scale": 0.3}, tol=MM_TOL)
add(SDPA, [T([1, 4, 5, 8]), T([1, 2, 6, 8]), T([1, 2, 6, 3]), S(None)], {"enable_gqa": True}, tol=MM_TOL)
add(SDPA, [T([1, 4, 5, 8]), T([1, 2, 6, 8]), T([1, 2, 6, 3]), T([4, 5, 6], "bool")], {"enable_gqa": True},
    tol=MM_TOL)
add(SDPA, [T([1, 4, 5, 8]), T([1, 1, 5, 8]), T([1, 1, 5, 3]), S(None)], {"enable_gqa": True, "is_causal": True},
    tol=MM_TOL)
add(SDPA, [T([2, 5, 4], layout="T"), T([2, 6, 4], layout="X"), T([2, 6, 3], layout="E"), S(None)], tol=MM_TOL)
add(SDPA, [T([2, 5, 4], "f64"), T([2, 6, 4], "f64"), T([2, 6, 3], "f64"), T([5, 6], "f64")], tol=MM_TOL)
add(SDPA, [T([2, 5, 4], "f16"), T([2, 6, 4], "f16"), T([2, 6, 3], "f16"), S(None)], tol=MM_TOL)
add(SDPA, [T([2, 5, 4], "bf16"), T([2, 6, 4], "bf16"), T([2, 6, 3], "bf16"), S(None)], {"is_causal": True},
    tol=MM_TOL)
