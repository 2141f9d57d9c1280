// SPDX-License-Identifier: MIT OR Apache-2.0
// SentencePieceTokenizer over libsentencepiece (KILN_WITH_SENTENCEPIECE); without it every entry
// point throws kiln::Error saying so.
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "kiln/error.h"
#include "kiln/text/tokenizer.h"

#if KILN_WITH_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#endif

namespace kiln::text {

#if KILN_WITH_SENTENCEPIECE

bool sentencepiece_available() { return true; }

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

namespace {
void check_status(const sentencepiece::util::Status& s, const char* op, const std::string& what) {
  KILN_CHECK(s.ok(), op, what << ": " << s.ToString());
}

/// Feeds the corpus to the trainer, one item per sentence (newlines become spaces).
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& v) : v_(v) { load(); }
  bool done() const override { return i_ >= v_.size(); }
  void Next() override {
    ++i_;
    load();
  }
  const std::string& value() const override { return cur_; }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

 private:
  void load() {
    if (i_ >= v_.size()) return;
    cur_ = v_[i_];
    for (char& c : cur_) {
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    }
  }
  const std::vector<std::string>& v_;
  size_t i_ = 0;
  std::string cur_;
};

std::unordered_map<std::string, std::string> trainer_args(const SentencePieceTrainOptions& o) {
  const char* op = "SentencePieceTokenizer::train";
  KILN_CHECK(o.model_type == "unigram" || o.model_type == "bpe" || o.model_type == "char" || o.model_type == "word", op,
             "model_type '" << o.model_type << "' is not unigram, bpe, char or word");
  KILN_CHECK(o.vocab_size > 0, op, "vocab_size " << o.vocab_size << " must be positive");
  KILN_CHECK(o.unk_id >= 0, op, "SentencePiece needs an unk id (unk_id " << o.unk_id << ")");
  std::string symbols;
  for (const std::string& s : o.user_defined_symbols) symbols += (symbols.empty() ? "" : ",") + s;
  std::unordered_map<std::string, std::string> a{{"model_type", o.model_type},
                                                 {"vocab_size", std::to_string(o.vocab_size)},
                                                 {"character_coverage", std::to_string(o.character_coverage)},
                                                 {"pad_id", std::to_string(o.pad_id)},
                                                 {"unk_id", std::to_string(o.unk_id)},
                                                 {"bos_id", std::to_string(o.bos_id)},
                                                 {"eos_id", std::to_string(o.eos_id)},
                                                 {"max_sentence_length", std::to_string(o.max_sentence_length)},
                                                 {"num_threads", std::to_string(o.num_threads)},
                                                 {"hard_vocab_limit", o.hard_vocab_limit ? "true" : "false"},
                                                 {"minloglevel", "2"},
                                                 {"model_prefix", ""}};
  if (!symbols.empty()) a["user_defined_symbols"] = symbols;
  return a;
}
}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SentencePieceTokenizer SentencePieceTokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "SentencePieceTokenizer::load", "cannot open '" << path << "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  auto impl = std::make_unique<Impl>();
  check_status(impl->sp.LoadFromSerializedProto(ss.str()), "SentencePieceTokenizer::load",
               "'" + path + "' is not a SentencePiece model");
  return SentencePieceTokenizer(std::move(impl));
}

SentencePieceTokenizer SentencePieceTokenizer::from_serialized(const std::string& model_proto) {
  auto impl = std::make_unique<Impl>();
  check_status(impl->sp.LoadFromSerializedProto(model_proto), "SentencePieceTokenizer::from_serialized",
               "not a SentencePiece model (" + std::to_string(model_proto.size()) + " bytes)");
  return SentencePieceTokenizer(std::move(impl));
}

SentencePieceTokenizer SentencePieceTokenizer::train(const std::vector<std::string>& corpus,
                                                     const SentencePieceTrainOptions& options) {
  KILN_CHECK(!corpus.empty(), "SentencePieceTokenizer::train", "empty corpus");
  auto args = trainer_args(options);
  VectorIterator it(corpus);
  std::string proto;
  check_status(sentencepiece::SentencePieceTrainer::Train(args, &it, &proto), "SentencePieceTokenizer::train",
               "training failed");
  return from_serialized(proto);
}

SentencePieceTokenizer SentencePieceTokenizer::train_file(const std::string& path,
                                                          const SentencePieceTrainOptions& options) {
  std::ifstream in(path);
  KILN_CHECK(in.good(), "SentencePieceTokenizer::train_file", "cannot open '" << path << "'");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(std::move(line));
  }
  return train(lines, options);
}

SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int64_t> SentencePieceTokenizer::encode_plain(std::string_view text) const {
  std::vector<int> ids;
  check_status(impl_->sp.Encode(std::string(text), &ids), "SentencePieceTokenizer::encode", "encoding failed");
  return {ids.begin(), ids.end()};
}

std::vector<std::string> SentencePieceTokenizer::encode_pieces(std::string_view text) const {
  std::vector<std::string> pieces;
  check_status(impl_->sp.Encode(std::string(text), &pieces), "SentencePieceTokenizer::encode_pieces",
               "encoding failed");
  return pieces;
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  const int64_t n = vocab_size();
  std::vector<int> v;
  v.reserve(ids.size());
  for (int64_t id : ids) {
    KILN_CHECK(id >= 0 && id < n, "SentencePieceTokenizer::decode",
               "id " << id << " is outside the vocabulary [0, " << n << ")");
    v.push_back(static_cast<int>(id));
  }
  std::string out;
  check_status(impl_->sp.Decode(v, &out), "SentencePieceTokenizer::decode", "decoding failed");
  return out;
}

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }

SpecialTokens SentencePieceTokenizer::special_tokens() const {
  return {impl_->sp.pad_id(), impl_->sp.unk_id(), impl_->sp.bos_id(), impl_->sp.eos_id()};
}

std::string SentencePieceTokenizer::id_to_piece(int64_t id) const {
  KILN_CHECK(id >= 0 && id < vocab_size(), "SentencePieceTokenizer::id_to_piece",
             "id " << id << " is outside the vocabulary [0, " << vocab_size() << ")");
  return impl_->sp.IdToPiece(static_cast<int>(id));
}

int64_t SentencePieceTokenizer::piece_to_id(std::string_view piece) const {
  return impl_->sp.PieceToId(std::string(piece));
}

std::string SentencePieceTokenizer::serialized() const { return impl_->sp.serialized_model_proto(); }

void SentencePieceTokenizer::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary);
  KILN_CHECK(out.good(), "SentencePieceTokenizer::save", "cannot write '" << path << "'");
  const std::string s = serialized();
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
  KILN_CHECK(out.good(), "SentencePieceTokenizer::save", "write to '" << path << "' failed");
}

#else  // !KILN_WITH_SENTENCEPIECE

bool sentencepiece_available() { return false; }

struct SentencePieceTokenizer::Impl {};

namespace {
[[noreturn]] void unavailable(const char* op) {
  detail::MsgBuilder msg;
  msg << "[" << op << "] this build of Kiln has no SentencePiece (install libsentencepiece-dev and reconfigure)";
  detail::throw_error(msg.str());
}
}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePieceTokenizer SentencePieceTokenizer::load(const std::string&) { unavailable("SentencePieceTokenizer::load"); }
SentencePieceTokenizer SentencePieceTokenizer::from_serialized(const std::string&) {
  unavailable("SentencePieceTokenizer::from_serialized");
}
SentencePieceTokenizer SentencePieceTokenizer::train(const std::vector<std::string>&,
                                                     const SentencePieceTrainOptions&) {
  unavailable("SentencePieceTokenizer::train");
}
SentencePieceTokenizer SentencePieceTokenizer::train_file(const std::string&, const SentencePieceTrainOptions&) {
  unavailable("SentencePieceTokenizer::train_file");
}
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;
std::vector<int64_t> SentencePieceTokenizer::encode_plain(std::string_view) const { unavailable("SentencePiece"); }
std::vector<std::string> SentencePieceTokenizer::encode_pieces(std::string_view) const { unavailable("SentencePiece"); }
std::string SentencePieceTokenizer::decode(const std::vector<int64_t>&) const { unavailable("SentencePiece"); }
int64_t SentencePieceTokenizer::vocab_size() const { unavailable("SentencePiece"); }
SpecialTokens SentencePieceTokenizer::special_tokens() const { unavailable("SentencePiece"); }
std::string SentencePieceTokenizer::id_to_piece(int64_t) const { unavailable("SentencePiece"); }
int64_t SentencePieceTokenizer::piece_to_id(std::string_view) const { unavailable("SentencePiece"); }
std::string SentencePieceTokenizer::serialized() const { unavailable("SentencePiece"); }
void SentencePieceTokenizer::save(const std::string&) const { unavailable("SentencePiece"); }

#endif

}  // namespace kiln::text
