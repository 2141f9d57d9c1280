// SPDX-License-Identifier: MIT OR Apache-2.0
// Default batchers: items gathered on the host into one buffer, then one tensor per field.
#include <cstring>

#include "kiln/data/loader.h"
#include "kiln/ops.h"

namespace kiln::data {

Batch batch_images(std::vector<ImageItem> items, const Device& device) {
  KILN_CHECK(!items.empty(), "data::batch_images", "no items");
  const Shape shape = items[0].image.shape();
  const int64_t per = shape_numel(shape);
  std::vector<float> pixels(items.size() * static_cast<size_t>(per));
  std::vector<int64_t> labels(items.size());
  std::vector<uint8_t> bytes;  // one u8 image at a time, reused
  for (size_t i = 0; i < items.size(); ++i) {
    const Tensor& im = items[i].image;
    KILN_CHECK(im.defined() && im.shape() == shape, "data::batch_images",
               "item " << static_cast<long long>(i) << " has image shape " << (im.defined() ? im.shape() : Shape{})
                       << ", item 0 has " << shape << " (resize the images to one size)");
    float* dst = pixels.data() + i * static_cast<size_t>(per);
    if (im.dtype() == u8) {
      bytes.resize(static_cast<size_t>(per));
      im.copy_to_host(bytes.data(), u8);
      for (int64_t k = 0; k < per; ++k) dst[k] = static_cast<float>(bytes[static_cast<size_t>(k)]) * (1.0f / 255.0f);
    } else {
      im.copy_to_host(dst, f32);
    }
    labels[i] = items[i].label;
  }
  Shape full{static_cast<int64_t>(items.size())};
  for (int64_t d : shape) full.push_back(d);
  Batch b;
  b.input = from_blob_copy(pixels.data(), full, f32, device);
  b.target = from_blob_copy(labels.data(), Shape{static_cast<int64_t>(items.size())}, i64, device);
  return b;
}

namespace {
Tensor stack_rows(const std::vector<TabularItem>& items, bool target, const Device& device) {
  const Tensor& first = target ? items[0].target : items[0].features;
  KILN_CHECK(first.defined(), "data::batch_tabular", (target ? "target" : "features") << " of item 0 is undefined");
  const DType dt = first.dtype();
  const int64_t per = first.numel();
  const size_t es = dtype_size(dt);
  std::vector<uint8_t> buf(items.size() * static_cast<size_t>(per) * es);
  for (size_t i = 0; i < items.size(); ++i) {
    const Tensor& t = target ? items[i].target : items[i].features;
    KILN_CHECK(t.defined() && t.shape() == first.shape(), "data::batch_tabular",
               "item " << static_cast<long long>(i) << " has " << (target ? "target" : "features") << " shape "
                       << (t.defined() ? t.shape() : Shape{}) << ", item 0 has " << first.shape());
    t.copy_to_host(buf.data() + i * static_cast<size_t>(per) * es, dt);
  }
  Shape full{static_cast<int64_t>(items.size())};
  for (int64_t d : first.shape()) full.push_back(d);
  if (target && !is_floating(dt) && per == 1) full = Shape{static_cast<int64_t>(items.size())};
  return from_blob_copy(buf.data(), full, dt, device);
}
}  // namespace

Batch batch_tabular(std::vector<TabularItem> items, const Device& device) {
  KILN_CHECK(!items.empty(), "data::batch_tabular", "no items");
  Batch b;
  b.input = stack_rows(items, false, device);
  b.target = stack_rows(items, true, device);
  return b;
}

}  // namespace kiln::data
