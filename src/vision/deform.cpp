// SPDX-License-Identifier: MIT OR Apache-2.0
// deform_conv2d (torchvision.ops semantics). The sampling positions are tensors (regular grid
// plus offsets), so everything is written with tensor ops: the four bilinear corners of every
// sample are read with one index_select, weighted (bilinear weight x validity x mask), summed
// into deformable im2col columns [B, Cin * kh * kw, oh * ow] and multiplied by the grouped
// weight. Autodiff gives the gradients with respect to every input; the floor of the position
// is a constant, so the offset gradient is the derivative of the bilinear weights, as
// torchvision's (zero for a sample at or beyond one pixel outside the input).
#include "kiln/vision/deform.h"

#include <vector>

#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::vision {

namespace {

std::string shape_of(const Tensor& t) { return t.defined() ? to_string(t.shape()) : "undefined"; }

/// The geometry of one call, checked.
struct DeformGeometry {
  int64_t b, cin, h, w, cout, kh, kw, gw, go, oh, ow;
};

DeformGeometry check_deform(const Tensor& input, const Tensor& offset, const Tensor& weight, const Tensor& bias,
                            const DeformConvOptions& o, const Tensor& mask) {
  const char* op = "vision::deform_conv2d";
  KILN_CHECK(input.defined() && offset.defined() && weight.defined(), op, "input, offset and weight must be defined");
  KILN_CHECK(input.dim() == 4 && offset.dim() == 4 && weight.dim() == 4, op,
             "input [B, Cin, H, W], offset [B, 2 G kh kw, oh, ow] and weight [Cout, Cin / groups, kh, kw] expected, "
             "got "
                 << shape_of(input) << ", " << shape_of(offset) << " and " << shape_of(weight));
  KILN_CHECK(
      is_floating(input.dtype()) && offset.dtype() == input.dtype() && weight.dtype() == input.dtype() &&
          (!bias.defined() || bias.dtype() == input.dtype()) && (!mask.defined() || mask.dtype() == input.dtype()),
      op, "input, offset, weight, mask and bias must share one float dtype, got input " << dtype_name(input.dtype()));
  KILN_CHECK(o.stride.height > 0 && o.stride.width > 0 && o.dilation.height > 0 && o.dilation.width > 0 &&
                 o.padding.height >= 0 && o.padding.width >= 0,
             op,
             "stride and dilation must be positive and padding not negative, got stride "
                 << o.stride.height << " x " << o.stride.width << ", padding " << o.padding.height << " x "
                 << o.padding.width << ", dilation " << o.dilation.height << " x " << o.dilation.width);
  DeformGeometry g{};
  g.b = input.size(0), g.cin = input.size(1), g.h = input.size(2), g.w = input.size(3);
  g.cout = weight.size(0), g.kh = weight.size(2), g.kw = weight.size(3);
  KILN_CHECK(g.kh > 0 && g.kw > 0 && weight.size(1) > 0 && g.cin % weight.size(1) == 0, op,
             "weight " << shape_of(weight) << " does not fit input " << shape_of(input)
                       << " (Cin must be a multiple of weight.size(1))");
  g.gw = g.cin / weight.size(1);
  KILN_CHECK(g.cout % g.gw == 0, op,
             "output channels " << g.cout << " must be a multiple of the " << g.gw << " weight groups, weight "
                                << shape_of(weight));
  const int64_t taps = g.kh * g.kw;
  KILN_CHECK(offset.size(1) > 0 && offset.size(1) % (2 * taps) == 0, op,
             "offset " << shape_of(offset) << " needs a multiple of 2 * " << taps << " channels");
  g.go = offset.size(1) / (2 * taps);
  KILN_CHECK(g.cin % g.go == 0, op,
             "input channels " << g.cin << " must be a multiple of the " << g.go << " offset groups, offset "
                               << shape_of(offset));
  g.oh = (g.h + 2 * o.padding.height - o.dilation.height * (g.kh - 1) - 1) / o.stride.height + 1;
  g.ow = (g.w + 2 * o.padding.width - o.dilation.width * (g.kw - 1) - 1) / o.stride.width + 1;
  KILN_CHECK(
      g.oh > 0 && g.ow > 0, op,
      "the kernel " << g.kh << " x " << g.kw << " does not fit input " << shape_of(input) << " with its padding");
  KILN_CHECK(offset.size(0) == g.b && offset.size(2) == g.oh && offset.size(3) == g.ow, op,
             "offset [" << g.b << ", " << offset.size(1) << ", " << g.oh << ", " << g.ow << "] expected, got "
                        << shape_of(offset));
  KILN_CHECK(
      !mask.defined() || (mask.dim() == 4 && mask.size(0) == g.b && mask.size(1) == g.go * taps &&
                          mask.size(2) == g.oh && mask.size(3) == g.ow),
      op,
      "mask [" << g.b << ", " << g.go * taps << ", " << g.oh << ", " << g.ow << "] expected, got " << shape_of(mask));
  KILN_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == g.cout), op,
             "bias [" << g.cout << "] expected, got " << shape_of(bias));
  const Device d = input.device();
  KILN_CHECK(offset.device() == d && weight.device() == d && (!bias.defined() || bias.device() == d) &&
                 (!mask.defined() || mask.device() == d),
             op, "all tensors must be on one device");
  return g;
}

}  // namespace

Tensor deform_conv2d(const Tensor& input, const Tensor& offset, const Tensor& weight, const Tensor& bias,
                     const DeformConvOptions& options, const Tensor& mask) {
  const DeformGeometry g = check_deform(input, offset, weight, bias, options, mask);
  const Device dev = input.device();
  const DType dt = input.dtype();
  const int64_t taps = g.kh * g.kw, cells = g.oh * g.ow, cg = g.cin / g.go;
  Tensor out;
  if (g.b == 0 || g.h * g.w == 0 || g.cin == 0) {
    out = zeros({g.b, g.cout, g.oh, g.ow}, {.dtype = dt, .device = dev});
  } else {
    // The regular sampling grid: tap k of output cell p reads (base_y, base_x) + offset.
    std::vector<double> by(static_cast<size_t>(taps * cells)), bx(by.size());
    for (int64_t k = 0; k < taps; ++k)
      for (int64_t p = 0; p < cells; ++p) {
        const auto i = static_cast<size_t>(k * cells + p);
        by[i] = static_cast<double>((p / g.ow) * options.stride.height - options.padding.height +
                                    (k / g.kw) * options.dilation.height);
        bx[i] = static_cast<double>((p % g.ow) * options.stride.width - options.padding.width +
                                    (k % g.kw) * options.dilation.width);
      }
    const Tensor off = offset.reshape({g.b, g.go, taps, 2, cells});
    const Tensor py = off.select(3, 0) + tensor(by, {1, 1, taps, cells}, dev).to(dt);  // [B, G, K, P]
    const Tensor px = off.select(3, 1) + tensor(bx, {1, 1, taps, cells}, dev).to(dt);
    const Tensor y0 = floor(py.detach()), x0 = floor(px.detach());
    const Tensor ly = py - y0, lx = px - x0;
    // torchvision reads nothing for a sample at or beyond one pixel outside the input.
    const Tensor inside = (py.detach() > -1) & (py.detach() < static_cast<double>(g.h)) & (px.detach() > -1) &
                          (px.detach() < static_cast<double>(g.w));
    const Tensor yi = y0.to(i64), xi = x0.to(i64);
    // Flat row of (batch, offset group) in the pixel table below.
    const Tensor plane = (arange(g.b * g.go, i64, dev) * (g.h * g.w)).reshape({g.b, g.go, 1, 1});
    std::vector<Tensor> idx, wts;
    for (int corner = 0; corner < 4; ++corner) {
      const int64_t dy = corner >> 1, dx = corner & 1;
      const Tensor yc = yi + dy, xc = xi + dx;
      const Tensor valid = inside & (yc >= 0) & (yc < g.h) & (xc >= 0) & (xc < g.w);
      idx.push_back(plane + clamp(yc, 0, g.h - 1) * g.w + clamp(xc, 0, g.w - 1));
      const Tensor wy = dy ? ly : 1 - ly, wx = dx ? lx : 1 - lx;
      wts.push_back(wy * wx * valid.to(dt));
    }
    Tensor wt = stack(wts, -1);  // [B, G, K, P, 4]
    if (mask.defined()) wt = wt * mask.reshape({g.b, g.go, taps, cells, 1});
    const Tensor pixels =
        input.reshape({g.b, g.go, cg, g.h * g.w}).permute({0, 1, 3, 2}).reshape({g.b * g.go * g.h * g.w, cg});
    const Tensor picked = index_select(pixels, 0, stack(idx, -1).reshape({-1})) * wt.reshape({-1, 1});
    const Tensor cols = picked.reshape({g.b, g.go, taps, cells, 4, cg})
                            .sum({4})
                            .permute({0, 1, 4, 2, 3})  // [B, G, Cg, K, P]
                            .reshape({g.b, g.gw, (g.cin / g.gw) * taps, cells});
    const Tensor wm = weight.reshape({1, g.gw, g.cout / g.gw, (g.cin / g.gw) * taps});
    out = wm.matmul(cols).reshape({g.b, g.cout, g.oh, g.ow});
  }
  if (bias.defined()) out = out + bias.reshape({1, g.cout, 1, 1});
  return out;
}

}  // namespace kiln::vision
