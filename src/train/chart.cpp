// SPDX-License-Identifier: MIT OR Apache-2.0
// PNG line charts of the metrics (drawn here, written with libpng).
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "kiln/error.h"
#include "kiln/store.h"
#include "kiln/train/renderer.h"

namespace kiln::train {
namespace {

const unsigned char kFont[95][10] = {
#include "font.inc"
};

struct RGB {
  unsigned char r, g, b;
};
const RGB kColours[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40}, {148, 103, 189}, {140, 86, 75}};

struct Canvas {
  int w, h;
  std::vector<unsigned char> px;
  Canvas(int w_, int h_) : w(w_), h(h_), px(static_cast<size_t>(w_) * h_ * 3, 255) {}
  void set(int x, int y, RGB c) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    unsigned char* p = &px[(static_cast<size_t>(y) * w + x) * 3];
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  }
  void line(int x0, int y0, int x1, int y1, RGB c, int thick = 1) {
    int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (int guard = 0; guard < 100000; ++guard) {
      for (int t = 0; t < thick; ++t) {
        set(x0, y0 + t, c);
        set(x0 + t, y0, c);
      }
      if (x0 == x1 && y0 == y1) break;
      int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
  void box(int x, int y, int r, RGB c) {
    for (int i = -r; i <= r; ++i)
      for (int j = -r; j <= r; ++j) set(x + i, y + j, c);
  }
  void text(int x, int y, const std::string& s, RGB c) {
    for (char ch : s) {
      int code = static_cast<unsigned char>(ch);
      if (code < 32 || code > 126) code = '?';
      for (int row = 0; row < 10; ++row)
        for (int col = 0; col < 6; ++col)
          if (kFont[code - 32][row] & (1 << (5 - col))) set(x + col, y + row, c);
      x += 6;
    }
  }
};

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", std::fabs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

void draw_panel(Canvas& cv, int ox, int oy, int pw, int ph, const std::string& title,
                const std::vector<Series>& series) {
  const RGB black{0, 0, 0}, grey{220, 220, 220};
  int left = ox + 62, right = ox + pw - 12, top = oy + 26, bottom = oy + ph - 30;
  cv.text(ox + (pw - static_cast<int>(title.size()) * 6) / 2, oy + 8, title, black);
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (auto& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        x0 = std::min(x0, s.x[i]);
        x1 = std::max(x1, s.x[i]);
        y0 = std::min(y0, s.y[i]);
        y1 = std::max(y1, s.y[i]);
      }
  if (!(x1 >= x0)) {
    x0 = 0;
    x1 = 1;
    y0 = 0;
    y1 = 1;
  }
  if (x1 - x0 < 1e-12) x1 = x0 + 1;
  if (y1 - y0 <= 1e-9 * std::max(1.0, std::fabs(y0))) {  // a constant: centre it
    double h = std::fabs(y0) > 0 ? std::fabs(y0) * 0.1 : 0.5;
    y0 -= h;
    y1 += h;
  }
  double pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  auto X = [&](double x) { return left + static_cast<int>(std::lround((x - x0) / (x1 - x0) * (right - left))); };
  auto Y = [&](double y) { return bottom - static_cast<int>(std::lround((y - y0) / (y1 - y0) * (bottom - top))); };
  for (int i = 0; i <= 4; ++i) {  // grid, ticks and labels
    double yv = y0 + (y1 - y0) * i / 4, xv = x0 + (x1 - x0) * i / 4;
    cv.line(left, Y(yv), right, Y(yv), grey);
    cv.line(X(xv), top, X(xv), bottom, grey);
    std::string yl = tick_label(yv), xl = tick_label(xv);
    cv.text(left - 6 - static_cast<int>(yl.size()) * 6, Y(yv) - 5, yl, black);
    cv.text(X(xv) - static_cast<int>(xl.size()) * 3, bottom + 6, xl, black);
  }
  cv.line(left, top, left, bottom, black);
  cv.line(left, bottom, right, bottom, black);
  cv.text((left + right) / 2 - 15, bottom + 18, "epoch", black);
  int ly = top + 4;
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    RGB c = kColours[k % 6];
    int px = -1, py = -1;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      int qx = X(s.x[i]), qy = Y(s.y[i]);
      if (px >= 0) cv.line(px, py, qx, qy, c, 2);
      if (s.x.size() <= 50) cv.box(qx, qy, 2, c);
      px = qx;
      py = qy;
    }
    cv.line(right - 90, ly + 5, right - 72, ly + 5, c, 2);  // legend
    cv.text(right - 66, ly, s.label, black);
    ly += 13;
  }
}

}  // namespace

void write_chart_png(const std::string& path, const std::vector<std::pair<std::string, std::vector<Series>>>& panels,
                     int pw, int ph) {
  KILN_CHECK(pw >= 120 && ph >= 100 && pw <= 4000 && ph <= 4000, "write_chart_png", "panel size out of range");
  int n = std::max<int>(1, static_cast<int>(panels.size()));
  int cols = std::min(n, 2), rows = (n + cols - 1) / cols;
  KILN_CHECK(rows <= 64, "write_chart_png", "too many panels: " + std::to_string(panels.size()));
  Canvas cv(cols * pw, rows * ph);
  for (size_t i = 0; i < panels.size(); ++i)
    draw_panel(cv, static_cast<int>(i % cols) * pw, static_cast<int>(i / cols) * ph, pw, ph, panels[i].first,
               panels[i].second);
  // Encode in memory, then write the file atomically.
  std::vector<unsigned char> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  KILN_CHECK(png != nullptr, "write_chart_png", "libpng failed to start");
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info ? &info : nullptr);
    KILN_CHECK(false, "write_chart_png", "libpng failed encoding " + path);
  }
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, png_size_t len) {
        auto* v = static_cast<std::vector<unsigned char>*>(png_get_io_ptr(p));
        v->insert(v->end(), data, data + len);
      },
      nullptr);
  png_set_IHDR(png, info, cv.w, cv.h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < cv.h; ++y) png_write_row(png, &cv.px[static_cast<size_t>(y) * cv.w * 3]);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  store::write_atomic(path, [&](int fd) { store::write_all(fd, out.data(), out.size(), path); });
}

void chart_from_csv(const std::string& csv_path, const std::string& png_path) {
  std::ifstream in(csv_path);
  KILN_CHECK(in.good(), "chart_from_csv", "cannot read " + csv_path);
  auto split_line = [](const std::string& l) {
    std::vector<std::string> f;
    std::stringstream ss(l);
    std::string x;
    while (std::getline(ss, x, ',')) f.push_back(x);
    return f;
  };
  std::string line;
  KILN_CHECK(static_cast<bool>(std::getline(in, line)), "chart_from_csv", csv_path + " is empty");
  std::vector<std::string> head = split_line(line);
  KILN_CHECK(head.size() >= 6 && head[0] == "split" && head[3] == "epoch_progress", "chart_from_csv",
             csv_path + " does not have the Learner's header");
  size_t lr_col = std::find(head.begin(), head.end(), "lr") - head.begin();
  KILN_CHECK(lr_col < head.size(), "chart_from_csv", csv_path + " has no lr column");
  // metric -> split -> series; metrics are columns 4 .. lr (inclusive).
  std::map<std::string, std::map<std::string, Series>> data;
  while (std::getline(in, line)) {
    auto f = split_line(line);
    if (f.size() != head.size()) continue;  // a partial last line
    std::string split = f[0] == "train_step" ? "train" : f[0];
    if (split != "train" && split != "valid") continue;
    char* end = nullptr;
    double x = std::strtod(f[3].c_str(), &end);
    for (size_t c = 4; c <= lr_col; ++c) {
      if (c == lr_col && split != "train") continue;
      Series& s = data[head[c]][split];
      s.label = split;
      s.x.push_back(x);
      s.y.push_back(std::strtod(f[c].c_str(), &end));
    }
  }
  std::vector<std::pair<std::string, std::vector<Series>>> panels;
  for (size_t c = 4; c <= lr_col; ++c) {
    auto it = data.find(head[c]);
    if (it == data.end()) continue;
    std::vector<Series> ss;
    for (auto& [k, s] : it->second) ss.push_back(s);
    panels.emplace_back(head[c], std::move(ss));
  }
  write_chart_png(png_path, panels);
}

}  // namespace kiln::train
