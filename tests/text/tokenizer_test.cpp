// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::text tokenizers: byte and character tokenizers (round trips, unicode, special tokens,
// truncation, padding), SentencePiece against the sentencepiece Python package
// (scripts/gen_text_reference.py -> tests/data/text/).
#include <gtest/gtest.h>
#include <kiln/text.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_paths.h"

using namespace kiln;
using namespace kiln::text;

namespace {
const std::string kDir = KILN_TEXT_DATA_DIR;

nlohmann::json reference() {
  std::ifstream in(kDir + "/sentencepiece_reference.json");
  return nlohmann::json::parse(in);
}

std::vector<std::string> corpus_lines() {
  std::ifstream in(kDir + "/corpus.txt");
  std::vector<std::string> v;
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}
}  // namespace

TEST(TextByte, RoundTripAndSpecials) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 260);
  for (std::string s : {std::string(""), std::string("abc"), std::string("h\xC3\xA9llo \xF0\x9F\x99\x82"),
                        std::string("\x00\xFF\x80", 3)}) {
    EXPECT_EQ(tok.decode(tok.encode(s, {.add_bos = true, .add_eos = true})), s);
    EXPECT_EQ(tok.encode_plain(s).size(), s.size());
  }
  EXPECT_EQ(tok.encode("A"), (std::vector<int64_t>{4 + 'A'}));
  EXPECT_EQ(tok.encode("AB", {.add_bos = true, .add_eos = true}), (std::vector<int64_t>{2, 4 + 'A', 4 + 'B', 3}));
  EXPECT_EQ(tok.id_to_piece(0), "<pad>");
  EXPECT_THROW(tok.decode({260}), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
}

TEST(TextByte, TruncationAndPadding) {
  ByteTokenizer tok;
  // The eos stays last when truncating.
  EXPECT_EQ(tok.encode("abcdef", {.add_bos = true, .add_eos = true, .max_length = 4}),
            (std::vector<int64_t>{2, 4 + 'a', 4 + 'b', 3}));
  EXPECT_EQ(tok.encode("ab", {.add_eos = true, .max_length = 5, .pad_to_max_length = true}),
            (std::vector<int64_t>{4 + 'a', 4 + 'b', 3, 0, 0}));
  EXPECT_EQ(tok.encode("", {.max_length = 2, .pad_to_max_length = true}), (std::vector<int64_t>{0, 0}));
  EXPECT_THROW(tok.encode("ab", {.add_bos = true, .add_eos = true, .max_length = 1}), Error);
  EXPECT_THROW(tok.encode("ab", {.pad_to_max_length = true}), Error);
  EXPECT_THROW(tok.encode("ab", {.max_length = -1}), Error);
}

TEST(TextChar, TrainEncodeDecodeUnicode) {
  CharTokenizer tok = CharTokenizer::train({"héllo", "wörld 🙂", "日本"});
  // Specials, then the characters in code-point order.
  EXPECT_EQ(tok.vocab_size(), 4 + 12);
  EXPECT_EQ(tok.characters().front(), U' ');
  EXPECT_EQ(tok.id_to_piece(4), " ");
  EXPECT_EQ(tok.id_to_piece(tok.vocab_size() - 1), "🙂");
  for (std::string s : {"", "héllo wörld", "日本 🙂"}) {
    std::vector<int64_t> ids = tok.encode(s, {.add_bos = true, .add_eos = true});
    EXPECT_EQ(ids.size(), s == "" ? 2u : s == "héllo wörld" ? 13u : 6u);
    EXPECT_EQ(tok.decode(ids), s);
  }
  // Unknown characters and invalid UTF-8 bytes are <unk>, which decodes as U+FFFD.
  EXPECT_EQ(tok.encode_plain("hxz"), (std::vector<int64_t>{tok.encode_plain("h")[0], 1, 1}));
  EXPECT_EQ(tok.encode_plain("h\xFF"), (std::vector<int64_t>{tok.encode_plain("h")[0], 1}));
  EXPECT_EQ(tok.encode_plain("\xE6\x97"), (std::vector<int64_t>{1, 1}));  // truncated sequence
  EXPECT_EQ(tok.decode({tok.encode_plain("h")[0], 1}), "h\xEF\xBF\xBD");
  EXPECT_THROW(tok.decode({99}), Error);
}

TEST(TextChar, FrequencyLimits) {
  CharTokenizer tok = CharTokenizer::train({"aaab", "bc"}, {.min_frequency = 2});
  EXPECT_EQ(tok.characters(), (std::vector<char32_t>{U'a', U'b'}));
  CharTokenizer top = CharTokenizer::train({"aaabbc"}, {.max_characters = 1});
  EXPECT_EQ(top.characters(), (std::vector<char32_t>{U'a'}));
  EXPECT_THROW(CharTokenizer({char32_t{0xD800}}), Error);
  EXPECT_THROW(CharTokenizer::train({"a"}, {.min_frequency = 0}), Error);
}

TEST(TextSentencePiece, LoadedModelMatchesPython) {
  if (!sentencepiece_available()) GTEST_SKIP() << "built without SentencePiece";
  const nlohmann::json ref = reference();
  const nlohmann::json& m = ref["models"]["unigram"];
  SentencePieceTokenizer tok = SentencePieceTokenizer::load(kDir + "/sp_unigram.model");
  EXPECT_EQ(tok.vocab_size(), m["vocab_size"].get<int64_t>());
  SpecialTokens sp = tok.special_tokens();
  EXPECT_EQ(sp.pad, 0);
  EXPECT_EQ(sp.unk, 1);
  EXPECT_EQ(sp.bos, 2);
  EXPECT_EQ(sp.eos, 3);
  for (size_t i = 0; i < ref["texts"].size(); ++i) {
    const std::string text = ref["texts"][i];
    SCOPED_TRACE(text);
    EXPECT_EQ(tok.encode(text), m["ids"][i].get<std::vector<int64_t>>());
    EXPECT_EQ(tok.encode_pieces(text), m["pieces"][i].get<std::vector<std::string>>());
    EXPECT_EQ(tok.decode(tok.encode(text)), m["decoded"][i].get<std::string>());
    // bos/eos are added around the same ids and skipped when decoding.
    std::vector<int64_t> framed = tok.encode(text, {.add_bos = true, .add_eos = true});
    EXPECT_EQ(framed.front(), 2);
    EXPECT_EQ(framed.back(), 3);
    EXPECT_EQ(tok.decode(framed), m["decoded"][i].get<std::string>());
  }
  for (int64_t id = 0; id < 12; ++id) EXPECT_EQ(tok.id_to_piece(id), m["first_pieces"][id].get<std::string>());
  EXPECT_EQ(tok.piece_to_id("</s>"), 3);  // SentencePiece's names: <pad> <unk> <s> </s>
  // Serialise and load again.
  SentencePieceTokenizer again = SentencePieceTokenizer::from_serialized(tok.serialized());
  EXPECT_EQ(again.encode("Hello world"), tok.encode("Hello world"));
}

TEST(TextSentencePiece, TrainingMatchesPython) {
  if (!sentencepiece_available()) GTEST_SKIP() << "built without SentencePiece";
  const nlohmann::json ref = reference();
  const std::vector<std::string> corpus = corpus_lines();
  for (const char* kind : {"unigram", "bpe"}) {
    SCOPED_TRACE(kind);
    const nlohmann::json& m = ref["models"][kind];
    SentencePieceTokenizer tok =
        SentencePieceTokenizer::train(corpus, {.model_type = kind, .vocab_size = m["vocab_size"].get<int64_t>()});
    EXPECT_EQ(tok.vocab_size(), m["vocab_size"].get<int64_t>());
    for (size_t i = 0; i < ref["texts"].size(); ++i) {
      const std::string text = ref["texts"][i];
      SCOPED_TRACE(text);
      EXPECT_EQ(tok.encode(text), m["ids"][i].get<std::vector<int64_t>>());
      EXPECT_EQ(tok.decode(tok.encode(text)), m["decoded"][i].get<std::string>());
    }
  }
}

TEST(TextSentencePiece, RoundTripPaddingAndErrors) {
  if (!sentencepiece_available()) GTEST_SKIP() << "built without SentencePiece";
  SentencePieceTokenizer tok = SentencePieceTokenizer::load(kDir + "/sp_unigram.model");
  const std::string s = "The quick brown fox jumps over the lazy dog.";
  EXPECT_EQ(tok.decode(tok.encode(s)), s);
  std::vector<int64_t> ids =
      tok.encode(s, {.add_bos = true, .add_eos = true, .max_length = 64, .pad_to_max_length = true});
  ASSERT_EQ(ids.size(), 64u);
  EXPECT_EQ(ids.back(), 0);
  EXPECT_EQ(tok.decode(ids), s);
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_THROW(tok.decode({tok.vocab_size()}), Error);
  // A missing file, a file that is not a model, bad training options: kiln::Error.
  EXPECT_THROW(SentencePieceTokenizer::load(kDir + "/no_such.model"), Error);
  EXPECT_THROW(SentencePieceTokenizer::load(kDir + "/corpus.txt"), Error);
  EXPECT_THROW(SentencePieceTokenizer::from_serialized("not a model"), Error);
  EXPECT_THROW(SentencePieceTokenizer::train({}, {}), Error);
  EXPECT_THROW(SentencePieceTokenizer::train({"a b"}, {.model_type = "nope"}), Error);
  EXPECT_THROW(SentencePieceTokenizer::train({"a b c"}, {.vocab_size = 5000}), Error);
  // Save and load through a file.
  const std::string path = ::testing::TempDir() + "/kiln_text_sp.model";
  tok.save(path);
  EXPECT_EQ(SentencePieceTokenizer::load(path).encode(s), tok.encode(s));
}

TEST(TextSentencePiece, UserDefinedSymbolsStayWhole) {
  if (!sentencepiece_available()) GTEST_SKIP() << "built without SentencePiece";
  SentencePieceTokenizer tok = SentencePieceTokenizer::train(
      corpus_lines(), {.model_type = "bpe", .vocab_size = 200, .user_defined_symbols = {"<sep>"}});
  const int64_t sep = tok.piece_to_id("<sep>");
  EXPECT_EQ(sep, 4);
  std::vector<int64_t> ids = tok.encode("left<sep>right");
  EXPECT_NE(std::find(ids.begin(), ids.end(), sep), ids.end());
}

TEST(TextSentencePiece, UnavailableThrows) {
  if (sentencepiece_available()) GTEST_SKIP() << "built with SentencePiece";
  EXPECT_THROW(SentencePieceTokenizer::load(kDir + "/sp_unigram.model"), Error);
}
