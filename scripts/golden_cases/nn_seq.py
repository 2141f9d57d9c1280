# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the sequence / normalisation / activation modules (exec'd inside
# scripts/gen_golden.py: add, T, S, PY, torch are in scope). Registry:
# tests/conformance/registry_nn_seq.cpp. Each case passes the module's input(s) followed by its
# parameters in named_parameters() order; the PyTorch module built from the attrs gets them
# copied in, and the Kiln module (same config) gets them assigned, so both use the same weights.
import torch.nn as _nn

SEQ_TOL = 10.0
_W = 0.4  # scale of the random weights


def _load(m, ps):
    with torch.no_grad():
        for p, v in zip(m.parameters(), ps):
            p.copy_(v)


def _param_specs(m):
    return [T(list(p.shape), "f32", scale=_W) for p in m.parameters()]


# ---- BatchNorm: (x, [running_mean, running_var,] weight, bias) -> (y, running_mean, running_var)
def _bn_module(at):
    cls = {1: _nn.BatchNorm1d, 2: _nn.BatchNorm2d, 3: _nn.BatchNorm3d}[at["nd"]]
    mom = at.get("momentum", 0.1)
    return cls(at["c"], momentum=None if mom < 0 else mom, affine=at.get("affine", True))


def _nn_batchnorm(a, at):
    m = _bn_module(at)
    with torch.no_grad():
        k = 1
        if at.get("eval", False):
            m.running_mean.copy_(a[1])
            m.running_var.copy_(a[2])
            k = 3
        _load(m, a[k:])
        m.train(not at.get("eval", False))
        y = m(a[0])
        if at.get("twice", False):
            y = m(a[0] * 2 + 1)
        return y, m.running_mean, m.running_var, m.num_batches_tracked


PY["nn_batchnorm"] = _nn_batchnorm
add("nn_batchnorm", [T([6, 3], "f32"), T([3], "f32"), T([3], "f32")], {"nd": 1, "c": 3}, tol=SEQ_TOL)
add("nn_batchnorm", [T([4, 3, 5], "f32", scale=2), T([3], "f32"), T([3], "f32")], {"nd": 1, "c": 3, "twice": True},
    tol=SEQ_TOL)
add("nn_batchnorm", [T([2, 4, 3, 3], "f32"), T([4], "f32"), T([4], "f32")], {"nd": 2, "c": 4, "momentum": -1.0,
                                                                              "twice": True}, tol=SEQ_TOL)
add("nn_batchnorm", [T([2, 2, 2, 3, 2], "f32")], {"nd": 3, "c": 2, "affine": False}, tol=SEQ_TOL)
add("nn_batchnorm", [T([2, 4, 3, 3], "f32"), T([4], "f32"), T([4], "f32", "u", lo=0.5, hi=2.0), T([4], "f32"),
                     T([4], "f32")], {"nd": 2, "c": 4, "eval": True}, tol=SEQ_TOL)


# ---- LayerNorm / GroupNorm: (x, params...) -> y
def _nn_layernorm(a, at):
    m = _nn.LayerNorm(at["ns"], eps=at.get("eps", 1e-5), elementwise_affine=at.get("affine", True),
                      bias=at.get("bias", True))
    _load(m, a[1:])
    with torch.no_grad():
        return m(a[0])


def _nn_groupnorm(a, at):
    m = _nn.GroupNorm(at["groups"], at["c"], affine=at.get("affine", True))
    _load(m, a[1:])
    with torch.no_grad():
        return m(a[0])


PY["nn_layernorm"] = _nn_layernorm
PY["nn_groupnorm"] = _nn_groupnorm
add("nn_layernorm", [T([3, 4, 8], "f32"), T([8], "f32"), T([8], "f32")], {"ns": [8]}, tol=SEQ_TOL)
add("nn_layernorm", [T([2, 3, 4], "f32"), T([3, 4], "f32")], {"ns": [3, 4], "bias": False}, tol=SEQ_TOL)
add("nn_layernorm", [T([5, 6], "f32")], {"ns": [6], "affine": False, "eps": 1e-3}, tol=SEQ_TOL)
add("nn_groupnorm", [T([2, 6, 5], "f32"), T([6], "f32"), T([6], "f32")], {"groups": 3, "c": 6}, tol=SEQ_TOL)
add("nn_groupnorm", [T([2, 4, 3, 3], "f32")], {"groups": 2, "c": 4, "affine": False}, tol=SEQ_TOL)


# ---- PReLU / GLU
def _nn_prelu(a, at):
    m = _nn.PReLU(at["n"])
    _load(m, a[1:])
    with torch.no_grad():
        return m(a[0])


PY["nn_prelu"] = _nn_prelu
PY["nn_glu"] = lambda a, at: _nn.GLU(at.get("dim", -1))(a[0])
add("nn_prelu", [T([3, 4], "f32"), T([1], "f32")], {"n": 1}, tol=SEQ_TOL)
add("nn_prelu", [T([2, 3, 4, 2], "f32"), T([3], "f32")], {"n": 3}, tol=SEQ_TOL)
add("nn_glu", [T([3, 8], "f32")], {"dim": -1}, tol=SEQ_TOL)
add("nn_glu", [T([4, 6, 2], "f32")], {"dim": 0}, tol=SEQ_TOL)


# ---- RNN / LSTM / GRU: (x, h0 | None, [c0 | None,] params...) -> (output, h_n[, c_n])
def _rnn_module(kind, at):
    kw = dict(num_layers=at.get("layers", 1), bias=at.get("bias", True), batch_first=at.get("batch_first", False),
              bidirectional=at.get("bidir", False))
    if kind == "rnn":
        return _nn.RNN(at["in"], at["hid"], nonlinearity=at.get("nl", "tanh"), **kw)
    if kind == "lstm":
        return _nn.LSTM(at["in"], at["hid"], proj_size=at.get("proj", 0), **kw)
    return _nn.GRU(at["in"], at["hid"], **kw)


def _rnn_ref(kind):
    def f(a, at):
        m = _rnn_module(kind, at)
        n_state = 2 if kind == "lstm" else 1
        _load(m, a[1 + n_state:])
        with torch.no_grad():
            if kind == "lstm":
                hc = None if a[1] is None else (a[1], a[2])
                out, (h, c) = m(a[0], hc)
                return out, h, c
            out, h = m(a[0], a[1])
            return out, h
    return f


def _rnn_case(kind, at, x_shape, with_state):
    m = _rnn_module(kind, at)
    d = 2 if at.get("bidir", False) else 1
    unbatched = len(x_shape) == 2
    n = None if unbatched else x_shape[0 if at.get("batch_first", False) else 1]
    st = [at.get("layers", 1) * d] + ([] if unbatched else [n])
    sizes = [at.get("proj", 0) or at["hid"]] + ([at["hid"]] if kind == "lstm" else [])
    states = [T(st + [f], "f32") if with_state else S(None) for f in sizes]
    add("nn_" + kind, [T(x_shape, "f32")] + states + _param_specs(m), at, tol=SEQ_TOL)


for _k in ("rnn", "lstm", "gru"):
    PY["nn_" + _k] = _rnn_ref(_k)
    _rnn_case(_k, {"in": 3, "hid": 4}, [5, 2, 3], False)
    _rnn_case(_k, {"in": 3, "hid": 4, "layers": 2, "bidir": True}, [4, 2, 3], True)
    _rnn_case(_k, {"in": 3, "hid": 5, "layers": 2, "batch_first": True}, [2, 4, 3], True)
    _rnn_case(_k, {"in": 2, "hid": 3, "bidir": True, "bias": False}, [4, 2], True)
_rnn_case("rnn", {"in": 3, "hid": 4, "nl": "relu", "layers": 2}, [3, 2, 3], True)
# LSTM with proj_size (weight_hr_l*, h of proj features)
_rnn_case("lstm", {"in": 3, "hid": 5, "proj": 2, "layers": 2, "bidir": True}, [4, 2, 3], True)
_rnn_case("lstm", {"in": 3, "hid": 4, "proj": 3, "batch_first": True}, [2, 3, 3], False)


# ---- MultiHeadAttention: (q, k, v, attn_mask | None, key_padding_mask | None, params...) -> (out[, weights])
def _mha_module(at):
    return _nn.MultiheadAttention(at["e"], at["h"], bias=at.get("bias", True), kdim=at.get("kdim"),
                                  vdim=at.get("vdim"), batch_first=at.get("batch_first", False),
                                  add_bias_kv=at.get("bias_kv", False), add_zero_attn=at.get("zero_attn", False))


def _nn_mha(a, at):
    m = _mha_module(at)
    _load(m, a[5:])
    m.eval()
    with torch.no_grad():
        out, w = m(a[0], a[1], a[2], attn_mask=a[3], key_padding_mask=a[4], need_weights=at.get("need_weights", False))
    return (out, w) if at.get("need_weights", False) else out


def _mha_case(at, q, k, v, mask=None, kpm=None):
    add("nn_mha", [T(q), T(k), T(v), mask or S(None), kpm or S(None)] + _param_specs(_mha_module(at)), at,
        tol=SEQ_TOL)


PY["nn_mha"] = _nn_mha
_mha_case({"e": 8, "h": 2}, [4, 2, 8], [5, 2, 8], [5, 2, 8])
_mha_case({"e": 8, "h": 2, "need_weights": True}, [4, 2, 8], [4, 2, 8], [4, 2, 8],
          mask=T([4, 4], "bool", "v", values=[bool(j > i) for i in range(4) for j in range(4)]))
_mha_case({"e": 8, "h": 4, "batch_first": True, "need_weights": True}, [2, 3, 8], [2, 5, 8], [2, 5, 8],
          mask=T([3, 5], "f32"),
          kpm=T([2, 5], "bool", "v", values=[False, False, False, True, True, False, True, False, False, False]))
_mha_case({"e": 6, "h": 3, "kdim": 4, "vdim": 5, "batch_first": True}, [2, 3, 6], [2, 4, 4], [2, 4, 5])
_mha_case({"e": 8, "h": 2, "bias": False}, [3, 8], [4, 8], [4, 8])
# add_bias_kv / add_zero_attn (parameters bias_k, bias_v; masks padded with zero columns)
_mha_case({"e": 8, "h": 2, "bias_kv": True, "need_weights": True}, [4, 2, 8], [5, 2, 8], [5, 2, 8])
_mha_case({"e": 8, "h": 2, "zero_attn": True, "need_weights": True}, [4, 2, 8], [5, 2, 8], [5, 2, 8],
          mask=T([4, 5], "f32"))
_mha_case({"e": 8, "h": 4, "bias_kv": True, "zero_attn": True, "batch_first": True, "need_weights": True},
          [2, 3, 8], [2, 5, 8], [2, 5, 8], mask=T([3, 5], "f32"),
          kpm=T([2, 5], "bool", "v", values=[False, False, False, True, True, False, True, False, False, False]))
_mha_case({"e": 6, "h": 3, "kdim": 4, "vdim": 5, "bias_kv": True, "zero_attn": True}, [3, 6], [4, 4], [4, 5])


# ---- TransformerEncoderLayer (eval): (src, src_mask | None, params...) -> out
def _enc_module(at):
    return _nn.TransformerEncoderLayer(at["d"], at["h"], dim_feedforward=at["ff"], dropout=0.1,
                                       activation=at.get("act", "relu"), batch_first=at.get("batch_first", False),
                                       norm_first=at.get("norm_first", False))


def _nn_encoder_layer(a, at):
    m = _enc_module(at)
    _load(m, a[2:])
    m.eval()
    with torch.no_grad():
        return m(a[0], src_mask=a[1])


PY["nn_encoder_layer"] = _nn_encoder_layer
for _nf in (False, True):
    add("nn_encoder_layer", [T([4, 2, 8]), S(None)] + _param_specs(_enc_module({"d": 8, "h": 2, "ff": 16})),
        {"d": 8, "h": 2, "ff": 16, "norm_first": _nf}, tol=SEQ_TOL)
    _at = {"d": 8, "h": 4, "ff": 12, "norm_first": _nf, "batch_first": True, "act": "gelu"}
    add("nn_encoder_layer", [T([2, 5, 8]), T([5, 5], "bool", "v", values=[bool(j > i) for i in range(5) for j in range(5)])]
        + _param_specs(_enc_module(_at)), _at, tol=SEQ_TOL)


# ---- RotaryEncoding (RoPE): (x [..., S, d]) -> x rotated at positions offset .. offset+S-1.
# Two reference formulations: halves as Hugging Face LLaMA (cat(freqs, freqs), rotate_half),
# interleaved pairs as Meta's LLaMA (complex multiplication by polar(1, angle)). Angles in f64.
def _nn_rotary(a, at):
    x, d, off, theta = a[0], at["d"], at.get("offset", 0), at.get("theta", 10000.0)
    s = x.shape[-2]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.outer(torch.arange(off, off + s, dtype=torch.float64), inv)  # [S, d/2]
    if at.get("il", False):
        xc = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
        return torch.view_as_real(xc * torch.polar(torch.ones_like(ang), ang)).flatten(-2).to(x.dtype)
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    rot = torch.cat((-x[..., d // 2:], x[..., :d // 2]), dim=-1)
    return x * cos + rot * sin


PY["nn_rotary"] = _nn_rotary
add("nn_rotary", [T([2, 3, 5, 8])], {"d": 8})
add("nn_rotary", [T([2, 5, 8])], {"d": 8, "il": True})
add("nn_rotary", [T([1, 2, 4, 6])], {"d": 6, "offset": 1000, "theta": 500.0})
add("nn_rotary", [T([1, 2, 4, 6])], {"d": 6, "offset": 37, "il": True})
add("nn_rotary", [T([3, 16])], {"d": 16, "offset": 5})
add("nn_rotary", [T([2, 2, 3, 4], "f64")], {"d": 4, "offset": 9, "theta": 100.0})
