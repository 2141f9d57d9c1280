// SPDX-License-Identifier: MIT OR Apache-2.0
// A Param, Buffer or module field that KILN_VISIT does not list is reported (Note [Stray fields]).
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>

#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kiln/optim.h"

using namespace kiln;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Forgot : nn::Module {
  nn::Linear a, b;
  Forgot() : a({.in_features = 4, .out_features = 3}), b({.in_features = 3, .out_features = 2}) {}
  KILN_VISIT(Forgot, a)  // b is missing
};

struct ForgotParam : nn::Module {
  nn::Linear a;
  nn::Param scale;
  ForgotParam() : a({.in_features = 2, .out_features = 2}), scale(ones({5})) {}
  KILN_VISIT(ForgotParam, a)
};

struct Outer : nn::Module {
  Forgot inner;
  nn::Linear c{{.in_features = 1, .out_features = 1}};
  KILN_VISIT(Outer, inner, c)
};

struct Complete : nn::Module {
  nn::Linear a{{.in_features = 2, .out_features = 2}};
  std::optional<nn::Linear> maybe;
  std::vector<nn::Linear> list;
  std::array<nn::Linear, 2> pair{nn::Linear({.in_features = 1, .out_features = 1}),
                                 nn::Linear({.in_features = 1, .out_features = 1})};
  std::shared_ptr<nn::Linear> teacher =
      std::make_shared<nn::Linear>(nn::LinearConfig{.in_features = 3, .out_features = 3});
  nn::Buffer steps{zeros({1})};
  Complete() {
    maybe.emplace(nn::LinearConfig{.in_features = 2, .out_features = 1});
    list.emplace_back(nn::LinearConfig{.in_features = 1, .out_features = 2});
  }
  KILN_VISIT(Complete, a, maybe, list, pair, steps)  // teacher is held by pointer: not ours
};

}  // namespace

TEST(NnStrayFields, ModuleFieldLeftOutIsReportedWithTypeAndCount) {
  Forgot m;
  std::string msg = error_of([&] { (void)m.parameters(); });
  EXPECT_NE(msg.find("[Module] Forgot"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a Linear"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8 stray parameters in 2 tensors"), std::string::npos) << msg;  // 3*2 + 2
  // Every walk reports it, not only parameters(): an optimizer, a state dict, a move.
  EXPECT_THROW((void)m.state(), Error);
  EXPECT_THROW(m.to(Device::cpu()), Error);
  EXPECT_THROW(m.eval(), Error);
}

TEST(NnStrayFields, ParamFieldLeftOut) {
  ForgotParam m;
  std::string msg = error_of([&] { (void)m.named_parameters(); });
  EXPECT_NE(msg.find("ForgotParam"), std::string::npos) << msg;
  EXPECT_NE(msg.find("5 stray parameters in 1 tensors"), std::string::npos) << msg;
}

TEST(NnStrayFields, NestedModuleNamesTheModuleThatForgot) {
  Outer m;
  std::string msg = error_of([&] { optim::SGD opt(m.parameters(), {.lr = 0.1}); });
  EXPECT_NE(msg.find("[Module] Forgot has fields"), std::string::npos) << msg;
}

TEST(NnStrayFields, CompleteModelsAndCopiesPass) {
  Complete m;
  EXPECT_NO_THROW((void)m.parameters());
  EXPECT_EQ(m.parameters().size(), 2u + 2u + 2u + 4u);
  Complete copy = nn::deep_copy(m);
  EXPECT_NO_THROW((void)copy.state());
  nn::Sequential seq(nn::Linear({.in_features = 2, .out_features = 2}), nn::ReLU());
  EXPECT_NO_THROW((void)seq.parameters());
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4});
  EXPECT_NO_THROW((void)lstm.parameters());
}
