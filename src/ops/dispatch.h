// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Internal helpers shared by the op family files: build an Op from tensors, infer, allocate,
// execute on the inputs' device.
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "ir/op.h"
#include "kiln/ops.h"
#include "kiln/tensor.h"

namespace kiln::detail {

/// The descriptor of a tensor's view.
ir::TensorDesc desc_of(const Tensor& t);
/// A new tensor handle for descriptor d over storage s.
Tensor wrap(const ir::TensorDesc& d, const Device& dev, std::shared_ptr<Storage> s);
/// A fresh contiguous tensor (uninitialised data). Throws kiln::Error("[op] ...") for a negative
/// size, an invalid dtype, a byte count past int64 or a failed allocation; op defaults to the
/// op being run on this thread (OpScope), else "empty".
Tensor alloc(const Shape& shape, DType dtype, const Device& dev, const char* op = nullptr);
/// A 0-d tensor of s as dtype on dev for an op's input, shared with other calls (Note [Scalar
/// constants] in creation.cpp): never hand it to user code or write into it.
Tensor scalar_constant(Scalar s, DType dtype, const Device& dev);
/// A view of t with new shape/strides/offset sharing its storage. Throws kiln::Error("[op] ...")
/// unless every element the view can reach (nearest and furthest, for strides of any sign) lies
/// inside t's storage (see check_view_in_storage in core/checked.h).
Tensor make_view(const Tensor& t, Shape shape, Strides strides, int64_t offset, const char* op = "view");

/// Throws kiln::Error naming op unless a and b can take part in one op: the same device, or
/// decorated forms of one base device (Note [Mixed decorations] in dispatch.cpp).
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
/// The same, naming the arguments in the error: "[index_select] expected all tensors on one
/// device, but `index` is on null and `input` is on cpu: move it with index.to(input.device())".
void check_same_device(const char* op, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name);
/// Whether tensors on a and b mix in one op: the same device once autodiff and fusion are removed.
bool same_base_device(const Device& a, const Device& b);
/// Throws "[op] expected a defined tensor" for an undefined handle.
void check_defined(const char* op, const Tensor& t);

/// Runs op with the given inputs on `dev` (inputs must live there). Fills op.inputs, infers
/// op.outputs, allocates them and executes. `api` names the user-facing op for errors.
std::vector<Tensor> run(const char* api, ir::Op& op, const Device& dev, std::initializer_list<Tensor> inputs);
std::vector<Tensor> run(const char* api, ir::Op& op, const Device& dev, const std::vector<Tensor>& inputs);
/// The same with one output, device taken from the first input.
Tensor run1(const char* api, ir::Op& op, std::initializer_list<Tensor> inputs);
/// Executes op writing into `out` (any view); inputs must already match op's needs.
void run_into(const char* api, ir::Op& op, std::initializer_list<Tensor> inputs, const Tensor& out);
/// What run() does after shape inference, for a caller that built and inferred op once and runs
/// it again over new buffers with the same layouts (the ONNX run-time plan's prepared steps,
/// Note [Prepared steps] in ops/prepared.h): inputs[i] holds the data op.inputs[i] describes
/// (its stamp is refreshed here); the outputs are allocated as op.outputs describe (contiguous,
/// their stamps set) into outs[i], then op executes on dev. The caller stands for what run()
/// checks: op came from ir::infer over these layouts and dtypes, every input lives on dev, and
/// dev records no autodiff (nothing is recorded here).
void run_prepared(const char* api, ir::Op& op, const Device& dev, Storage* const* inputs,
                  std::shared_ptr<Storage>* outs);

/// Shorthand to build an op: make_op(OpKind::Sum, {ints}, {reals}, dtype).
ir::Op make_op(ir::OpKind kind, std::initializer_list<int64_t> ints = {}, std::initializer_list<double> reals = {},
               DType dtype = DType::F32);

/// Converts t to dtype unless it already has it (no copy then).
Tensor cast_if_needed(const Tensor& t, DType dtype);
/// The result dtype of combining a tensor with a scalar (PyTorch's category rule).
DType result_type(const Tensor& t, Scalar s);
/// The result dtype of combining two tensors (0-d tensors count less, as in PyTorch); a
/// kiln::Error naming op and both shapes where no dtype holds both (u64 with a signed type).
DType result_type(const Tensor& a, const Tensor& b, const char* op = "promote_types");
/// Wraps a normalised list of dims (sorted, unique); empty input -> all dims.
Dims normalize_dims(const char* op, const Dims& dims, int64_t rank);

}  // namespace kiln::detail
