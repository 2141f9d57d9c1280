// Image decoding (PNG, JPEG), the image-folder dataset and image transforms.
#include <gtest/gtest.h>
#include <kiln/data.h>
#include <kiln/ops.h>

#include <filesystem>

#include "data/data_test_util.h"
#include "test_util.h"

namespace kd = kiln::data;
using kiln::test::data_fixture;
using kiln::test::TempDir;

namespace {
kiln::Tensor u8_image(const std::vector<int>& v, const kiln::Shape& s) {
  std::vector<uint8_t> b(v.begin(), v.end());
  return kiln::from_blob_copy(b.data(), s, kiln::u8, kiln::Device::cpu());
}
}  // namespace

// ---- decoding -----------------------------------------------------------------------------------

TEST(DataImage, DecodesPngFixtures) {
  // Fixtures written by tests/fixtures/data/make_fixtures.py with its own PNG encoder.
  kiln::Tensor g = kd::read_image(data_fixture("gray.png"));
  ASSERT_EQ(g.shape(), (kiln::Shape{1, 3, 4}));
  EXPECT_EQ(g.dtype(), kiln::u8);
  std::vector<int> want;
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x) want.push_back(20 * y + 3 * x);
  EXPECT_EQ(g.to_vector<int>(), want);

  kiln::Tensor c = kd::read_image(data_fixture("rgb.png"));
  ASSERT_EQ(c.shape(), (kiln::Shape{3, 2, 3}));
  std::vector<int> v = c.to_vector<int>();
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) {
      EXPECT_EQ(v[static_cast<size_t>(0 * 6 + y * 3 + x)], 10 * x + y);
      EXPECT_EQ(v[static_cast<size_t>(1 * 6 + y * 3 + x)], 100 + x);
      EXPECT_EQ(v[static_cast<size_t>(2 * 6 + y * 3 + x)], 200 - y);
    }

  kiln::Tensor p = kd::read_image(data_fixture("palette.png"));  // palette expanded to RGB
  ASSERT_EQ(p.shape(), (kiln::Shape{3, 2, 2}));
  EXPECT_EQ(p.to_vector<int>(), (std::vector<int>{1, 40, 250, 1, 2, 50, 251, 2, 3, 60, 252, 3}));
}

TEST(DataImage, DecodesJpegLikePillow) {
  kiln::Tensor j = kd::read_image(data_fixture("rgb.jpg"));
  ASSERT_EQ(j.shape(), (kiln::Shape{3, 8, 8}));
  std::vector<double> ref = kiln::test::read_numbers(data_fixture("rgb_jpg_pixels.txt"));
  std::vector<int> v = j.to_vector<int>();
  ASSERT_EQ(v.size(), ref.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], ref[i], 2) << i;  // IDCT rounding may differ by 1
}

TEST(DataImage, WriteAndReadBack) {
  TempDir dir;
  std::vector<int> px;
  for (int i = 0; i < 3 * 5 * 7; ++i) px.push_back(i * 37 % 256);
  kiln::Tensor im = u8_image(px, {3, 5, 7});
  kd::write_png(dir.file("a.png"), im);
  EXPECT_TRUE(kd::read_image(dir.file("a.png")).equal(im));
  kiln::Tensor rgba = u8_image(std::vector<int>(4 * 2 * 2, 77), {4, 2, 2});
  kd::write_png(dir.file("b.png"), rgba);
  EXPECT_TRUE(kd::read_image(dir.file("b.png")).equal(rgba));
  // JPEG is lossy: a smooth image comes back close.
  std::vector<int> smooth;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 16; ++x) smooth.push_back(60 + 8 * x + 2 * y + 10 * c);
  kiln::Tensor s = u8_image(smooth, {3, 16, 16});
  kd::write_jpeg(dir.file("s.jpg"), s, 95);
  kiln::Tensor back = kd::read_image(dir.file("s.jpg"));
  ASSERT_EQ(back.shape(), s.shape());
  EXPECT_LT((back.to(kiln::f32) - s.to(kiln::f32)).abs().max().item<float>(), 12.0f);
  kiln::test::expect_error([&] { kd::write_jpeg(dir.file("x.jpg"), rgba); }, "data::write_jpeg", "1 or 3 channels");
  kiln::test::expect_error([&] { kd::write_png("/nonexistent/dir/x.png", im); }, "data::write_png", "cannot create");
}

TEST(DataImage, BrokenFilesGiveClearErrors) {
  TempDir dir;
  std::vector<uint8_t> png = kiln::test::read_bytes(data_fixture("rgb.png"));
  // Truncated PNG.
  std::vector<uint8_t> cut(png.begin(), png.begin() + 40);
  kiln::test::write_bytes(dir.file("cut.png"), cut);
  kiln::test::expect_error([&] { kd::read_image(dir.file("cut.png")); }, "data::decode_png", "cut.png");
  // A flipped byte inside IDAT breaks its CRC.
  std::vector<uint8_t> bad = png;
  bad[bad.size() - 20] ^= 0x55;
  kiln::test::write_bytes(dir.file("crc.png"), bad);
  kiln::test::expect_error([&] { kd::read_image(dir.file("crc.png")); }, "data::decode_png", "bad PNG");
  // A header claiming a huge image in a tiny file.
  std::vector<uint8_t> huge = png;
  huge[16] = 0x00;
  huge[17] = 0x7F;  // width 0x7F0000xx
  kiln::test::write_bytes(dir.file("huge.png"), huge);
  kiln::test::expect_error([&] { kd::read_image(dir.file("huge.png")); }, "data::decode_png");
  // Truncated and garbled JPEG.
  std::vector<uint8_t> jpg = kiln::test::read_bytes(data_fixture("rgb.jpg"));
  std::vector<uint8_t> jcut(jpg.begin(), jpg.begin() + static_cast<std::ptrdiff_t>(jpg.size() / 2));
  kiln::test::write_bytes(dir.file("cut.jpg"), jcut);
  kiln::test::expect_error([&] { kd::read_image(dir.file("cut.jpg")); }, "data::decode_jpeg", "cut.jpg");
  std::vector<uint8_t> jhead(jpg.begin(), jpg.begin() + 30);
  kiln::test::write_bytes(dir.file("head.jpg"), jhead);
  kiln::test::expect_error([&] { kd::read_image(dir.file("head.jpg")); }, "data::decode_jpeg", "bad JPEG");
  kiln::test::write_bytes(dir.file("text.png"), {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'});
  kiln::test::expect_error([&] { kd::read_image(dir.file("text.png")); }, "data::read_image",
                           "neither a PNG nor a JPEG");
  kiln::test::expect_error([&] { kd::decode_png({1, 2, 3}); }, "data::decode_png", "bad signature");
  kiln::test::expect_error([&] { kd::read_image(dir.file("missing.png")); }, "data::read_image", "cannot open");
}

TEST(DataImage, ImageFolder) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "b_square");
  std::filesystem::create_directories(dir.path / "a_circle");
  kiln::Tensor im = u8_image(std::vector<int>(3 * 4 * 4, 9), {3, 4, 4});
  kd::write_png(dir.file("a_circle/2.png"), im);
  kd::write_png(dir.file("a_circle/1.PNG"), im);
  kd::write_jpeg(dir.file("b_square/x.jpg"), im);
  kiln::test::write_bytes(dir.file("b_square/notes.txt"), {'x'});
  auto ds = kd::image_folder(dir.path.string());
  EXPECT_EQ(ds->classes(), (std::vector<std::string>{"a_circle", "b_square"}));
  ASSERT_EQ(ds->size(), 3u);
  EXPECT_NE(ds->path(0).find("1.PNG"), std::string::npos);
  EXPECT_EQ(ds->get(0).label, 0);
  EXPECT_EQ(ds->get(2).label, 1);
  EXPECT_EQ(ds->get(2).image.shape(), (kiln::Shape{3, 4, 4}));
  kd::Batch b = kd::batch_images({ds->get(0), ds->get(2)}, kiln::Device::cpu());
  EXPECT_EQ(b.input.shape(), (kiln::Shape{2, 3, 4, 4}));
  EXPECT_EQ(b.input.dtype(), kiln::f32);
  EXPECT_NEAR(b.input.to_vector<float>()[0], 9.0f / 255.0f, 1e-6);
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  kiln::test::expect_error([&] { kd::image_folder(dir.file("a_circle/2.png")); }, "data::image_folder",
                           "not a directory");
  // Different sizes cannot be stacked.
  kd::ImageItem small{u8_image({1, 2, 3, 4}, {1, 2, 2}), 0};
  kiln::test::expect_error(
      [&] {
        kd::batch_images({ds->get(0), small}, kiln::Device::cpu());
      },
      "data::batch_images", "item 1 has image shape");
}

// ---- transforms ---------------------------------------------------------------------------------

TEST(DataImage, ToTensorLayouts) {
  kiln::Tensor hwc = u8_image({0, 255, 51, 102, 0, 0}, {1, 2, 3});  // H=1, W=2, C=3
  kiln::Tensor t = kd::to_tensor(hwc, kd::ImageLayout::HWC);
  EXPECT_EQ(t.shape(), (kiln::Shape{3, 1, 2}));
  EXPECT_EQ(t.dtype(), kiln::f32);
  std::vector<float> v = t.to_vector<float>();
  std::vector<float> want = {0, 102.f / 255, 1, 0, 51.f / 255, 0};
  for (size_t i = 0; i < v.size(); ++i) EXPECT_FLOAT_EQ(v[i], want[i]);
  EXPECT_EQ(kd::to_tensor(u8_image({255, 0}, {1, 2})).shape(), (kiln::Shape{1, 1, 2}));
  EXPECT_TRUE(kd::to_tensor(kiln::ones({2, 2, 2})).equal(kiln::ones({2, 2, 2})));
}

TEST(DataImage, Normalize) {
  kiln::Tensor x = kiln::arange(0, 8, 1, kiln::f32).reshape({2, 2, 2});
  kiln::Tensor y = kd::normalize(x, {1.0, 2.0}, {2.0, 4.0});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-0.5f, 0, 0.5f, 1, 0.5f, 0.75f, 1, 1.25f}));
  kiln::Tensor b = kd::normalize(x.unsqueeze(0), {1.0}, {2.0});
  EXPECT_EQ(b.shape(), (kiln::Shape{1, 2, 2, 2}));
  EXPECT_FLOAT_EQ(b.to_vector<float>()[7], 3.0f);
  kiln::test::expect_error([&] { kd::normalize(x, {1, 2, 3}, {1}); }, "data::normalize", "1 or 2 values");
  kiln::test::expect_error([&] { kd::normalize(x, {0}, {0}); }, "data::normalize", "std must be positive");
  kiln::test::expect_error([&] { kd::normalize(x.to(kiln::u8), {0}, {1}); }, "data::normalize", "float");
}

TEST(DataImage, ResizeMatchesTorch) {
  // tests/fixtures/data/resize_ref.txt: torch.nn.functional.interpolate(bilinear, align_corners=False).
  kiln::Tensor x = kiln::arange(0, 24, 1, kiln::f32).reshape({2, 3, 4});
  kiln::Tensor y = kd::resize(x, 5, 6);
  ASSERT_EQ(y.shape(), (kiln::Shape{2, 5, 6}));
  std::vector<double> ref = kiln::test::read_numbers(data_fixture("resize_ref.txt"), 0);
  std::vector<float> v = y.to_vector<float>();
  ASSERT_EQ(v.size(), ref.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], ref[i], 1e-5) << i;
  kiln::Tensor yu = kd::resize(x.mul(10).to(kiln::u8), 5, 6);
  EXPECT_EQ(yu.dtype(), kiln::u8);
  std::vector<double> refu = kiln::test::read_numbers(data_fixture("resize_ref.txt"), 1);
  std::vector<int> vu = yu.to_vector<int>();
  for (size_t i = 0; i < vu.size(); ++i) EXPECT_NEAR(vu[i], refu[i], 1) << i;  // rounding of x.5 ties
  kiln::test::expect_error([&] { kd::resize(x, 0, 2); }, "data::resize", "positive");
}

TEST(DataImage, FlipAndCrop) {
  kiln::Tensor x = u8_image({1, 2, 3, 4, 5, 6}, {1, 2, 3});
  EXPECT_EQ(kd::hflip(x).to_vector<int>(), (std::vector<int>{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(kd::crop(x, 0, 1, 2, 2).to_vector<int>(), (std::vector<int>{2, 3, 5, 6}));
  // With padding 1 the padded image is 4x5; window (0, 0) of 2x2 sees the zero border.
  EXPECT_EQ(kd::crop(x, 0, 0, 2, 2, 1).to_vector<int>(), (std::vector<int>{0, 0, 0, 1}));
  EXPECT_EQ(kd::crop(x, 2, 3, 2, 2, 1).to_vector<int>(), (std::vector<int>{6, 0, 0, 0}));
  kiln::test::expect_error([&] { kd::crop(x, 1, 0, 2, 2); }, "data::crop", "does not fit");
}

TEST(DataImage, RandomTransformsDependOnSeedEpochAndIndexOnly) {
  kiln::Tensor x = kiln::arange(0, 2 * 6 * 6, 1, kiln::f32).reshape({2, 6, 6});
  kd::RandomCrop rc{.size = 6, .padding = 2, .seed = 3};
  // Same key, same crop; the crop is one of the (2*2+1)^2 windows of the padded image.
  EXPECT_TRUE(rc(x, {5, 1}).equal(rc(x, {5, 1})));
  int differing = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    kiln::Tensor a = rc(x, {i, 0});
    EXPECT_EQ(a.shape(), (kiln::Shape{2, 6, 6}));
    bool found = false;
    for (int64_t t = 0; t <= 4 && !found; ++t)
      for (int64_t l = 0; l <= 4 && !found; ++l) found = a.equal(kd::crop(x, t, l, 6, 6, 2));
    EXPECT_TRUE(found);
    differing += !a.equal(rc(x, {i, 1}));
  }
  EXPECT_GT(differing, 10);  // another epoch draws other windows
  kd::RandomHorizontalFlip fl{.p = 0.5, .seed = 9};
  int flipped = 0;
  for (uint64_t i = 0; i < 400; ++i) {
    kiln::Tensor a = fl(x, {i, 2});
    EXPECT_TRUE(a.equal(fl(x, {i, 2})));
    if (!a.equal(x)) {
      EXPECT_TRUE(a.equal(kd::hflip(x)));
      ++flipped;
    }
  }
  EXPECT_NEAR(flipped, 200, 40);
  EXPECT_TRUE(kd::RandomHorizontalFlip{.p = 0.0}(x, {1, 1}).equal(x));
  EXPECT_TRUE(kd::RandomHorizontalFlip{.p = 1.0}(x, {1, 1}).equal(kd::hflip(x)));
}

TEST(DataImage, MapImageOnADataset) {
  auto base = kd::in_memory<kd::ImageItem>({{u8_image({1, 2, 3, 4}, {1, 2, 2}), 7}});
  auto flipped = kd::map_image(base, kd::hflip);
  EXPECT_EQ(flipped->get(0).image.to_vector<int>(), (std::vector<int>{2, 1, 4, 3}));
  EXPECT_EQ(flipped->get(0).label, 7);
  auto f = kd::map_image(base, [](const kiln::Tensor& t) { return kd::to_tensor(t); });
  EXPECT_EQ(f->get(0).image.dtype(), kiln::f32);
}
