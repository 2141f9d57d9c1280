// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/module.h"

#include <functional>
#include <sstream>

#include "kiln/autodiff.h"
#include "kiln/ops.h"

namespace kiln::nn {

void Visitor::field(std::string_view name, Module& m) {
  if (!enter(name, m)) return;
  m.visit(*this);
  leave(name, m);
}

namespace {

/// Walks tensors with their dotted names; `f(name, tensor, is_param)`.
class Walker final : public Visitor {
 public:
  using Fn = std::function<void(const std::string&, Tensor&, bool)>;
  using OwnedFn = std::function<void(Module& owner, Tensor&, bool)>;
  using ModFn = std::function<void(Module&)>;
  explicit Walker(Fn f, ModFn mf = {}) : f_(std::move(f)), mf_(std::move(mf)) {}
  void tensor(std::string_view name, Tensor& t, bool is_param) override {
    if (!t.defined()) return;
    if (f_) f_(prefix_ + std::string(name), t, is_param);
    if (owned_) owned_(*mods_.back(), t, is_param);
  }
  OwnedFn owned_;
  bool enter(std::string_view name, Module& m) override {
    stack_.push_back(prefix_.size());
    prefix_ += std::string(name) + ".";
    mods_.push_back(&m);
    if (mf_) mf_(m);
    return true;
  }
  void leave(std::string_view, Module&) override {
    prefix_.resize(stack_.back());
    stack_.pop_back();
    mods_.pop_back();
  }

 private:
  Fn f_;
  ModFn mf_;
  std::string prefix_;
  std::vector<size_t> stack_;
  std::vector<Module*> mods_;
};

/// Walks tensors with the module that owns each: `f(owner, tensor, is_param)`.
void walk_owned(Module& m, Walker::OwnedFn f) {
  Walker w(Walker::Fn{});
  w.owned_ = std::move(f);
  if (w.enter("", m)) {
    m.visit(w);
    w.leave("", m);
  }
}

void walk(Module& m, Walker::Fn f, Walker::ModFn mf = {}) {
  Walker w(std::move(f), std::move(mf));
  if (w.enter("", m)) {
    m.visit(w);
    w.leave("", m);
  }
}

std::string strip(const std::string& name) { return name.size() > 0 && name[0] == '.' ? name.substr(1) : name; }

}  // namespace

std::vector<Tensor> Module::parameters() {
  std::vector<Tensor> out;
  walk(*this, [&](const std::string&, Tensor& t, bool p) {
    if (p) out.push_back(t);
  });
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() {
  std::vector<std::pair<std::string, Tensor>> out;
  walk(*this, [&](const std::string& n, Tensor& t, bool p) {
    if (p) out.emplace_back(strip(n), t);
  });
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() {
  std::vector<std::pair<std::string, Tensor>> out;
  walk(*this, [&](const std::string& n, Tensor& t, bool p) {
    if (!p) out.emplace_back(strip(n), t);
  });
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::state() {
  std::vector<std::pair<std::string, Tensor>> out;
  walk(*this, [&](const std::string& n, Tensor& t, bool) { out.emplace_back(strip(n), t); });
  return out;
}

int64_t Module::num_params() {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

Module& Module::to(const Device& device) {
  walk_owned(*this, [&](Module& owner, Tensor& t, bool p) {
    Tensor moved = t.to(device).detach();
    if (p && device.has_autodiff() && !owner.frozen_ && is_floating(moved.dtype())) moved.require_grad();
    t = moved;
  });
  return *this;
}

Module& Module::to(DType dtype) {
  walk(*this, [&](const std::string&, Tensor& t, bool p) {
    if (!is_floating(t.dtype())) return;
    const bool track = t.requires_grad();
    Tensor c = t.to(dtype).detach();
    if (track) c.require_grad();
    t = c;
  });
  return *this;
}

Module& Module::train(bool on) {
  training_ = on;
  walk(
      *this, [](const std::string&, Tensor&, bool) {}, [on](Module& m) { m.training_ = on; });
  return *this;
}

Module& Module::freeze() {
  frozen_ = true;
  walk(
      *this,
      [](const std::string&, Tensor& t, bool p) {
        if (p && t.requires_grad()) t = t.detach();
      },
      [](Module& m) { m.frozen_ = true; });
  return *this;
}

Module& Module::unfreeze() {
  frozen_ = false;
  walk(
      *this,
      [](const std::string&, Tensor& t, bool p) {
        if (p && t.device().has_autodiff() && is_floating(t.dtype()) && !t.requires_grad())
          t = t.detach().require_grad();
      },
      [](Module& m) { m.frozen_ = false; });
  return *this;
}

Module& Module::detach_copy() {
  walk(*this, [](const std::string&, Tensor& t, bool) {
    const bool track = t.requires_grad();
    Tensor c = t.detach().clone();
    if (track) c.require_grad();
    t = c;
  });
  return *this;
}

std::string Module::str() {
  std::ostringstream os;
  struct Printer final : Visitor {
    std::ostringstream& os;
    int depth = 0;
    explicit Printer(std::ostringstream& o) : os(o) {}
    void tensor(std::string_view name, Tensor& t, bool is_param) override {
      if (!t.defined()) return;
      os << std::string(static_cast<size_t>(2 * depth), ' ') << name << ": " << (is_param ? "" : "buffer ")
         << dtype_name(t.dtype()).data() << to_string(t.shape()) << "\n";
    }
    bool enter(std::string_view name, Module& m) override {
      os << std::string(static_cast<size_t>(2 * depth), ' ') << "(" << name << "): " << m.type_name() << "("
         << m.extra_repr() << ")  [" << m.num_params() << " params]\n";
      ++depth;
      return true;
    }
    void leave(std::string_view, Module&) override { --depth; }
  } p(os);
  os << type_name() << "(" << extra_repr() << ")  [" << num_params() << " params]\n";
  p.depth = 1;
  visit(p);
  return os.str();
}

Tensor Module::make_param(Tensor data, const Device& device) {
  Tensor t = data.to(device).detach();
  if (device.has_autodiff() && is_floating(t.dtype())) t.require_grad();
  return t;
}

}  // namespace kiln::nn
