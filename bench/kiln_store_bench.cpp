// SPDX-License-Identifier: MIT OR Apache-2.0
// Weights loading speed (issue: loading a 400 MB safetensors file takes no longer than 1.2x
// reading it from the page cache; a 400 MB .pth no longer than 2x).
//
//   kiln_store_bench [--mb 400] [--reps 5] [--dir /tmp] [--pth model.pth] [--smoke]
//
// Writes a model-like safetensors file of --mb MB (f32 tensors of various sizes), reads it once
// so the page cache is warm, then reports the best of --reps runs of
//   (a) read(): the whole file into a buffer already in memory (the baseline; a fresh buffer,
//       which the kernel must fault in and zero first, is shown too),
//   (b) load_safetensors with mmap, touching one byte of every page of every tensor,
//   (c) load_safetensors with mmap = false (read into the tensors' own buffers), touched alike,
// and with --pth, (d) read() of that file and (e) load_torch of it, touched alike. A .pth can be
// made with python3 and torch, e.g. (400 MB of f32 in layers like the safetensors file):
//   python3 -c "import torch; torch.save({f'layer{i}.weight': torch.randn(4096, 1024)
//               for i in range(25)}, 'build/model.pth')"
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "kiln/kiln.h"
#include "kiln/store.h"

using namespace kiln;

namespace {

constexpr size_t kPage = 4096;

double best_ms(int reps, const std::function<void()>& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

/// One byte of every page: makes a lazily mapped buffer actually present.
uint64_t touch(const uint8_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; i += kPage) s += p[i];
  if (n) s += p[n - 1];
  return s;
}

uint64_t touch_all(const store::TensorMap& m) {
  uint64_t s = 0;
  for (const auto& [name, t] : m.tensors) {
    // The host memory behind the storage (a decorated device's storage data is its own record).
    const auto* base = static_cast<const uint8_t*>(host_storage_data(t));
    if (!base) throw Error("kiln_store_bench: '" + name + "' has no host memory");
    s += touch(base + t.storage_offset() * static_cast<int64_t>(t.element_size()),
               static_cast<size_t>(t.numel()) * t.element_size());
  }
  return s;
}

/// The baseline: read() the whole file into `reuse` when given (memory already present: the
/// strictest baseline), else into a new buffer (which the kernel must fault in and zero).
uint64_t read_whole(const std::string& path, std::vector<uint8_t>* reuse = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
  struct stat st {};
  ::fstat(fd, &st);
  size_t n = static_cast<size_t>(st.st_size);
  std::unique_ptr<uint8_t[]> fresh;
  uint8_t* buf = nullptr;
  if (reuse) {
    reuse->resize(n);
    buf = reuse->data();
  } else {
    fresh.reset(new uint8_t[n]);  // uninitialised, like a tensor buffer
    buf = fresh.get();
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, buf + got, n - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return touch(buf, got);
}

double file_mb(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return static_cast<double>(st.st_size) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 400;
  int reps = 5;
  std::string dir = "/tmp", pth;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--mb")
      mb = std::atof(next().c_str());
    else if (a == "--reps")
      reps = std::atoi(next().c_str());
    else if (a == "--dir")
      dir = next();
    else if (a == "--pth")
      pth = next();
    else if (a == "--smoke")
      mb = 8, reps = 1;
    else {
      std::fprintf(stderr, "usage: %s [--mb N] [--reps N] [--dir D] [--pth file.pth] [--smoke]\n", argv[0]);
      return 2;
    }
  }
  // A model-like file: blocks of a 1024-wide network (weights 4096x1024, 1024x4096, 1024x1024,
  // biases and norms) until the size is reached.
  std::vector<std::pair<std::string, Tensor>> ts;
  double total = 0;
  for (int layer = 0; total < mb * 1e6; ++layer) {
    const std::vector<std::pair<std::string, Shape>> block = {
        {"attn.qkv.weight", {3072, 1024}}, {"attn.qkv.bias", {3072}}, {"attn.out.weight", {1024, 1024}},
        {"mlp.up.weight", {4096, 1024}},   {"mlp.up.bias", {4096}},   {"mlp.down.weight", {1024, 4096}},
        {"norm.weight", {1024}},           {"norm.bias", {1024}}};
    for (const auto& [n, s] : block) {
      if (total >= mb * 1e6) break;
      Tensor t = full(s, static_cast<double>(layer % 7) + 0.5);
      total += static_cast<double>(t.numel()) * 4;
      ts.emplace_back("layers." + std::to_string(layer) + "." + n, t);
    }
  }
  std::string path = dir + "/kiln_store_bench." + std::to_string(::getpid()) + ".safetensors";
  store::save_safetensors(path, ts);
  ts.clear();
  volatile uint64_t sink = read_whole(path);  // warm the page cache

  std::vector<uint8_t> reused;
  double a = best_ms(reps, [&] { sink = read_whole(path, &reused); });
  double a2 = best_ms(reps, [&] { sink = read_whole(path); });
  double b = best_ms(reps, [&] {
    store::TensorMap m = store::load_safetensors(path);
    sink = touch_all(m);
  });
  double c = best_ms(reps, [&] {
    store::TensorMap m = store::load_safetensors(path, {.mmap = false});
    sink = touch_all(m);
  });
  const double size = file_mb(path);
  std::printf("safetensors file: %.0f MB, %zu tensors, best of %d\n", size,
              store::load_safetensors(path).tensors.size(), reps);
  std::printf("  (a) read() into a reused buffer  %8.1f ms  %6.2f GB/s  1.00x\n", a, size / a);
  std::printf("      read() into a new buffer    %8.1f ms  %6.2f GB/s  %.2fx\n", a2, size / a2, a2 / a);
  std::printf("  (b) load_safetensors (mmap)     %8.1f ms  %6.2f GB/s  %.2fx\n", b, size / b, b / a);
  std::printf("  (c) load_safetensors (no mmap)  %8.1f ms  %6.2f GB/s  %.2fx\n", c, size / c, c / a);
  ::unlink(path.c_str());
  if (!pth.empty()) {
    std::vector<uint8_t> reused_pth;
    sink = read_whole(pth);
    double d = best_ms(reps, [&] { sink = read_whole(pth, &reused_pth); });
    double e = best_ms(reps, [&] {
      store::TensorMap m = store::load_torch(pth);
      sink = touch_all(m);
    });
    const double ps = file_mb(pth);
    std::printf(".pth file %s: %.0f MB, best of %d\n", pth.c_str(), ps, reps);
    std::printf("  (d) read() into a reused buffer  %8.1f ms  %6.2f GB/s  1.00x\n", d, ps / d);
    std::printf("  (e) load_torch                  %8.1f ms  %6.2f GB/s  %.2fx\n", e, ps / e, e / d);
  }
  (void)sink;
  return 0;
}
