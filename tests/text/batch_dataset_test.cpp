// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::text batching (padding masks, the DataLoader batcher, bucketing by length) and the text
// datasets (lines, records, labelled corpora, stratified split).
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/text.h>

#include <cstdio>
#include <fstream>
#include <set>

using namespace kiln;
using namespace kiln::text;

namespace {
std::string write_temp(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}
}  // namespace

TEST(TextBatch, PadSequencesRightAndLeft) {
  PaddedBatch b = pad_sequences({{5, 6, 7}, {8}, {}}, 0);
  EXPECT_EQ(b.ids.shape(), (Shape{3, 3}));
  EXPECT_EQ(b.ids.to_vector<int64_t>(), (std::vector<int64_t>{5, 6, 7, 8, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b.padding_mask.dtype(), DType::Bool);
  EXPECT_EQ(b.padding_mask.to(i64).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(b.lengths.to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 0}));

  PaddedBatch l = pad_sequences({{5, 6, 7}, {8}}, 9, {.max_length = 2, .pad_to_multiple_of = 4, .pad_left = true});
  EXPECT_EQ(l.ids.shape(), (Shape{2, 4}));
  EXPECT_EQ(l.ids.to_vector<int64_t>(), (std::vector<int64_t>{9, 9, 5, 6, 9, 9, 9, 8}));
  EXPECT_EQ(l.lengths.to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));

  PaddedBatch e = pad_sequences({}, 0);
  EXPECT_EQ(e.ids.shape(), (Shape{0, 0}));
  PaddedBatch z = pad_sequences({{}, {}}, 0);  // all empty: one padding column
  EXPECT_EQ(z.ids.shape(), (Shape{2, 1}));
  EXPECT_THROW(pad_sequences({{1}}, 0, {.pad_to_multiple_of = 0}), Error);
}

TEST(TextBatch, PaddingMaskOfIds) {
  Tensor ids = tensor<int64_t>({4, 0, 0, 7}, Shape{2, 2});
  EXPECT_EQ(padding_mask(ids, 0).to(i64).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_THROW(padding_mask(tensor<float>({1.f}), 0), Error);
}

TEST(TextBatch, LoaderWithTextBatcher) {
  auto tok = std::make_shared<ByteTokenizer>();
  auto ds = data::in_memory<TextItem>({{"ab", 0}, {"abcd", 1}, {"", 2}, {"x", 1}, {"yz", 0}});
  data::DataLoader<TextItem> loader(ds, {.batch_size = 2, .shuffle = false, .workers = 2},
                                    text_classification_batcher(tok, {.add_eos = true}));
  loader.start_epoch(0);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->input.shape(), (Shape{2, 5}));
  EXPECT_EQ(b->target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(padding_mask(b->input, 0).sum().item<int64_t>(), 2);
  int batches = 1;
  while (loader.next()) ++batches;
  EXPECT_EQ(batches, 3);
  EXPECT_THROW(text_classification_batcher(nullptr), Error);
}

TEST(TextBatch, BucketsCoverEveryItemOnceAndCutPadding) {
  std::vector<size_t> lengths;
  for (size_t i = 0; i < 1000; ++i) lengths.push_back((i * 7919) % 97 + 1);
  BucketOptions o{.batch_size = 16, .bucket_multiplier = 20, .seed = 3};
  auto batches = bucket_batches(lengths, o, 0);
  std::multiset<size_t> seen;
  size_t spread = 0;
  for (auto& b : batches) {
    EXPECT_LE(b.size(), 16u);
    size_t lo = 1000, hi = 0;
    for (size_t i : b) {
      seen.insert(i);
      lo = std::min(lo, lengths[i]);
      hi = std::max(hi, lengths[i]);
    }
    spread += hi - lo;
  }
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), 1000u);
  // Windows of 320 items of lengths 1..97 give batches of close lengths (random batches of 16
  // would spread over ~80).
  EXPECT_LT(static_cast<double>(spread) / static_cast<double>(batches.size()), 10.0);
  // Same seed and epoch: same batches; another epoch: another order.
  EXPECT_EQ(bucket_batches(lengths, o, 0), batches);
  EXPECT_NE(bucket_batches(lengths, o, 1), batches);
  o.drop_last = true;
  EXPECT_EQ(bucket_batches(lengths, o, 0).size(), 1000u / 16);

  // The BatchSource: less padding than random batches of the same size.
  std::vector<TextItem> items;
  for (size_t i = 0; i < 400; ++i) items.push_back({std::string(lengths[i], 'a'), static_cast<int64_t>(i % 3)});
  auto tok = std::make_shared<ByteTokenizer>();
  BucketBatchSource bucketed(data::in_memory(items), tok, {.batch_size = 16, .bucket_multiplier = 25});
  BucketBatchSource random(data::in_memory(items), tok, {.batch_size = 16, .bucket_multiplier = 1});
  EXPECT_LT(bucketed.padding_fraction(0), 0.1);
  EXPECT_GT(random.padding_fraction(0), 0.3);
  bucketed.start_epoch(0);
  size_t n = 0;
  while (auto b = bucketed.next()) {
    EXPECT_EQ(b->input.size(0), b->target.size(0));
    n += static_cast<size_t>(b->input.size(0));
  }
  EXPECT_EQ(n, 400u);
  EXPECT_EQ(bucketed.num_items(), 400u);
}

TEST(TextData, LinesAndRecords) {
  const std::string lp = write_temp("kiln_lines.txt", "first\r\nsecond é\n\nlast");
  auto l = lines(lp);
  ASSERT_EQ(l->size(), 4u);
  EXPECT_EQ(l->get(0), "first");
  EXPECT_EQ(l->get(1), "second é");
  EXPECT_EQ(l->get(2), "");
  EXPECT_EQ(l->get(3), "last");
  EXPECT_EQ(lines(lp, true)->size(), 3u);
  EXPECT_THROW(l->get(4), Error);

  const std::string rp = write_temp("kiln_records.txt", "one\nline two\n%\n\n%\n  \nthree\n\n%\nfour");
  auto r = records(rp);
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ(r->get(0), "one\nline two");
  EXPECT_EQ(r->get(1), "three");
  EXPECT_EQ(r->get(2), "four");
  EXPECT_EQ(records(write_temp("kiln_empty.txt", ""))->size(), 0u);
  EXPECT_THROW(lines("/no/such/file"), Error);
  EXPECT_THROW(records("/no/such/file"), Error);
}

TEST(TextData, LabelledCorpusAndSplit) {
  const std::string a = write_temp("kiln_cls_a", "a1\n%\na2\n%\na3\n%\na4\n");
  const std::string b = write_temp("kiln_cls_b", "b1\n%\nb2\n");
  TextClassificationDataset ds({a, b}, {"a", "b"});
  ASSERT_EQ(ds.size(), 6u);
  EXPECT_EQ(ds.get(4).text, "b1");
  EXPECT_EQ(ds.get(4).label, 1);
  EXPECT_EQ(ds.labels(), (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
  EXPECT_THROW(TextClassificationDataset({a}, {"a", "b"}), Error);

  auto [train, test] = stratified_split(ds.labels(), 0.5, 7);
  EXPECT_EQ(train.size(), 3u);
  EXPECT_EQ(test.size(), 3u);
  int test_b = 0;
  for (size_t i : test) test_b += ds.labels()[i] == 1;
  EXPECT_EQ(test_b, 1);
  EXPECT_EQ(stratified_split(ds.labels(), 0.5, 7), stratified_split(ds.labels(), 0.5, 7));
  EXPECT_THROW(stratified_split(ds.labels(), 1.5, 0), Error);
}

TEST(TextData, FortunesWhenInstalled) {
  if (!std::ifstream(std::string(kFortunesDir) + "/love").good()) GTEST_SKIP() << "package fortunes not installed";
  auto ds = fortunes({"love", "science"});
  EXPECT_GT(ds->size(), 500u);
  EXPECT_EQ(ds->num_classes(), 2);
  EXPECT_FALSE(ds->get(0).text.empty());
  EXPECT_EQ(ds->get(ds->size() - 1).label, 1);
  EXPECT_THROW(fortunes({"no-such-category"}), Error);
}
