// SPDX-License-Identifier: MIT OR Apache-2.0
// Double DQN with a target network on CartPole-v1, written out from kiln::rl's parts: the
// environment, a replay buffer (uniform, or prioritised with --prioritized), an epsilon schedule,
// a Q-network of nn::Linear layers trained with Adam on the Huber loss.
//
//   rl-dqn-cartpole [--steps N] [--seed S] [--target R] [--prioritized] [--runs-dir DIR]
//
// Every 500 steps it prints a line and appends a row to runs/rl-dqn-cartpole/metrics.csv
// (metrics.png at the end). It stops when the greedy policy's mean return over 20 evaluation
// episodes reaches --target (195) and exits 0, or exits 1 when the step budget runs out.
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/rl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <numeric>
#include <string>

#include "rl-common/run_log.h"

using namespace kiln;
namespace F = kiln::nn::functional;

/// Q(s, .): observation -> one value per action.
struct QNet : nn::Module {
  nn::Linear fc1, fc2, fc3;
  QNet(int64_t obs, int64_t actions, const Device& d)
      : fc1({.in_features = obs, .out_features = 128}, d),
        fc2({.in_features = 128, .out_features = 128}, d),
        fc3({.in_features = 128, .out_features = actions}, d) {}
  Tensor forward(const Tensor& x) const { return fc3(relu(fc2(relu(fc1(x))))); }
  KILN_VISIT(QNet, fc1, fc2, fc3)
};

struct Options {
  int64_t steps = 60000;  ///< environment step budget
  uint64_t seed = 1;
  double target = 195;  ///< mean greedy evaluation return that counts as solved
  bool prioritized = false;
  std::string runs_dir = "runs";
};

/// Copies the online network's weights into the target network.
void hard_update(QNet& target, QNet& online) {
  NoGradGuard no_grad;
  auto t = target.parameters(), o = online.parameters();
  for (size_t i = 0; i < t.size(); ++i) t[i].copy_(o[i].detach());
}

int64_t greedy(const QNet& q, const std::vector<float>& obs, const Device& d) {
  NoGradGuard no_grad;
  return q.forward(tensor(obs, {1, static_cast<int64_t>(obs.size())}, d)).argmax(1).item<int64_t>();
}

/// Mean return of the greedy policy over `episodes` episodes (seeds 10000, 10001, ...).
double evaluate(const QNet& q, const Device& d, int episodes) {
  auto env = rl::make("CartPole-v1");
  double total = 0;
  for (int e = 0; e < episodes; ++e) {
    std::vector<float> obs = env->reset(10000 + e);
    for (;;) {
      rl::StepResult r = env->step(greedy(q, obs, d));
      total += r.reward;
      obs = r.observation;
      if (r.terminated || r.truncated) break;
    }
  }
  return total / episodes;
}

int run(const Options& o) {
  manual_seed(o.seed);
  // Small networks: one kernel per op on one thread is faster than fusing ops or sharing them
  // out to threads.
  set_num_threads(1);
  const Device dev = Device::cpu().without_fusion().autodiff();
  auto env = rl::make("CartPole-v1");
  const int64_t od = env->observation_space().dim(), na = env->action_space().n;
  QNet q(od, na, dev), target(od, na, dev);
  hard_update(target, q);
  optim::Adam opt(q.parameters(), {.lr = 5e-4});
  const rl::ReplayBufferConfig bc{.capacity = 50000, .obs_dim = od};
  std::unique_ptr<rl::ReplayBuffer> buffer =
      o.prioritized ? std::make_unique<rl::PrioritizedReplayBuffer>(bc) : std::make_unique<rl::ReplayBuffer>(bc);
  const rl::LinearSchedule epsilon{.start = 1.0, .end = 0.02, .steps = 10000};
  const rl::LinearSchedule beta{.start = 0.4, .end = 1.0, .steps = o.steps};
  const int64_t learning_starts = 1000, batch = 64, target_every = 500, train_every = 1, log_every = 500;
  const double gamma = 0.99;
  rl::Rng rng(o.seed);

  rl_example::RunLog log(o.runs_dir + "/rl-dqn-cartpole",
                         {"step", "episodes", "train_return", "eval_return", "epsilon", "loss", "seconds"});
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::deque<double> recent;  // returns of the last 20 training episodes
  double loss_sum = 0, ep_return = 0;
  int64_t loss_n = 0, episodes = 0;
  std::vector<float> obs = env->reset(o.seed);
  for (int64_t step = 1; step <= o.steps; ++step) {
    const int64_t a = rng.uniform() < epsilon(step) ? rng.integer(na) : greedy(q, obs, dev);
    rl::StepResult r = env->step(a);
    buffer->add(obs, a, r.reward, r.observation, r.terminated);  // a truncated episode is not terminal
    ep_return += r.reward;
    obs = r.observation;
    if (r.terminated || r.truncated) {
      recent.push_back(ep_return);
      if (recent.size() > 20) recent.pop_front();
      ++episodes;
      ep_return = 0;
      obs = env->reset();
    }

    if (step > learning_starts && step % train_every == 0) {
      if (o.prioritized) static_cast<rl::PrioritizedReplayBuffer&>(*buffer).beta = beta(step);
      rl::ReplayBatch b = buffer->sample(batch, rng, dev);
      Tensor y;
      {
        // Double DQN: the online network picks the next action, the target network values it.
        NoGradGuard no_grad;
        Tensor next_a = q.forward(b.next_obs).argmax(1, true);
        Tensor next_q = target.forward(b.next_obs).gather(1, next_a).squeeze({1});
        y = b.rewards + gamma * (1.0 - b.dones) * next_q;
      }
      Tensor q_sa = q.forward(b.obs).gather(1, b.actions.unsqueeze(1)).squeeze({1});
      Tensor td = q_sa - y;
      Tensor loss = (F::huber_loss(q_sa, y, "none") * b.weights).mean();
      opt.step(loss.backward());
      if (o.prioritized) {
        auto e = td.detach().to(f64).to_vector<double>();
        static_cast<rl::PrioritizedReplayBuffer&>(*buffer).update_priorities(b.indices, e);
      }
      loss_sum += loss.item<double>();
      ++loss_n;
    }
    if (step % target_every == 0) hard_update(target, q);

    if (step % log_every == 0) {
      const double train_ret =
          recent.empty() ? NAN
                         : std::accumulate(recent.begin(), recent.end(), 0.0) / static_cast<double>(recent.size());
      const double eval_ret = step > learning_starts ? evaluate(q, dev, 20) : NAN;
      const double loss = loss_n ? loss_sum / static_cast<double>(loss_n) : NAN;
      std::printf(
          "step %6lld  episodes %4lld  train return (last 20) %6.1f  eval return %6.1f  epsilon %.3f  "
          "loss %.4f  %.1f s\n",
          static_cast<long long>(step), static_cast<long long>(episodes), train_ret, eval_ret, epsilon(step), loss,
          seconds());
      std::fflush(stdout);
      log.row({static_cast<double>(step), static_cast<double>(episodes), train_ret, eval_ret, epsilon(step), loss,
               seconds()});
      loss_sum = 0;
      loss_n = 0;
      if (eval_ret >= o.target) {
        log.chart("step", {{"return", {"train_return", "eval_return"}}, {"loss", {"loss"}}, {"epsilon", {"epsilon"}}});
        std::printf("solved: greedy evaluation return %.1f >= %.0f after %lld steps (%.1f s)\n", eval_ret, o.target,
                    static_cast<long long>(step), seconds());
        return 0;
      }
    }
  }
  log.chart("step", {{"return", {"train_return", "eval_return"}}, {"loss", {"loss"}}, {"epsilon", {"epsilon"}}});
  std::printf("not solved within %lld steps\n", static_cast<long long>(o.steps));
  return 1;
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
    if (a == "--steps")
      o.steps = std::atoll(next());
    else if (a == "--seed")
      o.seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--target")
      o.target = std::atof(next());
    else if (a == "--prioritized")
      o.prioritized = true;
    else if (a == "--runs-dir")
      o.runs_dir = next();
    else {
      std::fprintf(stderr,
                   "usage: rl-dqn-cartpole [--steps N] [--seed S] [--target R] [--prioritized] [--runs-dir DIR]\n");
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
