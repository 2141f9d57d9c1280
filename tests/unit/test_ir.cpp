// The op IR: every primitive round-trips through serialisation; inference gives the
// documented shapes and dtypes; malformed records are rejected with kiln::Error.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>

#include "ir/op.h"
#include "kiln/error.h"

using namespace kiln;
using namespace kiln::ir;

namespace {
TensorDesc random_desc(std::mt19937& g) {
  TensorDesc d;
  int rank = static_cast<int>(g() % 5);
  for (int i = 0; i < rank; ++i) {
    d.shape.push_back(static_cast<int64_t>(g() % 7));
    d.strides.push_back(static_cast<int64_t>(g() % 50) - 10);
  }
  d.offset = static_cast<int64_t>(g() % 100);
  d.dtype = static_cast<DType>(g() % kNumDTypes);
  return d;
}
}  // namespace

TEST(IR, EveryOpHasANameAndFamily) {
  for (int k = 0; k < kNumOps; ++k) {
    auto kind = static_cast<OpKind>(k);
    EXPECT_FALSE(op_name(kind).empty());
    EXPECT_GE(op_num_outputs(kind), 1);
  }
}

TEST(IR, SerialisationRoundTripsForEveryOp) {
  std::mt19937 g(42);
  for (int k = 0; k < kNumOps; ++k) {
    Op op;
    op.kind = static_cast<OpKind>(k);
    int nin = op_num_inputs(op.kind) < 0 ? 3 : op_num_inputs(op.kind);
    for (int i = 0; i < nin; ++i) op.inputs.push_back(random_desc(g));
    for (int i = 0; i < op_num_outputs(op.kind); ++i) op.outputs.push_back(random_desc(g));
    for (int i = 0; i < static_cast<int>(g() % 9); ++i)
      op.attrs.ints.push_back(static_cast<int64_t>(g()) - (1LL << 31));
    for (int i = 0; i < static_cast<int>(g() % 4); ++i) op.attrs.reals.push_back(std::ldexp(double(g()), -20) - 7.5);
    op.attrs.dtype = static_cast<DType>(g() % kNumDTypes);
    std::vector<uint8_t> bytes = serialize(op);
    Op back = deserialize(bytes.data(), bytes.size());
    EXPECT_TRUE(back == op) << "op " << op_name(op.kind);
    // Every strict prefix is rejected with a kiln::Error, never a crash.
    for (size_t cut = 0; cut < bytes.size(); cut += 7)
      EXPECT_THROW(deserialize(bytes.data(), cut), Error) << "op " << op_name(op.kind) << " cut " << cut;
  }
}

TEST(IR, DeserialiseRejectsCorruptRecords) {
  Op op;
  op.kind = OpKind::Add;
  op.inputs = {contiguous_desc({2, 3}, DType::F32), contiguous_desc({3}, DType::F32)};
  infer(op);
  std::vector<uint8_t> bytes = serialize(op);
  auto bad_magic = bytes;
  bad_magic[0] ^= 0xff;
  EXPECT_THROW(deserialize(bad_magic.data(), bad_magic.size()), Error);
  auto bad_kind = bytes;
  bad_kind[4] = 0xff;
  bad_kind[5] = 0xff;
  EXPECT_THROW(deserialize(bad_kind.data(), bad_kind.size()), Error);
  auto trailing = bytes;
  trailing.push_back(0);
  EXPECT_THROW(deserialize(trailing.data(), trailing.size()), Error);
  // A huge list length must be refused before any allocation.
  auto huge = bytes;
  huge[6] = huge[7] = huge[8] = huge[9] = 0xff;
  EXPECT_THROW(deserialize(huge.data(), huge.size()), Error);
}

TEST(IR, InferenceByFamily) {
  Op add;
  add.kind = OpKind::Add;
  add.inputs = {contiguous_desc({4, 1, 3}, DType::F64), contiguous_desc({5, 1}, DType::F64)};
  infer(add);
  ASSERT_EQ(add.outputs.size(), 1u);
  EXPECT_EQ(add.outputs[0].shape, (Shape{4, 5, 3}));
  EXPECT_EQ(add.outputs[0].dtype, DType::F64);

  Op lt = add;
  lt.kind = OpKind::Lt;
  infer(lt);
  EXPECT_EQ(lt.outputs[0].dtype, DType::Bool);

  Op bad = add;
  bad.inputs[1] = contiguous_desc({2}, DType::F64);
  try {
    infer(bad);
    FAIL() << "expected a broadcast error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[Add]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 1, 3]"), std::string::npos) << e.what();
  }

  Op sum;
  sum.kind = OpKind::Sum;
  sum.attrs.ints = {0, 0, 2};
  sum.attrs.dtype = DType::I64;
  sum.inputs = {contiguous_desc({2, 3, 4}, DType::I32)};
  infer(sum);
  EXPECT_EQ(sum.outputs[0].shape, (Shape{3}));
  EXPECT_EQ(sum.outputs[0].dtype, DType::I64);
  sum.attrs.ints[0] = 1;
  infer(sum);
  EXPECT_EQ(sum.outputs[0].shape, (Shape{1, 3, 1}));

  Op cast;
  cast.kind = OpKind::Cast;
  cast.attrs.dtype = DType::BF16;
  cast.inputs = {contiguous_desc({}, DType::F32)};
  infer(cast);
  EXPECT_EQ(cast.outputs[0].shape, Shape{});
  EXPECT_EQ(cast.outputs[0].dtype, DType::BF16);

  Op where;
  where.kind = OpKind::Where;
  where.inputs = {contiguous_desc({3, 1}, DType::F32), contiguous_desc({3}, DType::F32),
                  contiguous_desc({1}, DType::F32)};
  EXPECT_THROW(infer(where), Error);  // condition must be bool
  where.inputs[0].dtype = DType::Bool;
  infer(where);
  EXPECT_EQ(where.outputs[0].shape, (Shape{3, 3}));

  Op fill;
  fill.kind = OpKind::Fill;
  fill.attrs.ints = {1, 7, 2, 0, 5};
  fill.attrs.dtype = DType::I16;
  infer(fill);
  EXPECT_EQ(fill.outputs[0].shape, (Shape{2, 0, 5}));
}

namespace {
/// An element that counts the live objects and carries a heap-backed value, so a missing or
/// doubled construction or destruction in InlineVec shows up.
struct Counted {
  static inline int live = 0;
  static inline bool throw_on_copy = false;
  std::string v;
  explicit Counted(std::string s = {}) : v(std::move(s)) { ++live; }
  Counted(const Counted& o) : v(o.v) {
    if (throw_on_copy) throw std::runtime_error("copy");
    ++live;
  }
  Counted(Counted&& o) noexcept : v(std::move(o.v)) { ++live; }
  Counted& operator=(const Counted&) = default;
  Counted& operator=(Counted&&) = default;
  ~Counted() { --live; }
  friend bool operator==(const Counted& a, const Counted& b) { return a.v == b.v; }
};
}  // namespace

// An op's operand lists (InlineVec) against std::vector, through random edits: growing past the
// inline capacity, copies and moves of inline and heap states, appending one of its own
// elements while it grows.
TEST(IR, InlineVecMatchesStdVector) {
  std::mt19937 g(7);
  {
    InlineVec<Counted, 3> a, b;
    std::vector<Counted> ra, rb;
    for (int step = 0; step < 4000; ++step) {
      const std::string s = "value number " + std::to_string(step);  // past the small-string size
      switch (g() % 10) {
        case 0:
        case 1:
        case 2:
          a.emplace_back(s);
          ra.emplace_back(s);
          break;
        case 3:
          if (!a.empty()) {
            a.push_back(a.front());  // may reallocate while reading its argument
            ra.push_back(ra.front());
          }
          break;
        case 4:
          if (!a.empty()) {
            a.pop_back();
            ra.pop_back();
          }
          break;
        case 5: {
          const size_t n = g() % 7;
          a.resize(n);
          ra.resize(n);
          break;
        }
        case 6:
          b = a;
          rb = ra;
          break;
        case 7:
          a = std::move(b);
          ra = std::move(rb);
          b.clear();
          rb.clear();
          break;
        case 8: {
          InlineVec<Counted, 3> c(std::move(a));
          a = c;
          break;
        }
        default:
          if (g() % 4 == 0) {
            a = {Counted("x"), Counted("y")};
            ra = {Counted("x"), Counted("y")};
          }
      }
      ASSERT_EQ(a.size(), ra.size()) << "step " << step;
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i].v, ra[i].v) << "step " << step;
      ASSERT_EQ(b.size(), rb.size());
      ASSERT_EQ(Counted::live, static_cast<int>(a.size() + b.size() + ra.size() + rb.size())) << "step " << step;
    }
    // A constructor that throws leaves the vector as it was, inline or on the heap.
    for (size_t n : {size_t{1}, size_t{3}, size_t{5}}) {
      InlineVec<Counted, 3> t;
      for (size_t i = 0; i < n; ++i) t.emplace_back("e" + std::to_string(i));
      const int live = Counted::live;
      Counted::throw_on_copy = true;
      EXPECT_THROW(t.push_back(t.front()), std::runtime_error);
      Counted::throw_on_copy = false;
      EXPECT_EQ(t.size(), n);
      EXPECT_EQ(Counted::live, live);
      EXPECT_EQ(t.back().v, "e" + std::to_string(n - 1));
    }
    InlineVec<Counted, 3> same(a.begin(), a.end());
    EXPECT_TRUE(same == a);
    if (!same.empty()) same.back().v += "!";
    EXPECT_EQ(same == a, a.empty());
  }
  EXPECT_EQ(Counted::live, 0);
  // An op keeps its operands inline, and copies of it compare equal.
  Op op;
  op.kind = OpKind::Add;
  op.inputs = {random_desc(g), random_desc(g)};
  op.outputs.push_back(random_desc(g));
  Op copy = op;
  EXPECT_TRUE(copy == op);
  copy.inputs.push_back(random_desc(g));
  copy.inputs.push_back(random_desc(g));  // past the inline three
  EXPECT_FALSE(copy == op);
  copy.inputs.resize(2);
  EXPECT_TRUE(copy == op);
}
