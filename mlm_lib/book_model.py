"""The book's model: a small BERT pretrained (MLM + NSP) on the embedded Wikipedia excerpt.

It is committed as a checkpoint folder (fp16 safetensors + JSON + vocab.txt, a few MB) so that
every chapter loads it in well under a second instead of training for a quarter of an hour. It
is rebuilt, deterministically (fixed seed, fixed number of steps, 2 threads), by one command:

    python -m mlm_lib train --preset book --out runs/book --export mlm_lib/assets/book-model

A test loads it, checks that its config matches :func:`book_train_config`, and that it beats the
unigram baseline at filling held-out blanks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

BOOK_MODEL_DIR = Path(__file__).resolve().parent / "assets" / "book-model"
BOOK_MODEL_COMMAND = ("python -m mlm_lib train --preset book --out runs/book "
                      "--export mlm_lib/assets/book-model")

# The recipe: small enough to train on a laptop CPU in about 15 minutes, and to commit (fp16),
# but with NSP and 128-token pairs so that the NSP and attention chapters have something to show.
BOOK_RECIPE: dict[str, Any] = dict(
    preset="tiny",
    model={"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
           "intermediate_size": 1024, "hidden_dropout_prob": 0.0,
           "attention_probs_dropout_prob": 0.0},
    max_seq_length=128, short_seq_prob=0.1, nsp=True,
    mask_rate=0.3, mask_prob=0.8, random_prob=0.1, keep_prob=0.1,
    batch_size=32, lr=2e-3, warmup_steps=50, max_steps=1500, weight_decay=0.01,
    clip_grad_norm=1.0, log_every=50, eval_every=500, save_every=500, seed=0,
    device="cpu", amp=False, threads=2,
)


def book_train_config(**overrides: Any):
    """The :class:`~mlm_lib.train.TrainConfig` that makes the book's model."""
    from mlm_lib.train import TrainConfig

    return TrainConfig(**{**BOOK_RECIPE, **overrides})


def book_model(device: str | torch.device = "cpu") -> torch.nn.Module:
    """The committed book model as a ``BertForPreTraining`` in eval mode (a fresh copy each call)."""
    from mlm_lib.inference import load_model

    if not (BOOK_MODEL_DIR / "checkpoint.json").exists():
        raise FileNotFoundError(f"the book's model is missing from {BOOK_MODEL_DIR}; rebuild it with "
                                f"`{BOOK_MODEL_COMMAND}`")
    return load_model(BOOK_MODEL_DIR, device)


def book_model_tokenizer():
    """The tokenizer saved with the book's model (the book's 8,000-piece vocabulary)."""
    from mlm_lib.tokenizer import WordPieceTokenizer

    return WordPieceTokenizer.from_vocab_file(BOOK_MODEL_DIR / "vocab.txt", do_lower_case=True)
