// SPDX-License-Identifier: MIT OR Apache-2.0
// The capture device: a null device that keeps the bytes written to it from the host and, while
// a Recording lives, records every op it is asked to run with the values it reads and writes.
//
// Note [Capture values]: a value is the contents of one buffer between two writes. Each buffer
// (Buf, the storage's handle) remembers the value it holds in the current recording (the epoch
// tells recordings apart: a cached scalar constant outlives them) and, when its contents came
// from the host, their bytes, so that a constant made inside the function keeps its data. An op
// must write a whole buffer (in-place writes into a view are refused); a read of a computed
// value throws, naming the op that computed it.
//
// Note [Capture folding]: an op whose inputs are all constants (bytes from the host that are not
// a graph input or parameter: the shape tensors of an imported ONNX model, tensor({...}) in the
// function) is computed on the CPU instead of recorded, and its outputs are constants too. So
// shape arithmetic whose result the program reads back (an ONNX Reshape reading the target shape
// it computed from Shape, Gather and Concat) captures, and the graph keeps only the ops that
// depend on the inputs and parameters. Random ops and creation ops (no inputs) are recorded.
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "capture/recorder.h"
#include "core/checked.h"
#include "ir/op.h"
#include "kiln/error.h"

namespace kiln {
namespace capture_detail {
namespace {

struct Buf {
  uint64_t epoch = 0;  ///< the recording that `value` belongs to (0: none)
  int64_t value = -1;
  bool host = false;  ///< the contents are `bytes`, written from the host
  std::vector<uint8_t> bytes;
  std::string origin;  ///< the op that computed the contents (Cast and Copy pass theirs on)
};

std::mutex g_capture_mu;  // one recording at a time
Recording* g_active = nullptr;
uint64_t g_epoch = 0;

Buf& buf_of(const Storage& s) { return *static_cast<Buf*>(s.data); }

bool covers(const ir::TensorDesc& d, const Storage& s) {
  return d.offset == 0 && d.is_contiguous() && static_cast<size_t>(d.numel()) * dtype_size(d.dtype) == s.nbytes;
}

class CaptureBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::Null; }
  std::string name() const override { return "capture"; }
  std::shared_ptr<Storage> allocate(size_t nbytes) override {
    stats_.allocations++;
    return std::make_shared<Storage>(new Buf, nbytes, this);
  }
  void release(void* data, size_t) noexcept override { delete static_cast<Buf*>(data); }
  bool supports(const ir::Op&) override { return true; }
  void execute(const ir::Op& op, Storage* const* in, Storage* const* out) override;
  /// Computes op on the CPU when all its inputs are constants (Note [Capture folding]).
  bool fold(const ir::Op& op, Storage* const* in, Storage* const* out);
  void write(Storage& dst, size_t off, const void* src, size_t n) override {
    Buf& b = buf_of(dst);
    if (!b.host) b.bytes.assign(dst.nbytes, 0);
    b.bytes.resize(dst.nbytes);
    if (n) std::memcpy(b.bytes.data() + off, src, n);
    b.host = true;
    b.value = -1;
    b.origin.clear();
  }
  void read(const Storage& src, size_t off, void* dst, size_t n) override {
    const Buf& b = buf_of(src);
    KILN_CHECK(b.host, detail::OpScope::current("capture"),
               "a captured graph cannot depend on values read on the host: the value read was computed by "
                   << (b.origin.empty() ? std::string("no op (uninitialised memory)") : b.origin)
                   << "; compute with tensors instead of reading them (e.g. kiln::where in place of an if)");
    if (n) std::memcpy(dst, b.bytes.data() + off, n);
  }
  MemoryStats memory_stats() const override { return stats_; }

 private:
  MemoryStats stats_;
};

/// Whether b holds a value of the current recording that is a graph input or parameter.
bool is_input_or_param(const Buf& b) {
  if (!g_active || b.epoch != g_epoch || b.value < 0) return false;
  const CapturedValue::Kind k = g_active->graph().values[static_cast<size_t>(b.value)].kind;
  return k == CapturedValue::Kind::Input || k == CapturedValue::Kind::Param;
}

bool CaptureBackend::fold(const ir::Op& op, Storage* const* in, Storage* const* out) {
  if (!g_active || op.inputs.empty() || op.kind == ir::OpKind::Bernoulli) return false;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const Buf& b = buf_of(*in[i]);
    if (!b.host || is_input_or_param(b)) return false;
  }
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const Buf& b = buf_of(*out[i]);
    // A partial write needs the rest of the buffer: only into host bytes.
    if (is_input_or_param(b) || (!b.host && !covers(op.outputs[i], *out[i]))) return false;
  }
  // One CPU buffer per capture buffer (an op may read one twice, or write what it reads).
  Backend* cpu = cpu_backend();
  std::vector<std::pair<Storage*, std::shared_ptr<Storage>>> bufs;
  auto cpu_of = [&](Storage* s) {
    for (auto& [k, c] : bufs)
      if (k == s) return c.get();
    std::shared_ptr<Storage> c = cpu->allocate(s->nbytes);
    const Buf& b = buf_of(*s);
    if (b.host && s->nbytes) cpu->write(*c, 0, b.bytes.data(), s->nbytes);
    bufs.emplace_back(s, c);
    return c.get();
  };
  std::vector<Storage*> ci, co;
  for (size_t i = 0; i < op.inputs.size(); ++i) ci.push_back(cpu_of(in[i]));
  for (size_t i = 0; i < op.outputs.size(); ++i) co.push_back(cpu_of(out[i]));
  execute_op(cpu, op, ci.data(), co.data());
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    Buf& b = buf_of(*out[i]);
    b.bytes.assign(out[i]->nbytes, 0);
    if (out[i]->nbytes) cpu->read(*co[i], 0, b.bytes.data(), out[i]->nbytes);
    b.host = true;
    b.value = -1;
    b.origin.clear();
  }
  return true;
}

void CaptureBackend::execute(const ir::Op& op, Storage* const* in, Storage* const* out) {
  if (fold(op, in, out)) return;
  const std::string name(ir::op_name(op.kind));
  CapturedNode node;
  if (g_active) {
    for (size_t i = 0; i < op.inputs.size(); ++i)
      node.inputs.push_back(g_active->use(*in[i], op.inputs[i], name.c_str()).value);
  }
  const bool passes = (op.kind == ir::OpKind::Cast || op.kind == ir::OpKind::Copy) && !op.inputs.empty();
  const std::string origin = passes && !buf_of(*in[0]).origin.empty() ? buf_of(*in[0]).origin : name;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    Buf& b = buf_of(*out[i]);
    if (g_active) {
      const ir::TensorDesc& d = op.outputs[i];
      KILN_CHECK(covers(d, *out[i]) || d.numel() == 0, name,
                 "writes into part of a tensor (an in-place write into a view, shape "
                     << d.shape << " at offset " << d.offset
                     << "), which a captured graph cannot express; build the tensor with cat or where instead");
      CapturedGraph& g = g_active->graph();
      CapturedValue v;
      v.shape = d.shape;
      v.dtype = d.dtype;
      v.op = static_cast<int64_t>(g.nodes.size());
      b.value = static_cast<int64_t>(g.values.size());
      b.epoch = g_epoch;
      g.values.push_back(std::move(v));
      node.outputs.push_back(b.value);
    }
    b.host = false;
    b.bytes.clear();
    b.origin = origin;
  }
  if (g_active) {
    node.op = std::make_shared<const ir::Op>(op);
    g_active->graph().nodes.push_back(std::move(node));
  }
}

}  // namespace

Backend* backend() {
  static CaptureBackend* b = new CaptureBackend();  // never destroyed, like the CPU backend
  return b;
}

Recording::Recording() {
  g_capture_mu.lock();
  ++g_epoch;
  g_active = this;
}

Recording::~Recording() {
  g_active = nullptr;
  g_capture_mu.unlock();
}

int64_t Recording::mark(Storage& s, CapturedValue::Kind kind, const std::string& name, const Shape& shape,
                        DType dtype) {
  Buf& b = buf_of(s);
  CapturedValue v;
  v.kind = kind;
  v.name = name;
  v.shape = shape;
  v.dtype = dtype;
  if (kind == CapturedValue::Kind::Param) v.bytes = b.bytes;
  b.value = static_cast<int64_t>(graph_.values.size());
  b.epoch = g_epoch;
  graph_.values.push_back(std::move(v));
  (kind == CapturedValue::Kind::Param ? graph_.params : graph_.inputs).push_back(b.value);
  return b.value;
}

CapturedUse Recording::use(Storage& s, const ir::TensorDesc& d, const char* op) {
  KILN_CHECK(s.backend == backend(), op, "an input is not on the capture device");
  Buf& b = buf_of(s);
  if (b.epoch != g_epoch || b.value < 0) {
    KILN_CHECK(b.host, op,
               "reads a tensor computed outside the captured function (by "
                   << (b.origin.empty() ? std::string("no op: uninitialised memory") : b.origin)
                   << "); pass it as an input or compute it inside the function");
    CapturedValue v;
    v.kind = CapturedValue::Kind::Constant;
    v.dtype = d.dtype;
    v.shape = {static_cast<int64_t>(s.nbytes / dtype_size(d.dtype))};
    v.bytes = b.bytes;
    b.value = static_cast<int64_t>(graph_.values.size());
    b.epoch = g_epoch;
    graph_.values.push_back(std::move(v));
  }
  return CapturedUse{b.value, d.shape, d.strides, d.offset, d.dtype};
}

}  // namespace capture_detail

Backend* capture_backend() { return capture_detail::backend(); }

}  // namespace kiln
