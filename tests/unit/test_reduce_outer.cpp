// SPDX-License-Identifier: MIT OR Apache-2.0
// cpu::outer (backends/cpu/reduce_outer.h): Sum and Mean over leading rows computed leaf block by
// leaf block, then folded, against the Sum / Mean kernels (sum / mean over the leading dims on
// the plain CPU): the same bits, for row counts that are and are not multiples of a leaf, and
// blocks of one leaf or several.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cstring>
#include <vector>

#include "backends/cpu/reduce_outer.h"

using namespace kiln;

TEST(ReduceOuter, LeavesInBlocksThenFinishGiveTheKernelsBits) {
  const Device plain = Device::cpu().without_fusion();
  const int64_t L = cpu::outer::leaf_rows();
  for (DType dt : {f32, f64})
    for (bool mean : {false, true})
      for (Shape shape : {Shape{1000, 300}, Shape{17, 5}, Shape{4096, 8}, Shape{6, 40, 7}, Shape{33, 5000}}) {
        manual_seed(3);
        Tensor x = randn(shape, {.dtype = dt, .device = plain}) * 100.0;
        Dims lead;
        for (int64_t d = 0; d + 1 < x.dim(); ++d) lead.push_back(d);
        if (shape.size() == 3) lead = {0, 1};
        Tensor ref = mean ? x.mean(lead) : x.sum(lead);
        // The same op description the kernel got.
        ir::Op op;
        op.kind = mean ? ir::OpKind::Mean : ir::OpKind::Sum;
        op.inputs = {ir::contiguous_desc(shape, dt)};
        op.attrs.ints = {0};
        for (int64_t d : lead) op.attrs.ints.push_back(d);
        op.outputs = {ir::contiguous_desc(ref.shape(), dt)};
        int64_t rows = 0, width = 0;
        ASSERT_TRUE(cpu::outer::supports(op, rows, width)) << to_string(shape);
        const size_t esz = dtype_size(dt);
        std::vector<char> xs(static_cast<size_t>(x.numel()) * esz), partial, out(static_cast<size_t>(width) * esz);
        if (dt == f32) {
          auto v = x.to_vector<float>();
          std::memcpy(xs.data(), v.data(), xs.size());
        } else {
          auto v = x.to_vector<double>();
          std::memcpy(xs.data(), v.data(), xs.size());
        }
        for (int64_t block : {L, 3 * L}) {
          partial.assign(static_cast<size_t>((rows + L - 1) / L * width) * esz, 0);
          for (int64_t r0 = 0; r0 < rows; r0 += block)
            cpu::outer::leaves(dt, xs.data(), width, r0, std::min(rows, r0 + block), partial.data());
          cpu::outer::finish(dt, mean, rows, width, partial.data(), out.data());
          auto want = ref.to_vector<double>();
          for (int64_t c = 0; c < width; ++c) {
            const double got = dt == f32 ? reinterpret_cast<const float*>(out.data())[c]
                                         : reinterpret_cast<const double*>(out.data())[c];
            ASSERT_EQ(got, want[static_cast<size_t>(c)]) << to_string(shape) << " column " << c << " block " << block;
          }
        }
      }
  // Not the outer layout: the trailing dim, a single row, rows of fewer than 4 elements.
  ir::Op op;
  op.kind = ir::OpKind::Sum;
  op.inputs = {ir::contiguous_desc(Shape{8, 16}, f32)};
  op.outputs = {ir::contiguous_desc(Shape{8}, f32)};
  op.attrs.ints = {0, 1};
  int64_t rows = 0, width = 0;
  EXPECT_FALSE(cpu::outer::supports(op, rows, width));
  op.inputs = {ir::contiguous_desc(Shape{1, 16}, f32)};
  op.attrs.ints = {0, 0};
  EXPECT_FALSE(cpu::outer::supports(op, rows, width));
  op.inputs = {ir::contiguous_desc(Shape{8, 3}, f32)};
  EXPECT_FALSE(cpu::outer::supports(op, rows, width));
}
