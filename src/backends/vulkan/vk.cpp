// SPDX-License-Identifier: MIT OR Apache-2.0
// Loading the Vulkan loader at run time (vk.h).
#include "backends/vulkan/vk.h"

#include <dlfcn.h>

#include <mutex>

namespace kiln::vulkan {

Fns& fns() {
  static Fns f;
  return f;
}

std::string load() {
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [] {
    void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      why = "no Vulkan loader (libvulkan.so.1) on this machine";
      return;
    }
    Fns& f = fns();
    f.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
    if (!f.vkGetInstanceProcAddr) {
      why = "the Vulkan loader has no vkGetInstanceProcAddr";
      return;
    }
    f.vkCreateInstance = reinterpret_cast<PFN_vkCreateInstance>(f.vkGetInstanceProcAddr(nullptr, "vkCreateInstance"));
    f.vkEnumerateInstanceVersion = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
        f.vkGetInstanceProcAddr(nullptr, "vkEnumerateInstanceVersion"));
    if (!f.vkCreateInstance) why = "the Vulkan loader has no vkCreateInstance";
  });
  return why;
}

std::string load_instance(VkInstance instance) {
  Fns& f = fns();
#define KILN_VK_LOAD(name)                                                         \
  f.name = reinterpret_cast<PFN_##name>(f.vkGetInstanceProcAddr(instance, #name)); \
  if (!f.name) return #name;
  KILN_VK_INSTANCE_FNS(KILN_VK_LOAD)
#undef KILN_VK_LOAD
  return "";
}

std::string load_device(VkDevice device) {
  Fns& f = fns();
#define KILN_VK_LOAD(name)                                                     \
  f.name = reinterpret_cast<PFN_##name>(f.vkGetDeviceProcAddr(device, #name)); \
  if (!f.name) return #name;
  KILN_VK_DEVICE_FNS(KILN_VK_LOAD)
#undef KILN_VK_LOAD
  return "";
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "a Vulkan error";
  }
}

}  // namespace kiln::vulkan
