// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Autotuning of kernel variants (docs/kernels.md, "Autotune"): a launch that offers several
// kernels with the same results (tile sizes) has the fastest measured on its first use on a
// device, and the choice kept in memory and on disk per device and driver, so a later process
// does not measure again. KILN_AUTOTUNE=0 takes the default variant (index 0) without measuring.
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace kiln::kernel {

/// The choices of one device (its name and driver: the cache key), shared by its backend's
/// threads.
class Autotuner {
 public:
  explicit Autotuner(std::string device);
  /// The variant to run for `key` (an op family and a shape class) among `n`: the one kept for
  /// the key, else the fastest by `seconds(i)` (which runs variant i and returns its time),
  /// which is then kept; 0 when n < 2 or KILN_AUTOTUNE=0 (nothing is measured or written).
  size_t choose(const std::string& key, size_t n, const std::function<double(size_t)>& seconds);
  /// How many choices were measured, and found kept, since this tuner was made.
  size_t measured() const { return measured_; }
  size_t found() const { return found_; }
  /// The file the choices are kept in (under cache_dir()/autotune).
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::mutex mu_;
  std::map<std::string, size_t> memo_;  ///< the choices of this process
  size_t measured_ = 0, found_ = 0;
};

}  // namespace kiln::kernel
