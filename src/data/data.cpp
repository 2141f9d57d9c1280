// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln_data basics: index checks, the loader's thread-local epoch, seeded random choices.
#include <numeric>

#include "kiln/data/dataset.h"

namespace kiln::data {
namespace detail {

void check_index(size_t i, size_t n, const char* component) {
  KILN_CHECK(i < n, component,
             "index " << static_cast<long long>(i) << " out of range for a dataset of " << static_cast<long long>(n)
                      << " items");
}

namespace {
thread_local uint64_t t_epoch = 0;
}
uint64_t current_epoch() { return t_epoch; }
EpochScope::EpochScope(uint64_t epoch) : saved_(t_epoch) { t_epoch = epoch; }
EpochScope::~EpochScope() { t_epoch = saved_; }

}  // namespace detail

uint64_t hash_mix(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(a);
  h = mix(h ^ b);
  h = mix(h ^ c);
  return mix(h ^ d);
}

uint64_t Rng::below(uint64_t n) {
  KILN_CHECK(n > 0, "data::Rng", "below(0)");
  // Rejection sampling: accept values under the largest multiple of n.
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    uint64_t v = next();
    if (v < limit) return v % n;
  }
}

std::vector<size_t> permutation(size_t n, uint64_t seed) {
  std::vector<size_t> p(n);
  std::iota(p.begin(), p.end(), size_t{0});
  Rng rng(hash_mix(seed, 0x7065726dULL));
  for (size_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng.below(i)]);
  return p;
}

std::vector<size_t> sample_indices(size_t population, size_t n, bool replacement, uint64_t seed) {
  if (replacement) {
    KILN_CHECK(population > 0 || n == 0, "data::sample",
               "cannot draw " << static_cast<long long>(n) << " items from an empty dataset");
    Rng rng(hash_mix(seed, 0x73616d70ULL));
    std::vector<size_t> out(n);
    for (auto& v : out) v = rng.below(population);
    return out;
  }
  KILN_CHECK(n <= population, "data::sample",
             "cannot draw " << static_cast<long long>(n) << " items without replacement from "
                            << static_cast<long long>(population));
  std::vector<size_t> p = permutation(population, seed);
  p.resize(n);
  return p;
}

}  // namespace kiln::data
