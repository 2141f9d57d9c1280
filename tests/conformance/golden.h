// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Conformance harness (docs/architecture.md, Testing): loads the PyTorch reference cases written by
// scripts/gen_golden.py (tests/golden/<op>.kgl), rebuilds the inputs with the same views and
// compares Kiln's results. The file format is documented at the top of gen_golden.py.
#include <kiln/kiln.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::conformance {

/// Case attributes: "key=value" pairs with typed getters (lists are comma-separated).
class Attrs {
 public:
  Attrs() = default;
  explicit Attrs(const std::string& text);
  bool has(const std::string& k) const { return kv_.count(k) != 0; }
  const std::string& str(const std::string& k) const;
  std::string str_or(const std::string& k, const std::string& def) const { return has(k) ? str(k) : def; }
  int64_t i(const std::string& k) const;
  int64_t i_or(const std::string& k, int64_t def) const { return has(k) ? i(k) : def; }
  double f(const std::string& k) const;
  double f_or(const std::string& k, double def) const { return has(k) ? f(k) : def; }
  bool b(const std::string& k, bool def = false) const { return has(k) ? i(k) != 0 : def; }
  std::optional<int64_t> opt_i(const std::string& k) const;
  std::optional<double> opt_f(const std::string& k) const;
  std::vector<int64_t> ints(const std::string& k) const;  ///< empty when absent
  Dims dims(const std::string& k) const;
  Shape shape(const std::string& k) const;
  std::optional<DType> dtype(const std::string& k) const;
  /// A number keeping its kind: "2" is an int, "2.0"/"inf"/"nan" a float.
  Scalar scalar(const std::string& k) const;

 private:
  std::map<std::string, std::string> kv_;
};

/// One input of a case as stored: a tensor (base values + view transforms) or a scalar.
struct InputSpec {
  enum Kind : uint8_t { Tensor = 0, Int = 1, Float = 2, Bool = 3, Absent = 4 } kind = Tensor;
  DType dtype = f32;
  Shape base_shape;
  std::string transforms;
  std::vector<uint8_t> bytes;
  int64_t ival = 0;
  double fval = 0;
  bool bval = false;
};

/// One expected output: PyTorch's values (contiguous) and the tolerance for float dtypes.
struct OutputSpec {
  DType dtype = f32;
  Shape shape;
  double rtol = 0, atol = 0;
  std::vector<uint8_t> bytes;
};

struct Case {
  std::string op, name, attrs_text;
  Attrs attrs;
  bool null_check = true;  ///< output shapes can be inferred without data
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
};

/// An argument handed to a registry entry: a tensor, a Python-like scalar, or absent (None).
struct Arg {
  kiln::Tensor t;
  std::optional<Scalar> s;
  bool is_tensor() const { return t.defined(); }
  bool absent() const { return !t.defined() && !s; }
};
using Args = std::vector<Arg>;
using Outs = std::vector<kiln::Tensor>;
using OpFn = std::function<Outs(const Args&, const Attrs&, const Device&)>;

/// The single map from op name to a call of the Kiln API (registry.cpp).
const std::map<std::string, OpFn>& registry();

/// Directory holding the golden files (KILN_GOLDEN_DIR, overridable by the environment).
std::string golden_dir();
/// Op names with a golden file, sorted.
std::vector<std::string> golden_ops();
/// Reads every case of tests/golden/<op>.kgl; throws std::runtime_error on a corrupt file.
std::vector<Case> load_cases(const std::string& op);

/// Builds the inputs of a case on `dev` (base tensor then the view transforms).
Args build_args(const Case& c, const Device& dev);
/// Compares results against the case: "" when they match, else a report of the differences.
/// values=false checks only the number, shapes and dtypes of the outputs.
std::string compare(const Case& c, const Args& args, const Outs& got, bool values);
/// For a device that may flush subnormal f32 values to zero (WGSL allows it): compares got
/// with fn's results on the CPU from the case's inputs with subnormal f32 and bf16 values
/// flushed, subnormal results flushed on both sides, with the case's tolerances ("" when they
/// match).
std::string compare_flushed(const Case& c, const OpFn& fn, const Outs& got);

}  // namespace kiln::conformance
