// Data sources: IDX, CSV, SQLite (include/kiln/data/sources.h), with corrupted inputs.
#include <gtest/gtest.h>
#include <kiln/data.h>
#include <kiln/ops.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>

#include "data/data_test_util.h"
#include "test_util.h"

namespace kd = kiln::data;
using kiln::test::data_fixture;
using kiln::test::TempDir;
using kiln::test::write_bytes;

namespace {

// An IDX file: magic 0 0 type ndim, big-endian dims, then `data` as given.
std::vector<uint8_t> idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    b.push_back(static_cast<uint8_t>(d >> 24));
    b.push_back(static_cast<uint8_t>(d >> 16));
    b.push_back(static_cast<uint8_t>(d >> 8));
    b.push_back(static_cast<uint8_t>(d));
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

// 3 images of 2x2 with pixel k = 10*i + k, labels 2 0 1.
void write_tiny_mnist(const TempDir& dir, bool gz) {
  std::vector<uint8_t> px;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 4; ++k) px.push_back(static_cast<uint8_t>(10 * i + k));
  auto img = idx_bytes(0x08, {3, 2, 2}, px);
  auto lab = idx_bytes(0x08, {3}, {2, 0, 1});
  if (gz) {
    write_gz(dir.file("train-images-idx3-ubyte.gz"), img);
    write_gz(dir.file("train-labels-idx1-ubyte.gz"), lab);
  } else {
    write_bytes(dir.file("train-images-idx3-ubyte"), img);
    write_bytes(dir.file("train-labels-idx1-ubyte"), lab);
  }
}

}  // namespace

// ---- IDX --------------------------------------------------------------------------------------

TEST(DataIdx, ReadsRawAndGzip) {
  for (bool gz : {false, true}) {
    TempDir dir;
    write_tiny_mnist(dir, gz);
    auto ds = kd::mnist(dir.path.string(), true);
    ASSERT_EQ(ds->size(), 3u);
    EXPECT_EQ(ds->image_shape(), (kiln::Shape{1, 2, 2}));
    EXPECT_EQ(ds->num_classes(), 3);
    kd::ImageItem it = ds->get(1);
    EXPECT_EQ(it.label, 0);
    EXPECT_EQ(it.image.dtype(), kiln::u8);
    EXPECT_EQ(it.image.shape(), (kiln::Shape{1, 2, 2}));
    EXPECT_EQ(it.image.to_vector<int>(), (std::vector<int>{10, 11, 12, 13}));
    auto f = kd::mnist(dir.path.string(), true, {.dtype = kiln::f32});
    std::vector<float> v = f->get(2).image.to_vector<float>();
    EXPECT_FLOAT_EQ(v[3], 23.0f / 255.0f);
  }
}

TEST(DataIdx, BigEndianTypes) {
  TempDir dir;
  // i32 [2]: 1, -2 ; f32 [1]: 1.5 (0x3FC00000); i16 [1]: 0x0102.
  write_bytes(dir.file("a.idx"), idx_bytes(0x0C, {2}, {0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFE}));
  write_bytes(dir.file("b.idx"), idx_bytes(0x0D, {1}, {0x3F, 0xC0, 0, 0}));
  write_bytes(dir.file("c.idx"), idx_bytes(0x0B, {1, 1}, {0x01, 0x02}));
  kiln::Tensor a = kd::read_idx(dir.file("a.idx"));
  EXPECT_EQ(a.dtype(), kiln::i32);
  EXPECT_EQ(a.to_vector<int>(), (std::vector<int>{1, -2}));
  EXPECT_EQ(kd::read_idx(dir.file("b.idx")).to_vector<float>(), (std::vector<float>{1.5f}));
  kiln::Tensor c = kd::read_idx(dir.file("c.idx"));
  EXPECT_EQ(c.shape(), (kiln::Shape{1, 1}));
  EXPECT_EQ(c.to_vector<int>(), (std::vector<int>{258}));
}

TEST(DataIdx, CorruptedFilesGiveClearErrors) {
  TempDir dir;
  auto p = dir.file("x.idx");
  write_bytes(p, {0, 0});
  kiln::test::expect_error([&] { kd::read_idx(p); }, "data::read_idx", "truncated header");
  write_bytes(p, {0x1f, 0x00, 0x08, 0x01, 0, 0, 0, 1, 7});
  kiln::test::expect_error([&] { kd::read_idx(p); }, "data::read_idx", "wrong magic");
  write_bytes(p, idx_bytes(0x07, {1}, {1}));
  kiln::test::expect_error([&] { kd::read_idx(p); }, "data::read_idx", "unknown IDX data type");
  write_bytes(p, {0, 0, 8, 3, 0, 0, 0, 1});
  kiln::test::expect_error([&] { kd::read_idx(p); }, "data::read_idx", "ends inside them");
  write_bytes(p, idx_bytes(0x08, {2, 3}, {1, 2, 3, 4, 5}));
  kiln::test::expect_error([&] { kd::read_idx(p); }, "data::read_idx", "truncated data");
  write_bytes(p, idx_bytes(0x08, {2, 2}, {1, 2, 3, 4, 5}));
  kiln::test::expect_error([&] { kd::read_idx(p); }, "data::read_idx", "do not match the file size");
  // Hostile dims (4G x 4G x 4G) give an error, not a huge allocation.
  write_bytes(p, idx_bytes(0x08, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {1, 2, 3}));
  kiln::test::expect_error([&] { kd::read_idx(p); }, "data::read_idx", "too large");
  write_bytes(p, idx_bytes(0x0E, {0x10000000}, {1, 2, 3}));
  kiln::test::expect_error([&] { kd::read_idx(p); }, "data::read_idx", "truncated data");
  // The message names the file.
  EXPECT_ERROR(kd::read_idx(p), p);
  kiln::test::expect_error([&] { kd::read_idx(dir.file("missing.idx")); }, "data::read_idx", "cannot open");
}

TEST(DataIdx, TruncatedGzipAndMismatchedLabels) {
  TempDir dir;
  std::vector<uint8_t> px(4 * 64 * 64);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7919 % 251);
  write_gz(dir.file("i.gz"), idx_bytes(0x08, {4, 64, 64}, px));
  std::vector<uint8_t> gz = kiln::test::read_bytes(dir.file("i.gz"));
  gz.resize(gz.size() / 2);
  write_bytes(dir.file("cut.gz"), gz);
  EXPECT_ERROR(kd::read_idx(dir.file("cut.gz")), "cut.gz");
  kiln::test::expect_error([&] { kd::read_idx(dir.file("cut.gz")); }, "data::read_idx");
  write_bytes(dir.file("l.idx"), idx_bytes(0x08, {3}, {1, 2, 3}));
  kiln::test::expect_error([&] { kd::idx_classification(dir.file("i.gz"), dir.file("l.idx")); },
                           "data::idx_classification", "has 3 labels but");
}

TEST(DataIdx, RealFashionMnist) {
  if (!std::filesystem::exists(std::string(kd::kFashionMnistDir) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto train = kd::fashion_mnist(true);
  auto test = kd::fashion_mnist(false);
  ASSERT_EQ(train->size(), 60000u);
  ASSERT_EQ(test->size(), 10000u);
  EXPECT_EQ(train->image_shape(), (kiln::Shape{1, 28, 28}));
  auto [lo, hi] = std::minmax_element(train->labels().begin(), train->labels().end());
  EXPECT_EQ(*lo, 0);
  EXPECT_EQ(*hi, 9);
  // Fashion-MNIST is balanced: 6000 training images per class.
  std::vector<int> counts(10);
  for (int64_t l : train->labels()) ++counts[static_cast<size_t>(l)];
  for (int c : counts) EXPECT_EQ(c, 6000);
  EXPECT_EQ(kd::fashion_mnist_classes().size(), 10u);
  // Pixels span 0..255 and image 0 is not blank.
  kiln::Tensor im = train->get(0).image;
  EXPECT_GT(im.to(kiln::i64).sum().item<int64_t>(), 0);
}

// ---- CSV ------------------------------------------------------------------------------------------

TEST(DataCsv, HeaderTypesAndQuotes) {
  kd::Table t = kd::read_csv(data_fixture("small.csv"));
  ASSERT_EQ(t.num_rows(), 3u);
  EXPECT_EQ(t.names(), (std::vector<std::string>{"id", "value", "label"}));
  EXPECT_EQ(t.column("id").type, kd::ColumnType::Int64);
  EXPECT_EQ(t.column("value").type, kd::ColumnType::Float64);
  EXPECT_EQ(t.column("label").type, kd::ColumnType::String);
  EXPECT_EQ(t.column("id").ints, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(t.column("value").floats, (std::vector<double>{0.5, -1.25, 1000.0}));
  EXPECT_EQ(t.column("label").strings, (std::vector<std::string>{"plain", "with, comma", "say \"hi\"\nnext line"}));
  kiln::test::expect_error([&] { t.column("nope"); }, "data::Table", "no column 'nope' (columns: id, value, label)");
  kiln::Tensor x = t.to_tensor({"value", "id"});
  EXPECT_EQ(x.shape(), (kiln::Shape{3, 2}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0.5f, 1, -1.25f, 2, 1000, 3}));
  kiln::test::expect_error([&] { t.to_tensor({"label"}); }, "data::Table", "holds strings");
}

TEST(DataCsv, ExplicitTypesNoHeaderWhitespaceAndBlankLines) {
  kd::Table t = kd::parse_csv(
      "1 2.5  3\n\n 4   5 6 \r\n",
      {.delimiter = ' ', .header = false, .names = {"a", "b", "c"}, .types = {{"a", kd::ColumnType::Float64}}});
  ASSERT_EQ(t.num_rows(), 2u);
  EXPECT_EQ(t.column("a").type, kd::ColumnType::Float64);
  EXPECT_EQ(t.column("b").type, kd::ColumnType::Float64);
  EXPECT_EQ(t.column("c").ints, (std::vector<int64_t>{3, 6}));
  kd::Table u = kd::parse_csv("skip me\nx;y\n1;\n2;3\n", {.delimiter = ';', .skip_rows = 1});
  EXPECT_EQ(u.column("x").ints, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(std::isnan(u.column("y").floats[0]));  // an empty field is a missing number
  EXPECT_EQ(u.column("y").floats[1], 3.0);
  kd::Table d = kd::parse_csv("p,q\n1,2\n", {.header = false});
  EXPECT_EQ(d.names(), (std::vector<std::string>{"c0", "c1"}));
  EXPECT_EQ(d.column("c0").type, kd::ColumnType::String);
}

TEST(DataCsv, BrokenInputNamesTheLine) {
  kiln::test::expect_error([] { kd::parse_csv("a,b\n1,2\n3\n4,5\n", {}, "f.csv"); }, "data::read_csv",
                           "'f.csv' line 3: 1 fields, expected 2");
  kiln::test::expect_error(
      [] {
        kd::parse_csv("a,b\n1,2\n3,x\n", {.types = {{"b", kd::ColumnType::Float64}}}, "g.csv");
      },
      "data::read_csv", "'g.csv' line 3, column 'b': cannot parse 'x' as a number");
  kiln::test::expect_error([] { kd::parse_csv("a\n1\n2.5\n", {.default_type = kd::ColumnType::Int64}); },
                           "data::read_csv", "line 3, column 'a': cannot parse '2.5' as an integer");
  kiln::test::expect_error([] { kd::parse_csv("a,b\n1,\"open\n2,3\n"); }, "data::read_csv",
                           "line 2: unterminated quoted field");
  kiln::test::expect_error([] { kd::parse_csv("a,b\n1,\"x\"y\n"); }, "data::read_csv", "text after a closing quote");
  kiln::test::expect_error(
      [] {
        kd::parse_csv("a\n1\n", {.types = {{"z", kd::ColumnType::Int64}}});
      },
      "data::read_csv", "column 'z', which does not exist");
  kiln::test::expect_error([] { kd::read_csv("/nonexistent/file.csv"); }, "data::read_csv", "cannot open");
}

TEST(DataCsv, GzipAndTabularDataset) {
  TempDir dir;
  std::string text = "f1,f2,y\n1,2,0\n3,4,1\n5,6,1\n";
  write_gz(dir.file("t.csv.gz"), std::vector<uint8_t>(text.begin(), text.end()));
  kd::Table t = kd::read_csv(dir.file("t.csv.gz"));
  auto ds = kd::tabular(t, {.targets = {"y"}, .target_dtype = kiln::i64});
  ASSERT_EQ(ds->size(), 3u);
  kd::TabularItem it = ds->get(1);
  EXPECT_EQ(it.features.to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(it.target.to_vector<int64_t>(), (std::vector<int64_t>{1}));
  kiln::data::Batch b = kd::batch_tabular({ds->get(0), ds->get(2)}, kiln::Device::cpu());
  EXPECT_EQ(b.input.shape(), (kiln::Shape{2, 2}));
  EXPECT_EQ(b.target.shape(), (kiln::Shape{2}));  // one integer target column: class indices
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  auto reg = kd::tabular(t, {.features = {"f2"}, .targets = {"y", "f1"}});
  kiln::data::Batch r = kd::batch_tabular({reg->get(0), reg->get(1)}, kiln::Device::cpu());
  EXPECT_EQ(r.input.to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(r.target.shape(), (kiln::Shape{2, 2}));
  EXPECT_EQ(r.target.to_vector<float>(), (std::vector<float>{0, 1, 1, 3}));
}

// ---- SQLite ---------------------------------------------------------------------------------------

TEST(DataSqlite, ReadsTypedColumns) {
  kd::Table t = kd::read_sqlite(data_fixture("table.sqlite"), "points");
  ASSERT_EQ(t.num_rows(), 3u);
  EXPECT_EQ(t.names(), (std::vector<std::string>{"id", "x", "y", "name"}));
  EXPECT_EQ(t.column("id").type, kd::ColumnType::Int64);
  EXPECT_EQ(t.column("id").ints, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(t.column("x").floats, (std::vector<double>{0.5, 1.5, -2.0}));
  EXPECT_TRUE(std::isnan(t.column("y").floats[1]));  // NULL
  EXPECT_EQ(t.column("y").floats[2], 4.25);
  EXPECT_EQ(t.column("name").strings, (std::vector<std::string>{"a", "b", "c"}));
  kd::Table q = kd::read_sqlite(data_fixture("table.sqlite"), "SELECT x * 2 AS x2 FROM points WHERE id > 1");
  EXPECT_EQ(q.column("x2").floats, (std::vector<double>{3.0, -4.0}));
  auto ds = kd::tabular(t, {.features = {"x"}, .targets = {"id"}});
  EXPECT_EQ(ds->get(2).features.to_vector<float>(), (std::vector<float>{-2.0f}));
}

TEST(DataSqlite, Errors) {
  kiln::test::expect_error([] { kd::read_sqlite(data_fixture("table.sqlite"), "nope"); }, "data::read_sqlite",
                           "no such table");
  // A name with quotes is read literally, never as SQL.
  kiln::test::expect_error([] { kd::read_sqlite(data_fixture("table.sqlite"), "points\"; DROP TABLE points; --"); },
                           "data::read_sqlite", "no such table");
  EXPECT_EQ(kd::read_sqlite(data_fixture("table.sqlite"), "points").num_rows(), 3u);
  kiln::test::expect_error([] { kd::read_sqlite("/nonexistent/x.sqlite", "t"); }, "data::read_sqlite", "cannot open");
  TempDir dir;
  write_bytes(dir.file("bad.sqlite"), std::vector<uint8_t>(2048, 0x5A));
  kiln::test::expect_error([&] { kd::read_sqlite(dir.file("bad.sqlite"), "t"); }, "data::read_sqlite", "bad.sqlite");
}
