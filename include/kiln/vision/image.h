// SPDX-License-Identifier: MIT OR Apache-2.0
// Image processing on NCHW tensors with OpenCV's semantics (function names follow OpenCV, in
// snake case). f32 images are in [0, 1] unless said otherwise; u8 images in [0, 255] give u8
// results where OpenCV does. Ops built from tensor ops (colour, filters, morphology, binary
// threshold) run on every device and under autodiff for f32; connected components, Otsu,
// adaptive threshold and histogram equalisation run on the host.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::vision {

/// A kernel size (height, width), both odd unless said otherwise.
struct KSize {
  int64_t height = 3;
  int64_t width = 3;
};

// ---- colour (x [N, 3, H, W]; gray [N, 1, H, W]) ----------------------------------------------

/// Y = 0.299 R + 0.587 G + 0.114 B -> [N, 1, H, W] (cv::COLOR_RGB2GRAY; u8 rounded).
Tensor rgb_to_gray(const Tensor& rgb);
/// [N, 1, H, W] -> [N, 3, H, W] with three equal channels (cv::COLOR_GRAY2RGB).
Tensor gray_to_rgb(const Tensor& gray);
/// Swaps the first and third channels (cv::COLOR_RGB2BGR; also BGR to RGB).
Tensor rgb_to_bgr(const Tensor& x);
/// f32 RGB in [0, 1] -> HSV with H in degrees [0, 360), S and V in [0, 1] (cv::COLOR_RGB2HSV).
Tensor rgb_to_hsv(const Tensor& rgb);
/// The inverse of rgb_to_hsv (cv::COLOR_HSV2RGB).
Tensor hsv_to_rgb(const Tensor& hsv);
/// f32 RGB -> YUV: Y as rgb_to_gray, U = 0.492 (B - Y) + 0.5, V = 0.877 (R - Y) + 0.5
/// (cv::COLOR_RGB2YUV).
Tensor rgb_to_yuv(const Tensor& rgb);
/// The inverse of rgb_to_yuv (cv::COLOR_YUV2RGB).
Tensor yuv_to_rgb(const Tensor& yuv);
/// RGB -> CIE L*a*b* (D65, sRGB gamma), as cv::COLOR_RGB2Lab: float RGB in [0, 1] gives L in
/// [0, 100] and a, b in about [-127, 127]; u8 gives L * 255 / 100, a + 128, b + 128, rounded.
Tensor rgb_to_lab(const Tensor& rgb);
/// The inverse of rgb_to_lab (cv::COLOR_Lab2RGB), RGB clipped to [0, 1] (u8: [0, 255]).
Tensor lab_to_rgb(const Tensor& lab);

// ---- filters (x [N, C, H, W], f32 or u8; borders reflect without repeating the edge, as
// OpenCV's BORDER_REFLECT_101, unless said otherwise) ---------------------------------------------

/// The 1-d Gaussian kernel of cv::getGaussianKernel (sigma <= 0: 0.3 ((k - 1) / 2 - 1) + 0.8,
/// and OpenCV's fixed tables for k <= 9), as f32 [k].
Tensor gaussian_kernel(int64_t ksize, double sigma);
/// Separable Gaussian blur (cv::GaussianBlur; sigma_y <= 0 takes sigma_x).
Tensor gaussian_blur(const Tensor& x, KSize ksize, double sigma_x, double sigma_y = 0);
/// Mean (normalize) or sum over ksize windows (cv::boxFilter, cv::blur).
Tensor box_filter(const Tensor& x, KSize ksize, bool normalize = true);
/// Median of ksize x ksize windows, edges replicated (cv::medianBlur; odd ksize); on the host
/// unless x requires a gradient (then tensor ops).
Tensor median_blur(const Tensor& x, int64_t ksize);
/// Derivative dx, dy (orders 0 to 2) with Sobel kernels of size ksize (1, 3, 5 or 7) times
/// scale plus delta, as f32 (cv::Sobel with ddepth CV_32F).
Tensor sobel(const Tensor& x, int64_t dx, int64_t dy, int64_t ksize = 3, double scale = 1, double delta = 0);
/// The Laplacian d2/dx2 + d2/dy2 (ksize 1: the 3 x 3 cross kernel; 3 to 7: sums of Sobel
/// second derivatives), as f32 (cv::Laplacian with ddepth CV_32F).
Tensor laplacian(const Tensor& x, int64_t ksize = 1, double scale = 1, double delta = 0);
/// cv::bilateralFilter of x [N, C, H, W] with C = 1 or 3 (u8, f32 or f64, on the host): each
/// pixel becomes the mean of the disc of diameter d around it (d <= 0: from sigma_space),
/// weighted by exp(-r^2 / 2 sigma_space^2) and exp(-dc^2 / 2 sigma_color^2), dc the L1 colour
/// distance (float images: OpenCV's interpolated table over the image's range; a constant image
/// is returned as it is).
Tensor bilateral_filter(const Tensor& x, int64_t d, double sigma_color, double sigma_space);

// ---- morphology (x [N, C, H, W], f32 or u8; kernel [kh, kw], nonzero = in the element,
// anchored at its centre; outside the image is ignored, as OpenCV's default border) --------------

/// A structuring element [h, w] u8 of shape "rect", "cross" or "ellipse"
/// (cv::getStructuringElement).
Tensor structuring_element(const std::string& shape, KSize ksize);
/// Minimum over the element (cv::erode), iterations times.
Tensor erode(const Tensor& x, const Tensor& kernel, int64_t iterations = 1);
/// Maximum over the element (cv::dilate), iterations times.
Tensor dilate(const Tensor& x, const Tensor& kernel, int64_t iterations = 1);
/// cv::morphologyEx: op "erode", "dilate", "open", "close", "gradient", "tophat" or "blackhat".
Tensor morphology(const Tensor& x, const std::string& op, const Tensor& kernel, int64_t iterations = 1);

// ---- thresholds and histograms -------------------------------------------------------------------

/// cv::threshold with a fixed thresh: type "binary" (x > thresh ? maxval : 0), "binary_inv",
/// "trunc", "tozero" or "tozero_inv".
Tensor threshold(const Tensor& x, double thresh, double maxval, const std::string& type = "binary");
/// Otsu's threshold of each [H, W] plane of x [N, C, H, W] u8 (cv::THRESH_OTSU): the plane's
/// thresholds [N, C] (f64) and x > threshold ? maxval : 0 (u8).
std::pair<Tensor, Tensor> threshold_otsu(const Tensor& x, double maxval = 255);
/// cv::adaptiveThreshold with ADAPTIVE_THRESH_MEAN_C on u8 x [N, C, H, W]: x > mean of the
/// block_size window (edges replicated) - c ? maxval : 0 ("binary") or the opposite
/// ("binary_inv").
Tensor adaptive_threshold_mean(const Tensor& x, double maxval, int64_t block_size, double c,
                               const std::string& type = "binary");
/// cv::equalizeHist of each plane of u8 x [N, C, H, W].
Tensor equalize_hist(const Tensor& x);

// ---- geometric warps ------------------------------------------------------------------------------

/// An image size (height, width).
struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
};

/// The [2, 3] f64 matrix rotating by angle degrees (counter-clockwise, the origin at the top
/// left) about (center_x, center_y) and scaling (cv::getRotationMatrix2D).
Tensor rotation_matrix_2d(double center_x, double center_y, double angle, double scale = 1);
/// cv::warpAffine: output [N, C, dsize] with pixel (x, y) read from the input at m^-1 (x, y)
/// (at m (x, y) with inverse_map), interpolation "bilinear" (OpenCV's 1/32-pixel weights) or
/// "nearest", zeros outside the input. Differentiable with respect to x.
Tensor warp_affine(const Tensor& x, const Tensor& m, ImageSize dsize, const std::string& interpolation = "bilinear",
                   bool inverse_map = false);

/// cv::getPerspectiveTransform: the [3, 3] f64 homography mapping the four points src [4, 2]
/// (x, y rows) onto dst [4, 2].
Tensor perspective_transform(const Tensor& src, const Tensor& dst);
/// cv::warpPerspective: output [N, C, dsize] with pixel (x, y) read from the input at
/// m^-1 (x, y, 1) (at m (x, y, 1) with inverse_map), projected; interpolation "bilinear"
/// (OpenCV's 1/32-pixel weights) or "nearest", zeros outside. Differentiable with respect to x.
Tensor warp_perspective(const Tensor& x, const Tensor& m, ImageSize dsize,
                        const std::string& interpolation = "bilinear", bool inverse_map = false);

/// Resizes x [N, C, H, W] (f32, f64 or u8) to size with torch.nn.functional.interpolate's rules
/// (align_corners=false): "nearest", "bilinear" or "bicubic". With antialias (bilinear and
/// bicubic) the filter widens by the scale when shrinking, as interpolate(antialias=True) and
/// torchvision's resize (the cubic then uses a = -0.5, as PIL); u8 is rounded and saturated.
Tensor resize(const Tensor& x, ImageSize size, const std::string& interpolation = "bilinear", bool antialias = true);

/// Options of rotate (torchvision.transforms.v2.functional.rotate).
struct RotateOptions {
  std::string interpolation = "nearest";        ///< "nearest" or "bilinear"
  bool expand = false;                          ///< grow the output to hold the whole turned image
  std::optional<std::array<double, 2>> center;  ///< (x, y) in pixels; default the image centre
  std::optional<double> fill;                   ///< the value outside the input (default 0, unblended)
};
/// Rotates x [N, C, H, W] by angle degrees counter-clockwise, as torchvision's rotate:
/// multiples of 90 degrees about the centre are exact, others sample with grid_sample.
Tensor rotate(const Tensor& x, double angle, const RotateOptions& options = {});

/// Options of affine (torchvision.transforms.v2.functional.affine).
struct AffineOptions {
  std::string interpolation = "nearest";
  std::optional<std::array<double, 2>> center;
  std::optional<double> fill;
};
/// torchvision's affine: rotation by angle degrees (clockwise), scale and shear (degrees, x and
/// y) about the centre, then translation (pixels), output of the input's size.
Tensor affine(const Tensor& x, double angle, std::array<double, 2> translate, double scale,
              std::array<double, 2> shear = {0, 0}, const AffineOptions& options = {});

// ---- connected components ------------------------------------------------------------------------

/// Components of the nonzero pixels of one image, as cv::connectedComponentsWithStats: label
/// 0 is the background, components are numbered in the raster order of their first pixel.
struct Components {
  int64_t count = 0;  ///< labels, background included
  Tensor labels;      ///< [H, W] i32
  Tensor stats;       ///< [count, 5] i32: left, top, width, height, area (-1, INT32_MAX, 0, 0, 0 for
                      ///< an empty background, as OpenCV)
  Tensor centroids;   ///< [count, 2] f64: x, y
};

/// Labels the nonzero pixels of x ([H, W], [1, H, W] or [1, 1, H, W], any dtype) with
/// connectivity 4 or 8.
Components connected_components(const Tensor& x, int64_t connectivity = 8);
/// The same for each image of a batch x [N, 1, H, W].
std::vector<Components> connected_components_batch(const Tensor& x, int64_t connectivity = 8);

}  // namespace kiln::vision
