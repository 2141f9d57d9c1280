// SPDX-License-Identifier: MIT OR Apache-2.0
#include "ops/dispatch.h"

#include <algorithm>

#include "autodiff/graph.h"
#include "core/checked.h"

namespace kiln::detail {

ir::TensorDesc desc_of(const Tensor& t) {
  const TensorImpl& i = t.impl();
  return ir::TensorDesc{i.shape, i.strides, i.offset, i.dtype, i.storage ? i.storage->stamp : 0};
}

Tensor wrap(const ir::TensorDesc& d, const Device& dev, std::shared_ptr<Storage> s) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = d.shape;
  impl->strides = d.strides;
  impl->offset = d.offset;
  impl->dtype = d.dtype;
  impl->device = dev;
  impl->storage = std::move(s);
  return Tensor(std::move(impl));
}

Tensor alloc(const Shape& shape, DType dtype, const Device& dev, const char* op) {
  if (!op) op = OpScope::current("empty");
  const size_t nbytes = checked_nbytes(shape, dtype, op);
  OpScope scope(op);  // names the op in an allocation failure (allocator.cpp)
  return wrap(ir::contiguous_desc(shape, dtype), dev, dev.backend()->allocate(nbytes));
}

Tensor make_view(const Tensor& t, Shape shape, Strides strides, int64_t offset, const char* op) {
  const Storage* s = t.impl().storage.get();
  check_view_in_storage(shape, strides, offset, t.dtype(), s ? s->nbytes : 0, op);
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = t.dtype();
  impl->device = t.device();
  impl->storage = t.impl().storage;
  return Tensor(std::move(impl));
}

void check_defined(const char* op, const Tensor& t) {
  KILN_CHECK(t.defined(), op, "expected a defined tensor, got an undefined one");
}

// Note [Mixed decorations]
// Autodiff and fusion are decorators of one base device (the CPU), so tensors on cpu,
// cpu+fusion and cpu+fusion+autodiff mix in one op, as a tensor that does not require grad
// mixes with one that does in PyTorch. The op runs on its first input's device, or on the
// autodiff form of the device of an input that requires grad when that one has none; every
// other input is brought to that device first (.to(): sharing the data across autodiff, a copy
// across fusion) and takes part as a constant. Two inputs that both require grad on differently
// fused devices, or inputs on different base devices, are an error that names the argument
// and the fix, and prints base devices only (no decorator the user did not ask for).
namespace {
// d.without_autodiff().without_fusion(), through core's with_layer: Device::without_fusion is
// the fusion library's, above this one.
Device base_of(const Device& d) { return with_layer(d.without_autodiff(), Layer::Fusion, nullptr); }
}  // namespace

bool same_base_device(const Device& a, const Device& b) { return a == b || base_of(a) == base_of(b); }

void check_same_device(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  if (a.device() == b.device() || same_base_device(a.device(), b.device())) return;
  KILN_CHECK(false, op,
             "expected all tensors on one device, but `"
                 << b_name << "` is on " << base_of(b.device()).str() << " and `" << a_name << "` is on "
                 << base_of(a.device()).str() << ": move it with " << b_name << ".to(" << a_name << ".device())");
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  check_same_device(op, a, "input", b, "other");
}

namespace {
// Note [Buffer reuse]: an elementwise op may write its output into an input's buffer when that
// input handle is the only owner of both its TensorImpl and its storage (an internal temporary,
// or a user temporary moved in through an rvalue overload), the input is contiguous from offset
// 0 and has the output's shape and dtype, and autodiff does not track it (it may be saved). Each output element then
// depends only on the input element at the same position, so reading and writing one buffer is safe.
template <class It>
std::shared_ptr<Storage> reusable_input(const ir::Op& op, It first, It last) {
  ir::Family f = ir::op_family(op.kind);
  if (op.outputs.size() != 1 || op.kind == ir::OpKind::Copy ||
      (f != ir::Family::Unary && f != ir::Family::Binary && f != ir::Family::Ternary))
    return nullptr;
  const ir::TensorDesc& o = op.outputs[0];
  // When the op is recorded and its rule saves its inputs, every input is kept for the backward
  // pass, also one that does not require grad (the constant of x * c): none may be overwritten.
  if (grad_enabled() && (autodiff::rule_for(op.kind).save & autodiff::kSaveInputs))
    for (It it = first; it != last; ++it)
      if (autodiff::requires_grad(*it)) return nullptr;
  size_t i = 0;
  for (It it = first; it != last; ++it, ++i) {
    const auto& impl = it->impl_ptr();
    const ir::TensorDesc& d = op.inputs[i];
    // A tensor that autodiff may save for the backward pass keeps its buffer.
    if (impl->autograd && impl->autograd->requires_grad && grad_enabled()) continue;
    if (impl.use_count() == 1 && impl->storage.use_count() == 1 && d.dtype == o.dtype && d.shape == o.shape &&
        d.offset == 0 && d.is_contiguous() &&
        impl->storage->nbytes >= static_cast<size_t>(o.numel()) * dtype_size(o.dtype))
      return impl->storage;
  }
  return nullptr;
}

/// Checks the inputs (defined, on dev), records their descriptors in op.inputs and returns
/// their buffers in order.
template <class It>
SmallVec<Storage*, 4> gather_inputs(const char* api, ir::Op& op, const Device& dev, It first, It last) {
  op.inputs.clear();
  op.inputs.reserve(static_cast<size_t>(std::distance(first, last)));
  SmallVec<Storage*, 4> in;
  for (It it = first; it != last; ++it) {
    check_defined(api, *it);
    KILN_ASSERT(it->device() == dev);  // mixed devices were brought to dev (adapt_inputs)
    op.inputs.push_back(desc_of(*it));
    in.push_back(it->impl().storage.get());
  }
  return in;
}

/// Whether every input is on dev (the common case: nothing to adapt).
template <class It>
bool all_on(const Device& dev, It first, It last) {
  for (It it = first; it != last; ++it)
    if (it->defined() && it->device() != dev) return false;
  return true;
}

/// Brings inputs on decorated forms of dev's base device to the device the op runs on, which it
/// returns (Note [Mixed decorations]); `fixed`: dev cannot change (the output of an in-place op).
template <class It>
Device adapt_inputs(const char* api, Device dev, It first, It last, bool fixed, std::vector<Tensor>& out) {
  size_t i = 0;
  for (It it = first; it != last; ++it, ++i) {
    check_defined(api, *it);
    KILN_CHECK(same_base_device(dev, it->device()), api,
               "expected all tensors on one device, but input " << i << " is on " << base_of(it->device()).str()
                                                                << " and the op runs on " << base_of(dev).str()
                                                                << ": move it with .to(device)");
  }
  if (!fixed && !dev.has_autodiff())
    for (It it = first; it != last; ++it)
      if (it->device().has_autodiff() && it->requires_grad()) {
        dev = it->device();
        break;
      }
  i = 0;
  for (It it = first; it != last; ++it, ++i) {
    KILN_CHECK(it->device() == dev || !it->requires_grad() || fixed, api,
               "input " << i << " requires grad on " << it->device().str() << " while the op runs on " << dev.str()
                        << ": tensors that require grad must share one device; move it with .to(device)");
    out.push_back(it->to(dev));
  }
  return dev;
}

template <class It, class Outs>
void run_impl_on(const char* api, ir::Op& op, const Device& dev, It first, It last, Outs& outs);

/// Runs op, appending its results to outs (a std::vector, or an InlineVec for one result).
template <class It, class Outs>
void run_impl(const char* api, ir::Op& op, const Device& dev, It first, It last, Outs& outs) {
  if (all_on(dev, first, last)) return run_impl_on(api, op, dev, first, last, outs);
  std::vector<Tensor> mixed;
  const Device d = adapt_inputs(api, dev, first, last, /*fixed=*/false, mixed);
  run_impl_on(api, op, d, mixed.cbegin(), mixed.cend(), outs);
}

template <class It, class Outs>
void run_impl_on(const char* api, ir::Op& op, const Device& dev, It first, It last, Outs& outs) {
  OpScope scope(api);
  SmallVec<Storage*, 4> in = gather_inputs(api, op, dev, first, last);
  ir::infer(op);
  outs.reserve(op.outputs.size());
  SmallVec<Storage*, 2> out;
  std::shared_ptr<Storage> reuse = reusable_input(op, first, last);
  for (auto& d : op.outputs) {
    if (reuse) {
      reuse->stamp = next_stamp();  // new contents (the op's input descriptor keeps the old stamp)
      outs.push_back(wrap(d, dev, std::move(reuse)));
      reuse.reset();
    } else {
      outs.push_back(alloc(d.shape, d.dtype, dev));
    }
    out.push_back(outs.back().impl().storage.get());
    d.stamp = out.back()->stamp;  // the stamp of what the op writes (TensorDesc::stamp)
  }
  bool any_elements = false;
  for (auto& d : op.outputs) any_elements |= d.numel() > 0;
  if (any_elements) execute_op(dev.backend(), op, in.data(), out.data());
  if (dev.backend()->autodiff_options())
    autodiff::record(op, dev, &*first, static_cast<size_t>(std::distance(first, last)),
                     std::span<Tensor>(outs.data(), outs.size()));
}
}  // namespace

std::vector<Tensor> run(const char* api, ir::Op& op, const Device& dev, std::initializer_list<Tensor> inputs) {
  std::vector<Tensor> outs;
  run_impl(api, op, dev, inputs.begin(), inputs.end(), outs);
  return outs;
}
std::vector<Tensor> run(const char* api, ir::Op& op, const Device& dev, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outs;
  run_impl(api, op, dev, inputs.begin(), inputs.end(), outs);
  return outs;
}

Tensor run1(const char* api, ir::Op& op, std::initializer_list<Tensor> inputs) {
  KILN_ASSERT(inputs.size() > 0);
  check_defined(api, *inputs.begin());
  InlineVec<Tensor, 1> outs;
  run_impl(api, op, inputs.begin()->device(), inputs.begin(), inputs.end(), outs);
  return std::move(outs[0]);
}

void run_prepared(const char* api, ir::Op& op, const Device& dev, Storage* const* inputs,
                  std::shared_ptr<Storage>* outs) {
  KILN_ASSERT(!dev.backend()->autodiff_options());
  OpScope scope(api);  // names the op in an allocation failure, as run() does
  for (size_t i = 0; i < op.inputs.size(); ++i) op.inputs[i].stamp = inputs[i]->stamp;
  SmallVec<Storage*, 2> out;
  bool any_elements = false;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    ir::TensorDesc& d = op.outputs[i];
    outs[i] = dev.backend()->allocate(checked_nbytes(d.shape, d.dtype, api));
    d.stamp = outs[i]->stamp;
    out.push_back(outs[i].get());
    any_elements |= d.numel() > 0;
  }
  if (any_elements) execute_op(dev.backend(), op, inputs, out.data());
}

namespace {
/// run_into once every input is on out's device.
void run_into_on(const char* api, ir::Op& op, const Tensor* inputs, size_t nin, const Tensor& out) {
  const Device dev = out.device();
  SmallVec<Storage*, 4> in = gather_inputs(api, op, dev, inputs, inputs + nin);
  op.outputs = {desc_of(out)};
  op.outputs[0].stamp = 0;  // the write renews out's stamp (bump_version): not known here
  const bool ad = dev.backend()->autodiff_options() != nullptr;
  // Refuses unrecordable writes before any data changes; keeps inputs aliasing out that the rule saves.
  std::vector<Tensor> recorded = ad ? autodiff::prepare_inplace(op.kind, inputs, nin, out) : std::vector<Tensor>{};
  Storage* o = out.impl().storage.get();
  if (out.numel() > 0) execute_op(dev.backend(), op, in.data(), &o);
  if (ad)
    autodiff::record_inplace(op, dev, recorded.empty() ? inputs : recorded.data(), nin, out);
  else
    autodiff::bump_version(out);
}
}  // namespace

void run_into(const char* api, ir::Op& op, std::initializer_list<Tensor> inputs, const Tensor& out) {
  check_defined(api, out);
  // An expanded output (stride 0 over a size > 1) would be written, and read back, once per
  // copy of each element: PyTorch refuses it too.
  for (int64_t i = 0; i < out.dim(); ++i)
    KILN_CHECK(out.strides()[i] != 0 || out.shape()[i] <= 1, api,
               "unsupported operation: more than one element of the written-to tensor (shape "
                   << out.shape() << ", strides " << to_string(out.strides())
                   << ") refers to a single memory location; clone() it before writing");
  const Device dev = out.device();
  if (!all_on(dev, inputs.begin(), inputs.end())) {
    std::vector<Tensor> mixed;
    adapt_inputs(api, dev, inputs.begin(), inputs.end(), /*fixed=*/true, mixed);
    return run_into_on(api, op, mixed.data(), mixed.size(), out);
  }
  run_into_on(api, op, inputs.begin(), inputs.size(), out);
}

ir::Op make_op(ir::OpKind kind, std::initializer_list<int64_t> ints, std::initializer_list<double> reals, DType dtype) {
  ir::Op op;
  op.kind = kind;
  op.attrs.ints.assign(ints.begin(), ints.end());
  op.attrs.reals.assign(reals.begin(), reals.end());
  op.attrs.dtype = dtype;
  return op;
}

Tensor cast_if_needed(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : cast(t, dtype); }

DType result_type(const Tensor& t, Scalar s) {
  DType td = t.dtype();
  if (s.is_floating() && !is_floating(td)) return kDefaultFloat;
  if (s.is_integral() && td == DType::Bool) return DType::I64;
  return td;
}

namespace {
int category(DType t) { return t == DType::Bool ? 0 : is_floating(t) ? 2 : 1; }
}  // namespace

DType result_type(const Tensor& a, const Tensor& b, const char* op) {
  // Dimensioned tensors win over 0-d ones of the same or lower category (PyTorch rule).
  bool a0 = a.dim() == 0, b0 = b.dim() == 0;
  if (a0 != b0) {
    const Tensor& dimd = a0 ? b : a;
    const Tensor& zd = a0 ? a : b;
    if (category(zd.dtype()) <= category(dimd.dtype())) return dimd.dtype();
    return zd.dtype();
  }
  KILN_CHECK(!promotion_refused(a.dtype(), b.dtype()), op,
             "no dtype holds both " << dtype_name(a.dtype()).data() << a.shape() << " and "
                                    << dtype_name(b.dtype()).data() << b.shape()
                                    << " (u64 with a signed integer type): cast one of them explicitly");
  return promote_types(a.dtype(), b.dtype());
}

Dims normalize_dims(const char* op, const Dims& dims, int64_t rank) {
  Dims out;
  if (dims.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (auto d : dims) out.push_back(wrap_dim(d, rank, op));
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    KILN_CHECK(out[i] != out[i - 1], op, "dim " << out[i] << " appears more than once in the list");
  if (rank == 0) out.clear();
  return out;
}

}  // namespace kiln::detail
