// SPDX-License-Identifier: MIT OR Apache-2.0
#include "kiln/nn/module.h"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <set>
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
  m.check_fields();
  Walker w(Walker::Fn{});
  w.owned_ = std::move(f);
  if (w.enter("", m)) {
    m.visit(w);
    w.leave("", m);
  }
}

void walk_unchecked(Module& m, Walker::Fn f, Walker::ModFn mf = {}) {
  Walker w(std::move(f), std::move(mf));
  if (w.enter("", m)) {
    m.visit(w);
    w.leave("", m);
  }
}

void walk(Module& m, Walker::Fn f, Walker::ModFn mf = {}) {
  m.check_fields();
  Walker w(std::move(f), std::move(mf));
  if (w.enter("", m)) {
    m.visit(w);
    w.leave("", m);
  }
}

std::string strip(const std::string& name) { return name.size() > 0 && name[0] == '.' ? name.substr(1) : name; }

}  // namespace

// Note [Stray fields]
// A Param, Buffer or module field that KILN_VISIT does not list is invisible to everything that
// walks the model: it would train with no optimizer step and be neither saved nor loaded. Every
// Param, Buffer and Module registers its address while it lives. On the first walk over a model,
// check_fields visits it, and for each module reached (with KILN_VISIT's sizeof, so its bytes are
// known) looks up the registered objects inside those bytes: each one visit did not reach is a
// stray field. Objects on the heap (std::vector elements, modules held by pointer) are not inside
// any module's bytes, so a model may keep a module it does not own behind a pointer.
namespace detail {
namespace {
struct FieldRegistry {
  std::mutex mu;
  std::map<const void*, int> live;  // address -> FieldKind
};
FieldRegistry& registry() {
  static auto* r = new FieldRegistry;  // never destroyed: fields may outlive static destructors
  return *r;
}
}  // namespace

void register_field(const void* p, int kind) noexcept {
  FieldRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  try {
    r.live[p] = kind;
  } catch (...) {  // out of memory: the field goes unchecked
  }
}

void unregister_field(const void* p) noexcept {
  FieldRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.live.erase(p);
}
}  // namespace detail

namespace {
/// Collects every module and tensor field that visit reaches, without checking.
struct Reach final : Visitor {
  std::set<const void*> tensors;
  std::vector<Module*> modules;
  void tensor(std::string_view, Tensor& t, bool) override { tensors.insert(static_cast<const void*>(&t)); }
  bool enter(std::string_view, Module& m) override {
    modules.push_back(&m);
    return true;
  }
};

struct Range {
  const char* begin;
  const char* end;
  bool contains(const void* p) const {
    auto* c = static_cast<const char*>(p);
    return c >= begin && c < end;
  }
};

Range range_of(const Module& m) {
  auto* b = static_cast<const char*>(dynamic_cast<const void*>(&m));
  return {b, b + m.visited_object_size()};
}

/// Parameter tensors and elements of a module, without checking its fields.
std::pair<int64_t, int64_t> count_params(Module& m) {
  std::pair<int64_t, int64_t> n{0, 0};
  walk_unchecked(m, [&](const std::string&, Tensor& t, bool p) {
    if (!p) return;
    ++n.first;
    n.second += t.numel();
  });
  return n;
}
}  // namespace

void Module::check_fields() {
  if (fields_checked_) return;
  Reach reach;
  reach.enter("", *this);
  visit(reach);
  std::set<const void*> reached_modules(reach.modules.begin(), reach.modules.end());
  // Stray objects: (address, kind), outermost first; the type of the module whose bytes hold each.
  std::map<const void*, std::pair<int, const Module*>> stray;
  {
    detail::FieldRegistry& r = detail::registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const Module* m : reach.modules) {
      const Range rg = range_of(*m);
      if (rg.begin == rg.end) continue;
      for (auto it = r.live.lower_bound(rg.begin); it != r.live.end() && rg.contains(it->first); ++it) {
        if (it->first == static_cast<const void*>(m) || dynamic_cast<const void*>(m) == it->first) continue;
        const bool is_module = it->second == detail::kModuleField;
        if (is_module ? reached_modules.count(it->first) : reach.tensors.count(it->first)) continue;
        if (!is_module && !static_cast<const Tensor*>(it->first)->defined()) continue;
        auto [pos, fresh] = stray.try_emplace(it->first, it->second, m);
        // Keep the innermost module reached that holds it (the one whose KILN_VISIT misses it).
        if (!fresh && range_of(*pos->second.second).contains(m)) pos->second.second = m;
      }
    }
  }
  // Drop objects inside a stray module (they are counted with it).
  std::vector<Range> stray_ranges;
  for (auto& [p, km] : stray)
    if (km.first == detail::kModuleField) stray_ranges.push_back(range_of(*static_cast<const Module*>(p)));
  int64_t tensors = 0, elements = 0, buffers = 0;
  std::string owner, what;
  for (auto& [p, km] : stray) {
    bool inner = false;
    for (const Range& rg : stray_ranges) inner |= rg.contains(p) && rg.begin != static_cast<const char*>(p);
    if (inner) continue;
    if (owner.empty()) owner = km.second->type_name();
    if (km.first == detail::kModuleField) {
      auto* sm = const_cast<Module*>(static_cast<const Module*>(p));
      auto [t, e] = count_params(*sm);
      tensors += t;
      elements += e;
      what += (what.empty() ? "" : ", ") + std::string("a ") + sm->type_name();
    } else if (km.first == detail::kParamField) {
      ++tensors;
      elements += static_cast<const Tensor*>(p)->numel();
      what += (what.empty() ? "" : ", ") + std::string("a Param");
    } else {
      ++buffers;
      what += (what.empty() ? "" : ", ") + std::string("a Buffer");
    }
  }
  KILN_CHECK(what.empty(), "Module",
             owner << " has fields that its KILN_VISIT does not list (" << what << "), holding " << elements
                   << " stray parameters in " << tensors << " tensors and " << buffers
                   << " buffers: they would not be trained, saved, loaded or moved. List every Param, "
                      "Buffer and sub-module field in KILN_VISIT("
                   << owner << ", ...), or hold a module it does not own through a pointer");
  for (Module* m : reach.modules) m->fields_checked_ = true;
}

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
