// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Recurrent layers: RNN (tanh / relu), LSTM and GRU (torch.nn's parameter names, layouts and
// gate orders, so a PyTorch state_dict loads 1:1).
#include <string>
#include <vector>

#include "kiln/nn/config.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

/// Config of RNN, LSTM and GRU: `LSTM({.input_size = 32, .hidden_size = 64, .num_layers = 2})`.
struct RecurrentConfig {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  std::string nonlinearity = "tanh";  ///< RNN only: "tanh" or "relu"
  bool bias = true;                   ///< bias_ih / bias_hh parameters
  bool batch_first = false;           ///< input and output [N, T, *] instead of [T, N, *]
  double dropout = 0.0;               ///< dropout on the outputs of every layer but the last (training)
  bool bidirectional = false;
  DType dtype = f32;
  /// LSTM only: > 0 projects each hidden state to proj_size features (weight_hr [proj_size,
  /// hidden_size]), so h and the output have proj_size features; must be < hidden_size.
  int64_t proj_size = 0;
  KILN_CONFIG(RecurrentConfig, input_size, hidden_size, num_layers, nonlinearity, bias, batch_first, dropout,
              bidirectional, dtype, proj_size)
};
using RNNConfig = RecurrentConfig;
using LSTMConfig = RecurrentConfig;
using GRUConfig = RecurrentConfig;

/// Output of RNN / GRU: output [T, N, D*H] (batch_first: [N, T, D*H]; unbatched [T, D*H]) and
/// the final hidden state h_n [num_layers*D, N, H] ([num_layers*D, H] unbatched), D = 2 when
/// bidirectional. LSTM also returns the final cell state c_n (shape of h_n).
struct RecurrentOutput {
  Tensor output, h_n, c_n;
};

/// Shared implementation of RNN, LSTM and GRU. Parameters per layer k and direction (suffix
/// "_reverse" for the backward one), in PyTorch's order: weight_ih_l{k} [G*H, in_k],
/// weight_hh_l{k} [G*H, H], bias_ih_l{k} [G*H], bias_hh_l{k} [G*H], G = 1 (RNN), 4 (LSTM: gates
/// i, f, g, o) or 3 (GRU: r, z, n); in_0 = input_size, later layers D*H. All initialised
/// U(-1/sqrt(H), 1/sqrt(H)). Stored flat, index layer * D + direction.
struct RecurrentBase : Module {
  enum class Mode { RnnTanh, RnnRelu, Lstm, Gru };
  RecurrentConfig config;
  std::vector<Param> weight_ih, weight_hh, bias_ih, bias_hh;
  std::vector<Param> weight_hr;  ///< LSTM with proj_size > 0: [proj_size, hidden_size] per layer and direction
  RecurrentBase() = default;
  RecurrentBase(const RecurrentConfig& c, const Device& device, Mode mode, const char* name);
  void visit(Visitor& v) override;
  std::string extra_repr() const override;

 protected:
  Mode mode_ = Mode::Lstm;
  RecurrentOutput run(const Tensor& x, const Tensor& h0, const Tensor& c0, const char* name) const;
};

/// Elman RNN: h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh). x [T, N, input_size]
/// (batch_first [N, T, input_size], unbatched [T, input_size]); h0 optional
/// [num_layers*D, N, H] (zeros when undefined). Returns {output, h_n}.
struct RNN : RecurrentBase {
  RNN() = default;
  explicit RNN(const RecurrentConfig& c, const Device& device = Device::default_device());
  RecurrentOutput forward(const Tensor& x, const Tensor& h0 = {}) const { return run(x, h0, {}, "RNN"); }
  RecurrentOutput operator()(const Tensor& x, const Tensor& h0 = {}) const { return forward(x, h0); }
  std::string type_name() const override { return "RNN"; }
};

/// Long short-term memory (gates i, f, g, o). Shapes as RNN; h0 and c0 optional
/// [num_layers*D, N, H]. Returns {output, h_n, c_n}.
struct LSTM : RecurrentBase {
  LSTM() = default;
  explicit LSTM(const RecurrentConfig& c, const Device& device = Device::default_device())
      : RecurrentBase(c, device, Mode::Lstm, "LSTM") {}
  RecurrentOutput forward(const Tensor& x, const Tensor& h0 = {}, const Tensor& c0 = {}) const {
    return run(x, h0, c0, "LSTM");
  }
  RecurrentOutput operator()(const Tensor& x, const Tensor& h0 = {}, const Tensor& c0 = {}) const {
    return forward(x, h0, c0);
  }
  std::string type_name() const override { return "LSTM"; }
};

/// Gated recurrent unit (gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn))). Shapes
/// as RNN. Returns {output, h_n}.
struct GRU : RecurrentBase {
  GRU() = default;
  explicit GRU(const RecurrentConfig& c, const Device& device = Device::default_device())
      : RecurrentBase(c, device, Mode::Gru, "GRU") {}
  RecurrentOutput forward(const Tensor& x, const Tensor& h0 = {}) const { return run(x, h0, {}, "GRU"); }
  RecurrentOutput operator()(const Tensor& x, const Tensor& h0 = {}) const { return forward(x, h0); }
  std::string type_name() const override { return "GRU"; }
};

}  // namespace kiln::nn
