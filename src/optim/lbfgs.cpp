// SPDX-License-Identifier: MIT OR Apache-2.0
// L-BFGS with the strong-Wolfe line search: a port of torch/optim/lbfgs.py working on host f64
// vectors (the flattened parameters / gradients).
#include <algorithm>
#include <cmath>
#include <tuple>

#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/optim/optimizer.h"

namespace kiln::optim {

namespace {

using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
double abs_max(const Vec& a) {
  double m = 0;
  for (double v : a) m = std::max(m, std::abs(v));
  return m;
}
double abs_sum(const Vec& a) {
  double m = 0;
  for (double v : a) m += std::abs(v);
  return m;
}

double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                         std::optional<std::pair<double, double>> bounds = {}) {
  double lo, hi;
  if (bounds) {
    lo = bounds->first;
    hi = bounds->second;
  } else {
    lo = std::min(x1, x2);
    hi = std::max(x1, x2);
    if (x1 <= x2) lo = x1, hi = x2;
  }
  double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  double d2_square = d1 * d1 - g1 * g2;
  if (d2_square >= 0) {
    double d2 = std::sqrt(d2_square);
    double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                              : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
    return std::min(std::max(min_pos, lo), hi);
  }
  return (lo + hi) / 2.0;
}

struct LSResult {
  double f;
  Vec g;
  double t;
  int64_t evals;
};

// torch's _strong_wolfe. obj(t) evaluates (loss, flat grad) at x + t d.
LSResult strong_wolfe(const std::function<std::pair<double, Vec>(double)>& obj, double t, const Vec& d, double f,
                      const Vec& g, double gtd, double c1, double c2, double tolerance_change, int64_t max_ls) {
  double d_norm = abs_max(d);
  double f_new;
  Vec g_new;
  std::tie(f_new, g_new) = obj(t);
  int64_t evals = 1;
  double gtd_new = dot(g_new, d);
  double t_prev = 0, f_prev = f, gtd_prev = gtd;
  Vec g_prev = g;
  bool done = false;
  int64_t ls_iter = 0;
  std::vector<double> bracket, bracket_f, bracket_gtd;
  std::vector<Vec> bracket_g;
  while (ls_iter < max_ls) {
    if (f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev)) {
      bracket = {t_prev, t};
      bracket_f = {f_prev, f_new};
      bracket_g = {g_prev, g_new};
      bracket_gtd = {gtd_prev, gtd_new};
      break;
    }
    if (std::abs(gtd_new) <= -c2 * gtd) {
      bracket = {t};
      bracket_f = {f_new};
      bracket_g = {g_new};
      done = true;
      break;
    }
    if (gtd_new >= 0) {
      bracket = {t_prev, t};
      bracket_f = {f_prev, f_new};
      bracket_g = {g_prev, g_new};
      bracket_gtd = {gtd_prev, gtd_new};
      break;
    }
    double min_step = t + 0.01 * (t - t_prev), max_step = t * 10, tmp = t;
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, std::make_pair(min_step, max_step));
    t_prev = tmp;
    f_prev = f_new;
    g_prev = g_new;
    gtd_prev = gtd_new;
    std::tie(f_new, g_new) = obj(t);
    evals += 1;
    gtd_new = dot(g_new, d);
    ls_iter += 1;
  }
  if (ls_iter == max_ls) {
    bracket = {0, t};
    bracket_f = {f, f_new};
    bracket_g = {g, g_new};
    // torch leaves bracket_gtd as it was here; keep two entries so the zoom phase can index it.
    if (bracket_gtd.size() < 2) bracket_gtd = {gtd, gtd_new};
  }
  bool insuf_progress = false;
  size_t low = bracket_f.front() <= bracket_f.back() ? 0 : 1, high = 1 - low;
  if (bracket.size() == 1) low = 0;
  while (!done && ls_iter < max_ls) {
    if (std::abs(bracket[1] - bracket[0]) * d_norm < tolerance_change) break;
    t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]);
    double bmax = std::max(bracket[0], bracket[1]), bmin = std::min(bracket[0], bracket[1]);
    double eps = 0.1 * (bmax - bmin);
    if (std::min(bmax - t, t - bmin) < eps) {
      if (insuf_progress || t >= bmax || t <= bmin) {
        t = std::abs(t - bmax) < std::abs(t - bmin) ? bmax - eps : bmin + eps;
        insuf_progress = false;
      } else {
        insuf_progress = true;
      }
    } else {
      insuf_progress = false;
    }
    std::tie(f_new, g_new) = obj(t);
    evals += 1;
    gtd_new = dot(g_new, d);
    ls_iter += 1;
    if (f_new > f + c1 * t * gtd || f_new >= bracket_f[low]) {
      bracket[high] = t;
      bracket_f[high] = f_new;
      bracket_g[high] = g_new;
      bracket_gtd[high] = gtd_new;
      low = bracket_f[0] <= bracket_f[1] ? 0 : 1;
      high = 1 - low;
    } else {
      if (std::abs(gtd_new) <= -c2 * gtd) {
        done = true;
      } else if (gtd_new * (bracket[high] - bracket[low]) >= 0) {
        bracket[high] = bracket[low];
        bracket_f[high] = bracket_f[low];
        bracket_g[high] = bracket_g[low];
        bracket_gtd[high] = bracket_gtd[low];
      }
      bracket[low] = t;
      bracket_f[low] = f_new;
      bracket_g[low] = g_new;
      bracket_gtd[low] = gtd_new;
    }
  }
  return {bracket_f[low], bracket_g[low], bracket[low], evals};
}

}  // namespace

LBFGS::LBFGS(std::vector<Tensor> params, const LBFGSConfig& c)
    : Optimizer(one_group(std::move(params)), c.lr, 0), config(c) {
  // torch.optim.LBFGS checks the learning rate; the counts and tolerances are checked too, as
  // a negative one would make the loop or the history meaningless (Note [Optimizer settings]).
  KILN_CHECK(c.lr >= 0, "LBFGS", "invalid learning rate: " << c.lr << " (must be >= 0)");
  KILN_CHECK(c.max_iter > 0 && c.history_size > 0, "LBFGS",
             "max_iter and history_size must be positive, got " << c.max_iter << " and " << c.history_size);
  KILN_CHECK(c.tolerance_grad >= 0 && c.tolerance_change >= 0, "LBFGS",
             "tolerances must be >= 0, got " << c.tolerance_grad << " and " << c.tolerance_change);
  if (config.max_eval < 0) config.max_eval = config.max_iter * 5 / 4;
  KILN_CHECK(config.line_search_fn.empty() || config.line_search_fn == "strong_wolfe", "LBFGS",
             "LBFGS: line_search_fn must be \"\" or \"strong_wolfe\", got '" << config.line_search_fn << "'");
}

void LBFGS::step(const Gradients&) {
  KILN_CHECK(false, "LBFGS", "LBFGS::step needs a closure returning (loss, gradients)");
}

std::vector<double> LBFGS::flat_grad(const Gradients& grads) const {
  Vec r;
  for (auto& p : groups_[0].params) {
    Tensor g = p.grad(grads);
    if (g.defined()) {
      auto v = g.detach().to_vector<double>();
      r.insert(r.end(), v.begin(), v.end());
    } else {
      r.insert(r.end(), static_cast<size_t>(p.numel()), 0.0);
    }
  }
  if (config.maximize)
    for (double& v : r) v = -v;
  return r;
}

void LBFGS::add_to_params(double t, const std::vector<double>& d) {
  NoGradGuard guard;
  size_t off = 0;
  for (auto& p : groups_[0].params) {
    size_t n = static_cast<size_t>(p.numel());
    Vec slice(d.begin() + static_cast<std::ptrdiff_t>(off), d.begin() + static_cast<std::ptrdiff_t>(off + n));
    Tensor upd = tensor(slice, p.shape(), Device::cpu()).to(p.device(), p.dtype());
    Tensor data = p.detach();
    data.add_(upd, t);
    off += n;
  }
}

Tensor LBFGS::step(const Closure& closure) {
  auto& params = groups_[0].params;
  double lr = *groups_[0].lr;
  auto evaluate = [&]() -> std::pair<Tensor, Vec> {
    auto [loss, grads] = closure();
    return {loss, flat_grad(grads)};
  };
  auto to_double = [&](const Tensor& l) {
    double v = l.detach().to(f64).item<double>();
    return config.maximize ? -v : v;
  };
  auto [orig_loss, g0] = evaluate();
  double loss = to_double(orig_loss);
  Vec flat = std::move(g0);
  int64_t current_evals = 1;
  func_evals_ += 1;
  if (params.empty() || abs_max(flat) <= config.tolerance_grad) return orig_loss;

  int64_t n_iter = 0;
  while (n_iter < config.max_iter) {
    ++n_iter;
    ++n_iter_;
    if (n_iter_ == 1) {
      d_.resize(flat.size());
      for (size_t i = 0; i < flat.size(); ++i) d_[i] = -flat[i];
      old_dirs_.clear();
      old_stps_.clear();
      ro_.clear();
      h_diag_ = 1;
    } else {
      Vec y(flat.size()), s(flat.size());
      for (size_t i = 0; i < flat.size(); ++i) y[i] = flat[i] - prev_flat_grad_[i], s[i] = d_[i] * t_;
      double ys = dot(y, s);
      if (ys > 1e-10) {
        if (static_cast<int64_t>(old_dirs_.size()) == config.history_size) {
          old_dirs_.erase(old_dirs_.begin());
          old_stps_.erase(old_stps_.begin());
          ro_.erase(ro_.begin());
        }
        old_dirs_.push_back(y);
        old_stps_.push_back(s);
        ro_.push_back(1.0 / ys);
        h_diag_ = ys / dot(y, y);
      }
      size_t num_old = old_dirs_.size();
      Vec al(num_old);
      Vec q(flat.size());
      for (size_t i = 0; i < flat.size(); ++i) q[i] = -flat[i];
      for (size_t i = num_old; i-- > 0;) {
        al[i] = dot(old_stps_[i], q) * ro_[i];
        for (size_t j = 0; j < q.size(); ++j) q[j] -= al[i] * old_dirs_[i][j];
      }
      for (double& v : q) v *= h_diag_;
      for (size_t i = 0; i < num_old; ++i) {
        double be_i = dot(old_dirs_[i], q) * ro_[i];
        for (size_t j = 0; j < q.size(); ++j) q[j] += (al[i] - be_i) * old_stps_[i][j];
      }
      d_ = std::move(q);
    }
    prev_flat_grad_ = flat;
    prev_loss_ = loss;
    t_ = n_iter_ == 1 ? std::min(1.0, 1.0 / abs_sum(flat)) * lr : lr;
    double gtd = dot(flat, d_);
    if (gtd > -config.tolerance_change) break;

    int64_t ls_evals = 0;
    bool opt_cond = false;
    if (!config.line_search_fn.empty()) {
      std::vector<Tensor> x_init;
      {
        NoGradGuard guard;
        for (auto& p : params) x_init.push_back(p.detach().clone());
      }
      auto obj = [&](double t) -> std::pair<double, Vec> {
        add_to_params(t, d_);
        auto [l, g] = evaluate();
        double lv = to_double(l);
        NoGradGuard guard;
        for (size_t i = 0; i < params.size(); ++i) params[i].detach().copy_(x_init[i]);
        return {lv, g};
      };
      LSResult r = strong_wolfe(obj, t_, d_, loss, flat, gtd, 1e-4, 0.9, config.tolerance_change,
                                config.max_eval - current_evals);
      loss = r.f;
      flat = std::move(r.g);
      t_ = r.t;
      ls_evals = r.evals;
      add_to_params(t_, d_);
      opt_cond = abs_max(flat) <= config.tolerance_grad;
    } else {
      add_to_params(t_, d_);
      if (n_iter != config.max_iter) {
        auto [l, g] = evaluate();
        loss = to_double(l);
        flat = std::move(g);
        opt_cond = abs_max(flat) <= config.tolerance_grad;
        ls_evals = 1;
      }
    }
    current_evals += ls_evals;
    func_evals_ += ls_evals;
    if (n_iter == config.max_iter) break;
    if (current_evals >= config.max_eval) break;
    if (opt_cond) break;
    if (abs_max(d_) * std::abs(t_) <= config.tolerance_change) break;
    if (std::abs(loss - prev_loss_) < config.tolerance_change) break;
  }
  return orig_loss;
}

StateDict LBFGS::state_dict() const {
  StateDict sd = Optimizer::state_dict();
  auto vec = [](const Vec& v) { return tensor(v, {static_cast<int64_t>(v.size())}, Device::cpu()); };
  if (!d_.empty()) sd.tensors.emplace_back("state.0.d", vec(d_));
  if (!prev_flat_grad_.empty()) sd.tensors.emplace_back("state.0.prev_flat_grad", vec(prev_flat_grad_));
  for (size_t i = 0; i < old_dirs_.size(); ++i) {
    sd.tensors.emplace_back("state.0.old_dirs." + std::to_string(i), vec(old_dirs_[i]));
    sd.tensors.emplace_back("state.0.old_stps." + std::to_string(i), vec(old_stps_[i]));
  }
  if (!ro_.empty()) sd.tensors.emplace_back("state.0.ro", vec(ro_));
  sd.scalars.emplace_back("state.0.t", t_);
  sd.scalars.emplace_back("state.0.H_diag", h_diag_);
  sd.scalars.emplace_back("state.0.prev_loss", prev_loss_);
  sd.scalars.emplace_back("state.0.n_iter", static_cast<double>(n_iter_));
  sd.scalars.emplace_back("state.0.func_evals", static_cast<double>(func_evals_));
  return sd;
}

void LBFGS::load_state_dict(const StateDict& sd) {
  Optimizer::load_state_dict(sd);
  for (auto& s : state_) s = ParamState{};  // LBFGS keeps its state in the members below
  auto vec = [&](const std::string& n) {
    const Tensor* t = sd.tensor(n);
    return t ? t->to_vector<double>() : Vec{};
  };
  auto num = [&](const std::string& n, double dflt) {
    const double* v = sd.scalar(n);
    return v ? *v : dflt;
  };
  d_ = vec("state.0.d");
  prev_flat_grad_ = vec("state.0.prev_flat_grad");
  ro_ = vec("state.0.ro");
  old_dirs_.clear();
  old_stps_.clear();
  for (size_t i = 0; i < ro_.size(); ++i) {
    old_dirs_.push_back(vec("state.0.old_dirs." + std::to_string(i)));
    old_stps_.push_back(vec("state.0.old_stps." + std::to_string(i)));
  }
  t_ = num("state.0.t", 0);
  h_diag_ = num("state.0.H_diag", 1);
  prev_loss_ = num("state.0.prev_loss", 0);
  n_iter_ = static_cast<int64_t>(num("state.0.n_iter", 0));
  func_evals_ = static_cast<int64_t>(num("state.0.func_evals", 0));
}

}  // namespace kiln::optim
