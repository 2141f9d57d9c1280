// SPDX-License-Identifier: MIT OR Apache-2.0
// Tokenizer::encode (framing, truncation, padding), ByteTokenizer and CharTokenizer.
#include "kiln/text/tokenizer.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "kiln/error.h"
#include "text/utf8.h"

namespace kiln::text {

std::vector<int64_t> Tokenizer::encode(std::string_view text, const EncodeOptions& o) const {
  const SpecialTokens sp = special_tokens();
  KILN_CHECK(!o.add_bos || sp.bos >= 0, "text::encode", "add_bos: this tokenizer has no bos token");
  KILN_CHECK(!o.add_eos || sp.eos >= 0, "text::encode", "add_eos: this tokenizer has no eos token");
  KILN_CHECK(o.max_length >= 0, "text::encode", "max_length " << o.max_length << " is negative");
  KILN_CHECK(!o.pad_to_max_length || o.max_length > 0, "text::encode", "pad_to_max_length needs max_length > 0");
  KILN_CHECK(!o.pad_to_max_length || sp.pad >= 0, "text::encode", "pad_to_max_length: this tokenizer has no pad token");
  const int64_t frame = (o.add_bos ? 1 : 0) + (o.add_eos ? 1 : 0);
  KILN_CHECK(o.max_length == 0 || o.max_length >= frame, "text::encode",
             "max_length " << o.max_length << " leaves no room for bos/eos");
  std::vector<int64_t> body = encode_plain(text);
  if (o.max_length > 0 && static_cast<int64_t>(body.size()) + frame > o.max_length) {
    body.resize(static_cast<size_t>(o.max_length - frame));
  }
  std::vector<int64_t> ids;
  ids.reserve(body.size() + static_cast<size_t>(frame));
  if (o.add_bos) ids.push_back(sp.bos);
  ids.insert(ids.end(), body.begin(), body.end());
  if (o.add_eos) ids.push_back(sp.eos);
  if (o.pad_to_max_length) ids.resize(static_cast<size_t>(o.max_length), sp.pad);
  return ids;
}

std::vector<std::vector<int64_t>> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                                          const EncodeOptions& options) const {
  std::vector<std::vector<int64_t>> out;
  out.reserve(texts.size());
  for (const std::string& t : texts) out.push_back(encode(t, options));
  return out;
}

namespace {
const char* const kSpecialNames[4] = {"<pad>", "<unk>", "<bos>", "<eos>"};

void check_id(int64_t id, int64_t vocab, const char* op) {
  KILN_CHECK(id >= 0 && id < vocab, op, "id " << id << " is outside the vocabulary [0, " << vocab << ")");
}
}  // namespace

// ---- ByteTokenizer ----------------------------------------------------------------------------

std::vector<int64_t> ByteTokenizer::encode_plain(std::string_view text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = kOffset + static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  s.reserve(ids.size());
  for (int64_t id : ids) {
    check_id(id, vocab_size(), "ByteTokenizer::decode");
    if (id == 1) s += "\xEF\xBF\xBD";  // <unk>: U+FFFD
    if (id >= kOffset) s.push_back(static_cast<char>(id - kOffset));
  }
  return s;
}

std::string ByteTokenizer::id_to_piece(int64_t id) const {
  check_id(id, vocab_size(), "ByteTokenizer::id_to_piece");
  if (id < kOffset) return kSpecialNames[id];
  return std::string(1, static_cast<char>(id - kOffset));
}

// ---- CharTokenizer ----------------------------------------------------------------------------

CharTokenizer::CharTokenizer(std::vector<char32_t> characters) : chars_(std::move(characters)) {
  std::sort(chars_.begin(), chars_.end());
  chars_.erase(std::unique(chars_.begin(), chars_.end()), chars_.end());
  for (char32_t c : chars_) {
    KILN_CHECK(c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF), "CharTokenizer",
               "code point " << static_cast<uint32_t>(c) << " is not a Unicode scalar value");
  }
}

CharTokenizer CharTokenizer::train(const std::vector<std::string>& corpus, const CharTokenizerOptions& o) {
  KILN_CHECK(o.min_frequency >= 1, "CharTokenizer::train", "min_frequency " << o.min_frequency << " < 1");
  KILN_CHECK(o.max_characters >= 0, "CharTokenizer::train", "max_characters " << o.max_characters << " < 0");
  std::map<char32_t, int64_t> counts;
  for (const std::string& text : corpus) {
    for (char32_t c : detail::decode_utf8(text)) {
      if (c != detail::kInvalidCodePoint) ++counts[c];
    }
  }
  std::vector<std::pair<char32_t, int64_t>> kept;
  for (auto& [c, n] : counts) {
    if (n >= o.min_frequency) kept.emplace_back(c, n);
  }
  if (o.max_characters > 0 && static_cast<int64_t>(kept.size()) > o.max_characters) {
    std::stable_sort(kept.begin(), kept.end(), [](auto& a, auto& b) { return a.second > b.second; });
    kept.resize(static_cast<size_t>(o.max_characters));
  }
  std::vector<char32_t> chars;
  for (auto& kc : kept) chars.push_back(kc.first);
  return CharTokenizer(std::move(chars));
}

std::vector<int64_t> CharTokenizer::encode_plain(std::string_view text) const {
  std::vector<int64_t> ids;
  for (char32_t c : detail::decode_utf8(text)) {
    auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
    ids.push_back(it != chars_.end() && *it == c ? 4 + (it - chars_.begin()) : 1);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t id : ids) {
    check_id(id, vocab_size(), "CharTokenizer::decode");
    if (id == 1) detail::append_utf8(s, 0xFFFD);
    if (id >= 4) detail::append_utf8(s, chars_[static_cast<size_t>(id - 4)]);
  }
  return s;
}

std::string CharTokenizer::id_to_piece(int64_t id) const {
  check_id(id, vocab_size(), "CharTokenizer::id_to_piece");
  if (id < 4) return kSpecialNames[id];
  std::string s;
  detail::append_utf8(s, chars_[static_cast<size_t>(id - 4)]);
  return s;
}

}  // namespace kiln::text
