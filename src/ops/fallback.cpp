// SPDX-License-Identifier: MIT OR Apache-2.0
// Note [Fallback]: a backend comes up op by op. Backend::supports says what it runs itself;
// execute_op runs any other op on the CPU backend: each distinct buffer the op reads or writes
// is copied down whole (so the descriptors' offsets and strides stay valid, and an output that
// aliases an input stays one buffer), the CPU kernel runs, and the outputs are copied back up.
// Before that, an op with a composite form (composite_of, src/ops/composites.cpp) runs as its
// pieces on the device itself, which keeps the data there. Every fallback is counted per device
// and op (fallback_counts), so a new backend's list of fallbacks is its to-do list.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {
namespace {

std::mutex g_mu;
std::vector<std::pair<std::string, int64_t>> g_counts;  // few distinct entries: a linear scan

/// KILN_FALLBACK_DEBUG: 0 off, 1 on (counts by op), 2 counts by op and dtypes, 3 by op and
/// operands (dtype, shape, strides).
int debug_level() {
  static const int level = [] {
    const char* e = std::getenv("KILN_FALLBACK_DEBUG");
    if (!e || !*e || std::string(e) == "0") return 0;
    return std::string(e) == "2" ? 2 : std::string(e) == "3" ? 3 : 1;
  }();
  return level;
}

bool debug_enabled() { return debug_level() > 0; }

/// " (f32, i64 -> f32)": the dtypes of op's operands, with `shapes` their shapes and strides too
/// (" (f32[2, 3]/[3, 1] -> f32[2, 3]/[3, 1])").
std::string operands_of(const ir::Op& op, bool shapes) {
  // Appended piecewise: GCC 12 warns (-Wrestrict) on const char* + std::string here.
  auto one = [&](const ir::TensorDesc& d) {
    std::string t = dtype_name(d.dtype).data();
    if (!shapes) return t;
    t += to_string(d.shape);
    t += '/';
    t += to_string(Shape(d.strides.begin(), d.strides.end()));
    return t;
  };
  std::string s = " (";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    s += i ? ", " : "";
    s += one(op.inputs[i]);
  }
  s += " ->";
  for (const ir::TensorDesc& d : op.outputs) {
    s += ' ';
    s += one(d);
  }
  return s + ")";
}

/// Under KILN_FALLBACK_DEBUG, at exit: every fallback counted, most frequent first, and totals.
void print_summary() {
  std::vector<std::pair<std::string, int64_t>> c = fallback_counts();
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  int64_t total = 0;
  for (const auto& [k, n] : c) total += n;
  std::fprintf(stderr, "kiln: fallbacks: %zu kinds, %lld ops\n", c.size(), static_cast<long long>(total));
  for (const auto& [k, n] : c) std::fprintf(stderr, "kiln:   %8lld  %s\n", static_cast<long long>(n), k.c_str());
}

void count(const Backend& b, const ir::Op& op, const char* how) {
  std::string key = b.name() + ": " + std::string(ir::op_name(op.kind)) + how;
  if (debug_level() >= 2) key += operands_of(op, debug_level() == 3);
  static const bool summary = debug_enabled() && std::atexit(print_summary) == 0;
  (void)summary;
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [k, n] : g_counts)
    if (k == key) {
      ++n;
      return;
    }
  g_counts.emplace_back(key, 1);
  if (debug_enabled())
    std::fprintf(stderr, "kiln: %s runs %s (not supported there)\n", key.c_str(),
                 *how ? "as its composite" : "on the cpu");
}

/// The CPU copy of buffer s, made (and filled from b) on first use.
struct Staged {
  Storage* dev;
  std::shared_ptr<Storage> host;
};
Storage* stage(Backend& b, Storage* s, std::vector<Staged>& staged) {
  for (const Staged& x : staged)
    if (x.dev == s) return x.host.get();
  std::shared_ptr<Storage> h = cpu_backend()->allocate(s->nbytes);
  if (s->nbytes) b.read(*s, 0, h->data, s->nbytes);
  h->stamp = s->stamp;  // the same contents: kernels' caches keyed on stamps stay valid
  staged.push_back({s, std::move(h)});
  return staged.back().host.get();
}

/// A tensor of dev over buffer s (which its caller owns) as descriptor d describes it.
Tensor view_of(Storage* s, const ir::TensorDesc& d, const Device& dev) {
  std::shared_ptr<Storage> unowned(std::shared_ptr<Storage>(), s);  // never frees s, never reused
  return tensor_over_storage(std::move(unowned), d.shape, d.strides, d.offset, d.dtype, dev);
}

/// Runs op as composite c on b's device: its pieces dispatch there (recording nothing), and
/// the results are copied into op's output buffers.
void run_composite(Backend* b, Composite c, const ir::Op& op, Storage* const* inputs, Storage* const* outputs) {
  const Device dev = Device(b).without_autodiff();
  std::vector<Tensor> in;
  for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(view_of(inputs[i], op.inputs[i], dev));
  std::vector<Tensor> res = c(op, in);
  KILN_ASSERT(res.size() == op.outputs.size());
  for (size_t i = 0; i < op.outputs.size(); ++i) view_of(outputs[i], op.outputs[i], dev).copy_(res[i]);
}

}  // namespace

void execute_op(Backend* b, const ir::Op& op, Storage* const* inputs, Storage* const* outputs) {
  if (b->supports(op)) {
    b->execute(op, inputs, outputs);
    return;
  }
  if (Composite c = composite_of(op)) {
    count(*b, op, " (composite)");
    run_composite(b, c, op, inputs, outputs);
    return;
  }
  KILN_CHECK(b->has_data(), ir::op_name(op.kind).data(),
             "the " << b->name() << " device neither supports this op nor holds data to run it elsewhere");
  count(*b, op, "");
  std::vector<Staged> staged;
  SmallVec<Storage*, 4> in, out;
  for (size_t i = 0; i < op.inputs.size(); ++i) in.push_back(stage(*b, inputs[i], staged));
  for (size_t i = 0; i < op.outputs.size(); ++i) out.push_back(stage(*b, outputs[i], staged));
  cpu_backend()->execute(op, in.data(), out.data());
  for (size_t i = 0; i < op.outputs.size(); ++i)
    if (outputs[i]->nbytes) b->write(*outputs[i], 0, out[i]->data, outputs[i]->nbytes);
}

std::vector<std::pair<std::string, int64_t>> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_counts.clear();
}

}  // namespace kiln
