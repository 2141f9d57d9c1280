// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Text datasets: the lines of a file, the records of a file (entries separated by a delimiter
// line, as fortune files are), and labelled corpora (one file per class). Files are indexed
// once and read on demand, so a corpus larger than memory streams through the DataLoader.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/data/dataset.h"
#include "kiln/text/batch.h"

namespace kiln::text {

/// The lines of a text file (without their "\n" or "\r\n"); the file is scanned once for line
/// offsets and each get() reads its line from disk. Missing file: kiln::Error.
class LineDataset : public data::Dataset<std::string> {
 public:
  /// skip_empty: leave out empty lines.
  explicit LineDataset(std::string path, bool skip_empty = false);
  size_t size() const override { return offsets_.size(); }
  std::string get(size_t i) const override;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::pair<uint64_t, uint64_t>> offsets_;  // begin, length
};

/// The records of a text file: runs of lines between lines equal to `delimiter` ("%" in fortune
/// files), joined by "\n", trimmed of surrounding blank lines; empty records are skipped.
class RecordDataset : public data::Dataset<std::string> {
 public:
  RecordDataset(std::string path, std::string delimiter = "%");
  size_t size() const override { return offsets_.size(); }
  std::string get(size_t i) const override;

 private:
  std::string path_;
  std::vector<std::pair<uint64_t, uint64_t>> offsets_;
};

/// Shared LineDataset / RecordDataset.
data::DatasetPtr<std::string> lines(const std::string& path, bool skip_empty = false);
data::DatasetPtr<std::string> records(const std::string& path, const std::string& delimiter = "%");

/// A labelled corpus: the records of several files, the label of a record being its file's
/// index in `class_names`.
class TextClassificationDataset : public data::Dataset<TextItem> {
 public:
  /// files[k] holds the records of class k (named class_names[k]).
  TextClassificationDataset(const std::vector<std::string>& files, std::vector<std::string> class_names,
                            const std::string& delimiter = "%");
  size_t size() const override { return index_.size(); }
  TextItem get(size_t i) const override;
  const std::vector<std::string>& class_names() const { return names_; }
  int64_t num_classes() const { return static_cast<int64_t>(names_.size()); }
  /// Labels of all items, in order.
  std::vector<int64_t> labels() const;

 private:
  std::vector<std::shared_ptr<RecordDataset>> files_;
  std::vector<std::string> names_;
  std::vector<std::pair<int64_t, size_t>> index_;  // label, record
};

/// Where the Debian package `fortunes` installs its files (one per category, "%" between entries).
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

/// The fortune files of `categories` (file names under `dir`, e.g. "computers", "love") as a
/// labelled corpus, labels in the order given. A missing file throws kiln::Error.
std::shared_ptr<TextClassificationDataset> fortunes(const std::vector<std::string>& categories,
                                                    const std::string& dir = kFortunesDir);

/// A stratified split: for every class, a (seed)-shuffled `test_fraction` of its items goes to
/// the second set. Returns the item indices of (train, test), each sorted.
std::pair<std::vector<size_t>, std::vector<size_t>> stratified_split(const std::vector<int64_t>& labels,
                                                                     double test_fraction, uint64_t seed);

}  // namespace kiln::text
