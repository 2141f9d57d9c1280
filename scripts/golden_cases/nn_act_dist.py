# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the further activations (logsigmoid, hardshrink, softshrink, tanhshrink,
# threshold, rrelu in evaluation) and the distances (cosine_similarity, pairwise_distance),
# exec'd inside scripts/gen_golden.py. Registry: tests/conformance/registry_nn_act_dist.cpp.
# Each case returns the result and the gradients of sum(result) with respect to the first `ng`
# inputs (default 1; 0 for values only).


_ad_grads = with_grads

PY["logsigmoid"] = _ad_grads(lambda a, at: F.logsigmoid(a[0]))
PY["hardshrink"] = _ad_grads(lambda a, at: F.hardshrink(a[0], at.get("lambd", 0.5)))
PY["softshrink"] = _ad_grads(lambda a, at: F.softshrink(a[0], at.get("lambd", 0.5)))
PY["tanhshrink"] = _ad_grads(lambda a, at: F.tanhshrink(a[0]))
PY["threshold"] = _ad_grads(lambda a, at: F.threshold(a[0], at["threshold"], at["value"]))
PY["rrelu"] = _ad_grads(lambda a, at: F.rrelu(a[0], at.get("lower", 1.0 / 8), at.get("upper", 1.0 / 3), False))
PY["cosine_similarity"] = _ad_grads(lambda a, at: F.cosine_similarity(a[0], a[1], at.get("dim", 1), at.get("eps", 1e-8)))
PY["pairwise_distance"] = _ad_grads(lambda a, at: F.pairwise_distance(a[0], a[1], at.get("p", 2.0), at.get("eps", 1e-6),
                                                                      bool(at.get("keepdim", 0))))

_AD_TOL = 4.0
for _op, _ats, _lo, _hi in (("logsigmoid", [{}], -30, 30), ("tanhshrink", [{}], -4, 4),
                            ("hardshrink", [{}, {"lambd": 1.5}], -3, 3), ("softshrink", [{}, {"lambd": 1.0}], -3, 3),
                            ("threshold", [{"threshold": 0.5, "value": -2.0}, {"threshold": -1.0, "value": 0.0}], -3, 3),
                            ("rrelu", [{}, {"lower": 0.1, "upper": 0.3}], -3, 3)):
    for _at in _ats:
        add(_op, [T([7, 19], "f32", "u", lo=_lo, hi=_hi)], _at, tol=_AD_TOL)
        add(_op, [T([3, 4], "f64", "u", "T", _lo, _hi)], _at, tol=_AD_TOL)
    add(_op, [T([4, 6], "f32", "sp")], dict(_ats[0], ng=0), tol=_AD_TOL)  # NaN and inf: values only
    add(_op, [T([], "f64", "u", lo=_lo, hi=_hi)], _ats[0], tol=_AD_TOL)
    add(_op, [T([0, 3], "f32")], _ats[0], tol=_AD_TOL)
    add(_op, [T([3, 5], "f32", "u", "X", _lo, _hi)], _ats[0], tol=_AD_TOL)
add("threshold", [T([9], "i64", "i", lo=-4, hi=4)], {"threshold": 1.0, "value": 7.0, "ng": 0}, tol=0)

for _dt in ("f32", "f64"):
    add("cosine_similarity", [T([4, 6], _dt), T([4, 6], _dt)], {"ng": 2}, tol=_AD_TOL)
    add("pairwise_distance", [T([4, 6], _dt), T([4, 6], _dt)], {"ng": 2}, tol=_AD_TOL)
add("cosine_similarity", [T([3, 5, 2], "f64"), T([1, 5, 1], "f64")], {"ng": 2}, tol=_AD_TOL)  # broadcast
add("cosine_similarity", [T([3, 5], "f64", "u", "T", -2, 2), T([5], "f64")], {"dim": -1, "ng": 2}, tol=_AD_TOL)
add("cosine_similarity", [T([2, 4], "f32", "v", values=[0, 0, 0, 0, 1, 2, 3, 4]), T([2, 4], "f32")],
    {"ng": 0}, tol=_AD_TOL)  # a zero row: the eps clamp
add("cosine_similarity", [T([5], "f64"), T([5], "f64")], {"dim": 0, "eps": 0.5, "ng": 2}, tol=_AD_TOL)
add("cosine_similarity", [T([0, 3], "f32"), T([0, 3], "f32")], {"ng": 0}, tol=_AD_TOL)
for _p in (1.0, 3.0, float("inf")):
    add("pairwise_distance", [T([3, 5], "f64"), T([3, 5], "f64")], {"p": _p, "ng": 2}, tol=_AD_TOL)
add("pairwise_distance", [T([3, 5], "f64"), T([5], "f64")], {"keepdim": 1, "ng": 2}, tol=_AD_TOL)
add("pairwise_distance", [T([2, 3, 4], "f32", "u", "S", -2, 2), T([2, 1, 4], "f32")], {"eps": 0.0, "p": 2.0, "ng": 2},
    tol=_AD_TOL)
add("pairwise_distance", [T([6], "f64"), T([6], "f64")], {"p": 1.0, "ng": 2}, tol=_AD_TOL)
