# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the convolution family (exec'd inside scripts/gen_golden.py).
# References are computed in float64 and rounded to the input dtype, so the tolerance only has
# to absorb Kiln's own rounding (f32 accumulation over C*k products).


def _cv_pad(at):
    return at["padmode"] if "padmode" in at else tuple(at.get("padding", [0]))


def _cv_t(at, key, default):
    v = at.get(key, default)
    if isinstance(v, list):
        return v[0] if len(v) == 1 else tuple(v)
    return v


def _cv_in64(a):
    return [x.double() if isinstance(x, torch.Tensor) else x for x in a]


def _conv_ref(fn):
    def ref(a, at):
        x, w, b = _cv_in64(a)
        y = fn(x, w, b, stride=_cv_t(at, "stride", 1), padding=_cv_pad(at), dilation=_cv_t(at, "dilation", 1),
               groups=at.get("groups", 1))
        return y.to(a[0].dtype)
    return ref


def _convt_ref(fn):
    def ref(a, at):
        x, w, b = _cv_in64(a)
        y = fn(x, w, b, stride=_cv_t(at, "stride", 1), padding=_cv_t(at, "padding", 0),
               output_padding=_cv_t(at, "output_padding", 0), groups=at.get("groups", 1), dilation=_cv_t(at, "dilation", 1))
        return y.to(a[0].dtype)
    return ref


PY["conv1d"] = _conv_ref(F.conv1d)
PY["conv2d"] = _conv_ref(F.conv2d)
PY["conv3d"] = _conv_ref(F.conv3d)
PY["conv_transpose1d"] = _convt_ref(F.conv_transpose1d)
PY["conv_transpose2d"] = _convt_ref(F.conv_transpose2d)
PY["conv_transpose3d"] = _convt_ref(F.conv_transpose3d)
PY["unfold"] = lambda a, at: F.unfold(a[0], _cv_t(at, "kernel_size", 1), _cv_t(at, "dilation", 1), _cv_t(at, "padding", 0),
                                      _cv_t(at, "stride", 1))
PY["fold"] = lambda a, at: F.fold(a[0], _cv_t(at, "output_size", 1), _cv_t(at, "kernel_size", 1), _cv_t(at, "dilation", 1),
                                  _cv_t(at, "padding", 0), _cv_t(at, "stride", 1))


def _grad_weight_ref(fn):
    def ref(a, at):
        x, g = _cv_in64(a)
        return fn(x, at["weight_size"], g, stride=_cv_t(at, "stride", 1), padding=_cv_t(at, "padding", 0),
                  dilation=_cv_t(at, "dilation", 1), groups=at.get("groups", 1)).to(a[0].dtype)
    return ref


def _grad_input_ref(a, at):
    w, g = _cv_in64(a)
    return torch.nn.grad.conv2d_input(at["input_size"], w, g, stride=_cv_t(at, "stride", 1), padding=_cv_t(at, "padding", 0),
                                      dilation=_cv_t(at, "dilation", 1), groups=at.get("groups", 1)).to(a[0].dtype)


PY["conv1d_weight"] = _grad_weight_ref(torch.nn.grad.conv1d_weight)
PY["conv2d_weight"] = _grad_weight_ref(torch.nn.grad.conv2d_weight)
PY["conv3d_weight"] = _grad_weight_ref(torch.nn.grad.conv3d_weight)
PY["conv2d_input"] = _grad_input_ref

_CV_NONE = S(None)
_CV_TOL = 4  # tolerance scale: sums of C*k products

# ---- conv1d ----
add("conv1d", [T([2, 3, 11]), T([4, 3, 3]), T([4])], {}, tol=_CV_TOL)
add("conv1d", [T([2, 4, 13]), T([6, 2, 3]), _CV_NONE], {"stride": [2], "padding": [1], "groups": 2}, tol=_CV_TOL)
add("conv1d", [T([1, 2, 10], layout="T"), T([3, 2, 2]), T([3])], {"dilation": [3], "padmode": "same"}, tol=_CV_TOL)
add("conv1d", [T([3, 9]), T([5, 3, 4]), T([5])], {"padmode": "same"}, tol=_CV_TOL)  # unbatched, even kernel
add("conv1d", [T([2, 3, 9], "f64"), T([4, 3, 5], "f64", layout="F"), T([4], "f64")], {"padmode": "valid"}, tol=_CV_TOL)
add("conv1d", [T([2, 4, 12], "f16"), T([4, 1, 3], "f16"), T([4], "f16")], {"groups": 4, "padding": [2]}, tol=_CV_TOL)

# ---- conv2d ----
add("conv2d", [T([2, 3, 7, 8]), T([4, 3, 3, 3]), T([4])], {}, tol=_CV_TOL)
add("conv2d", [T([2, 3, 7, 8]), T([4, 3, 3, 3]), _CV_NONE], {"stride": [2, 1], "padding": [1, 2]}, tol=_CV_TOL)
add("conv2d", [T([1, 4, 9, 9]), T([6, 2, 3, 2]), T([6])], {"groups": 2, "dilation": [2, 3], "padding": [1]}, tol=_CV_TOL)
add("conv2d", [T([2, 6, 8, 7]), T([6, 1, 3, 3]), T([6])], {"groups": 6, "padding": [1], "stride": [2]}, tol=_CV_TOL)  # depthwise
add("conv2d", [T([2, 8, 5, 6]), T([5, 8, 1, 1]), T([5])], {}, tol=_CV_TOL)  # pointwise
add("conv2d", [T([2, 8, 5, 6]), T([5, 8, 1, 1]), _CV_NONE], {"stride": [2]}, tol=_CV_TOL)
add("conv2d", [T([1, 3, 6, 7]), T([2, 3, 4, 2]), T([2])], {"padmode": "same"}, tol=_CV_TOL)  # even kernel: asymmetric
add("conv2d", [T([1, 3, 6, 7]), T([2, 3, 3, 3]), _CV_NONE], {"padmode": "same", "dilation": [2, 1]}, tol=_CV_TOL)
add("conv2d", [T([2, 3, 5, 6]), T([4, 3, 2, 3]), T([4])], {"padmode": "valid"}, tol=_CV_TOL)
add("conv2d", [T([3, 6, 5]), T([4, 3, 3, 3]), T([4])], {"padding": [1]}, tol=_CV_TOL)  # unbatched
add("conv2d", [T([2, 3, 6, 5], layout="T"), T([4, 3, 3, 3], layout="X"), T([4])], {"padding": [1]}, tol=_CV_TOL)
add("conv2d", [T([2, 3, 6, 5], layout="S"), T([4, 3, 2, 2], layout="F"), _CV_NONE], {"stride": [2]}, tol=_CV_TOL)
add("conv2d", [T([2, 3, 6, 5], layout="E"), T([4, 3, 2, 2]), T([4])], {}, tol=_CV_TOL)
add("conv2d", [T([2, 4, 7, 6], "f64"), T([6, 2, 3, 3], "f64"), T([6], "f64")], {"groups": 2, "stride": [2], "padding": [1]},
    tol=_CV_TOL)
add("conv2d", [T([1, 3, 6, 6], "f16"), T([4, 3, 3, 3], "f16"), T([4], "f16")], {"padding": [1]}, tol=_CV_TOL)
add("conv2d", [T([1, 3, 6, 6], "bf16"), T([4, 3, 3, 3], "bf16"), T([4], "bf16")], {"padding": [1]}, tol=_CV_TOL)
add("conv2d", [T([0, 3, 6, 6]), T([4, 3, 3, 3]), T([4])], {}, tol=_CV_TOL)  # empty batch
add("conv2d", [T([1, 16, 6, 6]), T([8, 16, 3, 3]), T([8])], {"padding": [1]}, tol=_CV_TOL)

# ---- conv3d ----
add("conv3d", [T([1, 2, 5, 6, 4]), T([3, 2, 2, 3, 2]), T([3])], {}, tol=_CV_TOL)
add("conv3d", [T([2, 4, 5, 5, 5]), T([4, 2, 3, 3, 3]), _CV_NONE], {"groups": 2, "stride": [2, 1, 2], "padding": [1]}, tol=_CV_TOL)
add("conv3d", [T([1, 2, 6, 5, 5], "f64"), T([2, 2, 2, 2, 2], "f64"), T([2], "f64")], {"dilation": [2], "padmode": "same"},
    tol=_CV_TOL)
add("conv3d", [T([2, 5, 4, 6], layout="T"), T([3, 2, 3, 3, 3]), T([3])], {"padding": [1]}, tol=_CV_TOL)  # unbatched

# ---- conv_transpose ----
add("conv_transpose1d", [T([2, 4, 7]), T([4, 3, 3]), T([3])], {}, tol=_CV_TOL)
add("conv_transpose1d", [T([2, 4, 7]), T([4, 2, 4]), T([4])],
    {"stride": [3], "padding": [1], "output_padding": [2], "groups": 2, "dilation": [2]}, tol=_CV_TOL)
add("conv_transpose1d", [T([4, 6], "f64"), T([4, 3, 3], "f64"), _CV_NONE], {"stride": [2]}, tol=_CV_TOL)  # unbatched
add("conv_transpose2d", [T([2, 4, 5, 6]), T([4, 3, 3, 3]), T([3])], {}, tol=_CV_TOL)
add("conv_transpose2d", [T([2, 4, 5, 6]), T([4, 3, 3, 3]), T([3])], {"stride": [2], "padding": [1], "output_padding": [1]},
    tol=_CV_TOL)
add("conv_transpose2d", [T([1, 6, 4, 5]), T([6, 2, 3, 2]), _CV_NONE],
    {"stride": [2, 3], "padding": [1, 0], "output_padding": [0, 2], "groups": 3, "dilation": [2, 1]}, tol=_CV_TOL)
add("conv_transpose2d", [T([2, 8, 5, 6]), T([8, 3, 1, 1]), T([3])], {}, tol=_CV_TOL)  # pointwise
add("conv_transpose2d", [T([2, 4, 5, 6], layout="X"), T([4, 3, 3, 3], layout="T"), T([3])], {"stride": [2]}, tol=_CV_TOL)
add("conv_transpose2d", [T([2, 4, 5, 6], "f64"), T([4, 2, 3, 3], "f64"), T([4], "f64")], {"groups": 2, "dilation": [2]},
    tol=_CV_TOL)
add("conv_transpose2d", [T([1, 4, 5, 5], "f16"), T([4, 2, 3, 3], "f16"), T([2], "f16")], {"stride": [2]}, tol=_CV_TOL)
add("conv_transpose2d", [T([1, 4, 5, 5], "bf16"), T([4, 2, 3, 3], "bf16"), _CV_NONE], {"padding": [1]}, tol=_CV_TOL)
add("conv_transpose2d", [T([4, 5, 5]), T([4, 2, 3, 3]), T([2])], {"stride": [2], "output_padding": [1]}, tol=_CV_TOL)
add("conv_transpose3d", [T([1, 4, 3, 4, 3]), T([4, 2, 2, 3, 2]), T([2])], {"stride": [2], "output_padding": [1, 0, 1]},
    tol=_CV_TOL)
add("conv_transpose3d", [T([2, 4, 3, 3, 3], "f64"), T([4, 1, 3, 3, 3], "f64"), T([2], "f64")],
    {"groups": 2, "padding": [1], "dilation": [2]}, tol=_CV_TOL)

# ---- unfold / fold ----
add("unfold", [T([2, 3, 6, 7])], {"kernel_size": [2, 3]}, tol=0)
add("unfold", [T([2, 3, 6, 7], layout="T")], {"kernel_size": [3], "dilation": [2, 1], "padding": [1], "stride": [2]}, tol=0)
add("unfold", [T([3, 5, 5], "f64")], {"kernel_size": [2], "stride": [2], "padding": [1]}, tol=0)  # unbatched
add("fold", [T([2, 12, 12])], {"output_size": [4, 5], "kernel_size": [2]}, tol=_CV_TOL)
add("fold", [T([1, 6, 8])], {"output_size": [6, 6], "kernel_size": [2, 3], "stride": [2], "padding": [1],
                             "dilation": [1, 2]}, tol=_CV_TOL)
add("fold", [T([8, 4], "f64")], {"output_size": [3, 3], "kernel_size": [2]}, tol=_CV_TOL)  # unbatched
add("fold", [T([2, 4, 9], layout="T")], {"output_size": [5, 5], "kernel_size": [2], "stride": [2], "padding": [1]}, tol=_CV_TOL)

# ---- gradients (torch.nn.grad): ConvWeightGrad and ConvTranspose as conv backward ----
add("conv2d_weight", [T([2, 3, 7, 6]), T([2, 4, 5, 4])], {"weight_size": [4, 3, 3, 3]}, tol=_CV_TOL)
add("conv2d_weight", [T([2, 4, 8, 7]), T([2, 6, 4, 4])],
    {"weight_size": [6, 2, 3, 3], "stride": [2], "padding": [1], "groups": 2}, tol=_CV_TOL)
add("conv2d_weight", [T([2, 4, 9, 8], layout="T"), T([2, 4, 7, 7])],
    {"weight_size": [4, 1, 3, 2], "dilation": [2, 1], "padding": [1, 0], "groups": 4}, tol=_CV_TOL)
add("conv2d_weight", [T([3, 8, 5, 5]), T([3, 6, 5, 5])], {"weight_size": [6, 8, 1, 1]}, tol=_CV_TOL)
add("conv2d_weight", [T([11, 3, 6, 6], "f64"), T([11, 4, 4, 4], "f64")], {"weight_size": [4, 3, 3, 3]}, tol=_CV_TOL)
add("conv2d_weight", [T([2, 3, 6, 6], "bf16"), T([2, 4, 4, 4], "bf16")], {"weight_size": [4, 3, 3, 3]}, tol=_CV_TOL)
add("conv1d_weight", [T([2, 3, 10]), T([2, 4, 4])], {"weight_size": [4, 3, 3], "stride": [2], "dilation": [1]}, tol=_CV_TOL)
add("conv3d_weight", [T([2, 2, 5, 4, 4]), T([2, 3, 2, 1, 1])], {"weight_size": [3, 2, 2, 3, 3], "stride": [2], "padding": [0]},
    tol=_CV_TOL)
add("conv2d_input", [T([4, 3, 3, 3]), T([2, 4, 4, 4])], {"input_size": [2, 3, 8, 8], "stride": [2], "padding": [1]}, tol=_CV_TOL)
add("conv2d_input", [T([6, 2, 3, 3]), T([1, 6, 5, 5])], {"input_size": [1, 4, 7, 7], "groups": 2}, tol=_CV_TOL)
