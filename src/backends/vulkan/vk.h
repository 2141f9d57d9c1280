// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The Vulkan entry points Kiln uses, loaded at run time from the system's loader
// (libvulkan.so.1), so Kiln builds and runs on machines without Vulkan: there `vk::load()`
// says why and Device::list() omits "vulkan".
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace kiln::vulkan {

// Entry points of the instance (loaded through vkGetInstanceProcAddr with the instance).
#define KILN_VK_INSTANCE_FNS(X)               \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceFeatures)              \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)

// Entry points of the device.
#define KILN_VK_DEVICE_FNS(X)       \
  X(vkDestroyDevice)                \
  X(vkGetDeviceQueue)               \
  X(vkDeviceWaitIdle)               \
  X(vkCreateBuffer)                 \
  X(vkDestroyBuffer)                \
  X(vkGetBufferMemoryRequirements)  \
  X(vkAllocateMemory)               \
  X(vkFreeMemory)                   \
  X(vkBindBufferMemory)             \
  X(vkMapMemory)                    \
  X(vkUnmapMemory)                  \
  X(vkFlushMappedMemoryRanges)      \
  X(vkInvalidateMappedMemoryRanges) \
  X(vkCreateShaderModule)           \
  X(vkDestroyShaderModule)          \
  X(vkCreateDescriptorSetLayout)    \
  X(vkDestroyDescriptorSetLayout)   \
  X(vkCreatePipelineLayout)         \
  X(vkDestroyPipelineLayout)        \
  X(vkCreateComputePipelines)       \
  X(vkDestroyPipeline)              \
  X(vkCreatePipelineCache)          \
  X(vkDestroyPipelineCache)         \
  X(vkGetPipelineCacheData)         \
  X(vkCreateDescriptorPool)         \
  X(vkDestroyDescriptorPool)        \
  X(vkResetDescriptorPool)          \
  X(vkAllocateDescriptorSets)       \
  X(vkUpdateDescriptorSets)         \
  X(vkCreateCommandPool)            \
  X(vkDestroyCommandPool)           \
  X(vkAllocateCommandBuffers)       \
  X(vkResetCommandBuffer)           \
  X(vkBeginCommandBuffer)           \
  X(vkEndCommandBuffer)             \
  X(vkCmdBindPipeline)              \
  X(vkCmdBindDescriptorSets)        \
  X(vkCmdPushConstants)             \
  X(vkCmdDispatch)                  \
  X(vkCmdPipelineBarrier)           \
  X(vkCmdCopyBuffer)                \
  X(vkCmdFillBuffer)                \
  X(vkCreateFence)                  \
  X(vkDestroyFence)                 \
  X(vkResetFences)                  \
  X(vkWaitForFences)                \
  X(vkQueueSubmit)

/// The loaded entry points. Global (vkCreateInstance...) ones first, then instance and device
/// ones once load_instance / load_device ran.
struct Fns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PFN_vkCreateInstance vkCreateInstance = nullptr;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion = nullptr;
#define KILN_VK_DECLARE(name) PFN_##name name = nullptr;
  KILN_VK_INSTANCE_FNS(KILN_VK_DECLARE)
  KILN_VK_DEVICE_FNS(KILN_VK_DECLARE)
#undef KILN_VK_DECLARE
  /// VK_EXT_external_memory_host's (null where the device lacks it).
  PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT = nullptr;
};

/// The entry points (filled by load / load_instance / load_device).
Fns& fns();
/// Opens the loader and its global entry points; "" on success, else why not.
std::string load();
/// Loads the entry points of an instance / a device; "" on success, else the first missing one.
std::string load_instance(VkInstance instance);
std::string load_device(VkDevice device);
/// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and the like.
const char* result_name(VkResult r);

}  // namespace kiln::vulkan
