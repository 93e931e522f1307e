"""Train the book's WordPiece vocabulary and report how long it took.

    python benchmarks/train_vocab.py --out mlm_lib/assets/book-model/vocab.txt

reproduces the committed ``mlm_lib/assets/book-model/vocab.txt`` (the book's model's vocabulary,
the one copy): 8,000 lowercase pieces trained
on the training split (``train_valid_split(load_wikipedia(), 0.05, seed=0)``) of the embedded
Wikipedia excerpt. Last line: the training time.
"""

from __future__ import annotations

import argparse
import time

import torch

from mlm_lib.corpus import load_wikipedia, train_valid_split
from mlm_lib.wordpiece import train_wordpiece


def train_book_vocab(vocab_size: int = 8000):
    """The book's vocabulary, from the same documents the book's model trains on."""
    train_docs, _ = train_valid_split(load_wikipedia(), valid_fraction=0.05, seed=0)
    texts = [s for d in train_docs for s in d.sentences]
    return train_wordpiece(texts, vocab_size=vocab_size, do_lower_case=True)


def main() -> None:
    torch.set_num_threads(2)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="where to write vocab.txt (default: only time it)")
    ap.add_argument("--vocab-size", type=int, default=8000)
    args = ap.parse_args()
    load_wikipedia()  # parse (or load the cache) outside the timed part
    t0 = time.perf_counter()
    tok = train_book_vocab(args.vocab_size)
    seconds = time.perf_counter() - t0
    if args.out:
        tok.save_vocab(args.out)
        print(f"wrote {tok.vocab_size} pieces to {args.out}")
    print(f"vocabulary training time: {seconds:.1f} s")


if __name__ == "__main__":
    main()
