# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the fft family (exec'd inside scripts/gen_golden.py, whose helpers add, T,
# S, PY, torch are in scope). Registry: tests/conformance/registry_fft.cpp.
# Complex tensors are real [..., 2] tensors (torch.view_as_real layout): complex inputs are
# generated as T(shape + [2]) and complex outputs compared through torch.view_as_real. Kiln
# computes f16/bf16 transforms in f32 (PyTorch's CPU FFT has no half support), so the reference
# for those runs in f32 and is rounded to the input dtype.

FFT_TOL = 4.0
_fft_HALF = (torch.float16, torch.bfloat16)


def _fft_cplx(t):
    """A [..., 2] real tensor (any layout) -> complex (f32 for half inputs)."""
    t = t.contiguous()
    if t.dtype in _fft_HALF:
        t = t.float()
    return torch.view_as_complex(t)


def _fft_real_in(t):
    return t.float() if t.dtype in _fft_HALF else t


def _fft_out(r, like):
    """Complex result -> [..., 2]; real results pass; half inputs round back to their dtype."""
    if r.is_complex():
        r = torch.view_as_real(r.resolve_conj())
    return r.to(like.dtype) if like.dtype in _fft_HALF else r


def _fft_n(at):
    return at.get("n")


def _fft_norm(at):
    return at.get("norm", "backward")


def _fft_s(at):
    return tuple(at["s"]) if "s" in at else None


def _fft_dims(at, default=None):
    return tuple(at["dim"]) if "dim" in at else default


PY["fft_fft"] = lambda a, at: _fft_out(torch.fft.fft(_fft_cplx(a[0]), _fft_n(at), at.get("dim", -1), _fft_norm(at)), a[0])
PY["fft_ifft"] = lambda a, at: _fft_out(torch.fft.ifft(_fft_cplx(a[0]), _fft_n(at), at.get("dim", -1), _fft_norm(at)), a[0])
PY["fft_rfft"] = lambda a, at: _fft_out(torch.fft.rfft(_fft_real_in(a[0]), _fft_n(at), at.get("dim", -1), _fft_norm(at)), a[0])
PY["fft_irfft"] = lambda a, at: _fft_out(torch.fft.irfft(_fft_cplx(a[0]), _fft_n(at), at.get("dim", -1), _fft_norm(at)), a[0])
PY["fft_hfft"] = lambda a, at: _fft_out(torch.fft.hfft(_fft_cplx(a[0]), _fft_n(at), at.get("dim", -1), _fft_norm(at)), a[0])
PY["fft_ihfft"] = lambda a, at: _fft_out(torch.fft.ihfft(_fft_real_in(a[0]), _fft_n(at), at.get("dim", -1), _fft_norm(at)), a[0])
PY["fft_fft2"] = lambda a, at: _fft_out(torch.fft.fft2(_fft_cplx(a[0]), _fft_s(at), _fft_dims(at, (-2, -1)), _fft_norm(at)), a[0])
PY["fft_ifft2"] = lambda a, at: _fft_out(torch.fft.ifft2(_fft_cplx(a[0]), _fft_s(at), _fft_dims(at, (-2, -1)), _fft_norm(at)), a[0])
PY["fft_rfft2"] = lambda a, at: _fft_out(torch.fft.rfft2(_fft_real_in(a[0]), _fft_s(at), _fft_dims(at, (-2, -1)), _fft_norm(at)), a[0])
PY["fft_irfft2"] = lambda a, at: _fft_out(torch.fft.irfft2(_fft_cplx(a[0]), _fft_s(at), _fft_dims(at, (-2, -1)), _fft_norm(at)), a[0])
PY["fft_fftn"] = lambda a, at: _fft_out(torch.fft.fftn(_fft_cplx(a[0]), _fft_s(at), _fft_dims(at), _fft_norm(at)), a[0])
PY["fft_ifftn"] = lambda a, at: _fft_out(torch.fft.ifftn(_fft_cplx(a[0]), _fft_s(at), _fft_dims(at), _fft_norm(at)), a[0])
PY["fft_rfftn"] = lambda a, at: _fft_out(torch.fft.rfftn(_fft_real_in(a[0]), _fft_s(at), _fft_dims(at), _fft_norm(at)), a[0])
PY["fft_irfftn"] = lambda a, at: _fft_out(torch.fft.irfftn(_fft_cplx(a[0]), _fft_s(at), _fft_dims(at), _fft_norm(at)), a[0])
PY["fft_fftfreq"] = lambda a, at: torch.fft.fftfreq(at["n"], at.get("d", 1.0), dtype=TD[at.get("dtype", "f32")])
PY["fft_rfftfreq"] = lambda a, at: torch.fft.rfftfreq(at["n"], at.get("d", 1.0), dtype=TD[at.get("dtype", "f32")])
PY["fft_fftshift"] = lambda a, at: torch.fft.fftshift(a[0], _fft_dims(at))
PY["fft_ifftshift"] = lambda a, at: torch.fft.ifftshift(a[0], _fft_dims(at))
PY["hann_window"] = lambda a, at: torch.hann_window(at["n"], at.get("periodic", True), dtype=TD[at.get("dtype", "f32")])
PY["hamming_window"] = lambda a, at: torch.hamming_window(at["n"], at.get("periodic", True), at.get("alpha", 0.54),
                                                          at.get("beta", 0.46), dtype=TD[at.get("dtype", "f32")])
PY["blackman_window"] = lambda a, at: torch.blackman_window(at["n"], at.get("periodic", True),
                                                            dtype=TD[at.get("dtype", "f32")])
PY["stft"] = lambda a, at: torch.view_as_real(torch.stft(
    a[0], at["n_fft"], at.get("hop"), at.get("win"), a[1], at.get("center", True), at.get("pad_mode", "reflect"),
    at.get("normalized", False), at.get("onesided", True), return_complex=True))
PY["istft"] = lambda a, at: torch.istft(
    _fft_cplx(a[0]), at["n_fft"], at.get("hop"), at.get("win"), a[1], at.get("center", True), at.get("normalized", False),
    at.get("onesided"), at.get("length"))


def _fft_win(kind, n, dt="f32"):
    """A window tensor input with explicit values."""
    fn = {"hann": torch.hann_window, "hamming": torch.hamming_window, "blackman": torch.blackman_window}[kind]
    return T([n], dt, "v", values=fn(n, dtype=torch.float64).tolist())


# ---- fft / ifft -----------------------------------------------------------------------------
for n in (1, 2, 3, 5, 7, 8, 12, 16, 17, 97, 100, 128, 257):
    add("fft_fft", [T([n, 2], "f32")], tol=FFT_TOL)
for n in (1, 7, 12, 97):
    add("fft_fft", [T([n, 2], "f64")], tol=FFT_TOL)
add("fft_fft", [T([3, 12, 4, 2], "f64")], {"dim": 1}, tol=FFT_TOL)           # a middle dim
add("fft_fft", [T([2, 9, 3, 2], "f32")], {"dim": -2}, tol=FFT_TOL)
add("fft_fft", [T([4, 6, 2], "f32", layout="T")], {"dim": 0}, tol=FFT_TOL)   # re/im stride 6
add("fft_fft", [T([3, 5, 2], "f64", layout="X")], {"dim": 0}, tol=FFT_TOL)   # sliced+transposed+flipped
add("fft_fft", [T([3, 10, 2], "f32", layout="F")], {"dim": 1}, tol=FFT_TOL)  # negative strides
add("fft_fft", [T([3, 4, 2], "f32", layout="E")], {"dim": 1}, tol=FFT_TOL)   # stride 0
add("fft_fft", [T([3, 5, 2], "f32", layout="S")], {"dim": 1}, tol=FFT_TOL)   # re/im picked with step 2
for norm in ("ortho", "forward", "backward"):
    add("fft_fft", [T([2, 12, 2], "f32")], {"norm": norm}, tol=FFT_TOL)
    add("fft_fft", [T([17, 2], "f64")], {"norm": norm}, tol=FFT_TOL)
add("fft_fft", [T([10, 2], "f32")], {"n": 16}, tol=FFT_TOL)                  # zero padding
add("fft_fft", [T([12, 3, 2], "f64")], {"n": 5, "dim": 0}, tol=FFT_TOL)      # trimming
add("fft_fft", [T([50, 2], "f64")], {"n": 97}, tol=FFT_TOL)
add("fft_fft", [T([3, 24, 2], "f16")], {"dim": 1}, tol=FFT_TOL)
add("fft_fft", [T([2, 20, 2], "bf16")], tol=FFT_TOL)
add("fft_fft", [T([0, 8, 2], "f32")], tol=FFT_TOL)
for n in (1, 5, 16, 97):
    add("fft_ifft", [T([n, 2], "f32")], tol=FFT_TOL)
add("fft_ifft", [T([6, 3, 2], "f64", layout="T")], {"dim": 0}, tol=FFT_TOL)
add("fft_ifft", [T([4, 9, 2], "f64")], {"dim": 1, "norm": "ortho"}, tol=FFT_TOL)
add("fft_ifft", [T([12, 2], "f32")], {"norm": "forward", "n": 20}, tol=FFT_TOL)
add("fft_ifft", [T([130, 2], "f64")], {"n": 100}, tol=FFT_TOL)

# ---- rfft / irfft / hfft / ihfft ------------------------------------------------------------
for n in (1, 2, 3, 8, 9, 16, 17, 100, 257):
    add("fft_rfft", [T([2, n] if n < 50 else [n], "f32")], tol=FFT_TOL)
add("fft_rfft", [T([3, 11], "f64")], tol=FFT_TOL)
add("fft_rfft", [T([5, 12, 3], "f64")], {"dim": 1}, tol=FFT_TOL)
add("fft_rfft", [T([6, 4], "f32", layout="T")], {"dim": 0}, tol=FFT_TOL)
add("fft_rfft", [T([3, 7], "f32", layout="F")], tol=FFT_TOL)
add("fft_rfft", [T([4, 10], "f32")], {"n": 15, "norm": "ortho"}, tol=FFT_TOL)
add("fft_rfft", [T([4, 10], "f64")], {"n": 6, "norm": "forward"}, tol=FFT_TOL)
add("fft_rfft", [T([18], "f16")], tol=FFT_TOL)
add("fft_rfft", [T([5, 7], "i32")], tol=FFT_TOL)  # integers -> f32 (complex64 in PyTorch)
for m, n in ((5, None), (5, 9), (5, 8), (9, 30), (9, 6), (1, 1), (2, None), (49, None), (50, 99)):
    add("fft_irfft", [T([2, m, 2] if m < 20 else [m, 2], "f32")], {"n": n} if n else {}, tol=FFT_TOL)
add("fft_irfft", [T([7, 3, 2], "f64")], {"dim": 0, "n": 13}, tol=FFT_TOL)
add("fft_irfft", [T([3, 6, 2], "f64", layout="T")], {"dim": 0}, tol=FFT_TOL)
add("fft_irfft", [T([4, 9, 2], "f32")], {"norm": "ortho"}, tol=FFT_TOL)
add("fft_irfft", [T([4, 9, 2], "f64")], {"norm": "forward", "n": 17}, tol=FFT_TOL)
add("fft_hfft", [T([2, 5, 2], "f64")], tol=FFT_TOL)
add("fft_hfft", [T([6, 2], "f32")], {"n": 11, "norm": "ortho"}, tol=FFT_TOL)
add("fft_ihfft", [T([3, 8], "f64")], tol=FFT_TOL)
add("fft_ihfft", [T([9, 2], "f32")], {"dim": 0, "norm": "forward"}, tol=FFT_TOL)

# ---- 2-d and n-d ----------------------------------------------------------------------------
add("fft_fft2", [T([2, 6, 5, 2], "f32")], tol=FFT_TOL)
add("fft_fft2", [T([4, 3, 2], "f64", layout="T")], {"s": [5, 4]}, tol=FFT_TOL)
add("fft_fft2", [T([4, 3, 5, 2], "f64")], {"dim": [0, 2], "norm": "ortho"}, tol=FFT_TOL)
add("fft_ifft2", [T([2, 6, 7, 2], "f32")], tol=FFT_TOL)
add("fft_ifft2", [T([8, 4, 2], "f64")], {"s": [6, -1], "norm": "forward"}, tol=FFT_TOL)
add("fft_rfft2", [T([2, 6, 5], "f32")], tol=FFT_TOL)
add("fft_rfft2", [T([6, 8], "f64", layout="T")], {"s": [7, 10]}, tol=FFT_TOL)
add("fft_rfft2", [T([4, 3, 6], "f64")], {"dim": [2, 0], "norm": "ortho"}, tol=FFT_TOL)
add("fft_irfft2", [T([2, 6, 4, 2], "f32")], tol=FFT_TOL)
add("fft_irfft2", [T([5, 4, 2], "f64")], {"s": [5, 7]}, tol=FFT_TOL)
add("fft_irfft2", [T([3, 5, 4, 2], "f64")], {"dim": [0, 1], "norm": "forward"}, tol=FFT_TOL)
add("fft_fftn", [T([3, 4, 5, 2], "f32")], tol=FFT_TOL)
add("fft_fftn", [T([3, 4, 5, 2], "f64")], {"s": [6, 3]}, tol=FFT_TOL)
add("fft_fftn", [T([3, 4, 5, 2], "f64")], {"dim": [0, 2], "norm": "ortho"}, tol=FFT_TOL)
add("fft_ifftn", [T([3, 4, 5, 2], "f32")], tol=FFT_TOL)
add("fft_ifftn", [T([6, 7, 2], "f64")], {"s": [8, 7], "dim": [1, 0]}, tol=FFT_TOL)
add("fft_rfftn", [T([3, 4, 5], "f32")], tol=FFT_TOL)
add("fft_rfftn", [T([3, 4, 6], "f64")], {"s": [5, 9]}, tol=FFT_TOL)
add("fft_irfftn", [T([3, 4, 3, 2], "f32")], tol=FFT_TOL)
add("fft_irfftn", [T([3, 4, 5, 2], "f64")], {"s": [4, 9], "dim": [0, 2]}, tol=FFT_TOL)

# ---- frequencies, shifts, windows -----------------------------------------------------------
for n, d, dt in ((1, 1.0, "f32"), (5, 1.0, "f32"), (8, 0.1, "f32"), (9, 2.5, "f64"), (0, 1.0, "f32")):
    add("fft_fftfreq", [], {"n": n, "d": d, "dtype": dt})
    add("fft_rfftfreq", [], {"n": n, "d": d, "dtype": dt})
for op in ("fft_fftshift", "fft_ifftshift"):
    add(op, [T([7], "f32")], tol=0)
    add(op, [T([4, 5], "f64", layout="T")], tol=0)
    add(op, [T([3, 4, 5], "f32")], {"dim": [0, 2]}, tol=0)
    add(op, [T([4, 6], "i64")], {"dim": [-1]}, tol=0)
for op in ("hann_window", "hamming_window", "blackman_window"):
    for n, per, dt in ((0, True, "f32"), (1, True, "f32"), (2, False, "f32"), (8, True, "f32"), (9, False, "f32"),
                       (16, True, "f64"), (7, False, "f64")):
        add(op, [], {"n": n, "periodic": per, "dtype": dt})
add("hamming_window", [], {"n": 10, "periodic": True, "alpha": 0.5, "beta": 0.5, "dtype": "f64"})

# ---- stft / istft ---------------------------------------------------------------------------
STFT_TOL = 8.0
for kind in ("hann", "hamming", "blackman"):
    add("stft", [T([60], "f32"), _fft_win(kind, 16)], {"n_fft": 16}, tol=STFT_TOL)
    add("stft", [T([2, 50] if kind == "hann" else [50], "f64"), _fft_win(kind, 20, "f64")],
        {"n_fft": 20, "hop": 9, "center": False}, tol=STFT_TOL)
add("stft", [T([2, 40], "f32"), S(None)], {"n_fft": 16, "hop": 6}, tol=STFT_TOL)  # rectangular window
add("stft", [T([70], "f64"), _fft_win("hann", 12, "f64")],
    {"n_fft": 16, "hop": 5, "win": 12, "pad_mode": "constant", "normalized": True}, tol=STFT_TOL)
add("stft", [T([30], "f32"), _fft_win("hann", 10)], {"n_fft": 10, "onesided": False}, tol=STFT_TOL)
add("stft", [T([3, 24], "f32", layout="T"), _fft_win("hann", 8)], {"n_fft": 8, "hop": 3, "pad_mode": "replicate"},
    tol=STFT_TOL)
add("stft", [T([45], "f64"), S(None)], {"n_fft": 13, "hop": 4, "center": False}, tol=STFT_TOL)
add("istft", [T([9, 12, 2], "f32"), _fft_win("hann", 16)], {"n_fft": 16}, tol=STFT_TOL)
add("istft", [T([2, 11, 10, 2], "f32"), _fft_win("hamming", 20)], {"n_fft": 20, "hop": 6, "length": 60},
    tol=STFT_TOL)
add("istft", [T([11, 10, 2], "f64"), _fft_win("blackman", 20, "f64")],
    {"n_fft": 20, "hop": 5, "center": True, "normalized": True, "length": 80}, tol=STFT_TOL)
add("istft", [T([9, 8, 2], "f64"), S(None)], {"n_fft": 16, "hop": 8, "center": False}, tol=STFT_TOL)
add("istft", [T([16, 8, 2], "f32"), _fft_win("hann", 16)], {"n_fft": 16, "onesided": False}, tol=STFT_TOL)
add("istft", [T([7, 6, 2], "f64"), _fft_win("hann", 10, "f64")], {"n_fft": 12, "hop": 3, "win": 10}, tol=STFT_TOL)
