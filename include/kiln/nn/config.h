// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Configs as JSON. A config is a plain aggregate (designated initialisers:
// `Linear({.in_features = 784, .out_features = 10})`) that lists its fields with KILN_CONFIG:
//
//   struct MlpConfig {
//     int64_t in = 784;
//     std::vector<int64_t> hidden = {128, 64};
//     double dropout = 0.1;
//     kiln::nn::LinearConfig head{.in_features = 64, .out_features = 10};  // nested configs are JSON objects
//     KILN_CONFIG(MlpConfig, in, hidden, dropout, head)
//   };
//
//   std::string text = kiln::nn::to_json(cfg);   // {"type": "Mlp", "config": {"in": 784, ...}}
//   auto back = kiln::nn::from_json<MlpConfig>(text);
//   kiln::nn::save_config(cfg, "mlp.json");      // atomic write
//   auto loaded = kiln::nn::load_config<MlpConfig>("mlp.json");
//
// The JSON is {"type": <name>, "config": {<field>: <value>, ...}} where <name> is the struct's
// name without a trailing "Config" ("LinearConfig" -> "Linear"). Loading checks the type name,
// keeps the default of a missing field (like serde's `default`), and throws kiln::Error naming
// the field for an unknown key, a value of the wrong type or an out-of-range integer.
//
// Field types: bool, integers, float/double (non-finite values as "inf", "-inf", "nan"),
// std::string, DType ("f32"), std::vector<int64_t>, Shape, std::vector<double>, the functional
// argument types (IntList, Padding, OutputSize, ScaleList), enums (as an int, or as a string
// when KILN_CONFIG_ENUM names them), std::optional of any of these (null = nullopt), std::vector
// of nested configs, and nested configs. A struct you cannot edit is made a config from
// outside with KILN_CONFIG_EXTERNAL in its namespace.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/nn/functional/common.h"
#include "kiln/nn/functional/conv.h"
#include "kiln/nn/functional/pool.h"
#include "kiln/nn/module.h"
#include "kiln/shape.h"

namespace kiln::nn {

/// One named value of an enum written as a string by KILN_CONFIG_ENUM.
struct ConfigEnumName {
  int64_t value;
  const char* name;
};

/// What a config's `visit_config` calls for each field: a writer turns the fields into JSON,
/// a reader fills them from JSON. `field(name, x)` dispatches on the field's type to the
/// virtual leaf functions below (which the JSON code implements).
class ConfigVisitor {
 public:
  virtual ~ConfigVisitor() = default;

  // ---- leaves (implemented by the writer and the reader) -------------------------------------
  /// An integer that must lie in [lo, hi].
  virtual void int_value(std::string_view name, int64_t& v, int64_t lo, int64_t hi) = 0;
  virtual void float_value(std::string_view name, double& v) = 0;
  virtual void bool_value(std::string_view name, bool& v) = 0;
  virtual void string_value(std::string_view name, std::string& v) = 0;
  virtual void dtype_value(std::string_view name, DType& v) = 0;
  /// A list of ints; with `scalar_ok` a single value may be written/read as a bare int.
  virtual void int_list(std::string_view name, std::vector<int64_t>& v, bool scalar_ok) = 0;
  /// A list of numbers; with `scalar_ok` a single value may be a bare number.
  virtual void float_list(std::string_view name, std::vector<double>& v, bool scalar_ok) = 0;
  /// A list of ints or nulls (OutputSize); a single non-null value may be a bare int.
  virtual void optional_int_list(std::string_view name, std::vector<std::optional<int64_t>>& v) = 0;
  /// An int list, or a string when `text` is non-empty (conv Padding: 1, [1, 2] or "same").
  virtual void int_list_or_string(std::string_view name, std::vector<int64_t>& v, std::string& text) = 0;
  /// An enum: its value as a string from `names` (when n > 0) or as an int.
  virtual void enum_value(std::string_view name, int64_t& v, const ConfigEnumName* names, size_t n) = 0;

  /// What an optional field holds in the JSON.
  enum class Presence { Missing, Null, Value };
  /// Called for a std::optional field before its value: the writer writes null and answers
  /// Null when `is_null`, else Value; the reader answers Missing (key absent: keep the
  /// default), Null (JSON null) or Value (then the value is visited).
  virtual Presence optional_value(std::string_view name, bool is_null) = 0;
  /// A nested config: begin_object returns false when the reader has no such key (the
  /// nested config keeps its default and end_object is not called).
  virtual bool begin_object(std::string_view name) = 0;
  virtual void end_object() = 0;
  /// A list of nested configs: `n` is the size (set by the reader); elements are then visited
  /// as objects named "0", "1", ... Returns false when the reader has no such key.
  virtual bool begin_list(std::string_view name, size_t& n) = 0;
  virtual void end_list() = 0;

  // ---- dispatch on the field's type (used by KILN_CONFIG) -------------------------------------
  void field(std::string_view name, bool& v) { bool_value(name, v); }
  void field(std::string_view name, std::string& v) { string_value(name, v); }
  void field(std::string_view name, DType& v) { dtype_value(name, v); }
  void field(std::string_view name, std::vector<int64_t>& v) { int_list(name, v, false); }
  void field(std::string_view name, std::vector<double>& v) { float_list(name, v, false); }
  void field(std::string_view name, Shape& v) {
    std::vector<int64_t> x(v.begin(), v.end());
    int_list(name, x, false);
    v = Shape(x.begin(), x.end());
  }
  void field(std::string_view name, functional::IntList& v) {
    std::vector<int64_t> x(v.values().begin(), v.values().end());
    int_list(name, x, true);
    v = functional::IntList(Dims(x.begin(), x.end()));
  }
  void field(std::string_view name, functional::Padding& v) {
    std::vector<int64_t> x(v.values().values().begin(), v.values().values().end());
    std::string text = v.text();
    int_list_or_string(name, x, text);
    if (text.empty())
      v = functional::Padding(Dims(x.begin(), x.end()));
    else
      v = functional::Padding(std::move(text));
  }
  void field(std::string_view name, functional::OutputSize& v) {
    std::vector<std::optional<int64_t>> x = v.values();
    optional_int_list(name, x);
    v = functional::OutputSize(std::move(x));
  }
  void field(std::string_view name, functional::ScaleList& v) {
    std::vector<double> x = v.values();
    float_list(name, x, true);
    v = functional::ScaleList(std::move(x));
  }
  template <class T>
  void field(std::string_view name, std::optional<T>& v) {
    Presence p = optional_value(name, !v.has_value());
    if (p == Presence::Null) {
      v.reset();
    } else if (p == Presence::Value) {
      if (!v) v.emplace();
      field(name, *v);
    }
  }
  template <class T>
  void field(std::string_view name, T& v);
  template <class T>
  void field(std::string_view name, std::vector<T>& v);
};

/// Visits config `c` (a KILN_CONFIG struct or one with KILN_CONFIG_EXTERNAL).
template <class C>
void visit_config(ConfigVisitor& v, C& c);

namespace detail {
template <class>
inline constexpr bool kConfigFalse = false;

/// "LinearConfig" -> "Linear".
constexpr std::string_view config_display_name(std::string_view s) {
  constexpr std::string_view suffix = "Config";
  if (s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix) s.remove_suffix(suffix.size());
  return s;
}

template <class C>
concept HasMemberConfig = requires(C& c, ConfigVisitor& v) {
  c.visit_config(v);
  C::kiln_config_type_name();
};
template <class C>
concept HasExternalConfig = requires(C& c, ConfigVisitor& v) {
  kiln_visit_config(v, c);
  kiln_config_type_name(static_cast<C*>(nullptr));
};
template <class E>
concept HasEnumNames = requires(E* e) {
  kiln_config_enum_names(e);
};

/// The JSON work (src/nn/config_json.cpp).
std::string config_to_json(std::string_view type_name, const std::function<void(ConfigVisitor&)>& visit);
void config_from_json(std::string_view type_name, std::string_view text,
                      const std::function<void(ConfigVisitor&)>& visit);
void write_text_file_atomic(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);
}  // namespace detail

/// True for the types KILN_CONFIG or KILN_CONFIG_EXTERNAL made configs.
template <class C>
inline constexpr bool is_config_v = detail::HasMemberConfig<C> || detail::HasExternalConfig<C>;

/// The config's type name in the JSON ("Linear" for LinearConfig).
template <class C>
requires is_config_v<C> std::string_view config_type_name() {
  if constexpr (detail::HasMemberConfig<C>)
    return C::kiln_config_type_name();
  else
    return kiln_config_type_name(static_cast<C*>(nullptr));
}

template <class C>
void visit_config(ConfigVisitor& v, C& c) {
  if constexpr (detail::HasMemberConfig<C>)
    c.visit_config(v);
  else if constexpr (detail::HasExternalConfig<C>)
    kiln_visit_config(v, c);
  else
    static_assert(detail::kConfigFalse<C>, "not a config: add KILN_CONFIG(Type, fields...) to it");
}

template <class T>
void ConfigVisitor::field(std::string_view name, T& v) {
  if constexpr (std::is_integral_v<T>) {
    int64_t x = static_cast<int64_t>(v);
    constexpr int64_t hi = std::numeric_limits<T>::max() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                               ? std::numeric_limits<int64_t>::max()
                               : static_cast<int64_t>(std::numeric_limits<T>::max());
    int_value(name, x, static_cast<int64_t>(std::numeric_limits<T>::min()), hi);
    v = static_cast<T>(x);
  } else if constexpr (std::is_floating_point_v<T>) {
    double x = static_cast<double>(v);
    float_value(name, x);
    v = static_cast<T>(x);
  } else if constexpr (std::is_enum_v<T>) {
    int64_t x = static_cast<int64_t>(v);
    if constexpr (detail::HasEnumNames<T>) {
      const auto& names = kiln_config_enum_names(static_cast<T*>(nullptr));
      enum_value(name, x, names.data(), names.size());
    } else {
      enum_value(name, x, nullptr, 0);
    }
    v = static_cast<T>(x);
  } else if constexpr (is_config_v<T>) {
    if (begin_object(name)) {
      visit_config(*this, v);
      end_object();
    }
  } else {
    static_assert(detail::kConfigFalse<T>, "KILN_CONFIG: unsupported field type");
  }
}

template <class T>
void ConfigVisitor::field(std::string_view name, std::vector<T>& v) {
  static_assert(is_config_v<T>, "KILN_CONFIG: std::vector fields hold int64_t, double or configs");
  size_t n = v.size();
  if (!begin_list(name, n)) return;
  v.resize(n);
  for (size_t i = 0; i < n; ++i) field(std::to_string(i), v[i]);
  end_list();
}

/// The config as JSON text: {"type": "Linear", "config": {"in": 784, ...}} (fields in order).
template <class C>
requires is_config_v<C> std::string to_json(const C& c) {
  C copy = c;
  return detail::config_to_json(config_type_name<C>(), [&](ConfigVisitor& v) { visit_config(v, copy); });
}

/// A config read from JSON text written by to_json: the type name must match; missing fields
/// keep their defaults; unknown keys, wrong types and bad JSON throw kiln::Error naming them.
template <class C>
requires is_config_v<C> C from_json(std::string_view text) {
  C c{};
  detail::config_from_json(config_type_name<C>(), text, [&](ConfigVisitor& v) { visit_config(v, c); });
  return c;
}

/// Writes to_json(c) to `path` atomically (temporary file, fsync, rename).
template <class C>
requires is_config_v<C>
void save_config(const C& c, const std::string& path) { detail::write_text_file_atomic(path, to_json(c) + "\n"); }

/// Reads a config saved by save_config (errors as from_json, plus the path when unreadable).
template <class C>
requires is_config_v<C> C load_config(const std::string& path) { return from_json<C>(detail::read_text_file(path)); }

}  // namespace kiln::nn

/// Lists a config's fields inside its struct: `KILN_CONFIG(LinearConfig, in, out, bias, dtype)`.
/// Adds `visit_config(ConfigVisitor&)` and the JSON type name (the struct name less "Config");
/// the struct stays an aggregate. Up to 32 fields.
#define KILN_CONFIG(Type, ...)                                                                                    \
  void visit_config(::kiln::nn::ConfigVisitor& kiln_cv) { KILN_VISIT_FOR_EACH_(KILN_CONFIG_FIELD_, __VA_ARGS__) } \
  static constexpr ::std::string_view kiln_config_type_name() { return ::kiln::nn::detail::config_display_name(#Type); }

#define KILN_CONFIG_FIELD_(f) kiln_cv.field(#f, f);
#define KILN_CONFIG_EXT_FIELD_(f) kiln_cv.field(#f, kiln_c.f);

/// Makes a struct you cannot edit a config, from outside: write it in the struct's namespace,
/// `KILN_CONFIG_EXTERNAL(InterpolateOptions, "Upsample", size, scale_factor, mode)`.
#define KILN_CONFIG_EXTERNAL(Type, name, ...)                                       \
  inline void kiln_visit_config(::kiln::nn::ConfigVisitor& kiln_cv, Type& kiln_c) { \
    KILN_VISIT_FOR_EACH_(KILN_CONFIG_EXT_FIELD_, __VA_ARGS__)                       \
  }                                                                                 \
  inline ::std::string_view kiln_config_type_name(const Type*) { return name; }

/// Names an enum's values for configs, so they are written as strings; write it in the enum's
/// namespace: `KILN_CONFIG_ENUM(Act, {Act::Relu, "relu"}, {Act::Gelu, "gelu"})`.
#define KILN_CONFIG_ENUM(Enum, ...)                                                           \
  inline const std::vector<::kiln::nn::ConfigEnumName>& kiln_config_enum_names(const Enum*) { \
    using E = Enum;                                                                           \
    static const std::vector<::kiln::nn::ConfigEnumName> names = [] {                         \
      std::vector<std::pair<E, const char*>> v = {__VA_ARGS__};                               \
      std::vector<::kiln::nn::ConfigEnumName> r;                                              \
      for (auto& [e, s] : v) r.push_back({static_cast<int64_t>(e), s});                       \
      return r;                                                                               \
    }();                                                                                      \
    return names;                                                                             \
  }
