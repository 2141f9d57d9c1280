// SPDX-License-Identifier: MIT OR Apache-2.0
// Loading weights into a module by name (kiln/store.h): remap, filters, the report, strict mode.
#include <regex>
#include <sstream>
#include <unordered_map>

#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/nn/module.h"
#include "kiln/store.h"
#include "store/load_plan.h"

namespace kiln::store {

namespace {

std::string describe(const Tensor& t) { return to_string(t.shape()) + " " + to_string(t.dtype()); }

std::vector<std::regex> compile_all(const std::vector<std::string>& patterns, const char* what) {
  std::vector<std::regex> r;
  for (auto& p : patterns) {
    try {
      r.emplace_back(p);
    } catch (const std::regex_error& e) {
      KILN_CHECK(false, "store::load", "invalid " << what << " regex '" << p << "': " << e.what());
    }
  }
  return r;
}

bool any_match(const std::vector<std::regex>& rs, const std::string& key) {
  for (auto& r : rs)
    if (std::regex_search(key, r)) return true;
  return false;
}

}  // namespace

std::string LoadReport::str() const {
  std::ostringstream s;
  s << "applied " << applied.size() << ", missing " << missing.size() << ", unexpected " << unexpected.size()
    << ", mismatched " << mismatched.size() << ", skipped " << skipped.size();
  auto list = [&](const char* title, const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    s << "\n" << title << " (" << keys.size() << "):";
    for (auto& k : keys) s << "\n  " << k;
  };
  list("missing from the file", missing);
  list("unexpected in the file", unexpected);
  if (!mismatched.empty()) {
    s << "\nmismatched (" << mismatched.size() << "):";
    for (auto& m : mismatched) s << "\n  " << m.key << ": model " << m.expected << ", file " << m.found;
  }
  list("skipped by the filters", skipped);
  return s.str();
}

namespace detail {

LoadPlan plan_load(const std::vector<std::pair<std::string, Tensor>>& model_state,
                   const std::vector<std::pair<std::string, Tensor>>& file_tensors, const LoadOptions& options) {
  LoadPlan plan;
  LoadReport& rep = plan.report;

  std::vector<std::pair<std::regex, std::string>> remap;
  for (auto& [pat, rep_str] : options.remap) {
    try {
      remap.emplace_back(std::regex(pat), rep_str);
    } catch (const std::regex_error& e) {
      KILN_CHECK(false, "store::load", "invalid remap regex '" << pat << "': " << e.what());
    }
  }
  auto include = compile_all(options.include, "include");
  auto exclude = compile_all(options.exclude, "exclude");
  auto selected = [&](const std::string& key) {
    if (!include.empty() && !any_match(include, key)) return false;
    return !any_match(exclude, key);
  };

  // File keys after remapping, with the filters applied.
  std::unordered_map<std::string, const Tensor*> file;
  std::unordered_map<std::string, std::string> origin;  // remapped key -> file key
  std::vector<std::string> file_order;
  for (auto& [key, t] : file_tensors) {
    std::string k = key;
    for (auto& [re, with] : remap) k = std::regex_replace(k, re, with);
    if (!selected(k)) {
      rep.skipped.push_back(k);
      continue;
    }
    auto [it, fresh] = origin.emplace(k, key);
    KILN_CHECK(fresh, "store::load",
               "the file keys '" << it->second << "' and '" << key << "' both become '" << k << "' after remapping");
    KILN_CHECK(t.defined(), "store::load", "the file's tensor '" << key << "' is undefined");
    file.emplace(k, &t);
    file_order.push_back(k);
  }

  std::unordered_map<std::string, bool> in_model;
  for (auto& [name, dst] : model_state) {
    in_model[name] = true;
    if (!selected(name)) continue;  // filtered out of the model's side too: not missing
    auto it = file.find(name);
    if (it == file.end()) {
      rep.missing.push_back(name);
      continue;
    }
    const Tensor& src = *it->second;
    bool shape_ok = src.shape() == dst.shape();
    bool dtype_ok = src.dtype() == dst.dtype() || options.convert_dtype;
    if (!shape_ok || !dtype_ok) {
      rep.mismatched.push_back({name, describe(dst), describe(src)});
      continue;
    }
    rep.applied.push_back(name);
    plan.copies.push_back({dst, src});
  }
  for (auto& k : file_order)
    if (!in_model.count(k)) rep.unexpected.push_back(k);
  return plan;
}

void apply_plan(const LoadPlan& plan) {
  NoGradGuard no_grad;
  for (auto& [dst, src] : plan.copies) {
    Tensor d = dst;  // a handle on the module's tensor: copy_ writes its storage in place
    Tensor s = src;
    if (s.device() != d.device()) s = s.to(d.device());
    d.copy_(s);
  }
}

}  // namespace detail

LoadReport load(nn::Module& model, const TensorMap& tensors, const LoadOptions& options) {
  auto plan = detail::plan_load(model.state(), tensors.tensors, options);
  KILN_CHECK(!options.strict || plan.report.ok(), "store::load",
             "the weights do not fit the model (strict mode; nothing was loaded): " << plan.report.str());
  detail::apply_plan(plan);
  return plan.report;
}

LoadReport load(nn::Module& model, const std::string& path, const LoadOptions& options) {
  ReadOptions ro;
  ro.format = options.format;
  TensorMap tm = read(path, ro);
  try {
    return load(model, tm, options);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "\n(file " + path + ")");
  }
}

void save(nn::Module& model, const std::string& path, const std::map<std::string, std::string>& metadata) {
  save_safetensors(path, model.state(), metadata);
}

}  // namespace kiln::store
