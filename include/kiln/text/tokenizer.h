// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Tokenizers: text <-> token ids. A ByteTokenizer (UTF-8 bytes) and a CharTokenizer (Unicode
// code points seen in a corpus) need nothing; SentencePieceTokenizer (BPE or unigram, trained
// from a corpus) needs Kiln built with SentencePiece (sentencepiece_available()).
//
//   kiln::text::ByteTokenizer tok;
//   std::vector<int64_t> ids = tok.encode("héllo", {.add_bos = true, .add_eos = true});
//   std::string back = tok.decode(ids);  // "héllo": special tokens are skipped
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::text {

/// Ids of the special tokens of a tokenizer; -1 when the tokenizer has none of that kind.
struct SpecialTokens {
  int64_t pad = -1;  ///< padding (filled in by pad_sequences and padded encodes)
  int64_t unk = -1;  ///< unknown piece
  int64_t bos = -1;  ///< beginning of sequence
  int64_t eos = -1;  ///< end of sequence
};

/// How encode() frames, truncates and pads a sequence.
struct EncodeOptions {
  bool add_bos = false;  ///< prepend the bos token (kiln::Error if the tokenizer has none)
  bool add_eos = false;  ///< append the eos token
  /// > 0: keep at most max_length ids (bos/eos included; the eos, if added, stays last).
  int64_t max_length = 0;
  /// With max_length > 0: pad up to max_length with the pad token.
  bool pad_to_max_length = false;
};

/// A tokenizer. Ids are in [0, vocab_size()). Every method is const and thread-safe.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// The ids of `text` (no bos/eos, no padding).
  virtual std::vector<int64_t> encode_plain(std::string_view text) const = 0;
  /// The text of `ids`, skipping pad/bos/eos (unk decodes as the tokenizer's unknown marker).
  /// Throws kiln::Error for an id outside [0, vocab_size()).
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  /// Number of ids.
  virtual int64_t vocab_size() const = 0;
  /// The special tokens' ids.
  virtual SpecialTokens special_tokens() const = 0;
  /// The text of one id (a piece, a character, "<pad>" ...).
  virtual std::string id_to_piece(int64_t id) const = 0;
  /// encode_plain framed, truncated and padded as `options` says.
  std::vector<int64_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  /// encode() of every text.
  std::vector<std::vector<int64_t>> encode_batch(const std::vector<std::string>& texts,
                                                 const EncodeOptions& options = {}) const;
};

using TokenizerPtr = std::shared_ptr<const Tokenizer>;

/// UTF-8 bytes as tokens: ids 0..3 are <pad>, <unk>, <bos>, <eos>, byte b is id 4 + b
/// (vocab 260). Lossless for any byte string.
class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int64_t kOffset = 4;
  std::vector<int64_t> encode_plain(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return kOffset + 256; }
  SpecialTokens special_tokens() const override { return {0, 1, 2, 3}; }
  std::string id_to_piece(int64_t id) const override;
};

/// Options of CharTokenizer::train.
struct CharTokenizerOptions {
  /// Keep the characters seen at least this often.
  int64_t min_frequency = 1;
  /// > 0: keep at most this many characters (the most frequent; ties by code point).
  int64_t max_characters = 0;
};

/// Unicode code points as tokens: ids 0..3 are <pad>, <unk>, <bos>, <eos>, then the vocabulary's
/// characters in code-point order. Characters outside it (and bytes that are not valid UTF-8)
/// encode as <unk>; <unk> decodes as U+FFFD.
class CharTokenizer : public Tokenizer {
 public:
  /// A tokenizer of exactly these code points (duplicates dropped).
  explicit CharTokenizer(std::vector<char32_t> characters);
  /// The characters of a corpus (UTF-8 texts).
  static CharTokenizer train(const std::vector<std::string>& corpus, const CharTokenizerOptions& options = {});
  std::vector<int64_t> encode_plain(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return 4 + static_cast<int64_t>(chars_.size()); }
  SpecialTokens special_tokens() const override { return {0, 1, 2, 3}; }
  std::string id_to_piece(int64_t id) const override;
  /// The vocabulary's characters, in id order (id = 4 + index).
  const std::vector<char32_t>& characters() const { return chars_; }

 private:
  std::vector<char32_t> chars_;
};

/// Whether this build of Kiln has SentencePiece (else SentencePieceTokenizer throws kiln::Error).
bool sentencepiece_available();

/// Options of SentencePieceTokenizer::train (SentencePiece's trainer flags).
struct SentencePieceTrainOptions {
  std::string model_type = "unigram";  ///< "unigram", "bpe", "char" or "word"
  int64_t vocab_size = 1000;
  double character_coverage = 1.0;
  /// Special ids (-1: none); the defaults match ByteTokenizer and CharTokenizer.
  int64_t pad_id = 0, unk_id = 1, bos_id = 2, eos_id = 3;
  /// Pieces that are never split (e.g. "<sep>"), given ids after the specials.
  std::vector<std::string> user_defined_symbols{};
  /// Sentences longer than this (bytes) are skipped in training.
  int64_t max_sentence_length = 4192;
  /// Trainer threads (1 gives the same model on every machine).
  int64_t num_threads = 1;
  /// Stop at the vocabulary SentencePiece can reach instead of failing when vocab_size is too large.
  bool hard_vocab_limit = true;
};

/// A SentencePiece model (BPE or unigram). Load a .model file, or train one from a corpus.
/// A missing or broken model file throws kiln::Error.
class SentencePieceTokenizer : public Tokenizer {
 public:
  /// Loads a .model file.
  static SentencePieceTokenizer load(const std::string& path);
  /// A model from the bytes of a .model file.
  static SentencePieceTokenizer from_serialized(const std::string& model_proto);
  /// Trains a model on the corpus (one sentence per item; newlines inside are kept as spaces).
  static SentencePieceTokenizer train(const std::vector<std::string>& corpus, const SentencePieceTrainOptions& options);
  /// Trains on a text file (one sentence per line).
  static SentencePieceTokenizer train_file(const std::string& path, const SentencePieceTrainOptions& options);

  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  SentencePieceTokenizer& operator=(SentencePieceTokenizer&&) noexcept;
  ~SentencePieceTokenizer() override;

  std::vector<int64_t> encode_plain(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  SpecialTokens special_tokens() const override;
  std::string id_to_piece(int64_t id) const override;
  /// The pieces of `text` (e.g. "▁Hello", "▁wor", "ld").
  std::vector<std::string> encode_pieces(std::string_view text) const;
  /// The id of a piece (the unk id when it is not in the vocabulary).
  int64_t piece_to_id(std::string_view piece) const;
  /// The model's bytes (what save() writes).
  std::string serialized() const;
  /// Writes the model to a .model file.
  void save(const std::string& path) const;

 private:
  struct Impl;
  explicit SentencePieceTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::text
