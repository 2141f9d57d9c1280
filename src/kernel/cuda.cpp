// SPDX-License-Identifier: MIT OR Apache-2.0
// The CUDA launcher: the CUDA C rendering compiled to CUBIN by NVRTC for the device's
// architecture (cached on disk like the other targets), loaded into the device's primary
// context through the driver API. libcuda is opened at run time (never linked: the toolkit's
// stub makes a linked program fail to start on a machine without a GPU), so a build runs
// everywhere and reports "no device" where there is none.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>

#include "kernel/args.h"
#include "kernel/cache.h"
#include "kernel/nvrtc.h"
#include "kernel/render.h"
#include "kernel/render_clike.h"

namespace kiln::kernel {
namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
constexpr int kAttrMaxThreadsPerBlock = 1, kAttrMaxSharedPerBlock = 8, kAttrMaxGridY = 6, kAttrMajor = 75,
              kAttrMinor = 76;
constexpr size_t kStaticSharedLimit = 48 * 1024;  // static __shared__ arrays: 48 KiB on every GPU

/// The driver entry points Kiln uses, bound once; `why` says what failed.
struct Driver {
  void* lib = nullptr;
  std::string why;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_name)(char*, int, CUdevice) = nullptr;
  CUresult (*attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*set_current)(CUcontext) = nullptr;
  CUresult (*load)(CUmodule*, const void*) = nullptr;
  CUresult (*function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*free)(CUdeviceptr) = nullptr;
  CUresult (*to_device)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*to_host)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                     void**) = nullptr;
  CUresult (*sync)() = nullptr;
  CUresult (*error)(CUresult, const char**) = nullptr;

  std::string text(CUresult rc) const {
    const char* s = nullptr;
    if (error && error(rc, &s) != 0) s = nullptr;
    if (!s && rc == 34) s = "the toolkit's stub libcuda, not a driver (no GPU driver installed)";
    if (!s && rc == 35) s = "the driver is older than the CUDA runtime";
    if (!s && rc == 100) s = "no CUDA-capable device";
    return (s ? std::string(s) : "CUDA error") + " (" + std::to_string(rc) + ")";
  }
};

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d.lib) {
      d.why = "no CUDA driver (libcuda.so.1 not found)";
      return;
    }
    bool ok = bind_symbol(d.lib, "cuInit", d.init) && bind_symbol(d.lib, "cuDeviceGetCount", d.device_count) &&
              bind_symbol(d.lib, "cuDeviceGet", d.device_get) && bind_symbol(d.lib, "cuDeviceGetName", d.device_name) &&
              bind_symbol(d.lib, "cuDeviceGetAttribute", d.attribute) &&
              bind_symbol(d.lib, "cuDevicePrimaryCtxRetain", d.retain) &&
              bind_symbol(d.lib, "cuCtxSetCurrent", d.set_current) && bind_symbol(d.lib, "cuModuleLoadData", d.load) &&
              bind_symbol(d.lib, "cuModuleGetFunction", d.function) && bind_symbol(d.lib, "cuMemAlloc_v2", d.alloc) &&
              bind_symbol(d.lib, "cuMemFree_v2", d.free) && bind_symbol(d.lib, "cuMemcpyHtoD_v2", d.to_device) &&
              bind_symbol(d.lib, "cuMemcpyDtoH_v2", d.to_host) && bind_symbol(d.lib, "cuLaunchKernel", d.launch) &&
              bind_symbol(d.lib, "cuCtxSynchronize", d.sync) && bind_symbol(d.lib, "cuGetErrorString", d.error);
    if (!ok) {
      d.why = "the CUDA driver lacks an entry point Kiln needs";
    } else if (CUresult rc = d.init(0); rc != 0) {
      d.why = "the CUDA driver does not start: " + d.text(rc);
      ok = false;
    }
    if (!ok) {
      dlclose(d.lib);
      d.lib = nullptr;
    }
  });
  return d;
}

/// One device as the launcher uses it: its primary context and what tracing needs to know.
struct Gpu {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  std::string name;
  int arch = 0;  ///< 90 for sm_90
  Limits limits;
  int64_t max_grid_yz = 65535;
};

/// Device `index`, opened once; throws kiln::Error saying why it is not available.
const Gpu& gpu(int index) {
  static std::mutex mu;
  static std::map<int, Gpu> open;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = open.find(index); it != open.end()) return it->second;
  const Driver& d = driver();
  const std::string prefix = "[kernel] CUDA device " + std::to_string(index) + ": ";
  if (!d.lib) throw Error(prefix + d.why);
  std::string why;
  if (!nvrtc::available(&why)) throw Error(prefix + "no NVRTC to compile kernels (" + why + ")");
  int count = 0;
  if (CUresult rc = d.device_count(&count); rc != 0) throw Error(prefix + "cuDeviceGetCount: " + d.text(rc));
  if (index < 0 || index >= count)
    throw Error(prefix + "no such device (" + std::to_string(count) + " CUDA devices here)");
  Gpu g;
  int major = 0, minor = 0, threads = 0, shared = 0, grid_y = 0;
  char name[256] = {0};
  CUresult rc = d.device_get(&g.dev, index);
  if (rc == 0) rc = d.device_name(name, sizeof name - 1, g.dev);
  if (rc == 0) rc = d.attribute(&major, kAttrMajor, g.dev);
  if (rc == 0) rc = d.attribute(&minor, kAttrMinor, g.dev);
  if (rc == 0) rc = d.attribute(&threads, kAttrMaxThreadsPerBlock, g.dev);
  if (rc == 0) rc = d.attribute(&shared, kAttrMaxSharedPerBlock, g.dev);
  if (rc == 0) rc = d.attribute(&grid_y, kAttrMaxGridY, g.dev);
  if (rc == 0) rc = d.retain(&g.ctx, g.dev);
  if (rc != 0) throw Error(prefix + d.text(rc));
  g.name = name;
  g.arch = major * 10 + minor;
  g.limits.shared_bytes = static_cast<uint32_t>(std::min<size_t>(static_cast<size_t>(shared), kStaticSharedLimit));
  g.limits.max_group_threads = static_cast<uint32_t>(threads);
  g.limits.subgroups = true;
  g.limits.subgroup_size = 32;
  g.max_grid_yz = std::min<int64_t>(grid_y, 65535);
  return open.emplace(index, g).first->second;
}

/// Throws kiln::Error naming the kernel and the call when rc is an error.
void check(CUresult rc, const ir::Kernel& k, const char* call) {
  if (rc != 0) throw Error(k.prefix() + call + " failed on the CUDA device: " + driver().text(rc));
}

/// Device memory freed on every way out of a launch.
struct DeviceMemory {
  std::vector<CUdeviceptr> ptrs;
  ~DeviceMemory() {
    for (CUdeviceptr p : ptrs)
      if (p) driver().free(p);
  }
};

}  // namespace

struct CudaKernel::Impl {
  std::shared_ptr<const ir::Kernel> k;
  const Gpu* gpu = nullptr;
  CUfunction fn = nullptr;
  std::string origin;
};

bool cuda_available(int device, std::string* why) {
  try {
    (void)gpu(device);
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

Limits cuda_limits(int device) { return gpu(device).limits; }

CudaKernel compile_cuda(const Kernel& kernel, int device) {
  if (!kernel) throw Error("[kernel] compile_cuda: an empty Kernel");
  const ir::Kernel& k = kernel.ir();
  const Gpu& g = gpu(device);
  const Limits& want = k.limits;
  if (k.threads() > g.limits.max_group_threads || want.shared_bytes > g.limits.shared_bytes ||
      (want.subgroups && want.subgroup_size != 32))
    throw Error(k.prefix() + "traced for " + want.str() + ", which CUDA device " + g.name + " lacks (" +
                g.limits.str() + ", " + std::to_string(k.threads()) + " threads per group asked)");
  const std::string src = gen::render_cuda(k);
  cache::dump_source(k, "cu", src);
  const std::string key = cache::hash128(src + "\nnvrtc " + nvrtc::version() + "|sm_" + std::to_string(g.arch));

  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const CudaKernel::Impl>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(key); it != loaded.end()) {
    auto impl = std::make_shared<CudaKernel::Impl>(*it->second);
    impl->k = std::make_shared<const ir::Kernel>(k);
    impl->origin = "memory";
    return CudaKernel(std::move(impl));
  }
  cache::Artifact a =
      cache::build(k, key, ".cubin", [&](const std::string&) { return nvrtc::compile_cubin(src, k.name, g.arch); });
  const Driver& d = driver();
  check(d.set_current(g.ctx), k, "cuCtxSetCurrent");
  CUmodule module = nullptr;
  check(d.load(&module, a.bytes.data()), k, "cuModuleLoadData");
  auto impl = std::make_shared<CudaKernel::Impl>();
  check(d.function(&impl->fn, module, gen::identifier(k.name).c_str()), k, "cuModuleGetFunction");
  impl->k = std::make_shared<const ir::Kernel>(k);
  impl->gpu = &g;
  impl->origin = a.origin;
  loaded[key] = impl;  // the module stays loaded for the process's life
  return CudaKernel(std::move(impl));
}

std::string CudaKernel::device() const {
  return impl_ ? impl_->gpu->name + ", sm_" + std::to_string(impl_->gpu->arch) : "none";
}

const std::string& CudaKernel::origin() const {
  static const std::string none = "none";
  return impl_ ? impl_->origin : none;
}

void CudaKernel::operator()(Dim3 groups, std::initializer_list<Arg> args) const {
  launch(groups, std::vector<Arg>(args));
}

void CudaKernel::launch(Dim3 groups, const std::vector<Arg>& args) const {
  if (!impl_) throw Error("[kernel] launch of an empty CudaKernel");
  const ir::Kernel& k = *impl_->k;
  detail::check_launch(k, groups, args, impl_->gpu->max_grid_yz);
  if (groups.x == 0 || groups.y == 0 || groups.z == 0) return;
  const Driver& d = driver();
  check(d.set_current(impl_->gpu->ctx), k, "cuCtxSetCurrent");
  const size_t nb = k.buffers.size();
  DeviceMemory mem;
  mem.ptrs.assign(nb, 0);
  // Parameter values, in the kernel's parameter order: buffer pointers, then scalars of their types.
  std::vector<std::array<unsigned char, 8>> scalar_values(args.size() - nb);
  std::vector<void*> params;
  std::vector<size_t> bytes(nb);
  for (size_t i = 0; i < nb; ++i) {
    bytes[i] = static_cast<size_t>(args[i].count) * static_cast<size_t>(gen::type_bytes(args[i].type));
    check(d.alloc(&mem.ptrs[i], std::max<size_t>(bytes[i], 4)), k, "cuMemAlloc");
    if (bytes[i]) check(d.to_device(mem.ptrs[i], args[i].ptr, bytes[i]), k, "cuMemcpyHtoD");
    params.push_back(&mem.ptrs[i]);  // mem.ptrs keeps its size: the addresses hold
  }
  for (size_t i = nb; i < args.size(); ++i) {
    auto& v = scalar_values[i - nb];
    const Arg& a = args[i];
    auto put = [&](auto x) { std::memcpy(v.data(), &x, sizeof x); };
    switch (a.type) {
      case Type::F32:
        put(static_cast<float>(a.f));
        break;
      case Type::F64:
        put(a.f);
        break;
      case Type::I32:
        put(static_cast<int32_t>(a.i));
        break;
      case Type::U32:
        put(static_cast<uint32_t>(a.i));
        break;
      case Type::I64:
        put(static_cast<int64_t>(a.i));
        break;
      case Type::Bool:
        put(a.i != 0);
        break;
      default:
        throw Error(k.prefix() + "a scalar of " + std::string(type_name(a.type)) + " cannot be passed to CUDA");
    }
    params.push_back(v.data());
  }
  const std::array<uint32_t, 3>& b = k.group;
  check(d.launch(impl_->fn, static_cast<unsigned>(groups.x), static_cast<unsigned>(groups.y),
                 static_cast<unsigned>(groups.z), b[0], b[1], b[2], 0, nullptr, params.data(), nullptr),
        k, "cuLaunchKernel");
  check(d.sync(), k, "the kernel (cuCtxSynchronize)");
  for (size_t i = 0; i < nb; ++i)
    if (k.buffers[i].access != Access::Read && bytes[i])
      check(d.to_host(args[i].ptr, mem.ptrs[i], bytes[i]), k, "cuMemcpyDtoH");
}

}  // namespace kiln::kernel
