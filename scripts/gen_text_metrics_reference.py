#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes tests/data/text/metrics_reference.json: random sentence pairs and their word and
character error rates (jiwer), corpus BLEU (NLTK, no smoothing) and ROUGE-L (rouge-score,
no stemming), the reference for tests/unit/test_text_metrics.cpp.

Usage: python3 -m pip install jiwer nltk rouge-score && python3 scripts/gen_text_metrics_reference.py
"""
import json
import os
import random

import jiwer
from nltk.translate.bleu_score import corpus_bleu
from rouge_score import rouge_scorer

VOCAB = "the a cat dog sat on mat ran fast slow big small red blue and of to in it is".split()


def sentence(rng, lo=1, hi=12):
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(lo, hi)))


def mutate(rng, s):
    words = s.split()
    for _ in range(rng.randint(0, 3)):
        op = rng.choice("sid")
        if op == "s" and words:
            words[rng.randrange(len(words))] = rng.choice(VOCAB)
        elif op == "i":
            words.insert(rng.randint(0, len(words)), rng.choice(VOCAB))
        elif op == "d" and len(words) > 1:
            del words[rng.randrange(len(words))]
    return " ".join(words)


def main():
    rng = random.Random(1234)
    cases = []
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    for k in range(40):
        n = rng.randint(1, 5)
        refs = [sentence(rng, 4, 14) for _ in range(n)]
        hyps = [mutate(rng, r) for r in refs]
        # BLEU with one or two references per hypothesis
        bleu_refs = [[r.split()] + ([mutate(rng, r).split()] if k % 2 else []) for r in refs]
        bleu_hyps = [h.split() for h in hyps]
        rouge = [scorer.score(r, h)["rougeL"] for r, h in zip(refs, hyps)]
        cases.append({
            "references": refs, "hypotheses": hyps,
            "wer": jiwer.wer(refs, hyps), "cer": jiwer.cer(refs, hyps),
            "bleu_references": bleu_refs, "bleu": corpus_bleu(bleu_refs, bleu_hyps),
            "bleu2": corpus_bleu(bleu_refs, bleu_hyps, weights=(0.5, 0.5)),
            "rouge_l": [[s.precision, s.recall, s.fmeasure] for s in rouge],
        })
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "text",
                       "metrics_reference.json")
    with open(out, "w") as f:
        json.dump({"generator": "scripts/gen_text_metrics_reference.py", "cases": cases}, f, indent=0)
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
