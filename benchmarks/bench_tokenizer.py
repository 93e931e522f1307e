"""Encode throughput of mlm_lib's tokenizer against transformers' Python BERT tokenizer.

Both encode every sentence of the embedded corpus (Wikipedia excerpt + Lee news stories) to ids
with [CLS]/[SEP], on the same bert-base-uncased vocab.txt, one sentence per call, each starting
cold (a fresh tokenizer object, so our word cache starts empty). The reference is
``BertTokenizerLegacy``, the pure-Python tokenizer (transformers 5.x's ``BertTokenizer`` is the
Rust one, shown for information). Last line: ``speedup: X.XX`` (ours over the Python reference).
"""

from __future__ import annotations

import time

from mlm_lib.book.book_model import bert_base_uncased_vocab
from mlm_lib.corpus import load_lee, load_wikipedia
from mlm_lib.tokenizer import WordPieceTokenizer


def throughput(encode, sentences: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = sum(len(encode(s)) for s in sentences)
    return time.perf_counter() - t0, n


def main() -> None:
    from transformers import BertTokenizer
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    vocab = str(bert_base_uncased_vocab())
    sentences = [s for d in load_wikipedia() + load_lee() for s in d.sentences]
    chars = sum(map(len, sentences))
    print(f"corpus: {len(sentences)} sentences, {chars} characters")

    ours = WordPieceTokenizer.from_vocab_file(vocab)
    t_ours, n_ours = throughput(lambda s: ours.encode(s).input_ids, sentences)
    ref = BertTokenizerLegacy(vocab)
    t_ref, n_ref = throughput(lambda s: ref(s)["input_ids"], sentences)
    fast = BertTokenizer(vocab=vocab)
    t_fast, n_fast = throughput(lambda s: fast(s)["input_ids"], sentences)
    assert n_ours == n_ref, "token counts differ from the reference"

    for name, t, n in [("mlm_lib WordPieceTokenizer", t_ours, n_ours),
                       ("transformers BertTokenizerLegacy (Python)", t_ref, n_ref),
                       ("transformers BertTokenizer (Rust, for information)", t_fast, n_fast)]:
        print(f"{name:52s} {t:6.2f} s  {n / t:10,.0f} tokens/s  {chars / t / 1e6:5.2f} M chars/s")
    print(f"speedup: {t_ref / t_ours:.2f}")


if __name__ == "__main__":
    main()
