// SPDX-License-Identifier: MIT OR Apache-2.0
// Connected components with statistics (cv::connectedComponentsWithStats), on the host: two
// passes over the runs of foreground of each row, with union-find. Note [Raster-order labels]:
// the first pass gives a run that touches no labelled run of the row above a new provisional
// label and links equivalent labels larger root under smaller, so every set's root is its
// smallest label, the one created at the component's first run; numbering the roots in
// increasing order therefore numbers components in the raster order of their first pixels, as
// OpenCV does.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
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

/// Statistics of the runs of one label: bounding box, area and coordinate sums.
struct Stats {
  int64_t left = INT64_MAX, top = INT64_MAX, right = -1, bottom = -1, area = 0, sx = 0, sy = 0;
  void add_run(int64_t y, int64_t s, int64_t e) {
    left = std::min(left, s), right = std::max(right, e - 1);
    top = std::min(top, y), bottom = std::max(bottom, y);
    area += e - s, sx += (s + e - 1) * (e - s) / 2, sy += y * (e - s);
  }
  void merge(const Stats& o) {
    left = std::min(left, o.left), right = std::max(right, o.right);
    top = std::min(top, o.top), bottom = std::max(bottom, o.bottom);
    area += o.area, sx += o.sx, sy += o.sy;
  }
};

/// The runs of foreground of every row: [start, end) with a provisional label; row y's runs are
/// [first[y], first[y + 1]).
struct Runs {
  std::vector<int32_t> start, end, label;
  std::vector<size_t> first;
  std::vector<int32_t> trans;  ///< scratch: one row's transitions
};

/// The buffers of one labelling, kept per thread between calls (they grow to the largest image
/// seen): allocating them afresh costs more in page faults than the labelling itself.
struct Scratch {
  Equivalences eq;
  Runs runs;
  std::vector<Stats> prov, st;
  std::vector<int32_t> final_of, stats;
  std::vector<double> centroids;
};

/// Pass 1 over runs (Note [Raster-order labels]): a run takes the label of the runs of the row
/// above that touch it (joined), or a new one. Collects per-label statistics and, in bg, the
/// background's bounding box.
void label_runs(const uint8_t* fg, int64_t h, int64_t w, int64_t connectivity, Equivalences& eq, Runs& runs,
                std::vector<Stats>& stats, Stats& bg) {
  const int32_t slack = connectivity == 8 ? 1 : 0;  // 8-connected runs also touch diagonally
  std::vector<int32_t>& trans = runs.trans;
  trans.resize(static_cast<size_t>(w + 1));
  runs.first.assign(static_cast<size_t>(h + 1), 0);
  for (int64_t y = 0; y < h; ++y) {
    // Row transitions, branch-free: positions where foreground starts or stops.
    const uint8_t* f = fg + y * w;
    int64_t n = 0;
    uint8_t prev = 0;
    for (int64_t x = 0; x < w; ++x) {
      const uint8_t v = f[x] != 0;
      trans[static_cast<size_t>(n)] = static_cast<int32_t>(x);
      n += v != prev;
      prev = v;
    }
    if (prev) trans[static_cast<size_t>(n++)] = static_cast<int32_t>(w);
    const size_t above_end = runs.start.size();
    size_t j = y > 0 ? runs.first[static_cast<size_t>(y - 1)] : above_end;
    int64_t covered = 0;
    for (int64_t i = 0; i < n; i += 2) {
      const int32_t s = trans[static_cast<size_t>(i)], e = trans[static_cast<size_t>(i + 1)];
      while (j < above_end && runs.end[j] + slack <= s) ++j;
      int32_t l = 0;
      for (size_t k = j; k < above_end && runs.start[k] < e + slack; ++k)
        l = l ? eq.join(l, runs.label[k]) : runs.label[k];
      if (!l) {
        l = eq.make();
        stats.emplace_back();
      }
      runs.start.push_back(s), runs.end.push_back(e), runs.label.push_back(l);
      stats[static_cast<size_t>(l)].add_run(y, s, e);
      covered += e - s;
    }
    runs.first[static_cast<size_t>(y + 1)] = runs.start.size();
    if (covered < w) {  // the row has background: its first and last background pixels
      const int64_t first_bg = n == 0 || trans[0] > 0 ? 0 : trans[1];
      const int64_t last_bg =
          n == 0 || trans[static_cast<size_t>(n - 1)] < w ? w - 1 : trans[static_cast<size_t>(n - 2)] - 1;
      bg.left = std::min(bg.left, first_bg), bg.right = std::max(bg.right, last_bg);
      bg.top = std::min(bg.top, y), bg.bottom = y;
      bg.area += w - covered;
    }
  }
}

/// Labels one plane (nonzero = foreground) into labels [h, w] and returns its statistics.
Components label_plane(const uint8_t* fg, int64_t h, int64_t w, int64_t connectivity, const Device& device) {
  Tensor labels = empty({h, w}, {.dtype = i32, .device = device});
  auto* lab = h * w ? static_cast<int32_t*>(host_storage_data(labels)) + labels.storage_offset() : nullptr;
  thread_local Scratch sc;
  Equivalences& eq = sc.eq;
  Runs& runs = sc.runs;
  std::vector<Stats>& prov = sc.prov;
  eq.parent.assign(1, 0);
  runs.start.clear(), runs.end.clear(), runs.label.clear();
  prov.assign(1, Stats{});
  Stats bg;
  label_runs(fg, h, w, connectivity, eq, runs, prov, bg);
  // Final numbers: roots in increasing order; others take their (smaller) parent's number.
  std::vector<int32_t>& final_of = sc.final_of;
  final_of.assign(eq.parent.size(), 0);
  int32_t next = 1;
  for (size_t l = 1; l < eq.parent.size(); ++l) {
    const auto p = static_cast<size_t>(eq.parent[l]);
    final_of[l] = p == l ? next++ : final_of[p];
  }
  const auto n = static_cast<size_t>(next);
  std::vector<Stats>& st = sc.st;
  st.assign(n, Stats{});
  int64_t fg_sx = 0, fg_sy = 0;
  for (size_t l = 1; l < prov.size(); ++l) {
    st[static_cast<size_t>(final_of[l])].merge(prov[l]);
    fg_sx += prov[l].sx, fg_sy += prov[l].sy;
  }
  bg.sx = h * (w * (w - 1) / 2) - fg_sx;  // every pixel's x, less the foreground's
  bg.sy = w * (h * (h - 1) / 2) - fg_sy;
  st[0] = bg;
  // Pass 2: the label image, run by run.
  for (int64_t y = 0; y < h; ++y) {
    int32_t* row = lab + y * w;
    std::fill(row, row + w, 0);
    for (size_t r = runs.first[static_cast<size_t>(y)]; r < runs.first[static_cast<size_t>(y + 1)]; ++r)
      std::fill(row + runs.start[r], row + runs.end[r], final_of[static_cast<size_t>(runs.label[r])]);
  }
  std::vector<int32_t>& stats = sc.stats;
  std::vector<double>& centroids = sc.centroids;
  stats.clear(), centroids.clear();
  for (const Stats& s : st) {
    if (s.area == 0) {  // only the background can be empty; OpenCV gives these values
      stats.insert(stats.end(), {-1, std::numeric_limits<int32_t>::max(), 0, 0, 0});
    } else {
      stats.insert(stats.end(), {static_cast<int32_t>(s.left), static_cast<int32_t>(s.top),
                                 static_cast<int32_t>(s.right - s.left + 1), static_cast<int32_t>(s.bottom - s.top + 1),
                                 static_cast<int32_t>(s.area)});
    }
    const auto a = static_cast<double>(s.area);
    centroids.insert(centroids.end(), {static_cast<double>(s.sx) / a, static_cast<double>(s.sy) / a});
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
