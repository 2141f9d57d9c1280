// SPDX-License-Identifier: MIT OR Apache-2.0
// Training checkpoints (kiln/store.h): model and optimizer tensors plus JSON metadata in a
// safetensors file, restored only after everything in it has been checked.
//
// Layout: tensors "model.<state name>" and "optimizer.<StateDict tensor name>"; metadata
//   kiln.checkpoint = "1"
//   kiln.epoch, kiln.step = decimal integers
//   kiln.extra      = {"key": "value", ...}
//   kiln.optimizer  = {"name": "Adam", "groups": 1, "params": [[3, 2], [3]], "scalars": {"state.0.step": "4"}}
//   kiln.scheduler  = {"last_epoch": "7", "base_lrs.0": "0.1", ...}   (LRScheduler::state_dict)
//   kiln.plateau    = {...}                                            (ReduceLROnPlateau::state_dict)
//   kiln.rng        = {"seed": "42", "offset": "17"}
// Numbers are JSON strings written with the shortest round-trip form (std::to_chars; the same
// text from core/charconv.h where the library lacks it), so
// doubles (including inf and nan) and 64-bit integers come back bit for bit.
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>

#include "core/charconv.h"
#include "kiln/autodiff.h"
#include "kiln/error.h"
#include "kiln/nn/module.h"
#include "kiln/optim/lr_scheduler.h"
#include "kiln/optim/optimizer.h"
#include "kiln/store.h"
#include "store/load_plan.h"

namespace kiln::store {

namespace {

using json = nlohmann::ordered_json;
constexpr const char* kOp = "store::checkpoint";

std::string num(double v) {
  char buf[64];
  auto r = kiln::detail::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
std::string num(uint64_t v) { return std::to_string(v); }
std::string num(int64_t v) { return std::to_string(v); }

template <class T>
T parse_num(const std::string& s, const std::string& what, const std::string& file) {
  T v{};
  std::from_chars_result r;
  if constexpr (std::is_floating_point_v<T>)
    r = kiln::detail::from_chars(s.data(), s.data() + s.size(), v);
  else
    r = std::from_chars(s.data(), s.data() + s.size(), v);
  KILN_CHECK(r.ec == std::errc() && r.ptr == s.data() + s.size(), kOp,
             file << ": " << what << " is not a number: '" << s.substr(0, 40) << "'");
  return v;
}

json state_json(const optim::lr_scheduler::SchedulerState& st) {
  json j = json::object();
  for (auto& [k, v] : st) j[k] = num(v);
  return j;
}

optim::lr_scheduler::SchedulerState state_from_json(const json& j, const std::string& what, const std::string& file) {
  KILN_CHECK(j.is_object(), kOp, file << ": " << what << " is not a JSON object");
  optim::lr_scheduler::SchedulerState st;
  for (auto& [k, v] : j.items()) {
    KILN_CHECK(v.is_string(), kOp, file << ": " << what << "." << k << " is not a string");
    st.emplace_back(k, parse_num<double>(v.get<std::string>(), what + "." + k, file));
  }
  return st;
}

/// Parses a metadata entry as JSON; absent entries give a null json.
json meta_json(const TensorMap& tm, const std::string& key, const std::string& file) {
  auto it = tm.metadata.find(key);
  if (it == tm.metadata.end()) return json();
  try {
    return json::parse(it->second);
  } catch (const json::exception& e) {
    KILN_CHECK(false, kOp, file << ": the metadata entry " << key << " is not valid JSON: " << e.what());
  }
  return json();
}

/// "state.<i>.<key>" with i < n_params, or "param_groups.<g>.<key>" with g < n_groups.
bool valid_optimizer_entry(const std::string& name, size_t n_params, size_t n_groups) {
  auto index_ok = [&](size_t start, size_t limit) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos || dot == start || dot - start > 9 || dot + 1 == name.size()) return false;
    std::string idx = name.substr(start, dot - start);
    if (idx.find_first_not_of("0123456789") != std::string::npos) return false;
    return std::stoul(idx) < limit;
  };
  if (name.rfind("state.", 0) == 0) return index_ok(6, n_params);
  if (name.rfind("param_groups.", 0) == 0) return index_ok(13, n_groups);
  return false;
}

std::string shape_list(const std::vector<Tensor>& ps) {
  std::string s;
  for (auto& p : ps) s += (s.empty() ? "" : ", ") + to_string(p.shape());
  return s;
}

}  // namespace

namespace {

/// The checkpoint as tensors and metadata; the model's tensors are copies when `copy` (for
/// checkpoints kept in memory), else handles on the live tensors (written out right away).
TensorMap to_tensors(const Checkpoint& ckpt, bool copy) {
  TensorMap tm;
  tm.metadata["kiln.checkpoint"] = "1";
  tm.metadata["kiln.epoch"] = num(ckpt.epoch);
  tm.metadata["kiln.step"] = num(ckpt.step);
  json extra = json::object();
  for (auto& [k, v] : ckpt.extra) extra[k] = v;
  tm.metadata["kiln.extra"] = extra.dump();
  {
    NoGradGuard no_grad;
    if (ckpt.model)
      for (auto& [name, t] : ckpt.model->state())
        tm.tensors.emplace_back("model." + name, copy ? t.detach().clone() : t.detach());
  }
  if (ckpt.optimizer) {
    optim::StateDict sd = ckpt.optimizer->state_dict();  // copies already
    for (auto& [name, t] : sd.tensors) tm.tensors.emplace_back("optimizer." + name, t.detach());
    json o = json::object();
    o["name"] = ckpt.optimizer->name();
    o["groups"] = ckpt.optimizer->param_groups().size();
    json shapes = json::array();
    for (auto& p : ckpt.optimizer->parameters()) {
      json s = json::array();
      for (int64_t d : p.shape()) s.push_back(d);
      shapes.push_back(s);
    }
    o["params"] = shapes;
    json scalars = json::object();
    for (auto& [k, v] : sd.scalars) scalars[k] = num(v);
    o["scalars"] = scalars;
    tm.metadata["kiln.optimizer"] = o.dump();
  }
  if (ckpt.scheduler) tm.metadata["kiln.scheduler"] = state_json(ckpt.scheduler->state_dict()).dump();
  if (ckpt.plateau) tm.metadata["kiln.plateau"] = state_json(ckpt.plateau->state_dict()).dump();
  if (ckpt.rng) {
    RngState r = rng_state();
    tm.metadata["kiln.rng"] = json{{"seed", num(r.seed)}, {"offset", num(r.offset)}}.dump();
  }
  return tm;
}

}  // namespace

TensorMap checkpoint_to_tensors(const Checkpoint& ckpt) { return to_tensors(ckpt, true); }

void checkpoint_from_tensors(const TensorMap& tm, Checkpoint& ckpt, const std::string& file) {
  namespace sched = optim::lr_scheduler;
  auto mark = tm.metadata.find("kiln.checkpoint");
  KILN_CHECK(mark != tm.metadata.end(), kOp,
             file << ": not a Kiln checkpoint (no kiln.checkpoint metadata entry; for plain weights use store::load)");
  KILN_CHECK(mark->second == "1", kOp,
             file << ": unsupported checkpoint version '" << mark->second.substr(0, 40) << "' (this Kiln reads 1)");

  // ---- 1. parse and check everything; nothing is modified here ---------------------------
  auto meta = [&](const std::string& key) -> const std::string* {
    auto it = tm.metadata.find(key);
    return it == tm.metadata.end() ? nullptr : &it->second;
  };
  int64_t epoch = 0, step = 0;
  std::map<std::string, std::string> extra;
  std::optional<detail::LoadPlan> model_plan;
  optim::StateDict opt_sd;
  sched::SchedulerState sched_state, plateau_state;
  RngState rng;
  try {
    if (auto* e = meta("kiln.epoch")) epoch = parse_num<int64_t>(*e, "kiln.epoch", file);
    if (auto* s = meta("kiln.step")) step = parse_num<int64_t>(*s, "kiln.step", file);
    json ex = meta_json(tm, "kiln.extra", file);
    if (!ex.is_null()) {
      KILN_CHECK(ex.is_object(), kOp, file << ": kiln.extra is not a JSON object");
      for (auto& [k, v] : ex.items()) {
        KILN_CHECK(v.is_string(), kOp, file << ": kiln.extra." << k << " is not a string");
        extra[k] = v.get<std::string>();
      }
    }

    std::vector<std::pair<std::string, Tensor>> model_tensors;
    std::vector<std::pair<std::string, Tensor>> opt_tensors;
    for (auto& [name, t] : tm.tensors) {
      if (name.rfind("model.", 0) == 0)
        model_tensors.emplace_back(name.substr(6), t);
      else if (name.rfind("optimizer.", 0) == 0)
        opt_tensors.emplace_back(name.substr(10), t);
      else
        KILN_CHECK(false, kOp, file << ": unexpected tensor '" << name << "' (expected model.* or optimizer.*)");
    }

    if (ckpt.model) {
      LoadOptions lo;  // strict: every parameter and buffer, nothing else
      model_plan = detail::plan_load(ckpt.model->state(), model_tensors, lo);
      KILN_CHECK(model_plan->report.ok(), kOp,
                 file << ": the checkpoint's model does not fit this model (nothing was loaded): "
                      << model_plan->report.str());
    }

    if (ckpt.optimizer) {
      json o = meta_json(tm, "kiln.optimizer", file);
      KILN_CHECK(o.is_object(), kOp, file << ": the checkpoint holds no optimizer state (kiln.optimizer)");
      std::string name = o.at("name").get<std::string>();
      KILN_CHECK(name == ckpt.optimizer->name(), kOp,
                 file << ": the checkpoint's optimizer is " << name << ", this one is " << ckpt.optimizer->name());
      std::vector<Tensor> params = ckpt.optimizer->parameters();
      size_t groups = ckpt.optimizer->param_groups().size();
      KILN_CHECK(o.at("groups").get<size_t>() == groups, kOp,
                 file << ": the checkpoint's optimizer has " << o.at("groups").get<size_t>()
                      << " parameter groups, this one has " << groups);
      const json& shapes = o.at("params");
      KILN_CHECK(shapes.is_array(), kOp, file << ": kiln.optimizer.params is not an array");
      std::string saved;
      for (auto& s : shapes) {
        Shape sh;
        for (auto& d : s) sh.push_back(d.get<int64_t>());
        saved += (saved.empty() ? "" : ", ") + to_string(sh);
      }
      KILN_CHECK(saved == shape_list(params), kOp,
                 file << ": the checkpoint's optimizer holds parameters of shapes (" << saved << "), this one ("
                      << shape_list(params) << ")");
      for (auto& [k, v] : o.at("scalars").items()) {
        KILN_CHECK(valid_optimizer_entry(k, params.size(), groups) && v.is_string(), kOp,
                   file << ": unexpected optimizer entry '" << k << "'");
        opt_sd.scalars.emplace_back(k, parse_num<double>(v.get<std::string>(), "kiln.optimizer." + k, file));
      }
      for (auto& [k, t] : opt_tensors) {
        KILN_CHECK(valid_optimizer_entry(k, params.size(), groups) && k.rfind("state.", 0) == 0, kOp,
                   file << ": unexpected optimizer tensor 'optimizer." << k << "'");
        size_t i = std::stoul(k.substr(6, k.find('.', 6) - 6));
        Tensor s = t;
        if (s.device() != params[i].device()) {
          NoGradGuard no_grad;
          s = s.to(params[i].device());  // where the optimizer keeps it
        }
        opt_sd.tensors.emplace_back(k, s);
      }
    }

    auto scheduler_part = [&](const char* key, bool wanted, sched::SchedulerState& out) {
      if (!wanted) return;
      json j = meta_json(tm, key, file);
      KILN_CHECK(!j.is_null(), kOp, file << ": the checkpoint holds no " << key << " state");
      out = state_from_json(j, key, file);
    };
    scheduler_part("kiln.scheduler", ckpt.scheduler != nullptr, sched_state);
    scheduler_part("kiln.plateau", ckpt.plateau != nullptr, plateau_state);

    if (ckpt.rng) {
      json r = meta_json(tm, "kiln.rng", file);
      KILN_CHECK(r.is_object(), kOp,
                 file << ": the checkpoint holds no random generator state (saved with rng = false; load with rng "
                         "= false)");
      rng.seed = parse_num<uint64_t>(r.at("seed").get<std::string>(), "kiln.rng.seed", file);
      rng.offset = parse_num<uint64_t>(r.at("offset").get<std::string>(), "kiln.rng.offset", file);
    }
  } catch (const json::exception& e) {
    KILN_CHECK(false, kOp, file << ": malformed checkpoint metadata: " << e.what());
  }

  // ---- 2. apply; the parts that can still refuse (schedulers, optimizer) go first and are
  // rolled back if a later one does -------------------------------------------------------
  std::optional<sched::SchedulerState> old_sched, old_plateau;
  std::optional<optim::StateDict> old_opt;
  try {
    if (ckpt.scheduler) {
      old_sched = ckpt.scheduler->state_dict();
      ckpt.scheduler->load_state_dict(sched_state);
    }
    if (ckpt.plateau) {
      old_plateau = ckpt.plateau->state_dict();
      ckpt.plateau->load_state_dict(plateau_state);
    }
    if (ckpt.optimizer) {
      old_opt = ckpt.optimizer->state_dict();
      ckpt.optimizer->load_state_dict(opt_sd);
    }
  } catch (...) {
    if (old_opt) ckpt.optimizer->load_state_dict(*old_opt);
    if (old_plateau) ckpt.plateau->load_state_dict(*old_plateau);
    if (old_sched) ckpt.scheduler->load_state_dict(*old_sched);
    throw;
  }
  if (model_plan) detail::apply_plan(*model_plan);
  if (ckpt.rng) set_rng_state(rng);
  ckpt.epoch = epoch;
  ckpt.step = step;
  ckpt.extra = std::move(extra);
}

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  TensorMap tm = to_tensors(ckpt, false);
  save_safetensors(path, tm.tensors, tm.metadata);
}

void load_checkpoint(const std::string& path, Checkpoint& ckpt) {
  ReadOptions ro;
  ro.format = Format::Safetensors;
  checkpoint_from_tensors(read(path, ro), ckpt, path);
}

}  // namespace kiln::store
