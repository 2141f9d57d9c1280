// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::optim optimizers against PyTorch: 20-step parameter trajectories on a small f64 problem
// (tests/golden/optim_trajectories.txt, written by scripts/gen_optim_golden.py), clipping
// against torch.nn.utils.clip_grad_norm_ / clip_grad_value_, accumulation, save/load.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"

using namespace kiln;
namespace o = kiln::optim;

namespace {

Device ad() { return Device::cpu().autodiff(); }

struct Problem {
  Tensor W, b;
  Problem()
      : W(tensor<double>({0.5, -0.3, 0.8, 0.1, -0.6, 0.4}, {3, 2}, ad()).require_grad()),
        b(tensor<double>({0.2, -0.1, 0.3}, {3}, ad()).require_grad()) {}
  std::vector<Tensor> params() const { return {W, b}; }
  // loss = mean((W x + b - y)^2) + 0.05 sum(W^4) + 0.1 (sum(b^2) - 1)^2  (as in the script)
  Tensor loss() const {
    static const Tensor x = tensor<double>({1.0, -0.5, 0.3, 0.7, 0.2, 0.9, -1.1, 0.4}, {2, 4}, ad());
    static const Tensor y =
        tensor<double>({0.3, -0.2, 0.5, 0.1, 1.0, 0.4, -0.3, 0.2, -0.5, 0.6, 0.2, -0.4}, {3, 4}, ad());
    Tensor r = matmul(W, x) + b.unsqueeze(1) - y;
    Tensor bb = (b * b).sum() - 1.0;
    return (r * r).mean() + (W * W * W * W).sum() * 0.05 + bb * bb * 0.1;
  }
  std::vector<double> values() const {
    auto v = W.detach().to_vector<double>();
    auto vb = b.detach().to_vector<double>();
    v.insert(v.end(), vb.begin(), vb.end());
    return v;
  }
};

std::map<std::string, std::vector<std::vector<double>>> read_trajectories() {
  std::ifstream in(std::string(KILN_GOLDEN_DIR) + "/optim_trajectories.txt");
  std::map<std::string, std::vector<std::vector<double>>> r;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string name;
    int step;
    ss >> name >> step;
    std::vector<double> v;
    double x;
    while (ss >> x) v.push_back(x);
    r[name].push_back(v);
  }
  return r;
}

std::unique_ptr<o::Optimizer> make(const std::string& name, const Problem& p) {
  auto ps = p.params();
  if (name == "sgd") return std::make_unique<o::SGD>(ps, o::SGDConfig{.lr = 0.05});
  if (name == "sgd_momentum")
    return std::make_unique<o::SGD>(ps,
                                    o::SGDConfig{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  if (name == "sgd_nesterov")
    return std::make_unique<o::SGD>(ps,
                                    o::SGDConfig{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  if (name == "sgd_maximize")
    return std::make_unique<o::SGD>(ps, o::SGDConfig{.lr = 0.01, .momentum = 0.5, .maximize = true});
  if (name == "sgd_groups")
    return std::make_unique<o::SGD>(
        std::vector<o::ParamGroup>{{.params = {p.W}}, {.params = {p.b}, .lr = 0.1, .weight_decay = 0.05}},
        o::SGDConfig{.lr = 0.05, .momentum = 0.9});
  if (name == "adam") return std::make_unique<o::Adam>(ps, o::AdamConfig{.lr = 0.05});
  if (name == "adam_wd_amsgrad")
    return std::make_unique<o::Adam>(ps, o::AdamConfig{.lr = 0.05, .weight_decay = 0.1, .amsgrad = true});
  if (name == "adamw") return std::make_unique<o::AdamW>(ps, o::AdamWConfig{.lr = 0.05, .weight_decay = 0.1});
  if (name == "adamw_amsgrad_max")
    return std::make_unique<o::AdamW>(
        ps, o::AdamWConfig{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true, .maximize = true});
  if (name == "adagrad")
    return std::make_unique<o::Adagrad>(
        ps, o::AdagradConfig{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.01, .initial_accumulator_value = 0.1});
  if (name == "adadelta") return std::make_unique<o::Adadelta>(ps, o::AdadeltaConfig{.lr = 1.0, .weight_decay = 0.01});
  if (name == "rmsprop") return std::make_unique<o::RMSprop>(ps, o::RMSpropConfig{.lr = 0.01});
  if (name == "rmsprop_centered_momentum")
    return std::make_unique<o::RMSprop>(
        ps, o::RMSpropConfig{.lr = 0.01, .weight_decay = 0.01, .momentum = 0.9, .centered = true});
  if (name == "adan") return std::make_unique<o::Adan>(ps, o::AdanConfig{.lr = 0.05, .weight_decay = 0.02});
  if (name == "adan_noprox")
    return std::make_unique<o::Adan>(ps, o::AdanConfig{.lr = 0.05, .weight_decay = 0.02, .no_prox = true});
  if (name == "lion") return std::make_unique<o::Lion>(ps, o::LionConfig{.lr = 0.01, .weight_decay = 0.1});
  if (name == "muon") return std::make_unique<o::Muon>(ps, o::MuonConfig{.lr = 0.05, .weight_decay = 0.1});
  // Parameter groups: W takes the defaults, b its own lr and weight decay.
  auto groups = [&](double b_lr, double b_wd) {
    return std::vector<o::ParamGroup>{{.params = {p.W}}, {.params = {p.b}, .lr = b_lr, .weight_decay = b_wd}};
  };
  if (name == "adam_groups")
    return std::make_unique<o::Adam>(groups(0.02, 0.1), o::AdamConfig{.lr = 0.05, .weight_decay = 0.01});
  if (name == "adamw_groups")
    return std::make_unique<o::AdamW>(groups(0.02, 0.3), o::AdamWConfig{.lr = 0.05, .weight_decay = 0.1});
  if (name == "adagrad_groups")
    return std::make_unique<o::Adagrad>(groups(0.3, 0.05),
                                        o::AdagradConfig{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.01});
  if (name == "adadelta_groups")
    return std::make_unique<o::Adadelta>(groups(0.5, 0.05), o::AdadeltaConfig{.lr = 1.0, .weight_decay = 0.01});
  if (name == "rmsprop_groups")
    return std::make_unique<o::RMSprop>(groups(0.03, 0.05), o::RMSpropConfig{.lr = 0.01, .momentum = 0.9});
  if (name == "adan_groups")
    return std::make_unique<o::Adan>(groups(0.01, 0.1), o::AdanConfig{.lr = 0.05, .weight_decay = 0.02});
  if (name == "lion_groups")
    return std::make_unique<o::Lion>(groups(0.03, 0.0), o::LionConfig{.lr = 0.01, .weight_decay = 0.1});
  if (name == "muon_groups")
    return std::make_unique<o::Muon>(groups(0.02, 0.3), o::MuonConfig{.lr = 0.05, .weight_decay = 0.1});
  if (name == "sgd_groups_steplr")
    return std::make_unique<o::SGD>(groups(0.2, 0.05), o::SGDConfig{.lr = 0.05, .momentum = 0.9});
  if (name == "adam_groups_cosine") return std::make_unique<o::Adam>(groups(0.02, 0.1), o::AdamConfig{.lr = 0.05});
  if (name == "lbfgs") return std::make_unique<o::LBFGS>(ps, o::LBFGSConfig{.lr = 0.5, .max_iter = 3});
  if (name == "lbfgs_wolfe")
    return std::make_unique<o::LBFGS>(ps, o::LBFGSConfig{.lr = 1, .max_iter = 3, .line_search_fn = "strong_wolfe"});
  return nullptr;
}

// The scheduler stepped after every optimizer step in the cases that have one (as the script).
std::unique_ptr<o::lr_scheduler::LRScheduler> make_scheduler(const std::string& name, o::Optimizer& opt) {
  if (name == "sgd_groups_steplr") return std::make_unique<o::lr_scheduler::StepLR>(opt, 5, 0.5);
  if (name == "adam_groups_cosine") return std::make_unique<o::lr_scheduler::CosineAnnealingLR>(opt, 10, 0.001);
  return nullptr;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rtol * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

}  // namespace

TEST(Optim, TrajectoriesMatchPyTorch) {
  auto golden = read_trajectories();
  ASSERT_GE(golden.size(), 29u) << "run scripts/gen_optim_golden.py";
  for (auto& [name, traj] : golden) {
    Problem p;
    auto opt = make(name, p);
    ASSERT_TRUE(opt) << "no optimizer for case " << name;
    auto* lbfgs = dynamic_cast<o::LBFGS*>(opt.get());
    auto sched = make_scheduler(name, *opt);
    for (size_t k = 0; k < traj.size(); ++k) {
      if (lbfgs) {
        lbfgs->step([&] {
          Tensor l = p.loss();
          return std::make_pair(l, l.backward());
        });
      } else {
        opt->step(p.loss().backward());
      }
      if (sched) sched->step();
      expect_close(p.values(), traj[k], 1e-5, name + " step " + std::to_string(k));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(Optim, SkipsParametersWithoutGradient) {
  Problem p;
  Tensor extra = tensor<double>({1.0, 2.0}, {2}, ad()).require_grad();
  o::Adam opt({p.W, p.b, extra}, {.lr = 0.1});
  opt.step(p.loss().backward());
  EXPECT_EQ(extra.detach().to_vector<double>(), (std::vector<double>{1.0, 2.0}));
  EXPECT_NE(p.W.detach().to_vector<double>()[0], 0.5);
}

TEST(Optim, UpdatesModuleParametersInPlace) {
  nn::Linear lin({.in_features = 3, .out_features = 2, .dtype = f64}, ad());
  auto before = lin.weight.detach().to_vector<double>();
  o::SGD opt(lin.parameters(), {.lr = 0.1});
  Tensor x = tensor<double>({1, 2, 3}, {1, 3}, ad());
  opt.step(lin(x).sum().backward());
  auto after = lin.weight.detach().to_vector<double>();
  // d(sum(W x + b))/dW = x for each output row.
  for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], before[i] - 0.1 * (1.0 + (i % 3)), 1e-12);
}

TEST(Optim, ClippingMatchesPyTorch) {
  std::ifstream in(std::string(KILN_GOLDEN_DIR) + "/optim_clip.txt");
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string kind;
    ss >> kind;
    Problem p;
    Gradients g = p.loss().backward();
    std::vector<double> want;
    double x;
    if (kind == "clip") {
      double nt, max_norm, total;
      ss >> nt >> max_norm >> total;
      while (ss >> x) want.push_back(x);
      double got = o::clip_grad_norm_(g, p.params(), max_norm, nt < 0 ? INFINITY : nt);
      EXPECT_NEAR(got, total, 1e-10 * total) << line;
    } else {
      double v;
      ss >> v;
      while (ss >> x) want.push_back(x);
      o::clip_grad_value_(g, p.params(), v);
    }
    auto gv = p.W.grad(g).to_vector<double>();
    auto gb = p.b.grad(g).to_vector<double>();
    gv.insert(gv.end(), gb.begin(), gb.end());
    expect_close(gv, want, 1e-10, line.substr(0, 20));
    ++cases;
  }
  EXPECT_EQ(cases, 6);
  Problem p;
  Gradients g = p.loss().backward();
  o::set_grad(g, p.W, full_like(p.W.detach(), NAN));
  EXPECT_THROW(o::clip_grad_norm_(g, p.params(), 1.0, 2.0, true), Error);
}

TEST(Optim, GradientsAccumulatorSums) {
  Problem p;
  o::GradientsAccumulator acc(p.params());
  Gradients g1 = p.loss().backward();
  acc.add(g1);
  acc.add(p.loss().backward());
  EXPECT_EQ(acc.count(), 2);
  Gradients avg = acc.gradients(0.5);
  EXPECT_TRUE(allclose(p.W.grad(avg), p.W.grad(g1), 1e-12, 1e-14));
  Gradients sum = acc.gradients();
  EXPECT_TRUE(allclose(p.b.grad(sum), p.b.grad(g1) * 2.0, 1e-12, 1e-14));
  acc.reset();
  EXPECT_EQ(acc.gradients().size(), 0u);
}

TEST(Optim, StateDictResumesIdentically) {
  for (const std::string name :
       {"adam_wd_amsgrad", "sgd_momentum", "rmsprop_centered_momentum", "adan", "muon", "adagrad", "lbfgs_wolfe"}) {
    auto run = [&](Problem& p, o::Optimizer& opt, int n) {
      for (int i = 0; i < n; ++i) {
        if (auto* l = dynamic_cast<o::LBFGS*>(&opt))
          l->step([&] {
            Tensor loss = p.loss();
            return std::make_pair(loss, loss.backward());
          });
        else
          opt.step(p.loss().backward());
      }
    };
    Problem a;
    auto oa = make(name, a);
    run(a, *oa, 10);
    o::StateDict sd = oa->state_dict();
    // A fresh problem and optimizer at a's parameter values, loaded with a's state.
    Problem b;
    {
      NoGradGuard ng;
      b.W.detach().copy_(a.W.detach());
      b.b.detach().copy_(a.b.detach());
    }
    auto ob = make(name, b);
    ob->load_state_dict(sd);
    run(a, *oa, 5);
    run(b, *ob, 5);
    EXPECT_EQ(a.values(), b.values()) << name;
  }
}

TEST(Optim, StateDictNamesAndGroups) {
  Problem p;
  o::Adam opt(p.params(), {.lr = 0.1});
  opt.step(p.loss().backward());
  auto sd = opt.state_dict();
  ASSERT_NE(sd.tensor("state.0.exp_avg"), nullptr);
  ASSERT_NE(sd.tensor("state.1.exp_avg_sq"), nullptr);
  ASSERT_NE(sd.scalar("state.1.step"), nullptr);
  EXPECT_EQ(*sd.scalar("state.1.step"), 1.0);
  EXPECT_EQ(*sd.scalar("param_groups.0.lr"), 0.1);
  o::Adam other(p.params(), {.lr = 0.5});
  other.load_state_dict(sd);
  EXPECT_EQ(other.lr(), 0.1);
  o::StateDict bad;
  bad.tensors.emplace_back("state.7.exp_avg", zeros({1}));
  EXPECT_THROW(other.load_state_dict(bad), Error);
}

TEST(Optim, BadOptionsThrow) {
  Problem p;
  EXPECT_THROW(o::SGD(p.params(), {.lr = 0.1, .nesterov = true}), Error);
  EXPECT_THROW(o::LBFGS(p.params(), {.line_search_fn = "armijo"}), Error);
  o::LBFGS l(p.params());
  EXPECT_THROW(l.step(p.loss().backward()), Error);
  EXPECT_THROW(o::zeropower_via_newtonschulz(zeros({2, 2, 2})), Error);
}

TEST(Optim, NewtonSchulzIsNearlyOrthogonal) {
  Tensor G = tensor<double>({3, 1, 0.5, -1, 2, 0.3}, {2, 3});
  Tensor X = o::zeropower_via_newtonschulz(G);
  auto v = matmul(X, X.t()).to_vector<double>();
  // Singular values end up in roughly [0.5, 1.5] (the quintic does not converge to exactly 1).
  EXPECT_GT(v[0], 0.3);
  EXPECT_LT(v[0], 2.0);
  EXPECT_LT(std::abs(v[1]), 0.5);
}
