# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the basic layers (kiln/nn/layers.h), exec'd inside scripts/gen_golden.py.
# Each case builds the torch.nn module, loads the weights given as inputs, runs it in float64
# and rounds to the input dtype. "_grad" ops also take a seed g of the output's shape and return
# (y, dL/dx, dL/dweight, dL/dbias) for L = sum(y * g). The registry is
# tests/conformance/registry_nn_layers.cpp.


def _nl_t(at, key, default):
    v = at.get(key, default)
    if isinstance(v, list):
        return v[0] if len(v) == 1 else tuple(v)
    return v


def _nl_load(m, params):
    with torch.no_grad():
        for name, t in params.items():
            if t is None:
                setattr(m, name, None)
            else:
                getattr(m, name).copy_(t)
    return m


def _nl_conv(cls, transpose):
    def build(x, w, b, at):
        groups = at.get("groups", 1)
        k = tuple(w.shape[2:])
        if transpose:
            cin, cout = w.shape[0], w.shape[1] * groups
            m = cls(cin, cout, k, stride=_nl_t(at, "stride", 1), padding=_nl_t(at, "padding", 0),
                    output_padding=_nl_t(at, "output_padding", 0), groups=groups, bias=b is not None,
                    dilation=_nl_t(at, "dilation", 1))
        else:
            cin, cout = w.shape[1] * groups, w.shape[0]
            pad = at["padmode"] if "padmode" in at else _nl_t(at, "padding", 0)
            m = cls(cin, cout, k, stride=_nl_t(at, "stride", 1), padding=pad, dilation=_nl_t(at, "dilation", 1),
                    groups=groups, bias=b is not None, padding_mode=at.get("padding_mode", "zeros"))
        return _nl_load(m.double(), {"weight": w, "bias": b})
    return build


def _nl_forward(build):
    def ref(a, at):
        x, w, b = [t.double() if isinstance(t, torch.Tensor) else t for t in a[:3]]
        m = build(x, w, b, at)
        with torch.no_grad():
            if "output_size" in at:
                return m(x, output_size=at["output_size"]).to(a[0].dtype)
            return m(x).to(a[0].dtype)
    return ref


def _nl_grad(build):
    def ref(a, at):
        x, w, b, g = [t.double() if isinstance(t, torch.Tensor) else t for t in a[:4]]
        x = x.detach().requires_grad_(True)
        m = build(x, w, b, at)
        y = m(x)
        (y * g).sum().backward()
        outs = [y.detach(), x.grad, m.weight.grad] + ([m.bias.grad] if b is not None else [])
        return tuple(o.to(a[0].dtype) for o in outs)
    return ref


for _n, _cls, _tr in [("conv1d", torch.nn.Conv1d, False), ("conv2d", torch.nn.Conv2d, False),
                      ("conv3d", torch.nn.Conv3d, False), ("conv_transpose1d", torch.nn.ConvTranspose1d, True),
                      ("conv_transpose2d", torch.nn.ConvTranspose2d, True),
                      ("conv_transpose3d", torch.nn.ConvTranspose3d, True)]:
    PY["nn_" + _n] = _nl_forward(_nl_conv(_cls, _tr))
PY["nn_conv2d_grad"] = _nl_grad(_nl_conv(torch.nn.Conv2d, False))
PY["nn_conv_transpose2d_grad"] = _nl_grad(_nl_conv(torch.nn.ConvTranspose2d, True))

_NL_NONE = S(None)
_NL_TOL = 4

add("nn_conv1d", [T([2, 3, 11]), T([4, 3, 3]), T([4])], {"stride": [2], "padding": [1]}, tol=_NL_TOL)
add("nn_conv1d", [T([2, 4, 9]), T([6, 2, 3]), _NL_NONE], {"groups": 2, "padding": [2], "padding_mode": "circular"},
    tol=_NL_TOL)
add("nn_conv2d", [T([2, 3, 7, 8]), T([4, 3, 3, 3]), T([4])], {"padding": [1]}, tol=_NL_TOL)
add("nn_conv2d", [T([1, 4, 6, 7]), T([4, 2, 3, 2]), T([4])], {"groups": 2, "dilation": [2, 1], "stride": [1, 2]},
    tol=_NL_TOL)
add("nn_conv2d", [T([2, 3, 6, 6]), T([5, 3, 3, 3]), T([5])], {"padding": [1, 2], "padding_mode": "reflect"}, tol=_NL_TOL)
add("nn_conv2d", [T([2, 3, 6, 5]), T([5, 3, 4, 3]), _NL_NONE], {"padmode": "same", "padding_mode": "replicate"},
    tol=_NL_TOL)
add("nn_conv2d", [T([3, 6, 5]), T([2, 3, 3, 3]), T([2])], {"padmode": "same"}, tol=_NL_TOL)  # unbatched
add("nn_conv3d", [T([1, 2, 5, 6, 4]), T([3, 2, 2, 3, 2]), T([3])], {"padding": [1]}, tol=_NL_TOL)
add("nn_conv_transpose1d", [T([2, 4, 7]), T([4, 3, 3]), T([3])], {"stride": [2], "output_padding": [1]}, tol=_NL_TOL)
add("nn_conv_transpose2d", [T([2, 4, 5, 6]), T([4, 3, 3, 3]), T([3])], {"stride": [2], "padding": [1]}, tol=_NL_TOL)
add("nn_conv_transpose2d", [T([1, 4, 5, 5]), T([4, 1, 3, 3]), _NL_NONE],
    {"stride": [2], "padding": [1], "groups": 2, "output_size": [10, 10]}, tol=_NL_TOL)
add("nn_conv_transpose3d", [T([1, 2, 3, 4, 3]), T([2, 2, 2, 3, 2]), T([2])], {"stride": [2]}, tol=_NL_TOL)
add("nn_conv2d_grad", [T([2, 3, 6, 7]), T([4, 3, 3, 3]), T([4]), T([2, 4, 3, 4])], {"stride": [2], "padding": [1]},
    null=False, tol=_NL_TOL)
add("nn_conv2d_grad", [T([1, 4, 5, 5]), T([4, 2, 3, 3]), _NL_NONE, T([1, 4, 5, 5])],
    {"groups": 2, "padding": [1], "padding_mode": "reflect"}, null=False, tol=_NL_TOL)
add("nn_conv_transpose2d_grad", [T([2, 4, 4, 5]), T([4, 3, 3, 3]), T([3]), T([2, 3, 9, 11])], {"stride": [2]},
    null=False, tol=_NL_TOL)


# ---- Bilinear (x1, x2, weight, bias, g) -> (y, dx1, dx2, dweight, dbias) ----
def _nl_bilinear(a, at):
    x1, x2, w, b, g = [t.double().detach().requires_grad_(True) for t in a]
    m = torch.nn.Bilinear(w.shape[1], w.shape[2], w.shape[0]).double()
    _nl_load(m, {"weight": w, "bias": b})
    y = m(x1, x2)
    (y * g).sum().backward()
    return tuple(o.to(a[0].dtype) for o in (y.detach(), x1.grad, x2.grad, m.weight.grad, m.bias.grad))


PY["nn_bilinear"] = _nl_bilinear
add("nn_bilinear", [T([5, 3]), T([5, 4]), T([2, 3, 4]), T([2]), T([5, 2])], {}, null=False, tol=_NL_TOL)
add("nn_bilinear", [T([2, 3, 4]), T([2, 3, 2]), T([3, 4, 2]), T([3]), T([2, 3, 3])], {}, null=False, tol=_NL_TOL)


# ---- Embedding (indices, weight, g) -> (y, dweight) ----
def _nl_embedding(a, at):
    idx, w, g = a
    pad = at.get("padding_idx", None)
    m = torch.nn.Embedding(w.shape[0], w.shape[1], padding_idx=pad).double()
    _nl_load(m, {"weight": w.double()})
    y = m(idx)
    (y * g.double()).sum().backward()
    return y.detach().to(w.dtype), m.weight.grad.to(w.dtype)


PY["nn_embedding"] = _nl_embedding
add("nn_embedding", [T([2, 5], "i64", lo=0, hi=6), T([7, 3]), T([2, 5, 3])], {}, null=False)
add("nn_embedding", [T([4, 3], "i64", lo=0, hi=4), T([5, 2]), T([4, 3, 2])], {"padding_idx": 2}, null=False)


# ---- Embedding with max_norm (indices, weight, g) -> (y, dweight, weight after the in-place renorm) ----
def _nl_embedding_renorm(a, at):
    idx, w, g = a
    m = torch.nn.Embedding(w.shape[0], w.shape[1], max_norm=at["max_norm"], norm_type=at.get("norm_type", 2.0))
    _nl_load(m, {"weight": w.clone()})
    y = m(idx)
    (y * g).sum().backward()
    return y.detach(), m.weight.grad, m.weight.detach()


PY["nn_embedding_renorm"] = _nl_embedding_renorm
add("nn_embedding_renorm", [T([2, 5], "i64", lo=0, hi=6), T([7, 3], scale=2), T([2, 5, 3])], {"max_norm": 1.5},
    null=False)
add("nn_embedding_renorm", [T([4, 3], "i64", lo=0, hi=5), T([6, 4], scale=2), T([4, 3, 4])],
    {"max_norm": 1.0, "norm_type": 1.0}, null=False)


# ---- pools and shape layers (x) -> y ----
def _nl_kw(at, *keys):
    return {k: _nl_t(at, k, None) for k in keys if k in at}


PY["nn_maxpool2d"] = lambda a, at: torch.nn.MaxPool2d(**_nl_kw(at, "kernel_size", "stride", "padding", "dilation"),
                                                      ceil_mode=at.get("ceil_mode", False))(a[0])
PY["nn_maxpool1d"] = lambda a, at: torch.nn.MaxPool1d(**_nl_kw(at, "kernel_size", "stride", "padding"))(a[0])
PY["nn_avgpool2d"] = lambda a, at: torch.nn.AvgPool2d(**_nl_kw(at, "kernel_size", "stride", "padding"),
                                                      count_include_pad=at.get("count_include_pad", True))(a[0])
PY["nn_avgpool3d"] = lambda a, at: torch.nn.AvgPool3d(**_nl_kw(at, "kernel_size", "stride", "padding"))(a[0])
PY["nn_adaptive_avgpool2d"] = lambda a, at: torch.nn.AdaptiveAvgPool2d(_nl_t(at, "output_size", 1))(a[0])
PY["nn_adaptive_maxpool1d"] = lambda a, at: torch.nn.AdaptiveMaxPool1d(_nl_t(at, "output_size", 1))(a[0])
PY["nn_pixel_shuffle"] = lambda a, at: torch.nn.PixelShuffle(at["r"])(a[0])
PY["nn_upsample"] = lambda a, at: torch.nn.Upsample(scale_factor=at["scale"], mode=at["mode"],
                                                    align_corners=at.get("align_corners", None))(a[0])

add("nn_maxpool2d", [T([2, 3, 7, 8])], {"kernel_size": [3], "stride": [2], "padding": [1]}, tol=0)
add("nn_maxpool2d", [T([3, 7, 8])], {"kernel_size": [2, 3], "dilation": [2], "ceil_mode": True}, tol=0)
add("nn_maxpool1d", [T([2, 3, 9])], {"kernel_size": [2]}, tol=0)
add("nn_avgpool2d", [T([2, 3, 7, 8])], {"kernel_size": [3], "stride": [2], "padding": [1], "count_include_pad": False})
add("nn_avgpool3d", [T([1, 2, 4, 5, 6])], {"kernel_size": [2]})
add("nn_adaptive_avgpool2d", [T([2, 3, 7, 9])], {"output_size": [3, 4]})
add("nn_adaptive_maxpool1d", [T([2, 3, 10])], {"output_size": [4]}, tol=0)
add("nn_pixel_shuffle", [T([2, 8, 3, 4])], {"r": 2}, tol=0)
add("nn_upsample", [T([1, 2, 3, 4])], {"scale": 2.0, "mode": "bilinear", "align_corners": False})
add("nn_upsample", [T([1, 2, 5])], {"scale": 3.0, "mode": "nearest"}, tol=0)


# ---- Sequential: conv(3->4, k3, p1) -> relu -> maxpool2 -> flatten -> linear ----
def _nl_seq(a, at):
    x, cw, cb, lw, lb, g = [t.double() for t in a]
    x = x.detach().requires_grad_(True)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                            torch.nn.Flatten(), torch.nn.Linear(lw.shape[1], lw.shape[0])).double()
    sd = {"0.weight": cw, "0.bias": cb, "4.weight": lw, "4.bias": lb}
    assert list(sd) == [n for n, _ in m.named_parameters()]
    m.load_state_dict(sd)
    y = m(x)
    (y * g).sum().backward()
    return tuple(o.to(a[0].dtype) for o in (y.detach(), x.grad, m[0].weight.grad, m[4].weight.grad))


PY["nn_sequential"] = _nl_seq
add("nn_sequential", [T([2, 3, 6, 6]), T([4, 3, 3, 3]), T([4]), T([5, 36]), T([5]), T([2, 5])], {}, null=False,
    tol=_NL_TOL)
