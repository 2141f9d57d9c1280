// SPDX-License-Identifier: MIT OR Apache-2.0
// Loading golden cases, rebuilding their inputs and comparing results (see golden.h).
#include "conformance/golden.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "test_paths.h"

namespace kiln::conformance {

// ---- attributes ---------------------------------------------------------------------------
namespace {
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

DType parse_dtype(const std::string& s) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (s == dtype_name(static_cast<DType>(i))) return static_cast<DType>(i);
  throw std::runtime_error("golden: unknown dtype '" + s + "'");
}
}  // namespace

Attrs::Attrs(const std::string& text) {
  if (text.empty()) return;
  for (const auto& kv : split(text, ';')) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) throw std::runtime_error("golden: bad attribute '" + kv + "'");
    kv_[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
}

const std::string& Attrs::str(const std::string& k) const {
  auto it = kv_.find(k);
  if (it == kv_.end()) throw std::runtime_error("golden: missing attribute '" + k + "'");
  return it->second;
}
int64_t Attrs::i(const std::string& k) const { return std::stoll(str(k)); }
double Attrs::f(const std::string& k) const { return std::strtod(str(k).c_str(), nullptr); }
std::optional<int64_t> Attrs::opt_i(const std::string& k) const {
  if (!has(k)) return std::nullopt;
  return i(k);
}
std::optional<double> Attrs::opt_f(const std::string& k) const {
  if (!has(k)) return std::nullopt;
  return f(k);
}
std::vector<int64_t> Attrs::ints(const std::string& k) const {
  std::vector<int64_t> v;
  if (!has(k) || str(k).empty()) return v;
  for (const auto& p : split(str(k), ',')) v.push_back(std::stoll(p));
  return v;
}
Dims Attrs::dims(const std::string& k) const {
  auto v = ints(k);
  return Dims(v.begin(), v.end());
}
Shape Attrs::shape(const std::string& k) const {
  auto v = ints(k);
  return Shape(v.begin(), v.end());
}
std::optional<DType> Attrs::dtype(const std::string& k) const {
  if (!has(k)) return std::nullopt;
  return parse_dtype(str(k));
}
Scalar Attrs::scalar(const std::string& k) const {
  const std::string& s = str(k);
  if (s.find_first_of(".eEinfa") != std::string::npos) return Scalar(f(k));
  return Scalar(i(k));
}

// ---- files --------------------------------------------------------------------------------
std::string golden_dir() {
  if (const char* e = std::getenv("KILN_GOLDEN_DIR")) return e;
  return KILN_GOLDEN_DIR;
}

std::vector<std::string> golden_ops() {
  std::vector<std::string> ops;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(golden_dir(), ec)) {
    if (e.path().extension() == ".kgl") ops.push_back(e.path().stem().string());
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

namespace {
class Reader {
 public:
  explicit Reader(std::vector<uint8_t> d, std::string file) : d_(std::move(d)), file_(std::move(file)) {}
  void need(size_t n) const {
    if (pos_ + n > d_.size()) throw std::runtime_error("golden: truncated file " + file_);
  }
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, d_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    auto n = get<uint32_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(d_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<uint8_t> bytes(size_t n) {
    need(n);
    std::vector<uint8_t> b(d_.begin() + static_cast<ptrdiff_t>(pos_), d_.begin() + static_cast<ptrdiff_t>(pos_ + n));
    pos_ += n;
    return b;
  }
  Shape shape() {
    auto nd = get<uint8_t>();
    Shape s;
    for (int i = 0; i < nd; ++i) s.push_back(get<int64_t>());
    return s;
  }
  DType dtype() {
    auto c = get<uint8_t>();
    if (c >= kNumDTypes) throw std::runtime_error("golden: bad dtype code in " + file_);
    return static_cast<DType>(c);
  }

 private:
  std::vector<uint8_t> d_;
  std::string file_;
  size_t pos_ = 0;
};
}  // namespace

std::vector<Case> load_cases(const std::string& op) {
  std::string path = golden_dir() + "/" + op + ".kgl";
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("golden: cannot open " + path);
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Reader r(std::move(data), path);
  const char magic[] = "KGLD1\n";
  for (int i = 0; i < 6; ++i)
    if (r.get<char>() != magic[i]) throw std::runtime_error("golden: bad magic in " + path);
  auto n = r.get<uint32_t>();
  std::vector<Case> cases(n);
  for (auto& c : cases) {
    c.op = r.str();
    c.name = r.str();
    c.attrs_text = r.str();
    c.attrs = Attrs(c.attrs_text);
    c.null_check = (r.get<uint8_t>() & 1) != 0;
    auto ni = r.get<uint32_t>();
    c.inputs.resize(ni);
    for (auto& in : c.inputs) {
      in.kind = static_cast<InputSpec::Kind>(r.get<uint8_t>());
      switch (in.kind) {
        case InputSpec::Tensor:
          in.dtype = r.dtype();
          in.base_shape = r.shape();
          in.transforms = r.str();
          in.bytes = r.bytes(static_cast<size_t>(shape_numel(in.base_shape)) * dtype_size(in.dtype));
          break;
        case InputSpec::Int:
          in.ival = r.get<int64_t>();
          break;
        case InputSpec::Float:
          in.fval = r.get<double>();
          break;
        case InputSpec::Bool:
          in.bval = r.get<uint8_t>() != 0;
          break;
        case InputSpec::Absent:
          break;
        default:
          throw std::runtime_error("golden: bad input kind in " + path);
      }
    }
    auto no = r.get<uint32_t>();
    c.outputs.resize(no);
    for (auto& o : c.outputs) {
      o.dtype = r.dtype();
      o.shape = r.shape();
      o.rtol = r.get<double>();
      o.atol = r.get<double>();
      o.bytes = r.bytes(static_cast<size_t>(shape_numel(o.shape)) * dtype_size(o.dtype));
    }
  }
  return cases;
}

// ---- inputs -------------------------------------------------------------------------------
namespace {
Tensor apply_transforms(Tensor t, const std::string& tr) {
  if (tr.empty()) return t;
  for (const auto& step : split(tr, '|')) {
    auto p = split(step, ':');
    std::vector<int64_t> v;
    for (size_t i = 1; i < p.size(); ++i) v.push_back(std::stoll(p[i]));
    if (p[0] == "T") {
      t = t.transpose(v.at(0), v.at(1));
    } else if (p[0] == "S") {
      t = t.slice(v.at(0), v.at(1), v.at(2), v.at(3));
    } else if (p[0] == "E") {
      t = t.expand(Shape(v.begin(), v.end()));
    } else if (p[0] == "F") {
      t = t.flip(Dims(v.begin(), v.end()));
    } else {
      throw std::runtime_error("golden: bad transform '" + step + "'");
    }
  }
  return t;
}
}  // namespace

Args build_args(const Case& c, const Device& dev) {
  Args args;
  for (const auto& in : c.inputs) {
    Arg a;
    switch (in.kind) {
      case InputSpec::Tensor:
        a.t = apply_transforms(from_blob_copy(in.bytes.data(), in.base_shape, in.dtype, dev), in.transforms);
        break;
      case InputSpec::Int:
        a.s = Scalar(in.ival);
        break;
      case InputSpec::Float:
        a.s = Scalar(in.fval);
        break;
      case InputSpec::Bool:
        a.s = Scalar(in.bval);
        break;
      case InputSpec::Absent:
        break;
    }
    args.push_back(std::move(a));
  }
  return args;
}

// ---- comparison ---------------------------------------------------------------------------
namespace {
/// Raw little-endian values of dtype dt, as doubles (floats) — exact for every dtype but i64.
double decode_f(const uint8_t* p, DType dt) {
  switch (dt) {
    case DType::F16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return Half::to_float(b);
    }
    case DType::BF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return BFloat16::to_float(b);
    }
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::F64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default:
      return 0;
  }
}
int64_t decode_i(const uint8_t* p, DType dt) {
  switch (dt) {
    case DType::Bool:
      return *p != 0;
    case DType::U8:
      return *p;
    case DType::I8:
      return static_cast<int8_t>(*p);
    case DType::I16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::I64:
    case DType::U64: {  // u64 as its bit pattern, which the cast to i64 of the result keeps too
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::U16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::U32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default:
      return 0;
  }
}

std::string fmt(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}

/// "x=[...]" for each tensor input at flat output index i (inputs broadcast to the output).
std::string inputs_at(const Args& args, const Shape& out_shape, int64_t i) {
  std::ostringstream os;
  for (size_t k = 0; k < args.size(); ++k) {
    const Arg& a = args[k];
    os << " in" << k << "=";
    if (a.s) {
      os << fmt(a.s->to_double());
      continue;
    }
    if (!a.is_tensor()) {
      os << "None";
      continue;
    }
    try {
      if (a.t.numel() == 0) {
        os << "(empty)";
        continue;
      }
      Tensor b = a.t.shape() == out_shape ? a.t : a.t.expand(out_shape);
      auto v = b.contiguous().to_vector<double>();
      os << fmt(v.at(static_cast<size_t>(i))) << "(" << dtype_name(a.t.dtype()) << ")";
    } catch (const std::exception&) {
      os << "?";
    }
  }
  return os.str();
}
}  // namespace

std::string compare(const Case& c, const Args& args, const Outs& got, bool values) {
  std::ostringstream err;
  if (got.size() != c.outputs.size()) {
    err << "expected " << c.outputs.size() << " outputs, got " << got.size();
    return err.str();
  }
  for (size_t k = 0; k < got.size(); ++k) {
    const OutputSpec& e = c.outputs[k];
    const Tensor& g = got[k];
    if (!g.defined()) {
      err << "out" << k << ": undefined tensor\n";
      continue;
    }
    if (g.shape() != e.shape || g.dtype() != e.dtype) {
      err << "out" << k << ": expected " << dtype_name(e.dtype) << to_string(e.shape) << ", got "
          << dtype_name(g.dtype()) << to_string(g.shape()) << "\n";
      continue;
    }
    if (!values) continue;
    const int64_t n = shape_numel(e.shape);
    const size_t es = dtype_size(e.dtype);
    int bad = 0;
    auto report = [&](int64_t i, const std::string& ev, const std::string& gv) {
      if (++bad <= 4)
        err << "out" << k << "[" << i << "]: expected " << ev << ", got " << gv << " |" << inputs_at(args, e.shape, i)
            << "\n";
    };
    if (is_floating(e.dtype)) {
      auto gv = g.to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        double ev = decode_f(e.bytes.data() + static_cast<size_t>(i) * es, e.dtype);
        double x = gv[static_cast<size_t>(i)];
        bool ok;
        if (std::isnan(ev))
          ok = std::isnan(x);
        else if (std::isinf(ev) || (e.rtol == 0 && e.atol == 0))
          ok = x == ev;
        else
          ok = std::isfinite(x) && std::fabs(x - ev) <= e.atol + e.rtol * std::fabs(ev);
        if (!ok) report(i, fmt(ev), fmt(x));
      }
    } else {
      auto gv = g.to_vector<int64_t>();
      for (int64_t i = 0; i < n; ++i) {
        int64_t ev = decode_i(e.bytes.data() + static_cast<size_t>(i) * es, e.dtype);
        if (gv[static_cast<size_t>(i)] != ev) report(i, std::to_string(ev), std::to_string(gv[static_cast<size_t>(i)]));
      }
    }
    if (bad > 4) err << "out" << k << ": " << bad << " of " << n << " elements differ\n";
    if (bad && (e.rtol || e.atol)) err << "out" << k << ": tolerance rtol=" << e.rtol << " atol=" << e.atol << "\n";
  }
  return err.str();
}

namespace {

/// t with its subnormal f32 (and bf16, which shares f32's exponent) values replaced by zeros of
/// their sign; other dtypes as they are.
Tensor flush_subnormals(const Tensor& t) {
  if (t.dtype() != DType::F32 && t.dtype() != DType::BF16) return t;
  return where(t.abs().lt(std::numeric_limits<float>::min()), t * 0, t);
}

/// An output as a golden spec of f64 (floats) or i64 values, from a CPU tensor.
OutputSpec spec_of(const OutputSpec& like, const Tensor& t) {
  OutputSpec s = like;
  s.shape = t.shape();
  if (is_floating(t.dtype())) {
    const auto v = t.to(DType::F64).contiguous().to_vector<double>();
    s.dtype = DType::F64;
    s.bytes.resize(v.size() * 8);
    std::memcpy(s.bytes.data(), v.data(), s.bytes.size());
  } else {
    const auto v = t.to(DType::I64).contiguous().to_vector<int64_t>();
    s.dtype = DType::I64;
    s.bytes.resize(v.size() * 8);
    std::memcpy(s.bytes.data(), v.data(), s.bytes.size());
  }
  return s;
}

}  // namespace

std::string compare_flushed(const Case& c, const OpFn& fn, const Outs& got) {
  const Device cpu = Device::cpu();
  Args args = build_args(c, cpu);
  for (Arg& a : args)
    if (a.is_tensor()) a.t = flush_subnormals(a.t);
  const Outs ref = fn(args, c.attrs, cpu);
  if (ref.size() != got.size()) return "the flushed inputs give " + std::to_string(ref.size()) + " outputs";
  Case flushed = c;
  Outs mine;
  for (size_t k = 0; k < ref.size(); ++k) {
    if (!got[k].defined() || got[k].shape() != ref[k].shape()) return "the flushed inputs give other shapes";
    const Tensor g = flush_subnormals(got[k].to(cpu)), r = flush_subnormals(ref[k]);
    flushed.outputs[k] = spec_of(c.outputs[k], r);
    mine.push_back(is_floating(g.dtype()) ? g.to(DType::F64) : g.to(DType::I64));
  }
  return compare(flushed, args, mine, true);
}

}  // namespace kiln::conformance
