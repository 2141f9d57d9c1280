# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the pooling and resampling family (exec'd inside scripts/gen_golden.py,
# so add, T, S, PY, F, torch are in scope). Registry: tests/conformance/registry_pool.cpp.
# Attributes left out mean PyTorch's default (stride = kernel_size, align_corners None, ...).

_POOL_FN = {
    "max": {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d},
    "avg": {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d},
    "aavg": {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d},
    "amax": {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d},
    "unpool": {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d},
}


def _pool_py(kind, nd):
    fn = _POOL_FN[kind][nd]

    def max_ref(a, at):
        return fn(a[0], at["kernel_size"], at.get("stride"), at.get("padding", 0), at.get("dilation", 1),
                  ceil_mode=at.get("ceil_mode", False), return_indices=at.get("return_indices", False))

    def avg_ref(a, at):
        kw = dict(ceil_mode=at.get("ceil_mode", False), count_include_pad=at.get("count_include_pad", True))
        if nd > 1:
            kw["divisor_override"] = at.get("divisor_override")
        return fn(a[0], at["kernel_size"], at.get("stride"), at.get("padding", 0), **kw)

    def adaptive_ref(a, at):
        size = [None if v < 0 else v for v in at["output_size"]]
        size = size[0] if len(size) == 1 else tuple(size)
        if kind == "amax":
            return fn(a[0], size, return_indices=at.get("return_indices", False))
        return fn(a[0], size)

    def unpool_ref(a, at):
        one = lambda v: v[0] if isinstance(v, list) and len(v) == 1 else v  # noqa: E731
        return fn(a[0], a[1], one(at["kernel_size"]), one(at.get("stride")), one(at.get("padding", 0)),
                  at.get("output_size"))

    return {"max": max_ref, "avg": avg_ref, "aavg": adaptive_ref, "amax": adaptive_ref, "unpool": unpool_ref}[kind]


for _nd in (1, 2, 3):
    PY[f"max_pool{_nd}d"] = _pool_py("max", _nd)
    PY[f"avg_pool{_nd}d"] = _pool_py("avg", _nd)
    PY[f"adaptive_avg_pool{_nd}d"] = _pool_py("aavg", _nd)
    PY[f"adaptive_max_pool{_nd}d"] = _pool_py("amax", _nd)
    PY[f"max_unpool{_nd}d"] = _pool_py("unpool", _nd)

# ---- max_pool --------------------------------------------------------------------------------
_MP = "max_pool2d"
add(_MP, [T([2, 3, 7, 9], "f32", "d")], {"kernel_size": [3], "stride": [2], "padding": [1], "return_indices": True}, tol=0)
add(_MP, [T([2, 3, 8, 8], "f32", "d")], {"kernel_size": [2], "return_indices": True}, tol=0)
add(_MP, [T([1, 2, 9, 10], "f32", "d")], {"kernel_size": [3, 2], "stride": [2, 3], "padding": [1, 1], "dilation": [2, 1],
                                           "return_indices": True}, tol=0)
add(_MP, [T([2, 2, 8, 7], "f32", "d")], {"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True,
                                          "return_indices": True}, tol=0)
add(_MP, [T([1, 1, 6, 6], "f32", "d")], {"kernel_size": [3], "stride": [3], "padding": [1], "ceil_mode": True,
                                          "return_indices": True}, tol=0)
add(_MP, [T([1, 2, 10, 11], "f32", "d")], {"kernel_size": [3], "stride": [1], "dilation": [2], "return_indices": True}, tol=0)
add(_MP, [T([2, 3, 6, 7], "f64", "d", "T")], {"kernel_size": [2], "stride": [1], "return_indices": True}, tol=0)
add(_MP, [T([2, 3, 6, 7], "f32", "n", "S")], {"kernel_size": [3], "stride": [2], "padding": [1], "return_indices": True}, tol=0)
add(_MP, [T([2, 3, 6, 7], "f32", "n", "F")], {"kernel_size": [2], "return_indices": True}, tol=0)
add(_MP, [T([2, 3, 6, 7], "f32", "n", "X")], {"kernel_size": [3], "stride": [2]}, tol=0)
add(_MP, [T([3, 5, 6], "f32", "d")], {"kernel_size": [2], "stride": [1], "return_indices": True}, tol=0)  # unbatched
add(_MP, [T([2, 2, 5, 5], "f16", "d")], {"kernel_size": [3], "stride": [2], "padding": [1], "return_indices": True}, tol=0)
add(_MP, [T([2, 2, 5, 5], "bf16", "n")], {"kernel_size": [2], "stride": [2], "ceil_mode": True}, tol=0)
add(_MP, [T([1, 2, 4, 4], "f32", "sp")], {"kernel_size": [2], "stride": [1], "return_indices": True}, tol=0)  # NaN wins
add(_MP, [T([1, 1, 3, 3], "f32", "v", values=[-math.inf] * 9)], {"kernel_size": [2], "stride": [2], "padding": [1],
                                                                   "return_indices": True}, tol=0)
for _dt in ("i32", "i64", "u8", "i8", "i16"):
    add(_MP, [T([2, 2, 5, 6], _dt, lo=-50, hi=50)], {"kernel_size": [2], "stride": [2], "ceil_mode": True,
                                                      "return_indices": True}, tol=0)
add(_MP, [T([0, 2, 5, 5], "f32")], {"kernel_size": [2]}, tol=0)
add(_MP, [T([1, 2, 14, 14], "f32", "n")], {"kernel_size": [3], "stride": [2], "padding": [1]}, tol=0)  # multi-thread size

_MP = "max_pool1d"
add(_MP, [T([2, 3, 11], "f32", "d")], {"kernel_size": [3], "stride": [2], "padding": [1], "return_indices": True}, tol=0)
add(_MP, [T([2, 3, 12], "f32", "d")], {"kernel_size": [4], "stride": [3], "padding": [2], "dilation": [1], "ceil_mode": True,
                                        "return_indices": True}, tol=0)
add(_MP, [T([2, 3, 13], "f64", "d", "S")], {"kernel_size": [3], "dilation": [3], "stride": [1]}, tol=0)
add(_MP, [T([4, 9], "f32", "d")], {"kernel_size": [2], "return_indices": True}, tol=0)
add(_MP, [T([2, 3, 10], "f16", "n", "T")], {"kernel_size": [3], "stride": [2]}, tol=0)
add(_MP, [T([1, 2, 8], "f32", "sp")], {"kernel_size": [3], "stride": [1], "padding": [1], "return_indices": True}, tol=0)

_MP = "max_pool3d"
add(_MP, [T([2, 2, 5, 6, 7], "f32", "d")], {"kernel_size": [3], "stride": [2], "padding": [1], "return_indices": True}, tol=0)
add(_MP, [T([1, 2, 6, 5, 6], "f32", "d")], {"kernel_size": [2, 3, 2], "stride": [1, 2, 2], "dilation": [2, 1, 1],
                                             "ceil_mode": True, "return_indices": True}, tol=0)
add(_MP, [T([2, 4, 4, 5], "f64", "d", "T")], {"kernel_size": [2], "stride": [1], "return_indices": True}, tol=0)
add(_MP, [T([1, 2, 4, 4, 4], "bf16", "n", "F")], {"kernel_size": [2]}, tol=0)
add(_MP, [T([1, 2, 4, 4, 5], "i32", lo=-20, hi=20)], {"kernel_size": [2], "return_indices": True}, tol=0)

# ---- avg_pool --------------------------------------------------------------------------------
_AP = "avg_pool2d"
add(_AP, [T([2, 3, 7, 9], "f32")], {"kernel_size": [3], "stride": [2], "padding": [1]})
add(_AP, [T([2, 3, 7, 9], "f32")], {"kernel_size": [3], "stride": [2], "padding": [1], "count_include_pad": False})
add(_AP, [T([2, 3, 8, 7], "f32")], {"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True})
add(_AP, [T([2, 3, 8, 7], "f32")], {"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True,
                                     "count_include_pad": False})
add(_AP, [T([1, 2, 6, 6], "f32")], {"kernel_size": [3], "stride": [3], "padding": [1], "ceil_mode": True})
add(_AP, [T([2, 2, 7, 8], "f32")], {"kernel_size": [2, 3], "stride": [1, 2], "padding": [1, 1], "divisor_override": 5})
add(_AP, [T([2, 3, 6, 7], "f64", "n", "T")], {"kernel_size": [2], "stride": [1]})
add(_AP, [T([2, 3, 6, 7], "f32", "n", "S")], {"kernel_size": [3], "stride": [2], "padding": [1]})
add(_AP, [T([2, 3, 6, 7], "f32", "n", "X")], {"kernel_size": [2]})
add(_AP, [T([3, 6, 5], "f32")], {"kernel_size": [2], "stride": [1]})  # unbatched
add(_AP, [T([2, 2, 6, 6], "f16")], {"kernel_size": [3], "stride": [2], "padding": [1]})
add(_AP, [T([2, 2, 6, 6], "bf16", "n", "F")], {"kernel_size": [2]})
add(_AP, [T([2, 2, 5, 6], "i64", lo=-50, hi=50)], {"kernel_size": [2], "stride": [2], "ceil_mode": True}, tol=0)
add(_AP, [T([2, 2, 5, 6], "i64", lo=-50, hi=50)], {"kernel_size": [3], "stride": [2], "padding": [1],
                                                    "count_include_pad": False}, tol=0)
add(_AP, [T([1, 2, 14, 14], "f32")], {"kernel_size": [3], "stride": [2], "padding": [1]})

_AP = "avg_pool1d"
add(_AP, [T([2, 3, 11], "f32")], {"kernel_size": [3], "stride": [2], "padding": [1]})
add(_AP, [T([2, 3, 11], "f32")], {"kernel_size": [4], "stride": [3], "padding": [2], "ceil_mode": True,
                                   "count_include_pad": False})
add(_AP, [T([2, 3, 10], "f64", "n", "S")], {"kernel_size": [3], "stride": [1]})
add(_AP, [T([4, 9], "f32")], {"kernel_size": [2]})
add(_AP, [T([2, 3, 10], "f16", "n", "T")], {"kernel_size": [3], "stride": [2]})

_AP = "avg_pool3d"
add(_AP, [T([2, 2, 5, 6, 7], "f32")], {"kernel_size": [3], "stride": [2], "padding": [1]})
add(_AP, [T([1, 2, 5, 6, 7], "f32")], {"kernel_size": [2, 3, 3], "stride": [2, 1, 2], "padding": [1, 1, 0], "ceil_mode": True,
                                        "count_include_pad": False})
add(_AP, [T([1, 2, 4, 5, 6], "f32")], {"kernel_size": [2], "divisor_override": 3})
add(_AP, [T([2, 4, 4, 5], "f64", "n", "T")], {"kernel_size": [2], "stride": [1]})

# ---- adaptive pools --------------------------------------------------------------------------
for _op in ("adaptive_avg_pool2d", "adaptive_max_pool2d"):
    _ri = {"return_indices": True} if "max" in _op else {}
    _t = 0 if "max" in _op else 1.0
    add(_op, [T([2, 3, 7, 9], "f32", "d")], {"output_size": [3, 4], **_ri}, tol=_t)
    add(_op, [T([2, 3, 5, 5], "f32", "d")], {"output_size": [7], **_ri}, tol=_t)  # upsampling windows overlap
    add(_op, [T([2, 3, 10, 9], "f32", "d")], {"output_size": [1], **_ri}, tol=_t)
    add(_op, [T([2, 3, 6, 7], "f32", "d")], {"output_size": [-1, 3], **_ri}, tol=_t)  # None keeps H
    add(_op, [T([2, 3, 6, 7], "f64", "n", "T")], {"output_size": [4, 2], **_ri}, tol=_t)
    add(_op, [T([2, 3, 6, 7], "f32", "n", "S")], {"output_size": [3], **_ri}, tol=_t)
    add(_op, [T([3, 6, 5], "f32", "d")], {"output_size": [2, 3], **_ri}, tol=_t)
    add(_op, [T([2, 2, 6, 6], "f16", "n", "F")], {"output_size": [4], **_ri}, tol=_t)
    add(_op, [T([2, 2, 6, 6], "bf16")], {"output_size": [3, 2], **_ri}, tol=_t)
    add(_op, [T([2, 4, 8, 8], "f32", "n")], {"output_size": [0, 3]}, tol=_t)
    add(_op, [T([4, 8, 9, 9], "f32", "n")], {"output_size": [1]}, tol=4.0 if _t else 0)
for _op in ("adaptive_avg_pool1d", "adaptive_max_pool1d"):
    _ri = {"return_indices": True} if "max" in _op else {}
    _t = 0 if "max" in _op else 1.0
    add(_op, [T([2, 3, 11], "f32", "d")], {"output_size": [4], **_ri}, tol=_t)
    add(_op, [T([2, 3, 4], "f32", "d")], {"output_size": [7], **_ri}, tol=_t)
    add(_op, [T([5, 9], "f64", "n")], {"output_size": [3], **_ri}, tol=_t)
    add(_op, [T([2, 3, 10], "f32", "n", "T")], {"output_size": [1], **_ri}, tol=_t)
    add(_op, [T([1, 2, 8], "f32", "sp")], {"output_size": [3], **_ri}, tol=_t)
for _op in ("adaptive_avg_pool3d", "adaptive_max_pool3d"):
    _ri = {"return_indices": True} if "max" in _op else {}
    _t = 0 if "max" in _op else 1.0
    add(_op, [T([2, 2, 5, 6, 7], "f32", "d")], {"output_size": [2, 3, 4], **_ri}, tol=_t)
    add(_op, [T([1, 2, 3, 4, 5], "f32", "d")], {"output_size": [4, -1, 2], **_ri}, tol=_t)
    add(_op, [T([2, 4, 5, 6], "f64", "n", "T")], {"output_size": [1], **_ri}, tol=_t)
    if "max" in _op:  # PyTorch's 3-d adaptive avg accumulates bf16 in bf16; Kiln in f32
        add(_op, [T([1, 2, 4, 4, 4], "bf16")], {"output_size": [3], **_ri}, tol=_t)


# ---- max_unpool: indices from PyTorch's own max pooling of a random input ------------------------
def _unpool_case(nd, shape, k, s, p, out_size=None, dt="f32"):
    g = torch.Generator().manual_seed(len(shape) * 1000 + k * 10 + s)
    x = torch.randn(*shape, generator=g)
    fn = _POOL_FN["max"][nd]
    v, i = fn(x, k, s, p, return_indices=True)
    at = {"kernel_size": [k], "stride": [s], "padding": [p]}
    if out_size:
        at["output_size"] = out_size
    add(f"max_unpool{nd}d", [T(list(v.shape), dt, "v", values=v.flatten().tolist()),
                             T(list(i.shape), "i64", "v", values=i.flatten().tolist())], at, tol=0)


_unpool_case(2, [2, 3, 7, 9], 3, 2, 1)
_unpool_case(2, [2, 3, 8, 8], 2, 2, 0)
_unpool_case(2, [2, 3, 8, 8], 2, 2, 0, out_size=[9, 9])
_unpool_case(2, [3, 6, 6], 2, 2, 0)  # unbatched
_unpool_case(2, [1, 2, 6, 6], 3, 1, 1, dt="f64")  # overlapping windows: duplicate indices
_unpool_case(2, [1, 2, 6, 6], 2, 2, 0, dt="bf16")
_unpool_case(1, [2, 3, 11], 3, 2, 1)
_unpool_case(1, [2, 3, 10], 2, 2, 0, out_size=[2, 3, 11])
_unpool_case(3, [1, 2, 5, 6, 7], 2, 2, 0, out_size=[5, 6, 7])
_unpool_case(3, [1, 2, 5, 6, 7], 3, 2, 1, out_size=[6, 6, 8])


# ---- interpolate -------------------------------------------------------------------------------
def _interp_ref(a, at):
    sf = at.get("scale_factor")
    if sf is not None:
        sf = [float(v) for v in sf.split(",")]
        sf = sf[0] if len(sf) == 1 else sf
    size = at.get("size")
    if size is not None and len(size) == 1:
        size = size[0]
    return F.interpolate(a[0], size=size, scale_factor=sf, mode=at["mode"], align_corners=at.get("align_corners"),
                         recompute_scale_factor=at.get("recompute_scale_factor"))


PY["interpolate"] = _interp_ref
_IP = "interpolate"
_NEAR_TOL = 0
for _mode in ("nearest", "nearest-exact"):
    add(_IP, [T([1, 1, 5, 7], "f32")], {"mode": _mode, "size": [8, 11]}, tol=0)
    add(_IP, [T([1, 2, 8, 9], "f32")], {"mode": _mode, "size": [5, 4]}, tol=0)
    add(_IP, [T([1, 1, 5, 7], "f32")], {"mode": _mode, "scale_factor": "2.0"}, tol=0)
    add(_IP, [T([1, 1, 5, 7], "f32")], {"mode": _mode, "scale_factor": "1.7,0.6"}, tol=0)
    add(_IP, [T([1, 1, 5, 7], "f32")], {"mode": _mode, "scale_factor": "1.7,0.6", "recompute_scale_factor": True}, tol=0)
    add(_IP, [T([2, 3, 5], "f64", "n", "S")], {"mode": _mode, "size": [12]}, tol=0)
    add(_IP, [T([1, 2, 3, 4, 5], "f32", "n", "T")], {"mode": _mode, "scale_factor": "1.5,2.0,0.5"}, tol=0)
    add(_IP, [T([1, 2, 5, 5], "u8")], {"mode": _mode, "size": [7, 3]}, tol=0)
    add(_IP, [T([1, 2, 5, 5], "f16", "n", "F")], {"mode": _mode, "scale_factor": "1.1"}, tol=0)
    add(_IP, [T([1, 2, 5], "f32")], {"mode": _mode, "scale_factor": "1.1"}, tol=0)  # same size, scale given
    add(_IP, [T([1, 1, 2, 3, 5], "f32")], {"mode": _mode, "scale_factor": "1.1,1.1,2.1"}, tol=0)
    add(_IP, [T([1, 2, 3, 5], "f32")], {"mode": _mode, "scale_factor": "1.1,2.1"}, tol=0)
for _mode, _shape in (("linear", [1, 2, 7]), ("bilinear", [1, 1, 5, 7]), ("bicubic", [1, 1, 5, 7]),
                      ("trilinear", [1, 1, 3, 4, 5])):
    _n = len(_shape) - 2
    _t = 3.0 if _mode == "bicubic" else 1.0  # cubic weights sum with cancellation
    for _ac in (False, True):
        add(_IP, [T(_shape, "f32")], {"mode": _mode, "scale_factor": "2.0", "align_corners": _ac}, tol=_t)
        add(_IP, [T(_shape, "f32")], {"mode": _mode, "size": [3] * _n, "align_corners": _ac}, tol=_t)  # downscale
        add(_IP, [T(_shape, "f64", "n", "T")], {"mode": _mode, "size": [9, 4, 6][:_n], "align_corners": _ac}, tol=_t)
        add(_IP, [T(_shape, "f32", "n", "S")], {"mode": _mode, "scale_factor": ",".join(["1.3", "0.7", "2.5"][:_n]),
                                                 "align_corners": _ac}, tol=_t)
    add(_IP, [T(_shape, "f32")], {"mode": _mode, "scale_factor": "1.7", "recompute_scale_factor": True}, tol=_t)
    add(_IP, [T(_shape, "f32")], {"mode": _mode, "size": [1] * _n, "align_corners": True}, tol=_t)
    add(_IP, [T(_shape, "f32")], {"mode": _mode, "scale_factor": "1.1"}, tol=_t)  # same size, scale given
    # PyTorch rounds some intermediates to f16/bf16; Kiln computes in f32 and rounds once.
    add(_IP, [T(_shape, "f16")], {"mode": _mode, "scale_factor": "1.5"}, tol=RED_TOL)
    add(_IP, [T(_shape, "bf16")], {"mode": _mode, "scale_factor": "0.5"}, tol=RED_TOL)
add(_IP, [T([1, 1, 5, 7], "f32")], {"mode": "bilinear", "size": [5, 7]})  # same size
add(_IP, [T([1, 2, 8, 9], "f32")], {"mode": "area", "size": [3, 4]})
add(_IP, [T([1, 2, 8, 9], "f32")], {"mode": "area", "scale_factor": "0.5"})
add(_IP, [T([2, 3, 8], "f64")], {"mode": "area", "size": [5]})
add(_IP, [T([1, 2, 4, 5, 6], "f32")], {"mode": "area", "size": [2, 3, 4]})

# ---- grid_sample / affine_grid ------------------------------------------------------------------
PY["grid_sample"] = lambda a, at: F.grid_sample(a[0], a[1], mode=at["mode"], padding_mode=at["padding_mode"],
                                                align_corners=at["align_corners"])
for _mode in ("bilinear", "nearest", "bicubic"):
    for _pm in ("zeros", "border", "reflection"):
        for _ac in (False, True):
            _at = {"mode": _mode, "padding_mode": _pm, "align_corners": _ac}
            add("grid_sample", [T([1, 2, 5, 6], "f32"), T([1, 4, 3, 2], "f32", "u", lo=-1.3, hi=1.3)], _at, tol=3.0)
    add("grid_sample", [T([1, 2, 4, 5], "f64", "n", "T"), T([1, 3, 3, 2], "f64", "u", lo=-2.5, hi=2.5)],
        {"mode": _mode, "padding_mode": "reflection", "align_corners": False})
for _mode in ("bilinear", "nearest"):
    for _pm in ("zeros", "border", "reflection"):
        for _ac in (False, True):
            _at = {"mode": _mode, "padding_mode": _pm, "align_corners": _ac}
            add("grid_sample", [T([1, 1, 3, 4, 5], "f32"), T([1, 2, 3, 2, 3], "f32", "u", lo=-1.3, hi=1.3)], _at, tol=3.0)
add("grid_sample", [T([1, 2, 1, 1], "f32"), T([1, 2, 2, 2], "f32", "u", lo=-2, hi=2)],
    {"mode": "bilinear", "padding_mode": "reflection", "align_corners": True}, tol=3.0)  # size-1 dims
add("grid_sample", [T([2, 3, 5, 6], "f16"), T([2, 4, 3, 2], "f16", "u", lo=-1, hi=1)],
    {"mode": "bilinear", "padding_mode": "zeros", "align_corners": False}, tol=4.0)

PY["affine_grid"] = lambda a, at: F.affine_grid(a[0], at["size"], align_corners=at["align_corners"])
for _ac in (False, True):
    add("affine_grid", [T([2, 2, 3], "f32")], {"size": [2, 3, 4, 5], "align_corners": _ac})
    add("affine_grid", [T([2, 3, 4], "f32")], {"size": [2, 3, 3, 4, 5], "align_corners": _ac})
    add("affine_grid", [T([1, 2, 3], "f64", "n", "T")], {"size": [1, 1, 1, 6], "align_corners": _ac})

# ---- pixel shuffle ----------------------------------------------------------------------------
PY["pixel_shuffle"] = lambda a, at: F.pixel_shuffle(a[0], at["r"])
PY["pixel_unshuffle"] = lambda a, at: F.pixel_unshuffle(a[0], at["r"])
add("pixel_shuffle", [T([2, 8, 3, 4], "f32")], {"r": 2}, tol=0)
add("pixel_shuffle", [T([9, 2, 3], "i64")], {"r": 3}, tol=0)
add("pixel_shuffle", [T([2, 1, 8, 3, 4], "f32", "n", "T")], {"r": 2}, tol=0)
add("pixel_unshuffle", [T([2, 2, 6, 4], "f32")], {"r": 2}, tol=0)
add("pixel_unshuffle", [T([1, 6, 6], "bf16", "n", "F")], {"r": 3}, tol=0)
