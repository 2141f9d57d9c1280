#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Reference data of kiln::text's SentencePiece tests (tests/text/, tests/data/text/).

Writes, from the fortune file of the Debian package fortunes-min (one sentence a line, blank
lines dropped), tests/data/text/corpus.txt; trains a unigram and a BPE model on it with the
sentencepiece Python package (the version of Debian's libsentencepiece-dev, 0.1.97) and writes
the unigram one as sp_unigram.model (the tests load it, and train both); encodes a list of strings with both and writes the ids, pieces
and decoded texts to sentencepiece_reference.json.

    pip install sentencepiece==0.1.97 && python3 scripts/gen_text_reference.py
"""
import json
import os

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "text")
SOURCE = "/usr/share/games/fortunes/fortunes"

# The options kiln's SentencePieceTrainOptions passes by default, besides type and size.
COMMON = dict(character_coverage=1.0, pad_id=0, unk_id=1, bos_id=2, eos_id=3, num_threads=1,
              max_sentence_length=4192, hard_vocab_limit=True)
MODELS = {"unigram": 300, "bpe": 300}

TEXTS = [
    "Hello world",
    "",
    "   ",
    "The quick brown fox jumps over the lazy dog.",
    "A fool and his money are soon parted.",
    "héllo wörld, naïve café — déjà vu",
    "日本語のテキスト",
    "emoji 🙂 and symbols ∑ ≤ ∞",
    "two\nlines",
    "  leading and trailing spaces  ",
    "UPPER lower MiXeD 12345 !@#$%",
]


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(SOURCE, encoding="utf-8", errors="replace") as f:
        lines = [ln.strip() for ln in f if ln.strip() and ln.strip() != "%"]
    corpus = os.path.join(OUT, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    ref = {"texts": TEXTS, "models": {}}
    for kind, size in MODELS.items():
        prefix = os.path.join(OUT, f"sp_{kind}")
        spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, model_type=kind, vocab_size=size,
                                       minloglevel=2, **COMMON)
        os.remove(prefix + ".vocab")
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        if kind != "unigram":  # one model file is checked in (loading); the tests train the others
            os.remove(prefix + ".model")
        ref["models"][kind] = {
            "vocab_size": sp.get_piece_size(),
            "ids": [sp.encode(t) for t in TEXTS],
            "pieces": [sp.encode(t, out_type=str) for t in TEXTS],
            "decoded": [sp.decode(sp.encode(t)) for t in TEXTS],
            "first_pieces": [sp.id_to_piece(i) for i in range(12)],
        }
    with open(os.path.join(OUT, "sentencepiece_reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False, indent=0)
    print("wrote", OUT, len(lines), "corpus lines")


if __name__ == "__main__":
    main()
