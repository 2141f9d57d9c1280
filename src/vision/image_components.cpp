// SPDX-License-Identifier: MIT OR Apache-2.0
// Connected components with statistics (cv::connectedComponentsWithStats), on the host: two
// passes with union-find. Note [Raster-order labels]: the first pass gives a pixel with no
// labelled neighbour before it (in raster order) a new provisional label and links equivalent
// labels larger root under smaller, so every set's root is its smallest label, the one created
// at the component's first pixel; numbering the roots in increasing order therefore numbers
// components in the raster order of their first pixels, as OpenCV does.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/backend.h"
#include "kiln/vision/image.h"
#include "vision/image_util.h"

namespace kiln::vision {

namespace {

/// Union-find over provisional labels with parent[l] <= l (Note [Raster-order labels]).
struct Equivalences {
  std::vector<int32_t> parent{0};
  int32_t make() {
    parent.push_back(static_cast<int32_t>(parent.size()));
    return parent.back();
  }
  int32_t find(int32_t l) {
    int32_t r = l;
    while (parent[static_cast<size_t>(r)] != r) r = parent[static_cast<size_t>(r)];
    while (parent[static_cast<size_t>(l)] != r) {  // path compression
      const int32_t next = parent[static_cast<size_t>(l)];
      parent[static_cast<size_t>(l)] = r;
      l = next;
    }
    return r;
  }
  int32_t join(int32_t a, int32_t b) {
    a = find(a), b = find(b);
    if (a < b) std::swap(a, b);
    parent[static_cast<size_t>(a)] = b;
    return b;
  }
};

/// Pass 1: provisional labels of the nonzero pixels of fg [h, w] into lab (0 for background).
void provisional(const uint8_t* fg, int32_t* lab, int64_t h, int64_t w, int64_t connectivity, Equivalences& eq) {
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* f = fg + y * w;
    int32_t* l = lab + y * w;
    const int32_t* up = y > 0 ? l - w : nullptr;
    for (int64_t x = 0; x < w; ++x) {
      if (!f[x]) {
        l[x] = 0;
        continue;
      }
      const int32_t n = up ? up[x] : 0, wl = x > 0 ? l[x - 1] : 0;
      if (connectivity == 4) {
        l[x] = n ? (wl && wl != n ? eq.join(n, wl) : n) : wl ? wl : eq.make();
        continue;
      }
      // 8-connected, the decision tree of scan-based labelling (N covers NW, NE and W: they
      // touch it and were joined with it before).
      const int32_t nw = up && x > 0 ? up[x - 1] : 0, ne = up && x + 1 < w ? up[x + 1] : 0;
      if (n)
        l[x] = n;
      else if (ne)
        l[x] = nw ? eq.join(nw, ne) : wl ? eq.join(wl, ne) : ne;
      else
        l[x] = nw ? nw : wl ? wl : eq.make();
    }
  }
}

/// Labels one plane (nonzero = foreground) into labels [h, w] and returns its statistics.
Components label_plane(const uint8_t* fg, int64_t h, int64_t w, int64_t connectivity, const Device& device) {
  Tensor labels = empty({h, w}, {.dtype = i32, .device = device});
  auto* lab = h * w ? static_cast<int32_t*>(host_storage_data(labels)) + labels.storage_offset() : nullptr;
  Equivalences eq;
  eq.parent.reserve(static_cast<size_t>(h * w / 4 + 2));
  provisional(fg, lab, h, w, connectivity, eq);
  // Final numbers: roots in increasing order; others take their (smaller) parent's number.
  std::vector<int32_t> final_of(eq.parent.size(), 0);
  int32_t next = 1;
  for (size_t l = 1; l < eq.parent.size(); ++l) {
    const auto p = static_cast<size_t>(eq.parent[l]);
    final_of[l] = p == l ? next++ : final_of[p];
  }
  // Pass 2: final labels and statistics, the background (label 0) included.
  const auto n = static_cast<size_t>(next);
  std::vector<int64_t> left(n, w), top(n, h), right(n, -1), bottom(n, -1), area(n, 0), sx(n, 0), sy(n, 0);
  for (int64_t y = 0; y < h; ++y) {
    int32_t* row = lab + y * w;
    for (int64_t x = 0; x < w; ++x) {
      const auto l = static_cast<size_t>(final_of[static_cast<size_t>(row[x])]);
      row[x] = static_cast<int32_t>(l);
      left[l] = std::min(left[l], x), right[l] = std::max(right[l], x);
      top[l] = std::min(top[l], y), bottom[l] = y;
      ++area[l];
      sx[l] += x, sy[l] += y;
    }
  }
  std::vector<int32_t> stats;
  std::vector<double> centroids;
  stats.reserve(n * 5);
  centroids.reserve(n * 2);
  for (size_t l = 0; l < n; ++l) {
    if (area[l] == 0) {  // only the background can be empty; OpenCV gives these values
      stats.insert(stats.end(), {-1, std::numeric_limits<int32_t>::max(), 0, 0, 0});
    } else {
      stats.insert(stats.end(), {static_cast<int32_t>(left[l]), static_cast<int32_t>(top[l]),
                                 static_cast<int32_t>(right[l] - left[l] + 1),
                                 static_cast<int32_t>(bottom[l] - top[l] + 1), static_cast<int32_t>(area[l])});
    }
    const auto a = static_cast<double>(area[l]);
    centroids.insert(centroids.end(), {static_cast<double>(sx[l]) / a, static_cast<double>(sy[l]) / a});
  }
  Components c;
  c.count = next;
  c.labels = labels;
  c.stats = tensor(stats, {static_cast<int64_t>(n), 5}).to(device);
  c.centroids = tensor(centroids, {static_cast<int64_t>(n), 2}).to(device);
  return c;
}

}  // namespace

std::vector<Components> connected_components_batch(const Tensor& x, int64_t connectivity) {
  const char* op = "vision::connected_components";
  KILN_CHECK(x.defined() && x.dim() == 4 && x.size(1) == 1, op,
             "image [N, 1, H, W] expected, got " << (x.defined() ? to_string(x.shape()) : "undefined"));
  KILN_CHECK(connectivity == 4 || connectivity == 8, op, "connectivity must be 4 or 8, got " << connectivity);
  const int64_t h = x.size(2), w = x.size(3);
  // u8 on the CPU is read in place; anything else becomes a u8 mask first.
  const Tensor fg = x.dtype() == u8 && x.device().is_cpu() ? x.detach().contiguous() : (x != 0).to(u8).contiguous();
  std::vector<uint8_t> copy;
  const uint8_t* px = nullptr;
  if (fg.numel() > 0) {
    if (const void* base = fg.device().is_cpu() ? host_storage_data(fg) : nullptr) {
      px = static_cast<const uint8_t*>(base) + fg.storage_offset();
    } else {
      copy = fg.to_vector<uint8_t>();
      px = copy.data();
    }
  }
  const Device cpu = x.device().is_cpu() ? x.device().without_autodiff() : Device::cpu();
  std::vector<Components> out;
  for (int64_t i = 0; i < x.size(0); ++i) out.push_back(label_plane(px + i * h * w, h, w, connectivity, cpu));
  return out;
}

Components connected_components(const Tensor& x, int64_t connectivity) {
  const char* op = "vision::connected_components";
  KILN_CHECK(
      x.defined() && x.dim() >= 2 && x.dim() <= 4, op,
      "image [H, W], [1, H, W] or [1, 1, H, W] expected, got " << (x.defined() ? to_string(x.shape()) : "undefined"));
  KILN_CHECK(x.numel() == x.size(-1) * x.size(-2), op,
             "one image expected, got " << to_string(x.shape()) << "; use connected_components_batch");
  return connected_components_batch(x.reshape({1, 1, x.size(-2), x.size(-1)}), connectivity)[0];
}

}  // namespace kiln::vision
