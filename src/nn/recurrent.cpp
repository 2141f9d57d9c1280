// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/recurrent.h"

#include <cmath>
#include <sstream>

#include "kiln/error.h"
#include "kiln/matmul.h"
#include "kiln/ops.h"
#include "seq_util.h"

namespace kiln::nn {
using detail::shape_str;

namespace {
int64_t gates_of(RecurrentBase::Mode m) {
  switch (m) {
    case RecurrentBase::Mode::Lstm:
      return 4;
    case RecurrentBase::Mode::Gru:
      return 3;
    default:
      return 1;
  }
}
}  // namespace

RecurrentBase::RecurrentBase(const RecurrentConfig& c, const Device& device, Mode mode, const char* name)
    : config(c), mode_(mode) {
  KILN_CHECK(c.input_size > 0 && c.hidden_size > 0 && c.num_layers >= 1, name,
             name << " needs input_size > 0, hidden_size > 0 and num_layers >= 1, got input_size=" << c.input_size
                  << ", hidden_size=" << c.hidden_size << ", num_layers=" << c.num_layers);
  KILN_CHECK(c.dropout >= 0.0 && c.dropout <= 1.0, name, name << " needs dropout in [0, 1], got " << c.dropout);
  KILN_CHECK(c.proj_size == 0 || mode == Mode::Lstm, name,
             name << ": proj_size is only supported for LSTM, got proj_size=" << c.proj_size);
  KILN_CHECK(c.proj_size >= 0 && c.proj_size < c.hidden_size, name,
             name << " needs 0 <= proj_size < hidden_size, got proj_size=" << c.proj_size
                  << ", hidden_size=" << c.hidden_size);
  const int64_t g = gates_of(mode), h = c.hidden_size, d = c.bidirectional ? 2 : 1;
  const int64_t ho = c.proj_size > 0 ? c.proj_size : h;  // features of h (and of the output)
  const double bound = 1.0 / std::sqrt(static_cast<double>(h));
  TensorOptions o{.dtype = c.dtype, .device = device.without_autodiff()};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const int64_t in = l == 0 ? c.input_size : d * ho;
    for (int64_t dir = 0; dir < d; ++dir) {
      weight_ih.push_back(make_param(uniform({g * h, in}, -bound, bound, o), device));
      weight_hh.push_back(make_param(uniform({g * h, ho}, -bound, bound, o), device));
      if (c.bias) {
        bias_ih.push_back(make_param(uniform({g * h}, -bound, bound, o), device));
        bias_hh.push_back(make_param(uniform({g * h}, -bound, bound, o), device));
      }
      if (c.proj_size > 0) weight_hr.push_back(make_param(uniform({ho, h}, -bound, bound, o), device));
    }
  }
}

RNN::RNN(const RecurrentConfig& c, const Device& device)
    : RecurrentBase(c, device, c.nonlinearity == "relu" ? Mode::RnnRelu : Mode::RnnTanh, "RNN") {
  KILN_CHECK(c.nonlinearity == "tanh" || c.nonlinearity == "relu", "RNN",
             "RNN nonlinearity must be \"tanh\" or \"relu\", got \"" << c.nonlinearity << "\"");
}

void RecurrentBase::visit(Visitor& v) {
  const int64_t d = config.bidirectional ? 2 : 1;
  for (size_t i = 0; i < weight_ih.size(); ++i) {
    const std::string sfx =
        std::to_string(static_cast<int64_t>(i) / d) + (static_cast<int64_t>(i) % d == 1 ? "_reverse" : "");
    v.field("weight_ih_l" + sfx, weight_ih[i]);
    v.field("weight_hh_l" + sfx, weight_hh[i]);
    if (i < bias_ih.size()) {
      v.field("bias_ih_l" + sfx, bias_ih[i]);
      v.field("bias_hh_l" + sfx, bias_hh[i]);
    }
    if (i < weight_hr.size()) v.field("weight_hr_l" + sfx, weight_hr[i]);
  }
}

std::string RecurrentBase::extra_repr() const {
  std::ostringstream s;
  s << config.input_size << ", " << config.hidden_size << ", num_layers=" << config.num_layers;
  if (mode_ == Mode::RnnRelu) s << ", nonlinearity=relu";
  if (!config.bias) s << ", bias=false";
  if (config.batch_first) s << ", batch_first=true";
  if (config.dropout > 0) s << ", dropout=" << config.dropout;
  if (config.bidirectional) s << ", bidirectional=true";
  if (config.proj_size > 0) s << ", proj_size=" << config.proj_size;
  return s.str();
}

RecurrentOutput RecurrentBase::run(const Tensor& x_in, const Tensor& h0_in, const Tensor& c0_in,
                                   const char* name) const {
  const int64_t H = config.hidden_size, D = config.bidirectional ? 2 : 1, L = config.num_layers;
  const int64_t G = gates_of(mode_);
  const int64_t P = config.proj_size > 0 ? config.proj_size : H;  // features of h
  auto cfg = [&] {
    std::ostringstream s;
    s << name << "(input_size=" << config.input_size << ", hidden_size=" << H << ", num_layers=" << L
      << ", batch_first=" << (config.batch_first ? "true" : "false")
      << ", bidirectional=" << (config.bidirectional ? "true" : "false") << ")";
    return s.str();
  };
  KILN_CHECK(x_in.defined() && (x_in.dim() == 2 || x_in.dim() == 3) && x_in.size(-1) == config.input_size, name,
             cfg() << " expects input " << (config.batch_first ? "[N, T, " : "[T, N, ") << config.input_size
                   << "] or [T, " << config.input_size << "], got " << shape_str(x_in));
  const bool unbatched = x_in.dim() == 2;
  // Work in [T, N, I].
  Tensor x = unbatched ? x_in.unsqueeze(1) : (config.batch_first ? x_in.transpose(0, 1) : x_in);
  const int64_t T = x.size(0), N = x.size(1);
  auto state = [&](const Tensor& s, const char* what, int64_t F) -> Tensor {
    if (!s.defined())
      return zeros({L * D, N, F}, {.dtype = x.dtype(), .device = x.device().without_autodiff()}).to(x.device());
    const Shape want = unbatched ? Shape{L * D, F} : Shape{L * D, N, F};
    KILN_CHECK(s.shape() == want, name,
               cfg() << " expects " << what << " " << to_string(want) << " for input " << to_string(x_in.shape())
                     << ", got " << shape_str(s));
    return unbatched ? s.unsqueeze(1) : s;
  };
  Tensor h0 = state(h0_in, "h0", P);
  Tensor c0 = mode_ == Mode::Lstm ? state(c0_in, "c0", H) : Tensor();

  std::vector<Tensor> hn, cn;
  Tensor layer_in = x;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Tensor> dir_out;
    for (int64_t dir = 0; dir < D; ++dir) {
      const size_t idx = static_cast<size_t>(l * D + dir);
      const Tensor b_ih = config.bias ? static_cast<const Tensor&>(bias_ih[idx]) : Tensor();
      const Tensor b_hh = config.bias ? static_cast<const Tensor&>(bias_hh[idx]) : Tensor();
      Tensor xp = linear(layer_in, weight_ih[idx], b_ih);  // [T, N, G*H]
      Tensor h = h0.select(0, l * D + dir);
      Tensor c = c0.defined() ? c0.select(0, l * D + dir) : Tensor();
      std::vector<Tensor> outs(static_cast<size_t>(T));
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = dir == 0 ? s : T - 1 - s;
        Tensor gi = xp.select(0, t);
        Tensor gh = linear(h, weight_hh[idx], b_hh);
        switch (mode_) {
          case Mode::RnnTanh:
            h = tanh(gi + gh);
            break;
          case Mode::RnnRelu:
            h = relu(gi + gh);
            break;
          case Mode::Lstm: {
            auto g = chunk(gi + gh, 4, -1);
            c = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
            h = sigmoid(g[3]) * tanh(c);
            if (!weight_hr.empty()) h = linear(h, weight_hr[idx]);
            break;
          }
          case Mode::Gru: {
            auto a = chunk(gi, 3, -1), b = chunk(gh, 3, -1);
            Tensor r = sigmoid(a[0] + b[0]);
            Tensor z = sigmoid(a[1] + b[1]);
            Tensor n = tanh(a[2] + r * b[2]);
            h = n + z * (h - n);
            break;
          }
        }
        outs[static_cast<size_t>(t)] = h;
      }
      dir_out.push_back(stack(outs, 0));
      hn.push_back(h);
      if (c.defined()) cn.push_back(c);
    }
    layer_in = D == 1 ? dir_out[0] : cat(dir_out, -1);
    if (l + 1 < L) layer_in = detail::dropout(layer_in, config.dropout, is_training());
  }
  (void)G;
  RecurrentOutput r;
  r.output = unbatched ? layer_in.squeeze({1}) : (config.batch_first ? layer_in.transpose(0, 1) : layer_in);
  r.h_n = stack(hn, 0);
  if (unbatched) r.h_n = r.h_n.squeeze({1});
  if (!cn.empty()) {
    r.c_n = stack(cn, 0);
    if (unbatched) r.c_n = r.c_n.squeeze({1});
  }
  return r;
}

}  // namespace kiln::nn
