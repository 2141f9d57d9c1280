// SPDX-License-Identifier: MIT OR Apache-2.0
// What the backends of kiln::dist share (common.h).
#include "dist/common.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "autodiff/graph.h"
#include "core/backend.h"
#include "kiln/ops.h"

namespace kiln::dist {

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "reduce_op(?)";
}

namespace detail {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::AllReduce:
      return "all_reduce";
    case Kind::Broadcast:
      return "broadcast";
    case Kind::AllGather:
      return "all_gather";
    case Kind::ReduceScatter:
      return "reduce_scatter";
    case Kind::Barrier:
      return "barrier";
  }
  return "collective(?)";
}

std::string op_label(Kind k) { return std::string("dist.") + kind_name(k); }

std::string strip_label(const std::string& msg) {
  size_t e = msg.find("] ");
  return !msg.empty() && msg[0] == '[' && e != std::string::npos ? msg.substr(e + 2) : msg;
}

// ---- HostBuffer -------------------------------------------------------------------------------

HostBuffer::HostBuffer(const Tensor& t, bool read) : t_(t) {
  bytes_ = static_cast<size_t>(t.numel()) * t.element_size();
  if (bytes_ == 0) return;
  if (t.is_contiguous())
    if (void* h = host_storage_data(t)) {
      data_ = static_cast<char*>(h) + static_cast<size_t>(t.storage_offset()) * t.element_size();
      return;
    }
  staged_ = true;
  staging_.resize(bytes_);
  data_ = staging_.data();
  if (read) t.copy_to_host(data_, t.dtype());
}

void HostBuffer::finish() {
  if (bytes_ == 0) return;
  if (staged_) {
    NoGradGuard no_grad;
    t_.copy_(from_blob_copy(staging_.data(), t_.shape(), t_.dtype(), t_.device()));
  } else {
    autodiff::bump_version(t_);  // written behind the ops' backs: new contents
  }
}

// ---- CallDesc ---------------------------------------------------------------------------------

CallDesc CallDesc::of(Kind kind, const Tensor* t, ReduceOp op, int root) {
  CallDesc d;
  std::fill(std::begin(d.v), std::end(d.v), -1);
  d.v[0] = static_cast<int64_t>(kind);
  if (kind == Kind::AllReduce || kind == Kind::ReduceScatter) d.v[2] = static_cast<int64_t>(op);
  if (kind == Kind::Broadcast) d.v[3] = root;
  if (t) {
    d.v[1] = static_cast<int64_t>(t->dtype());
    d.v[4] = t->dim();
    d.v[5] = t->numel();
    uint64_t h = 1469598103934665603ull;  // FNV-1a over every dim
    for (int64_t i = 0; i < t->dim(); ++i) {
      if (i < kDims) d.v[6 + i] = t->size(i);
      h = (h ^ static_cast<uint64_t>(t->size(i))) * 1099511628211ull;
    }
    d.v[6 + kDims] = static_cast<int64_t>(h & 0x7fffffffffffffffull);
  }
  d.v[kInts - 1] = 0x6b696c6e;  // "kiln"
  return d;
}

bool CallDesc::operator==(const CallDesc& o) const { return std::memcmp(v, o.v, sizeof v) == 0; }

std::string CallDesc::str() const {
  if (v[kInts - 1] != 0x6b696c6e) return "a collective that Kiln did not describe";
  std::string s = kind_name(kind());
  if (v[2] >= 0) s += std::string("(") + std::string(to_string(static_cast<ReduceOp>(v[2]))) + ")";
  if (v[3] >= 0) s += "(root " + std::to_string(v[3]) + ")";
  if (v[1] >= 0) {
    s += " of ";
    s += is_valid_dtype(static_cast<DType>(v[1])) ? std::string(dtype_name(static_cast<DType>(v[1]))) : "dtype(?)";
    s += " [";
    for (int64_t i = 0; i < v[4]; ++i) {
      if (i) s += ", ";
      if (i >= kDims) {
        s += "...";
        break;
      }
      s += std::to_string(v[6 + i]);
    }
    s += "]";
  }
  return s;
}

std::string mismatch(const std::vector<CallDesc>& descs, int my_rank) {
  bool same = true;
  for (const CallDesc& d : descs) same = same && d == descs.front();
  if (same) return "";
  // Ranks grouped by what they called, in order of first appearance.
  std::vector<std::pair<CallDesc, std::vector<int>>> groups;
  for (int r = 0; r < static_cast<int>(descs.size()); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == descs[r]; });
    if (it == groups.end())
      groups.push_back({descs[r], {r}});
    else
      it->second.push_back(r);
  }
  std::string s = "[" + op_label(descs.at(my_rank).kind()) +
                  "] the ranks called different collectives (every rank must call the same collectives in the same "
                  "order, with tensors of the same dtype and shape): ";
  for (size_t g = 0; g < groups.size(); ++g) {
    if (g == 6) {
      s += "; ...";
      break;
    }
    if (g) s += "; ";
    const auto& ranks = groups[g].second;
    s += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i == 4 && ranks.size() > 5) {
        s += ", ... (" + std::to_string(ranks.size()) + " ranks)";
        break;
      }
      s += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    s += ": " + groups[g].first.str();
  }
  s += " (this is rank " + std::to_string(my_rank) + ")";
  return s;
}

std::string invalid_call(Kind kind, const Tensor* t, ReduceOp op, int root, int size) {
  std::string label = "[" + op_label(kind) + "] ";
  if ((kind == Kind::AllReduce || kind == Kind::ReduceScatter) && op == ReduceOp::Mean && !is_floating(t->dtype()))
    return label + "ReduceOp::Mean needs a floating-point tensor, got " + std::string(dtype_name(t->dtype())) +
           "; reduce with Sum and divide";
  if (kind == Kind::Broadcast && (root < 0 || root >= size))
    return label + "root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(size);
  if (kind == Kind::ReduceScatter) {
    if (t->dim() == 0) return label + "needs a tensor with at least one dim, split along dim 0; got a 0-d tensor";
    if (t->size(0) % size != 0)
      return label + "dim 0 (" + std::to_string(t->size(0)) + ") must be a multiple of the group's size " +
             std::to_string(size);
  }
  return "";
}

// ---- host loops ---------------------------------------------------------------------------------

namespace {
template <class F>
void each_float(void* data, int64_t n, DType dtype, F f) {
  switch (dtype) {
    case DType::F32: {
      auto* p = static_cast<float*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(f(static_cast<double>(p[i]), true));
      break;
    }
    case DType::F64: {
      auto* p = static_cast<double*>(data);
      for (int64_t i = 0; i < n; ++i) p[i] = f(p[i], false);
      break;
    }
    case DType::F16: {
      auto* p = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < n; ++i)
        p[i] = Half::from_float(static_cast<float>(f(static_cast<double>(Half::to_float(p[i])), true)));
      break;
    }
    case DType::BF16: {
      auto* p = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < n; ++i)
        p[i] = BFloat16::from_float(static_cast<float>(f(static_cast<double>(BFloat16::to_float(p[i])), true)));
      break;
    }
    default:
      KILN_CHECK(false, "dist", "a floating-point dtype was expected, got " << dtype_name(dtype).data());
  }
}
}  // namespace

void divide(void* data, int64_t n, DType dtype, double divisor) {
  // f32 values divide in f32 (as torch does), so a mean of equal values is exact.
  const float fd = static_cast<float>(divisor);
  each_float(data, n, dtype, [&](double x, bool single) {
    return single ? static_cast<double>(static_cast<float>(x) / fd) : x / divisor;
  });
}

void scale(void* data, int64_t n, DType dtype, double factor) {
  const float ff = static_cast<float>(factor);
  each_float(data, n, dtype, [&](double x, bool single) {
    return single ? static_cast<double>(static_cast<float>(x) * ff) : x * factor;
  });
}

void reduce16(const uint16_t* in, uint16_t* inout, int64_t n, bool bf16, ReduceOp op) {
  auto to = [bf16](uint16_t b) { return bf16 ? BFloat16::to_float(b) : Half::to_float(b); };
  auto from = [bf16](float f) { return bf16 ? BFloat16::from_float(f) : Half::from_float(f); };
  for (int64_t i = 0; i < n; ++i) {
    float a = to(in[i]), b = to(inout[i]), r;
    switch (op) {
      case ReduceOp::Max:
        r = std::isnan(a) || std::isnan(b) ? a + b : (a > b ? a : b);
        break;
      case ReduceOp::Min:
        r = std::isnan(a) || std::isnan(b) ? a + b : (a < b ? a : b);
        break;
      default:
        r = a + b;
        break;
    }
    inout[i] = from(r);
  }
}

std::chrono::milliseconds default_timeout(double seconds) {
  if (seconds <= 0)
    if (const char* env = std::getenv("KILN_DIST_TIMEOUT")) seconds = std::atof(env);
  if (seconds <= 0) seconds = 300;
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

}  // namespace detail
}  // namespace kiln::dist
