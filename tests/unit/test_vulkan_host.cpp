// SPDX-License-Identifier: MIT OR Apache-2.0
// Host memory used in place by the Vulkan device (Backend::wrap_host through
// VK_EXT_external_memory_host, which lavapipe has): a tensor over host memory reads its bytes,
// kernels write them in place, the memory outlives the device's use of it, and the safetensors
// loader maps a file onto the device without a copy. Where the device cannot import the memory
// (misaligned), wrap_host says so and the loader copies. Reference: the same tensors on the CPU.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/store.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backends/vulkan/context.h"
#include "core/backend.h"
#include "require_vulkan.h"

using namespace kiln;

namespace {

/// n floats in page-aligned host memory, freed when the last holder lets go.
std::shared_ptr<float> host_floats(size_t n) {
  void* p = nullptr;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(posix_memalign(&p, page, (n * sizeof(float) + page - 1) / page * page), 0);
  return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { std::free(q); });
}

}  // namespace

TEST(VulkanHost, HostMemoryIsUsedInPlace) {
  REQUIRE_VULKAN();
  for (const char* name : {"vulkan", "vulkan-plain"}) {
    SCOPED_TRACE(name);
    const Device d = Device::from_string(name);
    constexpr size_t kN = 1000;
    std::shared_ptr<float> mem = host_floats(kN + 4);
    // From the start of the block and from 16 bytes into it (an aligned storage offset).
    for (size_t skip : {size_t{0}, size_t{4}}) {
      for (size_t i = 0; i < kN + 4; ++i) mem.get()[i] = static_cast<float>(i) * 0.5f;
      std::weak_ptr<float> alive = mem;
      const int64_t before = memory_stats(d).in_use;
      std::shared_ptr<Storage> st = d.backend()->wrap_host(mem.get() + skip, kN * sizeof(float), mem);
      ASSERT_NE(st, nullptr) << "lavapipe imports host memory";
      Tensor t = tensor_over_storage(st, {10, 100}, {100, 1}, 0, f32, d);
      st.reset();
      EXPECT_EQ(memory_stats(d).in_use, before) << "no device memory taken";
      const Tensor ref = from_blob_copy(mem.get() + skip, {10, 100}, f32, Device::cpu());
      EXPECT_TRUE(t.to(Device::cpu()).equal(ref));
      // A kernel writes the host's bytes.
      t.mul_(2.0f).add_(1.0f);
      sync(d);
      EXPECT_EQ(mem.get()[skip + 7], (static_cast<float>(skip + 7) * 0.5f) * 2.0f + 1.0f);
      EXPECT_TRUE(t.to(Device::cpu()).equal(ref * 2.0f + 1.0f));
      // and the host's writes reach the device.
      mem.get()[skip] = -3.0f;
      EXPECT_EQ(t.flatten().narrow(0, 0, 1).item<float>(), -3.0f);
      t = Tensor();
      sync(d);
      EXPECT_FALSE(alive.expired());  // the test still holds it
    }
  }
}

TEST(VulkanHost, TheMemoryLivesWhileTheDeviceUsesIt) {
  REQUIRE_VULKAN();
  const Device d = Device::vulkan();
  std::shared_ptr<float> mem = host_floats(4096);
  std::memset(mem.get(), 0, 4096 * sizeof(float));
  std::weak_ptr<float> alive = mem;
  Tensor t = tensor_over_storage(d.backend()->wrap_host(mem.get(), 4096 * sizeof(float), std::move(mem)), {4096}, {1},
                                 0, f32, d);
  Tensor u = (t + 1.0f).sum();
  t = Tensor();  // the queued work still reads the memory
  EXPECT_EQ(u.item<float>(), 4096.0f);
  sync(d);
  EXPECT_TRUE(alive.expired()) << "freed once the tensor and the device's work are gone";
}

TEST(VulkanHost, MemoryTheDeviceCannotImportIsRefused) {
  REQUIRE_VULKAN();
  std::shared_ptr<float> mem = host_floats(64);
  char* odd = reinterpret_cast<char*>(mem.get()) + 1;  // no storage buffer starts there
  EXPECT_EQ(Device::vulkan().backend()->wrap_host(odd, 32, mem), nullptr);
  EXPECT_EQ(Device::vulkan().backend()->wrap_host(mem.get(), 0, mem), nullptr);
}

TEST(VulkanHost, SafetensorsLoadOntoTheDeviceWithoutACopy) {
  REQUIRE_VULKAN();
  char tmpl[] = "/tmp/kiln_vkhost_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/w.safetensors";
  const Tensor a = randn({64, 33}), b = arange(0, 100, 1, i64), c = randn({7});
  store::save_safetensors(path, {{"a", a}, {"b", b}, {"c", c}});
  const Device d = Device::vulkan();
  sync(d);
  const int64_t before = memory_stats(d).in_use;
  {
    store::TensorMap m = store::load_safetensors(path, {.device = d});
    ASSERT_EQ(m.tensors.size(), 3u);
    EXPECT_EQ(m.find("a")->device(), d);
    EXPECT_EQ(memory_stats(d).in_use, before) << "the tensors are the mapped file's bytes";
    EXPECT_TRUE(m.find("a")->to(Device::cpu()).equal(a));
    EXPECT_TRUE(m.find("b")->to(Device::cpu()).equal(b));
    EXPECT_TRUE(m.find("c")->to(Device::cpu()).equal(c));
    // Computing with them; writing one changes the tensor, not the file (a private mapping).
    EXPECT_TRUE((*m.find("a") * 2.0f).sum().to(Device::cpu()).allclose((a * 2.0f).sum()));
    Tensor w = *m.find("c");
    w.zero_();
    EXPECT_EQ(m.find("c")->abs().sum().item<float>(), 0.0f);
  }
  // Without the mapping: copies, the same values.
  store::TensorMap m = store::load_safetensors(path, {.device = d, .mmap = false});
  EXPECT_TRUE(m.find("c")->to(Device::cpu()).equal(c));
  EXPECT_TRUE(store::load_safetensors(path).find("c")->equal(c)) << "the file is unchanged";
  std::filesystem::remove_all(dir);
}
