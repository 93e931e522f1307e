"""The scores tagging and question answering are reported in, as their fields define them.

- SQuAD (Rajpurkar et al., 2016; its official ``evaluate-v2.0.py``): an answer and the true one
  are both *normalised* (lowercased, punctuation removed, the articles a/an/the removed, runs of
  whitespace made one space); **exact match** is 1 when they are then equal, **F1** is the
  harmonic mean of precision and recall over their words, counted with multiplicity. With
  several true answers, the best is taken. An empty answer scores 1 only against an empty truth.
- CoNLL (Tjong Kim Sang and De Meulder, 2003; ``conlleval``): tags in BIO form are decoded into
  entities, and an entity counts as found only when its first word, last word and type all
  match a true one. Precision is found-and-right over found, recall over true, each 0 when its
  count is 0, F1 their harmonic mean.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lowercase, drop ASCII punctuation, drop a/an/the, one space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, truths: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals one normalised true answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(t) for t in truths))


def _f1(prediction: str, truth: str) -> float:
    pred, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    if not pred or not gold:
        return float(pred == gold)
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad_f1(prediction: str, truths: Iterable[str]) -> float:
    """The best word-overlap F1 of the prediction against any true answer."""
    return max((_f1(prediction, t) for t in truths), default=0.0)


# ---------------------------------------------------------------- entities

def bio_entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities of one sentence's BIO tags as (type, first word, last word), by conlleval's
    rule: an entity starts at ``B-X``, or at ``I-X`` when the word before is not inside an X
    (so a stray ``I-X`` after ``O`` is an entity, not an error); it runs while ``I-X`` follows."""
    out: list[tuple[str, int, int]] = []
    current: list | None = None
    for k, tag in enumerate([*tags, "O"]):
        prefix, _, kind = tag.partition("-")
        if prefix not in ("B", "I", "O") or (prefix != "O" and not kind):
            raise ValueError(f"tag {tag!r} at word {k} is not O, B-TYPE or I-TYPE")
        continues = prefix == "I" and current is not None and current[0] == kind
        if current is not None and not continues:
            out.append((current[0], current[1], k - 1))
            current = None
        if prefix in ("B", "I") and not continues:
            current = [kind, k]
    return out


def entity_scores(truths: Sequence[Sequence[str]], predictions: Sequence[Sequence[str]]
                  ) -> dict[str, float]:
    """Entity-level precision, recall and F1 over sentences, with the counts they come from."""
    if len(truths) != len(predictions):
        raise ValueError(f"{len(truths)} true sentences but {len(predictions)} predicted")
    right = found = true = 0
    for k, (t, p) in enumerate(zip(truths, predictions)):
        if len(t) != len(p):
            raise ValueError(f"sentence {k} has {len(t)} true tags but {len(p)} predicted")
        gold, guess = set(bio_entities(t)), set(bio_entities(p))
        right, found, true = right + len(gold & guess), found + len(guess), true + len(gold)
    precision = right / found if found else 0.0
    recall = right / true if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "right": right, "found": found, "true": true}
