// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// kiln::text (library kiln::text, docs/text.md): tokenizers (byte, character, SentencePiece BPE
// and unigram), padding and bucketing of token sequences, text datasets for the DataLoader.
#include "kiln/text/batch.h"
#include "kiln/text/datasets.h"
#include "kiln/text/tokenizer.h"
