// SPDX-License-Identifier: MIT OR Apache-2.0
// PyTorch-style printing (torch/_tensor_str.py with the default print options: precision 4,
// linewidth 80, threshold 1000, edgeitems 3). Dtype names and device names are Kiln's.
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "ops/dispatch.h"

namespace kiln {

namespace {

constexpr int kPrecision = 4;
constexpr int kLinewidth = 80;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kThreshold = 1000;

enum class Kind { Float, Int, Bool };

std::string fmt_real(double v, int prec, char conv) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const char f[] = {'%', '.', '*', conv, 0};
  std::snprintf(buf, sizeof(buf), f, prec, v);
  return buf;
}

/// The host copy of the elements to print: a tensor trimmed to its edge items where summarised.
struct Data {
  Kind kind;
  Shape shape;
  SmallVec<bool, 6> trimmed;  // dim was cut to 2 * kEdgeItems (print "..." in the middle)
  std::vector<double> f;
  std::vector<int64_t> i;
  std::vector<uint8_t> b;
};

/// PyTorch's _Formatter: one width and one mode (int, fixed, scientific) for the whole tensor.
struct Formatter {
  Kind kind;
  bool int_mode = true, sci_mode = false;
  size_t width = 1;

  explicit Formatter(const Data& d) : kind(d.kind) {
    if (kind == Kind::Int) {
      for (auto v : d.i) width = std::max(width, std::to_string(v).size());
      return;
    }
    if (kind == Kind::Bool) {
      for (auto v : d.b) width = std::max<size_t>(width, v ? 4 : 5);
      return;
    }
    double mn = INFINITY, mx = 0;
    bool any = false;
    for (double v : d.f) {
      if (!std::isfinite(v) || v == 0) continue;
      any = true;
      mn = std::min(mn, std::fabs(v));
      mx = std::max(mx, std::fabs(v));
      if (v != std::ceil(v)) int_mode = false;
    }
    if (!any) return;
    if (int_mode) {
      sci_mode = mx / mn > 1000.0 || mx > 1.0e8;
    } else {
      sci_mode = mx / mn > 1000.0 || mx > 1.0e8 || mn < 1.0e-4;
    }
    for (double v : d.f) {
      if (!std::isfinite(v) || v == 0) continue;
      if (sci_mode)
        width = std::max(width, fmt_real(v, kPrecision, 'e').size());
      else if (int_mode)
        width = std::max(width, fmt_real(v, 0, 'f').size() + 1);
      else
        width = std::max(width, fmt_real(v, kPrecision, 'f').size());
    }
  }

  std::string format(const Data& d, int64_t k) const {
    std::string s;
    if (kind == Kind::Int) {
      s = std::to_string(d.i[static_cast<size_t>(k)]);
    } else if (kind == Kind::Bool) {
      s = d.b[static_cast<size_t>(k)] ? "True" : "False";
    } else {
      double v = d.f[static_cast<size_t>(k)];
      if (sci_mode) {
        s = fmt_real(v, kPrecision, 'e');
      } else if (int_mode) {
        s = fmt_real(v, 0, 'f');
        if (std::isfinite(v)) s += '.';
      } else {
        s = fmt_real(v, kPrecision, 'f');
      }
    }
    if (s.size() < width) s.insert(0, width - s.size(), ' ');
    return s;
  }
};

struct Printer {
  const Data& d;
  const Formatter& fm;
  Strides strides;

  std::string vec(int64_t base, int indent) const {
    int64_t n = d.shape.back();
    bool cut = d.trimmed.back();
    std::vector<std::string> items;
    for (int64_t k = 0; k < n; ++k) {
      if (cut && k == kEdgeItems) items.push_back(" ...");
      items.push_back(fm.format(d, base + k * strides.back()));
    }
    int64_t per_line = std::max<int64_t>(1, (kLinewidth - indent) / static_cast<int64_t>(fm.width + 2));
    std::string out = "[";
    for (size_t k = 0; k < items.size(); ++k) {
      if (k > 0) {
        out += ",";
        if (static_cast<int64_t>(k) % per_line == 0)
          out += "\n" + std::string(static_cast<size_t>(indent + 1), ' ');
        else
          out += " ";
      }
      out += items[k];
    }
    return out + "]";
  }

  std::string rec(size_t dim, int64_t base, int indent) const {
    if (dim + 1 == d.shape.size()) return vec(base, indent);
    std::string sep =
        "," + std::string(d.shape.size() - dim - 1, '\n') + std::string(static_cast<size_t>(indent + 1), ' ');
    std::string out = "[";
    for (int64_t k = 0; k < d.shape[dim]; ++k) {
      if (k > 0) out += sep;
      if (d.trimmed[dim] && k == kEdgeItems) out += "..." + sep;
      out += rec(dim + 1, base + k * strides[dim], indent + 1);
    }
    return out + "]";
  }
};

/// Keeps the first and last kEdgeItems along every dim longer than 2 * kEdgeItems.
Tensor summarize(const Tensor& t, SmallVec<bool, 6>& trimmed) {
  Tensor r = t;
  trimmed = SmallVec<bool, 6>(static_cast<size_t>(t.dim()), false);
  for (int64_t dd = 0; dd < t.dim(); ++dd) {
    int64_t n = r.size(dd);
    if (n <= 2 * kEdgeItems) continue;
    trimmed[static_cast<size_t>(dd)] = true;
    r = cat({r.narrow(dd, 0, kEdgeItems), r.narrow(dd, n - kEdgeItems, kEdgeItems)}, dd);
  }
  return r;
}

std::string body(const Tensor& t, int indent) {
  Data d;
  Tensor v = t;
  if (t.numel() > kThreshold) {
    v = summarize(t, d.trimmed);
  } else {
    d.trimmed = SmallVec<bool, 6>(static_cast<size_t>(t.dim()), false);
  }
  d.shape = v.shape();
  if (is_floating(t.dtype())) {
    d.kind = Kind::Float;
    d.f = v.to_vector<double>();
  } else if (t.dtype() == DType::Bool) {
    d.kind = Kind::Bool;
    d.b.resize(static_cast<size_t>(v.numel()));
    v.copy_to_host(d.b.data(), DType::Bool);
  } else {
    d.kind = Kind::Int;
    d.i = v.to_vector<int64_t>();
  }
  Formatter fm(d);
  if (t.dim() == 0) return fm.format(d, 0);
  Printer p{d, fm, contiguous_strides(d.shape)};
  return p.rec(0, 0, indent);
}

/// PyTorch's _add_suffixes: each suffix goes on the same line unless it would pass linewidth.
std::string add_suffixes(std::string s, const std::vector<std::string>& suffixes, int indent) {
  size_t nl = s.rfind('\n');
  int64_t last = static_cast<int64_t>(s.size()) - (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const auto& x : suffixes) {
    int64_t len = static_cast<int64_t>(x.size());
    if (last + len + 2 > kLinewidth) {
      s += ",\n" + std::string(static_cast<size_t>(indent), ' ') + x;
      last = indent + len;
    } else {
      s += ", " + x;
      last += len + 2;
    }
  }
  return s + ")";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<std::string> suffixes;
  const std::string dt = "dtype=" + std::string(dtype_name(dtype()));
  if (!device().backend()->has_data()) {
    // No values to show: the shape, the device and a non-default dtype.
    suffixes.push_back("size=" + to_string(shape()));
    suffixes.push_back("device=" + device().str());
    if (dtype() != kDefaultFloat) suffixes.push_back(dt);
    return add_suffixes(prefix + "...", suffixes, indent);
  }
  if (!device().is_cpu()) suffixes.push_back("device=" + device().str());
  std::string s;
  if (numel() == 0) {
    if (dim() != 1) suffixes.push_back("size=" + to_string(shape()));
    if (dtype() != kDefaultFloat) suffixes.push_back(dt);
    s = "[]";
  } else {
    if (dtype() != kDefaultFloat && dtype() != DType::I64 && dtype() != DType::Bool) suffixes.push_back(dt);
    s = body(*this, indent);
  }
  return add_suffixes(prefix + s, suffixes, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace kiln
