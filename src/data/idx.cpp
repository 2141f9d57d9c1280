// SPDX-License-Identifier: MIT OR Apache-2.0
// IDX files (the MNIST format) and the in-memory image classification dataset.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "data/io_util.h"
#include "kiln/data/sources.h"
#include "kiln/ops.h"

namespace kiln::data {

namespace {

constexpr const char* kIdx = "data::read_idx";

struct IdxType {
  DType dtype;
  size_t size;
};

IdxType idx_type(uint8_t code, const std::string& path) {
  switch (code) {
    case 0x08:
      return {u8, 1};
    case 0x09:
      return {i8, 1};
    case 0x0B:
      return {i16, 2};
    case 0x0C:
      return {i32, 4};
    case 0x0D:
      return {f32, 4};
    case 0x0E:
      return {f64, 8};
    default:
      break;
  }
  KILN_CHECK(false, kIdx,
             "'" << path << "': unknown IDX data type code 0x" << std::to_string(code)
                 << " (expected 8, 9, 11, 12, 13 or 14)");
  return {u8, 1};
}

bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

Tensor read_idx(const std::string& path) {
  io::GzFile f(path, kIdx);
  std::vector<uint8_t> head;
  f.read(head, 4);
  KILN_CHECK(head.size() == 4, kIdx,
             "'" << path << "': truncated header (" << static_cast<long long>(head.size())
                 << " bytes; an IDX file starts with 4 magic bytes)");
  KILN_CHECK(head[0] == 0 && head[1] == 0, kIdx,
             "'" << path << "': wrong magic number (first two bytes must be 0; is this an IDX file?)");
  IdxType ty = idx_type(head[2], path);
  int ndim = head[3];
  KILN_CHECK(ndim >= 1, kIdx, "'" << path << "': an IDX file needs at least one dimension");
  std::vector<uint8_t> dims_raw;
  f.read(dims_raw, static_cast<size_t>(ndim) * 4);
  KILN_CHECK(dims_raw.size() == static_cast<size_t>(ndim) * 4, kIdx,
             "'" << path << "': truncated header (" << ndim << " dimensions announced, the file ends inside them)");
  Shape shape;
  uint64_t count = 1;
  bool overflow = false;
  for (int d = 0; d < ndim; ++d) {
    const uint8_t* p = dims_raw.data() + 4 * d;
    uint64_t v = (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | p[3];
    shape.push_back(static_cast<int64_t>(v));
    if (v != 0 && count > (uint64_t{1} << 50) / v) overflow = true;
    count *= v;
  }
  KILN_CHECK(!overflow, kIdx, "'" << path << "': dimensions " << shape << " are too large");
  const uint64_t bytes = count * ty.size;
  std::vector<uint8_t> data;
  // Read one byte more than announced to detect trailing data; memory grows only as data arrives.
  size_t got = f.read(data, static_cast<size_t>(bytes) + 1);
  KILN_CHECK(got >= bytes, kIdx,
             "'" << path << "': truncated data: dimensions " << shape << " need " << static_cast<long long>(bytes)
                 << " bytes of " << to_string(ty.dtype) << ", the file has " << static_cast<long long>(got));
  KILN_CHECK(got == bytes, kIdx,
             "'" << path << "': dimensions " << shape << " do not match the file size (more than "
                 << static_cast<long long>(bytes) << " data bytes)");
  // IDX data is big-endian; swap multi-byte elements to host (little-endian) order.
  if (ty.size > 1) {
    for (size_t i = 0; i < data.size(); i += ty.size) std::reverse(data.begin() + i, data.begin() + i + ty.size);
  }
  return from_blob_copy(data.data(), shape, ty.dtype, Device::cpu());
}

ImageClassificationDataset::ImageClassificationDataset(std::vector<uint8_t> images, std::vector<int64_t> labels,
                                                       Shape shape, DType dtype)
    : images_(std::move(images)), labels_(std::move(labels)), shape_(std::move(shape)), dtype_(dtype) {
  KILN_CHECK(dtype_ == u8 || dtype_ == f32, "data::ImageClassificationDataset",
             "dtype must be u8 or f32, got " << dtype_);
  KILN_CHECK(shape_.size() == 3, "data::ImageClassificationDataset", "image shape must be [C, H, W], got " << shape_);
  KILN_CHECK(images_.size() == labels_.size() * static_cast<size_t>(shape_numel(shape_)),
             "data::ImageClassificationDataset",
             "have " << static_cast<long long>(images_.size()) << " bytes for "
                     << static_cast<long long>(labels_.size()) << " images of shape " << shape_);
}

ImageItem ImageClassificationDataset::get(size_t i) const {
  detail::check_index(i, labels_.size(), "data::ImageClassificationDataset");
  const size_t per = static_cast<size_t>(shape_numel(shape_));
  const uint8_t* src = images_.data() + i * per;
  ImageItem it;
  it.label = labels_[i];
  if (dtype_ == u8) {
    it.image = from_blob_copy(src, shape_, u8, Device::cpu());
  } else {
    std::vector<float> v(per);
    for (size_t k = 0; k < per; ++k) v[k] = static_cast<float>(src[k]) * (1.0f / 255.0f);
    it.image = from_blob_copy(v.data(), shape_, f32, Device::cpu());
  }
  return it;
}

int64_t ImageClassificationDataset::num_classes() const {
  int64_t m = -1;
  for (int64_t l : labels_) m = std::max(m, l);
  return m + 1;
}

std::shared_ptr<ImageClassificationDataset> idx_classification(const std::string& images_path,
                                                               const std::string& labels_path,
                                                               const IdxOptions& options) {
  constexpr const char* op = "data::idx_classification";
  Tensor images = read_idx(images_path);
  Tensor labels = read_idx(labels_path);
  KILN_CHECK(images.dtype() == u8, op,
             "'" << images_path << "': images must be unsigned bytes, got " << images.dtype());
  KILN_CHECK(images.dim() == 3 || images.dim() == 4, op,
             "'" << images_path << "': images must be [N, H, W] or [N, C, H, W], got " << images.shape());
  KILN_CHECK(
      labels.dim() == 1 && is_integral(labels.dtype()), op,
      "'" << labels_path << "': labels must be a 1-d integer array, got " << labels.dtype() << " " << labels.shape());
  KILN_CHECK(labels.size(0) == images.size(0), op,
             "'" << labels_path << "' has " << labels.size(0) << " labels but '" << images_path << "' has "
                 << images.size(0) << " images");
  Shape shape = images.dim() == 3 ? Shape{1, images.size(1), images.size(2)}
                                  : Shape{images.size(1), images.size(2), images.size(3)};
  std::vector<int64_t> lab = labels.to_vector<int64_t>();
  for (size_t i = 0; i < lab.size(); ++i)
    KILN_CHECK(
        lab[i] >= 0, op,
        "'" << labels_path << "': label " << lab[i] << " of item " << static_cast<long long>(i) << " is negative");
  return std::make_shared<ImageClassificationDataset>(images.to_vector<uint8_t>(), std::move(lab), shape,
                                                      options.dtype);
}

std::shared_ptr<ImageClassificationDataset> mnist(const std::string& dir, bool train, const IdxOptions& options) {
  std::string prefix = dir + "/" + (train ? "train" : "t10k");
  auto pick = [](const std::string& base) {
    if (file_exists(base + ".gz")) return base + ".gz";
    return base;
  };
  std::string images = pick(prefix + "-images-idx3-ubyte");
  std::string labels = pick(prefix + "-labels-idx1-ubyte");
  KILN_CHECK(file_exists(images), "data::mnist",
             "'" << images << "(.gz)' not found (Fashion-MNIST: install the dataset-fashion-mnist package)");
  return idx_classification(images, labels, options);
}

std::shared_ptr<ImageClassificationDataset> fashion_mnist(bool train, const IdxOptions& options) {
  return mnist(kFashionMnistDir, train, options);
}

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

}  // namespace kiln::data
