// SPDX-License-Identifier: MIT OR Apache-2.0
// multinomial: categorical sampling as a composite of public ops (rand, cumsum, topk), so it
// runs, seeded by the global generator, on every device.
//
// Note [Multinomial]: with replacement, a draw is the category k whose cumulative weight
// interval [cdf[k-1], cdf[k]) holds u * total (u uniform on [0, 1)): the count of cdf entries
// <= u * total, computed in f64; a zero-weight category has an empty interval and is never
// drawn (a draw rounded onto the total goes to the row's last non-zero category). Without
// replacement it is the exponential race: each category gets the key E / w (E ~ Exp(1)), and
// the num_samples smallest keys in increasing order are a draw of successive samples without
// replacement, each proportional to the weights left (as PyTorch's sequential definition).
#include <limits>

#include "core/backend.h"
#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln {

namespace {

/// Checks the weights' values (not possible on a device without data).
void check_weights(const Tensor& w, int64_t num_samples, bool replacement) {
  const char* op = "multinomial";
  KILN_CHECK(isfinite(w).all().item<bool>(), op, "probability tensor " << w.shape() << " contains inf or nan");
  KILN_CHECK((w >= 0).all().item<bool>(), op, "probability tensor " << w.shape() << " contains a negative element");
  const Tensor sums = w.sum({-1});
  KILN_CHECK((sums > 0).all().item<bool>(), op, "a row of the probability tensor " << w.shape() << " sums to zero");
  if (!replacement) {
    const int64_t fewest = (w > 0).sum({-1}).min().item<int64_t>();
    KILN_CHECK(num_samples <= fewest, op,
               "cannot draw " << num_samples << " samples without replacement from a row with only " << fewest
                              << " non-zero categories (probabilities " << w.shape() << ")");
  }
}

}  // namespace

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  const char* op = "multinomial";
  KILN_CHECK(probs.defined(), op, "expects a defined probability tensor");
  KILN_CHECK(probs.dim() == 1 || probs.dim() == 2, op, "expects probabilities [C] or [N, C], got " << probs.shape());
  KILN_CHECK(is_floating(probs.dtype()), op,
             "expects floating probabilities, got " << dtype_name(probs.dtype()) << " " << probs.shape());
  KILN_CHECK(num_samples > 0, op, "num_samples must be positive, got " << num_samples);
  const int64_t cats = probs.size(-1);
  KILN_CHECK(cats > 0, op, "expects at least one category, got probabilities " << probs.shape());
  KILN_CHECK(replacement || num_samples <= cats, op,
             "cannot draw " << num_samples << " samples without replacement from " << cats << " categories");
  const Device dev = probs.device();
  const TensorOptions f64_opts{.dtype = DType::F64, .device = dev};
  Tensor w = (probs.dim() == 1 ? probs.unsqueeze(0) : probs).detach().to(DType::F64);
  const int64_t rows = w.size(0);
  if (rows == 0)
    return empty(probs.dim() == 1 ? Shape{num_samples} : Shape{0, num_samples}, {.dtype = i64, .device = dev});
  if (dev.backend()->has_data()) check_weights(w, num_samples, replacement);
  Tensor out;
  if (replacement) {
    const Tensor cdf = cumsum(w, 1);                                                         // [N, C]
    const Tensor target = rand({rows, num_samples}, f64_opts) * cdf.narrow(1, cats - 1, 1);  // [N, S]
    out = (cdf.unsqueeze(1) <= target.unsqueeze(2)).sum({2});                                // [N, S] counts
    // The last category with a positive weight bounds a draw rounded onto the total.
    const Tensor last = (arange(cats, i64, dev) * (w > 0).to(i64)).amax({1}, true);  // [N, 1]
    out = minimum(out, last);
  } else {
    const Tensor e = -log1p(-rand({rows, cats}, f64_opts));  // Exp(1), finite: u < 1
    const Tensor keys = where(w > 0, e / w, std::numeric_limits<double>::infinity());
    out = topk(keys, num_samples, 1, /*largest=*/false, /*sorted=*/true).second;
  }
  out = out.to(i64);
  return probs.dim() == 1 ? out.squeeze({0}) : out;
}

}  // namespace kiln
