// SPDX-License-Identifier: MIT OR Apache-2.0
// Kernel variants chosen by measurement, kept per device (autotune.h). The file holds one line
// "key index" per choice; it is rewritten whole under a temporary name and renamed into place,
// so a reader never sees half of it. A line that does not parse, or an index past the variants
// of its key, is measured again.
#include "kernel/autotune.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kernel/cache.h"
#include "kiln/kernel.h"

namespace kiln::kernel {

namespace {

std::mutex& file_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, size_t> read_choices(const std::string& path) {
  std::map<std::string, size_t> out;
  std::istringstream in(cache::read_all(path));
  std::string line;
  while (std::getline(in, line)) {
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos || sp == 0) continue;
    char* end = nullptr;
    const unsigned long v = std::strtoul(line.c_str() + sp + 1, &end, 10);
    if (end == line.c_str() + sp + 1 || *end != '\0') continue;
    out[line.substr(0, sp)] = static_cast<size_t>(v);
  }
  return out;
}

bool disabled() {
  const char* v = std::getenv("KILN_AUTOTUNE");
  return v && std::string(v) == "0";
}

}  // namespace

Autotuner::Autotuner(std::string device) {
  const std::string dir = cache_dir() + "/autotune";
  path_ = dir + "/" + cache::hash128(device) + ".txt";
}

size_t Autotuner::choose(const std::string& key, size_t n, const std::function<double(size_t)>& seconds) {
  if (n < 2 || disabled()) return 0;
  std::lock_guard<std::mutex> own(mu_);
  if (const auto m = memo_.find(key); m != memo_.end() && m->second < n) return m->second;
  std::lock_guard<std::mutex> lock(file_mutex());
  std::map<std::string, size_t> kept = read_choices(path_);
  const auto it = kept.find(key);
  if (it != kept.end() && it->second < n) {
    ++found_;
    return memo_[key] = it->second;
  }
  size_t best = 0;
  double best_s = 0;
  for (size_t i = 0; i < n; ++i) {
    const double s = seconds(i);
    if (i == 0 || s < best_s) best = i, best_s = s;
  }
  ++measured_;
  kept[key] = memo_[key] = best;
  std::string text;
  for (const auto& [k, v] : kept) text += k + " " + std::to_string(v) + "\n";
  const std::string dir = path_.substr(0, path_.rfind('/'));
  const std::string tmp = path_ + ".tmp" + std::to_string(getpid());
  // a folder that cannot be written only loses the cache: the choice stands for this call
  if (cache::make_dirs(dir) && cache::write_all(tmp, text) && std::rename(tmp.c_str(), path_.c_str()) != 0)
    std::remove(tmp.c_str());
  return best;
}

}  // namespace kiln::kernel
