// SPDX-License-Identifier: MIT OR Apache-2.0
// The micro target of ONNX code generation, part 2: the arena plan of a lowered model (liveness,
// greedy offsets) and the text of its source and header (codegen_micro.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/error.h"
#include "onnx/codegen_micro.h"
// The kernel files' text (kiln_micro.h, kiln_micro.cpp), embedded at build time by
// cmake/micro_embed.cmake so that generated folders are self-contained.
#include "micro_kernels_embed.inc"

namespace kiln::onnx::micro {

namespace {

namespace fs = std::filesystem;
constexpr int64_t kAlign = 16;

int64_t numel(const std::vector<int64_t>& s) {
  int64_t p = 1;
  for (int64_t d : s) p *= d;
  return p;
}
int64_t aligned(int64_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// A float as an exact C++ hex literal.
std::string flit(float v) {
  if (v != v) return "__builtin_nanf(\"\")";
  if (v == __builtin_inff()) return "__builtin_inff()";
  if (v == -__builtin_inff()) return "(-__builtin_inff())";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(v));
  return buf;
}

// The model's integer inputs (indices into m.inputs).
std::vector<size_t> int_inputs(const Lowered& m) {
  std::vector<size_t> r;
  for (size_t i = 0; i < m.inputs.size(); ++i)
    if (m.int_type.count(m.inputs[i])) r.push_back(i);
  return r;
}
// The entry point's inputs parameter: float pointers, or untyped ones when any input is an integer.
std::string input_param(const Lowered& m) {
  return int_inputs(m).empty() ? "const float* const* inputs" : "const void* const* inputs";
}
// Whether the model gathers by run-time indices (its entry point may return KILN_MICRO_ERR_INDEX).
bool has_index_check(const Lowered& m) {
  for (const auto& s : m.steps)
    if (s.kind == Step::Gather && s.tables.empty()) return true;
  return false;
}

// Union-find over value names: values that share storage.
struct Groups {
  std::map<std::string, std::string> parent;
  std::string find(const std::string& v) {
    auto it = parent.find(v);
    if (it == parent.end() || it->second == v) return v;
    return parent[v] = find(it->second);
  }
  void join(const std::string& into, const std::string& v) { parent[find(v)] = find(into); }
};

}  // namespace

Plan plan_arena(const Lowered& m) {
  Plan p;
  const int n = static_cast<int>(m.steps.size());
  std::map<std::string, int> def, last;
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    p.input_of[m.inputs[i]] = static_cast<int>(i);
    def[m.inputs[i]] = -1;
  }
  for (int t = 0; t < n; ++t) {
    for (const auto& v : m.steps[t].in) last[v] = t;
    def[m.steps[t].out] = t;
    for (const auto& v : m.steps[t].more_out) def[v] = t;
  }
  for (const auto& o : m.outputs) last[o] = n;  // copied out after the last step
  // Storage groups: aliases share their input's storage; elementwise steps write over their
  // first input when nothing reads it (or its aliases) later.
  Groups gr;
  std::map<std::string, int> group_last;  // root -> last use of any member
  auto note = [&](const std::string& v) {
    const std::string r = gr.find(v);
    group_last[r] = std::max({group_last[r], last.count(v) ? last[v] : def[v], def[v]});
  };
  for (const auto& v : m.inputs) note(v);
  for (int t = 0; t < n; ++t) {
    const Step& s = m.steps[t];
    if (s.kind == Step::Alias) {
      gr.join(s.in[0], s.out);
    } else if (s.inplace_ok && !s.in.empty()) {
      const std::string r = gr.find(s.in[0]);
      if (!p.input_of.count(r) && group_last[r] == t) gr.join(s.in[0], s.out);
    }
    note(s.out);
    for (const auto& v : s.more_out) note(v);
  }
  // Storage of each arena group: bytes and lifetime [first, last].
  struct Buf {
    std::string root;
    int64_t bytes = 0;
    int first = 1 << 30, last = -1;
    int64_t offset = -1;
  };
  std::map<std::string, Buf> bufs;
  for (const auto& [v, d] : def) {
    const std::string r = gr.find(v);
    if (p.input_of.count(r)) {
      p.input_of[v] = p.input_of[r];
      continue;
    }
    Buf& b = bufs[r];
    b.root = r;
    b.bytes = std::max(b.bytes, aligned(numel(m.shape.at(v)) * 4));
    b.first = std::min(b.first, d);
    b.last = std::max(b.last, last.count(v) ? last[v] : d);
  }
  for (int t = 0; t <= n; ++t) {
    int64_t live = 0;
    for (const auto& [r, b] : bufs)
      if (b.first <= t && t <= b.last) live += b.bytes;
    p.lower_bound = std::max(p.lower_bound, live);
  }
  // Greedy by size: each buffer at the lowest offset clear of placed buffers it lives with.
  std::vector<Buf*> order;
  for (auto& [r, b] : bufs) order.push_back(&b);
  std::stable_sort(order.begin(), order.end(), [](const Buf* a, const Buf* b) {
    return a->bytes != b->bytes ? a->bytes > b->bytes : a->first < b->first;
  });
  std::vector<Buf*> placed;
  for (Buf* b : order) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Buf* q : placed)
      if (q->first <= b->last && b->first <= q->last) busy.push_back({q->offset, q->offset + q->bytes});
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (const auto& [lo, hi] : busy) {
      if (off + b->bytes <= lo) break;
      off = std::max(off, hi);
    }
    b->offset = off;
    placed.push_back(b);
    p.arena_bytes = std::max(p.arena_bytes, off + b->bytes);
  }
  for (const auto& [v, d] : def) {
    const std::string r = gr.find(v);
    if (!p.input_of.count(r)) p.offset[v] = bufs[r].offset;
  }
  return p;
}

namespace {

// The text of the generated source: constants, then the entry point's body.
class Writer {
 public:
  Writer(const Lowered& m, const Plan& p, const std::string& name) : m_(m), p_(p), name_(name) {}

  std::string source(int64_t& weight_bytes) {
    std::string body;
    for (size_t t = 0; t < m_.steps.size(); ++t) body += step(t);
    const std::string outs = outputs();
    std::ostringstream s;
    s << "// Generated by kiln-onnx --target micro. Do not edit.\n"
      << "// Freestanding C++17: no heap, exceptions, RTTI or threads; arena and weights are static.\n"
      << "#include \"" << name_ << ".h\"\n\n#include \"kiln_micro.h\"\n\n"
      << "// Called after each kernel with its index and node (define it to time or trace the steps).\n"
      << "#ifndef KILN_MICRO_STEP\n#define KILN_MICRO_STEP(index, node)\n#endif\n\nnamespace {\n\n"
      << "[[maybe_unused]] alignas(16) float arena[" << std::max<int64_t>(1, p_.arena_bytes / 4) << "];  // "
      << p_.arena_bytes << " bytes (liveness lower bound " << p_.lower_bound << ")\n\n"
      << consts_ << "}  // namespace\n\n"
      << "extern \"C\" const size_t " << name_ << "_input_sizes[" << std::max<size_t>(1, m_.inputs.size()) << "] = {"
      << sizes(m_.inputs) << "};\n"
      << "extern \"C\" const size_t " << name_ << "_output_sizes[" << std::max<size_t>(1, m_.outputs.size()) << "] = {"
      << sizes(m_.outputs) << "};\n\n"
      << "extern \"C\" int " << name_ << "_run(" << input_param(m_)
      << ", const size_t* input_sizes, float* const* outputs,\n"
      << "           const size_t* output_sizes) {\n"
      << "  if (!inputs || !input_sizes || !outputs || !output_sizes) return KILN_MICRO_ERR_NULL;\n"
      << "  for (size_t i = 0; i < " << m_.inputs.size() << "; ++i) {\n"
      << "    if (!inputs[i]) return KILN_MICRO_ERR_NULL;\n"
      << "    if (input_sizes[i] != " << name_ << "_input_sizes[i]) return KILN_MICRO_ERR_SIZE;\n  }\n"
      << "  for (size_t i = 0; i < " << m_.outputs.size() << "; ++i) {\n"
      << "    if (!outputs[i]) return KILN_MICRO_ERR_NULL;\n"
      << "    if (output_sizes[i] != " << name_ << "_output_sizes[i]) return KILN_MICRO_ERR_SIZE;\n  }\n"
      << typed_inputs() << body << outs << "  return KILN_MICRO_OK;\n}\n";
    weight_bytes = weight_bytes_;
    return s.str();
  }

  std::vector<std::string> plan_lines() const { return plan_; }

 private:
  std::string sizes(const std::vector<std::string>& vs) const {
    std::string r;
    for (const auto& v : vs) r += (r.empty() ? "" : ", ") + std::to_string(numel(m_.shape.at(v)));
    return r.empty() ? "0" : r;
  }

  // A const array of data; returns its name.
  std::string array(const std::vector<float>& d) {
    const std::string id = "c" + std::to_string(n_consts_++);
    consts_ += "const float " + id + "[" + std::to_string(std::max<size_t>(1, d.size())) + "] = {";
    for (size_t i = 0; i < d.size(); ++i) consts_ += (i % 6 ? " " : "\n    ") + flit(d[i]) + ",";
    consts_ += d.empty() ? "0};\n" : "\n};\n";
    weight_bytes_ += static_cast<int64_t>(d.size()) * 4;
    return id;
  }
  // A const params struct; returns its name.
  std::string params(const std::string& type, const std::string& init) {
    std::string id = "p";  // appended, not "p" + ...: GCC 12 warns (-Wrestrict) on that form here
    id += std::to_string(n_params_++);
    consts_ += "const kiln_micro::" + type + " " + id + " = " + init + ";\n";
    return id;
  }
  // An int32 const array; returns its name.
  std::string int_array(const std::vector<int32_t>& d) {
    const std::string id = "c" + std::to_string(n_consts_++);
    consts_ += "const int32_t " + id + "[" + std::to_string(std::max<size_t>(1, d.size())) + "] = {";
    for (size_t i = 0; i < d.size(); ++i) consts_ += (i % 12 ? " " : "\n    ") + std::to_string(d[i]) + ",";
    consts_ += d.empty() ? "0};\n" : "\n};\n";
    weight_bytes_ += static_cast<int64_t>(d.size()) * 4;
    return id;
  }
  // The inputs as typed pointers in0, in1, ... (the entry point takes them as const void* when
  // any is an integer).
  std::string typed_inputs() const {
    std::string r;
    const bool any_int = !int_inputs(m_).empty();
    for (size_t i = 0; i < m_.inputs.size(); ++i) {
      auto t = m_.int_type.find(m_.inputs[i]);
      const std::string type = t == m_.int_type.end() ? "float" : t->second, at = "inputs[" + std::to_string(i) + "]";
      r += "  [[maybe_unused]] const " + type + "* const in" + std::to_string(i) + " = " +
           (any_int ? "static_cast<const " + type + "*>(" + at + ")" : at) + ";\n";
    }
    return r;
  }
  // The pointer expression of run-time value v.
  std::string ptr(const std::string& v) const {
    auto in = p_.input_of.find(v);
    if (in != p_.input_of.end()) return "in" + std::to_string(in->second);
    return "(arena + " + std::to_string(p_.offset.at(v) / 4) + ")";
  }
  static std::string ints(const int32_t* v, int n) {
    std::string r = "{";
    for (int i = 0; i < n; ++i) r += (i ? ", " : "") + std::to_string(v[i]);
    return r + "}";
  }
  static std::string act(kiln_micro::Act a, float lo, float hi) {
    const char* names[] = {"kiln_micro::kActNone", "kiln_micro::kActRelu", "kiln_micro::kActClip"};
    return std::string(names[a]) + ", " + flit(lo) + ", " + flit(hi);
  }

  std::string step(size_t t) {
    const Step& s = m_.steps[t];
    const std::string outs = shape_str(m_.shape.at(s.out));
    plan_.push_back(std::to_string(t) + ": " + s.what + " -> " + outs +
                    (p_.offset.count(s.out) ? " @" + std::to_string(p_.offset.at(s.out)) : " (input)"));
    if (s.kind == Step::Alias) return "  // " + s.what + " -> " + outs + ": a view, no code\n";
    return kernel_call(s, outs) + "  KILN_MICRO_STEP(" + std::to_string(t) + ", " + quote(s.what) + ");\n";
  }

  static std::string quote(const std::string& v) {
    std::string r = "\"";
    for (char ch : v) r += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
    return r + "\"";
  }

  // The kernel call of step s (whose output has shape `outs`).
  std::string kernel_call(const Step& s, const std::string& outs) {
    std::string c = "  // " + s.what + " -> " + outs + "\n  ";
    const std::string x = s.in.empty() ? "" : ptr(s.in[0]), y = ptr(s.out);
    const std::string nel = std::to_string(numel(m_.shape.at(s.out)));
    switch (s.kind) {
      case Step::Conv: {
        const auto& q = s.conv;
        const int32_t f[] = {q.n,  q.c_in, q.h,  q.w,  q.c_out, q.oh, q.ow, q.kh,
                             q.kw, q.sh,   q.sw, q.pt, q.pl,    q.dh, q.dw, q.groups};
        std::string i = ints(f, 16);
        i.pop_back();
        const std::string pp = params("Conv2dParams", i + ", " + act(q.act, q.lo, q.hi) + "}");
        const std::string w = array(s.w), b = s.b.empty() ? "nullptr" : array(s.b);
        return c + "kiln_micro::conv2d(" + pp + ", " + x + ", " + w + ", " + b + ", " + y + ");\n";
      }
      case Step::Linear:
      case Step::MatMul: {
        const auto& q = s.lin;
        const std::string pp =
            params("LinearParams", "{" + std::to_string(q.m) + ", " + std::to_string(q.k) + ", " + std::to_string(q.n) +
                                       ", " + act(q.act, q.lo, q.hi) + ", " + std::to_string(q.bias_rows) + "}");
        if (s.kind == Step::Linear) {
          const std::string w = array(s.w), b = s.b.empty() ? "nullptr" : array(s.b);
          return c + "kiln_micro::linear(" + pp + ", " + x + ", " + w + ", " + b + ", " + y + ");\n";
        }
        const std::string mk = std::to_string(q.m * q.k), kn = std::to_string(q.k * q.n),
                          mn = std::to_string(q.m * q.n);
        return c + "for (int32_t i = 0; i < " + std::to_string(s.batch) + "; ++i)\n    kiln_micro::linear(" + pp +
               ", " + x + " + i * " + mk + ", " + ptr(s.in[1]) + " + i * " + kn + ", nullptr, " + y + " + i * " + mn +
               ");\n";
      }
      case Step::MaxPool:
      case Step::AvgPool: {
        const auto& q = s.pool;
        const int32_t f[] = {q.planes, q.h,  q.w,  q.oh, q.ow, q.kh, q.kw,
                             q.sh,     q.sw, q.pt, q.pl, q.pb, q.pr, q.count_include_pad};
        const std::string pp = params("Pool2dParams", ints(f, 14));
        return c + "kiln_micro::" + (s.kind == Step::MaxPool ? "max" : "avg") + "_pool2d(" + pp + ", " + x + ", " + y +
               ");\n";
      }
      case Step::Unary: {
        std::string extra;
        if (s.unary == "clip") extra = ", " + flit(s.lo) + ", " + flit(s.hi);
        if (s.unary == "leaky_relu") extra = ", " + flit(s.alpha);
        return c + "kiln_micro::" + s.unary + "(" + nel + ", " + x + ", " + y + extra + ");\n";
      }
      case Step::Binary: {
        const auto& q = s.bc;
        const std::string pp = params("BroadcastParams", "{" + std::to_string(q.rank) + ", " + ints(q.dims, 6) + ", " +
                                                             ints(q.a_str, 6) + ", " + ints(q.b_str, 6) + "}");
        const char* ops[] = {"kiln_micro::kAdd", "kiln_micro::kSub", "kiln_micro::kMul", "kiln_micro::kDiv"};
        std::string a, b;
        if (s.const_side == 0) {
          a = array(s.w), b = x;
        } else if (s.const_side == 1) {
          a = x, b = array(s.w);
        } else {
          a = x, b = ptr(s.in[1]);
        }
        return c + "kiln_micro::binary(" + ops[s.bop] + ", " + pp + ", " + a + ", " + b + ", " + y + ");\n";
      }
      case Step::Affine: {
        const std::string w = array(s.w), b = array(s.b);
        return c + "kiln_micro::channel_affine(" + std::to_string(s.outer) + ", " + std::to_string(s.len) + ", " +
               std::to_string(s.inner) + ", " + w + ", " + b + ", " + x + ", " + y + ");\n";
      }
      case Step::Softmax:
        return c + "kiln_micro::softmax(" + std::to_string(s.outer) + ", " + std::to_string(s.len) + ", " +
               std::to_string(s.inner) + ", " + x + ", " + y + ");\n";
      case Step::Reduce: {
        const char* ops[] = {"kiln_micro::kReduceMean", "kiln_micro::kReduceSum", "kiln_micro::kReduceMax"};
        return c + "kiln_micro::reduce(" + ops[s.rop] + ", " + std::to_string(s.outer) + ", " + std::to_string(s.len) +
               ", " + std::to_string(s.inner) + ", " + x + ", " + y + ");\n";
      }
      case Step::Permute: {
        const std::string pp = params("PermuteParams", "{" + std::to_string(s.perm.rank) + ", " + ints(s.perm.dims, 6) +
                                                           ", " + ints(s.perm.x_str, 6) + "}");
        const std::string from = s.x_off ? x + " + " + std::to_string(s.x_off) : x;
        return c + "kiln_micro::permute(" + pp + ", " + from + ", " + y + ");\n";
      }
      case Step::Concat: {
        std::string r = "  // " + s.what + " -> " + outs + "\n";
        for (const auto& part : s.parts) {
          const std::string src = part.in >= 0 ? ptr(s.in[part.in]) : array(part.data);
          r += "  kiln_micro::copy_rows(" + std::to_string(s.rows) + ", " + std::to_string(part.len) + ", " + src +
               ", " + std::to_string(part.len) + ", " + y + " + " + std::to_string(part.offset) + ", " +
               std::to_string(s.row_len) + ");\n";
        }
        return r;
      }
      case Step::ConvTranspose: {
        const auto& q = s.convt;
        const int32_t f[] = {q.n,  q.c_in, q.h,  q.w,  q.c_out, q.oh, q.ow, q.kh,
                             q.kw, q.sh,   q.sw, q.pt, q.pl,    q.dh, q.dw, q.groups};
        const std::string pp = params("ConvTranspose2dParams", ints(f, 16));
        const std::string w = array(s.w), b = s.b.empty() ? "nullptr" : array(s.b);
        return c + "kiln_micro::conv_transpose2d(" + pp + ", " + x + ", " + w + ", " + b + ", " + y + ");\n";
      }
      case Step::Resize: {
        const auto& q = s.resize;
        const int32_t f[] = {q.planes, q.h, q.w, q.oh, q.ow, q.linear};
        const std::string pp = params("Resize2dParams", ints(f, 6));
        std::string t[4];
        for (int i = 0; i < 4; ++i) t[i] = int_array(s.tables[i]);
        const std::string wy = array(s.w), wx = array(s.b);
        return c + "kiln_micro::resize2d(" + pp + ", " + t[0] + ", " + t[1] + ", " + wy + ", " + t[2] + ", " + t[3] +
               ", " + wx + ", " + x + ", " + y + ");\n";
      }
      case Step::Gather: {
        // in: the run-time indices (unless tables[0] holds constant ones), then the run-time data.
        const bool rt_idx = s.tables.empty();
        const std::string idx = rt_idx ? x : int_array(s.tables[0]);
        const size_t data_at = rt_idx ? 1 : 0;
        const std::string data = s.in.size() > data_at ? ptr(s.in[data_at]) : array(s.w);
        const std::string call = "kiln_micro::gather(" + std::to_string(s.outer) + ", " + std::to_string(s.len) + ", " +
                                 std::to_string(s.inner) + ", " + idx + ", " + std::to_string(s.batch) + ", " + data +
                                 ", " + y + ")";
        return c + (rt_idx ? "if (" + call + " != KILN_MICRO_OK) return KILN_MICRO_ERR_INDEX;\n" : call + ";\n");
      }
      case Step::CastInt:
        return c + "kiln_micro::cast(" + nel + ", " + x + ", " + y + ");\n";
      case Step::LayerNorm: {
        const std::string g = array(s.w), b = s.b.empty() ? "nullptr" : array(s.b);
        return c + "kiln_micro::layer_norm(" + std::to_string(s.outer) + ", " + std::to_string(s.len) + ", " +
               flit(s.alpha) + ", " + g + ", " + b + ", " + x + ", " + y + ");\n";
      }
      case Step::Lstm:
        return c.substr(0, c.size() - 2) + lstm_calls(s, x, y);
      case Step::Alias:
        break;
    }
    return "";
  }

  // One kiln_micro::lstm call per direction of step s (x: its input, y: its Y).
  std::string lstm_calls(const Step& s, const std::string& x, const std::string& y) {
    std::string r;
    const auto& q = s.lstm;
    const int64_t K = q.input + q.hidden, G = 4 * q.hidden;
    const std::string yh = ptr(s.more_out[0]), yc = ptr(s.more_out[1]), scratch = ptr(s.more_out[2]);
    auto part = [](const std::vector<float>& v, int64_t d, int64_t len) {
      return std::vector<float>(v.begin() + d * len, v.begin() + (d + 1) * len);
    };
    auto initial = [&](int in, const std::vector<float>& c) -> std::string {
      if (in >= 0) return ptr(s.in[in]);
      return c.empty() ? "nullptr" : array(c);
    };
    const std::string h0 = initial(s.h0_in, s.h0), c0 = initial(s.c0_in, s.c0);
    for (int32_t d = 0; d < q.num_dir; ++d) {
      const int32_t f[] = {q.seq, q.batch, q.input, q.hidden, q.num_dir, d, q.reverse || d == 1, q.layout};
      const std::string pp = params("LstmParams", ints(f, 8));
      const std::string w = array(part(s.w, d, K * G)), b = s.b.empty() ? "nullptr" : array(part(s.b, d, G));
      const std::string pc = s.peep.empty() ? "nullptr" : array(part(s.peep, d, 3 * q.hidden));
      r += "  kiln_micro::lstm(" + pp + ", " + x + ", " + w + ", " + b + ", " + pc + ", " + h0 + ", " + c0 + ", " + y +
           ", " + yh + ", " + yc + ", " + scratch + ");\n";
    }
    return r;
  }

  std::string outputs() {
    std::string r;
    for (size_t i = 0; i < m_.outputs.size(); ++i) {
      const std::string& v = m_.outputs[i];
      auto c = m_.const_outputs.find(v);
      const std::string src = c != m_.const_outputs.end() ? array(c->second) : ptr(v);
      r += "  __builtin_memcpy(outputs[" + std::to_string(i) + "], " + src + ", " +
           std::to_string(numel(m_.shape.at(v)) * 4) + ");\n";
    }
    return r;
  }

  const Lowered& m_;
  const Plan& p_;
  std::string name_, consts_;
  int n_consts_ = 0, n_params_ = 0;
  int64_t weight_bytes_ = 0;
  std::vector<std::string> plan_;
};

void write(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  KILN_CHECK(f.good(), "kiln-onnx micro", "cannot write '" << path.string() << "'");
}

std::string header_text(const Lowered& m, const Plan& p, const std::string& name) {
  std::string up;
  for (char ch : name) up += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  std::ostringstream s;
  s << "// Generated by kiln-onnx --target micro. Do not edit.\n#ifndef " << up << "_H\n#define " << up
    << "_H\n\n#include <stddef.h>\n\n#include \"kiln_micro.h\"\n\n";
  s << "#define " << up << "_NUM_INPUTS " << m.inputs.size() << "\n#define " << up << "_NUM_OUTPUTS "
    << m.outputs.size() << "\n#define " << up << "_ARENA_BYTES " << p.arena_bytes << "\n#define " << up
    << "_ARENA_LOWER_BOUND " << p.lower_bound << "\n\n";
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    auto t = m.int_type.find(m.inputs[i]);
    const char* type = t == m.int_type.end() ? "f32" : t->second == "int64_t" ? "int64" : "int32";
    s << "// input " << i << ": '" << m.inputs[i] << "' " << type << " " << shape_str(m.shape.at(m.inputs[i])) << "\n";
  }
  for (size_t i = 0; i < m.outputs.size(); ++i)
    s << "// output " << i << ": '" << m.outputs[i] << "' f32 " << shape_str(m.shape.at(m.outputs[i])) << "\n";
  s << "\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
    << "/// Element counts of the inputs and outputs, in the order above.\n"
    << "extern const size_t " << name << "_input_sizes[" << std::max<size_t>(1, m.inputs.size()) << "];\n"
    << "extern const size_t " << name << "_output_sizes[" << std::max<size_t>(1, m.outputs.size()) << "];\n\n"
    << "/// Runs the model: inputs[i] holds input_sizes[i] "
    << (int_inputs(m).empty() ? "floats" : "values of its type above") << " (dense, row-major), outputs[i]\n"
    << "/// receives output_sizes[i] floats. Returns KILN_MICRO_OK, KILN_MICRO_ERR_NULL for a null array or\n"
    << "/// buffer, KILN_MICRO_ERR_SIZE when a count differs from the model's"
    << (has_index_check(m) ? ", or KILN_MICRO_ERR_INDEX when an\n/// index input holds a value outside its table" : "")
    << "; no output is written then.\n/// Not reentrant (one static arena).\n"
    << "int " << name << "_run(" << input_param(m) << ", const size_t* input_sizes, float* const* outputs,\n"
    << "           const size_t* output_sizes);\n\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
  return s.str();
}

}  // namespace

void emit(const Lowered& m, const Plan& p, const MicroOptions& o, const std::string& name, MicroResult& r) {
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  KILN_CHECK(fs::is_directory(o.out_dir), "kiln-onnx micro", "cannot create the folder '" << o.out_dir << "'");
  Writer w(m, p, name);
  const std::string src = w.source(r.weight_bytes);
  const fs::path dir(o.out_dir);
  r.header = (dir / (name + ".h")).string();
  r.source = (dir / (name + ".cpp")).string();
  write(r.header, header_text(m, p, name));
  write(r.source, src);
  for (const auto& [file, text] :
       {std::pair{"kiln_micro.h", kKilnMicroH}, std::pair{"kiln_micro.cpp", kKilnMicroCpp}}) {
    r.kernels.push_back((dir / file).string());
    write(r.kernels.back(), text);
  }
  r.arena_bytes = p.arena_bytes;
  r.lower_bound_bytes = p.lower_bound;
  r.steps = static_cast<int64_t>(m.steps.size());
  r.plan = w.plan_lines();
}

}  // namespace kiln::onnx::micro
