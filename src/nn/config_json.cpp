// SPDX-License-Identifier: MIT OR Apache-2.0
// Configs as JSON (include/kiln/nn/config.h): a writer and a reader ConfigVisitor over
// nlohmann::ordered_json.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/nn/config.h"
#include "kiln/store.h"

namespace kiln::nn::detail {
namespace {

using json = nlohmann::ordered_json;
constexpr const char* kOp = "nn.config";
constexpr int kMaxDepth = 64;
constexpr size_t kMaxText = size_t{64} << 20;

const DType kAllDTypes[] = {DType::Bool, DType::U8,  DType::I8,  DType::I16, DType::I32, DType::I64, DType::F16,
                            DType::BF16, DType::F32, DType::F64, DType::U16, DType::U32, DType::U64};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", '" : "'") + v[i] + "'";
  return s;
}

json float_to_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// ---- writer -------------------------------------------------------------------------------

class Writer : public ConfigVisitor {
 public:
  explicit Writer(json& root) { stack_.push_back(&root); }

  void int_value(std::string_view name, int64_t& v, int64_t, int64_t) override { put(name, v); }
  void float_value(std::string_view name, double& v) override { put(name, float_to_json(v)); }
  void bool_value(std::string_view name, bool& v) override { put(name, v); }
  void string_value(std::string_view name, std::string& v) override { put(name, v); }
  void dtype_value(std::string_view name, DType& v) override { put(name, std::string(dtype_name(v))); }
  void int_list(std::string_view name, std::vector<int64_t>& v, bool scalar_ok) override {
    if (scalar_ok && v.size() == 1)
      put(name, v[0]);
    else
      put(name, json(v));
  }
  void float_list(std::string_view name, std::vector<double>& v, bool scalar_ok) override {
    if (scalar_ok && v.size() == 1) {
      put(name, float_to_json(v[0]));
      return;
    }
    json a = json::array();
    for (double x : v) a.push_back(float_to_json(x));
    put(name, std::move(a));
  }
  void optional_int_list(std::string_view name, std::vector<std::optional<int64_t>>& v) override {
    if (v.size() == 1 && v[0]) {
      put(name, *v[0]);
      return;
    }
    json a = json::array();
    for (auto& x : v) a.push_back(x ? json(*x) : json(nullptr));
    put(name, std::move(a));
  }
  void int_list_or_string(std::string_view name, std::vector<int64_t>& v, std::string& text) override {
    if (!text.empty())
      put(name, text);
    else
      int_list(name, v, true);
  }
  void enum_value(std::string_view name, int64_t& v, const ConfigEnumName* names, size_t n) override {
    for (size_t i = 0; i < n; ++i)
      if (names[i].value == v) {
        put(name, std::string(names[i].name));
        return;
      }
    put(name, v);
  }
  Presence optional_value(std::string_view name, bool is_null) override {
    if (!is_null) return Presence::Value;
    put(name, nullptr);
    return Presence::Null;
  }
  bool begin_object(std::string_view name) override {
    json& slot = put(name, json::object());
    stack_.push_back(&slot);
    return true;
  }
  void end_object() override { stack_.pop_back(); }
  bool begin_list(std::string_view name, size_t&) override {
    json& slot = put(name, json::array());
    stack_.push_back(&slot);
    return true;
  }
  void end_list() override { stack_.pop_back(); }

 private:
  json& put(std::string_view name, json v) {
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return top.back();
    }
    return top[std::string(name)] = std::move(v);
  }
  std::vector<json*> stack_;
};

// ---- reader -------------------------------------------------------------------------------

class Reader : public ConfigVisitor {
 public:
  Reader(const json& root, std::string type) : type_(std::move(type)) { frames_.push_back({&root, "", {}}); }

  void int_value(std::string_view name, int64_t& v, int64_t lo, int64_t hi) override {
    const json* j = find(name);
    if (!j) return;
    int64_t x = to_int(*j, name, "an integer");
    KILN_CHECK(x >= lo && x <= hi, kOp, prefix(name) << ": " << x << " is out of range [" << lo << ", " << hi << "]");
    v = x;
  }
  void float_value(std::string_view name, double& v) override {
    if (const json* j = find(name)) v = to_float(*j, name);
  }
  void bool_value(std::string_view name, bool& v) override {
    const json* j = find(name);
    if (!j) return;
    if (!j->is_boolean()) type_error(name, "a boolean", *j);
    v = j->get<bool>();
  }
  void string_value(std::string_view name, std::string& v) override {
    const json* j = find(name);
    if (!j) return;
    if (!j->is_string()) type_error(name, "a string", *j);
    v = j->get<std::string>();
  }
  void dtype_value(std::string_view name, DType& v) override {
    const json* j = find(name);
    if (!j) return;
    if (!j->is_string()) type_error(name, "a dtype name such as \"f32\"", *j);
    std::string s = j->get<std::string>();
    for (DType t : kAllDTypes)
      if (dtype_name(t) == s) {
        v = t;
        return;
      }
    KILN_CHECK(false, kOp,
               prefix(name) << ": unknown dtype \"" << s
                            << "\" (expected bool, u8, i8, i16, i32, i64, f16, bf16, f32 or f64)");
  }
  void int_list(std::string_view name, std::vector<int64_t>& v, bool scalar_ok) override {
    const json* j = find(name);
    if (!j) return;
    const char* expected = scalar_ok ? "an integer or a list of integers" : "a list of integers";
    if (scalar_ok && j->is_number()) {
      v = {to_int(*j, name, expected)};
      return;
    }
    if (!j->is_array()) type_error(name, expected, *j);
    std::vector<int64_t> r;
    for (const json& e : *j) r.push_back(to_int(e, name, expected));
    v = std::move(r);
  }
  void float_list(std::string_view name, std::vector<double>& v, bool scalar_ok) override {
    const json* j = find(name);
    if (!j) return;
    if (scalar_ok && (j->is_number() || j->is_string())) {
      v = {to_float(*j, name)};
      return;
    }
    if (!j->is_array()) type_error(name, scalar_ok ? "a number or a list of numbers" : "a list of numbers", *j);
    std::vector<double> r;
    for (const json& e : *j) r.push_back(to_float(e, name));
    v = std::move(r);
  }
  void optional_int_list(std::string_view name, std::vector<std::optional<int64_t>>& v) override {
    const json* j = find(name);
    if (!j) return;
    const char* expected = "an integer or a list of integers and nulls";
    if (j->is_number()) {
      v = {to_int(*j, name, expected)};
      return;
    }
    if (!j->is_array()) type_error(name, expected, *j);
    std::vector<std::optional<int64_t>> r;
    for (const json& e : *j)
      r.push_back(e.is_null() ? std::nullopt : std::optional<int64_t>(to_int(e, name, expected)));
    v = std::move(r);
  }
  void int_list_or_string(std::string_view name, std::vector<int64_t>& v, std::string& text) override {
    const json* j = find(name);
    if (!j) return;
    if (j->is_string()) {
      text = j->get<std::string>();
      KILN_CHECK(!text.empty(), kOp, prefix(name) << ": expected an integer, a list of integers or a non-empty string");
      v = {0};
      return;
    }
    text.clear();
    int_list(name, v, true);
  }
  void enum_value(std::string_view name, int64_t& v, const ConfigEnumName* names, size_t n) override {
    const json* j = find(name);
    if (!j) return;
    if (n > 0 && j->is_string()) {
      std::string s = j->get<std::string>();
      std::vector<std::string> known;
      for (size_t i = 0; i < n; ++i) {
        if (s == names[i].name) {
          v = names[i].value;
          return;
        }
        known.emplace_back(names[i].name);
      }
      KILN_CHECK(false, kOp, prefix(name) << ": unknown value \"" << s << "\" (expected one of " << join(known) << ")");
    }
    v = to_int(*j, name, n > 0 ? "an enum name (string)" : "an integer (enum value)");
  }
  Presence optional_value(std::string_view name, bool) override {
    const json* j = find(name);
    if (!j) return Presence::Missing;
    if (j->is_null()) return Presence::Null;
    return Presence::Value;
  }
  bool begin_object(std::string_view name) override {
    const json* j = find(name);
    if (!j) return false;
    if (!j->is_object()) type_error(name, "an object", *j);
    frames_.push_back({j, where(name), {}});
    return true;
  }
  void end_object() override {
    check_unknown(frames_.back());
    frames_.pop_back();
  }
  bool begin_list(std::string_view name, size_t& n) override {
    const json* j = find(name);
    if (!j) return false;
    if (!j->is_array()) type_error(name, "a list of objects", *j);
    n = j->size();
    frames_.push_back({j, where(name), {}});
    return true;
  }
  void end_list() override { frames_.pop_back(); }

  void finish() { check_unknown(frames_.front()); }

 private:
  struct Frame {
    const json* node;
    std::string path;
    std::set<std::string> seen;
  };

  std::string where(std::string_view name) const {
    const std::string& p = frames_.back().path;
    return (p.empty() ? std::string() : p + ".") + std::string(name);
  }
  std::string prefix(std::string_view name) const { return type_ + " field '" + where(name) + "'"; }

  const json* find(std::string_view name) {
    Frame& f = frames_.back();
    if (f.node->is_array()) {
      size_t i = std::stoul(std::string(name));
      return i < f.node->size() ? &(*f.node)[i] : nullptr;
    }
    std::string key(name);
    auto it = f.node->find(key);
    if (it == f.node->end()) return nullptr;
    f.seen.insert(key);
    return &*it;
  }

  void check_unknown(const Frame& f) const {
    if (!f.node->is_object()) return;
    std::vector<std::string> unknown, known(f.seen.begin(), f.seen.end());
    for (auto it = f.node->begin(); it != f.node->end(); ++it)
      if (!f.seen.count(it.key())) unknown.push_back(it.key());
    KILN_CHECK(unknown.empty(), kOp,
               type_ << ": unknown key" << (unknown.size() > 1 ? "s " : " ") << join(unknown)
                     << (f.path.empty() ? std::string() : " in '" + f.path + "'") << " (not a field of the config)");
  }

  [[noreturn]] void type_error(std::string_view name, const char* expected, const json& j) const {
    std::string got = j.dump();
    if (got.size() > 40) got = got.substr(0, 40) + "...";
    KILN_CHECK(false, kOp, prefix(name) << ": expected " << expected << ", got " << j.type_name() << " " << got);
    throw Error("unreachable");
  }
  int64_t to_int(const json& j, std::string_view name, const char* expected) const {
    if (j.is_number_unsigned()) {
      uint64_t u = j.get<uint64_t>();
      KILN_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), kOp,
                 prefix(name) << ": " << u << " is out of range");
      return static_cast<int64_t>(u);
    }
    if (!j.is_number_integer()) type_error(name, expected, j);
    return j.get<int64_t>();
  }
  double to_float(const json& j, std::string_view name) const {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) {
      std::string s = j.get<std::string>();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
    }
    type_error(name, "a number (or \"inf\", \"-inf\", \"nan\")", j);
  }

  std::string type_;
  std::vector<Frame> frames_;
};

// Rejects nesting deeper than kMaxDepth before parsing (the parser and json's destructor
// recurse; a hostile file must not exhaust the stack).
void check_depth(std::string_view text, std::string_view type) {
  int depth = 0;
  bool in_string = false, escape = false;
  for (char ch : text) {
    if (in_string) {
      if (escape)
        escape = false;
      else if (ch == '\\')
        escape = true;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    if (ch == '[' || ch == '{')
      KILN_CHECK(++depth <= kMaxDepth, kOp, type << ": JSON nested deeper than " << kMaxDepth);
    if (ch == ']' || ch == '}') --depth;
  }
}

// Pretty JSON with objects one key per line and arrays of scalars on one line ("kernel_size":
// [3, 5]), which reads better than nlohmann's one-element-per-line arrays.
void dump(const json& j, int indent, std::string& out) {
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  if (j.is_object()) {
    if (j.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += ",\n";
      first = false;
      out += pad + json(it.key()).dump() + ": ";
      dump(it.value(), indent + 2, out);
    }
    out += "\n" + std::string(static_cast<size_t>(indent), ' ') + "}";
  } else if (j.is_array()) {
    bool scalars = true;
    for (const json& e : j) scalars = scalars && !e.is_structured();
    if (scalars) {
      out += "[";
      for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + j[i].dump();
      out += "]";
      return;
    }
    out += "[\n";
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += ",\n";
      out += pad;
      dump(j[i], indent + 2, out);
    }
    out += "\n" + std::string(static_cast<size_t>(indent), ' ') + "]";
  } else {
    out += j.dump();
  }
}

}  // namespace

std::string config_to_json(std::string_view type_name, const std::function<void(ConfigVisitor&)>& visit) {
  json root = json::object();
  root["type"] = std::string(type_name);
  json& body = root["config"] = json::object();
  Writer w(body);
  visit(w);
  std::string out;
  dump(root, 0, out);
  return out;
}

void config_from_json(std::string_view type_name, std::string_view text,
                      const std::function<void(ConfigVisitor&)>& visit) {
  std::string type(type_name);
  KILN_CHECK(text.size() <= kMaxText, kOp, type << ": JSON text of " << text.size() << " bytes is too large");
  check_depth(text, type);
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    KILN_CHECK(false, kOp, type << ": invalid JSON: " << e.what());
  }
  KILN_CHECK(
      root.is_object(), kOp,
      type << ": expected a JSON object {\"type\": \"" << type << "\", \"config\": {...}}, got " << root.type_name());
  std::vector<std::string> extra;
  for (auto it = root.begin(); it != root.end(); ++it)
    if (it.key() != "type" && it.key() != "config") extra.push_back(it.key());
  KILN_CHECK(extra.empty(), kOp,
             type << ": unknown top-level key" << (extra.size() > 1 ? "s " : " ") << join(extra)
                  << " (expected \"type\" and \"config\")");
  auto t = root.find("type");
  KILN_CHECK(t != root.end() && t->is_string(), kOp, type << ": missing \"type\" string (expected \"" << type << "\")");
  KILN_CHECK(t->get<std::string>() == type, kOp,
             "expected a config of type '" << type << "', the JSON holds '" << t->get<std::string>() << "'");
  json body = json::object();
  if (auto c = root.find("config"); c != root.end()) {
    KILN_CHECK(c->is_object(), kOp, type << ": \"config\" must be an object, got " << c->type_name());
    body = *c;
  }
  Reader r(body, type);
  visit(r);
  r.finish();
}

void write_text_file_atomic(const std::string& path, const std::string& text) {
  store::write_atomic(path, [&](int fd) { store::write_all(fd, text.data(), text.size(), path); });
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f.good(), kOp, "cannot open '" << path << "'");
  f.seekg(0, std::ios::end);
  std::streamoff n = f.tellg();
  KILN_CHECK(n >= 0 && static_cast<size_t>(n) <= kMaxText, kOp,
             "'" << path << "' is not a config file (" << n << " bytes)");
  f.seekg(0);
  std::string s(static_cast<size_t>(n), '\0');
  f.read(s.data(), n);
  KILN_CHECK(f.good() || f.eof(), kOp, "cannot read '" << path << "'");
  return s;
}

}  // namespace kiln::nn::detail
