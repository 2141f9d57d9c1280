// SPDX-License-Identifier: MIT OR Apache-2.0
// ONNX run-time path: loading, validation (dangling inputs, cycles, domains, unsupported ops),
// topological order and execution of graphs and subgraphs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/backend.h"
#include "kiln/onnx.h"
#include "onnx/ops.h"
#include "onnx/plan.h"

namespace kiln::onnx {

using proto::AttrP;
using proto::GraphP;
using proto::NodeP;
using proto::TensorP;

// ---- OpContext -------------------------------------------------------------------------------

std::string OpContext::where() const {
  return "node '" + node.name + "' (" + node.op_type + ", opset " + std::to_string(opset) + ")";
}
void OpContext::fail(const std::string& msg) const {
  KILN_CHECK(false, "onnx", where() << ": " << msg);
  __builtin_unreachable();
}
const Tensor& OpContext::x(size_t i) const {
  if (!has(i)) fail("missing required input " + std::to_string(i));
  return in[i];
}
int64_t OpContext::attr_i(std::string_view n, int64_t def) const {
  const AttrP* a = node.attr(n);
  return a ? a->i : def;
}
float OpContext::attr_f(std::string_view n, float def) const {
  const AttrP* a = node.attr(n);
  return a ? a->f : def;
}
std::string OpContext::attr_s(std::string_view n, const std::string& def) const {
  const AttrP* a = node.attr(n);
  return a ? a->s : def;
}
std::vector<int64_t> OpContext::attr_ints(std::string_view n) const {
  const AttrP* a = node.attr(n);
  return a ? a->ints : std::vector<int64_t>{};
}
std::vector<float> OpContext::attr_floats(std::string_view n) const {
  const AttrP* a = node.attr(n);
  return a ? a->floats : std::vector<float>{};
}
const TensorP* OpContext::attr_t(std::string_view n) const {
  const AttrP* a = node.attr(n);
  return a ? a->t.get() : nullptr;
}
const GraphP* OpContext::attr_g(std::string_view n) const {
  const AttrP* a = node.attr(n);
  return a ? a->g.get() : nullptr;
}
const Tensor& OpContext::value(size_t i) const {
  if (host && i < host->size() && (*host)[i].defined()) return (*host)[i];
  return x(i);
}
std::vector<int64_t> OpContext::ints_in(size_t i) const {
  const Tensor& t = value(i);
  check(is_integral(t.dtype()),
        "input " + std::to_string(i) + " must be an integer tensor, got " + to_string(t.dtype()));
  return t.to_vector<int64_t>();
}

int64_t axis_of(const OpContext& c, int64_t axis, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  c.check(axis >= -r && axis < r, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}
Dims to_dims(const std::vector<int64_t>& v) { return Dims(v.begin(), v.end()); }
Shape to_shape(const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); }

// ---- tensors from protos ---------------------------------------------------------------------

bool has_dtype(int32_t t) {
  switch (t) {
    case proto::kFloat:
    case proto::kUint8:
    case proto::kInt8:
    case proto::kInt16:
    case proto::kInt32:
    case proto::kInt64:
    case proto::kBool:
    case proto::kFloat16:
    case proto::kDouble:
    case proto::kBFloat16:
    case proto::kUint16:
    case proto::kUint32:
    case proto::kUint64:
      return true;
    default:
      return false;
  }
}

DType to_dtype(int32_t t, const std::string& what) {
  switch (t) {
    case proto::kFloat:
      return f32;
    case proto::kUint8:
      return u8;
    case proto::kInt8:
      return i8;
    case proto::kInt16:
      return i16;
    case proto::kInt32:
      return i32;
    case proto::kInt64:
      return i64;
    case proto::kBool:
      return bool_;
    case proto::kFloat16:
      return f16;
    case proto::kDouble:
      return f64;
    case proto::kBFloat16:
      return bf16;
    case proto::kUint16:
      return u16;
    case proto::kUint32:
      return u32;
    case proto::kUint64:
      return u64;
    default:
      break;
  }
  KILN_CHECK(false, "onnx", what << ": data type " << proto::data_type_name(t) << " is not supported by Kiln");
  __builtin_unreachable();
}

Tensor tensor_from(const TensorP& t, const Device& device, const std::string& what) {
  KILN_CHECK(!t.external, "onnx", what << ": tensor '" << t.name << "' uses external data, which is not supported");
  DType dt = to_dtype(t.data_type, what + " tensor '" + t.name + "'");
  Shape shape;
  int64_t numel = 1;
  for (int64_t d : t.dims) {
    KILN_CHECK(d >= 0, "onnx", what << ": tensor '" << t.name << "' has negative dim " << d);
    KILN_CHECK(d == 0 || numel <= (int64_t{1} << 40) / d, "onnx", what << ": tensor '" << t.name << "' is too large");
    numel *= d;
    shape.push_back(d);
  }
  size_t es = dtype_size(dt);
  const size_t n = static_cast<size_t>(numel);
  if (t.has_raw) {
    KILN_CHECK(t.raw.size() == n * es, "onnx",
               what << ": tensor '" << t.name << "' raw_data has " << t.raw.size() << " bytes, expected " << n * es
                    << " for shape " << to_string(shape) << " " << dtype_name(dt));
    return from_blob_copy(t.raw.data(), shape, dt, device);
  }
  auto count_check = [&](size_t have, const char* field) {
    KILN_CHECK(have == n, "onnx",
               what << ": tensor '" << t.name << "' " << field << " has " << have << " values, expected " << n);
  };
  switch (t.data_type) {
    case proto::kFloat:
      count_check(t.floats.size(), "float_data");
      return from_blob_copy(t.floats.data(), shape, f32, device);
    case proto::kDouble:
      count_check(t.doubles.size(), "double_data");
      return from_blob_copy(t.doubles.data(), shape, f64, device);
    case proto::kInt64:
      count_check(t.int64s.size(), "int64_data");
      return from_blob_copy(t.int64s.data(), shape, i64, device);
    case proto::kInt32:
      count_check(t.int32s.size(), "int32_data");
      return from_blob_copy(t.int32s.data(), shape, i32, device);
    case proto::kUint32:
    case proto::kUint64: {
      count_check(t.uint64s.size(), "uint64_data");
      return cast(from_blob_copy(t.uint64s.data(), shape, u64, device), dt);
    }
    case proto::kFloat16:
    case proto::kBFloat16: {
      count_check(t.int32s.size(), "int32_data");
      std::vector<uint16_t> bits(n);
      for (size_t i = 0; i < n; ++i) bits[i] = static_cast<uint16_t>(t.int32s[i]);
      return from_blob_copy(bits.data(), shape, dt, device);
    }
    default: {
      count_check(t.int32s.size(), "int32_data");
      Tensor w = from_blob_copy(t.int32s.data(), shape, i32, device);
      return dt == bool_ ? w.ne(0) : cast(w, dt);
    }
  }
}

Tensor tensor_from_proto(std::string_view bytes, const Device& device) {
  return tensor_from(proto::parse_tensor(bytes), device, "TensorProto");
}

Tensor load_tensor_proto(const std::string& path, const Device& device) {
  return tensor_from(proto::parse_tensor(proto::read_file(path)), device, path);
}

// ---- registry ----------------------------------------------------------------------------------

const Registry& registry() {
  static const Registry r = [] {
    Registry x;
    register_elementwise(x);
    register_reduce(x);
    register_shape(x);
    register_nn(x);
    register_control(x);
    register_resize(x);
    register_recurrent(x);
    register_attention(x);
    register_detection(x);
    register_set(x);
    register_quant(x);
    register_signal(x);
    return x;
  }();
  return r;
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> v;
  for (const auto& [k, _] : registry().ops) v.push_back(k);
  std::sort(v.begin(), v.end());
  return v;
}

// ---- compiled graphs -----------------------------------------------------------------------

namespace {

// KILN_ONNX_PROFILE=1: time per op type, printed to stderr at exit (for finding slow ops);
// KILN_ONNX_PROFILE=node: per node (its name, or its op type and first output).
struct OpProfile {
  bool by_node = false;
  std::mutex mu;
  std::map<std::string, std::pair<double, int64_t>> t;
  void add(const std::string& op, double ms) {
    std::lock_guard<std::mutex> l(mu);
    auto& e = t[op];
    e.first += ms;
    ++e.second;
  }
  ~OpProfile() {
    std::vector<std::pair<double, std::string>> v;
    double total = 0;
    for (const auto& [k, e] : t) {
      v.emplace_back(e.first, k);
      total += e.first;
    }
    std::sort(v.rbegin(), v.rend());
    std::fprintf(stderr, "kiln onnx %s profile (ms, share, calls):\n", by_node ? "node" : "op");
    for (const auto& [ms, k] : v)
      std::fprintf(stderr, "  %-32s %10.3f %5.1f%% %8lld\n", k.c_str(), ms, 100 * ms / std::max(total, 1e-9),
                   static_cast<long long>(t[k].second));
  }
};
OpProfile* op_profile() {
  static OpProfile* p = [] {
    const char* e = std::getenv("KILN_ONNX_PROFILE");
    OpProfile* r = e ? new OpProfile : nullptr;
    if (r) r->by_node = std::string_view(e) == "node";
    return r;
  }();
  static struct Printer {
    ~Printer() { delete p; }
  } printer;
  return p;
}

/// t on device d. Between the plain and the fused CPU the memory is shared, not copied (the
/// new tensor keeps t's storage alive); otherwise, or for a tensor tracked by autodiff, a copy.
Tensor move_to(const Tensor& t, const Device& d) {
  if (!t.defined() || t.device() == d) return t;
  if (t.device().is_cpu() && d.is_cpu() && !t.requires_grad() && t.impl().storage) {
    std::shared_ptr<Storage> src = t.impl().storage;
    if (void* p = host_storage_data(t)) {
      if (auto st = d.backend()->wrap_host(p, src->nbytes, src))
        return tensor_over_storage(std::move(st), t.shape(), t.impl().strides, t.impl().offset, t.dtype(), d);
    }
  }
  return t.to(d);
}

}  // namespace

struct Model::Impl {
  Device device;  ///< where the plan runs: the caller's device, without fusion on the CPU
  proto::ModelP model;
  int64_t opset = 0;
  std::map<std::string, int64_t> opsets;
  std::shared_ptr<Compiled> main;
  std::vector<ValueInfo> inputs, outputs;
  std::vector<UnsupportedOp> unsupported;
  bool optimize = true;

  /// Initialisers hinted constant to their backend (Backend::hint_constant), withdrawn at the end.
  std::vector<std::pair<std::shared_ptr<Storage>, std::pair<size_t, size_t>>> constants;
  Device user_device;  ///< the device the model was loaded onto: outputs go there
  /// `device` holds no data (the null device): initialisers, folded constants and the steps
  /// that compute from them and from shapes alone live on the CPU, so shape-like inputs can be
  /// read; every other step runs on `device` (OpContext::host).
  bool host = false;
  /// Where initialisers are loaded and constants folded.
  Device load_device() const { return host ? Device::cpu().without_fusion() : device; }

  /// The outputs of the main graph, on the caller's device.
  std::vector<Tensor> deliver(std::vector<Tensor> outs) const {
    for (Tensor& o : outs) o = move_to(o, user_device);
    return outs;
  }

  ~Impl() {
    for (auto& [st, range] : constants) st->backend->hint_constant(*st, range.first, range.second, false);
  }
  /// Hints the floating-point initialisers of `c` with at least 3 dims (convolution weights) to
  /// their backend as constants: they are never written while the model lives, so the CPU
  /// reorders such a weight into oneDNN's layout once (Note [oneDNN convolution]).
  void hint_constants(const Compiled& c) {
    for (const auto& [name, t] : c.inits) {
      if (!t.defined() || !is_floating(t.dtype()) || t.dim() < 3 || !t.is_contiguous() || !t.impl().storage ||
          !t.impl().storage->backend)
        continue;
      const std::shared_ptr<Storage>& st = t.impl().storage;
      const size_t off = static_cast<size_t>(t.storage_offset()) * dtype_size(t.dtype());
      const size_t n = static_cast<size_t>(t.numel()) * dtype_size(t.dtype());
      st->backend->hint_constant(*st, off, n, true);
      constants.emplace_back(st, std::make_pair(off, n));
    }
  }
  std::shared_ptr<Compiled> compile(const GraphP& g, const std::set<std::string>& outer, const std::string& path);
  /// Builds the flat execution plan of `c` (slots, steps, last uses); `outer` are the names of
  /// the enclosing scopes.
  void build_plan(Compiled& c, const std::set<std::string>& outer) const;
  std::vector<Tensor> run_graph(const Compiled& c, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                const std::unordered_map<std::string, Tensor>* outer) const;
};

std::shared_ptr<Compiled> Model::Impl::compile(const GraphP& g, const std::set<std::string>& outer,
                                               const std::string& path) {
  auto c = std::make_shared<Compiled>();
  c->g = &g;
  KILN_CHECK(g.sparse_initializers == 0, "onnx", path << ": sparse initializers are not supported");
  std::set<std::string> known = outer;
  for (const auto& in : g.inputs) known.insert(in.name);
  for (const auto& t : g.initializers) {
    c->inits.emplace_back(t.name, tensor_from(t, load_device(), path + " initializer"));
    known.insert(t.name);
  }
  auto node_label = [&](const NodeP& n) { return path + " node '" + n.name + "' (" + n.op_type + ")"; };
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].output) {
      if (o.empty()) continue;
      KILN_CHECK(producer.emplace(o, i).second, "onnx",
                 node_label(g.nodes[i]) << ": output '" << o << "' is already produced by another node");
    }
  // Edges and the dangling-input check.
  std::vector<std::vector<size_t>> users(g.nodes.size());
  std::vector<size_t> indeg(g.nodes.size(), 0);
  std::set<std::string> sub_outer = known;
  for (const auto& [name, _] : producer) sub_outer.insert(name);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodeP& n = g.nodes[i];
    for (const auto& in : n.input) {
      if (in.empty()) continue;
      auto it = producer.find(in);
      if (it != producer.end()) {
        users[it->second].push_back(i);
        ++indeg[i];
      } else {
        KILN_CHECK(known.count(in), "onnx",
                   node_label(n) << ": input '" << in
                                 << "' is produced by no node and is neither a graph input nor an initializer "
                                    "(missing initializer or dangling input)");
      }
    }
    // Subgraphs may use any name of this scope (implicit inputs): count those as edges too.
    std::function<void(const GraphP&)> implicit = [&](const GraphP& sg) {
      std::set<std::string> local;
      for (const auto& x : sg.inputs) local.insert(x.name);
      for (const auto& x : sg.initializers) local.insert(x.name);
      for (const auto& sn : sg.nodes)
        for (const auto& o : sn.output) local.insert(o);
      for (const auto& sn : sg.nodes) {
        for (const auto& in : sn.input) {
          if (in.empty() || local.count(in)) continue;
          auto it = producer.find(in);
          if (it != producer.end() && it->second != i) {
            users[it->second].push_back(i);
            ++indeg[i];
          }
        }
        for (const auto& a : sn.attrs) {
          if (a.g) implicit(*a.g);
          for (const auto& gg : a.graphs) implicit(*gg);
        }
      }
      for (const auto& o : sg.outputs) {
        if (local.count(o.name)) continue;
        auto it = producer.find(o.name);
        if (it != producer.end() && it->second != i) {
          users[it->second].push_back(i);
          ++indeg[i];
        }
      }
    };
    for (const auto& a : n.attrs) {
      if (a.g) implicit(*a.g);
      for (const auto& gg : a.graphs) implicit(*gg);
    }
  }
  // Kahn's algorithm, keeping the model's order among ready nodes.
  std::vector<size_t> ready;
  for (size_t i = g.nodes.size(); i-- > 0;)
    if (indeg[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    size_t i = ready.back();
    ready.pop_back();
    c->order.push_back(i);
    std::vector<size_t> now;
    for (size_t u : users[i])
      if (--indeg[u] == 0) now.push_back(u);
    std::sort(now.rbegin(), now.rend());
    ready.insert(ready.end(), now.begin(), now.end());
  }
  if (c->order.size() != g.nodes.size()) {
    std::string names;
    int shown = 0;
    for (size_t i = 0; i < g.nodes.size() && shown < 8; ++i)
      if (indeg[i] > 0) {
        names += (shown++ ? ", '" : "'") + g.nodes[i].name + "' (" + g.nodes[i].op_type + ")";
      }
    KILN_CHECK(false, "onnx", path << ": the graph has a cycle through nodes " << names);
  }
  for (const auto& o : g.outputs)
    KILN_CHECK(known.count(o.name) || producer.count(o.name), "onnx",
               path << ": graph output '" << o.name << "' is produced by no node");
  // Kernels, domains and subgraphs.
  const Registry& reg = registry();
  c->fns.assign(g.nodes.size(), nullptr);
  c->folded.assign(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodeP& n = g.nodes[i];
    if (!is_default_domain(n.domain)) {
      KILN_CHECK(opsets.count(n.domain), "onnx",
                 node_label(n) << ": unknown domain '" << n.domain << "' (not in the model's opset_import)");
      unsupported.push_back({n.op_type, n.domain, n.name, opsets[n.domain], "unsupported domain"});
    } else {
      const OpEntry* e = reg.find(n.op_type);
      if (!e || !e->run)
        unsupported.push_back({n.op_type, "", n.name, opset, "no kernel"});
      else
        c->fns[i] = &e->run;
    }
    for (const auto& a : n.attrs) {
      if (a.g) c->subs[a.g.get()] = compile(*a.g, sub_outer, node_label(n) + " attribute '" + a.name + "'");
      for (const auto& gg : a.graphs)
        c->subs[gg.get()] = compile(*gg, sub_outer, node_label(n) + " attribute '" + a.name + "'");
    }
  }
  // Constant folding: nodes whose inputs are all constants of this graph run once, here.
  if (optimize && unsupported.empty()) {
    std::unordered_map<std::string, Tensor> cv(c->inits.begin(), c->inits.end());
    for (size_t idx : c->order) {
      const NodeP& n = g.nodes[idx];
      if (!c->fns[idx] || n.output.empty()) continue;
      bool all_const = true, has_sub = false;
      for (const auto& in : n.input) all_const = all_const && (in.empty() || cv.count(in));
      for (const auto& a : n.attrs) has_sub = has_sub || a.g || !a.graphs.empty() || !a.ref_attr_name.empty();
      if (!all_const || has_sub) continue;
      std::vector<Tensor> ins;
      for (const auto& in : n.input) ins.push_back(in.empty() ? Tensor{} : cv.at(in));
      std::vector<Tensor> outs;
      try {
        outs = run_node(n, opset, ins, load_device());
      } catch (const Error&) {
        continue;  // left to run time, which reports it with the node's context
      }
      bool complete = true;
      for (size_t k = 0; k < n.output.size(); ++k) complete = complete && (n.output[k].empty() || outs[k].defined());
      if (!complete) continue;
      for (size_t k = 0; k < n.output.size(); ++k)
        if (!n.output[k].empty()) {
          cv[n.output[k]] = outs[k];
          c->inits.emplace_back(n.output[k], outs[k]);
        }
      c->folded[idx] = 1;
    }
  }
  build_plan(*c, outer);
  return c;
}

void Model::Impl::build_plan(Compiled& c, const std::set<std::string>& outer) const {
  const GraphP& g = *c.g;
  for (const auto& in : g.inputs) c.slot(in.name);
  for (const auto& [name, t] : c.inits) c.const_slots.emplace_back(c.slot(name), t);
  auto ref = [&](const std::string& name) {
    if (name.empty()) return -1;
    bool known = c.slot_of.count(name) != 0;
    int s = c.slot(name);
    if (!known && outer.count(name)) c.outer.emplace_back(name, s);
    return s;
  };
  for (size_t idx : c.order) {
    if (c.folded[idx]) continue;
    const NodeP& n = g.nodes[idx];
    Step st;
    st.node = idx;
    st.fn = c.fns[idx];
    for (const auto& a : n.attrs) st.has_sub = st.has_sub || a.g || !a.graphs.empty();
    for (const auto& in : n.input) st.in.push_back(ref(in));
    for (const auto& o : n.output) st.out.push_back(o.empty() ? -1 : c.slot(o));
    c.steps.push_back(std::move(st));
  }
  for (const auto& o : g.outputs) c.out_slots.push_back(ref(o.name));
  if (optimize) fuse_activations(c);
  // Slots for the ops of Conv, MatMul and Gemm steps (Note [Prepared steps]); a Conv pair has two.
  {
    int n_prep = 0;
    for (Step& st : c.steps) {
      const NodeP& n = g.nodes[st.node];
      if (!st.fn || st.has_sub || !is_default_domain(n.domain) ||
          (n.op_type != "Conv" && n.op_type != "MatMul" && n.op_type != "Gemm"))
        continue;
      st.prep = n_prep;
      n_prep += st.pair >= 0 ? 2 : 1;
    }
    if (n_prep) c.prepared = std::make_unique<PreparedOp[]>(static_cast<size_t>(n_prep));
  }
  // Shape-derived steps (see Compiled::caches).
  {
    const size_t n_slots = c.slot_names.size();
    std::vector<char> derived(n_slots, 0);
    std::vector<std::vector<int>> deps(n_slots);  // per derived slot: the roots it depends on
    for (const auto& [s, _] : c.const_slots) derived[s] = 1;
    for (const auto& in : g.inputs) derived[c.slot_of.at(in.name)] = 0;  // an initializer a caller may override
    c.root_in.assign(c.steps.size(), -1);
    c.caches.resize(c.steps.size());
    c.cached_slot.assign(n_slots, 0);
    for (size_t k = 0; k < c.steps.size(); ++k) {
      const Step& st = c.steps[k];
      const NodeP& n = g.nodes[st.node];
      if (!st.fn || st.has_sub || !is_default_domain(n.domain) || n.op_type.find("Random") != std::string::npos ||
          n.op_type == "Multinomial" || n.op_type == "Bernoulli" || n.op_type == "Dropout" || st.in.empty())
        continue;
      std::vector<int> roots;
      if ((n.op_type == "Shape" || n.op_type == "Size") && st.in.size() == 1 && st.in[0] >= 0) {
        c.root_in[k] = st.in[0];
        roots.push_back(static_cast<int>(k));
      } else {
        bool ok = true;
        for (int s : st.in) {
          if (s < 0) continue;
          ok = ok && derived[s];
          if (ok) roots.insert(roots.end(), deps[s].begin(), deps[s].end());
        }
        std::sort(roots.begin(), roots.end());
        roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
        if (!ok || roots.empty()) continue;  // no shape dependence: folded at load or data-dependent
      }
      c.caches[k] = std::make_unique<Compiled::StepCache>();
      c.caches[k]->roots = roots;
      for (int s : st.out)
        if (s >= 0) {
          derived[s] = 1;
          deps[s] = roots;
          c.cached_slot[s] = 1;
        }
    }
  }
  // Last uses. Constants, graph outputs and values a subgraph may see (everything up to the
  // last node with subgraphs) stay alive.
  const int n_slots = static_cast<int>(c.slot_names.size());
  std::vector<int> last(n_slots, -1);
  std::vector<char> keep(n_slots, 0);
  for (const auto& [s, _] : c.const_slots) keep[s] = 1;
  for (int s : c.out_slots)
    if (s >= 0) keep[s] = 1;
  int last_sub = -1;
  for (size_t k = 0; k < c.steps.size(); ++k) {
    for (int s : c.steps[k].in)
      if (s >= 0) last[s] = static_cast<int>(k);
    for (int s : c.steps[k].out)  // an output nobody reads dies right away
      if (s >= 0 && last[s] < static_cast<int>(k)) last[s] = static_cast<int>(k);
    if (c.steps[k].has_sub) last_sub = static_cast<int>(k);
    // A cached step reads the shapes its roots measure: those values live until it has run.
    if (c.caches[k])
      for (int r : c.caches[k]->roots) last[c.root_in[r]] = std::max(last[c.root_in[r]], static_cast<int>(k));
  }
  for (int s = 0; s < n_slots; ++s) {
    if (keep[s] || last[s] < 0 || last[s] <= last_sub) continue;
    c.steps[last[s]].release.push_back(s);
  }
}

std::vector<Tensor> Model::Impl::run_graph(const Compiled& c, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                           const std::unordered_map<std::string, Tensor>* outer) const {
  std::vector<Tensor> v(c.slot_names.size());
  if (outer)
    for (const auto& [name, s] : c.outer) {
      auto it = outer->find(name);
      if (it != outer->end()) v[s] = it->second;
    }
  for (const auto& [s, t] : c.const_slots) v[s] = t;
  for (const auto& [k, t] : feeds) {
    auto it = c.slot_of.find(k);
    if (it != c.slot_of.end()) v[it->second] = t;
  }
  const GraphP& g = *c.g;
  std::vector<Tensor> in_buf, out_buf;
  std::vector<int64_t> key;
  // Host mode (Impl::host): which slots hold CPU values, their copies on `device` (made when a
  // step there reads them), and per step the CPU values of its inputs (OpContext::host).
  std::vector<char> on_host;
  std::vector<Tensor> twin, host_in;
  if (host) {
    on_host.assign(v.size(), 0);
    twin.resize(v.size());
    for (const auto& [s, t] : c.const_slots) on_host[s] = 1;
    for (const auto& [k, t] : feeds) {
      auto it = c.slot_of.find(k);
      if (it != c.slot_of.end()) on_host[it->second] = t.device() == load_device();
    }
  }
  for (size_t k = 0; k < c.steps.size(); ++k) {
    const Step& st = c.steps[k];
    Compiled::StepCache* cache = c.caches[k].get();
    if (cache) {
      // The key: the shapes of the values the roots measure (all computed by now).
      key.clear();
      for (int r : cache->roots) {
        const Tensor& t = v[c.root_in[r]];
        if (!t.defined()) {
          key.push_back(-2);
          continue;
        }
        key.push_back(t.dim());
        key.insert(key.end(), t.shape().begin(), t.shape().end());
      }
      bool hit = false;
      {
        std::lock_guard<std::mutex> l(*c.cache_mu);
        for (const auto& [ek, outs] : cache->entries)
          if (ek == key) {
            for (size_t i = 0; i < st.out.size(); ++i)
              if (st.out[i] >= 0) v[st.out[i]] = outs[i];
            hit = true;
            break;
          }
      }
      if (hit) {
        if (host)
          for (int s : st.out)
            if (s >= 0) on_host[s] = 1;  // computed from constants and shapes, on the CPU
        for (int s : st.release) v[s] = Tensor{};
        continue;
      }
    }
    const NodeP& n = g.nodes[st.node];
    // Host mode: a step whose inputs are all CPU values, or that reads only its input's shape,
    // runs on the CPU; others run on the device, with the CPU values of their inputs beside.
    bool on_cpu = false;
    if (host && !st.has_sub) {
      on_cpu = n.op_type == "Shape" || n.op_type == "Size";
      if (!on_cpu) {
        on_cpu = true;
        for (int s : st.in) on_cpu = on_cpu && (s < 0 || on_host[s]);
      }
      host_in.assign(st.in.size(), Tensor{});
    }
    in_buf.clear();
    for (size_t i = 0; i < st.in.size(); ++i) {
      const int s = st.in[i];
      if (s < 0) {
        in_buf.emplace_back();
        continue;
      }
      if (!v[s].defined()) {
        OpContext e{n, opset, device, {}, {}, {}};
        KILN_CHECK(false, "onnx",
                   e.where() << ": input '" << (i < n.input.size() ? n.input[i] : c.slot_names[s])
                             << "' has no value (a graph input not fed?)");
      }
      if (host && !on_cpu && on_host[s]) {
        if (!twin[s].defined()) twin[s] = v[s].to(device);
        host_in[i] = v[s];
        in_buf.push_back(twin[s]);
        continue;
      }
      in_buf.push_back(v[s]);
    }
    out_buf.clear();
    out_buf.resize(st.out.size());
    OpContext ctx{
        n,          opset,     on_cpu ? load_device() : device, std::move(in_buf), std::move(out_buf), {}, st.post,
        st.post_lo, st.post_hi};
    ctx.res = st.res;
    ctx.res_first = st.res_first;
    if (st.prep >= 0) ctx.prep = &c.prepared[static_cast<size_t>(st.prep)];
    if (host) ctx.host = &host_in;
    KILN_CHECK(st.fn, "onnx", ctx.where() << ": op '" << n.op_type << "' is not supported");
    std::unordered_map<std::string, Tensor> env;  // the scope a subgraph sees
    if (st.has_sub) {
      if (outer) env = *outer;
      for (size_t s = 0; s < v.size(); ++s)
        if (v[s].defined()) env[c.slot_names[s]] = v[s];
      ctx.run_graph = [&](const GraphP& sg, const std::vector<Tensor>& ins) {
        auto it = c.subs.find(&sg);
        KILN_ASSERT(it != c.subs.end());
        std::vector<std::pair<std::string, Tensor>> f;
        KILN_CHECK(ins.size() <= sg.inputs.size(), "onnx",
                   ctx.where() << ": subgraph takes " << sg.inputs.size() << " inputs, got " << ins.size());
        for (size_t i = 0; i < ins.size(); ++i) f.emplace_back(sg.inputs[i].name, ins[i]);
        return run_graph(*it->second, f, &env);
      };
    }
    auto run_step = [&] {
      if (st.pair >= 0)
        run_conv_pair(ctx, g.nodes[static_cast<size_t>(st.pair)], st.post2, st.post2_lo, st.post2_hi);
      else if (st.pool >= 0)
        run_conv_pool(ctx, g.nodes[static_cast<size_t>(st.pool)]);
      else
        (*st.fn)(ctx);
    };
    if (op_profile()) {
      auto t0 = std::chrono::steady_clock::now();
      run_step();
      const bool by_node = op_profile()->by_node;
      op_profile()->add(!by_node          ? n.op_type
                        : !n.name.empty() ? n.name
                                          : n.op_type + " -> " + (n.output.empty() ? std::string("?") : n.output[0]),
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    } else {
      run_step();
    }
    for (size_t i = 0; i < st.out.size(); ++i) {
      if (st.out[i] < 0) continue;
      if (!ctx.out[i].defined()) continue;  // an optional output the op does not produce
      v[st.out[i]] = std::move(ctx.out[i]);
      if (host) {
        on_host[st.out[i]] = on_cpu;
        twin[st.out[i]] = Tensor{};
      }
    }
    if (cache) {
      std::vector<Tensor> outs(st.out.size());
      for (size_t i = 0; i < st.out.size(); ++i)
        if (st.out[i] >= 0) outs[i] = v[st.out[i]];
      std::lock_guard<std::mutex> l(*c.cache_mu);
      if (cache->entries.size() >= 8) cache->entries.erase(cache->entries.begin());
      cache->entries.emplace_back(key, std::move(outs));
    }
    for (int s : st.release) {
      v[s] = Tensor{};
      if (host) twin[s] = Tensor{};
    }
    in_buf = std::move(ctx.in);
    out_buf = std::move(ctx.out);
  }
  std::vector<Tensor> outs;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const int s = c.out_slots[i];
    KILN_CHECK(s >= 0 && v[s].defined(), "onnx", "graph output '" << g.outputs[i].name << "' was not computed");
    // A cached shape-derived value is shared with later runs: the caller gets its own copy.
    outs.push_back(c.cached_slot[s] ? v[s].clone() : v[s]);
  }
  return outs;
}

namespace {
ValueInfo to_value_info(const proto::ValueInfoP& v) {
  ValueInfo r;
  r.name = v.name;
  if (v.is_tensor && has_dtype(v.elem_type)) r.dtype = to_dtype(v.elem_type, v.name);
  r.has_shape = v.has_shape;
  for (const auto& d : v.shape) {
    Dim x;
    if (d.value >= 0 && d.param.empty()) x.value = d.value;
    x.param = d.param;
    r.shape.push_back(std::move(x));
  }
  return r;
}
}  // namespace

namespace {

// Load-time rewrite: Conv (constant weight/bias) followed by inference BatchNormalization
// (constant parameters) that alone uses the Conv's output becomes one Conv with folded weights,
// w' = w * s, b' = (b - mean) * s + beta with s = scale / sqrt(var + eps).
void fold_conv_bn(GraphP& g, int64_t opset) {
  std::unordered_map<std::string, size_t> init_of;
  for (size_t i = 0; i < g.initializers.size(); ++i) init_of[g.initializers[i].name] = i;
  std::unordered_map<std::string, int> uses;
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].input) ++uses[in];
    for (const auto& a : g.nodes[i].attrs)
      if (a.g || !a.graphs.empty()) return;  // subgraphs may use any name: leave such graphs alone
    for (const auto& o : g.nodes[i].output) producer[o] = i;
  }
  for (const auto& o : g.outputs) ++uses[o.name];
  auto f32_init = [&](const std::string& name) -> const TensorP* {
    auto it = init_of.find(name);
    if (name.empty() || it == init_of.end()) return nullptr;
    const TensorP& t = g.initializers[it->second];
    return t.data_type == proto::kFloat && !t.external ? &t : nullptr;
  };
  std::vector<char> drop(g.nodes.size(), 0);
  int counter = 0;
  for (size_t bi = 0; bi < g.nodes.size(); ++bi) {
    NodeP& bn = g.nodes[bi];
    if (bn.op_type != "BatchNormalization" || !is_default_domain(bn.domain) || bn.input.size() != 5 ||
        bn.output.size() != 1 || (opset >= 14 && bn.attr("training_mode") && bn.attr("training_mode")->i != 0) ||
        (opset < 7) || bn.attr("spatial"))
      continue;
    auto pit = producer.find(bn.input[0]);
    if (pit == producer.end() || uses[bn.input[0]] != 1) continue;
    NodeP& conv = g.nodes[pit->second];
    if (conv.op_type != "Conv" || !is_default_domain(conv.domain) || conv.input.size() < 2 || conv.output.size() != 1 ||
        drop[pit->second])
      continue;
    const TensorP* w = f32_init(conv.input[1]);
    const TensorP* b = conv.input.size() > 2 && !conv.input[2].empty() ? f32_init(conv.input[2]) : nullptr;
    if (!w || (conv.input.size() > 2 && !conv.input[2].empty() && !b) || w->dims.size() < 3) continue;
    const TensorP* p[4];
    bool ok = true;
    for (int k = 0; k < 4; ++k) {
      p[k] = f32_init(bn.input[1 + k]);
      ok = ok && p[k] && p[k]->dims.size() == 1 && p[k]->dims[0] == w->dims[0];
    }
    if (!ok) continue;
    try {
      Device cpu = Device::cpu();
      Tensor wt = tensor_from(*w, cpu, "fold"), sc = tensor_from(*p[0], cpu, "fold"),
             be = tensor_from(*p[1], cpu, "fold"), mu = tensor_from(*p[2], cpu, "fold"),
             va = tensor_from(*p[3], cpu, "fold");
      const proto::AttrP* ea = bn.attr("epsilon");
      double eps = ea ? ea->f : 1e-5;
      Tensor s = sc / sqrt(va + eps);
      Shape ws(wt.dim(), 1);
      ws[0] = wt.size(0);
      Tensor nw = (wt * s.reshape(ws)).contiguous();
      Tensor nb = ((b ? tensor_from(*b, cpu, "fold") : zeros_like(mu)) - mu) * s + be;
      auto add_init = [&](const std::string& name, const Tensor& t) {
        TensorP tp;
        tp.name = name;
        tp.data_type = proto::kFloat;
        for (int64_t d : t.shape()) tp.dims.push_back(d);
        tp.floats = t.contiguous().to_vector<float>();
        g.initializers.push_back(std::move(tp));
      };
      std::string base = "__kiln_fold" + std::to_string(counter++) + "_";
      add_init(base + "w", nw);
      add_init(base + "b", nb);
      conv.input.resize(3);
      conv.input[1] = base + "w";
      conv.input[2] = base + "b";
      conv.output[0] = bn.output[0];
      drop[bi] = 1;
      // Pointers into initializers are invalid after push_back: rebuild the index.
      init_of.clear();
      for (size_t i = 0; i < g.initializers.size(); ++i) init_of[g.initializers[i].name] = i;
    } catch (const Error&) {
      continue;
    }
  }
  std::vector<NodeP> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

}  // namespace

Model Model::from_bytes(std::string_view bytes, const Device& device, const LoadOptions& options) {
  // On the CPU the plan runs on the plain CPU: it fuses what it can itself (conv with its
  // activation, matmul with bias, layer norm), and the fusion decorator's queueing costs more
  // than it saves on the small tensors of batch-1 inference (BERT-style encoder: +25%).
  const Device exec = device.is_cpu() && device.has_fusion() ? device.without_fusion() : device;
  auto impl = std::make_shared<Impl>(Impl{exec, {}, 0, {}, {}, {}, {}, {}, true, {}, device});
  impl->host = !exec.backend()->has_data();
  impl->model = proto::parse_model(bytes);
  const auto& m = impl->model;
  KILN_CHECK(m.has_graph, "onnx", "the model has no graph");
  for (const auto& o : m.opsets) impl->opsets[is_default_domain(o.domain) ? "" : o.domain] = o.version;
  if (!impl->opsets.count("")) impl->opsets[""] = m.opsets.empty() ? 1 : 0;
  impl->opset = impl->opsets[""];
  impl->optimize = options.optimize;
  if (options.optimize) fold_conv_bn(impl->model.graph, impl->opset);
  impl->main = impl->compile(m.graph, {}, "graph '" + m.graph.name + "'");
  impl->hint_constants(*impl->main);
  std::set<std::string> init_names;
  for (const auto& t : m.graph.initializers) init_names.insert(t.name);
  for (const auto& v : m.graph.inputs)
    if (!init_names.count(v.name)) impl->inputs.push_back(to_value_info(v));
  for (const auto& v : m.graph.outputs) impl->outputs.push_back(to_value_info(v));
  if (!impl->unsupported.empty() && !options.allow_unsupported) {
    std::string msg;
    for (const auto& u : impl->unsupported)
      msg += "\n  " + (u.domain.empty() ? std::string() : u.domain + ".") + u.op_type + " (node '" + u.node_name +
             "', opset " + std::to_string(u.opset) + "): " + u.reason;
    KILN_CHECK(false, "onnx", "the model uses " << impl->unsupported.size() << " unsupported op(s):" << msg);
  }
  return Model(std::move(impl));
}

Model::Model(const std::string& path, const Device& device, const LoadOptions& options)
    : Model(from_bytes(proto::read_file(path), device, options)) {}

std::vector<Tensor> Model::run(const std::vector<Tensor>& inputs) const {
  KILN_CHECK(inputs.size() == impl_->inputs.size(), "onnx",
             "run: the model takes " << impl_->inputs.size() << " inputs, got " << inputs.size());
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined(), "onnx", "run: input " << i << " ('" << impl_->inputs[i].name << "') is undefined");
    feeds.emplace_back(impl_->inputs[i].name, move_to(inputs[i], impl_->device));
  }
  return impl_->deliver(impl_->run_graph(*impl_->main, feeds, nullptr));
}

std::vector<Tensor> Model::run(const std::map<std::string, Tensor>& inputs) const {
  std::set<std::string> allowed;
  for (const auto& v : impl_->model.graph.inputs) allowed.insert(v.name);
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const auto& [k, v] : inputs) {
    KILN_CHECK(allowed.count(k), "onnx", "run: the model has no input named '" << k << "'");
    feeds.emplace_back(k, move_to(v, impl_->device));
  }
  for (const auto& v : impl_->inputs)
    KILN_CHECK(inputs.count(v.name), "onnx", "run: input '" << v.name << "' is not given");
  return impl_->deliver(impl_->run_graph(*impl_->main, feeds, nullptr));
}

const std::vector<ValueInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Model::outputs() const { return impl_->outputs; }
std::vector<std::string> Model::input_names() const {
  std::vector<std::string> v;
  for (const auto& x : impl_->inputs) v.push_back(x.name);
  return v;
}
std::vector<std::string> Model::output_names() const {
  std::vector<std::string> v;
  for (const auto& x : impl_->outputs) v.push_back(x.name);
  return v;
}
const std::vector<UnsupportedOp>& Model::unsupported() const { return impl_->unsupported; }
int64_t Model::opset(const std::string& domain) const {
  auto it = impl_->opsets.find(is_default_domain(domain) ? "" : domain);
  return it == impl_->opsets.end() ? 0 : it->second;
}
const Device& Model::device() const { return impl_->user_device; }

std::vector<std::string> Model::plan() const {
  std::vector<std::string> lines;
  const Compiled& c = *impl_->main;
  auto post = [](int p) { return p == 1 ? " + Relu" : p == 2 ? " + Clip" : p == 3 ? " + bias Add" : ""; };
  for (const Step& st : c.steps) {
    const NodeP& n = c.g->nodes[st.node];
    // A pair: first conv, its activation, second conv, its residual and activation.
    std::string s = n.op_type + " " + n.name;
    if (st.pair >= 0) {
      const NodeP& b = c.g->nodes[static_cast<size_t>(st.pair)];
      s += post(st.post) + (" + " + b.op_type + " " + b.name);
    }
    if (st.res >= 0) s += " + residual Add";
    s += post(st.pair >= 0 ? st.post2 : st.post);
    if (st.pool >= 0) s += " + MaxPool " + c.g->nodes[static_cast<size_t>(st.pool)].name;
    lines.push_back(std::move(s));
  }
  return lines;
}

}  // namespace kiln::onnx
