// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance registry of the normalisation, activation, recurrent and attention modules
// (cases: scripts/golden_cases/nn_seq.py). Each case passes the module's inputs followed by its
// parameters in named_parameters() order; the Kiln module is built from the attrs and its
// parameters are replaced by those inputs, so Kiln and PyTorch run with the same weights.
#include "conformance/registry_util.h"
#include "kiln/nn/activation.h"
#include "kiln/nn/norm_layers.h"
#include "kiln/nn/recurrent.h"
#include "kiln/nn/transformer.h"

namespace kiln::conformance {
namespace {
using namespace reg;
namespace nn = kiln::nn;

// Replaces the module's parameters, in visiting order, by in[from], in[from + 1], ...
struct Assign : nn::Visitor {
  const Args& in;
  size_t next;
  Assign(const Args& a, size_t from) : in(a), next(from) {}
  void tensor(std::string_view, Tensor& t, bool is_param) override {
    if (!is_param || !t.defined()) return;
    if (next >= in.size()) throw std::runtime_error("registry_nn_seq: too few parameter inputs");
    t = in[next++].t;
  }
};
template <class M>
M& load(M& m, const Args& in, size_t from) {
  Assign a(in, from);
  m.visit(a);
  if (a.next != in.size()) throw std::runtime_error("registry_nn_seq: too many parameter inputs");
  return m;
}

nn::RecurrentConfig rnn_config(At at) {
  return {.input_size = at.i("in"),
          .hidden_size = at.i("hid"),
          .num_layers = at.i_or("layers", 1),
          .nonlinearity = at.str_or("nl", "tanh"),
          .bias = at.b("bias", true),
          .batch_first = at.b("batch_first"),
          .bidirectional = at.b("bidir"),
          .proj_size = at.i_or("proj", 0)};
}

nn::MultiHeadAttentionConfig mha_config(At at) {
  return {.embed_dim = at.i("e"),
          .num_heads = at.i("h"),
          .bias = at.b("bias", true),
          .add_bias_kv = at.b("bias_kv"),
          .add_zero_attn = at.b("zero_attn"),
          .kdim = at.i_or("kdim", 0),
          .vdim = at.i_or("vdim", 0),
          .batch_first = at.b("batch_first")};
}

Outs batchnorm(A in, At at, D dev) {
  const int64_t nd = at.i("nd");
  const double mom = at.f_or("momentum", 0.1);
  nn::BatchNormConfig c{.num_features = at.i("c"),
                        .momentum = mom < 0 ? std::optional<double>() : std::optional<double>(mom),
                        .affine = at.b("affine", true)};
  auto go = [&](auto m) -> Outs {
    size_t k = 1;
    if (at.b("eval")) {
      m.running_mean = in[1].t.clone();
      m.running_var = in[2].t.clone();
      k = 3;
    }
    load(m, in, k);
    m.train(!at.b("eval"));
    Tensor y = m(in[0].t);
    if (at.b("twice")) y = m(in[0].t * 2 + 1);
    return {y, m.running_mean, m.running_var, m.num_batches_tracked};
  };
  if (nd == 1) return go(nn::BatchNorm1d(c, dev));
  if (nd == 2) return go(nn::BatchNorm2d(c, dev));
  return go(nn::BatchNorm3d(c, dev));
}

const RegistryPart part({
    {"nn_batchnorm", batchnorm},
    OP(nn_layernorm) {
      nn::LayerNorm m({.normalized_shape = at.shape("ns"),
                       .eps = at.f_or("eps", 1e-5),
                       .elementwise_affine = at.b("affine", true),
                       .bias = at.b("bias", true)},
                      dev);
      return {load(m, in, 1)(in[0].t)};
}  // namespace
END, OP(nn_groupnorm) {
  nn::GroupNorm m({.num_groups = at.i("groups"), .num_channels = at.i("c"), .affine = at.b("affine", true)}, dev);
  return {load(m, in, 1)(in[0].t)};
}
END, OP(nn_prelu) {
  nn::PReLU m({.num_parameters = at.i("n")}, dev);
  return {load(m, in, 1)(in[0].t)};
}
END, OP(nn_glu) { return {nn::GLU({.dim = at.i_or("dim", -1)})(in[0].t)}; }
END, OP(nn_rnn) {
  nn::RNN m(rnn_config(at), dev);
  auto r = load(m, in, 2)(in[0].t, in[1].t);
  return {r.output, r.h_n};
}
END, OP(nn_gru) {
  nn::GRU m(rnn_config(at), dev);
  auto r = load(m, in, 2)(in[0].t, in[1].t);
  return {r.output, r.h_n};
}
END, OP(nn_lstm) {
  nn::LSTM m(rnn_config(at), dev);
  auto r = load(m, in, 3)(in[0].t, in[1].t, in[2].t);
  return {r.output, r.h_n, r.c_n};
}
END, OP(nn_mha) {
  nn::MultiHeadAttention m(mha_config(at), dev);
  load(m, in, 5).eval();
  auto r = m(in[0].t, in[1].t, in[2].t,
             {.key_padding_mask = in[4].t, .attn_mask = in[3].t, .need_weights = at.b("need_weights")});
  if (at.b("need_weights")) return {r.output, r.weights};
  return {r.output};
}
END, OP(nn_encoder_layer) {
  nn::TransformerEncoderLayer m({.d_model = at.i("d"),
                                 .nhead = at.i("h"),
                                 .dim_feedforward = at.i("ff"),
                                 .activation = at.str_or("act", "relu"),
                                 .batch_first = at.b("batch_first"),
                                 .norm_first = at.b("norm_first")},
                                dev);
  load(m, in, 2).eval();
  return {m(in[0].t, in[1].t)};
}
END, OP(nn_rotary) {
  nn::RotaryEncoding m({.head_dim = at.i("d"), .theta = at.f_or("theta", 10000.0), .interleaved = at.b("il")}, dev);
  return {m(in[0].t, at.i_or("offset", 0))};
}
END,
}  // namespace kiln::conformance
);

}  // namespace
}  // namespace kiln::conformance
