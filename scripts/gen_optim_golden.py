#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes PyTorch's reference data for tests/unit/test_optim.cpp and tests/unit/test_sched.cpp:

  tests/golden/optim_trajectories.txt  <case> <step> <W (3x2) row-major> <b (3)>, after each of 20 steps
  tests/golden/optim_schedules.txt     <case> <lr at epoch 0> ... <lr at epoch 30>
  tests/golden/optim_momentum.txt      <case> <momentum (or beta1) at epoch 0> ... <at epoch 30> (OneCycleLR)
  tests/golden/optim_clip.txt          clip <norm_type (-1 = inf)> <max_norm> <total norm> <clipped grads>
                                       value <clip_value> <clipped grads>

The problem (the C++ test builds the same loss with kiln ops, f64):
  loss = mean((W x + b - y)^2) + 0.05 sum(W^4) + 0.1 (sum(b^2) - 1)^2
Adan (sail-sg/Adan) and Lion (lucidrains/lion-pytorch) are not in torch.optim: their reference
updates are written out below. Muon is torch.optim.Muon's update with the Newton-Schulz iteration in
f64 (torch runs it in bfloat16), AdamW for the 1-d bias.
"""
import bisect
import math
import os

import torch

torch.set_default_dtype(torch.float64)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")

W0 = [[0.5, -0.3], [0.8, 0.1], [-0.6, 0.4]]
B0 = [0.2, -0.1, 0.3]
X = torch.tensor([[1.0, -0.5, 0.3, 0.7], [0.2, 0.9, -1.1, 0.4]])
Y = torch.tensor([[0.3, -0.2, 0.5, 0.1], [1.0, 0.4, -0.3, 0.2], [-0.5, 0.6, 0.2, -0.4]])
STEPS = 20


def loss_fn(W, b):
    r = W @ X + b[:, None] - Y
    return (r * r).mean() + 0.05 * (W**4).sum() + 0.1 * ((b * b).sum() - 1) ** 2


def params():
    return torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)


def fmt(v):
    return " ".join(f"{float(x):.13g}" for x in v)


def compute_grads(W, b):
    for p in (W, b):
        p.grad = None
    loss = loss_fn(W, b)
    loss.backward()
    return loss


class Adan(torch.optim.Optimizer):
    def __init__(self, ps, lr=1e-3, betas=(0.98, 0.92, 0.99), eps=1e-8, weight_decay=0.0, no_prox=False):
        super().__init__(ps, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, no_prox=no_prox))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            b1, b2, b3 = g["betas"]
            lr, wd = g["lr"], g["weight_decay"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                s = self.state[p]
                if not s:
                    s["step"] = 0
                    s["exp_avg"] = torch.zeros_like(p)
                    s["exp_avg_diff"] = torch.zeros_like(p)
                    s["exp_avg_sq"] = torch.zeros_like(p)
                    s["pre_grad"] = p.grad.clone()
                s["step"] += 1
                t = s["step"]
                bc1, bc2, bc3 = 1 - b1**t, 1 - b2**t, 1 - b3**t
                grad = p.grad
                diff = grad - s["pre_grad"]
                update = grad + b2 * diff
                s["exp_avg"].mul_(b1).add_(grad, alpha=1 - b1)
                s["exp_avg_diff"].mul_(b2).add_(diff, alpha=1 - b2)
                s["exp_avg_sq"].mul_(b3).addcmul_(update, update, value=1 - b3)
                denom = (s["exp_avg_sq"].sqrt() / math.sqrt(bc3)).add_(g["eps"])
                update = ((s["exp_avg"] / bc1).add_(s["exp_avg_diff"], alpha=b2 / bc2)).div_(denom)
                if g["no_prox"]:
                    p.mul_(1 - lr * wd)
                    p.add_(update, alpha=-lr)
                else:
                    p.add_(update, alpha=-lr)
                    p.div_(1 + lr * wd)
                s["pre_grad"].copy_(grad)


class Lion(torch.optim.Optimizer):
    def __init__(self, ps, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(ps, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                s = self.state[p]
                if not s:
                    s["exp_avg"] = torch.zeros_like(p)
                p.mul_(1 - g["lr"] * g["weight_decay"])
                update = s["exp_avg"].clone().mul_(b1).add(p.grad, alpha=1 - b1).sign_()
                p.add_(update, alpha=-g["lr"])
                s["exp_avg"].mul_(b2).add_(p.grad, alpha=1 - b2)


def ns_f64(G, abc=(3.4445, -4.7750, 2.0315), steps=5, eps=1e-7):
    a, b, c = abc
    X_ = G.clone()
    if G.size(0) > G.size(1):
        X_ = X_.T
    X_ = X_ / X_.norm().clamp(min=eps)
    for _ in range(steps):
        A = X_ @ X_.T
        B = torch.addmm(A, A, A, beta=b, alpha=c)
        X_ = torch.addmm(X_, B, X_, beta=a)
    if G.size(0) > G.size(1):
        X_ = X_.T
    return X_


class MuonRef:
    """torch.optim.Muon for W (f64 Newton-Schulz) + torch.optim.AdamW for b."""

    def __init__(self, W, b, lr, wd, b_lr=None, b_wd=None):
        self.W, self.lr, self.wd, self.buf = W, lr, wd, torch.zeros_like(W)
        self.adam = torch.optim.AdamW([b], lr=lr if b_lr is None else b_lr, weight_decay=wd if b_wd is None else b_wd)

    @torch.no_grad()
    def step(self):
        g = self.W.grad
        self.buf.lerp_(g, 1 - 0.95)
        update = ns_f64(g.lerp(self.buf, 0.95))
        A, B = self.W.shape
        self.W.mul_(1 - self.lr * self.wd)
        self.W.add_(update, alpha=-self.lr * math.sqrt(max(1, A / B)))
        self.adam.step()


O = torch.optim


def groups(W, b, b_lr, b_wd):
    return [{"params": [W]}, {"params": [b], "lr": b_lr, "weight_decay": b_wd}]


CASES = {
    "sgd": lambda W, b: O.SGD([W, b], lr=0.05),
    "sgd_momentum": lambda W, b: O.SGD([W, b], lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda W, b: O.SGD([W, b], lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "sgd_maximize": lambda W, b: O.SGD([W, b], lr=0.01, momentum=0.5, maximize=True),
    "sgd_groups": lambda W, b: O.SGD(
        [{"params": [W]}, {"params": [b], "lr": 0.1, "weight_decay": 0.05}], lr=0.05, momentum=0.9
    ),
    "adam": lambda W, b: O.Adam([W, b], lr=0.05),
    "adam_wd_amsgrad": lambda W, b: O.Adam([W, b], lr=0.05, weight_decay=0.1, amsgrad=True),
    "adamw": lambda W, b: O.AdamW([W, b], lr=0.05, weight_decay=0.1),
    "adamw_amsgrad_max": lambda W, b: O.AdamW([W, b], lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True),
    "adagrad": lambda W, b: O.Adagrad([W, b], lr=0.1, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1),
    "adadelta": lambda W, b: O.Adadelta([W, b], lr=1.0, weight_decay=0.01),
    "rmsprop": lambda W, b: O.RMSprop([W, b], lr=0.01),
    "rmsprop_centered_momentum": lambda W, b: O.RMSprop(
        [W, b], lr=0.01, momentum=0.9, centered=True, weight_decay=0.01
    ),
    "adan": lambda W, b: Adan([W, b], lr=0.05, weight_decay=0.02),
    "adan_noprox": lambda W, b: Adan([W, b], lr=0.05, weight_decay=0.02, no_prox=True),
    "lion": lambda W, b: Lion([W, b], lr=0.01, weight_decay=0.1),
    "muon": lambda W, b: MuonRef(W, b, lr=0.05, wd=0.1),
    # Parameter groups: b gets its own lr and weight decay, W the optimizer's defaults.
    "adam_groups": lambda W, b: O.Adam(groups(W, b, 0.02, 0.1), lr=0.05, weight_decay=0.01),
    "adamw_groups": lambda W, b: O.AdamW(groups(W, b, 0.02, 0.3), lr=0.05, weight_decay=0.1),
    "adagrad_groups": lambda W, b: O.Adagrad(groups(W, b, 0.3, 0.05), lr=0.1, lr_decay=0.01, weight_decay=0.01),
    "adadelta_groups": lambda W, b: O.Adadelta(groups(W, b, 0.5, 0.05), lr=1.0, weight_decay=0.01),
    "rmsprop_groups": lambda W, b: O.RMSprop(groups(W, b, 0.03, 0.05), lr=0.01, momentum=0.9),
    "adan_groups": lambda W, b: Adan(groups(W, b, 0.01, 0.1), lr=0.05, weight_decay=0.02),
    "lion_groups": lambda W, b: Lion(groups(W, b, 0.03, 0.0), lr=0.01, weight_decay=0.1),
    "muon_groups": lambda W, b: MuonRef(W, b, lr=0.05, wd=0.1, b_lr=0.02, b_wd=0.3),
    # Groups under a scheduler (SCHEDULED below): each group's lr follows it from its own start.
    "sgd_groups_steplr": lambda W, b: O.SGD(groups(W, b, 0.2, 0.05), lr=0.05, momentum=0.9),
    "adam_groups_cosine": lambda W, b: O.Adam(groups(W, b, 0.02, 0.1), lr=0.05),
    "lbfgs": lambda W, b: O.LBFGS([W, b], lr=0.5, max_iter=3),
    "lbfgs_wolfe": lambda W, b: O.LBFGS([W, b], lr=1, max_iter=3, line_search_fn="strong_wolfe"),
}


# Schedulers stepped after every optimizer step in the cases named here.
SCHEDULED = {
    "sgd_groups_steplr": lambda o: O.lr_scheduler.StepLR(o, step_size=5, gamma=0.5),
    "adam_groups_cosine": lambda o: O.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
}


def trajectories():
    lines = []
    for name, make in CASES.items():
        W, b = params()
        opt = make(W, b)
        sched = SCHEDULED[name](opt) if name in SCHEDULED else None
        for k in range(STEPS):
            if name.startswith("lbfgs"):
                opt.step(lambda: compute_grads(W, b))
            else:
                compute_grads(W, b)
                opt.step()
            if sched:
                sched.step()
            lines.append(f"{name} {k} {fmt(W.detach().flatten())} {fmt(b.detach())}")
    return lines


def schedules():
    def run(name, make, momentum=0.0):
        opt = O.SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=momentum)
        sched = make(opt)
        lrs = [opt.param_groups[0]["lr"]]
        for _ in range(30):
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        return f"{name} {fmt(lrs)}"

    S = O.lr_scheduler

    def noam(e, d_model=16, warmup=8, factor=2.0):
        s = max(e, 1)
        return factor * d_model**-0.5 * min(s**-0.5, s * warmup**-1.5)

    lines = [
        run("constant", lambda o: S.ConstantLR(o, factor=0.5, total_iters=4)),
        run("step", lambda o: S.StepLR(o, step_size=7, gamma=0.5)),
        run("multistep", lambda o: S.MultiStepLR(o, milestones=[5, 12, 20], gamma=0.3)),
        run("exponential", lambda o: S.ExponentialLR(o, gamma=0.9)),
        run("linear", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=10)),
        run("cosine", lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001)),
        run("warm_restarts", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=0.01)),
        run("onecycle", lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=30), momentum=0.9),
        run(
            "onecycle_linear_3phase",
            lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=30, pct_start=0.25, anneal_strategy="linear",
                                   three_phase=True),
            momentum=0.9,
        ),
        run("polynomial", lambda o: S.PolynomialLR(o, total_iters=20, power=2.0)),
        run("noam", lambda o: S.LambdaLR(o, noam)),
        run(
            "warmup_cosine",
            lambda o: S.SequentialLR(
                o, [S.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=6), S.CosineAnnealingLR(o, T_max=20)],
                milestones=[6],
            ),
        ),
        run(
            "sequential_three",
            lambda o: S.SequentialLR(
                o, [S.ConstantLR(o, factor=0.5, total_iters=3), S.ExponentialLR(o, gamma=0.9),
                    S.StepLR(o, step_size=5, gamma=0.5)], milestones=[4, 12],
            ),
        ),
        run("chained_constant_exponential",
            lambda o: S.ChainedScheduler([S.ConstantLR(o, factor=0.1, total_iters=3), S.ExponentialLR(o, gamma=0.9)])),
        run("chained_linear_multistep",
            lambda o: S.ChainedScheduler([S.LinearLR(o, start_factor=0.2, total_iters=5),
                                          S.MultiStepLR(o, milestones=[8, 20], gamma=0.5)])),
    ]
    metrics = [1.0 / (1 + k) if k < 8 else 0.11 + 0.001 * ((k * 7) % 5) for k in range(30)]
    opt = O.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    sched = S.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2, threshold=0.01, cooldown=1)
    lrs = [0.1]
    for m in metrics:
        sched.step(m)
        lrs.append(opt.param_groups[0]["lr"])
    lines.append(f"plateau_metrics {fmt(metrics)}")
    lines.append(f"plateau {fmt(lrs)}")
    return lines


def momentum_schedules():
    """OneCycleLR's momentum cycling: SGD's momentum or Adam's beta1 after each step."""
    S = O.lr_scheduler

    def run(name, make_opt, make_sched):
        opt = make_opt([torch.zeros(1, requires_grad=True)])
        sched = make_sched(opt)

        def mom():
            g = opt.param_groups[0]
            return g["betas"][0] if "betas" in g else g["momentum"]

        ms = [mom()]
        for _ in range(30):
            opt.step()
            sched.step()
            ms.append(mom())
        return f"{name} {fmt(ms)}"

    return [
        run("onecycle_sgd", lambda ps: O.SGD(ps, lr=0.1, momentum=0.9),
            lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=30)),
        run("onecycle_adam_linear_3phase", lambda ps: O.Adam(ps, lr=0.1),
            lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=30, pct_start=0.25, anneal_strategy="linear",
                                   three_phase=True, base_momentum=0.8, max_momentum=0.9)),
        run("onecycle_adamw_cos", lambda ps: O.AdamW(ps, lr=0.1),
            lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=30, pct_start=0.4, base_momentum=0.7,
                                   max_momentum=0.99)),
    ]


def clipping():
    lines = []
    for norm_type, max_norm in [(2.0, 0.5), (1.0, 0.5), (math.inf, 0.2), (3.0, 0.4), (2.0, 100.0)]:
        W, b = params()
        compute_grads(W, b)
        total = torch.nn.utils.clip_grad_norm_([W, b], max_norm, norm_type=norm_type)
        nt = -1 if math.isinf(norm_type) else norm_type
        lines.append(f"clip {nt} {max_norm} {float(total):.13g} {fmt(W.grad.flatten())} {fmt(b.grad)}")
    W, b = params()
    compute_grads(W, b)
    torch.nn.utils.clip_grad_value_([W, b], 0.1)
    lines.append(f"value 0.1 {fmt(W.grad.flatten())} {fmt(b.grad)}")
    return lines


def main():
    """Writes every file, or only those named on the command line (e.g. optim_momentum.txt)."""
    import sys

    makers = {
        "optim_trajectories.txt": trajectories,
        "optim_schedules.txt": schedules,
        "optim_momentum.txt": momentum_schedules,
        "optim_clip.txt": clipping,
    }
    for fname in sys.argv[1:]:
        if fname not in makers:
            sys.exit(f"unknown file {fname}; one of {sorted(makers)}")
    for fname in sys.argv[1:] or list(makers):
        lines = makers[fname]()
        with open(os.path.join(ROOT, fname), "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"wrote {fname}: {len(lines)} lines")


if __name__ == "__main__":
    main()
