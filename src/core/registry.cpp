// SPDX-License-Identifier: MIT OR Apache-2.0
// The registration tables of core (core/registry.h) and what reads them: the CPU device, the
// null device, the device names of Device::from_string and Device::list.
#include "core/registry.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kiln/error.h"

// Weak: resolved to the umbrella's definition when the program links kiln::kiln (which keeps
// that object in the program: cmake/kiln_keep_layers.cpp), and null when it links the layer
// libraries alone.
#if defined(__GNUC__) || defined(__clang__)
extern "C" void kiln_register_layers() __attribute__((weak));
#endif

namespace kiln {

Backend* capture_backend();  // src/capture/backend.cpp (kiln::capture_device), in kiln::core

namespace {

constexpr size_t kLayers = 3;  // one maker per rank of Layer

struct Registry {
  std::atomic<Backend* (*)()> host{nullptr};
  std::atomic<LayerMaker> layers[kLayers] = {};
  std::mutex mu;  // guards devices
  std::vector<std::pair<std::string, Device (*)()>> devices;
  struct Kind {
    std::string name;
    Device (*make)(int index);
    int (*count)();
  };
  std::vector<Kind> kinds;                                                        // register_devices
  std::vector<std::pair<std::string, Device (*)(const std::string&)>> addressed;  // register_device_address
  std::atomic<Device (*)(const std::string&, const RemoteOptions&)> remote{nullptr};
};

/// The tables as the register functions fill them.
Registry& table() {
  static Registry* r = new Registry();  // never destroyed: devices are looked up until exit
  return *r;
}

/// The tables once every linked layer has registered (the umbrella's hook runs on first use).
Registry& registry() {
  static const bool filled = [] {
    if (&kiln_register_layers != nullptr) kiln_register_layers();
    register_device("capture", [] { return Device(capture_backend()); });
    return true;
  }();
  (void)filled;
  return table();
}

}  // namespace

void register_cpu_backend(Backend* (*get)()) { table().host.store(get, std::memory_order_release); }

Backend* cpu_backend() {
  Backend* (*get)() = registry().host.load(std::memory_order_acquire);
  KILN_CHECK(get, "Device",
             "no CPU backend in this program: link kiln::kiln (or kiln::cpu and call kiln::register_cpu())");
  return get();
}

void register_device(const char* name, Device (*make)()) {
  Registry& r = table();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& [n, m] : r.devices)
    if (n == name) {
      m = make;
      return;
    }
  r.devices.emplace_back(name, make);
}

void register_devices(const char* name, Device (*make)(int index), int (*count)()) {
  Registry& r = table();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& k : r.kinds)
    if (k.name == name) {
      k.make = make;
      k.count = count;
      return;
    }
  r.kinds.push_back(Registry::Kind{name, make, count});
}

void register_device_address(const char* name, Device (*make)(const std::string& address)) {
  Registry& r = table();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& [n, m] : r.addressed)
    if (n == name) {
      m = make;
      return;
    }
  r.addressed.emplace_back(name, make);
}

void register_remote_maker(Device (*make)(const std::string& url, const RemoteOptions& options)) {
  table().remote.store(make, std::memory_order_release);
}

Device Device::remote(const std::string& url, const RemoteOptions& options) {
  Device (*make)(const std::string&, const RemoteOptions&) = registry().remote.load(std::memory_order_acquire);
  KILN_CHECK(make, "remote",
             "this build has no remote device (configure with Boost and OpenSSL installed: libboost-dev, "
             "libssl-dev; KILN_WITH_REMOTE)");
  return make(url, options);
}

void register_layer(Layer layer, LayerMaker make) {
  const size_t i = static_cast<size_t>(layer);
  KILN_ASSERT(i < kLayers);
  table().layers[i].store(make, std::memory_order_release);
}

LayerMaker layer_maker(Layer layer) {
  const size_t i = static_cast<size_t>(layer);
  KILN_ASSERT(i < kLayers);
  return registry().layers[i].load(std::memory_order_acquire);
}

// The CPU device is the fused CPU (Device::cpu().fusion(), docs/fusion.md) when the fusion layer
// is linked; KILN_FUSION=0 makes it the plain CPU, whose ops run one kernel each.
Device Device::cpu() {
  static const Device d = [] {  // decided once: default devices are made per tensor
    const char* e = std::getenv("KILN_FUSION");
    const bool fuse = !(e && std::string(e) == "0");
    const Device plain(cpu_backend());
    const LayerMaker fusion = layer_maker(Layer::Fusion);  // Device::fusion(), without the call up
    return fuse && fusion ? with_layer(plain, Layer::Fusion, fusion) : plain;
  }();
  return d;
}

Device Device::null() {
  static const Device d = from_string("null");
  return d;
}

Device Device::from_string(const std::string& name) {
  // "name" or "name:index"; a device of register_device has the one index 0.
  const size_t colon = name.find(':');
  if (colon != std::string::npos) {  // "name:address" of register_device_address
    Device (*make_at)(const std::string&) = nullptr;
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      for (const auto& [n, m] : r.addressed)
        if (name.compare(0, colon, n) == 0 && n.size() == colon) make_at = m;
    }
    if (make_at) return make_at(name.substr(colon + 1));
    KILN_CHECK(name.compare(0, colon, "remote") != 0, "Device",
               "this build has no remote device for '" << name << "' (KILN_WITH_REMOTE: libboost-dev, libssl-dev)");
  }
  const std::string base = name.substr(0, colon), idx = colon == std::string::npos ? "0" : name.substr(colon + 1);
  const bool digits = !idx.empty() && idx.size() < 10 && idx.find_first_not_of("0123456789") == std::string::npos;
  KILN_CHECK(digits, "Device", "device index '" << idx << "' of '" << name << "' is not a number");
  const int index = std::stoi(idx);
  Device (*make)() = nullptr;
  Device (*make_kind)(int) = nullptr;
  std::string known;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& [n, m] : r.devices) {
      if (base == n) make = m;
      known += (known.empty() ? "" : ", ") + n;
    }
    for (const auto& k : r.kinds) {
      if (base == k.name) make_kind = k.make;
      known += (known.empty() ? "" : ", ") + k.name;
    }
  }
  if (make_kind) return make_kind(index);
  KILN_CHECK(make, "Device", "unknown device '" << name << "' (known: " << known << ")");
  KILN_CHECK(index == 0, "Device", "device '" << base << "' has only index 0, got '" << name << "'");
  return make();
}

namespace {

/// Device `kind`:index of a kind that a layer library registers; throws `missing` (what this
/// build lacks) when none did.
Device of_kind(const std::string& kind, int index, const char* missing) {
  KILN_CHECK(index >= 0, kind, "device index " << index << " is negative");
  bool built = false;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& k : r.kinds) built = built || k.name == kind;
  }
  KILN_CHECK(built, kind, missing);
  return Device::from_string(kind + ":" + std::to_string(index));
}

}  // namespace

Device Device::vulkan(int index) {
  return of_kind("vulkan", index,
                 "this build has no Vulkan backend (configure with the Vulkan headers installed: libvulkan-dev; "
                 "KILN_WITH_VULKAN)");
}

Device Device::webgpu(int index) {
  return of_kind("webgpu", index,
                 "this build has no WebGPU backend: it is part of the WebAssembly build (make wasm), in a browser "
                 "with WebGPU and JavaScript Promise Integration");
}

std::vector<std::string> Device::list() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& d : r.devices) names.push_back(d.first);
  for (const auto& k : r.kinds) {
    const int n = k.count();
    for (int i = 0; i < n; ++i) names.push_back(i == 0 ? k.name : k.name + ":" + std::to_string(i));
  }
  return names;
}

}  // namespace kiln
