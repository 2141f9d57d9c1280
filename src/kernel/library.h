// SPDX-License-Identifier: MIT OR Apache-2.0
// The kernel library: Kiln's primitive ops (src/ir/ops.def) as kernels of the kernel language,
// written once for every GPU backend (Vulkan today; WebGPU and CUDA render the same kernels).
// Nothing here knows a device API: a backend binds the buffers in the order a kernel declares
// them and fills the parameter block each entry documents (docs/kernels.md, The library).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kiln/kernel.h"

namespace kiln::kernel::lib {

/// How an operand's elements are stored. B8: one byte per element (bool), packed four to a
/// u32 word: loads extract the byte, stores replace it with two atomics on its word (so any
/// layout works and neighbours written by other threads are kept). X64 and U8: 8-byte words
/// and bytes moved as their bits (copies of f64, i64, i8, u8, bool). F64: doubles with
/// arithmetic (kernels that use it need a device with f64; WGSL has none). I8, I16, U16, F16,
/// BF16: 1- and 2-byte elements packed in u32 words like B8 (U16 moves bits; I8 and I16 load
/// as I32, F16 and BF16 as F32, converted with round-to-nearest-even as the CPU does).
enum class Store : uint8_t { F32, I32, I64, B8, X64, U8, F64, I8, I16, U16, F16, BF16, U32 };
/// "f32", "u8", ...: a storage's name in kernel names.
const char* store_name(Store s);
/// Whether s packs elements of 1 or 2 bytes into u32 words.
constexpr bool packed(Store s) {
  return s == Store::B8 || s == Store::U8 || s == Store::I8 || s == Store::I16 || s == Store::U16 || s == Store::F16 ||
         s == Store::BF16;
}
/// The value type of an element of s (B8: Bool, U8, U16 and U32: U32).
Type value_type(Store s);

/// The storage of dtype t, if the library has one (`copy`: moving bits, any 1-, 4- or 8-byte
/// dtype).
std::optional<Store> storage_of(DType t, bool copy);
/// The storage of dtype t for kernels that compute with its values: f32, f64, f16, bf16, i32,
/// i64 and bool (the 1- and 2-byte integers have storage for copies and casts only).
std::optional<Store> value_storage_of(DType t);

constexpr int kMaxRank = 8;
constexpr int kMaxOperands = 4;  ///< the output and up to three inputs
constexpr int kMaxReals = 6;     ///< attributes of an elementwise op (push constants)

/// The parameter block (int32, one buffer) of an elementwise kernel: rank, element count, an
/// element offset per operand (output first), the output shape, then the strides of each
/// operand over the output's dims (0 where it broadcasts).
enum : int {
  kRank = 0,
  kCount = 1,
  kOffsets = 2,
  kShape = kOffsets + kMaxOperands,
  kStrides = kShape + kMaxRank,
  kMetaInts = kStrides + kMaxOperands * kMaxRank
};

/// One elementwise op on one set of dtypes: out = fn(inputs..., reals...). Its kernel's
/// buffers: out, in0.., meta (kMetaInts int32); push constants: `reals` f32 values, then for
/// creation ops a value of the output's type when `fill`.
struct Elementwise {
  std::string name;              ///< the kernel's name (unique per function and storages)
  std::string tag;               ///< added to the name where attributes change the function
  std::vector<Store> inputs;     ///< storage of each input
  Store output = Store::F32;     ///< storage of the output
  int reals = 0;                 ///< push constants of real_type (op attributes)
  Type real_type = Type::F32;    ///< F64 for ops on f64
  std::vector<Type> real_types;  ///< when set: the type of each real (else all real_type)
  bool with_index = false;       ///< in[inputs.size()] is the element's index (I32), as for Arange
  bool needs_f64 = false;        ///< computes in f64 (the device must have it) whatever the dtypes
  std::vector<Arg> push;         ///< this op's push constants, in declaration order
  /// The output value from the loaded inputs (B8 loads as Bool, X64 as I64) and the reals (a
  /// fill's value follows them).
  std::function<Val(const Val* in, const Val* reals)> fn;
};

/// RandUniform (f32) as an elementwise op over the element's index: the CPU's Philox words and
/// conversions, so the same seed gives the same numbers on every device; RandNormal (f32) the
/// same words through Box-Muller, within a few ulps of the CPU's numbers.
std::optional<Elementwise> random_of(const kiln::ir::Op& op);
/// Bernoulli (f32, f64, f16, bf16) as the CPU's draws; p's values must be checked to lie in
/// [0, 1] first (Launch::check_unit_interval).
std::optional<Elementwise> bernoulli_of(const kiln::ir::Op& op);

/// The elementwise kernel of op (unary, binary, ternary, cast, copy and fill ops over the
/// storages above), or nothing when the library has none for it.
/// float64 false: a device without f64, where the f32 functions that compute through f64 take
/// their F32-only forms (unary_nof64; the kernel's name ends in "_nof64").
std::optional<Elementwise> elementwise_of(const kiln::ir::Op& op, bool float64 = true);
/// Declares push constant `name` for real r of spec, of its type (real_types, else real_type).
Val real_of(Builder& b, const Elementwise& spec, int r, const std::string& name);
/// Traces spec's kernel (256 threads a group; groups over x and y, see elementwise_groups).
Kernel trace_elementwise(const Elementwise& spec, const Limits& limits);
/// Fills the parameter block of an elementwise op. False when an index leaves int32.
bool elementwise_meta(const kiln::ir::Op& op, int32_t* meta);
/// Groups of an elementwise dispatch over n elements (x at most 65535).
std::array<uint32_t, 3> elementwise_groups(int64_t n);

/// body(args) as a call of a kernel function (kiln::kernel::Function) named `name` with the
/// argument types appended, made at the first such call and kept for the process: a kernel
/// records one call op, and each target's source holds the function once. The math below is
/// called this way; `body` must give the same function for the same name.
Val call_library(std::string name, const std::vector<Val>& args,
                 const std::function<Val(const std::vector<Val>&)>& body);
/// The same for a function with a fast form (kiln::kernel::Function's guard and fast bodies).
Val call_library(std::string name, const std::vector<Val>& args, const Function::Body& body,
                 const Function::Body& guard, const Function::Body& fast);

/// exp and sigmoid of an F32 value in the CPU's polynomial forms (library/math.cpp). These and
/// the other math functions below are kernel functions (call_library).
Val exp_f32(Val x);
Val sigmoid_f32(Val x);
Val tanh_f32(Val x);
Val log_f32(Val x);
/// erf of an F32 value as the CPU's rational form. With exact_subnormals, a subnormal x gives
/// the CPU's bits through f64 (the device needs f64); without, the rational form's own f32
/// arithmetic, which a device that flushes subnormals may return as 0 (no f64: WGSL).
Val erf_f32(Val x, bool exact_subnormals = true);
/// exp of an F64 value (about 1 ulp).
Val exp_f64(Val x);
/// log of an F64 value (about 1 ulp).
Val log_f64(Val x);
/// Exp2, Expm1, Log2, Log10, Log1p, Sinh, Cosh, Asinh, Acosh or Atanh of an F32 value, computed
/// in f64 and rounded (the device needs f64): within 1 ulp.
Val via_f64(kiln::ir::OpKind kind, Val x);

/// pow of F32 values through f64 (the device needs f64), and of I32 or I64 values (wrapping),
/// as the CPU's (library/math.cpp).
Val pow_f32(Val x, Val y);
/// x^y of F32 values in F32 arithmetic only (a double-F32 log2; no f64, for WGSL): within the
/// CPU's 4 ulps, IEEE pow's special cases.
Val pow_f32_nof64(Val x, Val y);
Val pow_int(Val x, Val y);

/// sin, cos or tan (kind) of an F32 value through f64 over the whole range (the device needs
/// f64): within 1 ulp of the correctly rounded value.
Val trig_f32(kiln::ir::OpKind kind, Val x);
/// sin (cosine false) or cos of an F32 value in F32 and integer arithmetic only (a Payne-Hanek
/// reduction over the whole F32 range; no f64, for WGSL): within the CPU's 4 ulps.
Val sin_cos_f32(bool cosine, Val x);
/// asin, acos or atan (kind) of an F32 value, and atan2(y, x), through f64 (the device needs
/// it): within 1 ulp of the correctly rounded value.
Val inverse_trig_f32(kiln::ir::OpKind kind, Val x);
Val atan2_f32(Val y, Val x);
/// erfinv of an F32 value as the CPU's, through f64 (the device needs f64).
Val erfinv_f32(Val y);
/// fmod, Python's remainder and floor division of F32 values as the CPU's (fmod exact; the
/// device needs f64).
Val fmod_f32(Val x, Val y);
Val remainder_f32(Val x, Val y);
Val floor_div_f32(Val x, Val y);

/// F32-only forms (library/math_nof64.cpp) of the functions above that use f64, for devices
/// without it (WGSL): within a few ulps, IEEE special values as the CPU. unary_nof64 covers
/// Sin, Cos, Tan, Exp2, Expm1, Log2, Log10, Log1p, Sinh, Cosh, Asinh, Acosh, Atanh, Atan, Asin,
/// Acos and Erf.
Val unary_nof64(kiln::ir::OpKind kind, Val x);
Val log1p_nof64(Val x);
Val expm1_nof64(Val x);
Val exp2_nof64(Val x);
Val atan2_nof64(Val y, Val x);
Val hypot_nof64(Val x, Val y);

/// Whether every index of d fits int32 arithmetic (and its rank the library's).
bool fits_i32(const kiln::ir::TensorDesc& d);
/// Whether op reads or writes f64 values (its kernels need a device with f64).
bool uses_f64(const kiln::ir::Op& op);

/// A buffer parameter of storage s (an output of B8 or U8 is read and written: bytes are
/// stored with atomics on their words).
Memory declare_store(Builder& b, Store s, const std::string& name, bool out);
/// A workgroup shared array of `count` values of type t (F32, F64, I32, U32 or I64; Bool as I32).
Memory shared_of(Builder& b, Type t, const std::string& name, uint32_t count);
/// Folds sh[0..n) into sh[0] with fn in a fixed tree (n a power of two; every thread of the
/// group, t its index, reaches every barrier): the same order, so the same bits, on every run.
void tree_fold(const Memory& sh, Val t, uint32_t n, Val (*fn)(Val, Val));
/// The steps of such a tree over n values as a loop (a few operations whatever n, where
/// unrolled steps would trace a copy each): step(s) for s = n / 2, n / 4, ..., 1 (a uniform I32),
/// each followed by a barrier.
void tree_steps(uint32_t n, const std::function<void(Val)>& step);
/// Element e of m (B8 loads as Bool, U8 as U32, X64 as I64).
Val load_store(const Memory& m, Store s, Val e);
/// Stores v as element e of m.
void store_store(const Memory& m, Store s, Val e, Val v);
/// Value v as storing it in s and loading it back gives it (f16 rounding, integer wrapping).
Val round_trip(Store s, Val v);

/// A reduction over any dims of a strided input: Sum, Mean, Prod on f32 and f64 (and Sum, Prod
/// of i32, i64 and bool into i64, or i32 into i32, accumulated in i64); Max, Min, ArgMax,
/// ArgMin on f32, f64, i32, i64; Any, All (bool out) on those and bool; Var (and std) on f32
/// and f64, in two passes accumulated in f64 as on the CPU. Its kernel's buffers: out, in, meta
/// (kReduceMetaInts int32); push constants `push`; one group per output element
/// (reduce_groups).
struct Reduce {
  std::string name;
  kiln::ir::OpKind kind = kiln::ir::OpKind::Sum;
  Store in = Store::F32;   ///< the input's storage
  Store out = Store::F32;  ///< the output's storage
  Type acc = Type::F32;    ///< the accumulator (and the compared values of max, min and arg forms)
  std::vector<Arg> push;   ///< Var: the correction (f64) and whether to take the root (i32)
};
/// The parameter block of a reduction: output count, reduced count, kept and reduced dim
/// counts, input and output offsets, the kept dims' shape and input strides, the reduced
/// dims' shape and input strides, the kept dims' output strides.
enum : int {
  kOut = 0,
  kRed = 1,
  kKept = 2,
  kNRed = 3,
  kInOffset = 4,
  kOutOffset = 5,
  kKeptShape = 6,                         // then kept input strides at + kMaxRank
  kRedShape = kKeptShape + 2 * kMaxRank,  // then reduced input strides at + kMaxRank
  kOutStrides = kRedShape + 2 * kMaxRank,
  kReduceMetaInts = kOutStrides + kMaxRank
};
/// Walks `n` dims of the parameter block from `at` (their sizes at at, strides at at + kMaxRank,
/// and a second set of strides at at2 when >= 0) for the linear index `lin`, innermost last:
/// adds each coordinate times its stride to off (and off2).
void unravel(const Buffer<int32_t>& meta, Val n, int at, Val lin, Var& off, Var* off2 = nullptr, int at2 = -1);
/// Where a line's elements start in a row kernel's input and output: `line` (an index over the
/// kept dims) walked from the last kept dim, adding each coordinate times that dim's input and
/// output strides to `in` and `out` (which start at the operands' offsets). The parameter block
/// holds the kept dims' count at `count`, their sizes at `sizes` and their input and output
/// strides at `in_strides` and `out_strides` (softmax_meta's layout, or a kernel's own).
void line_offsets(const Buffer<int32_t>& meta, Val line, Var& in, Var& out, int count = kKept, int sizes = kKeptShape,
                  int in_strides = kKeptShape + kMaxRank, int out_strides = kOutStrides);

/// float64 false: a device without f64, where var and std of f32 (f16, bf16) values run both
/// passes in f32 (the kernel's name ends in "_f32").
std::optional<Reduce> reduce_of(const kiln::ir::Op& op, bool float64 = true);
Kernel trace_reduce(const Reduce& spec, const Limits& limits);
/// Fills the parameter block of a reduction. False when an index leaves int32.
bool reduce_meta(const kiln::ir::Op& op, int32_t* meta);
std::array<uint32_t, 3> reduce_groups(int64_t nout);

/// Batched MatMul (a [B, M, K], b [B, K, N], optional bias [N]) over any strides, of f32, f64,
/// f16, bf16 (in f32) and i32, i64 (wrapping). Buffers: out, a, b, (bias), meta
/// (kMatMulMetaInts int32); groups from matmul_groups.
struct MatMul {
  std::string name;
  Store value = Store::F32;
  bool bias = false;
  int tile = 16;  ///< output tile side (8: a variant, matmul_variant)
};
/// M, N, K; then offset, batch, row and column strides of a, b and the output; the bias's
/// offset and stride.
enum : int { kM = 0, kN = 1, kK = 2, kMatOff = 3, kBiasOff = kMatOff + 12, kBiasStride, kMatMulMetaInts };
std::optional<MatMul> matmul_of(const kiln::ir::Op& op);
void matmul_meta(const kiln::ir::Op& op, int32_t* meta);
Kernel trace_matmul(const MatMul& spec, const Limits& limits);
std::array<uint32_t, 3> matmul_groups(const kiln::ir::Op& op, int tile = 16);
/// spec with another tile side (its name says so); the results are the same bits.
MatMul matmul_variant(const MatMul& spec, int tile);

/// IndexSelect, Gather, Scatter (no reduction, or a sum), IndexAdd, IndexCopy over any strides,
/// one thread per output element (elementwise_groups). Values of any 1-, 2-, 4- or 8-byte
/// dtype are moved as bits; sums take f32, f64, i32, i64. Buffers: out, x, index (i64), src
/// (the scans), meta (kIndexMetaInts int32); push constants: IndexAdd's alpha (floats). The
/// index values are not checked by the kernel: a backend checks them first (index_check_of).
struct Index {
  std::string name;
  kiln::ir::OpKind kind = kiln::ir::OpKind::IndexSelect;
  Store value = Store::F32;
  bool sum = false;          ///< Scatter's sum and IndexAdd
  int64_t reduce = 0;        ///< Scatter's reduction (ScatterAttrs: none, sum, prod, mean, amax, amin)
  bool include_self = true;  ///< Scatter: whether x takes part in the reduction
  std::vector<Arg> push;
};
/// Rank, output count, dim, the size index values address along dim, wrap (negative values
/// count from the end), the scans' index length; offsets of out, x, index, src; the output
/// shape; the strides over the output's dims of out, x, index, src; the dim strides of x,
/// index, src; the index's shape over the output's dims (the scans).
enum : int {
  kIxRank = 0,
  kIxCount,
  kIxDim,
  kIxDimSize,
  kIxWrap,
  kIxN,
  kIxOffsets,
  kIxShape = kIxOffsets + 4,
  kIxStrides = kIxShape + kMaxRank,
  kIxDimStrides = kIxStrides + 4 * kMaxRank,
  kIxIdxShape = kIxDimStrides + 3,
  kIndexMetaInts = kIxIdxShape + kMaxRank
};
std::optional<Index> index_of(const kiln::ir::Op& op);
/// Fills the parameter block. False when the op's layout is not one the kernel takes.
bool index_meta(const kiln::ir::Op& op, int32_t* meta);
Kernel trace_index(const Index& spec, const Limits& limits);
/// What the values of an index op's index (input 1) must satisfy: [0, size), or [-size, size)
/// with wrap; out of range is kiln::Error("Op: index v is out of range for dim d with size n").
struct IndexCheck {
  int64_t dim = 0;
  int64_t size = 0;
  bool wrap = false;
};
IndexCheck index_check_of(const kiln::ir::Op& op);

/// Cat as Copy ops, one per input into its slice of the output (run with the elementwise copy
/// kernel); empty when op is not a Cat the pieces can express.
std::vector<kiln::ir::Op> cat_pieces(const kiln::ir::Op& op);

/// Pad in every mode (constant: f32 and f64, the value a push constant; reflect, replicate,
/// circular: any dtype, moved as bits), one thread per output element (elementwise_groups).
/// Buffers: out, x, meta (kPadMetaInts int32).
struct Pad {
  std::string name;
  Store value = Store::F32;
  int mode = 0;  ///< PadAttrs::Mode
  std::vector<Arg> push;
};
/// Rank, output count, output and input offsets, the output's shape and strides, the input's
/// shape and strides, the padding before each dim (negative: cropped).
enum : int {
  kPdRank = 0,
  kPdCount,
  kPdOutOffset,
  kPdInOffset,
  kPdShape,
  kPdOutStrides = kPdShape + kMaxRank,
  kPdInShape = kPdOutStrides + kMaxRank,
  kPdInStrides = kPdInShape + kMaxRank,
  kPdLo = kPdInStrides + kMaxRank,
  kPadMetaInts = kPdLo + kMaxRank
};
std::optional<Pad> pad_of(const kiln::ir::Op& op);
bool pad_meta(const kiln::ir::Op& op, int32_t* meta);
Kernel trace_pad(const Pad& spec, const Limits& limits);

/// CumSum, CumProd (f32, f64, f16, bf16 in f64; i32, i64, bool in i64, wrapping), CumMax and
/// CumMin (values and i64 indices of the last occurrence; a NaN sticks) along one dim: one
/// thread per line (elementwise_groups over the lines), in order, as the CPU. Buffers: out,
/// (indices,) in, meta (the softmax block, softmax_meta).
struct Scan {
  std::string name;
  kiln::ir::OpKind kind = kiln::ir::OpKind::CumSum;
  Store in = Store::F32, out = Store::F32;
  Type acc = Type::F64;
};
/// float64 false: a device without f64, where cumulative sums and products of f32 (f16, bf16)
/// values accumulate in f32 (sums compensated, Kahan's).
std::optional<Scan> scan_of(const kiln::ir::Op& op, bool float64 = true);
Kernel trace_scan(const Scan& spec, const Limits& limits);

/// MaxPool (values, and i64 indices with_indices), AvgPool, AdaptiveAvgPool, AdaptiveMaxPool
/// over 1 to 3 spatial dims (f32, f64, f16, bf16, i32, i64; the max forms also i8, i16, u8;
/// AdaptiveAvgPool floats): one thread per output element (elementwise_groups), the window
/// visited in the CPU's order (library/pool.cpp).
/// Outputs contiguous, the input any strides. Buffers: out, (indices,) x, meta (kPoolMetaInts
/// int32: spatial dims as [D, H, W] with leading size-1 dims).
struct Pool {
  std::string name;
  kiln::ir::OpKind kind = kiln::ir::OpKind::MaxPool;
  Store value = Store::F32;
  bool indices = false;
};
enum : int {
  kPlCount = 0,
  kPlC,
  kPlXsN,
  kPlXsC,
  kPlInOffset,
  kPlOutOffset,
  kPlIdxOffset,
  kPlDivisor,
  kPlCip,
  kPlIn,
  kPlOut = kPlIn + 3,
  kPlK = kPlOut + 3,
  kPlS = kPlK + 3,
  kPlP = kPlS + 3,
  kPlDl = kPlP + 3,
  kPlXs = kPlDl + 3,
  kPoolMetaInts = kPlXs + 3
};
std::optional<Pool> pool_of(const kiln::ir::Op& op);
/// Fills the parameter block. False when the op's layout is not one the kernel takes.
bool pool_meta(const kiln::ir::Op& op, int32_t* meta);
Kernel trace_pool(const Pool& spec, const Limits& limits);

/// MaxUnpool (the pool storages; i64 indices): one thread per (n, c) plane, which zeroes its
/// output plane and writes each value at its index in order (a later duplicate wins, as on the
/// CPU); the indices are checked on the host first (Launch::host_check). The output contiguous.
/// Buffers: out, x, indices, meta (kUnpoolMetaInts int32).
struct Unpool {
  std::string name;
  Store value = Store::F32;
};
enum : int {
  kUpPlanes = 0,
  kUpC,
  kUpOutPlane,
  kUpXOff,
  kUpIOff,
  kUpYOff,
  kUpIn,              ///< the input's spatial dims as [D, H, W]
  kUpXs = kUpIn + 3,  ///< x strides: n, c, d, h, w
  kUpIs = kUpXs + 5,  ///< index strides: n, c, d, h, w
  kUnpoolMetaInts = kUpIs + 5
};
std::optional<Unpool> unpool_of(const kiln::ir::Op& op);
bool unpool_meta(const kiln::ir::Op& op, int32_t* meta);
Kernel trace_unpool(const Unpool& spec, const Limits& limits);

/// Conv forward (no fused epilogue), ConvTranspose (with bias) and ConvWeightGrad over 1 to 3
/// spatial dims with groups, stride, padding and dilation; f32, f64, f16, bf16 (f16 and bf16
/// summed in f32): one thread per output element (elementwise_groups;
/// ConvWeightGrad: one group per weight element, reduce_groups).
/// The output contiguous, the inputs any strides. Buffers: out, the op's inputs, meta
/// (kConvMetaInts int32; the geometry in the forward convolution's terms).
struct Conv {
  std::string name;
  kiln::ir::OpKind kind = kiln::ir::OpKind::Conv;
  Store value = Store::F32;
  bool bias = false;
};
enum : int {
  kCvCount = 0,
  kCvCpg,
  kCvOpg,
  kCvO,
  kCvXOff,
  kCvWOff,
  kCvYOff,
  kCvBOff,
  kCvBStride,
  kCvIn,
  kCvOut = kCvIn + 3,
  kCvK = kCvOut + 3,
  kCvS = kCvK + 3,
  kCvP = kCvS + 3,
  kCvDl = kCvP + 3,
  kCvXs = kCvDl + 3,  ///< x strides: n, c, d, h, w
  kCvWs = kCvXs + 5,  ///< strides of the second input (w; ConvWeightGrad: the output gradient)
  kCvN = kCvWs + 5,   ///< the batch size (ConvWeightGrad)
  kConvMetaInts = kCvN + 1
};
std::optional<Conv> conv_of(const kiln::ir::Op& op);
/// Fills the parameter block. False when the op's layout is not one the kernel takes.
bool conv_meta(const kiln::ir::Op& op, int32_t* meta);
Kernel trace_conv(const Conv& spec, const Limits& limits);

/// Softmax and LogSoftmax along one dim, of f32, f16 and bf16 (computed in f32, rounded once,
/// as the CPU) and f64 (the device needs it). Buffers: out, in, meta (the reduction's block:
/// rows as outputs, the dim as the one reduced dim, its output stride at kRedShape + 1); one
/// group per row (reduce_groups).
struct Softmax {
  std::string name;
  bool log = false;
  Store value = Store::F32;
};
std::optional<Softmax> softmax_of(const kiln::ir::Op& op);
bool softmax_meta(const kiln::ir::Op& op, int32_t* meta);
Kernel trace_softmax(const Softmax& spec, const Limits& limits);

/// LayerNorm (LayerNorm, RMSNorm, GroupNorm) of f32, f64, f16 and bf16 with statistics in f64
/// (the device needs it): one group per row (reduce_groups). Buffers: y, mean, rstd, x,
/// (weight,) (bias,) meta (kNormMetaInts int32); push constant eps (f64). y's normalised dims
/// must be one run (GroupNorm: y contiguous), and x's too unless gathered (gather_x); mean
/// and rstd contiguous.
struct Norm {
  std::string name;
  bool rms = false, group = false, weight = false, bias = false;
  /// x's element (row, i) found from x's shape and strides (element row * n + i of x in
  /// order): x in any layout, y as above.
  bool gather_x = false;
  Store x = Store::F32;       ///< x and y
  Store stats = Store::F32;   ///< mean and rstd: F32, or F64 for f64
  std::vector<Store> params;  ///< weight and bias, those present
  std::vector<Arg> push;
};
enum : int {
  kNmRows = 0,
  kNmN,
  kNmKept,
  kNmXOff,
  kNmYOff,
  kNmMOff,
  kNmROff,
  kNmXs,
  kNmYs,
  kNmGroups,
  kNmCg,
  kNmSpatial,
  kNmParamOff,                             ///< weight offset and stride, then bias offset and stride
  kNmKeptShape = kNmParamOff + 4,          ///< kept dims' shape, then x's and y's strides over them
  kNmXRank = kNmKeptShape + 3 * kMaxRank,  ///< Norm::gather_x: x's rank, shape and strides
  kNmXShape,
  kNormMetaInts = kNmXShape + 2 * kMaxRank
};
std::optional<Norm> norm_of(const kiln::ir::Op& op);
bool norm_meta(const kiln::ir::Op& op, int32_t* meta);
Kernel trace_norm(const Norm& spec, const Limits& limits);

/// Sort (values and i64 indices) along one dim of a line of at most kMaxSort elements, as the
/// CPU's stable sort (NaN largest), for every value storage: a bitonic network in shared
/// memory, one group per line (reduce_groups). Buffers: values, indices, in, meta (the softmax
/// block, softmax_meta); the two outputs share offsets and strides.
constexpr int64_t kMaxSort = 2048;
struct Sort {
  std::string name;
  Store value = Store::F32;
  bool descending = false;
  uint32_t padded = 1;  ///< the line length rounded up to a power of two (part of the name)
};
std::optional<Sort> sort_of(const kiln::ir::Op& op);
Kernel trace_sort(const Sort& spec, const Limits& limits);

/// A check of an input's values on the host: integers must lie in [lo, hi), floats in [lo, hi]
/// (NaN fails), or with `nonzero` every value must differ from 0; `fail` throws the CPU's error
/// for the first value that does not.
struct HostCheck {
  int input = 0;
  double lo = 0, hi = 0;
  bool nonzero = false;
  std::function<void(double)> fail;
};

/// One dispatch of a library kernel for an IR op, bound the same way by every backend: the
/// first `outputs` outputs, then the first `inputs` inputs (-1: all), then `meta` as an int32
/// buffer; `push` as the kernel's push constants; `groups` over x, y, z.
struct Launch {
  /// Another kernel with the same results (a tile size) in place of the launch's own one.
  struct Variant {
    std::string name;
    std::function<Kernel(const Limits&)> trace;
    std::array<uint32_t, 3> groups{};
  };
  std::string name;                            ///< the kernel's name (unique: a cache key)
  std::function<Kernel(const Limits&)> trace;  ///< traces the kernel for a device's limits
  std::vector<int32_t> meta;
  std::vector<Arg> push;
  std::array<uint32_t, 3> groups{};  ///< all 0: nothing to run (an empty output)
  int outputs = 1;
  int inputs = -1;
  /// Values the backend must check on the host before the launch (index ops, MaxUnpool's
  /// indices, Bernoulli's p): the kernel does not check them.
  std::optional<HostCheck> host_check;
  /// Alternatives a backend may measure on first use and pick from (kernel::Autotuner), the
  /// launch's own kernel counting as variant 0; `tune_key` names the choice (the op and a
  /// class of shapes).
  std::vector<Variant> variants;
  std::string tune_key;
};
/// The launch of op on a device with or without f64 arithmetic (float64), or nothing when the
/// library has no kernel for it there. Cat is several launches (cat_pieces).
std::optional<Launch> launch_of(const kiln::ir::Op& op, bool float64);

/// An operand of a fused elementwise kernel: element i of the kernel's range is read at
/// desc.offset + i (Identity), at desc.offset (Scalar), or at desc.offset plus i unravelled
/// over `shape` dotted with `strides` (Gather: a broadcast or strided view); Given: the value
/// the enclosing kernel computed for element i (a product, fused_product_launch).
struct FusedLoad {
  enum Kind : uint8_t { Identity, Scalar, Gather, Given };
  Kind kind = Identity;
  kiln::ir::TensorDesc desc;
  Shape shape;
  Strides strides;
};
/// A step of a fused elementwise kernel: an elementwise op (elementwise_of) whose input q comes
/// from src[q] (>= 0: that earlier step's value; < 0: load -1 - src[q]); a stored step writes its
/// value at its output's offset + i.
struct FusedStep {
  const kiln::ir::Op* op = nullptr;
  std::vector<int> src;
  bool stored = false;
};
/// One kernel for a chain of elementwise ops over `count` elements (a group of the fusion
/// planner): each op's function is the one its own kernel computes, so the values are those of
/// the ops run one by one. Buffers: the stored steps' outputs in step order, then the loads.
/// Nothing when a step has no elementwise kernel here (or needs f64 the device lacks), or an
/// index leaves int32.
std::optional<Launch> fused_launch(const std::vector<FusedLoad>& loads, const std::vector<FusedStep>& steps,
                                   int64_t count, bool float64);
/// A fused group closed by a row op `tail` (Sum, Mean, Max, Min, Prod, Var, Softmax,
/// LogSoftmax or LayerNorm over trailing dims) reading step `result`'s value: the row op's own
/// kernel, reading its input through the chain instead of memory, so its arithmetic and order
/// (its bits) are those of the row op alone. The tail's input must be contiguous over the
/// group's elements. Buffers: the row op's outputs, the stored steps', the loads, the row op's
/// other inputs.
std::optional<Launch> fused_tail_launch(const std::vector<FusedLoad>& loads, const std::vector<FusedStep>& steps,
                                        int result, const kiln::ir::Op& tail, bool float64);
/// A product, MatMul or Conv (a kernel of the library, contiguous result), with the chain as its
/// epilogue: each result goes through the steps in registers (Given loads read it), element i
/// of the chain being element i of the product; `keep`: the product is stored too. Buffers:
/// (the product,) the stored steps', the product's inputs, the loads but the Given ones.
std::optional<Launch> fused_product_launch(const kiln::ir::Op& product, bool keep, const std::vector<FusedLoad>& loads,
                                           const std::vector<FusedStep>& steps, bool float64);

/// Where a kernel's main input values come from: a buffer, or a chain of elementwise ops
/// computed in the kernel (a fused group, fused.cpp). The row kernels (reduction, softmax,
/// layer norm) read their input through one; a MatMul hands it each result as an epilogue.
class Source {
 public:
  virtual ~Source() = default;
  /// Declares its output buffers, right after the kernel's own outputs.
  virtual void outputs(Builder& b) = 0;
  /// Declares its input buffers where the kernel's input (of storage s) would be.
  virtual void inputs(Builder& b, Store s, const std::string& name) = 0;
  /// Declares its push constants, right after the kernel's parameter block.
  virtual void scalars(Builder& b, const Buffer<int32_t>& meta) = 0;
  /// Element e of the input, as load_store gives it. A chain also stores its stored steps'
  /// values of e where store_if is given and true (the kernel's first read of e).
  virtual Val at(Val e, const Val* store_if) = 0;
  /// A product's epilogue: the chain at element e, `given` its Given loads' value.
  virtual void epilogue(Val e, Val given) = 0;
};
/// The Source that loads the input from its buffer.
std::unique_ptr<Source> buffer_source();
/// The Source with no buffers and no epilogue (a MatMul alone).
std::unique_ptr<Source> no_source();
/// The row kernels and the MatMul, reading or handing on values through src.
Kernel trace_reduce_from(const Reduce& spec, const Limits& limits, Source& src);
Kernel trace_softmax_from(const Softmax& spec, const Limits& limits, Source& src);
Kernel trace_norm_from(const Norm& spec, const Limits& limits, Source& src);
/// keep: the product is stored (else only the epilogue's outputs are).
Kernel trace_matmul_into(const MatMul& spec, const Limits& limits, Source& src, bool keep);
/// Conv and ConvTranspose (one thread per result) handing each result to src's epilogue.
Kernel trace_conv_into(const Conv& spec, const Limits& limits, Source& src, bool keep);

}  // namespace kiln::kernel::lib
