# SPDX-License-Identifier: MIT OR Apache-2.0
# Golden cases of kiln::linalg (exec'd inside scripts/gen_golden.py: add, T, S, PY, ... are its
# helpers). Only values that are unique are compared here (inverse, determinant, solutions,
# factors with a fixed convention, singular values, eigenvalues, norms); Q/R, U/V and
# eigenvectors are checked through identities in tests/unit/test_linalg.cpp.
#
# Kiln computes every factorisation in f64, so the reference is PyTorch in f64 rounded to the
# input dtype (PyTorch's own f32 LAPACK result is less accurate on ill-conditioned inputs).
# Inputs are well-conditioned matrices with explicit values (randn + n*I, B B^T + n*I, ...),
# placed in the base tensor so that any layout (transposed, sliced, flipped) views them.

_LA_SEED = [1234]


def _la_rng():
    _LA_SEED[0] += 1
    return np.random.default_rng(_LA_SEED[0])


def _la_T(M, dtype="f32", layout="c"):
    """A T input whose view (after the layout's transforms) holds the numpy array M."""
    shape = list(M.shape)
    base_shape, tr = layout_plan(shape, layout)
    n = int(np.prod(base_shape)) if base_shape else 1
    base = _la_rng().standard_normal(n)
    if n:
        idx = apply_transforms(torch.arange(n).reshape(base_shape), tr).reshape(-1).numpy()
        base[idx] = np.asarray(M, dtype=np.float64).reshape(-1)
    return T(shape, dtype, kind="sp", layout=layout, values=[float(v) for v in base])


def _la_gen(batch, n, m=None, shift=None):
    """randn [*batch, n, m] (+ shift * I on the leading square part)."""
    m = n if m is None else m
    A = _la_rng().standard_normal(list(batch) + [n, m])
    if shift is None:
        shift = float(n)
    k = min(n, m)
    A[..., range(k), range(k)] += shift
    return A


def _la_spd(batch, n):
    B = _la_rng().standard_normal(list(batch) + [n, n])
    return B @ np.swapaxes(B, -1, -2) + n * np.eye(n)


def _la_hilbert(n):
    return np.array([[1.0 / (i + j + 1) for j in range(n)] for i in range(n)])


def _la_ref(fn):
    """PyTorch in f64 on f32/f64 inputs; float outputs rounded back to the input dtype."""

    def run(a, at):
        dt = next((x.dtype for x in a if isinstance(x, torch.Tensor)), torch.float64)
        a64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in a]
        out = fn(a64, at)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        outs = [o.to(dt) if o.is_floating_point() and dt in (torch.float32, torch.float64) else o for o in outs]
        return outs if len(outs) > 1 else outs[0]

    return run


PY["linalg_inv"] = _la_ref(lambda a, at: torch.linalg.inv(a[0]))
PY["linalg_det"] = _la_ref(lambda a, at: torch.linalg.det(a[0]))
PY["linalg_slogdet"] = _la_ref(lambda a, at: tuple(torch.linalg.slogdet(a[0])))
PY["linalg_solve"] = _la_ref(lambda a, at: torch.linalg.solve(a[0], a[1], left=at.get("left", True)))
PY["linalg_solve_triangular"] = _la_ref(lambda a, at: torch.linalg.solve_triangular(
    a[0], a[1], upper=at["upper"], left=at.get("left", True), unitriangular=at.get("unitriangular", False)))
PY["linalg_cholesky"] = _la_ref(lambda a, at: torch.linalg.cholesky(a[0], upper=at.get("upper", False)))
PY["linalg_lu_factor"] = _la_ref(lambda a, at: tuple(torch.linalg.lu_factor(a[0])))
PY["linalg_qr"] = _la_ref(lambda a, at: tuple(torch.linalg.qr(a[0], mode=at.get("mode", "reduced"))))
PY["linalg_svdvals"] = _la_ref(lambda a, at: torch.linalg.svdvals(a[0]))
PY["linalg_eigvalsh"] = _la_ref(lambda a, at: torch.linalg.eigvalsh(a[0], UPLO=at.get("UPLO", "L")))
PY["linalg_lstsq"] = _la_ref(lambda a, at: torch.linalg.lstsq(a[0], a[1], driver="gelsd").solution)
PY["linalg_pinv"] = _la_ref(lambda a, at: torch.linalg.pinv(a[0], hermitian=at.get("hermitian", False)))
PY["linalg_matrix_rank"] = lambda a, at: torch.linalg.matrix_rank(a[0])
PY["linalg_matrix_power"] = lambda a, at: torch.linalg.matrix_power(
    a[0].double() if a[0].is_floating_point() else a[0], at["n"]).to(a[0].dtype)


def _la_ord(at):
    o = at["ord"]
    return {"inf": math.inf, "-inf": -math.inf}.get(o, o) if isinstance(o, str) else o


PY["linalg_matrix_norm"] = _la_ref(lambda a, at: torch.linalg.matrix_norm(
    a[0], _la_ord(at), dim=tuple(at.get("dim", [-2, -1])), keepdim=at.get("keepdim", False)))
PY["linalg_vector_norm"] = lambda a, at: torch.linalg.vector_norm(
    a[0], _la_ord(at), dim=tuple(at["dim"]) if "dim" in at else None, keepdim=at.get("keepdim", False))
PY["linalg_norm"] = _la_ref(lambda a, at: torch.linalg.norm(
    a[0], _la_ord(at) if "ord" in at else None, dim=tuple(at["dim"]) if "dim" in at else None,
    keepdim=at.get("keepdim", False)))
PY["linalg_cross"] = lambda a, at: torch.linalg.cross(a[0], a[1], dim=at.get("dim", -1))
PY["trace"] = lambda a, at: torch.trace(a[0])

# ---- inverse, determinant, solve ------------------------------------------------------------
add("linalg_inv", [_la_T(_la_gen([], 4))], tol=4)
add("linalg_inv", [_la_T(_la_gen([2, 3], 5), "f64")], tol=4)
add("linalg_inv", [_la_T(_la_gen([3], 4), "f32", "T")], tol=4)
add("linalg_inv", [_la_T(_la_gen([4], 3), "f64", "X")], tol=4)
add("linalg_inv", [_la_T(_la_gen([2], 6, shift=0.0), "f32", "F")], tol=40)
add("linalg_inv", [_la_T(_la_hilbert(5), "f64")], tol=1e4)  # cond ~ 5e5
add("linalg_inv", [_la_T(_la_hilbert(4), "f32")], tol=100)
add("linalg_inv", [_la_T(np.array([[2.5]]))])
add("linalg_inv", [T([0, 0])])
add("linalg_inv", [T([2, 0, 0], "f64")])
for dt, lay in (("f32", "c"), ("f64", "T"), ("f32", "S")):
    add("linalg_det", [_la_T(_la_gen([3], 4, shift=0.0), dt, lay)], tol=10)
add("linalg_det", [_la_T(_la_gen([2, 2], 6, shift=1.0), "f64")], tol=10)
add("linalg_det", [_la_T(np.array([[1.0, 2.0], [2.0, 4.0]]))])  # singular: 0
add("linalg_det", [_la_T(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]), "f64")])
add("linalg_det", [T([0, 0])])
add("linalg_det", [T([3, 1, 1], "f64")])
for dt, lay in (("f32", "c"), ("f64", "X")):
    add("linalg_slogdet", [_la_T(_la_gen([2, 3], 5, shift=0.0), dt, lay)], tol=10)
add("linalg_slogdet", [_la_T(np.array([[1.0, 2.0], [2.0, 4.0]]), "f64")])
add("linalg_slogdet", [T([0, 0])])
add("linalg_solve", [_la_T(_la_gen([], 4)), T([4, 2])], tol=4)
add("linalg_solve", [_la_T(_la_gen([], 4), "f64"), T([4], "f64")], tol=4)          # vector b
add("linalg_solve", [_la_T(_la_gen([2], 3), "f32", "T"), T([2, 3])], tol=4)        # batch of vectors
add("linalg_solve", [_la_T(_la_gen([2], 3), "f64"), T([3, 4], "f64", layout="T")], tol=4)  # broadcast b
add("linalg_solve", [_la_T(_la_gen([], 3)), T([2, 1, 3, 2], layout="F")], tol=4)  # broadcast a
add("linalg_solve", [_la_T(_la_gen([2], 3), "f64"), T([2, 5, 3], "f64")], {"left": False}, tol=4)
add("linalg_solve", [_la_T(_la_hilbert(4), "f64"), T([4, 1], "f64")], tol=1e4)
add("linalg_solve", [T([0, 0]), T([0, 2])])
for up in (False, True):
    for left in (True, False):
        for unit in (False, True):
            b = T([4, 3]) if left else T([3, 4], "f32", layout="T")
            add("linalg_solve_triangular", [_la_T(_la_gen([], 4), "f32", "T" if unit else "c"), b],
                {"upper": up, "left": left, "unitriangular": unit}, tol=4)
add("linalg_solve_triangular", [_la_T(_la_gen([2, 1], 3), "f64"), T([3, 3, 2], "f64", layout="X")],
    {"upper": True, "left": True}, tol=4)
add("linalg_solve_triangular", [T([0, 0]), T([0, 3])], {"upper": False})

# ---- factorisations with a fixed convention ---------------------------------------------------
for up in (False, True):
    add("linalg_cholesky", [_la_T(_la_spd([], 4))], {"upper": up}, tol=4)
    add("linalg_cholesky", [_la_T(_la_spd([2, 2], 5), "f64", "T")], {"upper": up}, tol=4)
add("linalg_cholesky", [_la_T(np.tril(_la_gen([3], 4)) + 0.0, "f32", "F")], tol=4)  # reads one triangle
add("linalg_cholesky", [_la_T(np.array([[4.0]]), "f64")])
add("linalg_cholesky", [T([0, 0])])
add("linalg_lu_factor", [_la_T(_la_gen([], 5, shift=0.0))], tol=10)
add("linalg_lu_factor", [_la_T(_la_gen([2, 2], 4, shift=0.0), "f64", "T")], tol=10)
add("linalg_lu_factor", [_la_T(_la_gen([2], 5, 3, shift=0.0), "f64")], tol=10)
add("linalg_lu_factor", [_la_T(_la_gen([], 3, 5, shift=0.0), "f32", "S")], tol=10)
add("linalg_lu_factor", [T([0, 0])])
for mode in ("reduced", "complete", "r"):
    add("linalg_qr", [_la_T(_la_gen([], 5, 3, shift=0.0))], {"mode": mode}, tol=10)
    add("linalg_qr", [_la_T(_la_gen([2], 3, 4, shift=0.0), "f64", "T")], {"mode": mode}, tol=10)
add("linalg_qr", [_la_T(_la_gen([2, 2], 4, shift=0.0), "f64", "X")], tol=10)
add("linalg_qr", [T([0, 3])], {"mode": "complete"})
add("linalg_qr", [T([3, 0])], {"mode": "reduced"})

# ---- spectra ------------------------------------------------------------------------------
add("linalg_svdvals", [_la_T(_la_gen([], 5, 3, shift=0.0))], tol=10)
add("linalg_svdvals", [_la_T(_la_gen([2, 3], 3, 6, shift=0.0), "f64", "T")], tol=10)
add("linalg_svdvals", [_la_T(_la_gen([2], 4, shift=0.0), "f32", "X")], tol=10)
_r = _la_rng()
_lowrank = _r.standard_normal([6, 2]) @ _r.standard_normal([2, 4])
add("linalg_svdvals", [_la_T(_lowrank, "f64")], tol=1e3)  # two zero singular values
add("linalg_svdvals", [_la_T(np.array([[3.0]]))])
add("linalg_svdvals", [T([2, 0, 3])])
for uplo in ("L", "U"):
    add("linalg_eigvalsh", [_la_T(_la_gen([], 5, shift=0.0))], {"UPLO": uplo}, tol=10)
    add("linalg_eigvalsh", [_la_T(_la_spd([2, 3], 4), "f64", "T")], {"UPLO": uplo}, tol=10)
add("linalg_eigvalsh", [_la_T(_la_gen([2], 7, shift=0.0), "f32", "F")], tol=10)
add("linalg_eigvalsh", [_la_T(np.diag([1.0, 2.0, 2.0, -1.0]), "f64")])  # repeated eigenvalue
add("linalg_eigvalsh", [_la_T(np.array([[-2.0]]))])
add("linalg_eigvalsh", [T([0, 0])])

# ---- least squares, pseudo-inverse, rank, powers --------------------------------------------
add("linalg_lstsq", [_la_T(_la_gen([], 6, 3)), T([6, 2])], tol=10)
add("linalg_lstsq", [_la_T(_la_gen([2], 5, 5), "f64", "T"), T([2, 5, 1], "f64")], tol=10)
add("linalg_lstsq", [_la_T(_la_gen([], 3, 5), "f64"), T([3, 2], "f64")], tol=10)  # minimum norm
add("linalg_lstsq", [_la_T(_la_gen([2], 6, 4), "f64"), T([2, 6], "f64")], tol=10)  # vector b
add("linalg_pinv", [_la_T(_la_gen([], 5, 3, shift=0.0))], tol=10)
add("linalg_pinv", [_la_T(_la_gen([2], 3, 4, shift=0.0), "f64", "T")], tol=10)
add("linalg_pinv", [_la_T(_lowrank, "f64")], tol=100)
add("linalg_pinv", [_la_T(_la_spd([2], 4), "f64")], {"hermitian": True}, tol=10)
add("linalg_pinv", [T([2, 0])])
add("linalg_matrix_rank", [_la_T(_lowrank, "f64")])
add("linalg_matrix_rank", [_la_T(_la_gen([3], 4, 5, shift=0.0))])
for p in (0, 1, 2, 3, 5, -1, -2):
    add("linalg_matrix_power", [_la_T(_la_gen([2], 3) / 3.0, "f64" if p % 2 else "f32")], {"n": p}, tol=10)
add("linalg_matrix_power", [T([3, 3], "i64", kind="i", lo=-3, hi=3)], {"n": 3}, tol=0)
add("linalg_matrix_power", [T([2, 2, 2], "i32", kind="i", lo=-3, hi=3, layout="T")], {"n": 0}, tol=0)
add("linalg_matrix_power", [_la_T(_la_gen([], 4) / 4.0, "f32", "T")], {"n": 4}, tol=10)
add("linalg_matrix_power", [T([0, 0])], {"n": 3})

# ---- norms, cross, trace --------------------------------------------------------------------
for o in ("fro", "nuc", 1, -1, 2, -2, "inf", "-inf"):
    add("linalg_matrix_norm", [_la_T(_la_gen([2], 3, 4, shift=0.0))], {"ord": o}, tol=10)
    add("linalg_matrix_norm", [T([3, 2, 4], "f64", layout="T")], {"ord": o, "dim": [0, 2], "keepdim": True}, tol=10)
add("linalg_matrix_norm", [T([2, 0, 3])], {"ord": 2})
add("linalg_matrix_norm", [T([0, 0])], {"ord": "nuc"})
for o in (2, 1, "inf", "-inf", 0, 3.5, -1):
    add("linalg_vector_norm", [T([3, 4], kind="sp", values=[0.0, -0.0, 1.5, -2.0])], {"ord": o}, tol=4)
    add("linalg_vector_norm", [T([2, 3, 4], "f64", layout="X")], {"ord": o, "dim": [0, 2], "keepdim": True}, tol=4)
add("linalg_vector_norm", [T([2, 0])], {"ord": 2, "dim": [1]})
add("linalg_vector_norm", [T([], "f64")], {"ord": 2})
add("linalg_norm", [T([2, 3, 4])], tol=4)
add("linalg_norm", [T([3, 4], "f64")], {"ord": "nuc"}, tol=10)
add("linalg_norm", [T([3, 4], "f64")], {"ord": 2}, tol=10)
add("linalg_norm", [T([4])], {"ord": 3}, tol=4)
add("linalg_norm", [T([2, 3, 4])], {"ord": 1, "dim": [2]}, tol=4)
add("linalg_norm", [T([2, 3, 4], "f64")], {"ord": "inf", "dim": [0, 1]}, tol=4)
add("linalg_cross", [T([4, 3]), T([4, 3], layout="T")])
add("linalg_cross", [T([3, 2], "f64"), T([3, 1], "f64")], {"dim": 0})
add("linalg_cross", [T([2, 1, 3]), T([1, 4, 3], layout="F")])
add("linalg_cross", [T([5, 3], "i32"), T([5, 3], "i32")], tol=0)
add("linalg_cross", [T([0, 3]), T([0, 3])])
add("trace", [T([3, 3])], tol=4)
add("trace", [T([3, 5], "f64", layout="T")], tol=4)
add("trace", [T([4, 2], "i32")], tol=0)
add("trace", [T([0, 3])])
