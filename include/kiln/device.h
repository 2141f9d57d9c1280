// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

class Backend;

/// Gradient checkpointing of an autodiff device: which forward results the graph keeps.
enum class Checkpointing : uint8_t {
  None,      ///< keep every value a gradient rule needs (fastest backward)
  Balanced,  ///< recompute the results of memory-bound ops (elementwise chains) during backward
             ///< instead of keeping them; compute-bound results (matmul, conv) are kept
};
/// Options of Device::autodiff.
struct AutodiffOptions {
  Checkpointing checkpointing = Checkpointing::None;
};

/// Options of Device::remote (docs/remote.md).
struct RemoteOptions {
  std::string token;                 ///< the server's token; empty: the environment variable KILN_REMOTE_TOKEN
  std::string client_name = "kiln";  ///< shown in the server's log
  std::string ca_file;               ///< wss://: PEM file of the CA that signed the server's certificate
                                     ///< (empty: the system's CAs)
  double timeout_s = 300;            ///< a reply that takes longer fails the device (<= 0: wait forever)
  int batch_ops = 512;               ///< queued ops are sent when this many are waiting...
  int64_t batch_bytes = 1 << 20;     ///< ...or when their records reach this many bytes
};

/// Kinds of device. Decorators (autodiff, fusion, remote) wrap one of these. Subset is the
/// suite's device that runs only some ops itself (the others fall back to the CPU).
enum class DeviceType : uint8_t { CPU, Null, Vulkan, CUDA, WebGPU, Remote, Subset };

/// A run-time device: a cheap value naming the backend chain that executes ops.
/// `Device::cpu()` runs kernels; `Device::null()` tracks shapes and dtypes only, so checks and
/// shape inference can be tested without data. Decorators (`.autodiff()`, `.fusion()`) return a
/// Device whose backend wraps this one's.
class Device {
 public:
  /// The CPU device (same as `Device::cpu()`).
  Device();
  /// The CPU device: the CPU with op fusion (`.fusion()`), or the plain CPU when the
  /// environment variable KILN_FUSION is 0 (read once). `.without_fusion()` is always plain.
  static Device cpu();
  /// A device that allocates nothing and computes nothing; reading values throws.
  static Device null();
  /// The Vulkan device of that index (docs/gpu.md): ops this backend runs natively stay on it,
  /// the others fall back to the CPU. The same as from_string("vulkan") / ("vulkan:1"); throws
  /// kiln::Error saying why when this build or machine has no such device.
  static Device vulkan(int index = 0);
  /// The page's WebGPU device (docs/web.md, "The WebGPU device"), in the WebAssembly build: like
  /// vulkan(), ops with a kernel run on it, the others fall back to the CPU. Values are read back
  /// inside calls that can wait (JSPI: main, and the exports a page lists). Throws kiln::Error
  /// saying why where there is none (a native build, no adapter, no JSPI).
  static Device webgpu(int index = 0);
  /// A device on another machine (docs/remote.md): ops are sent to a kiln-server at `url`
  /// ("ws://host:port" or "wss://host:port") in batches and run on its device; values come
  /// back when read. Each call opens a new connection (a new session with its own tensors).
  /// Throws kiln::Error naming the cause when the server cannot be reached or refuses.
  /// Errors of queued work surface at the next kiln::sync or value read.
  static Device remote(const std::string& url, const RemoteOptions& options = {});
  /// The device named by the environment variable KILN_DEVICE (any name of Device::list()), else the CPU.
  static Device default_device();
  /// The device of a name of Device::list() ("cpu", "cpu-fusion", "cpu-plain", "null",
  /// "subset", ...; an optional ":0" index), or "remote:ws://host:port" (Device::remote with the
  /// token of KILN_REMOTE_TOKEN; one connection per address while it works); throws kiln::Error
  /// naming the known ones otherwise.
  static Device from_string(const std::string& name);
  /// The names of the devices this build and machine can run, for from_string.
  static std::vector<std::string> list();

  DeviceType type() const;
  int index() const { return index_; }
  bool is_cpu() const { return type() == DeviceType::CPU; }
  bool is_null() const { return type() == DeviceType::Null; }
  /// "cpu", "null", "cuda:0", ...
  std::string str() const;
  /// This device with backpropagation: tensors created on it can `require_grad()`, and ops on
  /// them record a graph that `backward()` walks. Decorates any backend.
  Device autodiff(const AutodiffOptions& options = {}) const;
  /// Whether this device records gradients.
  bool has_autodiff() const;
  /// The same device without the autodiff decorator.
  Device without_autodiff() const;
  /// This device with op fusion: elementwise ops are queued and run as fused kernels when a
  /// value is read, at kiln::sync, or before an op that cannot be queued (docs/fusion.md).
  /// Composes with autodiff in either order (`.fusion().autodiff()` == `.autodiff().fusion()`).
  Device fusion() const;
  /// Whether this device fuses ops.
  bool has_fusion() const;
  /// This device without the fusion decorator (autodiff kept): ops run one kernel each.
  Device without_fusion() const;
  /// The backend that executes ops for this device (internal interface).
  Backend* backend() const { return backend_; }

  friend bool operator==(const Device& a, const Device& b) { return a.backend_ == b.backend_ && a.index_ == b.index_; }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }

  /// For backends and decorators: a device running on `backend`.
  explicit Device(Backend* backend, int index = 0) : backend_(backend), index_(index) {}

 private:
  Backend* backend_;
  int index_ = 0;
};

std::string to_string(const Device& d);

/// Waits until all work queued on `device` has finished; errors from queued work surface here.
void sync(const Device& device);

/// Memory held by a device's allocator, in bytes.
struct MemoryStats {
  int64_t in_use = 0;       ///< bytes in live tensors
  int64_t peak = 0;         ///< highest in_use since start or reset_peak_memory
  int64_t cached = 0;       ///< bytes freed by tensors and kept for reuse
  int64_t allocations = 0;  ///< number of buffers handed out
};
MemoryStats memory_stats(const Device& device);
void reset_peak_memory(const Device& device);
/// Returns cached blocks to the system.
void empty_cache(const Device& device);

/// How often each op ran on the CPU in place of a device that does not support it (the
/// fallback of Backend::supports), as ("device: op", count) pairs in first-seen order.
/// KILN_FALLBACK_DEBUG=1 also prints a line the first time each op falls back on a device.
std::vector<std::pair<std::string, int64_t>> fallback_counts();
/// Forgets the counts of fallback_counts().
void reset_fallback_counts();

/// Number of threads used by intra-op parallel kernels (KILN_NUM_THREADS, default all cores).
int num_threads();
void set_num_threads(int n);

/// Seeds the global random number generator (counter-based: results do not depend on threads).
void manual_seed(uint64_t seed);

/// The global generator's position: its seed and how many counter blocks were used. Saving it
/// and restoring it with set_rng_state makes the following random ops repeat exactly.
struct RngState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};
RngState rng_state();
void set_rng_state(const RngState& state);

}  // namespace kiln
