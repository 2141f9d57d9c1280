// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Modules: plain structs with named fields and a `visit` that lists them (docs/modules.md).
//
//   struct Mlp : kiln::nn::Module {
//     kiln::nn::Linear fc1, fc2;
//     Mlp(const kiln::Device& d) : fc1({.in_features = 784, .out_features = 128}, d), fc2({.in_features = 128,
//     .out_features = 10}, d) {} kiln::Tensor forward(const kiln::Tensor& x) { return fc2(kiln::relu(fc1(x))); }
//     KILN_VISIT(Mlp, fc1, fc2)
//   };
//
// `visit` drives everything that walks a model: parameters(), named_parameters() (PyTorch's
// dotted names: "fc1.weight"), buffers, to(device), train()/eval(), freeze(), printing and
// counting. Fields may be tensors (nn::Param for trainable parameters, nn::Buffer for state
// such as running statistics), other modules, std::vector of modules (named 0, 1, ... like
// torch.nn.ModuleList), std::optional of either, or anything else (ignored: configs, ints).
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::detail {
/// An op a layer keeps between inference calls (src/ops/prepared.h); opaque here.
struct PreparedOp;
}  // namespace kiln::detail

namespace kiln::nn {

namespace detail {
// Live Param, Buffer and Module objects by address, so that a field that KILN_VISIT does not
// list can be found (Note [Stray fields] in module.cpp).
void register_field(const void* p, int kind) noexcept;
void unregister_field(const void* p) noexcept;
enum FieldKind : int { kParamField = 0, kBufferField = 1, kModuleField = 2 };
}  // namespace detail

/// A trainable tensor field of a module (a handle, like Tensor).
class Param : public Tensor {
 public:
  Param() { detail::register_field(this, detail::kParamField); }
  Param(Tensor t) : Tensor(std::move(t)) {  // NOLINT(google-explicit-constructor)
    detail::register_field(this, detail::kParamField);
  }
  Param(const Param& o) : Tensor(o) { detail::register_field(this, detail::kParamField); }
  Param(Param&& o) noexcept : Tensor(std::move(o)) { detail::register_field(this, detail::kParamField); }
  Param& operator=(const Param&) = default;
  Param& operator=(Param&&) noexcept = default;
  ~Param() { detail::unregister_field(this); }
};

/// A non-trainable tensor field that belongs to the module's state (running statistics):
/// saved, loaded and moved with the module, never given to an optimizer.
class Buffer : public Tensor {
 public:
  Buffer() { detail::register_field(this, detail::kBufferField); }
  Buffer(Tensor t) : Tensor(std::move(t)) {  // NOLINT(google-explicit-constructor)
    detail::register_field(this, detail::kBufferField);
  }
  Buffer(const Buffer& o) : Tensor(o) { detail::register_field(this, detail::kBufferField); }
  Buffer(Buffer&& o) noexcept : Tensor(std::move(o)) { detail::register_field(this, detail::kBufferField); }
  Buffer& operator=(const Buffer&) = default;
  Buffer& operator=(Buffer&&) noexcept = default;
  ~Buffer() { detail::unregister_field(this); }
};

class Module;

/// What Module::visit calls for each field. Implementations walk, rename or replace tensors.
class Visitor {
 public:
  virtual ~Visitor() = default;
  /// A parameter (`is_param`) or buffer field named `name` in the current module.
  virtual void tensor(std::string_view name, Tensor& t, bool is_param) = 0;
  /// A sub-module: called before visiting it; return false to skip it.
  virtual bool enter(std::string_view /*name*/, Module& /*m*/) { return true; }
  virtual void leave(std::string_view /*name*/, Module& /*m*/) {}

  // Field dispatch used by KILN_VISIT.
  void field(std::string_view name, Param& t) { tensor(name, t, true); }
  void field(std::string_view name, Buffer& t) { tensor(name, t, false); }
  void field(std::string_view name, Tensor& t) { tensor(name, t, true); }
  void field(std::string_view name, Module& m);
  template <class M>
  requires std::is_base_of_v<Module, M> || std::is_same_v<M, Param> || std::is_same_v<M, Buffer>
  void field(std::string_view name, std::vector<M>& list) {
    for (size_t i = 0; i < list.size(); ++i) field(std::string(name) + "." + std::to_string(i), list[i]);
  }
  template <class M, size_t N>
  requires std::is_base_of_v<Module, M> || std::is_same_v<M, Param> || std::is_same_v<M, Buffer>
  void field(std::string_view name, std::array<M, N>& list) {
    for (size_t i = 0; i < N; ++i) field(std::string(name) + "." + std::to_string(i), list[i]);
  }
  template <class T>
  void field(std::string_view name, std::optional<T>& o) {
    if (o) field(name, *o);
  }
  template <class T>
  void field(std::string_view name, T& x) {  // sub-modules; configs and other plain fields are not visited
    if constexpr (std::is_base_of_v<Module, T>) field(name, static_cast<Module&>(x));
  }
};

/// Base of every layer and model. Subclasses list their fields with KILN_VISIT.
class Module {
 public:
  Module() { detail::register_field(this, detail::kModuleField); }
  Module(const Module& o) : training_(o.training_), frozen_(o.frozen_) {
    detail::register_field(this, detail::kModuleField);
  }
  Module& operator=(const Module& o) {
    training_ = o.training_;
    frozen_ = o.frozen_;
    return *this;
  }
  virtual ~Module() { detail::unregister_field(this); }
  /// Calls v.field(name, member) for every field (KILN_VISIT writes it).
  virtual void visit(Visitor& v) = 0;
  /// The module's type for printing ("Linear").
  virtual std::string type_name() const = 0;
  /// Extra text printed after the type name ("in=784, out=10").
  virtual std::string extra_repr() const { return ""; }
  /// sizeof the most derived type that wrote visit (KILN_VISIT writes it); 0: unknown, and
  /// its fields are not checked against visit.
  virtual size_t visited_object_size() const { return 0; }
  /// Throws kiln::Error when a Param, Buffer or sub-module field of this module (or of a module
  /// it visits) is not reached by visit: it would never be trained, saved or moved. Runs once
  /// per module object, on the first walk over it (parameters(), state(), to(), train(), ...).
  void check_fields();

  /// Trainable parameters, in field order (handles: updating them in place updates the model).
  std::vector<Tensor> parameters();
  /// (dotted name, parameter) in field order: "encoder.layers.0.attn.q_proj.weight".
  std::vector<std::pair<std::string, Tensor>> named_parameters();
  /// Buffers (running statistics) with their dotted names.
  std::vector<std::pair<std::string, Tensor>> named_buffers();
  /// Parameters and buffers, the state a checkpoint saves (PyTorch's state_dict names).
  std::vector<std::pair<std::string, Tensor>> state();
  /// Number of trainable elements.
  int64_t num_params();

  /// Moves every parameter and buffer to `device` (parameters keep tracking gradients when the
  /// device has autodiff and the module is not frozen). Returns *this.
  Module& to(const Device& device);
  /// Converts floating parameters and buffers to `dtype`.
  Module& to(DType dtype);
  /// Training mode (dropout active, batch norm uses batch statistics) for this module and all
  /// sub-modules; eval() switches it off.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  bool is_frozen() const { return frozen_; }
  /// Parameters stop (freeze) or start (unfreeze) tracking gradients.
  Module& freeze();
  Module& unfreeze();
  /// Replaces every parameter and buffer by a copy of its data (after `Model copy = model;`,
  /// which shares them): the two models no longer share state.
  Module& detach_copy();
  /// A tree with each module's type, parameter shapes and parameter counts.
  std::string str();

 protected:
  /// A parameter tensor on `device`, tracking gradients when the device has autodiff.
  static Tensor make_param(Tensor data, const Device& device);

 private:
  bool training_ = true;
  bool frozen_ = false;
  bool fields_checked_ = false;
};

/// A deep copy of a module: `auto copy = nn::deep_copy(model);`.
template <class M>
requires std::is_base_of_v<Module, M> M deep_copy(const M& m) {
  M c = m;
  c.detach_copy();
  return c;
}

}  // namespace kiln::nn

/// Lists a module's fields: KILN_VISIT(TypeName, field1, field2, ...) inside the struct.
#define KILN_VISIT(Type, ...)                                                                                        \
  void visit(::kiln::nn::Visitor& kiln_v) override{KILN_VISIT_FOR_EACH_(KILN_VISIT_FIELD_, __VA_ARGS__)} std::string \
  type_name() const override {                                                                                       \
    return #Type;                                                                                                    \
  }                                                                                                                  \
  size_t visited_object_size() const override { return sizeof(*this); }

#define KILN_VISIT_FIELD_(f) kiln_v.field(#f, f);
// Applies M to each of up to 32 arguments.
#define KILN_VISIT_FOR_EACH_(M, ...)                                                                            \
  KILN_VISIT_FE_PICK_(__VA_ARGS__, KILN_VISIT_FE_32, KILN_VISIT_FE_31, KILN_VISIT_FE_30, KILN_VISIT_FE_29,      \
                      KILN_VISIT_FE_28, KILN_VISIT_FE_27, KILN_VISIT_FE_26, KILN_VISIT_FE_25, KILN_VISIT_FE_24, \
                      KILN_VISIT_FE_23, KILN_VISIT_FE_22, KILN_VISIT_FE_21, KILN_VISIT_FE_20, KILN_VISIT_FE_19, \
                      KILN_VISIT_FE_18, KILN_VISIT_FE_17, KILN_VISIT_FE_16, KILN_VISIT_FE_15, KILN_VISIT_FE_14, \
                      KILN_VISIT_FE_13, KILN_VISIT_FE_12, KILN_VISIT_FE_11, KILN_VISIT_FE_10, KILN_VISIT_FE_9,  \
                      KILN_VISIT_FE_8, KILN_VISIT_FE_7, KILN_VISIT_FE_6, KILN_VISIT_FE_5, KILN_VISIT_FE_4,      \
                      KILN_VISIT_FE_3, KILN_VISIT_FE_2, KILN_VISIT_FE_1)                                        \
  (M, __VA_ARGS__)
#define KILN_VISIT_FE_1(M, a) M(a)
#define KILN_VISIT_FE_2(M, a, ...) M(a) KILN_VISIT_FE_1(M, __VA_ARGS__)
#define KILN_VISIT_FE_3(M, a, ...) M(a) KILN_VISIT_FE_2(M, __VA_ARGS__)
#define KILN_VISIT_FE_4(M, a, ...) M(a) KILN_VISIT_FE_3(M, __VA_ARGS__)
#define KILN_VISIT_FE_5(M, a, ...) M(a) KILN_VISIT_FE_4(M, __VA_ARGS__)
#define KILN_VISIT_FE_6(M, a, ...) M(a) KILN_VISIT_FE_5(M, __VA_ARGS__)
#define KILN_VISIT_FE_7(M, a, ...) M(a) KILN_VISIT_FE_6(M, __VA_ARGS__)
#define KILN_VISIT_FE_8(M, a, ...) M(a) KILN_VISIT_FE_7(M, __VA_ARGS__)
#define KILN_VISIT_FE_9(M, a, ...) M(a) KILN_VISIT_FE_8(M, __VA_ARGS__)
#define KILN_VISIT_FE_10(M, a, ...) M(a) KILN_VISIT_FE_9(M, __VA_ARGS__)
#define KILN_VISIT_FE_11(M, a, ...) M(a) KILN_VISIT_FE_10(M, __VA_ARGS__)
#define KILN_VISIT_FE_12(M, a, ...) M(a) KILN_VISIT_FE_11(M, __VA_ARGS__)
#define KILN_VISIT_FE_13(M, a, ...) M(a) KILN_VISIT_FE_12(M, __VA_ARGS__)
#define KILN_VISIT_FE_14(M, a, ...) M(a) KILN_VISIT_FE_13(M, __VA_ARGS__)
#define KILN_VISIT_FE_15(M, a, ...) M(a) KILN_VISIT_FE_14(M, __VA_ARGS__)
#define KILN_VISIT_FE_16(M, a, ...) M(a) KILN_VISIT_FE_15(M, __VA_ARGS__)
#define KILN_VISIT_FE_17(M, a, ...) M(a) KILN_VISIT_FE_16(M, __VA_ARGS__)
#define KILN_VISIT_FE_18(M, a, ...) M(a) KILN_VISIT_FE_17(M, __VA_ARGS__)
#define KILN_VISIT_FE_19(M, a, ...) M(a) KILN_VISIT_FE_18(M, __VA_ARGS__)
#define KILN_VISIT_FE_20(M, a, ...) M(a) KILN_VISIT_FE_19(M, __VA_ARGS__)
#define KILN_VISIT_FE_21(M, a, ...) M(a) KILN_VISIT_FE_20(M, __VA_ARGS__)
#define KILN_VISIT_FE_22(M, a, ...) M(a) KILN_VISIT_FE_21(M, __VA_ARGS__)
#define KILN_VISIT_FE_23(M, a, ...) M(a) KILN_VISIT_FE_22(M, __VA_ARGS__)
#define KILN_VISIT_FE_24(M, a, ...) M(a) KILN_VISIT_FE_23(M, __VA_ARGS__)
#define KILN_VISIT_FE_25(M, a, ...) M(a) KILN_VISIT_FE_24(M, __VA_ARGS__)
#define KILN_VISIT_FE_26(M, a, ...) M(a) KILN_VISIT_FE_25(M, __VA_ARGS__)
#define KILN_VISIT_FE_27(M, a, ...) M(a) KILN_VISIT_FE_26(M, __VA_ARGS__)
#define KILN_VISIT_FE_28(M, a, ...) M(a) KILN_VISIT_FE_27(M, __VA_ARGS__)
#define KILN_VISIT_FE_29(M, a, ...) M(a) KILN_VISIT_FE_28(M, __VA_ARGS__)
#define KILN_VISIT_FE_30(M, a, ...) M(a) KILN_VISIT_FE_29(M, __VA_ARGS__)
#define KILN_VISIT_FE_31(M, a, ...) M(a) KILN_VISIT_FE_30(M, __VA_ARGS__)
#define KILN_VISIT_FE_32(M, a, ...) M(a) KILN_VISIT_FE_31(M, __VA_ARGS__)
#define KILN_VISIT_FE_PICK_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, \
                            _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, N, ...)                        \
  N
