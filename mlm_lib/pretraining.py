"""Pretraining examples ``[CLS] A [SEP] B [SEP]``, following Google's ``create_pretraining_data.py``.

For each document, sentences are gathered into a chunk until it reaches a target length. The
chunk is cut at a random sentence boundary: the first part is segment A. Half of the time B is
the rest of the chunk (IsNext); otherwise (and always when the chunk is a single sentence) B is
a run of sentences from a random other document (NotNext), and the chunk's unused sentences are
put back to start the next example, so no text is wasted. The pair is then trimmed to fit by
``truncate_seq_pair``, one token at a time from the longer segment, front or back at random.

The target is ``max_seq_length - 3`` tokens, but with probability ``short_seq_prob`` a shorter
random target is drawn, so the model also sees short inputs like those it meets when fine-tuned.
One deliberate change: the original draws that target once per *document*, so a long document
that draws a short target becomes dozens of one-sentence chunks, all forced to NotNext, which
tilts the NSP labels well away from half and half (41% IsNext on the embedded corpus). Here the
target is drawn again for every example, which is what the paper describes (10% of sequences).

ALBERT's sentence-order pairs (``pair_task="sop"``) keep both segments from the chunk and swap
them half of the time (:func:`sentence_order_pair`).

Masking is *not* done here: ``mlm_lib.masking`` masks batches on the fly (dynamic masking).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any, Sequence

from mlm_lib.corpus import Document, load_corpus, train_valid_split

# NotNext draws a random document until it is not this one; after this many tries it takes what
# it drew (a corpus of one document has no other), as Google's create_pretraining_data.py does.
OTHER_DOCUMENT_TRIES = 10
# The held-out documents are cut into examples with their own random stream (seed + this), so
# that changing the training documents does not change the held-out examples' cuts.
VALID_SEED_OFFSET = 7
# The share of documents held out for evaluation, and the seed of that split (fixed, so that every
# run of the book is scored on the same documents).
VALID_FRACTION = 0.05
# How a pair [CLS] A [SEP] B [SEP] is made: BERT's next sentence prediction or ALBERT's sentence order.
PAIR_TASKS = ("nsp", "sop")
SPLIT_SEED = 0

@dataclass
class PretrainingExample:
    """One sequence: ids with [CLS]/[SEP], segment ids (0 for A, 1 for B), and the NSP label."""

    input_ids: list[int]
    token_type_ids: list[int]
    # 1: B really follows A (IsNext); 0: B comes from another document (NotNext). With
    # sentence-order pairs, 1: A and B in their order; 0: the same two swapped.
    is_next: int

    def __len__(self) -> int:
        return len(self.input_ids)


def truncate_seq_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """Trim the longer list, from its front or back at random, until both fit (in place).

    Cutting both ends avoids a bias towards sentence beginnings being seen more than endings.
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()


def instances_from_document(docs: list[list[list[int]]], index: int, max_seq_length: int,
                            short_seq_prob: float, nsp: bool, cls_id: int, sep_id: int,
                            rng: random.Random, pair_task: str = "nsp") -> list[PretrainingExample]:
    """The examples cut from ``docs[index]`` (see the module docstring). ``docs`` holds every
    document as lists of token ids per sentence; ``pair_task`` says how a pair is made and
    labelled (:data:`PAIR_TASKS`)."""
    document = docs[index]
    max_num_tokens = max_seq_length - (3 if nsp else 2)

    def draw_target() -> int:
        return rng.randint(2, max_num_tokens) if rng.random() < short_seq_prob else max_num_tokens

    target = draw_target()
    out: list[PretrainingExample] = []
    chunk: list[list[int]] = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if not nsp:  # one contiguous segment, as in RoBERTa's "doc-sentences" input
                tokens = [t for s in chunk for t in s]
                del tokens[max_num_tokens:]
                out.append(PretrainingExample([cls_id] + tokens + [sep_id], [0] * (len(tokens) + 2), 1))
            else:
                if pair_task == "sop":
                    tokens_a, tokens_b, is_next = sentence_order_pair(chunk, rng)
                    unused = 0
                else:
                    tokens_a, tokens_b, is_next, unused = next_sentence_pair(docs, index, chunk,
                                                                             target, rng)
                i -= unused  # put the unused sentences back
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                if tokens_a and tokens_b:
                    ids = [cls_id] + tokens_a + [sep_id] + tokens_b + [sep_id]
                    types = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                    out.append(PretrainingExample(ids, types, is_next))
            chunk = []
            length = 0
            target = draw_target()
        i += 1
    return out


def next_sentence_pair(docs: list[list[list[int]]], index: int, chunk: list[list[int]], target: int,
                       rng: random.Random) -> tuple[list[int], list[int], int, int]:
    """Segments A and B cut from ``chunk`` (consecutive sentences of ``docs[index]``), the NSP
    label, and how many of the chunk's sentences went unused; chapter 11 prints it.

    A is the chunk up to a random sentence boundary. Half of the time B is the rest (IsNext);
    otherwise, and always for a chunk of one sentence, B is a run of sentences from a random
    other document, about ``target`` tokens long with A (NotNext)."""
    a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
    tokens_a = [t for s in chunk[:a_end] for t in s]
    tokens_b: list[int] = []
    if len(chunk) == 1 or rng.random() < 0.5:
        is_next = 0
        target_b = target - len(tokens_a)
        for _ in range(OTHER_DOCUMENT_TRIES):
            r = rng.randint(0, len(docs) - 1)
            if r != index:
                break
        other = docs[r]
        for sent in other[rng.randint(0, len(other) - 1):]:
            tokens_b.extend(sent)
            if len(tokens_b) >= target_b:
                break
        unused = len(chunk) - a_end  # they start the next chunk
    else:
        is_next = 1
        tokens_b = [t for s in chunk[a_end:] for t in s]
        unused = 0
    return tokens_a, tokens_b, is_next, unused


def sentence_order_pair(chunk: list[list[int]], rng: random.Random) -> tuple[list[int], list[int], int]:
    """ALBERT's sentence-order pair (Lan et al. 2020, section 3.1): the
    chunk cut at a random sentence boundary into A and B, and half of the time the two swapped.
    The label is 1 when they are in their order, 0 when swapped. Both orders hold the same two
    segments of one document, so topic cannot tell them apart; a chunk of one sentence gives an
    empty B, and no pair."""
    a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
    tokens_a = [t for s in chunk[:a_end] for t in s]
    tokens_b = [t for s in chunk[a_end:] for t in s]
    if rng.random() < 0.5:
        return tokens_b, tokens_a, 0
    return tokens_a, tokens_b, 1


def create_pretraining_examples(documents: Sequence[Document], tokenizer, max_seq_length: int = 128,
                                short_seq_prob: float = 0.1, nsp: bool = True, seed: int = 0,
                                dupe_factor: int = 1, shuffle: bool = True,
                                pair_task: str = "nsp") -> list[PretrainingExample]:
    """Tokenize the documents' sentences and cut them into pretraining examples (see module doc).

    ``nsp=False`` gives single-segment examples ``[CLS] text [SEP]`` (no NSP label needed;
    ``is_next`` is then 1). With ``nsp=True``, ``pair_task`` chooses the pairs: ``"nsp"``
    (:func:`next_sentence_pair`) or ``"sop"`` (:func:`sentence_order_pair`, ALBERT's). The pair
    head and its loss are the same for both. ``dupe_factor`` repeats the pass with new random
    cuts, as the original does to make several static maskings; with dynamic masking 1 is enough.
    The result depends only on the inputs and ``seed``.
    """
    if pair_task not in PAIR_TASKS:
        raise ValueError(f"pair_task must be one of {PAIR_TASKS}, got {pair_task!r}")
    if max_seq_length < (5 if nsp else 3):
        raise ValueError(f"max_seq_length={max_seq_length} is too short for [CLS] A [SEP] B [SEP]")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}")
    if dupe_factor < 1:
        raise ValueError(f"dupe_factor must be at least 1, got {dupe_factor}")
    encode = getattr(tokenizer, "encode_ids", None) or (lambda s: tokenizer.encode(s, add_special_tokens=False).input_ids)
    docs: list[list[list[int]]] = []
    for d in documents:
        sents = [ids for ids in map(encode, d.sentences) if ids]
        if sents:
            docs.append(sents)
    if not docs:
        raise ValueError("no document has any text to make examples from")
    rng = random.Random(seed)
    examples: list[PretrainingExample] = []
    for _ in range(dupe_factor):
        for index in range(len(docs)):
            examples.extend(instances_from_document(docs, index, max_seq_length, short_seq_prob, nsp,
                                                     tokenizer.cls_id, tokenizer.sep_id, rng,
                                                     pair_task))
    if shuffle:
        rng.shuffle(examples)
    return examples


@dataclass
class PreparedData:
    """A corpus made ready for pretraining: the tokenizer and the examples of both splits."""

    tokenizer: Any
    train_examples: list[PretrainingExample]
    valid_examples: list[PretrainingExample]
    train_documents: list[Document]


def prepare_data(corpus: str | os.PathLike | Sequence[str | os.PathLike] | Sequence[Document],
                 tokenizer: Any, max_seq_length: int = 128, short_seq_prob: float = 0.1,
                 nsp: bool = True, seed: int = 0, valid_fraction: float = VALID_FRACTION,
                 pair_task: str = "nsp") -> PreparedData:
    """Documents of ``corpus`` (what :func:`~mlm_lib.corpus.load_corpus` reads, or the documents
    themselves) -> train/valid split -> ``tokenizer`` -> examples, cut as
    :func:`create_pretraining_examples` cuts them (a training run passes its config's four values:
    ``TrainConfig.data_options()``)."""
    given = not isinstance(corpus, (str, os.PathLike)) and len(corpus) and isinstance(corpus[0], Document)
    docs = list(corpus) if given else load_corpus(corpus)
    train_docs, valid_docs = train_valid_split(docs, valid_fraction=valid_fraction, seed=SPLIT_SEED)
    kw = dict(max_seq_length=max_seq_length, short_seq_prob=short_seq_prob, nsp=nsp,
              pair_task=pair_task)
    train_ex = create_pretraining_examples(train_docs, tokenizer, seed=seed, **kw)
    valid_ex = create_pretraining_examples(valid_docs, tokenizer, seed=seed + VALID_SEED_OFFSET, **kw)
    return PreparedData(tokenizer, list(train_ex), list(valid_ex), list(train_docs))
