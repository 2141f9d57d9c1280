// SPDX-License-Identifier: MIT OR Apache-2.0
// The WGAN-GP models and the gradient penalty, shared by the training program and its check.
#pragma once
#include <kiln/kiln.h>
#include <kiln/nn.h>

namespace examples {

/// z [N, latent] -> images [N, 1, 28, 28] in [-1, 1]: an MLP with ReLU and a tanh output.
struct Generator : kiln::nn::Module {
  kiln::nn::Linear fc1, fc2, fc3;
  Generator() = default;
  Generator(int64_t latent, const kiln::Device& d, kiln::DType dt = kiln::f32)
      : fc1({.in_features = latent, .out_features = 256, .dtype = dt}, d),
        fc2({.in_features = 256, .out_features = 512, .dtype = dt}, d),
        fc3({.in_features = 512, .out_features = 784, .dtype = dt}, d) {}
  kiln::Tensor forward(const kiln::Tensor& z) const {
    kiln::Tensor h = kiln::relu(fc2(kiln::relu(fc1(z))));
    return kiln::tanh(fc3(h)).reshape({z.size(0), 1, 28, 28});
  }
  kiln::Tensor operator()(const kiln::Tensor& z) const { return forward(z); }
  KILN_VISIT(Generator, fc1, fc2, fc3)
};

/// images [N, 1, 28, 28] -> scores [N]: an MLP with LeakyReLU(0.2) and no normalisation (the
/// gradient penalty is taken per sample, so batch statistics must not mix the samples).
struct Critic : kiln::nn::Module {
  kiln::nn::Linear fc1, fc2, fc3;
  Critic() = default;
  Critic(const kiln::Device& d, kiln::DType dt = kiln::f32)
      : fc1({.in_features = 784, .out_features = 512, .dtype = dt}, d),
        fc2({.in_features = 512, .out_features = 256, .dtype = dt}, d),
        fc3({.in_features = 256, .out_features = 1, .dtype = dt}, d) {}
  kiln::Tensor forward(const kiln::Tensor& x) const {
    kiln::Tensor h = kiln::leaky_relu(fc1(x.reshape({x.size(0), 784})), 0.2);
    return fc3(kiln::leaky_relu(fc2(h), 0.2)).reshape({x.size(0)});
  }
  kiln::Tensor operator()(const kiln::Tensor& x) const { return forward(x); }
  KILN_VISIT(Critic, fc1, fc2, fc3)
};

/// The gradient penalty of Gulrajani et al. (2017): mean over the batch of
/// (||d critic(x) / dx||_2 - 1)^2 at x = eps * real + (1 - eps) * fake, eps ~ U(0, 1) per
/// sample. The input gradient is taken with create_graph, so the penalty itself can be
/// differentiated with respect to the critic's parameters (gradients of gradients).
/// `eps` [N] may be given (for checks); otherwise it is drawn.
inline kiln::Tensor gradient_penalty(const Critic& critic, const kiln::Tensor& real, const kiln::Tensor& fake,
                                     kiln::Tensor eps = {}) {
  const int64_t n = real.size(0);
  if (!eps.defined()) eps = kiln::rand({n}, {.dtype = real.dtype(), .device = real.device()});
  kiln::Tensor e = eps.reshape({n, 1, 1, 1});
  kiln::Tensor x = (e * real.detach() + (1.0 - e) * fake.detach()).detach().require_grad();
  kiln::Gradients g = critic(x).sum().backward({.create_graph = true});
  kiln::Tensor gx = x.grad(g).reshape({n, 784});
  kiln::Tensor d = (gx * gx).sum({1}).sqrt() - 1.0;
  return (d * d).mean();
}

}  // namespace examples
