// SPDX-License-Identifier: MIT OR Apache-2.0
// PPO (clipped objective, GAE, value loss, entropy bonus) on CartPole-v1 (categorical policy)
// or Pendulum-v1 (diagonal Gaussian policy), written out from kiln::rl's parts: a VectorEnv of
// wrapped environments, a RolloutBuffer, Categorical / DiagGaussian and nn::Linear networks.
//
//   rl-ppo [--env CartPole-v1|Pendulum-v1] [--steps N] [--seed S] [--min-improvement R]
//          [--target R] [--runs-dir DIR]
//
// After each update it prints a line and appends a row to runs/rl-ppo-<env>/metrics.csv
// (metrics.png at the end). It compares the mean return of the first and the last 20 finished
// episodes: the exit code is 0 when the last ones reach --target (when given) or beat the first
// ones by --min-improvement (when given), else 1.
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>
#include <kiln/rl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

#include "rl-common/run_log.h"

using namespace kiln;

/// Actor and critic, two tanh MLPs; for continuous actions a learned log-std per dimension.
struct ActorCritic : nn::Module {
  nn::Linear a1, a2, a3, c1, c2, c3;
  nn::Param log_std;
  bool continuous;
  ActorCritic(int64_t obs, int64_t out, bool cont, const Device& d)
      : a1({.in_features = obs, .out_features = 64}, d),
        a2({.in_features = 64, .out_features = 64}, d),
        a3({.in_features = 64, .out_features = out}, d),
        c1({.in_features = obs, .out_features = 64}, d),
        c2({.in_features = 64, .out_features = 64}, d),
        c3({.in_features = 64, .out_features = 1}, d),
        continuous(cont) {
    log_std = make_param(zeros({cont ? out : 1}), d);
    NoGradGuard no_grad;  // a small last layer: actions start near the mean
    a3.weight.copy_(a3.weight.detach() * 0.01);
  }
  /// Action logits [B, K] or Gaussian means [B, D].
  Tensor policy(const Tensor& x) const { return a3(a2(a1(x).tanh()).tanh()); }
  /// State values [B].
  Tensor value(const Tensor& x) const { return c3(c2(c1(x).tanh()).tanh()).squeeze({1}); }
  KILN_VISIT(ActorCritic, a1, a2, a3, c1, c2, c3, log_std)
};

struct Options {
  std::string env = "CartPole-v1";
  int64_t steps = 0;  ///< 0: the environment's default budget
  uint64_t seed = 1;
  double min_improvement = NAN, target = NAN;
  std::string runs_dir = "runs";
};

/// PPO's settings for one environment.
struct Config {
  int64_t num_envs, num_steps, epochs, minibatch;
  double lr, gamma, lambda, clip, ent_coef, vf_coef, max_grad_norm, reward_norm_gamma;
};

double mean_of(const std::vector<double>& v, size_t from, size_t to) {
  return to > from ? std::accumulate(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(to), 0.0) /
                         static_cast<double>(to - from)
                   : NAN;
}

int run(const Options& o) {
  const bool cont = o.env == "Pendulum-v1";
  KILN_CHECK(cont || o.env == "CartPole-v1", "rl-ppo", "--env is CartPole-v1 or Pendulum-v1, got " + o.env);
  const Config c = cont ? Config{8, 256, 10, 128, 1e-3, 0.9, 0.95, 0.2, 0.0, 0.5, 0.5, 0.9}
                        : Config{4, 128, 4, 128, 2.5e-3, 0.99, 0.95, 0.2, 0.01, 0.5, 0.5, 0.0};
  const int64_t budget = o.steps > 0 ? o.steps : (cont ? 81920 : 51200);
  manual_seed(o.seed);
  // Small networks: one kernel per op on one thread is faster than fusing ops or sharing them
  // out to threads.
  set_num_threads(1);
  const Device dev = Device::cpu().without_fusion().autodiff();
  // Pendulum's rewards (about -16 to 0 a step) are scaled by NormalizeReward; the returns
  // reported are the raw ones (info "raw_reward").
  rl::VectorEnv envs(
      [&]() -> rl::EnvPtr {
        rl::EnvPtr e = rl::make(o.env);
        if (c.reward_norm_gamma > 0) e = std::make_unique<rl::NormalizeReward>(std::move(e), c.reward_norm_gamma);
        return e;
      },
      c.num_envs);
  const int64_t N = c.num_envs, T = c.num_steps, od = envs.obs_dim();
  const int64_t ad = cont ? envs.action_space().dim() : 1, out = cont ? ad : envs.action_space().n;
  ActorCritic net(od, out, cont, dev);
  optim::Adam opt(net.parameters(), {.lr = c.lr, .eps = 1e-5});
  rl::RolloutBuffer buf(T, N, od, ad);
  rl::Rng rng(o.seed);

  rl_example::RunLog log(o.runs_dir + "/rl-ppo-" + o.env,
                         {"step", "episodes", "return", "policy_loss", "value_loss", "entropy", "seconds"});
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::vector<double> returns, running(static_cast<size_t>(N), 0.0);
  std::vector<float> obs = envs.reset(o.seed);
  const int64_t updates = budget / (N * T);
  for (int64_t u = 1; u <= updates; ++u) {
    opt.set_lr(c.lr * (1.0 - static_cast<double>(u - 1) / static_cast<double>(updates)));  // linear annealing
    buf.clear();
    for (int64_t t = 0; t < T; ++t) {
      std::vector<float> act;
      std::vector<double> logp, val;
      {
        NoGradGuard no_grad;
        Tensor x = tensor(obs, {N, od}, dev), a, lp;
        if (cont) {
          rl::DiagGaussian pi(net.policy(x), net.log_std);
          a = pi.sample();
          lp = pi.log_prob(a);
        } else {
          rl::Categorical pi(net.policy(x));
          a = pi.sample();
          lp = pi.log_prob(a);
        }
        act = a.to(f32).contiguous().to_vector<float>();
        logp = lp.to(f64).to_vector<double>();
        val = net.value(x).to(f64).to_vector<double>();
      }
      // The environment clips continuous actions to its bounds; the buffer keeps the sample.
      rl::VectorStep s = envs.step(act);
      std::vector<double> rew = s.rewards;
      std::vector<int64_t> truncated;
      for (int64_t i = 0; i < N; ++i) {
        const auto& info = s.infos[static_cast<size_t>(i)];
        auto raw = info.find("raw_reward");
        running[static_cast<size_t>(i)] += raw != info.end() ? raw->second : s.rewards[static_cast<size_t>(i)];
        if (s.done(static_cast<size_t>(i))) {
          returns.push_back(running[static_cast<size_t>(i)]);
          running[static_cast<size_t>(i)] = 0;
          if (!s.terminated[static_cast<size_t>(i)]) truncated.push_back(i);
        }
      }
      // A truncated episode is cut, not ended: bootstrap from the value of its last observation.
      for (int64_t i : truncated) {
        NoGradGuard no_grad;
        std::vector<float> fo(s.final_observations.begin() + i * od, s.final_observations.begin() + (i + 1) * od);
        rew[static_cast<size_t>(i)] += c.gamma * net.value(tensor(fo, {1, od}, dev)).item<double>();
      }
      std::vector<uint8_t> done(static_cast<size_t>(N));
      for (size_t i = 0; i < done.size(); ++i) done[i] = s.done(i);
      buf.add(obs, act, logp, rew, val, done);
      obs = s.observations;
    }
    {
      NoGradGuard no_grad;
      buf.compute_returns_and_advantages(net.value(tensor(obs, {N, od}, dev)).to(f64).to_vector<double>(), c.gamma,
                                         c.lambda);
    }
    const Tensor bo = buf.observations(dev), ba = cont ? buf.actions(dev) : buf.actions(dev).squeeze({1}).to(i64),
                 blp = buf.log_probs(dev), badv = buf.advantages(dev), bret = buf.returns(dev);
    double pl_sum = 0, vl_sum = 0, ent_sum = 0;
    int64_t n = 0;
    for (int64_t epoch = 0; epoch < c.epochs; ++epoch) {
      for (const Tensor& idx : buf.minibatches(c.minibatch, rng, dev)) {
        Tensor x = bo.index_select(0, idx), a = ba.index_select(0, idx), old = blp.index_select(0, idx);
        Tensor adv = badv.index_select(0, idx);
        adv = (adv - adv.mean()) / (adv.std() + 1e-8);
        Tensor lp, ent;
        if (cont) {
          rl::DiagGaussian pi(net.policy(x), net.log_std);
          lp = pi.log_prob(a);
          ent = pi.entropy().mean();
        } else {
          rl::Categorical pi(net.policy(x));
          lp = pi.log_prob(a);
          ent = pi.entropy().mean();
        }
        Tensor ratio = (lp - old).exp();
        Tensor pg = maximum(-adv * ratio, -adv * ratio.clamp(1 - c.clip, 1 + c.clip)).mean();
        Tensor vl = 0.5 * (net.value(x) - bret.index_select(0, idx)).square().mean();
        Tensor loss = pg - c.ent_coef * ent + c.vf_coef * vl;
        Gradients g = loss.backward();
        optim::clip_grad_norm_(g, net.parameters(), c.max_grad_norm);
        opt.step(g);
        pl_sum += pg.item<double>();
        vl_sum += vl.item<double>();
        ent_sum += ent.item<double>();
        ++n;
      }
    }
    const double recent = mean_of(returns, returns.size() > 20 ? returns.size() - 20 : 0, returns.size());
    const int64_t step = u * N * T;
    std::printf(
        "update %3lld  step %7lld  episodes %5zu  return (last 20) %8.1f  policy loss %+.4f  value loss %.4f  "
        "entropy %.3f  %.1f s\n",
        static_cast<long long>(u), static_cast<long long>(step), returns.size(), recent, pl_sum / n, vl_sum / n,
        ent_sum / n, seconds());
    std::fflush(stdout);
    log.row({static_cast<double>(step), static_cast<double>(returns.size()), recent, pl_sum / n, vl_sum / n,
             ent_sum / n, seconds()});
  }
  log.chart("step", {{"return", {"return"}}, {"losses", {"policy_loss", "value_loss"}}, {"entropy", {"entropy"}}});
  const size_t k = std::min<size_t>(20, returns.size() / 2);
  const double first = mean_of(returns, 0, k), last = mean_of(returns, returns.size() - k, returns.size());
  std::printf("return of the first %zu episodes %.1f, of the last %zu %.1f (improvement %+.1f) in %.1f s\n", k, first,
              k, last, last - first, seconds());
  bool ok = true;
  if (!std::isnan(o.target)) ok = ok && last >= o.target;
  if (!std::isnan(o.min_improvement)) ok = ok && last - first >= o.min_improvement;
  std::printf("%s\n", ok ? "passed" : "failed");
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--env")
      o.env = next();
    else if (a == "--steps")
      o.steps = std::atoll(next());
    else if (a == "--seed")
      o.seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--min-improvement")
      o.min_improvement = std::atof(next());
    else if (a == "--target")
      o.target = std::atof(next());
    else if (a == "--runs-dir")
      o.runs_dir = next();
    else {
      std::fprintf(stderr,
                   "usage: rl-ppo [--env CartPole-v1|Pendulum-v1] [--steps N] [--seed S] [--min-improvement R] "
                   "[--target R] [--runs-dir DIR]\n");
      return 2;
    }
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
