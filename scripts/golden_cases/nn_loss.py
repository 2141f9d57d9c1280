# SPDX-License-Identifier: MIT OR Apache-2.0
# Conformance cases of the loss functions (exec'd inside scripts/gen_golden.py, whose helpers
# add, T, S, PY, F, torch are in scope). Registry: tests/conformance/registry_nn_loss.cpp.
# Each case returns the loss and the gradients of sum(loss) with respect to the first `ng`
# inputs (default 1), so the Kiln side is checked through autodiff as well. Attributes: red
# (reduction), and each loss's options. Absent optionals are S(None).

LOSS_TOL = 4.0


_loss = with_grads


def _ctc(a, at):
    lp = F.log_softmax(a[0], 2 if a[0].dim() == 3 else 1)
    return F.ctc_loss(lp, a[1], a[2], a[3], blank=at.get("blank", 0), reduction=at["red"],
                      zero_infinity=bool(at.get("zi", 0)))


PY["soft_margin_loss"] = _loss(lambda a, at: F.soft_margin_loss(a[0], a[1], reduction=at["red"]))
PY["multilabel_soft_margin_loss"] = _loss(lambda a, at: F.multilabel_soft_margin_loss(a[0], a[1], weight=a[2],
                                                                                      reduction=at["red"]))
PY["multi_margin_loss"] = _loss(lambda a, at: F.multi_margin_loss(a[0], a[1], p=at.get("p", 1),
                                                                  margin=at.get("margin", 1.0), weight=a[2],
                                                                  reduction=at["red"]))
PY["gaussian_nll_loss"] = _loss(lambda a, at: F.gaussian_nll_loss(a[0], a[1], a[2], full=bool(at.get("full", 0)),
                                                                  eps=at.get("eps", 1e-6), reduction=at["red"]))
PY["mse_loss"] = _loss(lambda a, at: F.mse_loss(a[0], a[1], reduction=at["red"]))
PY["l1_loss"] = _loss(lambda a, at: F.l1_loss(a[0], a[1], reduction=at["red"]))


def _lp(a, at):  # no torch.nn form: |input - target|^p reduced, written with torch ops
    d = (a[0] - a[1]).abs().pow(at.get("p", 2.0))
    return {"none": d, "sum": d.sum(), "mean": d.mean()}[at["red"]]


PY["lp_loss"] = _loss(_lp)
PY["smooth_l1_loss"] = _loss(lambda a, at: F.smooth_l1_loss(a[0], a[1], reduction=at["red"], beta=at.get("beta", 1.0)))
PY["huber_loss"] = _loss(lambda a, at: F.huber_loss(a[0], a[1], reduction=at["red"], delta=at.get("delta", 1.0)))
PY["nll_loss"] = _loss(lambda a, at: F.nll_loss(a[0], a[1], weight=a[2], ignore_index=at.get("ii", -100),
                                                reduction=at["red"]))
PY["cross_entropy"] = _loss(lambda a, at: F.cross_entropy(a[0], a[1], weight=a[2], ignore_index=at.get("ii", -100),
                                                          reduction=at["red"], label_smoothing=at.get("ls", 0.0)))
PY["binary_cross_entropy"] = _loss(lambda a, at: F.binary_cross_entropy(a[0], a[1], weight=a[2], reduction=at["red"]))
PY["binary_cross_entropy_with_logits"] = _loss(lambda a, at: F.binary_cross_entropy_with_logits(
    a[0], a[1], weight=a[2], reduction=at["red"], pos_weight=a[3]))
PY["kl_div"] = _loss(lambda a, at: F.kl_div(a[0], a[1], reduction=at["red"], log_target=bool(at.get("lt", 0))))
PY["poisson_nll_loss"] = _loss(lambda a, at: F.poisson_nll_loss(a[0], a[1], log_input=bool(at.get("log_input", 1)),
                                                                full=bool(at.get("full", 0)),
                                                                eps=at.get("eps", 1e-8), reduction=at["red"]))
PY["cosine_embedding_loss"] = _loss(lambda a, at: F.cosine_embedding_loss(a[0], a[1], a[2], margin=at.get("margin", 0.0),
                                                                          reduction=at["red"]))
PY["margin_ranking_loss"] = _loss(lambda a, at: F.margin_ranking_loss(a[0], a[1], a[2], margin=at.get("margin", 0.0),
                                                                      reduction=at["red"]))
PY["hinge_embedding_loss"] = _loss(lambda a, at: F.hinge_embedding_loss(a[0], a[1], margin=at.get("margin", 1.0),
                                                                        reduction=at["red"]))
PY["triplet_margin_loss"] = _loss(lambda a, at: F.triplet_margin_loss(
    a[0], a[1], a[2], margin=at.get("margin", 1.0), p=at.get("p", 2.0), eps=at.get("eps", 1e-6),
    swap=bool(at.get("swap", 0)), reduction=at["red"]))
PY["ctc_loss"] = _loss(_ctc)

N_ = S(None)
REDS = ("mean", "sum", "none")

# ---- regression ------------------------------------------------------------------------------
for r in REDS:
    add("mse_loss", [T([3, 4], "f32"), T([3, 4], "f32")], {"red": r}, null=False, tol=LOSS_TOL)
    add("l1_loss", [T([3, 4], "f32"), T([3, 4], "f32")], {"red": r}, null=False, tol=LOSS_TOL)
    add("smooth_l1_loss", [T([2, 5], "f32", scale=2), T([2, 5], "f32")], {"red": r, "beta": 0.7}, null=False,
        tol=LOSS_TOL)
    add("huber_loss", [T([2, 5], "f32", scale=2), T([2, 5], "f32")], {"red": r, "delta": 1.3}, null=False,
        tol=LOSS_TOL)
add("mse_loss", [T([3, 4], "f64", layout="T"), T([4], "f64")], {"red": "mean"}, null=False, tol=LOSS_TOL)  # broadcast
add("l1_loss", [T([2, 3, 2], "f64"), T([2, 3, 2], "f64", layout="F")], {"red": "sum"}, null=False, tol=LOSS_TOL)
add("smooth_l1_loss", [T([6], "f64", scale=2), T([6], "f64")], {"red": "mean", "beta": 0.0}, null=False, tol=LOSS_TOL)
add("smooth_l1_loss", [T([6], "f64", scale=2), T([6], "f64")], {"red": "sum"}, null=False, tol=LOSS_TOL)
add("huber_loss", [T([6], "f64", scale=3), T([6], "f64")], {"red": "mean"}, null=False, tol=LOSS_TOL)
add("mse_loss", [T([0, 3], "f32"), T([0, 3], "f32")], {"red": "mean"}, null=False, tol=LOSS_TOL)  # empty: NaN
for p_ in (0.5, 1.0, 1.5, 2.0, 3.0):
    for r in REDS:
        add("lp_loss", [T([3, 4], "f32"), T([3, 4], "f32")], {"red": r, "p": p_}, null=False, tol=LOSS_TOL)
add("lp_loss", [T([3, 4], "f64", layout="T"), T([4], "f64")], {"red": "mean", "p": 2.5}, null=False,
    tol=LOSS_TOL)  # broadcast, non-contiguous
add("lp_loss", [T([2, 3, 2], "f64"), T([2, 3, 2], "f64", layout="F")], {"red": "sum", "p": 1.25}, null=False,
    tol=LOSS_TOL)
add("lp_loss", [T([], "f64"), T([], "f64")], {"red": "none", "p": 4.0}, null=False, tol=LOSS_TOL)  # 0-d
add("lp_loss", [T([0, 3], "f32"), T([0, 3], "f32")], {"red": "sum", "p": 3.0}, null=False, tol=LOSS_TOL)  # empty
add("mse_loss", [T([0, 3], "f32"), T([0, 3], "f32")], {"red": "sum"}, null=False, tol=LOSS_TOL)

# ---- nll_loss / cross_entropy ----------------------------------------------------------------
for r in REDS:
    add("nll_loss", [T([5, 4], "f32"), T([5], "i64", "i", lo=0, hi=3), N_], {"red": r}, null=False, tol=LOSS_TOL)
    add("nll_loss", [T([5, 4], "f32"), T([5], "i64", "v", values=[0, 3, -100, 1, 3]), T([4], "f32", "u", lo=0.2, hi=2)],
        {"red": r}, null=False, tol=LOSS_TOL)
    add("nll_loss", [T([2, 3, 4, 2], "f64"), T([2, 4, 2], "i64", "i", lo=0, hi=2), T([3], "f64", "u", lo=0.5, hi=2)],
        {"red": r, "ii": 1}, null=False, tol=LOSS_TOL)
add("nll_loss", [T([4], "f32"), T([], "i64", "v", values=[2]), N_], {"red": "mean"}, null=False, tol=LOSS_TOL)
add("nll_loss", [T([3, 4], "f32"), T([3], "i64", "v", values=[-100, -100, -100]), N_], {"red": "mean"}, null=False,
    tol=LOSS_TOL)  # all ignored: NaN
add("nll_loss", [T([0, 4], "f32"), T([0], "i64"), N_], {"red": "mean"}, null=False, tol=LOSS_TOL)  # empty: NaN
add("nll_loss", [T([0, 4], "f32"), T([0], "i64"), N_], {"red": "sum"}, null=False, tol=LOSS_TOL)

for r in REDS:
    for ls in (0.0, 0.2):
        add("cross_entropy", [T([6, 5], "f32"), T([6], "i64", "i", lo=0, hi=4), N_], {"red": r, "ls": ls}, null=False,
            tol=LOSS_TOL)
        add("cross_entropy", [T([6, 5], "f32", layout="T"), T([6], "i64", "v", values=[4, -100, 0, 2, 2, -100]),
                              T([5], "f32", "u", lo=0.2, hi=2)], {"red": r, "ls": ls}, null=False, tol=LOSS_TOL)
        add("cross_entropy", [T([2, 4, 3, 2], "f64"), T([2, 3, 2], "i64", "i", lo=0, hi=3),
                              T([4], "f64", "u", lo=0.5, hi=2)], {"red": r, "ls": ls, "ii": 2}, null=False,
            tol=LOSS_TOL)
        add("cross_entropy", [T([4, 3], "f32"), T([4, 3], "f32", "u", lo=0, hi=1), N_], {"red": r, "ls": ls},
            null=False, tol=LOSS_TOL)  # probabilities
        add("cross_entropy", [T([2, 3, 4], "f64"), T([2, 3, 4], "f64", "u", lo=0, hi=1),
                              T([3], "f64", "u", lo=0.5, hi=2)], {"red": r, "ls": ls}, null=False, tol=LOSS_TOL)
add("cross_entropy", [T([5], "f32"), T([], "i64", "v", values=[3]), N_], {"red": "mean", "ls": 0.1}, null=False,
    tol=LOSS_TOL)
add("cross_entropy", [T([5], "f32"), T([5], "f32", "u", lo=0, hi=1), N_], {"red": "mean"}, null=False, tol=LOSS_TOL)
add("cross_entropy", [T([3, 4], "f32"), T([3], "i64", "v", values=[-100, -100, -100]), N_], {"red": "mean"},
    null=False, tol=LOSS_TOL)  # all ignored: NaN
add("cross_entropy", [T([0, 4], "f32"), T([0], "i64"), N_], {"red": "mean"}, null=False, tol=LOSS_TOL)
add("cross_entropy", [T([0, 4], "f32"), T([0, 4], "f32"), N_], {"red": "mean"}, null=False, tol=LOSS_TOL)
add("cross_entropy", [T([3, 4], "f32", scale=30), T([3], "i64", "i", lo=0, hi=3), N_], {"red": "sum"}, null=False,
    tol=LOSS_TOL)  # large logits

# ---- binary ------------------------------------------------------------------------------------
for r in REDS:
    add("binary_cross_entropy", [T([3, 4], "f32", "u", lo=0.02, hi=0.98), T([3, 4], "f32", "u", lo=0, hi=1), N_],
        {"red": r}, null=False, tol=LOSS_TOL)
    add("binary_cross_entropy", [T([3, 4], "f64", "u", lo=0.02, hi=0.98), T([3, 4], "f64", "b"),
                                 T([4], "f64", "u", lo=0.5, hi=2)], {"red": r}, null=False, tol=LOSS_TOL)
    add("binary_cross_entropy_with_logits", [T([3, 4], "f32", scale=3), T([3, 4], "f32", "u", lo=0, hi=1), N_, N_],
        {"red": r}, null=False, tol=LOSS_TOL)
    add("binary_cross_entropy_with_logits", [T([3, 4], "f64", scale=3), T([3, 4], "f64", "b"),
                                             T([3, 1], "f64", "u", lo=0.5, hi=2), T([4], "f64", "u", lo=0.5, hi=3)],
        {"red": r}, null=False, tol=LOSS_TOL)
add("binary_cross_entropy", [T([4], "f32", "v", values=[0.0, 1.0, 0.0, 1.0]), T([4], "f32", "v",
                                                                              values=[0.0, 1.0, 1.0, 0.0]), N_],
    {"red": "none", "ng": 0}, null=False, tol=LOSS_TOL)  # log clamped to -100 (PyTorch's gradient at 0 and 1 differs)
add("binary_cross_entropy_with_logits", [T([6], "f32", "v", values=[-200.0, -30.0, 0.0, 0.5, 30.0, 200.0]),
                                         T([6], "f32", "v", values=[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]), N_, N_],
    {"red": "none"}, null=False, tol=LOSS_TOL)  # stable for large logits

# ---- kl_div / poisson ----------------------------------------------------------------------------
for r in REDS + ("batchmean",):
    add("kl_div", [T([3, 5], "f32"), T([3, 5], "f32", "u", lo=0, hi=1)], {"red": r}, null=False, tol=LOSS_TOL)
    add("kl_div", [T([3, 5], "f64"), T([3, 5], "f64")], {"red": r, "lt": 1}, null=False, tol=LOSS_TOL)
add("kl_div", [T([4], "f64"), T([4], "f64", "v", values=[0.0, 0.5, 0.0, 0.5])], {"red": "sum"}, null=False,
    tol=LOSS_TOL)  # 0 log 0 = 0
for r in REDS:
    add("poisson_nll_loss", [T([3, 4], "f32"), T([3, 4], "f32", "i", lo=0, hi=5)], {"red": r}, null=False,
        tol=LOSS_TOL)
    add("poisson_nll_loss", [T([3, 4], "f64", "u", lo=0.1, hi=4), T([3, 4], "f64", "i", lo=0, hi=5)],
        {"red": r, "log_input": 0, "full": 1}, null=False, tol=LOSS_TOL)
add("poisson_nll_loss", [T([3, 4], "f64"), T([3, 4], "f64", "i", lo=0, hi=6)], {"red": "mean", "full": 1},
    null=False, tol=LOSS_TOL)
add("poisson_nll_loss", [T([5], "f64", "v", values=[0.0, 0.5, 1.0, 2.0, 3.0]), T([5], "f64", "i", lo=0, hi=4)],
    {"red": "sum", "log_input": 0, "eps": 0.01}, null=False, tol=LOSS_TOL)

# ---- embedding / ranking -------------------------------------------------------------------------
for r in REDS:
    add("cosine_embedding_loss", [T([4, 6], "f32"), T([4, 6], "f32"), T([4], "f32", "v", values=[1, -1, -1, 1])],
        {"red": r, "margin": 0.1, "ng": 2}, null=False, tol=LOSS_TOL)
    add("margin_ranking_loss", [T([6], "f32"), T([6], "f32"), T([6], "f32", "v", values=[1, -1, 1, 1, -1, -1])],
        {"red": r, "margin": 0.3, "ng": 2}, null=False, tol=LOSS_TOL)
    add("hinge_embedding_loss", [T([2, 4], "f32", scale=2), T([2, 4], "f32", "v", values=[1, -1, 1, -1, -1, 1, 1, -1])],
        {"red": r, "margin": 1.5}, null=False, tol=LOSS_TOL)
    add("triplet_margin_loss", [T([4, 5], "f32"), T([4, 5], "f32"), T([4, 5], "f32")],
        {"red": r, "ng": 3}, null=False, tol=LOSS_TOL)
add("cosine_embedding_loss", [T([6], "f64"), T([6], "f64"), T([], "f64", "v", values=[-1])], {"red": "mean", "ng": 2},
    null=False, tol=LOSS_TOL)
add("cosine_embedding_loss", [T([3, 4], "f64"), T([3, 4], "f64"), T([3], "i64", "v", values=[1, -1, 1])],
    {"red": "sum", "ng": 2}, null=False, tol=LOSS_TOL)
add("margin_ranking_loss", [T([2, 3], "f64"), T([1, 3], "f64"), T([2, 1], "f64", "v", values=[1, -1])],
    {"red": "mean", "ng": 2}, null=False, tol=LOSS_TOL)
for p, swap in ((1.0, 0), (2.0, 1), (3.0, 1)):
    add("triplet_margin_loss", [T([4, 5], "f64"), T([4, 5], "f64"), T([4, 5], "f64")],
        {"red": "mean", "ng": 3, "p": p, "swap": swap, "margin": 2.0}, null=False, tol=LOSS_TOL)
add("triplet_margin_loss", [T([5], "f64"), T([5], "f64"), T([5], "f64")], {"red": "none", "ng": 3, "eps": 1e-3},
    null=False, tol=LOSS_TOL)

# ---- ctc -------------------------------------------------------------------------------------------
_IL = T([3], "i64", "v", values=[8, 6, 7])
_TL = T([3], "i64", "v", values=[3, 2, 0])
for r in REDS:
    add("ctc_loss", [T([8, 3, 5], "f64"), T([3, 4], "i64", "i", lo=1, hi=4), _IL, _TL], {"red": r}, null=False,
        tol=LOSS_TOL)
    add("ctc_loss", [T([8, 3, 5], "f64"), T([5], "i64", "i", lo=0, hi=3), _IL, _TL], {"red": r, "blank": 4},
        null=False, tol=LOSS_TOL)  # concatenated targets
add("ctc_loss", [T([6, 2, 4], "f64"), T([2, 3], "i64", "v", values=[1, 1, 2, 3, 3, 3]), T([2], "i64", "v", values=[6, 6]),
                 T([2], "i64", "v", values=[3, 3])], {"red": "none"}, null=False, tol=LOSS_TOL)  # repeats
add("ctc_loss", [T([4, 2, 4], "f64"), T([2, 4], "i64", "v", values=[1, 1, 1, 1, 1, 2, 3, 1]),
                 T([2], "i64", "v", values=[4, 4]), T([2], "i64", "v", values=[4, 3])], {"red": "none", "ng": 0},
    null=False, tol=LOSS_TOL)  # first sample impossible: inf
add("ctc_loss", [T([4, 2, 4], "f64"), T([2, 4], "i64", "v", values=[1, 1, 1, 1, 1, 2, 3, 1]),
                 T([2], "i64", "v", values=[4, 4]), T([2], "i64", "v", values=[4, 3])], {"red": "mean", "zi": 1},
    null=False, tol=LOSS_TOL)
add("ctc_loss", [T([10, 2, 6], "f32", scale=2), T([2, 4], "i64", "i", lo=1, hi=5), T([2], "i64", "v", values=[10, 9]),
                 T([2], "i64", "v", values=[4, 3])], {"red": "mean"}, null=False, tol=20.0)
add("ctc_loss", [T([7, 5], "f64"), T([3], "i64", "i", lo=1, hi=4), T([], "i64", "v", values=[7]),
                 T([], "i64", "v", values=[3])], {"red": "none"}, null=False, tol=LOSS_TOL)  # unbatched

# ---- soft margin, multi margin, Gaussian NLL ---------------------------------------------------------
_PM1 = [1, -1, -1, 1, 1, -1, 1, 1, -1, -1, 1, -1]
for r in REDS:
    add("soft_margin_loss", [T([3, 4], "f32", scale=3), T([3, 4], "f32", "v", values=_PM1)], {"red": r},
        null=False, tol=LOSS_TOL)
    add("multilabel_soft_margin_loss", [T([3, 4], "f32", scale=2), T([3, 4], "f32", "b"), S(None)], {"red": r},
        null=False, tol=LOSS_TOL)
    add("multi_margin_loss", [T([4, 5], "f32"), T([4], "i64", "v", values=[0, 4, 2, 2]), S(None)], {"red": r},
        null=False, tol=LOSS_TOL)
    add("gaussian_nll_loss", [T([3, 4], "f32"), T([3, 4], "f32"), T([3, 4], "f32", "u", lo=0.1, hi=2)],
        {"red": r, "ng": 3}, null=False, tol=LOSS_TOL)
add("soft_margin_loss", [T([6], "f64", scale=40), T([6], "f64", "v", values=[1, -1, 1, -1, 1, -1])],
    {"red": "none"}, null=False, tol=LOSS_TOL)  # large margins: no overflow
add("multilabel_soft_margin_loss", [T([5], "f64"), T([5], "f64", "b"), T([5], "f64", "u", lo=0.5, hi=2)],
    {"red": "mean"}, null=False, tol=LOSS_TOL)
add("multilabel_soft_margin_loss", [T([2, 3], "f64", "u", "T", -2, 2), T([2, 3], "f64", "b"), S(None)],
    {"red": "sum"}, null=False, tol=LOSS_TOL)
for p, m in ((1, 0.5), (2, 1.0), (2, 2.5)):
    add("multi_margin_loss", [T([3, 6], "f64"), T([3], "i64", "v", values=[5, 0, 3]), T([6], "f64", "u", lo=0.5, hi=2)],
        {"red": "mean", "p": p, "margin": m}, null=False, tol=LOSS_TOL)
add("multi_margin_loss", [T([4], "f64"), T([], "i64", "v", values=[2]), S(None)], {"red": "none"}, null=False,
    tol=LOSS_TOL)
add("gaussian_nll_loss", [T([3, 4], "f64"), T([3, 4], "f64"), T([3, 1], "f64", "u", lo=0.1, hi=2)],
    {"red": "mean", "full": 1, "ng": 3}, null=False, tol=LOSS_TOL)  # one variance per row
add("gaussian_nll_loss", [T([3, 4], "f64"), T([3, 4], "f64"), T([3], "f64", "u", lo=0.1, hi=2)],
    {"red": "sum", "ng": 3}, null=False, tol=LOSS_TOL)  # the last dim left out
add("gaussian_nll_loss", [T([5], "f64"), T([5], "f64"), T([5], "f64", "v", values=[0.0, 1e-9, 0.5, 1.0, 2.0])],
    {"red": "none", "eps": 1e-3, "ng": 3}, null=False, tol=LOSS_TOL)  # the eps clamp
