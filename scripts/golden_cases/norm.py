# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the normalisation family (exec'd inside scripts/gen_golden.py, whose
# helpers add, T, S, PY, F, torch are in scope). Registry: tests/conformance/registry_norm.cpp.
# Absent optionals are S(None). batch_norm / instance_norm with running stats return
# (y, running_mean, running_var): the stats are cloned, updated in place and compared too.

NORM_TOL = 2.0


def _clone(t):
    return None if t is None else t.clone()


PY["layer_norm"] = lambda a, at: F.layer_norm(a[0], at["ns"], a[1], a[2], at.get("eps", 1e-5))
PY["native_layer_norm"] = lambda a, at: tuple(torch.native_layer_norm(a[0], at["ns"], a[1], a[2], at.get("eps", 1e-5)))
PY["rms_norm"] = lambda a, at: F.rms_norm(a[0], at["ns"], a[1], eps=at.get("eps"))
PY["group_norm"] = lambda a, at: F.group_norm(a[0], at["groups"], a[1], a[2], at.get("eps", 1e-5))


def _instance_norm(a, at):
    rm, rv = _clone(a[1]), _clone(a[2])
    y = F.instance_norm(a[0], rm, rv, a[3], a[4], at.get("use_input_stats", True), at.get("momentum", 0.1),
                        at.get("eps", 1e-5))
    return (y, rm, rv) if rm is not None else y


def _batch_norm(a, at):
    rm, rv = _clone(a[1]), _clone(a[2])
    y = F.batch_norm(a[0], rm, rv, a[3], a[4], at.get("training", False), at.get("momentum", 0.1),
                     at.get("eps", 1e-5))
    return (y, rm, rv) if rm is not None else y


PY["instance_norm"] = _instance_norm
PY["batch_norm"] = _batch_norm
PY["local_response_norm"] = lambda a, at: F.local_response_norm(a[0], at["size"], at.get("alpha", 1e-4),
                                                                 at.get("beta", 0.75), at.get("k", 1.0))
PY["normalize"] = lambda a, at: F.normalize(a[0], at.get("p", 2.0), at.get("dim", 1), at.get("eps", 1e-12))

N_ = S(None)

# ---- layer_norm / native_layer_norm ----------------------------------------------------------
add("layer_norm", [T([4, 10], "f32"), T([10], "f32"), T([10], "f32")], {"ns": [10]}, tol=NORM_TOL)
add("layer_norm", [T([2, 3, 5], "f32", scale=3), T([3, 5], "f32"), N_], {"ns": [3, 5]}, tol=NORM_TOL)
add("layer_norm", [T([3, 7], "f64"), N_, N_], {"ns": [7]}, tol=NORM_TOL)
add("layer_norm", [T([3, 37], "f64", "u", lo=50, hi=52), N_, T([37], "f64")], {"ns": [37], "eps": 1e-3}, tol=NORM_TOL)
add("layer_norm", [T([4, 12], "f16"), T([12], "f16"), T([12], "f16")], {"ns": [12]}, tol=NORM_TOL)
add("layer_norm", [T([3, 16], "bf16"), T([16], "bf16"), T([16], "bf16")], {"ns": [16]}, tol=NORM_TOL)
add("layer_norm", [T([3, 16], "bf16"), T([16], "f32"), T([16], "f32")], {"ns": [16]}, tol=NORM_TOL)  # mixed
add("layer_norm", [T([5, 6], "f32", layout="T"), T([6], "f32", layout="F"), T([6], "f32", layout="S")],
    {"ns": [6]}, tol=NORM_TOL)
add("layer_norm", [T([3, 4, 5], "f32", layout="X"), T([4, 5], "f32"), T([4, 5], "f32")], {"ns": [4, 5]},
    tol=NORM_TOL)
add("layer_norm", [T([4, 6], "f32", layout="E"), N_, T([6], "f32")], {"ns": [6]}, tol=NORM_TOL)
add("layer_norm", [T([3, 9], "f16", layout="S"), N_, N_], {"ns": [9]}, tol=NORM_TOL)
add("layer_norm", [T([70], "f32", "u", lo=-3, hi=5), N_, N_], {"ns": [70]}, tol=NORM_TOL)
add("layer_norm", [T([2, 2, 3], "f32", layout="F"), N_, N_], {"ns": [2, 2, 3]}, tol=NORM_TOL)
add("layer_norm", [T([0, 5], "f32"), N_, N_], {"ns": [5]}, tol=NORM_TOL)
add("native_layer_norm", [T([4, 10], "f32"), T([10], "f32"), T([10], "f32")], {"ns": [10]}, tol=NORM_TOL)
add("native_layer_norm", [T([2, 3, 5], "f64", layout="T"), N_, N_], {"ns": [3, 5]}, tol=NORM_TOL)
add("native_layer_norm", [T([2, 3, 4], "f32", layout="X"), N_, T([4], "f32")], {"ns": [4], "eps": 0.1},
    tol=NORM_TOL)

# ---- rms_norm ------------------------------------------------------------------------------
add("rms_norm", [T([4, 10], "f32"), T([10], "f32")], {"ns": [10]}, tol=NORM_TOL)
add("rms_norm", [T([2, 3, 5], "f32"), N_], {"ns": [3, 5], "eps": 1e-3}, tol=NORM_TOL)
add("rms_norm", [T([3, 7], "f64", layout="T"), T([7], "f64")], {"ns": [7]}, tol=NORM_TOL)
add("rms_norm", [T([4, 12], "f16"), T([12], "f16")], {"ns": [12]}, tol=NORM_TOL)
add("rms_norm", [T([3, 16], "bf16", layout="F"), N_], {"ns": [16]}, tol=NORM_TOL)
add("rms_norm", [T([3, 4], "f32", "u", lo=1e-4, hi=2e-4), N_], {"ns": [4]}, tol=NORM_TOL)  # eps matters
add("rms_norm", [T([4, 6], "f32", layout="E"), T([6], "f32", layout="S")], {"ns": [6]}, tol=NORM_TOL)

# ---- group_norm ----------------------------------------------------------------------------
add("group_norm", [T([2, 6, 5], "f32"), T([6], "f32"), T([6], "f32")], {"groups": 3}, tol=NORM_TOL)
add("group_norm", [T([2, 4, 3, 3], "f32", scale=2), T([4], "f32"), N_], {"groups": 2}, tol=NORM_TOL)
add("group_norm", [T([3, 6], "f32"), N_, T([6], "f32")], {"groups": 2}, tol=NORM_TOL)
add("group_norm", [T([2, 4, 3], "f64"), T([4], "f64"), T([4], "f64")], {"groups": 1, "eps": 1e-3}, tol=NORM_TOL)
add("group_norm", [T([2, 4, 5], "f32", layout="T"), N_, N_], {"groups": 4}, tol=NORM_TOL)
add("group_norm", [T([2, 4, 3, 3], "f32", layout="X"), T([4], "f32"), T([4], "f32")], {"groups": 2},
    tol=NORM_TOL)
add("group_norm", [T([2, 6, 4], "f16"), T([6], "f16"), T([6], "f16")], {"groups": 3}, tol=NORM_TOL)
add("group_norm", [T([2, 6, 4], "bf16", layout="F"), T([6], "f32"), T([6], "f32")], {"groups": 2}, tol=NORM_TOL)
add("group_norm", [T([0, 4, 3], "f32"), N_, N_], {"groups": 2}, tol=NORM_TOL)

# ---- instance_norm -------------------------------------------------------------------------
def _rs(c, dt="f32"):
    return [T([c], dt), T([c], dt, "u", lo=0.5, hi=2.0)]


add("instance_norm", [T([2, 3, 5], "f32"), N_, N_, N_, N_], {}, tol=NORM_TOL)
add("instance_norm", [T([2, 3, 4, 4], "f32"), N_, N_, T([3], "f32"), T([3], "f32")], {"eps": 1e-3}, tol=NORM_TOL)
add("instance_norm", [T([2, 3, 5], "f32")] + _rs(3) + [T([3], "f32"), T([3], "f32")], {"momentum": 0.2},
    tol=NORM_TOL)
add("instance_norm", [T([2, 3, 5], "f32", layout="T")] + _rs(3) + [N_, N_], {"use_input_stats": False},
    tol=NORM_TOL)
add("instance_norm", [T([3, 2, 6], "f64", layout="X")] + _rs(2, "f64") + [T([2], "f64"), N_], {}, tol=NORM_TOL)
# f16 with a bias: PyTorch rounds in f16 before the shift (off by 3% where y*w ~ -b); Kiln is exact
add("instance_norm", [T([2, 4, 3, 2], "f16"), N_, N_, T([4], "f16"), N_], {}, tol=NORM_TOL)
add("instance_norm", [T([2, 4, 6], "bf16", layout="F"), N_, N_, N_, N_], {}, tol=NORM_TOL)

# ---- batch_norm ----------------------------------------------------------------------------
add("batch_norm", [T([4, 3], "f32")] + _rs(3) + [T([3], "f32"), T([3], "f32")], {"training": True},
    tol=NORM_TOL)
add("batch_norm", [T([2, 3, 4, 5], "f32", scale=2)] + _rs(3) + [T([3], "f32"), T([3], "f32")],
    {"training": True, "momentum": 0.3}, tol=NORM_TOL)
add("batch_norm", [T([2, 3, 4, 5], "f32")] + _rs(3) + [T([3], "f32"), T([3], "f32")], {}, tol=NORM_TOL)  # eval
add("batch_norm", [T([3, 4, 5], "f32", layout="T"), N_, N_, N_, T([4], "f32")], {"training": True},
    tol=NORM_TOL)  # no running stats
add("batch_norm", [T([3, 4, 5], "f32", layout="X")] + _rs(4) + [T([4], "f32"), N_],
    {"training": True, "eps": 1e-3}, tol=NORM_TOL)
add("batch_norm", [T([5, 2, 3], "f64", layout="F")] + _rs(2, "f64") + [N_, N_], {"training": True},
    tol=NORM_TOL)
add("batch_norm", [T([4, 3, 5], "f64")] + _rs(3, "f64") + [T([3], "f64"), T([3], "f64")], {}, tol=NORM_TOL)
add("batch_norm", [T([4, 3, 5], "f16")] + _rs(3, "f16") + [T([3], "f16"), T([3], "f16")], {"training": True},
    tol=NORM_TOL)
add("batch_norm", [T([4, 3, 5], "bf16")] + _rs(3) + [T([3], "f32"), T([3], "f32")], {"training": True},
    tol=NORM_TOL)
add("batch_norm", [T([4, 3, 5], "bf16")] + _rs(3, "bf16") + [N_, N_], {}, tol=NORM_TOL)

# ---- local_response_norm -------------------------------------------------------------------
add("local_response_norm", [T([2, 6, 4], "f32")], {"size": 3}, tol=NORM_TOL)
add("local_response_norm", [T([2, 5, 3, 3], "f32", scale=3)], {"size": 2, "alpha": 0.01, "beta": 0.5, "k": 2.0},
    tol=NORM_TOL)
add("local_response_norm", [T([1, 7, 2, 2, 2], "f64")], {"size": 5, "alpha": 0.1}, tol=NORM_TOL)
add("local_response_norm", [T([1, 24, 3], "f32", scale=2)], {"size": 20, "alpha": 0.5}, tol=NORM_TOL)
add("local_response_norm", [T([2, 4, 5], "f32", layout="X")], {"size": 3, "alpha": 0.2}, tol=NORM_TOL)
add("local_response_norm", [T([2, 6, 4], "f16", layout="T")], {"size": 4, "alpha": 0.3}, tol=NORM_TOL)
add("local_response_norm", [T([2, 6, 4], "bf16")], {"size": 3, "alpha": 0.3}, tol=NORM_TOL)

# ---- normalize -----------------------------------------------------------------------------
add("normalize", [T([3, 5], "f32")], {}, tol=NORM_TOL)
add("normalize", [T([3, 5], "f32", layout="T")], {"p": 1.0, "dim": 0}, tol=NORM_TOL)
add("normalize", [T([2, 3, 4], "f64")], {"p": 3.0, "dim": -1}, tol=NORM_TOL)
add("normalize", [T([3, 4], "f32", "v", values=[0.0] * 4 + [1.0, 2.0, 3.0, 4.0] + [1e-14, 0.0, 0.0, 0.0])],
    {"dim": 1}, tol=NORM_TOL)
add("normalize", [T([3, 4], "f32", layout="F")], {"p": float("inf"), "dim": 1}, tol=NORM_TOL)
add("normalize", [T([4, 6], "f16")], {}, tol=NORM_TOL)
add("normalize", [T([4, 6], "bf16", layout="S")], {"dim": 0, "eps": 0.5}, tol=NORM_TOL)
