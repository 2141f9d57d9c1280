// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::capture: runs a function on the capture device under a Recording and returns its graph.
#include <map>
#include <sstream>

#include "capture/recorder.h"
#include "ir/op.h"
#include "kiln/error.h"
#include "kiln/nn/module.h"

namespace kiln {
namespace {

/// The tensor fields of a module with their state-dict names (parameters, then buffers in
/// field order, as visited).
class FieldCollector final : public nn::Visitor {
 public:
  struct Field {
    std::string name;
    Tensor* tensor;
  };
  std::vector<Field> fields;
  void tensor(std::string_view name, Tensor& t, bool) override {
    if (t.defined()) fields.push_back({prefix_ + std::string(name), &t});
  }
  bool enter(std::string_view name, nn::Module&) override {
    stack_.push_back(prefix_);
    if (!name.empty()) prefix_ += std::string(name) + ".";
    return true;
  }
  void leave(std::string_view, nn::Module&) override {
    prefix_ = stack_.back();
    stack_.pop_back();
  }

 private:
  std::string prefix_;
  std::vector<std::string> stack_;
};

std::string default_name(const char* base, size_t i, size_t n) { return n == 1 ? base : base + std::to_string(i); }

/// Runs fn on the capture device under rec: marks the inputs, takes the outputs.
CapturedGraph run_captured(capture_detail::Recording& rec, const CaptureFunction& fn,
                           const std::vector<Tensor>& example_inputs, const CaptureOptions& o) {
  const Device dev = capture_device();
  std::vector<Tensor> ins;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    const Tensor& x = example_inputs[i];
    KILN_CHECK(x.defined(), "capture", "example input " << i << " is undefined");
    Tensor c = x.device() == dev ? x.clone() : x.detach().to(dev);
    const std::string name =
        i < o.input_names.size() ? o.input_names[i] : default_name("input", i, example_inputs.size());
    rec.mark(*c.impl().storage, CapturedValue::Kind::Input, name, c.shape(), c.dtype());
    ins.push_back(c);
  }
  std::vector<Tensor> outs = fn(ins);
  CapturedGraph& g = rec.graph();
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& t = outs[i];
    KILN_CHECK(t.defined() && t.device().without_autodiff() == dev, "capture",
               "output " << i << " is " << (t.defined() ? "on " + t.device().str() : std::string("undefined"))
                         << ", not a tensor computed on the capture device");
    ir::TensorDesc d{t.shape(), t.strides(), t.storage_offset(), t.dtype()};
    g.outputs.push_back(rec.use(*t.impl().storage, d, "capture"));
    g.output_names.push_back(i < o.output_names.size() ? o.output_names[i] : default_name("output", i, outs.size()));
  }
  return std::move(g);
}

}  // namespace

Device capture_device() { return Device(capture_detail::backend()); }

CapturedGraph capture(const CaptureFunction& fn, const std::vector<Tensor>& example_inputs, const CaptureOptions& o) {
  capture_detail::Recording rec;
  return run_captured(rec, fn, example_inputs, o);
}

CapturedGraph capture(nn::Module& module, const CaptureFunction& fn, const std::vector<Tensor>& example_inputs,
                      const CaptureOptions& o) {
  FieldCollector c;
  c.enter("", module);
  module.visit(c);
  c.leave("", module);
  std::vector<Tensor> saved;
  for (auto& f : c.fields) saved.push_back(*f.tensor);
  auto restore = [&] {
    for (size_t i = 0; i < saved.size(); ++i) *c.fields[i].tensor = saved[i];
  };
  capture_detail::Recording rec;
  try {
    const Device dev = capture_device();
    std::map<const TensorImpl*, Tensor> moved;  // a tensor shared by two fields is one parameter
    for (size_t i = 0; i < saved.size(); ++i) {
      auto [it, fresh] = moved.try_emplace(&saved[i].impl());
      if (fresh) {
        it->second = saved[i].detach().to(dev);
        rec.mark(*it->second.impl().storage, CapturedValue::Kind::Param, c.fields[i].name, saved[i].shape(),
                 saved[i].dtype());
      }
      *c.fields[i].tensor = it->second;
    }
    CapturedGraph g = run_captured(rec, fn, example_inputs, o);
    restore();
    return g;
  } catch (...) {
    restore();
    throw;
  }
}

std::vector<std::string> CapturedGraph::op_names() const {
  std::vector<std::string> names;
  for (const CapturedNode& n : nodes) names.emplace_back(ir::op_name(n.op->kind));
  return names;
}

std::string CapturedGraph::str() const {
  std::ostringstream os;
  auto name = [&](int64_t v) {
    const CapturedValue& x = values[static_cast<size_t>(v)];
    return x.name.empty() ? "%" + std::to_string(v) : x.name;
  };
  for (const CapturedNode& n : nodes) {
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << name(n.outputs[i]);
    os << " = " << ir::op_name(n.op->kind) << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ir::TensorDesc& d = n.op->inputs[i];
      os << (i ? ", " : "") << name(n.inputs[i]) << to_string(d.shape);
      if (!d.is_contiguous() || d.offset) os << " strides " << to_string(d.strides) << " offset " << d.offset;
    }
    os << ")";
    if (!n.outputs.empty()) os << " " << to_string(values[static_cast<size_t>(n.outputs[0])].shape);
    os << "\n";
  }
  os << "return";
  for (size_t i = 0; i < outputs.size(); ++i)
    os << (i ? ", " : " ") << name(outputs[i].value) << to_string(outputs[i].shape);
  os << "\n";
  return os.str();
}

}  // namespace kiln
