#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Reference data of kiln::rl's tests (tests/data/rl/*.safetensors).

Run from the repository root:
  python3 scripts/gen_rl_reference.py            # needs gymnasium (pip, installed on demand) and torch

envs.safetensors: trajectories of Gymnasium's classic-control environments and FrozenLake
(the grid world's rules): for each episode the initial state after reset(seed), the actions
(random, or a simple policy that reaches the goal) and every step's observation, reward and
terminated flag. The C++ tests set the same initial state, replay the actions and compare.
wrappers.safetensors: raw observations/rewards of an episode and what Gymnasium's
NormalizeObservation, NormalizeReward and FrameStackObservation make of them.
algos.safetensors: GAE of random rollouts, computed by the plain loop below.
dists.safetensors: torch.distributions Categorical and Normal log_prob / entropy and their
gradients, for fixed inputs.
Inputs are seeded, so a rerun writes the same files.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pip_ensure import ensure  # noqa: E402
from safetensors_np import save_arrays  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "rl")


def save(name, tensors):
    """Writes {name: array} as name.safetensors under OUT."""
    save_arrays(os.path.join(OUT, name + ".safetensors"), tensors)


def episode(env, seed, policy, steps, rng):
    """Runs one episode from reset(seed) for at most `steps` steps (stops at termination)."""
    obs, _ = env.reset(seed=seed)
    state0 = np.array(env.unwrapped.state, dtype=np.float64).reshape(-1)
    actions, obss, rewards, terms = [], [], [], []
    for _ in range(steps):
        a = policy(obs, rng)
        obs, r, term, trunc, _ = env.step(a)
        actions.append(np.asarray(a, dtype=np.float32).reshape(-1))
        obss.append(np.asarray(obs, dtype=np.float32).reshape(-1))
        rewards.append(float(r))
        terms.append(bool(term))
        if term:
            break
    return {"state0": state0, "actions": np.stack(actions), "obs": np.stack(obss),
            "rewards": np.array(rewards, dtype=np.float64), "terminated": np.array(terms, dtype=np.uint8)}


def envs():
    import gymnasium.envs.classic_control as cc
    from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv
    rnd = lambda n: (lambda obs, rng: int(rng.integers(n)))  # noqa: E731
    cases = [
        ("cartpole", cc.CartPoleEnv, [(1, rnd(2), 200), (2, rnd(2), 200),
                                      (3, lambda o, r: int(o[2] + 0.5 * o[3] > 0), 300)]),
        ("acrobot", cc.AcrobotEnv, [(1, rnd(3), 60), (2, lambda o, r: 2 if o[4] > 0 else 0, 60)]),
        ("mountaincar", cc.MountainCarEnv, [(1, rnd(3), 150), (2, lambda o, r: 2 if o[1] >= 0 else 0, 200)]),
        ("mountaincarcont", cc.Continuous_MountainCarEnv,
         [(1, lambda o, r: r.uniform(-1.3, 1.3, 1).astype(np.float32), 150),
          (2, lambda o, r: np.array([1.0 if o[1] >= 0 else -1.0], dtype=np.float32), 300)]),
        ("pendulum", cc.PendulumEnv, [(1, lambda o, r: r.uniform(-2.5, 2.5, 1).astype(np.float32), 200),
                                      (2, lambda o, r: np.array([2.0 * np.sign(o[2])], np.float32), 200)]),
    ]
    out = {}
    for name, cls, eps in cases:
        for i, (seed, policy, steps) in enumerate(eps):
            rng = np.random.default_rng(100 + seed)
            for k, v in episode(cls(), seed, policy, steps, rng).items():
                out[f"{name}.{i}.{k}"] = v
    # The grid world: FrozenLake 4x4, not slippery; random actions until a hole or the goal,
    # then a path to the goal (down, down, right, right, down, right).
    for i, acts in enumerate([None, [1, 1, 2, 2, 1, 2]]):
        env = FrozenLakeEnv(is_slippery=False)
        env.reset(seed=0)
        rng = np.random.default_rng(7 + i)
        cells, rewards, terms, actions = [], [], [], []
        for t in range(40 if acts is None else len(acts)):
            a = int(rng.integers(4)) if acts is None else acts[t]
            s, r, term, _, _ = env.step(a)
            actions.append(a)
            cells.append(int(s))
            rewards.append(float(r))
            terms.append(term)
            if term:
                break
        out[f"grid.{i}.actions"] = np.array(actions, dtype=np.int64)
        out[f"grid.{i}.cells"] = np.array(cells, dtype=np.int64)
        out[f"grid.{i}.rewards"] = np.array(rewards, dtype=np.float64)
        out[f"grid.{i}.terminated"] = np.array(terms, dtype=np.uint8)
    save("envs", out)


class Recorder:
    """Records what the inner environment returns (the raw values a wrapper sees)."""

    def __init__(self, env):
        import gymnasium as gym

        class R(gym.Wrapper):
            def __init__(s, e):
                super().__init__(e)
                s.obs, s.rewards, s.terms = [], [], []

            def reset(s, **kw):
                o, info = s.env.reset(**kw)
                s.obs.append(np.asarray(o, np.float32))
                return o, info

            def step(s, a):
                o, r, te, tr, info = s.env.step(a)
                s.obs.append(np.asarray(o, np.float32))
                s.rewards.append(float(r))
                s.terms.append(bool(te))
                return o, r, te, tr, info
        self.env = R(env)


def wrappers():
    import gymnasium.envs.classic_control as cc
    from gymnasium.wrappers import FrameStackObservation, NormalizeObservation, NormalizeReward
    out = {}
    # NormalizeObservation and FrameStack over CartPole (resets after termination), and
    # NormalizeReward over Pendulum and CartPole (terminated resets the discounted return).
    for name, make, env_cls, seed in [("normobs", lambda e: NormalizeObservation(e), cc.CartPoleEnv, 5),
                                      ("framestack", lambda e: FrameStackObservation(e, 3), cc.CartPoleEnv, 6),
                                      ("normrew", lambda e: NormalizeReward(e, gamma=0.9), cc.PendulumEnv, 7),
                                      ("normrew_cp", lambda e: NormalizeReward(e, gamma=0.99), cc.CartPoleEnv, 8)]:
        rec = Recorder(env_cls())
        env = make(rec.env)
        rng = np.random.default_rng(seed)
        o, _ = env.reset(seed=seed)
        wobs, wrew, reset_at = [np.asarray(o, np.float32).reshape(-1)], [], []
        for t in range(120):
            if env_cls is cc.PendulumEnv:
                a = rng.uniform(-2, 2, 1).astype(np.float32)
            else:
                a = int(rng.integers(2))
            o, r, term, trunc, _ = env.step(a)
            wobs.append(np.asarray(o, np.float32).reshape(-1))
            wrew.append(float(r))
            if term:
                o, _ = env.reset()
                wobs.append(np.asarray(o, np.float32).reshape(-1))
                reset_at.append(t)
        raw = rec.env
        out[f"{name}.raw_obs"] = np.stack(raw.obs)
        out[f"{name}.raw_rewards"] = np.array(raw.rewards, np.float64)
        out[f"{name}.raw_terminated"] = np.array(raw.terms, np.uint8)
        out[f"{name}.obs"] = np.stack(wobs)
        out[f"{name}.rewards"] = np.array(wrew, np.float64)
    save("wrappers", out)


def gae_reference(rewards, values, dones, last_value, gamma, lam):
    """The plain GAE loop: dones[t] = the episode ended after step t; values[t] = V(obs_t)."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    last = np.zeros(N)
    for t in reversed(range(T)):
        next_value = last_value if t == T - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv, adv + values


def algos():
    rng = np.random.default_rng(3)
    out = {}
    for i, (T, N, gamma, lam) in enumerate([(16, 3, 0.99, 0.95), (7, 1, 0.9, 1.0), (33, 4, 0.98, 0.0)]):
        rewards = rng.normal(size=(T, N))
        values = rng.normal(size=(T, N))
        dones = (rng.uniform(size=(T, N)) < 0.15).astype(np.float64)
        last_value = rng.normal(size=N)
        adv, ret = gae_reference(rewards, values, dones, last_value, gamma, lam)
        for k, v in dict(rewards=rewards, values=values, dones=dones, last_value=last_value, advantages=adv,
                         returns=ret, params=np.array([gamma, lam])).items():
            out[f"gae.{i}.{k}"] = v
    save("algos", out)


def dists():
    import torch
    torch.manual_seed(0)
    out = {}
    logits = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    actions = torch.tensor([0, 3, 1, 1, 2])
    d = torch.distributions.Categorical(logits=logits)
    lp, ent = d.log_prob(actions), d.entropy()
    (g_lp,) = torch.autograd.grad(lp.sum(), logits, retain_graph=True)
    (g_ent,) = torch.autograd.grad(ent.sum(), logits)
    out.update({"cat.logits": logits.detach().numpy(), "cat.actions": actions.numpy(),
                "cat.log_prob": lp.detach().numpy(), "cat.entropy": ent.detach().numpy(),
                "cat.grad_log_prob": g_lp.numpy(), "cat.grad_entropy": g_ent.numpy()})
    mean = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    log_std = (0.3 * torch.randn(3, dtype=torch.float64)).requires_grad_()
    x = torch.randn(6, 3, dtype=torch.float64)
    n = torch.distributions.Normal(mean, log_std.exp())
    lp, ent = n.log_prob(x).sum(-1), n.entropy().sum(-1)
    g_mean, g_std = torch.autograd.grad(lp.sum(), [mean, log_std], retain_graph=True)
    (g_ent_std,) = torch.autograd.grad(ent.sum(), [log_std])
    out.update({"gauss.mean": mean.detach().numpy(), "gauss.log_std": log_std.detach().numpy(),
                "gauss.x": x.numpy(), "gauss.log_prob": lp.detach().numpy(), "gauss.entropy": ent.detach().numpy(),
                "gauss.grad_mean": g_mean.numpy(), "gauss.grad_log_std": g_std.numpy(),
                "gauss.grad_entropy_log_std": g_ent_std.numpy()})
    save("dists", out)


def main():
    ensure("gymnasium", ["gymnasium"])
    envs()
    wrappers()
    algos()
    ensure("torch", ["torch"])
    dists()


if __name__ == "__main__":
    main()
