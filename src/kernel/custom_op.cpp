// SPDX-License-Identifier: MIT OR Apache-2.0
// Custom ops (kiln/custom_op.h): a traced kernel per combination of input dtypes, compiled for
// the CPU, launched over host copies of the inputs (the inputs themselves when they are
// contiguous CPU tensors), recorded for autodiff with the user's backward.
#include "kiln/custom_op.h"

#include <sstream>

#include "autodiff/graph.h"
#include "core/backend.h"
#include "kernel/ir.h"
#include "kernel/launch.h"
#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln {

namespace {

/// The kernel element type of a tensor dtype; throws for dtypes kernels do not have.
kernel::Type kernel_type(DType d, const std::string& op) {
  switch (d) {
    case DType::F32:
      return kernel::Type::F32;
    case DType::F16:
      return kernel::Type::F16;
    case DType::BF16:
      return kernel::Type::BF16;
    case DType::I32:
      return kernel::Type::I32;
    case DType::I64:
      return kernel::Type::I64;
    case DType::Bool:
      return kernel::Type::Bool;
    default:
      KILN_CHECK(false, op, op << ": kernels have no element type for dtype " << dtype_name(d).data());
  }
  return kernel::Type::F32;
}

std::string shapes_of(const std::vector<Tensor>& ts) {
  std::ostringstream s;
  for (size_t i = 0; i < ts.size(); ++i)
    s << (i ? ", " : "")
      << (ts[i].defined() ? to_string(ts[i].shape()) + " " + dtype_name(ts[i].dtype()).data() : "undefined");
  return s.str();
}

/// A buffer argument over t's memory (a contiguous CPU tensor).
kernel::Arg buffer_arg(const Tensor& t, kernel::Type type) {
  auto* base = static_cast<char*>(host_storage_data(t));
  KILN_ASSERT(base != nullptr || t.numel() == 0);
  int32_t dummy = 0;
  kernel::Arg a(&dummy, 0);
  a.type = type;
  a.ptr = base ? base + t.storage_offset() * static_cast<int64_t>(t.element_size()) : nullptr;
  a.count = t.numel();
  return a;
}

}  // namespace

namespace kernel::detail {

namespace {
std::mutex& launchers_mu() {
  static std::mutex mu;
  return mu;
}
std::map<DeviceType, std::unique_ptr<DeviceLauncher>>& launchers() {
  static auto* m = new std::map<DeviceType, std::unique_ptr<DeviceLauncher>>;  // never destroyed
  return *m;
}
}  // namespace

void register_launcher(DeviceType type, DeviceLauncher launcher) {
  std::lock_guard<std::mutex> lock(launchers_mu());
  launchers()[type] = std::make_unique<DeviceLauncher>(std::move(launcher));
}

const DeviceLauncher* launcher(DeviceType type) {
  std::lock_guard<std::mutex> lock(launchers_mu());
  auto it = launchers().find(type);
  return it == launchers().end() ? nullptr : it->second.get();
}

}  // namespace kernel::detail

struct CustomOp::State {
  CustomOpSpec spec;
  std::mutex mu;
  std::map<std::string, kernel::Kernel> traced;    // by input dtypes
  std::map<std::string, kernel::CpuKernel> built;  // the same keys, compiled for the CPU

  /// The kernel for these inputs (traced on first use) and its key.
  std::pair<kernel::Kernel, std::string> kernel_for(const std::vector<Tensor>& in) {
    std::string key;
    for (const Tensor& t : in) key += std::string(dtype_name(t.dtype())) + ",";
    std::lock_guard<std::mutex> lock(mu);
    auto it = traced.find(key);
    if (it != traced.end()) return {it->second, key};
    kernel::Kernel k = spec.kernel(in);
    KILN_CHECK(static_cast<bool>(k), spec.name, spec.name << ": the kernel function returned no kernel");
    traced.emplace(key, k);
    return {k, key};
  }

  kernel::CpuKernel cpu_kernel(const kernel::Kernel& k, const std::string& key) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto it = built.find(key); it != built.end()) return it->second;
    }
    kernel::CpuKernel c = kernel::compile_cpu(k);  // outside the lock: may run the compiler
    std::lock_guard<std::mutex> lock(mu);
    return built.emplace(key, std::move(c)).first->second;
  }

  /// The launch of a call: the spec's, or one thread per element of output 0.
  CustomLaunch launch_of(const kernel::ir::Kernel& ir, const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                         const std::vector<Tensor>& inputs) const {
    const std::string& op = spec.name;
    if (spec.launch) return spec.launch(in, out);
    CustomLaunch launch;
    const int64_t n = out[0].numel(), threads = ir.threads();
    // One thread per element reads every input at the same index: they must be as long.
    for (const Tensor& t : in)
      KILN_CHECK(t.numel() == n, op,
                 op << ": with the default launch every input has output 0's " << n << " elements; got "
                    << shapes_of(inputs) << " (give the op a launch function otherwise)");
    launch.groups = kernel::Dim3((n + threads - 1) / threads);
    KILN_CHECK(
        ir.scalars.size() <= 1, op,
        op << ": kernel '" << ir.name << "' has " << ir.scalars.size() << " scalars; give the op a launch function");
    if (ir.scalars.size() == 1) {
      kernel::Arg a(static_cast<int64_t>(n));
      a.type = ir.scalars[0].type;
      launch.scalars.push_back(a);
    }
    return launch;
  }

  /// Runs the kernel on `exec` (the CPU, or a device with a launcher) over contiguous copies of
  /// the inputs there; the outputs are on `exec`.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const Device& exec,
                          const kernel::detail::DeviceLauncher* launcher) {
    const std::string& op = spec.name;
    std::vector<Tensor> in;
    for (const Tensor& t : inputs) {
      Tensor c = t.detach().to(exec).contiguous();
      in.push_back(launcher && c.storage_offset() != 0 ? c.clone() : c);  // device buffers bind from offset 0
    }
    std::vector<std::pair<Shape, DType>> specs =
        spec.outputs ? spec.outputs(in) : std::vector<std::pair<Shape, DType>>{{in.at(0).shape(), in.at(0).dtype()}};
    KILN_CHECK(!specs.empty(), op, op << ": the op has no outputs");
    std::vector<Tensor> out;
    for (const auto& [shape, dtype] : specs) out.push_back(empty(shape, {.dtype = dtype, .device = exec}));
    const auto [k, key] = kernel_for(in);
    const kernel::ir::Kernel& ir = k.ir();
    KILN_CHECK(ir.buffers.size() == in.size() + out.size(), op,
               op << ": kernel '" << ir.name << "' has " << ir.buffers.size() << " buffers, the op " << in.size()
                  << " input(s) and " << out.size() << " output(s): " << shapes_of(inputs));
    for (size_t i = 0; i < in.size() + out.size(); ++i) {
      const Tensor& t = i < in.size() ? in[i] : out[i - in.size()];
      KILN_CHECK(ir.buffers[i].type == kernel_type(t.dtype(), op), op,
                 op << ": kernel buffer '" << ir.buffers[i].name << "' holds " << kernel::type_name(ir.buffers[i].type)
                    << ", its tensor is " << dtype_name(t.dtype()).data());
    }
    const CustomLaunch launch = launch_of(ir, in, out, inputs);
    if (launch.groups.x <= 0 || launch.groups.y <= 0 || launch.groups.z <= 0) return out;
    if (launcher) {
      std::vector<kernel::detail::DeviceBuffer> bufs;
      for (size_t i = 0; i < in.size() + out.size(); ++i) {
        const Tensor& t = i < in.size() ? in[i] : out[i - in.size()];
        bufs.push_back({t.impl().storage.get(), 0});
      }
      (*launcher)(k, exec.index(), bufs, launch.scalars, launch.groups);
      return out;
    }
    std::vector<kernel::Arg> args;
    for (size_t i = 0; i < in.size() + out.size(); ++i) {
      const Tensor& t = i < in.size() ? in[i] : out[i - in.size()];
      args.push_back(buffer_arg(t, kernel_type(t.dtype(), op)));
    }
    args.insert(args.end(), launch.scalars.begin(), launch.scalars.end());
    cpu_kernel(k, key).launch(launch.groups, args);
    return out;
  }
};

CustomOp::CustomOp(CustomOpSpec spec) : s_(std::make_shared<State>()) {
  KILN_CHECK(!spec.name.empty(), "CustomOp", "a custom op needs a name");
  KILN_CHECK(static_cast<bool>(spec.kernel), spec.name, spec.name << ": a custom op needs a kernel function");
  s_->spec = std::move(spec);
}

const std::string& CustomOp::name() const { return s_->spec.name; }

std::vector<Tensor> CustomOp::call(const std::vector<Tensor>& inputs) const {
  const std::string& op = s_->spec.name;
  KILN_CHECK(!inputs.empty(), op, op << ": a custom op needs at least one input");
  for (const Tensor& t : inputs) KILN_CHECK(t.defined(), op, op << ": an input is undefined: " << shapes_of(inputs));
  const Device device = inputs[0].device();
  for (const Tensor& t : inputs)
    KILN_CHECK(t.device() == device, op,
               op << ": inputs on different devices (" << device.str() << ", " << t.device().str() << ")");
  // A device whose backend launches kernels runs it in its own memory; any other goes through the CPU.
  const kernel::detail::DeviceLauncher* launcher =
      device.type() == DeviceType::CPU ? nullptr : kernel::detail::launcher(device.type());
  // The device's own backend, under its autodiff and fusion layers (if any).
  Backend* own = device.backend();
  while (own->inner()) own = own->inner();
  const Device exec = launcher ? Device(own, device.index()) : Device::cpu();
  std::vector<Tensor> out = s_->run(inputs, exec, launcher);
  for (Tensor& t : out) t = t.to(device);
  if (!s_->spec.backward || !grad_enabled()) return out;
  bool needs = false;
  for (const Tensor& t : inputs) needs = needs || autodiff::requires_grad(t);
  if (!needs) return out;
  // The outputs as detached aliases: the rule must not hold their autograd state (a cycle). The
  // inputs are saved by the node, so a backward of tensor ops on them records its own graph
  // (gradients of gradients).
  std::vector<Tensor> out_detached;
  for (const Tensor& t : out) out_detached.push_back(t.detach());
  auto state = s_;
  autodiff::record_custom(
      op.c_str(), inputs, out,
      [state, out_detached](const autodiff::GradContext& c) -> std::vector<Tensor> {
        const std::vector<Tensor>& in_detached = c.inputs;
        CustomGradArgs a{c.inputs, out_detached, {}};
        for (size_t i = 0; i < out_detached.size(); ++i) a.grad_outputs.push_back(c.grad_or_zeros(i));
        std::vector<Tensor> g = state->spec.backward(a);
        const std::string& name = state->spec.name;
        KILN_CHECK(
            g.size() == in_detached.size(), name,
            name << ": backward returned " << g.size() << " gradient(s) for " << in_detached.size() << " input(s)");
        for (size_t i = 0; i < g.size(); ++i)
          KILN_CHECK(!g[i].defined() || g[i].shape() == in_detached[i].shape(), name,
                     name << ": the gradient of input " << i << " has shape " << to_string(g[i].shape())
                          << ", the input " << to_string(in_detached[i].shape()));
        return g;
      },
      /*save_inputs=*/true);
  return out;
}

}  // namespace kiln
