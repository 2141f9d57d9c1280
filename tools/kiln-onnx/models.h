// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The model types that `kiln-onnx export` builds from a config file: the models of examples/
// (with the examples' sizes as defaults, so the example's saved model.safetensors loads as is)
// and the recurrent and transformer layers of kiln::nn. A config file is the JSON that
// kiln::nn::save_config writes: {"type": "FashionMnistNet", "config": {...}}.
//
//   type              model                                             input
//   FashionMnistNet   examples/fashion-mnist: conv-BN-ReLU-pool x2, MLP  [N, 1, 28, 28]
//   TrainingLoopNet   examples/custom-training-loop: the same, no norm   [N, 1, 28, 28]
//   ImageFolderCnn    examples/image-folder: conv-ReLU-pool x2, linear   [N, C, S, S]
//   Mlp               examples/custom-renderer and regression-csv        [N, in]
//   TransformerLayer  kiln::nn::TransformerEncoderLayer                  [N, T, d_model]
//   LSTM              kiln::nn::LSTM (its output sequence)               [N, T, input_size]
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::onnx_models {

/// examples/fashion-mnist's Net: (x - mean) / std, conv(conv1)-BN-ReLU-pool,
/// conv(conv2)-BN-ReLU-pool, fc(hidden)-dropout-fc(classes).
struct FashionMnistNetConfig {
  int64_t conv1 = 32, conv2 = 64, hidden = 128, classes = 10;
  bool conv_bias = false;
  bool normalize = true;  ///< (x - 0.2860) / 0.3530, the training set's mean and std
  double dropout = 0.25;
  KILN_CONFIG(FashionMnistNetConfig, conv1, conv2, hidden, classes, conv_bias, normalize, dropout)
};

/// examples/custom-training-loop's Net: as FashionMnistNet with conv biases, no input
/// normalisation and no dropout.
struct TrainingLoopNetConfig {
  int64_t conv1 = 32, conv2 = 64, hidden = 128, classes = 10;
  bool conv_bias = true;
  bool normalize = false;
  double dropout = 0;
  KILN_CONFIG(TrainingLoopNetConfig, conv1, conv2, hidden, classes, conv_bias, normalize, dropout)
};

/// The Fashion-MNIST CNN of both examples (their parameter names: conv1, bn1, conv2, bn2, fc1, fc2).
struct MnistNet : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  nn::Linear fc1, fc2;
  nn::Dropout drop;
  bool normalize = false;
  template <class C>
  explicit MnistNet(const C& c)
      : conv1({.in_channels = 1, .out_channels = c.conv1, .kernel_size = 3, .padding = 1, .bias = c.conv_bias}),
        conv2({.in_channels = c.conv1, .out_channels = c.conv2, .kernel_size = 3, .padding = 1, .bias = c.conv_bias}),
        bn1({.num_features = c.conv1}),
        bn2({.num_features = c.conv2}),
        fc1({.in_features = c.conv2 * 7 * 7, .out_features = c.hidden}),
        fc2({.in_features = c.hidden, .out_features = c.classes}),
        drop({.p = c.dropout}),
        normalize(c.normalize) {}
  Tensor forward(const Tensor& x) const {
    Tensor h = normalize ? (x - 0.2860f) * (1.0f / 0.3530f) : x;
    h = nn::functional::max_pool2d(relu(bn1(conv1(h))), 2);
    h = nn::functional::max_pool2d(relu(bn2(conv2(h))), 2);
    return fc2(drop(relu(fc1(h.flatten(1)))));
  }
  KILN_VISIT(MnistNet, conv1, bn1, conv2, bn2, fc1, fc2, drop)
};

/// examples/image-folder's Cnn: conv(channels1)-ReLU-pool, conv(channels2)-ReLU-pool, linear.
struct ImageFolderCnnConfig {
  int64_t in_channels = 3, channels1 = 8, channels2 = 16, image_size = 24, classes = 3;
  KILN_CONFIG(ImageFolderCnnConfig, in_channels, channels1, channels2, image_size, classes)
};

struct ImageFolderCnn : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::MaxPool2d pool;
  nn::Linear fc;
  explicit ImageFolderCnn(const ImageFolderCnnConfig& c)
      : conv1({.in_channels = c.in_channels, .out_channels = c.channels1, .kernel_size = 3, .padding = 1}),
        conv2({.in_channels = c.channels1, .out_channels = c.channels2, .kernel_size = 3, .padding = 1}),
        pool({.kernel_size = 2}),
        fc({.in_features = c.channels2 * (c.image_size / 4) * (c.image_size / 4), .out_features = c.classes}) {}
  Tensor forward(const Tensor& x) const {
    Tensor h = pool(relu(conv1(x)));
    h = pool(relu(conv2(h)));
    return fc(h.flatten(1));
  }
  KILN_VISIT(ImageFolderCnn, conv1, conv2, pool, fc)
};

/// The MLPs of examples/custom-renderer (784 -> 128 -> 10, fc1 and fc2) and
/// examples/regression-csv (10 -> 32 -> 32 -> 1, fc1, fc2 and out): linear layers with ReLU
/// between them, the hidden ones named fc1, fc2, ..., the last `output_name` ("fc<k>" when empty).
struct MlpConfig {
  int64_t in = 784;
  std::vector<int64_t> hidden = {128};
  int64_t out = 10;
  std::string output_name;
  KILN_CONFIG(MlpConfig, in, hidden, out, output_name)
};

struct Mlp : nn::Module {
  std::vector<nn::Linear> layers;
  std::vector<std::string> names;
  explicit Mlp(const MlpConfig& c) {
    int64_t in = c.in;
    for (size_t i = 0; i <= c.hidden.size(); ++i) {
      const int64_t out = i < c.hidden.size() ? c.hidden[i] : c.out;
      layers.emplace_back(nn::LinearConfig{.in_features = in, .out_features = out});
      names.push_back(i == c.hidden.size() && !c.output_name.empty() ? c.output_name : "fc" + std::to_string(i + 1));
      in = out;
    }
  }
  Tensor forward(const Tensor& x) const {
    Tensor h = x;
    for (size_t i = 0; i < layers.size(); ++i) h = i + 1 < layers.size() ? relu(layers[i](h)) : layers[i](h);
    return h;
  }
  void visit(nn::Visitor& v) override {
    for (size_t i = 0; i < layers.size(); ++i) v.field(names[i], layers[i]);
  }
  std::string type_name() const override { return "Mlp"; }
};

/// The LSTM type: kiln::nn::LSTM's config less the RNN-only nonlinearity.
struct LSTMConfig {
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bias = true, batch_first = true, bidirectional = false;
  int64_t proj_size = 0;
  KILN_CONFIG(LSTMConfig, input_size, hidden_size, num_layers, bias, batch_first, bidirectional, proj_size)
};

/// A model built from a config: its module (parameters named as the example saves them), its
/// forward function, an example input shape and the input's batch axis.
struct Exportable {
  std::shared_ptr<nn::Module> module;
  std::function<Tensor(const Tensor&)> forward;
  Shape input_shape;
  int64_t batch_axis = 0;
};

/// The model types make_model knows.
inline std::vector<std::string> model_types() {
  return {"FashionMnistNet", "TrainingLoopNet", "ImageFolderCnn", "Mlp", "TransformerLayer", "LSTM"};
}

/// The "type" of a config file's JSON text ("" when it has none).
inline std::string config_type(const std::string& json) {
  const size_t k = json.find("\"type\"");
  if (k == std::string::npos) return "";
  const size_t a = json.find('"', json.find(':', k) + 1);
  const size_t b = a == std::string::npos ? a : json.find('"', a + 1);
  return b == std::string::npos ? "" : json.substr(a + 1, b - a - 1);
}

/// The model of a config file's JSON text, with an example input of `batch` rows (and `seq_len`
/// steps for the sequence models). Throws kiln::Error for an unknown type or a bad config.
inline Exportable make_model(const std::string& json, int64_t batch, int64_t seq_len) {
  const std::string type = config_type(json);
  Exportable e;
  auto take = [&](auto p, Shape in, int64_t axis = 0) {
    e.module = p;
    e.forward = [p](const Tensor& x) { return p->forward(x); };
    e.input_shape = std::move(in);
    e.batch_axis = axis;
  };
  if (type == "FashionMnistNet") {
    take(std::make_shared<MnistNet>(nn::from_json<FashionMnistNetConfig>(json)), {batch, 1, 28, 28});
  } else if (type == "TrainingLoopNet") {
    take(std::make_shared<MnistNet>(nn::from_json<TrainingLoopNetConfig>(json)), {batch, 1, 28, 28});
  } else if (type == "ImageFolderCnn") {
    const auto c = nn::from_json<ImageFolderCnnConfig>(json);
    take(std::make_shared<ImageFolderCnn>(c), {batch, c.in_channels, c.image_size, c.image_size});
  } else if (type == "Mlp") {
    const auto c = nn::from_json<MlpConfig>(json);
    take(std::make_shared<Mlp>(c), {batch, c.in});
  } else if (type == "TransformerLayer") {
    const auto c = nn::from_json<nn::TransformerLayerConfig>(json);
    take(std::make_shared<nn::TransformerEncoderLayer>(c),
         c.batch_first ? Shape{batch, seq_len, c.d_model} : Shape{seq_len, batch, c.d_model}, c.batch_first ? 0 : 1);
  } else if (type == "LSTM") {
    const auto c = nn::from_json<LSTMConfig>(json);
    auto p = std::make_shared<nn::LSTM>(nn::RecurrentConfig{.input_size = c.input_size,
                                                            .hidden_size = c.hidden_size,
                                                            .num_layers = c.num_layers,
                                                            .bias = c.bias,
                                                            .batch_first = c.batch_first,
                                                            .bidirectional = c.bidirectional,
                                                            .proj_size = c.proj_size});
    e.module = p;
    e.forward = [p](const Tensor& x) { return p->forward(x).output; };
    e.input_shape = c.batch_first ? Shape{batch, seq_len, c.input_size} : Shape{seq_len, batch, c.input_size};
    e.batch_axis = c.batch_first ? 0 : 1;
  } else {
    std::string known;
    for (const std::string& t : model_types()) known += (known.empty() ? "" : ", ") + t;
    KILN_CHECK(false, "kiln-onnx export",
               (type.empty() ? std::string("the config has no \"type\"") : "unknown model type '" + type + "'")
                   << "; known types: " << known);
  }
  return e;
}

}  // namespace kiln::onnx_models
