// SPDX-License-Identifier: MIT OR Apache-2.0
// System-level autodiff tests: whole graphs (MLP, conv net, attention, layer norm, a gradient
// penalty step, a Hessian-vector product) against PyTorch autograd (tests/golden/grad_*.bin,
// written by scripts/gen_grad_golden.py), graph semantics edge cases, memory (no growth over
// training steps, saved buffers released by backward) and gradient checkpointing.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "test_paths.h"
#include "test_util.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

Device ad() { return Device::cpu().autodiff(); }

// ---- reference data (format: scripts/gen_grad_golden.py) -----------------------------------

/// u_i in [0, 1): the same integer hash as splitmix_uniform in gen_grad_golden.py.
std::vector<double> gen_uniform(uint64_t seed, int64_t n) {
  std::vector<double> u(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = seed + static_cast<uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    u[static_cast<size_t>(i)] = static_cast<double>(z >> 11) * 0x1.0p-53;
  }
  return u;
}

struct Entry {
  uint8_t kind = 0;
  Shape shape;
  uint64_t seed = 0;
  double scale = 1, offset = 0;
  std::vector<int64_t> ints;
  std::vector<double> values;
  int64_t step = 1;
  double sum = 0, sumsq = 0;
};

class Golden {
 public:
  explicit Golden(const std::string& name) {
    const std::string path = std::string(KILN_GOLDEN_DIR) + "/grad_" + name + ".bin";
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path + " (run scripts/gen_grad_golden.py)");
    std::stringstream ss;
    ss << f.rdbuf();
    data_ = ss.str();
    std::string magic = bytes(7);
    if (magic != "KGRAD1\n") throw std::runtime_error("bad magic in " + path);
    const uint32_t n = get<uint32_t>();
    for (uint32_t i = 0; i < n; ++i) {
      std::string key = bytes(get<uint32_t>());
      Entry e;
      e.kind = get<uint8_t>();
      const uint8_t nd = get<uint8_t>();
      for (uint8_t d = 0; d < nd; ++d) e.shape.push_back(get<int64_t>());
      const int64_t numel = shape_numel(e.shape);
      if (e.kind == 0) {
        e.seed = get<uint64_t>();
        e.scale = get<double>();
        e.offset = get<double>();
      } else if (e.kind == 1) {
        for (int64_t j = 0; j < numel; ++j) e.ints.push_back(get<int64_t>());
      } else if (e.kind == 2) {
        for (int64_t j = 0; j < numel; ++j) e.values.push_back(get<double>());
      } else if (e.kind == 3) {
        e.step = get<int64_t>();
        e.sum = get<double>();
        e.sumsq = get<double>();
        for (int64_t j = 0; j < numel; j += e.step) e.values.push_back(get<double>());
      } else {
        throw std::runtime_error("bad entry kind in " + path);
      }
      entries_[key] = std::move(e);
    }
  }

  const Entry& at(const std::string& k) const {
    auto it = entries_.find(k);
    if (it == entries_.end()) throw std::runtime_error("golden entry missing: " + k);
    return it->second;
  }

  /// A generated f64 input on `dev` (a leaf that requires grad when `grad`).
  Tensor input(const std::string& k, bool grad, const Device& dev = ad()) const {
    const Entry& e = at(k);
    std::vector<double> v = gen_uniform(e.seed, shape_numel(e.shape));
    for (double& x : v) x = e.offset + e.scale * (2 * x - 1);
    Tensor t = tensor(v, e.shape, dev);
    return grad ? t.require_grad() : t;
  }

  Tensor labels(const std::string& k, const Device& dev = ad()) const {
    const Entry& e = at(k);
    return tensor(e.ints, e.shape, dev);
  }

  /// Compares t with PyTorch's values of entry k; returns "" or the first mismatch.
  std::string check(const std::string& k, const Tensor& t, double rtol = 1e-9, double atol = 1e-11) const {
    const Entry& e = at(k);
    std::ostringstream err;
    if (!t.defined()) return k + ": undefined";
    if (t.shape() != e.shape) {
      err << k << ": shape " << to_string(t.shape()) << ", expected " << to_string(e.shape);
      return err.str();
    }
    std::vector<double> v = t.to(f64).contiguous().to_vector<double>();
    double amax = 0;
    for (double x : e.values) amax = std::max(amax, std::abs(x));
    const double tol_abs = atol + rtol * amax;  // cancellation in sums: scale by the largest value
    auto close = [&](double got, double want) { return std::abs(got - want) <= tol_abs + rtol * std::abs(want); };
    for (size_t i = 0; i < e.values.size(); ++i) {
      const size_t j = i * static_cast<size_t>(e.step);
      if (!close(v[j], e.values[i])) {
        err << k << " element " << j << ": kiln " << v[j] << ", torch " << e.values[i];
        return err.str();
      }
    }
    if (e.kind == 3) {
      double s = 0, s2 = 0;
      for (double x : v) {
        s += x;
        s2 += x * x;
      }
      if (std::abs(s - e.sum) > 1e-7 * (1 + std::abs(e.sumsq)) || std::abs(s2 - e.sumsq) > 1e-8 * e.sumsq) {
        err << k << ": sum " << s << " / sum of squares " << s2 << ", torch " << e.sum << " / " << e.sumsq;
        return err.str();
      }
    }
    return "";
  }

 private:
  template <class T>
  T get() {
    if (pos_ + sizeof(T) > data_.size()) throw std::runtime_error("truncated golden file");
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string bytes(size_t n) {
    if (pos_ + n > data_.size()) throw std::runtime_error("truncated golden file");
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string data_;
  size_t pos_ = 0;
  std::map<std::string, Entry> entries_;
};

/// -mean(log_softmax(logits)[i, labels[i]]), as torch.nn.functional.cross_entropy.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  return -logits.log_softmax(-1).gather(1, labels.unsqueeze(1)).mean();
}

}  // namespace

// ---- graphs against PyTorch -------------------------------------------------------------------

TEST(AutodiffGraphs, MlpMatchesPyTorch) {
  Golden g("mlp");
  Tensor x = g.input("x", false), y = g.labels("y");
  Tensor w1 = g.input("W1", true), b1 = g.input("b1", true), w2 = g.input("W2", true), b2 = g.input("b2", true);
  Tensor loss = cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), y);
  Gradients gr = loss.backward();
  EXPECT_EQ(g.check("loss", loss), "");
  EXPECT_EQ(g.check("grad/W1", w1.grad(gr)), "");
  EXPECT_EQ(g.check("grad/b1", b1.grad(gr)), "");
  EXPECT_EQ(g.check("grad/W2", w2.grad(gr)), "");
  EXPECT_EQ(g.check("grad/b2", b2.grad(gr)), "");
  EXPECT_FALSE(x.grad(gr).defined());  // x does not require grad
}

TEST(AutodiffGraphs, ConvNetMatchesPyTorch) {
  Golden g("convnet");
  Tensor x = g.input("x", true), y = g.labels("y");
  Tensor cw = g.input("conv_w", true), cb = g.input("conv_b", true);
  Tensor lw = g.input("fc_w", true), lb = g.input("fc_b", true);
  Tensor h = F::max_pool2d(relu(F::conv2d(x, cw, cb)), {2});
  Tensor loss = cross_entropy(linear(h.flatten(1), lw, lb), y);
  Gradients gr = loss.backward();
  EXPECT_EQ(g.check("loss", loss), "");
  EXPECT_EQ(g.check("grad/x", x.grad(gr)), "");
  EXPECT_EQ(g.check("grad/conv_w", cw.grad(gr)), "");
  EXPECT_EQ(g.check("grad/conv_b", cb.grad(gr)), "");
  EXPECT_EQ(g.check("grad/fc_w", lw.grad(gr)), "");
  EXPECT_EQ(g.check("grad/fc_b", lb.grad(gr)), "");
}

TEST(AutodiffGraphs, AttentionMatchesPyTorch) {
  Golden g("attention");
  const int64_t B = 2, L = 6, D = 16, H = 2;
  Tensor x = g.input("x", true), t = g.input("target", false);
  Tensor wq = g.input("Wq", true), wk = g.input("Wk", true), wv = g.input("Wv", true);
  Tensor wo = g.input("Wo", true), bo = g.input("bo", true);
  auto heads = [&](const Tensor& z) { return z.reshape({B, L, H, D / H}).transpose(1, 2); };
  Tensor a = F::scaled_dot_product_attention(heads(linear(x, wq)), heads(linear(x, wk)), heads(linear(x, wv)),
                                             {.is_causal = true});
  Tensor out = linear(a.transpose(1, 2).reshape({B, L, D}), wo, bo);
  Tensor loss = (out * t).sum();
  Gradients gr = loss.backward();
  EXPECT_EQ(g.check("loss", loss), "");
  for (auto& [name, p] : std::vector<std::pair<std::string, Tensor>>{
           {"x", x}, {"Wq", wq}, {"Wk", wk}, {"Wv", wv}, {"Wo", wo}, {"bo", bo}})
    EXPECT_EQ(g.check("grad/" + name, p.grad(gr)), "");
}

TEST(AutodiffGraphs, LayerNormMatchesPyTorch) {
  Golden g("layer_norm");
  Tensor x = g.input("x", true), w = g.input("w", true), b = g.input("b", true), t = g.input("target", false);
  Tensor loss = (F::layer_norm(x, {3, 10}, w, b) * t).sum();
  Gradients gr = loss.backward();
  EXPECT_EQ(g.check("loss", loss), "");
  EXPECT_EQ(g.check("grad/x", x.grad(gr)), "");
  EXPECT_EQ(g.check("grad/w", w.grad(gr)), "");
  EXPECT_EQ(g.check("grad/b", b.grad(gr)), "");
}

TEST(AutodiffGraphs, GradientPenaltyMatchesPyTorch) {
  // loss = mean(D(x)) + 0.5 * sum(|dD/dx|^2), backward through the input gradient.
  Golden g("gradient_penalty");
  Tensor x = g.input("x", true);
  Tensor w1 = g.input("W1", true), b1 = g.input("b1", true), w2 = g.input("W2", true), b2 = g.input("b2", true);
  Tensor d = linear(tanh(linear(x, w1, b1)), w2, b2).mean();
  Tensor gx = x.grad(d.backward({.create_graph = true}));
  ASSERT_TRUE(gx.defined());
  EXPECT_TRUE(gx.requires_grad());
  EXPECT_EQ(g.check("grad_x", gx), "");
  Tensor loss = d + 0.5 * (gx * gx).sum();
  Gradients gr = loss.backward();
  EXPECT_EQ(g.check("loss", loss), "");
  EXPECT_EQ(g.check("grad/x", x.grad(gr)), "");
  EXPECT_EQ(g.check("grad/W1", w1.grad(gr)), "");
  EXPECT_EQ(g.check("grad/b1", b1.grad(gr)), "");
  EXPECT_EQ(g.check("grad/W2", w2.grad(gr)), "");
  EXPECT_EQ(g.check("grad/b2", b2.grad(gr)), "");
}

namespace {
/// The gradient of the cross-entropy MLP loss of the hvp case with respect to w1.
Tensor hvp_grad(const Golden& g, const Tensor& w1, bool create_graph) {
  Tensor x = g.input("x", false), y = g.labels("y"), w2 = g.input("W2", false);
  Tensor loss = cross_entropy(linear(tanh(linear(x, w1)), w2), y);
  return w1.grad(loss.backward({.create_graph = create_graph}));
}
}  // namespace

TEST(AutodiffGraphs, HessianVectorProductMatchesPyTorchAndFiniteDifferences) {
  Golden g("hvp");
  Tensor w1 = g.input("W1", true), v = g.input("v", false);
  Tensor gw = hvp_grad(g, w1, /*create_graph=*/true);
  EXPECT_EQ(g.check("grad/W1", gw), "");
  Tensor hv = w1.grad((gw * v).sum().backward());
  EXPECT_EQ(g.check("hvp/W1", hv), "");
  // Central differences of the gradient along v: (g(w + eps v) - g(w - eps v)) / (2 eps).
  const double eps = 1e-5;
  Tensor w = w1.detach();
  Tensor gp = hvp_grad(g, (w + eps * v).require_grad(), false);
  Tensor gm = hvp_grad(g, (w - eps * v).require_grad(), false);
  std::vector<double> fd = ((gp - gm) / (2 * eps)).to_vector<double>(), an = hv.to_vector<double>();
  ASSERT_EQ(fd.size(), an.size());
  for (size_t i = 0; i < fd.size(); ++i) EXPECT_NEAR(an[i], fd[i], 1e-7 + 1e-5 * std::abs(fd[i])) << i;
}

// ---- edge cases -------------------------------------------------------------------------------

TEST(AutodiffEdge, TensorUsedTwiceAccumulates) {
  Tensor x = tensor<double>({1, -2, 3}, {3}, ad()).require_grad();
  Gradients g = (x * x + x).sum().backward();  // 2x + 1
  EXPECT_EQ(x.grad(g).to_vector<double>(), (std::vector<double>{3, -3, 7}));
  // Two branches meeting later, and a tensor used on both sides of a matmul.
  Tensor m = tensor<double>({1, 2, 3, 4}, {2, 2}, ad()).require_grad();
  Gradients g2 = (matmul(m, m).sum() + m.exp().sum()).backward();
  // d/dm sum(m m) = 1 m^T + m^T 1 ; plus exp(m).
  Tensor md = m.detach();
  Tensor one = ones({2, 2}, {.dtype = f64, .device = ad()});
  Tensor want = matmul(one, md.transpose(0, 1)) + matmul(md.transpose(0, 1), one) + md.exp();
  EXPECT_TRUE(allclose(m.grad(g2), want));
}

TEST(AutodiffEdge, DetachInTheMiddle) {
  Tensor x = tensor<double>({1, 2, 3}, {3}, ad()).require_grad();
  Tensor y = x * 2;
  Tensor yd = y.detach();
  EXPECT_FALSE(yd.requires_grad());
  EXPECT_TRUE(yd.is_leaf());
  EXPECT_TRUE(yd.is_same_storage(y));
  Gradients g = (yd * x).sum().backward();  // no gradient flows through yd
  EXPECT_EQ(x.grad(g).to_vector<double>(), (std::vector<double>{2, 4, 6}));
  EXPECT_FALSE(yd.grad(g).defined());
  // A detached tensor can become a new leaf.
  Tensor z = y.detach().require_grad();
  Gradients g2 = (z * z).sum().backward();
  EXPECT_EQ(z.grad(g2).to_vector<double>(), (std::vector<double>{4, 8, 12}));
}

TEST(AutodiffEdge, NoGradGuardRecordsNothing) {
  Tensor x = tensor<float>({1, 2, 3}, {3}, ad()).require_grad();
  EXPECT_TRUE(grad_enabled());
  Tensor y;
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_enabled());
    y = (x * 2).exp().sum();
    {
      NoGradGuard nested;
      EXPECT_FALSE(grad_enabled());
    }
    EXPECT_FALSE(grad_enabled());
  }
  EXPECT_TRUE(grad_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
  EXPECT_ERROR(y.backward(), "does not require grad");
  EXPECT_TRUE(x.requires_grad());  // the leaf keeps its flag
  EXPECT_TRUE((x * 2).requires_grad());
}

TEST(AutodiffEdge, UnusedInputsHaveNoGradient) {
  Tensor a = tensor<float>({1, 2}, {2}, ad()).require_grad();
  Tensor b = tensor<float>({3, 4}, {2}, ad()).require_grad();
  Tensor c = tensor<float>({5, 6}, {2}, ad()).require_grad();
  Tensor unused = b * c;  // recorded but not part of the loss
  Gradients g = (a * a).sum().backward();
  EXPECT_TRUE(a.grad(g).defined());
  EXPECT_FALSE(b.grad(g).defined());
  EXPECT_FALSE(c.grad(g).defined());
  EXPECT_FALSE(unused.grad(g).defined());
  // An input whose contribution is multiplied away still gets a (zero) gradient, as in PyTorch.
  Gradients g2 = (a * 0 + b).sum().backward();
  EXPECT_EQ(a.grad(g2).to_vector<float>(), (std::vector<float>{0, 0}));
}

TEST(AutodiffEdge, IntegerTensorsNeverRequireGrad) {
  Tensor i = tensor<int64_t>({1, 2, 3}, {3}, ad());
  EXPECT_ERROR(i.require_grad(), "floating-point");
  EXPECT_ERROR(tensor<bool>({true, false}, {2}, ad()).require_grad(), "floating-point");
  EXPECT_FALSE(i.requires_grad());
  Tensor x = tensor<float>({1, -2, 3}, {3}, ad()).require_grad();
  EXPECT_FALSE(x.argmax().requires_grad());
  EXPECT_FALSE((x > 0).requires_grad());
  EXPECT_FALSE(x.to(i64).requires_grad());
  Tensor y = x * i;  // float result: tracked through x only
  EXPECT_TRUE(y.requires_grad());
  Gradients g = y.sum().backward();
  EXPECT_EQ(x.grad(g).to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_FALSE(i.grad(g).defined());
}

TEST(AutodiffEdge, BackwardTwiceNeedsRetainGraph) {
  Tensor x = tensor<double>({1, 2}, {2}, ad()).require_grad();
  Tensor loss = (x.exp() * x).sum();
  loss.backward();
  EXPECT_ERROR(loss.backward(), "retain_graph");
  Tensor loss2 = (x.exp() * x).sum();
  Gradients g1 = loss2.backward({.retain_graph = true});
  Gradients g2 = loss2.backward({.retain_graph = true});
  Gradients g3 = loss2.backward();
  EXPECT_EQ(x.grad(g1).to_vector<double>(), x.grad(g2).to_vector<double>());
  EXPECT_EQ(x.grad(g1).to_vector<double>(), x.grad(g3).to_vector<double>());
  EXPECT_ERROR(loss2.backward(), "retain_graph");
}

TEST(AutodiffEdge, SeedOnNonScalar) {
  Tensor x = tensor<double>({1, 2, 3}, {3}, ad()).require_grad();
  Tensor y = x * x;
  EXPECT_ERROR(y.backward(), "seed");
  EXPECT_ERROR(y.backward(ones({2}, {.dtype = f64})), "does not match");
  Tensor seed = tensor<double>({1, 10, 100}, {3});  // plain CPU seed: moved to the device
  Gradients g = y.backward(seed, {.retain_graph = true});
  EXPECT_EQ(x.grad(g).to_vector<double>(), (std::vector<double>{2, 40, 600}));
  // The seed of y.sum() is ones: the same as backward from y with a seed of ones.
  Gradients g2 = y.backward(ones({3}, {.dtype = f32, .device = ad()}));  // seed cast to f64
  EXPECT_EQ(x.grad(g2).to_vector<double>(), (std::vector<double>{2, 4, 6}));
}

TEST(AutodiffEdge, GradientsOfIntermediatesHeldByTheUser) {
  Tensor x = tensor<double>({1, 2, 3}, {3}, ad()).require_grad();
  Tensor h = x * 3;
  EXPECT_FALSE(h.is_leaf());
  Tensor loss = (h * h).sum();
  Gradients g = loss.backward();
  EXPECT_EQ(h.grad(g).to_vector<double>(), (std::vector<double>{6, 12, 18}));   // 2h
  EXPECT_EQ(x.grad(g).to_vector<double>(), (std::vector<double>{18, 36, 54}));  // 6h
  // The root is a live intermediate too.
  EXPECT_EQ(loss.grad(g).item<double>(), 1.0);
  EXPECT_EQ(g.size(), 3u);
  Tensor removed = g.remove(h);
  EXPECT_TRUE(removed.defined());
  EXPECT_FALSE(h.grad(g).defined());
}

TEST(AutodiffEdge, RequireGradNeedsAnAutodiffDevice) {
  Tensor x = ones({2});
  EXPECT_ERROR(x.require_grad(), "[require_grad]");
  EXPECT_ERROR(x.require_grad(), "autodiff");
  EXPECT_FALSE(x.requires_grad());
  EXPECT_ERROR(x.sum().backward(), "autodiff");
  EXPECT_TRUE(ad().has_autodiff());
  EXPECT_FALSE(Device::cpu().has_autodiff());
  EXPECT_EQ(ad().without_autodiff(), Device::cpu());
}

TEST(AutodiffEdge, MovingBetweenCpuAndAutodiffSharesData) {
  Tensor t = tensor<float>({1, 2, 3}, {3});
  Tensor a = t.to(ad());
  EXPECT_TRUE(a.is_same_storage(t));
  EXPECT_TRUE(a.device().has_autodiff());
  a.require_grad();
  EXPECT_TRUE(a.requires_grad());
  EXPECT_FALSE(t.requires_grad());
  Tensor back = a.to(Device::cpu());
  EXPECT_TRUE(back.is_same_storage(t));
  EXPECT_FALSE(back.requires_grad());  // tracking stays on the autodiff device
  {
    NoGradGuard guard;
    t.mul_(2);  // visible through every handle
  }
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  // Balanced checkpointing is another decoration of the same CPU backend: shares too.
  Tensor c = a.to(Device::cpu().autodiff({.checkpointing = Checkpointing::Balanced}));
  EXPECT_TRUE(c.is_same_storage(t));
}

// ---- memory -----------------------------------------------------------------------------------

namespace {

int64_t in_use() { return memory_stats(Device::cpu()).in_use; }

struct Mlp {
  std::vector<Tensor> params;  // W1, b1, W2, b2
  Mlp(int64_t in, int64_t hidden, int64_t out, const Device& dev, uint64_t seed) {
    auto gen = [&](const Shape& s, double scale, uint64_t k) {
      std::vector<double> v = gen_uniform(seed * 10 + k, shape_numel(s));
      for (double& x : v) x = scale * (2 * x - 1);
      return tensor(v, s, dev).to(f32).require_grad();
    };
    params = {gen({hidden, in}, 1.0 / std::sqrt(double(in)), 1), gen({hidden}, 0.1, 2),
              gen({out, hidden}, 1.0 / std::sqrt(double(hidden)), 3), gen({out}, 0.1, 4)};
  }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    Tensor h = relu(linear(x, params[0], params[1]));
    return cross_entropy(linear(h, params[2], params[3]), y);
  }
  void sgd(const Gradients& g, double lr) {
    NoGradGuard guard;
    for (Tensor& p : params) p.sub_(p.grad(g) * lr);
  }
};

}  // namespace

TEST(AutodiffMemory, NoGrowthOverTrainingSteps) {
  Device d = ad();
  Tensor x = randn({32, 20}, {.device = d});
  std::vector<int64_t> labels(32);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>(i % 4);
  Tensor y = tensor(labels, {32}, d);
  Mlp net(20, 16, 4, d, 1);
  double first_loss = 0, last_loss = 0;
  int64_t after_warmup = 0;
  for (int step = 0; step < 1000; ++step) {
    Tensor loss = net.loss(x, y);
    Gradients g = loss.backward();
    net.sgd(g, 0.1);
    if (step == 0) first_loss = loss.item<double>();
    if (step == 999) last_loss = loss.item<double>();
    if (step == 9) after_warmup = in_use();
    if (step > 9 && step % 100 == 0) EXPECT_LE(in_use(), after_warmup) << "step " << step;
  }
  EXPECT_LE(in_use(), after_warmup);
  EXPECT_LT(last_loss, first_loss);  // it trains
}

TEST(AutodiffMemory, BackwardReleasesSavedBuffers) {
  Device d = ad();
  Tensor x = randn({64, 128}, {.device = d});
  Tensor y = tensor<int64_t>(std::vector<int64_t>(64, 3), {64}, d);
  Mlp net(128, 256, 10, d, 2);
  net.loss(x, y).backward();  // makes the scalar constants a step uses (Note [Scalar constants])
  const int64_t before = in_use();
  int64_t grad_bytes = 0;
  {
    Tensor loss = net.loss(x, y);
    EXPECT_GT(in_use(), before + 64 * 256 * 4);  // the hidden activations are saved
    Gradients g = loss.backward();
    for (const Tensor& p : net.params) {
      Tensor gp = p.grad(g);
      ASSERT_TRUE(gp.defined());
      const int64_t b0 = in_use();
      Tensor c = gp.clone();  // what a buffer of that size costs in the allocator
      grad_bytes += in_use() - b0;
    }
    // The loss and its gradient (one value each, one 512-byte block each) and the parameters'
    // gradients are all that is left of the step.
    EXPECT_LE(in_use() - before, grad_bytes + 2 * 512) << "saved buffers survived backward";
  }
  EXPECT_EQ(in_use(), before);
}

TEST(AutodiffMemory, RetainedGraphIsFreedWithItsRoot) {
  Device d = ad();
  Tensor x = randn({64, 128}, {.device = d}).require_grad();
  auto run = [&] {
    Tensor loss = (x.tanh() * x.sigmoid()).exp().sum();
    Gradients g = loss.backward({.retain_graph = true});
    Gradients g2 = loss.backward();
    EXPECT_TRUE(allclose(x.grad(g), x.grad(g2)));
  };
  run();  // makes the scalar constants the steps use (Note [Scalar constants])
  const int64_t before = in_use();
  run();
  EXPECT_EQ(in_use(), before);
}

// ---- checkpointing ----------------------------------------------------------------------------

namespace {

/// An MLP with chains of elementwise activations (memory-bound ops) between the matmuls.
Tensor act_mlp_loss(const std::vector<Tensor>& p, const Tensor& x) {
  Tensor h = linear(x, p[0], p[1]);
  h = gelu(h);
  h = silu(h) * tanh(h) + sigmoid(h);
  h = (h * 0.5).exp() - h;
  h = linear(h, p[2], p[3]);
  h = tanh(gelu(h, "tanh")) * silu(h);
  return h.square().mean();
}

struct StepResult {
  std::vector<std::vector<float>> grads;
  float loss = 0;
  int64_t peak = 0;  // peak of in_use during forward + backward, above the level before
};

StepResult act_mlp_step(const Device& dev, int64_t batch, int64_t width) {
  auto gen = [&](const Shape& s, double scale, uint64_t k) {
    std::vector<double> v = gen_uniform(1000 + k, shape_numel(s));
    for (double& x : v) x = scale * (2 * x - 1);
    return tensor(v, s, dev).to(f32);
  };
  std::vector<Tensor> p = {gen({width, width}, 1.0 / std::sqrt(double(width)), 1), gen({width}, 0.1, 2),
                           gen({width, width}, 1.0 / std::sqrt(double(width)), 3), gen({width}, 0.1, 4)};
  for (Tensor& t : p) t.require_grad();
  Tensor x = gen({batch, width}, 1.0, 5);
  StepResult r;
  const int64_t before = in_use();
  reset_peak_memory(Device::cpu());
  {
    Tensor loss = act_mlp_loss(p, x);
    Gradients g = loss.backward();
    r.peak = memory_stats(Device::cpu()).peak - before;
    r.loss = loss.item<float>();
    for (const Tensor& t : p) r.grads.push_back(t.grad(g).to_vector<float>());
  }
  return r;
}

}  // namespace

TEST(AutodiffCheckpointing, BalancedGivesBitwiseEqualGradients) {
  StepResult a = act_mlp_step(ad(), 16, 32);
  StepResult b = act_mlp_step(Device::cpu().autodiff({.checkpointing = Checkpointing::Balanced}), 16, 32);
  EXPECT_EQ(a.loss, b.loss);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_EQ(a.grads[i].size(), b.grads[i].size());
    EXPECT_EQ(std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)), 0)
        << "parameter " << i;
  }
}

TEST(AutodiffCheckpointing, BalancedLowersPeakMemory) {
  const Device balanced = Device::cpu().autodiff({.checkpointing = Checkpointing::Balanced});
  StepResult a = act_mlp_step(ad(), 256, 256);
  StepResult b = act_mlp_step(balanced, 256, 256);
  EXPECT_EQ(a.loss, b.loss);
  for (size_t i = 0; i < a.grads.size(); ++i) EXPECT_EQ(a.grads[i], b.grads[i]) << "parameter " << i;
  EXPECT_LT(b.peak, a.peak) << "default " << a.peak << " bytes, balanced " << b.peak << " bytes";
  std::printf("peak of a training step: default %lld bytes, balanced %lld bytes\n", static_cast<long long>(a.peak),
              static_cast<long long>(b.peak));
}

TEST(AutodiffCheckpointing, SecondOrderThroughRecomputedValues) {
  const Device balanced = Device::cpu().autodiff({.checkpointing = Checkpointing::Balanced});
  auto grad_norm = [](const Device& dev) {
    Tensor x = tensor<double>({0.3, -0.7, 1.1, 0.2}, {4}, dev).require_grad();
    Tensor y = (x.tanh() * x.sigmoid()).exp().sum();
    Tensor gx = x.grad(y.backward({.create_graph = true}));
    return x.grad((gx * gx).sum().backward()).to_vector<double>();
  };
  std::vector<double> a = grad_norm(ad()), b = grad_norm(balanced);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_DOUBLE_EQ(a[i], b[i]);
}

TEST(AutodiffCheckpointing, BalancedMatchesDefaultOnAnLstmWithViews) {
  auto run = [](const Device& dev) {
    manual_seed(3);
    Tensor w = (randn({8, 16}) * 0.3).to(dev).require_grad(), u = (randn({4, 16}) * 0.3).to(dev).require_grad();
    Tensor b = randn({16}).to(dev).require_grad();
    Tensor h = zeros({2, 4}, {.device = dev}), c = zeros({2, 4}, {.device = dev});
    for (int t = 0; t < 5; ++t) {
      Tensor x = randn({2, 8}).to(dev);
      Tensor gates = matmul(x, w) + matmul(h, u) + b;  // [2, 16], four gates as views
      Tensor i = sigmoid(gates.slice(1, 0, 4)), f = sigmoid(gates.slice(1, 4, 8));
      Tensor g = tanh(gates.slice(1, 8, 12)), o = sigmoid(gates.slice(1, 12, 16));
      c = f * c + i * g;
      h = o * tanh(c);
    }
    Gradients gr = (h * h).sum().backward();
    std::vector<float> out;
    for (const Tensor& p : {w, u, b})
      for (float v : p.grad(gr).to_vector<float>()) out.push_back(v);
    return out;
  };
  EXPECT_EQ(run(ad()), run(Device::cpu().autodiff({.checkpointing = Checkpointing::Balanced})));
}

TEST(AutodiffEdge, LongChainsAreFreedWithoutDeepRecursion) {
  Tensor x = tensor<float>({1, 2}, {2}, ad()).require_grad();
  Tensor c = tensor<float>({1e-6f, 1e-6f}, {2}, ad());
  {
    Tensor y = x;
    // 100 000 nodes, each holding the previous; the graph dies at the end of the scope.
    for (int i = 0; i < 100000; ++i) y = y + c;
  }
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0f;
  Gradients g = y.sum().backward();
  EXPECT_EQ(x.grad(g).to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST(AutodiffCheckpointing, BalancedLowersPeakOnARecurrence) {
  // Recipes through the cell state must not make backward recompute (and hold) the whole
  // sequence at once: the recomputation depth is bounded.
  auto run = [](const Device& dev, int64_t& peak) {
    manual_seed(5);
    const int64_t B = 32, H = 64;
    std::vector<Tensor> w, u;
    for (int k = 0; k < 4; ++k) {
      w.push_back((randn({H, H}) * 0.125).to(dev).require_grad());
      u.push_back((randn({H, H}) * 0.125).to(dev).require_grad());
    }
    std::vector<Tensor> xs;
    for (int t = 0; t < 16; ++t) xs.push_back(randn({B, H}).to(dev));
    const int64_t before = in_use();
    reset_peak_memory(Device::cpu());
    std::vector<float> out;
    {
      Tensor h = zeros({B, H}, {.device = dev}), c = zeros({B, H}, {.device = dev});
      for (const Tensor& x : xs) {
        Tensor i = sigmoid(matmul(x, w[0]) + matmul(h, u[0])), f = sigmoid(matmul(x, w[1]) + matmul(h, u[1]));
        Tensor g = tanh(matmul(x, w[2]) + matmul(h, u[2])), o = sigmoid(matmul(x, w[3]) + matmul(h, u[3]));
        c = f * c + i * g;
        h = o * tanh(c);
      }
      Gradients gr = h.square().mean().backward();
      peak = memory_stats(Device::cpu()).peak - before;
      for (const Tensor& p : w)
        for (float v : p.grad(gr).to_vector<float>()) out.push_back(v);
    }
    return out;
  };
  int64_t peak_default = 0, peak_balanced = 0;
  std::vector<float> a = run(ad(), peak_default);
  std::vector<float> b = run(Device::cpu().autodiff({.checkpointing = Checkpointing::Balanced}), peak_balanced);
  EXPECT_EQ(a, b);
  EXPECT_LT(peak_balanced, peak_default);
}
