// SPDX-License-Identifier: MIT OR Apache-2.0
// Line and record datasets over text files, labelled corpora, the fortunes corpus and a
// stratified split.
#include "kiln/text/datasets.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "kiln/error.h"

namespace kiln::text {

namespace {
using Spans = std::vector<std::pair<uint64_t, uint64_t>>;

std::ifstream open_text(const std::string& path, const char* op) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), op, "cannot open '" << path << "'");
  return in;
}

/// Calls fn(begin offset, line without its end of line) for every line of the file.
template <class F>
void scan_lines(const std::string& path, const char* op, F fn) {
  std::ifstream in = open_text(path, op);
  uint64_t offset = 0;
  for (std::string line; std::getline(in, line);) {
    const uint64_t next = offset + line.size() + (in.eof() ? 0 : 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    fn(offset, line);
    offset = next;
  }
}

std::string read_span(const std::string& path, std::pair<uint64_t, uint64_t> span, const char* op) {
  std::ifstream in = open_text(path, op);
  in.seekg(static_cast<std::streamoff>(span.first));
  std::string s(span.second, '\0');
  in.read(s.data(), static_cast<std::streamsize>(span.second));
  KILN_CHECK(in.gcount() == static_cast<std::streamsize>(span.second), op,
             "'" << path << "' changed since it was indexed");
  return s;
}
}  // namespace

LineDataset::LineDataset(std::string path, bool skip_empty) : path_(std::move(path)) {
  scan_lines(path_, "text::LineDataset", [&](uint64_t at, const std::string& line) {
    if (!skip_empty || !line.empty()) offsets_.emplace_back(at, line.size());
  });
}

std::string LineDataset::get(size_t i) const {
  data::detail::check_index(i, offsets_.size(), "text::LineDataset");
  return read_span(path_, offsets_[i], "text::LineDataset");
}

RecordDataset::RecordDataset(std::string path, std::string delimiter) : path_(std::move(path)) {
  // A record spans from its first non-blank line to the end of its last non-blank line.
  bool open = false;
  uint64_t begin = 0, end = 0;
  auto close = [&] {
    if (open) offsets_.emplace_back(begin, end - begin);
    open = false;
  };
  scan_lines(path_, "text::RecordDataset", [&](uint64_t at, const std::string& line) {
    if (line == delimiter) {
      close();
      return;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    if (!open) begin = at;
    open = true;
    end = at + line.size();
  });
  close();
}

std::string RecordDataset::get(size_t i) const {
  data::detail::check_index(i, offsets_.size(), "text::RecordDataset");
  std::string s = read_span(path_, offsets_[i], "text::RecordDataset");
  s.erase(std::remove(s.begin(), s.end(), '\r'), s.end());
  return s;
}

data::DatasetPtr<std::string> lines(const std::string& path, bool skip_empty) {
  return std::make_shared<LineDataset>(path, skip_empty);
}

data::DatasetPtr<std::string> records(const std::string& path, const std::string& delimiter) {
  return std::make_shared<RecordDataset>(path, delimiter);
}

TextClassificationDataset::TextClassificationDataset(const std::vector<std::string>& files,
                                                     std::vector<std::string> class_names, const std::string& delimiter)
    : names_(std::move(class_names)) {
  KILN_CHECK(files.size() == names_.size(), "text::TextClassificationDataset",
             files.size() << " files but " << names_.size() << " class names");
  for (size_t k = 0; k < files.size(); ++k) {
    files_.push_back(std::make_shared<RecordDataset>(files[k], delimiter));
    for (size_t r = 0; r < files_.back()->size(); ++r) index_.emplace_back(static_cast<int64_t>(k), r);
  }
}

TextItem TextClassificationDataset::get(size_t i) const {
  data::detail::check_index(i, index_.size(), "text::TextClassificationDataset");
  const auto [label, record] = index_[i];
  return {files_[static_cast<size_t>(label)]->get(record), label};
}

std::vector<int64_t> TextClassificationDataset::labels() const {
  std::vector<int64_t> out;
  out.reserve(index_.size());
  for (auto& e : index_) out.push_back(e.first);
  return out;
}

std::shared_ptr<TextClassificationDataset> fortunes(const std::vector<std::string>& categories,
                                                    const std::string& dir) {
  KILN_CHECK(!categories.empty(), "text::fortunes", "no categories");
  std::vector<std::string> files;
  for (const std::string& c : categories) files.push_back(dir + "/" + c);
  return std::make_shared<TextClassificationDataset>(files, categories, "%");
}

std::pair<std::vector<size_t>, std::vector<size_t>> stratified_split(const std::vector<int64_t>& labels,
                                                                     double test_fraction, uint64_t seed) {
  KILN_CHECK(test_fraction >= 0.0 && test_fraction <= 1.0, "text::stratified_split",
             "test_fraction " << test_fraction << " is outside [0, 1]");
  std::map<int64_t, std::vector<size_t>> by_class;
  for (size_t i = 0; i < labels.size(); ++i) by_class[labels[i]].push_back(i);
  std::vector<size_t> train, test;
  for (auto& [label, idx] : by_class) {
    std::vector<size_t> perm = data::permutation(idx.size(), data::hash_mix(seed, static_cast<uint64_t>(label)));
    const auto n_test = static_cast<size_t>(test_fraction * static_cast<double>(idx.size()) + 0.5);
    for (size_t j = 0; j < perm.size(); ++j) (j < n_test ? test : train).push_back(idx[perm[j]]);
  }
  std::sort(train.begin(), train.end());
  std::sort(test.begin(), test.end());
  return {train, test};
}

}  // namespace kiln::text
