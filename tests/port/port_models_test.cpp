// SPDX-License-Identifier: MIT OR Apache-2.0
// Ported PyTorch scripts: an MLP, a CNN, an LSTM classifier and a transformer encoder block,
// each trained a few steps in Kiln from PyTorch's initial weights and data
// (scripts/gen_port_reference.py writes tests/port/data/) and compared with PyTorch's loss at
// every step. Each model is written as the PyTorch script writes it, line by line.
#include <kiln/nn.h>
#include <kiln/optim.h>

#include "port/port_util.h"

namespace {

using namespace kiln;
namespace F = kiln::nn::functional;

// model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))
// opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
TEST(PortMlp, SgdMomentumFollowsPyTorch) {
  const Device dev = Device::cpu().autodiff();
  nn::Sequential model(nn::Linear({.in_features = 8, .out_features = 16}, dev), nn::ReLU(),
                       nn::Linear({.in_features = 16, .out_features = 16}, dev), nn::Tanh(),
                       nn::Linear({.in_features = 16, .out_features = 3}, dev));
  port::Reference ref = port::reference("mlp");
  ref.load_into(model);
  Tensor x = ref.get("data.x", dev), y = ref.get("data.y", dev);
  optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
  std::vector<double> losses;
  for (int step = 0; step < 10; ++step) {
    Tensor loss = F::cross_entropy(model(x), y);
    Gradients grads = loss.backward();  // PyTorch: opt.zero_grad(); loss.backward()
    losses.push_back(loss.item<double>());
    opt.step(grads);
  }
  port::expect_trajectory("mlp", losses, ref.loss());
}

// class Cnn(nn.Module): conv1 -> bn1 -> relu -> pool -> conv2 -> relu -> pool -> flatten -> fc.
// conv1 has no bias: before a batch norm its gradient is rounding noise, which Adam scales up to
// full steps, so its values (and running_mean) would differ between any two implementations.
struct Cnn : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1;
  nn::MaxPool2d pool;
  nn::Linear fc;
  explicit Cnn(const Device& d)
      : conv1({.in_channels = 1, .out_channels = 4, .kernel_size = 3, .padding = 1, .bias = false}, d),
        conv2({.in_channels = 4, .out_channels = 8, .kernel_size = 3, .padding = 1}, d),
        bn1({.num_features = 4}, d),
        pool({.kernel_size = 2}),
        fc({.in_features = 8 * 2 * 2, .out_features = 3}, d) {}
  Tensor forward(const Tensor& x) const {
    Tensor h = pool(relu(bn1(conv1(x))));
    h = pool(relu(conv2(h)));
    return fc(h.flatten(1));
  }
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(Cnn, conv1, bn1, conv2, pool, fc)
};

// opt = torch.optim.Adam(model.parameters(), lr=1e-2); batch norm in training mode, then eval.
TEST(PortCnn, AdamWithBatchNormFollowsPyTorch) {
  const Device dev = Device::cpu().autodiff();
  Cnn model(dev);
  port::Reference ref = port::reference("cnn");
  ref.load_into(model);
  Tensor x = ref.get("data.x", dev), y = ref.get("data.y", dev);
  optim::Adam opt(model.parameters(), {.lr = 1e-2});
  std::vector<double> losses;
  for (int step = 0; step < 8; ++step) {
    Tensor loss = F::cross_entropy(model(x), y);
    Gradients grads = loss.backward();
    losses.push_back(loss.item<double>());
    opt.step(grads);
  }
  port::expect_trajectory("cnn", losses, ref.loss());

  // model.eval(); with torch.no_grad(): the running statistics took the same updates.
  model.eval();
  NoGradGuard no_grad;
  double eval_loss = F::cross_entropy(model(x), y).item<double>();
  port::expect_trajectory("cnn eval", {eval_loss}, ref.loss_of("ref.eval_loss"));
  EXPECT_TRUE(model.bn1.running_mean.to(Device::cpu()).allclose(ref.get("ref.bn1.running_mean"), 1e-4, 1e-6))
      << model.bn1.running_mean << " vs PyTorch's " << ref.get("ref.bn1.running_mean");
}

// Embedding -> LSTM(batch_first) -> Linear on the last layer's final hidden state h_n[-1].
struct LstmClassifier : nn::Module {
  nn::Embedding embedding;
  nn::LSTM lstm;
  nn::Linear fc;
  explicit LstmClassifier(const Device& d)
      : embedding({.num_embeddings = 20, .embedding_dim = 8}, d),
        lstm({.input_size = 8, .hidden_size = 12, .batch_first = true}, d),
        fc({.in_features = 12, .out_features = 3}, d) {}
  // out, (h_n, c_n) = self.lstm(self.embedding(tokens)); return self.fc(h_n[-1])
  Tensor forward(const Tensor& tokens) const {
    nn::RecurrentOutput r = lstm(embedding(tokens));
    return fc(r.h_n.select(0, -1));
  }
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(LstmClassifier, embedding, lstm, fc)
};

// opt = torch.optim.Adam(lr=2e-2); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
TEST(PortLstm, ClassifierWithClippingFollowsPyTorch) {
  const Device dev = Device::cpu().autodiff();
  LstmClassifier model(dev);
  port::Reference ref = port::reference("lstm");
  ref.load_into(model);
  Tensor x = ref.get("data.x", dev), y = ref.get("data.y", dev);
  optim::Adam opt(model.parameters(), {.lr = 2e-2});
  std::vector<double> losses;
  for (int step = 0; step < 10; ++step) {
    Tensor loss = F::cross_entropy(model(x), y);
    Gradients grads = loss.backward();
    optim::clip_grad_norm_(grads, model.parameters(), /*max_norm=*/1.0);
    losses.push_back(loss.item<double>());
    opt.step(grads);
  }
  port::expect_trajectory("lstm", losses, ref.loss());
}

// proj -> nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
// -> mean over the sequence -> head
struct EncoderRegressor : nn::Module {
  nn::Linear proj, head;
  nn::TransformerEncoderLayer encoder;
  explicit EncoderRegressor(const Device& d)
      : proj({.in_features = 4, .out_features = 16}, d),
        head({.in_features = 16, .out_features = 1}, d),
        encoder({.d_model = 16, .nhead = 2, .dim_feedforward = 32, .dropout = 0.0, .batch_first = true}, d) {}
  Tensor forward(const Tensor& x) const { return head(encoder(proj(x)).mean({1})).squeeze({-1}); }
  Tensor operator()(const Tensor& x) const { return forward(x); }
  KILN_VISIT(EncoderRegressor, proj, encoder, head)
};

// opt = torch.optim.AdamW(lr=5e-3, weight_decay=1e-2); F.mse_loss
TEST(PortTransformer, EncoderBlockAdamWFollowsPyTorch) {
  const Device dev = Device::cpu().autodiff();
  EncoderRegressor model(dev);
  port::Reference ref = port::reference("transformer");
  ref.load_into(model);
  Tensor x = ref.get("data.x", dev), y = ref.get("data.y", dev);
  optim::AdamW opt(model.parameters(), {.lr = 5e-3, .weight_decay = 1e-2});
  std::vector<double> losses;
  for (int step = 0; step < 8; ++step) {
    Tensor loss = F::mse_loss(model(x), y);
    Gradients grads = loss.backward();
    losses.push_back(loss.item<double>());
    opt.step(grads);
  }
  port::expect_trajectory("transformer", losses, ref.loss());
}

}  // namespace
