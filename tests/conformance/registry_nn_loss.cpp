// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance registry of the loss functions (cases: scripts/golden_cases/nn_loss.py). Each
// entry returns the loss and the gradients of sum(loss) with respect to its first `ng` inputs
// (attribute, default 1), computed on Device::cpu().autodiff(). On the null device only the
// forward runs (the gradients are stand-ins of the inputs' shapes).
#include <functional>

#include "conformance/registry_util.h"
#include "kiln/autodiff.h"
#include "kiln/nn/loss.h"

namespace kiln::conformance {
namespace {
using namespace reg;
namespace F = kiln::nn::functional;
std::string red(At at) { return at.str("red"); }

const RegistryPart part({
    OP(mse_loss) {
      return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
  return F::mse_loss(x[0], x[1], red(at)); });
}  // namespace
END, OP(l1_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) { return F::l1_loss(x[0], x[1], red(at)); });
}
END, OP(lp_loss) {
  return with_grads(in, at, dev,
                    [&](const std::vector<Tensor>& x) { return F::lp_loss(x[0], x[1], at.f_or("p", 2.0), red(at)); });
}
END, OP(smooth_l1_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::smooth_l1_loss(x[0], x[1], red(at), at.f_or("beta", 1.0));
  });
}
END, OP(huber_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::huber_loss(x[0], x[1], red(at), at.f_or("delta", 1.0));
  });
}
END, OP(nll_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::nll_loss(x[0], x[1], {.weight = x[2], .ignore_index = at.i_or("ii", -100), .reduction = red(at)});
  });
}
END, OP(cross_entropy) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::cross_entropy(x[0], x[1],
                            {.weight = x[2],
                             .ignore_index = at.i_or("ii", -100),
                             .reduction = red(at),
                             .label_smoothing = at.f_or("ls", 0.0)});
  });
}
END, OP(binary_cross_entropy) {
  return with_grads(in, at, dev,
                    [&](const std::vector<Tensor>& x) { return F::binary_cross_entropy(x[0], x[1], x[2], red(at)); });
}
END, OP(binary_cross_entropy_with_logits) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::binary_cross_entropy_with_logits(x[0], x[1], {.weight = x[2], .pos_weight = x[3], .reduction = red(at)});
  });
}
END, OP(kl_div) {
  return with_grads(in, at, dev,
                    [&](const std::vector<Tensor>& x) { return F::kl_div(x[0], x[1], red(at), at.b("lt")); });
}
END, OP(poisson_nll_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::poisson_nll_loss(x[0], x[1],
                               {.log_input = at.b("log_input", true),
                                .full = at.b("full"),
                                .eps = at.f_or("eps", 1e-8),
                                .reduction = red(at)});
  });
}
END, OP(cosine_embedding_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::cosine_embedding_loss(x[0], x[1], x[2], at.f_or("margin", 0.0), red(at));
  });
}
END, OP(margin_ranking_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::margin_ranking_loss(x[0], x[1], x[2], at.f_or("margin", 0.0), red(at));
  });
}
END, OP(hinge_embedding_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::hinge_embedding_loss(x[0], x[1], at.f_or("margin", 1.0), red(at));
  });
}
END, OP(triplet_margin_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::triplet_margin_loss(x[0], x[1], x[2],
                                  {.margin = at.f_or("margin", 1.0),
                                   .p = at.f_or("p", 2.0),
                                   .eps = at.f_or("eps", 1e-6),
                                   .swap = at.b("swap"),
                                   .reduction = red(at)});
  });
}
END, OP(soft_margin_loss) {
  return with_grads(in, at, dev,
                    [&](const std::vector<Tensor>& x) { return F::soft_margin_loss(x[0], x[1], red(at)); });
}
END, OP(multilabel_soft_margin_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::multilabel_soft_margin_loss(x[0], x[1], x[2], red(at));
  });
}
END, OP(multi_margin_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::multi_margin_loss(
        x[0], x[1], {.p = at.i_or("p", 1), .margin = at.f_or("margin", 1.0), .weight = x[2], .reduction = red(at)});
  });
}
END, OP(gaussian_nll_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    return F::gaussian_nll_loss(x[0], x[1], x[2],
                                {.full = at.b("full"), .eps = at.f_or("eps", 1e-6), .reduction = red(at)});
  });
}
END, OP(ctc_loss) {
  return with_grads(in, at, dev, [&](const std::vector<Tensor>& x) {
    Tensor lp = log_softmax(x[0], x[0].dim() == 3 ? 2 : 1);
    return F::ctc_loss(lp, x[1], x[2], x[3],
                       {.blank = at.i_or("blank", 0), .reduction = red(at), .zero_infinity = at.b("zi")});
  });
}
END,
}  // namespace kiln::conformance
);

}  // namespace
}  // namespace kiln::conformance
