// SPDX-License-Identifier: MIT OR Apache-2.0
// Code generation of control flow (kiln::onnx::generate): bad or unsupported subgraphs give one
// kiln::Error naming the node; a subgraph reading an outer value produced by a node listed after
// it is ordered after that node. (The generated code itself is compiled and checked against ONNX
// Runtime in tests/onnx/gen/ and by `make onnx-conformance`.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "kiln/onnx.h"
#include "kiln/ops.h"
#include "onnx/onnx_builder.h"
#include "test_util.h"

using namespace kiln;
using namespace kiln::onnx::test;
namespace fs = std::filesystem;

namespace {

// AttributeProto holding a GraphProto.
Msg attr_g(const std::string& name, const Msg& graph) { return Msg().bytes(1, name).varint(20, 5).msg(6, graph); }

// Writes the model to a temporary folder, generates code into it and returns the source text;
// the folder is removed.
std::string generate_source(const std::string& bytes, const std::string& tag) {
  fs::path dir = fs::temp_directory_path() / ("kiln_onnx_cg_" + tag);
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() { fs::remove_all(d); }
  } cleanup{dir};
  std::ofstream((dir / "model.onnx").string(), std::ios::binary) << bytes;
  auto r = onnx::generate((dir / "model.onnx").string(), {.out_dir = (dir / "gen").string(), .name = "Cg"});
  std::ifstream f(r.source);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Msg branch(const std::vector<std::string>& outs, const std::string& from) {
  Msg g;
  g.bytes(2, "branch");
  for (size_t i = 0; i < outs.size(); ++i) g.msg(1, node("Identity", {from}, {outs[i]}, "id_" + outs[i]));
  for (const auto& o : outs) g.msg(12, value_info(o, {2}));
  return g;
}

}  // namespace

TEST(OnnxCodegenErrors, IfBranchesWithWrongOutputCountNameTheNode) {
  Msg n = node("If", {"c"}, {"y"}, "choose");
  n.msg(5, attr_g("then_branch", branch({"t1", "t2"}, "x"))).msg(5, attr_g("else_branch", branch({"e1"}, "x")));
  Msg g;
  g.msg(1, n).msg(11, value_info("c", {}, 9)).msg(11, value_info("x", {2})).msg(12, value_info("y", {2}));
  std::string msg = test::error_of([&] { generate_source(model(g, 17), "if_outs"); });
  EXPECT_NE(msg.find("choose"), std::string::npos) << msg;
  EXPECT_NE(msg.find("then_branch returns 2 outputs"), std::string::npos) << msg;
}

TEST(OnnxCodegenErrors, UnsupportedOpsInsideSubgraphsAreAllListed) {
  Msg body;
  body.bytes(2, "body")
      .msg(1, node("FancyInner", {"v_in"}, {"v_out"}, "inner_fancy"))
      .msg(1, node("Identity", {"cond_in"}, {"cond_out"}, "keep"))
      .msg(11, value_info("i", {}, 7))
      .msg(11, value_info("cond_in", {}, 9))
      .msg(11, value_info("v_in", {2}))
      .msg(12, value_info("cond_out", {}, 9))
      .msg(12, value_info("v_out", {2}));
  Msg loop = node("Loop", {"m", "", "x"}, {"y"}, "rows");
  loop.msg(5, attr_g("body", body));
  Msg g;
  g.msg(1, node("FancyOuter", {"x0"}, {"x"}, "outer_fancy"))
      .msg(1, loop)
      .msg(11, value_info("m", {}, 7))
      .msg(11, value_info("x0", {2}))
      .msg(12, value_info("y", {2}));
  std::string msg = test::error_of([&] { generate_source(model(g, 17), "unsup"); });
  EXPECT_NE(msg.find("2 unsupported op(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("FancyOuter (node 'outer_fancy', opset 17)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("FancyInner (node 'inner_fancy', opset 17)"), std::string::npos) << msg;
}

TEST(OnnxCodegenErrors, ScanBeforeOpset9IsRefused) {
  Msg body;
  body.bytes(2, "body")
      .msg(1, node("Add", {"s_in", "e"}, {"s_out"}, "acc"))
      .msg(11, value_info("s_in", {2}))
      .msg(11, value_info("e", {2}))
      .msg(12, value_info("s_out", {2}));
  Msg scan = node("Scan", {"", "s0", "xs"}, {"s"}, "old_scan");
  scan.msg(5, attr_g("body", body)).msg(5, attr_i("num_scan_inputs", 1));
  Msg g;
  g.msg(1, scan)
      .msg(11, value_info("s0", {1, 2}))
      .msg(11, value_info("xs", {1, 3, 2}))
      .msg(12, value_info("s", {1, 2}));
  std::string msg = test::error_of([&] { generate_source(model(g, 8), "scan8"); });
  EXPECT_NE(msg.find("Scan (node 'old_scan', opset 8)"), std::string::npos) << msg;
}

TEST(OnnxCodegen, SubgraphReadsOfOuterValuesOrderTheNodes) {
  // The If is listed before the node producing `late`, which its branches read: generation
  // orders that node first (the branches' implicit input), and the branches become an if/else.
  Msg n = node("If", {"c"}, {"y"}, "choose");
  n.msg(5, attr_g("then_branch", branch({"t"}, "late"))).msg(5, attr_g("else_branch", branch({"e"}, "x")));
  Msg g;
  g.msg(1, n)
      .msg(1, node("Relu", {"x"}, {"late"}, "make_late"))
      .msg(11, value_info("c", {}, 9))
      .msg(11, value_info("x", {2}))
      .msg(12, value_info("y", {2}));
  std::string src = generate_source(model(g, 17), "order");
  size_t produce = src.find("kiln::Tensor late =");
  size_t branch_at = src.find("if (kiln::onnx::ops::condition(c))");
  ASSERT_NE(produce, std::string::npos) << src;
  ASSERT_NE(branch_at, std::string::npos) << src;
  EXPECT_LT(produce, branch_at) << src;
  EXPECT_NE(src.find("} else {"), std::string::npos) << src;
  EXPECT_EQ(src.find("ops::call(\"If\""), std::string::npos) << src;
}

TEST(OnnxCodegen, ControlFlowHelpersFollowTheRunTimeSemantics) {
  EXPECT_TRUE(onnx::ops::condition(full({1}, 1.0, {.dtype = bool_})));
  EXPECT_FALSE(onnx::ops::condition(zeros({}, {.dtype = i64})));
  EXPECT_THROW(onnx::ops::condition(zeros({2}, {.dtype = bool_})), Error);
  EXPECT_EQ(onnx::ops::trip_count(full({}, 5.0, {.dtype = i64})), 5);
  Tensor x = arange(6, f32, Device::cpu()).reshape({2, 3});
  Tensor s = onnx::ops::scan_input(x, -1, true);  // axis 1 first, reversed
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(s.select(0, 0).to_vector<float>(), (std::vector<float>{2, 5}));
  EXPECT_EQ(onnx::ops::scan_length({s, s}), 3);
  EXPECT_THROW(onnx::ops::scan_length({s, x}), Error);
  EXPECT_EQ(onnx::ops::scan_length({}), 0);
  // Steps stacked on axis 1, reversed first: the inverse of scan_input(x, 1, true).
  std::vector<Tensor> steps{s.select(0, 0), s.select(0, 1), s.select(0, 2)};
  Tensor y = onnx::ops::stack_steps(steps, 1, true);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW(onnx::ops::stack_steps({}), Error);
}

namespace {

std::vector<int64_t> ints_of(const Tensor& t) { return t.to(i64).contiguous().to_vector<int64_t>(); }

Tensor ints(const std::vector<int64_t>& v, bool scalar = false) {
  return onnx::ops::ints_tensor(v, scalar, i64, Device::cpu());
}

}  // namespace

// The shape-value helpers of generated code against the run-time path's ops (the same ONNX op
// on tensors, through ops::call).
TEST(OnnxCodegen, ShapeValueHelpersMatchTheRunTimeOps) {
  using onnx::ops::call;
  Tensor x = zeros({2, 3, 4, 5});
  for (auto [s, e] : {std::pair<int64_t, int64_t>{0, INT64_MAX}, {1, 3}, {-2, INT64_MAX}, {-9, 9}, {3, 1}}) {
    onnx::ops::Attrs a = {{"start", s}};
    if (e != INT64_MAX) a.push_back({"end", e});
    EXPECT_EQ(onnx::ops::shape_of(x, s, e), ints_of(call("Shape", 17, {x}, a)[0])) << s << " " << e;
  }
  const std::vector<int64_t> shp = {2, 3, 4, 5};
  for (const std::vector<int64_t>& idx : {std::vector<int64_t>{0}, {-1}, {3, -4, 1}}) {
    Tensor want = call("Gather", 17, {ints(shp), ints(idx)}, {{"axis", 0}})[0];
    EXPECT_EQ(onnx::ops::gather_ints(shp, idx), ints_of(want));
  }
  EXPECT_EQ(call("Gather", 17, {ints(shp), ints({2}, true)}, {{"axis", 0}})[0].dim(), 0);  // rank of the index
  EXPECT_EQ(onnx::ops::concat_ints({{2}, {}, {-1, 4}}), (std::vector<int64_t>{2, -1, 4}));
  // Integer arithmetic: Div truncates toward zero, one element broadcasts.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> pairs = {
      {{7}, {2}}, {{-7}, {2}}, {{7, -9, 12}, {-4}}, {{5}, {3, -3, 7}}, {{8, 6}, {2, -3}}};
  for (const auto& [a, b] : pairs)
    for (auto [op, name] : {std::pair{'+', "Add"}, {'-', "Sub"}, {'*', "Mul"}, {'/', "Div"}})
      EXPECT_EQ(onnx::ops::int_binary(op, a, b), ints_of(call(name, 17, {ints(a), ints(b)})[0])) << name;
  // Cast to int32 wraps like the tensor cast.
  const std::vector<int64_t> big = {int64_t{1} << 33, (int64_t{1} << 31) + 5, -3};
  EXPECT_EQ(onnx::ops::cast_ints(big, i32), ints_of(call("Cast", 17, {ints(big)}, {{"to", 6}})[0]));
  EXPECT_EQ(onnx::ops::cast_ints(big, i64), big);
  EXPECT_EQ(onnx::ops::ints_tensor({3}, true, i32, Device::cpu()).dtype(), i32);
  EXPECT_EQ(onnx::ops::ints_tensor({3}, true, i64, Device::cpu()).dim(), 0);
  // Reshape: 0 keeps a dim, -1 is inferred, allowzero makes 0 a size.
  Tensor y = arange(24, f32, Device::cpu()).reshape({2, 3, 4});
  for (const std::vector<int64_t>& s : {std::vector<int64_t>{0, -1}, {0, 0, 2, 2}, {-1}, {4, 0, 2}}) {
    Tensor want = call("Reshape", 17, {y, ints(s)})[0];
    Tensor got = onnx::ops::reshape(y, s);
    EXPECT_EQ(got.shape(), want.shape());
    EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());
  }
  Tensor empty = zeros({0, 3});
  EXPECT_EQ(onnx::ops::reshape(empty, {3, 0}, true).shape(), (Shape{3, 0}));
  EXPECT_EQ(onnx::ops::reshape(empty, {0, 3}).shape(), (Shape{0, 3}));
}

TEST(OnnxCodegenErrors, ShapeValueHelpersRejectBadValues) {
  auto expect_error = [](const std::function<void()>& f, const std::string& part) {
    std::string msg = test::error_of(f);
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
  };
  expect_error([] { onnx::ops::gather_ints({2, 3}, {2}); }, "index 2 is out of range");
  expect_error([] { onnx::ops::gather_ints({2, 3}, {-3}); }, "[2, 3]");
  expect_error([] { onnx::ops::int_binary('/', {4, 6}, {0}); }, "division by zero");
  expect_error([] { onnx::ops::int_binary('+', {1, 2}, {1, 2, 3}); }, "do not broadcast");
  expect_error([] { onnx::ops::squeeze_ints({1, 2}); }, "Squeeze");
  expect_error([] { onnx::ops::cast_ints({1}, f32); }, "Cast");
  expect_error([] { onnx::ops::ints_tensor({1, 2}, true, i64, Device::cpu()); }, "one element");
  Tensor x = zeros({2, 3});
  expect_error([&] { onnx::ops::reshape(x, {0, 0, 0}); }, "beyond the input's rank 2");
  EXPECT_THROW(onnx::ops::reshape(x, {4, -1}), Error);  // 6 elements do not fill [4, -1]
  expect_error([&] { onnx::ops::slice(x, {0}, {2}, {1}, {0}); }, "step must not be 0");
  expect_error([&] { onnx::ops::slice(x, {0}, {2}, {2}); }, "axis 2 is out of range for rank 2");
  expect_error([&] { onnx::ops::slice(x, {0, 1}, {2}); }, "differ in length");
  expect_error([&] { onnx::ops::squeeze(x, {1}); }, "cannot squeeze axis 1 of size 3");
  expect_error([] { onnx::ops::concat({}, 0); }, "at least one input");
  expect_error([] { onnx::ops::constant_of_shape({2, -1}, 1.0, f32, Device::cpu()); }, "negative size");
}

// The tensor helpers generated code calls with constant index arguments (the run-time path
// runs the same functions; the ONNX backend tests check both against ONNX): a few values worked
// out by hand from the ONNX spec.
TEST(OnnxCodegen, TensorHelpersFollowTheOnnxSpec) {
  Tensor x = arange(12, f32, Device::cpu()).reshape({3, 4});
  // Rows 2 down to 1 (negative step, start clamped to the last index), every second column.
  Tensor y = onnx::ops::slice(x, {10, 0}, {0, 100}, {0, -1}, {-1, 2});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.contiguous().to_vector<float>(), (std::vector<float>{8, 10, 4, 6}));
  EXPECT_EQ(onnx::ops::slice(x, {3}, {1}).shape(), (Shape{0, 4}));  // empty, not an error
  Tensor z = zeros({1, 3, 1});
  EXPECT_EQ(onnx::ops::squeeze(z).shape(), (Shape{3}));
  EXPECT_EQ(onnx::ops::squeeze(z, {-1}).shape(), (Shape{1, 3}));
  EXPECT_EQ(onnx::ops::concat({x, x}, -1).shape(), (Shape{3, 8}));
  Tensor c = onnx::ops::constant_of_shape({2, 0}, int64_t{7}, i64, Device::cpu());
  EXPECT_EQ(c.shape(), (Shape{2, 0}));
  EXPECT_EQ(c.dtype(), i64);
  EXPECT_EQ(onnx::ops::constant_of_shape({}, 2.5, f32, Device::cpu()).item<float>(), 2.5f);
  // Gather: negative indices count from the end; the indices' shape replaces the axis.
  Tensor g = onnx::ops::gather(x, tensor({-1, 0, 1, -4}, {2, 2}, Device::cpu()).to(i32), 1);
  EXPECT_EQ(g.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(g.contiguous().to_vector<float>(), (std::vector<float>{3, 0, 1, 0, 7, 4, 5, 4, 11, 8, 9, 8}));
  EXPECT_EQ(onnx::ops::gather(x, full({}, -1, {.dtype = i64}), 0).to_vector<float>(),
            (std::vector<float>{8, 9, 10, 11}));                                     // a scalar index drops the axis
  EXPECT_THROW(onnx::ops::gather(x, tensor({0.5f}, {1}, Device::cpu()), 0), Error);  // float indices
  EXPECT_THROW(onnx::ops::gather(x, tensor(std::vector<int64_t>{3}, {1}, Device::cpu()), 0), Error);
  // Div truncates integers toward zero and keeps a's dtype; Pow of an integer base by a float
  // exponent computes in f64 and comes back to the base's dtype.
  Tensor a = tensor(std::vector<int64_t>{-7, 7, -8}, {3}, Device::cpu()), b = full({}, 2, {.dtype = i64});
  EXPECT_EQ(onnx::ops::div(a, b).to_vector<int64_t>(), (std::vector<int64_t>{-3, 3, -4}));
  EXPECT_EQ(onnx::ops::div(a.to(i32), b).dtype(), i32);
  EXPECT_EQ(onnx::ops::div(x, full({}, 4.0f)).to_vector<float>()[5], 1.25f);
  Tensor p = onnx::ops::pow(tensor(std::vector<int64_t>{2, 9}, {2}, Device::cpu()), full({}, 0.5));
  EXPECT_EQ(p.dtype(), i64);
  EXPECT_EQ(p.to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));  // sqrt(2) = 1.41 -> 1
  EXPECT_EQ(onnx::ops::pow(full({}, 3.0f), full({}, 2.0)).dtype(), f32);
  // Reduce*: negative axes, keepdims, all axes when none are given (or x itself with
  // noop_with_empty_axes), integer means in f64 truncated back, a 0-d input; errors.
  Tensor m = onnx::ops::reduce("ReduceMean", x, {-1}, false);
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1.5f, 5.5f, 9.5f}));
  EXPECT_EQ(onnx::ops::reduce("ReduceMax", x, {0}).shape(), (Shape{1, 4}));
  EXPECT_EQ(onnx::ops::reduce("ReduceSum", x, {}, false).item<float>(), 66.f);
  EXPECT_EQ(onnx::ops::reduce("ReduceSum", x, {}, true, true).shape(), x.shape());
  Tensor xi = tensor(std::vector<int64_t>{1, 2, 4}, {3}, Device::cpu());
  EXPECT_EQ(onnx::ops::reduce("ReduceMean", xi, {0}, false).to_vector<int64_t>(), (std::vector<int64_t>{2}));
  EXPECT_EQ(onnx::ops::reduce("ReduceL2", full({}, -3.0f), {}).item<float>(), 3.f);
  EXPECT_THROW(onnx::ops::reduce("ReduceMean", x, {2}), Error);
  EXPECT_THROW(onnx::ops::reduce("Reduce", x, {0}), Error);
}

// Generated code for a shape chain (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, the way
// PyTorch exports `x.view(x.size(0), -1, 4)`): host code, no generic calls.
TEST(OnnxCodegen, ShapeChainsBecomeHostCode) {
  Msg g;
  g.msg(1, node("Shape", {"x"}, {"s"}, "shape"));
  g.msg(1, node("Gather", {"s", "zero"}, {"n"}, "gather").msg(5, attr_i("axis", 0)));
  g.msg(1, node("Unsqueeze", {"n", "axes0"}, {"n1"}, "unsqueeze"));
  g.msg(1, node("Concat", {"n1", "rest"}, {"target"}, "concat").msg(5, attr_i("axis", 0)));
  g.msg(1, node("Reshape", {"x", "target"}, {"y"}, "reshape"));
  g.msg(5, tensor_i64("zero", {}, {0})).msg(5, tensor_i64("axes0", {1}, {0}));
  g.msg(5, tensor_i64("rest", {2}, {-1, 4}));
  g.msg(11, value_info("x", {-1, 8})).msg(12, value_info("y", {-1, 2, 4}));
  std::string src = generate_source(model(g, 17), "shape_chain");
  EXPECT_EQ(src.find("ops::call("), std::string::npos) << src;
  EXPECT_NE(src.find("kiln::onnx::ops::shape_of(x)"), std::string::npos) << src;
  EXPECT_NE(src.find("kiln::onnx::ops::gather_ints("), std::string::npos) << src;
  EXPECT_NE(src.find("kiln::onnx::ops::concat_ints("), std::string::npos) << src;
  EXPECT_NE(src.find("kiln::onnx::ops::reshape(x, "), std::string::npos) << src;
}

// Reductions with constant axes (an attribute before opset 18, an input from it) are
// ops::reduce calls, not generic ones; TensorHelpersFollowTheOnnxSpec checks the function.
TEST(OnnxCodegen, ReductionsWithConstantAxesAreFunctionCalls) {
  for (int64_t opset : {17, 18}) {
    Msg g;
    Msg n = node("ReduceMean", opset >= 18 ? std::vector<std::string>{"x", "axes"} : std::vector<std::string>{"x"},
                 {"y"}, "mean");
    n.msg(5, attr_i("keepdims", 0));
    if (opset < 18) n.msg(5, attr_ints("axes", {2, 3}));
    g.msg(1, n);
    if (opset >= 18) g.msg(5, tensor_i64("axes", {2}, {2, 3}));
    g.msg(11, value_info("x", {-1, 4, 5, 5})).msg(12, value_info("y", {-1, 4}));
    std::string src = generate_source(model(g, opset), "reduce_" + std::to_string(opset));
    EXPECT_EQ(src.find("ops::call("), std::string::npos) << src;
    EXPECT_NE(src.find("kiln::onnx::ops::reduce(\"ReduceMean\", x, std::vector<int64_t>{2, 3}, false)"),
              std::string::npos)
        << src;
  }
}
