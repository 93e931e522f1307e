"""BERT's other task shapes: a label for every token, and a span of segment B.

Devlin et al. (2019, figure 4) fine-tune one pretrained encoder for four shapes of task: a label
for one sentence, a label for a pair of sentences (both :class:`~mlm_lib.finetune.BertClassifier`,
reading ``[CLS]``), a label for every token (named-entity recognition), and a span of segment B
that answers segment A (SQuAD). This module adds the last two heads. Each is one linear layer on
the encoder's last hidden states ``h_i``, and each trains through :func:`~mlm_lib.finetune.finetune`
like the classifier: only the ``objective`` differs.

- :class:`BertTokenClassifier` scores every ``h_i`` over the labels, and its loss is the mean over
  the labelled positions only, as the MLM loss reads M only; a word split into several WordPiece
  pieces is labelled at its first piece (the paper's section 5.3).
- :class:`BertSpanHead` gives every position of B a start score and an end score; the softmax
  runs over *positions* (over the vocabulary in MLM), and the answer is the span with the best
  start plus end score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from mlm_lib.finetune import FinetunedBert
from mlm_lib.loop import Batch, Sums
from mlm_lib.loss import IGNORE_INDEX  # a position without a label: cross_entropy skips it
from mlm_lib.metrics import entity_scores, exact_match, squad_f1
from mlm_lib.model import BertModel
from mlm_lib.spans import (Answer, Window, align_labels, encode_words, nbest_answers,
                           question_windows, word_predictions)
from mlm_lib.tokenizer import pad_batch, pad_rows

MAX_ANSWER_PIECES = 16  # the longest span the span head may answer, in pieces


# ---------------------------------------------------------------- a label for every word

@dataclass
class TaggedSet:
    """Sentences as lists of words, with one label per word (``IGNORE_INDEX``: no label, not
    scored); ``label_names[k]`` names label ``k``, and label 0 is the "nothing to report" label
    that F1 leaves out, as CoNLL's "O"."""

    words: list[list[str]]
    tags: list[list[int]]
    label_names: list[str]

    def __post_init__(self) -> None:
        if len(self.words) != len(self.tags):
            raise ValueError(f"{len(self.words)} sentences but {len(self.tags)} tag lists")
        for i, (w, t) in enumerate(zip(self.words, self.tags)):
            if len(w) != len(t):
                raise ValueError(f"sentence {i} has {len(w)} words but {len(t)} tags")
            bad = [y for y in t if y != IGNORE_INDEX and not 0 <= y < len(self.label_names)]
            if bad:
                raise ValueError(f"sentence {i}: tag {bad[0]} is outside [0, {len(self.label_names)})")

    def __len__(self) -> int:
        return len(self.words)

    def batch(self, tokenizer: Any, idx: Sequence[int], max_length: int) -> Batch:
        """``[CLS] pieces [SEP]`` per sentence, padded; ``labels`` [B, T] holds each word's tag at
        its first piece and ``IGNORE_INDEX`` elsewhere. Words past ``max_length`` are left out."""
        room = max(max_length - 2, 0)  # pieces between [CLS] and [SEP]
        rows, labels = [], []
        for i in idx:
            ids, word_ids = encode_words(tokenizer, self.words[i])
            # cut before the first word that does not fit whole
            cut = len(ids) if len(ids) <= room else word_ids.index(word_ids[room])
            rows.append([tokenizer.cls_id, *ids[:cut], tokenizer.sep_id])
            labels.append(align_labels([None, *word_ids[:cut], None], self.tags[i]))
        b = pad_batch(rows, [[0] * len(r) for r in rows], tokenizer.pad_id)
        b["labels"] = pad_rows(labels, IGNORE_INDEX)
        return b


class BertTokenClassifier(FinetunedBert):
    """An encoder plus one linear layer on every last hidden state ``h_i``: label scores per
    token, [B, T, num_labels]."""

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.bert(input_ids, token_type_ids, attention_mask).last_hidden_state
        return self.classifier(self.dropout(h))

    def objective(self, b: Batch) -> tuple[torch.Tensor, Sums]:
        """Mean cross-entropy over the labelled positions only (the rest are ``IGNORE_INDEX``); the
        accuracy there, and ``token_f1``: micro F1 over the labelled pieces whose label is not 0,
        2 TP / (2 TP + FP + FN). A piece-level figure for watching training, not CoNLL's entity F1
        (whole entities, exact words and type), which :func:`evaluate_task` reports."""
        logits = self(b["input_ids"], b["token_type_ids"], b["attention_mask"])
        gold = b["labels"]
        loss = F.cross_entropy(logits.flatten(0, 1).float(), gold.flatten(),
                               ignore_index=IGNORE_INDEX)
        scored = gold != IGNORE_INDEX
        pred, gold = logits.argmax(-1)[scored], gold[scored]
        n = int(scored.sum())
        tp = ((pred == gold) & (gold != 0)).sum()
        fp = ((pred != gold) & (pred != 0)).sum()
        fn = ((pred != gold) & (gold != 0)).sum()
        return loss, {"loss": (loss.detach() * n, n), "accuracy": ((pred == gold).sum(), n),
                      "token_f1": (2 * tp, 2 * tp + fp + fn)}


# ---------------------------------------------------------------- a span of segment B

def best_spans(start_logits: torch.Tensor, end_logits: torch.Tensor,
               max_pieces: int = MAX_ANSWER_PIECES) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the (start, end) with start <= end < start + ``max_pieces`` that maximises
    start score plus end score (positions outside B already hold the lowest float)."""
    t = start_logits.shape[-1]
    pair = start_logits.unsqueeze(-1) + end_logits.unsqueeze(-2)  # [B, start, end]
    offsets = torch.arange(t, device=pair.device)
    allowed = (offsets[None, :] >= offsets[:, None]) & (offsets[None, :] < offsets[:, None] + max_pieces)
    best = pair.masked_fill(~allowed, float("-inf")).flatten(1).argmax(-1)
    return best // t, best % t


class BertSpanHead(FinetunedBert):
    """An encoder plus one linear layer of two outputs on every ``h_i``: a start score and an end
    score per position, each [B, T], set to the lowest float outside segment B (not -inf, whose
    softmax over an all-masked row would be NaN)."""

    def __init__(self, encoder: BertModel, dropout: float = 0.1, seed: int = 0) -> None:
        super().__init__(encoder, 2, dropout, seed)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                attention_mask: torch.Tensor, context_mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.bert(input_ids, token_type_ids, attention_mask).last_hidden_state
        scores = self.classifier(self.dropout(h)).float()  # [B, T, 2]
        scores = scores.masked_fill(context_mask.unsqueeze(-1) == 0, torch.finfo(scores.dtype).min)
        return scores[..., 0], scores[..., 1]

    def objective(self, b: Batch) -> tuple[torch.Tensor, Sums]:
        """The mean of two cross-entropies, each a softmax over B's positions: -log P(start) and
        -log P(end); exact match: the best span is the answer, to the piece."""
        start, end = self(b["input_ids"], b["token_type_ids"], b["attention_mask"],
                          b["context_mask"])
        loss = (F.cross_entropy(start, b["start_positions"])
                + F.cross_entropy(end, b["end_positions"])) / 2
        s, e = best_spans(start.detach(), end.detach())
        n = b["start_positions"].numel()
        exact = ((s == b["start_positions"]) & (e == b["end_positions"])).sum()
        return loss, {"loss": (loss.detach() * n, n), "exact_match": (exact, n)}


# ---------------------------------------------------------------- the field's formats and scores

STRIDE = 32  # pieces between two windows' starts over a long context (BERT's doc_stride)
N_BEST = 20  # start and end candidates per window (BERT's run_squad.py)


@dataclass
class WindowSet:
    """Question-answering examples cut into windows (:func:`~mlm_lib.spans.question_windows`):
    the training unit of a span head is a window, not an example. ``example[k]`` is the example
    window ``k`` came from."""

    windows: list[Window]
    example: list[int]

    def __len__(self) -> int:
        return len(self.windows)

    def batch(self, tokenizer: Any, idx: Sequence[int], max_length: int) -> Batch:
        """The windows, padded, with ``context_mask``, ``start_positions`` and ``end_positions``
        (a window without the answer has none and is refused: train on :func:`windows_for`'s
        ``answered_only`` set)."""
        chosen = [self.windows[i] for i in idx]
        if any(len(w.input_ids) > max_length for w in chosen):
            raise ValueError(f"a window is longer than max_length={max_length}: cut them with it")
        if any(w.start_position is None for w in chosen):
            raise ValueError("a window without its answer has no start and end to train on")
        b = pad_batch([w.input_ids for w in chosen], [w.token_type_ids for w in chosen],
                      tokenizer.pad_id)
        b["context_mask"] = pad_rows([w.context_mask for w in chosen], 0)
        b["start_positions"] = torch.tensor([w.start_position for w in chosen], dtype=torch.long)
        b["end_positions"] = torch.tensor([w.end_position for w in chosen], dtype=torch.long)
        return b


def windows_for(tokenizer: Any, questions: Sequence[str], contexts: Sequence[str],
                answers: Sequence[tuple[int, int] | None], max_length: int,
                stride: int = STRIDE, answered_only: bool = False) -> WindowSet:
    """Every example's windows (``answers``: each answer's characters ``(first, end)`` in its
    context). ``answered_only``: keep just the windows that hold their whole answer, the ones the
    book's span head trains on. BERT's ``run_squad.py`` (lines 409-420, google-research/bert at
    eedf571) and Hugging Face's ``run_qa.py`` keep the other windows too, for SQuAD 1.1 as well,
    with start and end at ``[CLS]`` (position 0): a head trained so learns to say "not in this
    window"; this one is never asked to."""
    windows, example = [], []
    for i, (q, c, a) in enumerate(zip(questions, contexts, answers, strict=True)):
        for w in question_windows(tokenizer, q, c, max_length, stride, a):
            if not answered_only or w.start_position is not None:
                windows.append(w)
                example.append(i)
    return WindowSet(windows, example)


@torch.no_grad()
def predict_answers(model: BertSpanHead, tokenizer: Any, questions: Sequence[str],
                    contexts: Sequence[str], max_length: int, stride: int = STRIDE,
                    n_best: int = N_BEST, max_answer_pieces: int = MAX_ANSWER_PIECES,
                    batch_size: int = 64) -> list[list[Answer]]:
    """Each question's n-best answers over all the windows of its context, best first
    (:func:`~mlm_lib.spans.nbest_answers`); an empty list when no window gave a valid span."""
    model.eval()
    device = next(model.parameters()).device
    ws = windows_for(tokenizer, questions, contexts, [None] * len(questions), max_length, stride)
    starts, ends = [], []
    for lo in range(0, len(ws), batch_size):
        chosen = ws.windows[lo:lo + batch_size]
        b = pad_batch([w.input_ids for w in chosen], [w.token_type_ids for w in chosen],
                      tokenizer.pad_id)
        mask = pad_rows([w.context_mask for w in chosen], 0)
        s, e = model(*(b[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask")),
                     mask.to(device))
        starts += list(s.cpu())
        ends += list(e.cpu())
    out = []
    for i, context in enumerate(contexts):
        mine = [k for k, j in enumerate(ws.example) if j == i]
        out.append(nbest_answers([ws.windows[k] for k in mine], [starts[k] for k in mine],
                                 [ends[k] for k in mine], context, n_best, max_answer_pieces))
    return out


def squad_scores(predictions: Sequence[str], truths: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean exact match and F1 over questions, SQuAD's way (:mod:`mlm_lib.metrics`)."""
    if len(predictions) != len(truths) or not truths:
        raise ValueError(f"{len(predictions)} predictions for {len(truths)} questions")
    n = len(truths)
    return {"exact_match": sum(exact_match(p, t) for p, t in zip(predictions, truths)) / n,
            "f1": sum(squad_f1(p, t) for p, t in zip(predictions, truths)) / n}


@torch.no_grad()
def predict_tags(model: BertTokenClassifier, tokenizer: Any, sentences: Sequence[Sequence[str]],
                 max_length: int, batch_size: int = 128) -> list[list[int]]:
    """Each word's predicted label, read at its first piece; a word past the model's
    ``max_length`` gets label 0 (no prediction is "nothing to report")."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for lo in range(0, len(sentences), batch_size):
        rows, word_ids = [], []
        for words in sentences[lo:lo + batch_size]:
            ids, wids = encode_words(tokenizer, words)
            ids, wids = ids[:max_length - 2], wids[:max_length - 2]
            rows.append([tokenizer.cls_id, *ids, tokenizer.sep_id])
            word_ids.append([None, *wids, None])
        b = pad_batch(rows, [[0] * len(r) for r in rows], tokenizer.pad_id)
        pred = model(*(b[k].to(device) for k in ("input_ids", "token_type_ids",
                                                  "attention_mask"))).argmax(-1).cpu()
        for k, words in enumerate(sentences[lo:lo + batch_size]):
            out.append(word_predictions(word_ids[k], pred[k].tolist(), len(words)))
    return out


def tagging_scores(model: BertTokenClassifier, tokenizer: Any, data: TaggedSet,
                   max_length: int) -> dict[str, float]:
    """Entity-level precision, recall and F1, CoNLL's way, of the model's tags on ``data``
    (its ``label_names`` in BIO form, label 0 ``O``)."""
    pred = predict_tags(model, tokenizer, data.words, max_length)
    name = data.label_names
    return entity_scores([[name[t] if t != IGNORE_INDEX else "O" for t in tags] for tags in data.tags],
                         [[name[t] for t in tags] for tags in pred])
