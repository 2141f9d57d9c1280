#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Bag-of-words logistic regression on the split of examples/text-classification.

    text-classification --write-split DIR   # writes DIR/train.tsv and DIR/test.tsv
    python3 baseline.py DIR                  # needs python3-sklearn (scripts/install-deps.sh)

Each line of the TSV files is "label<TAB>text" with newlines and tabs escaped as \\n and \\t.
"""
import sys

from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score


def read(path):
    labels, texts = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            label, text = line.rstrip("\n").split("\t", 1)
            labels.append(int(label))
            texts.append(text.replace("\\n", "\n").replace("\\t", "\t"))
    return texts, labels


def main():
    split = sys.argv[1] if len(sys.argv) > 1 else "."
    x_train, y_train = read(f"{split}/train.tsv")
    x_test, y_test = read(f"{split}/test.tsv")
    vec = CountVectorizer(lowercase=True)
    clf = LogisticRegression(max_iter=5000, C=1.0)
    clf.fit(vec.fit_transform(x_train), y_train)
    pred = clf.predict(vec.transform(x_test))
    print(f"bag-of-words logistic regression: {len(x_train)} train, {len(x_test)} test, "
          f"{len(vec.vocabulary_)} words")
    print(f"test accuracy: {100 * accuracy_score(y_test, pred):.2f}%  "
          f"macro F1: {f1_score(y_test, pred, average='macro'):.4f}")


if __name__ == "__main__":
    main()
