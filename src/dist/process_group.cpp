// SPDX-License-Identifier: MIT OR Apache-2.0
// The default process group, the backend registry, and the "local" backend: one process, whose
// collectives check their arguments and copy (what a job of one rank computes).
#include <cstdlib>
#include <map>
#include <mutex>

#include "dist/common.h"
#include "kiln/ops.h"

namespace kiln::dist {

namespace detail {

int launcher_size() {
  auto num = [](const char* name) -> int {
    const char* v = std::getenv(name);
    return v && *v ? std::max(1, std::atoi(v)) : 0;
  };
  if (int n = num("OMPI_COMM_WORLD_SIZE")) return n;  // Open MPI's mpirun
  if (int n = num("PMI_SIZE")) return n;              // MPICH's hydra, srun --mpi=pmi2
  if (std::getenv("PMIX_RANK")) {                     // srun --mpi=pmix and other PMIx launchers
    if (int n = num("SLURM_STEP_NUM_TASKS")) return n;
    if (int n = num("SLURM_NTASKS")) return n;
    return 1;
  }
  return 0;
}

namespace {

/// A collective of the local group: already done.
class DoneWork final : public WorkImpl {
 public:
  explicit DoneWork(Tensor result) : result_(std::move(result)) {}
  bool is_completed() override { return true; }
  void wait() override {}
  Tensor result() override { return result_; }

 private:
  Tensor result_;
};

class LocalGroup final : public ProcessGroup {
 public:
  explicit LocalGroup(const InitOptions& o) : timeout_(default_timeout(o.timeout_seconds)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "local"; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) override { timeout_ = t; }

  Work all_reduce_async(const Tensor& t, ReduceOp op) override {
    check(Kind::AllReduce, t, op, 0);
    return Work(std::make_shared<DoneWork>(t));
  }
  Work broadcast_async(const Tensor& t, int root) override {
    check(Kind::Broadcast, t, ReduceOp::Sum, root);
    return Work(std::make_shared<DoneWork>(t));
  }
  Work all_gather_async(const Tensor& t) override {
    check(Kind::AllGather, t, ReduceOp::Sum, 0);
    NoGradGuard no_grad;
    return Work(std::make_shared<DoneWork>(t.detach().unsqueeze(0).clone()));
  }
  Work reduce_scatter_async(const Tensor& t, ReduceOp op) override {
    check(Kind::ReduceScatter, t, op, 0);
    NoGradGuard no_grad;
    return Work(std::make_shared<DoneWork>(t.detach().clone()));
  }
  Work barrier_async() override { return Work(); }

 private:
  static void check(Kind kind, const Tensor& t, ReduceOp op, int root) {
    KILN_CHECK(t.defined(), op_label(kind), "the tensor is undefined");
    std::string err = invalid_call(kind, &t, op, root, 1);
    KILN_CHECK(err.empty(), op_label(kind), strip_label(err));
  }
  std::chrono::milliseconds timeout_;
};

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;
  std::unique_ptr<ProcessGroup> group;
  bool at_exit_registered = false;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: finalize() may run from atexit
    reg->factories["local"] = [](const InitOptions& o) { return std::make_unique<LocalGroup>(o); };
    reg->factories["mpi"] = [](const InitOptions& o) { return make_mpi_group(o); };
    return reg;
  }();
  return *r;
}

}  // namespace
}  // namespace detail

ProcessGroup& init(const InitOptions& options) {
  auto& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  if (reg.group) return *reg.group;
  std::string name = options.backend;
  if (name.empty()) name = detail::launcher_size() > 0 ? "mpi" : "local";
  auto it = reg.factories.find(name);
  if (it == reg.factories.end()) {
    std::string known;
    for (const auto& [n, f] : reg.factories) known += (known.empty() ? "" : ", ") + n;
    KILN_CHECK(false, "dist.init", "no backend '" << name << "' (this build has: " << known << ")");
  }
  reg.group = it->second(options);
  KILN_CHECK(reg.group != nullptr, "dist.init", "backend '" << name << "' made no process group");
  if (!reg.at_exit_registered) {
    reg.at_exit_registered = true;
    std::atexit([] { finalize(); });
  }
  return *reg.group;
}

bool is_initialized() {
  auto& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.group != nullptr;
}

ProcessGroup& default_group() {
  auto& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  KILN_CHECK(reg.group != nullptr, "dist", "no process group: call kiln::dist::init() first");
  return *reg.group;
}

int rank() {
  auto& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.group ? reg.group->rank() : 0;
}

int world_size() {
  auto& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.group ? reg.group->size() : 1;
}

void finalize() {
  auto& reg = detail::registry();
  std::unique_ptr<ProcessGroup> g;
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    g = std::move(reg.group);
  }
  g.reset();  // the backend's destructor drains its queue and shuts down
}

bool launched_by_launcher() { return detail::launcher_size() > 1; }

void register_backend(const std::string& name, BackendFactory factory) {
  auto& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  KILN_CHECK(!name.empty() && factory, "dist.register_backend", "a name and a factory are required");
  reg.factories[name] = std::move(factory);
}

std::vector<std::string> backends() {
  auto& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  std::vector<std::string> names;
  for (const auto& [n, f] : reg.factories) names.push_back(n);
  return names;
}

}  // namespace kiln::dist
