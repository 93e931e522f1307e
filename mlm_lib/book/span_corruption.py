"""T5's span corruption (Raffel et al. 2020, section 3.1.4 and figure 2), next to BERT's masking.

BERT hides the positions of M and scores each one where it stood. T5 hides whole spans: each span
becomes one sentinel in the encoder's input, and a decoder writes the target, every span after its
sentinel, left to right, then a closing sentinel. Its loss is a sum too, but over the target's
pieces, each conditioned on the corrupted input and on the target written before it:

    L_span = -sum_t log P(y_t | y_<t, x~)

so it has |M| + S + 1 terms for S spans (BERT's has |M|), and a piece of a span is predicted
knowing the pieces of that span before it, which BERT's independent blanks never are.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

SENTINEL = "<extra_id_{}>"  # T5's sentinel pieces, numbered from 0
NOISE_DENSITY = 0.15  # T5's default share of pieces hidden (sections 3.1.4 and 3.3.3)
MEAN_SPAN_LENGTH = 3  # T5's default mean span length (section 3.3.4)


def choose_spans(n: int, seed: int, density: float = NOISE_DENSITY,
                 mean_length: float = MEAN_SPAN_LENGTH) -> list[tuple[int, int]]:
    """Non-overlapping spans [start, end) hiding round(density * n) of ``n`` pieces in
    round(hidden / mean_length) spans, placed at random (seeded), as T5's noise mask does."""
    if n < 2:
        raise ValueError(f"a sequence of {n} pieces has no room for a span and its context")
    hidden = max(1, round(density * n))
    spans = max(1, round(hidden / mean_length))
    rng = random.Random(seed)
    # split the hidden and the kept pieces into `spans` non-empty runs each, then interleave
    cuts = sorted(rng.sample(range(1, hidden), spans - 1)) if spans > 1 else []
    lengths = [b - a for a, b in zip([0, *cuts], [*cuts, hidden])]
    kept = n - hidden
    gaps = sorted(rng.sample(range(1, kept), spans)) if kept > spans else list(range(1, spans + 1))
    starts, hidden_before = [], 0
    for k, gap in enumerate(gaps):
        starts.append(gap + hidden_before)
        hidden_before += lengths[k]
    return [(s, s + length) for s, length in zip(starts, lengths)]


def span_corrupt(pieces: Sequence[str], spans: Sequence[tuple[int, int]]) -> tuple[list[str], list[str]]:
    """The encoder's input (each span replaced by one sentinel) and the decoder's target (each
    span after its sentinel, then a closing sentinel)."""
    ordered = sorted(spans)
    for (a, b), (c, _) in zip(ordered, ordered[1:]):
        if b > c:
            raise ValueError(f"spans {a, b} and {c, _} overlap")
    if ordered and (ordered[0][0] < 0 or ordered[-1][1] > len(pieces)):
        raise ValueError(f"a span lies outside the {len(pieces)} pieces")
    source, target, at = [], [], 0
    for k, (a, b) in enumerate(ordered):
        if a >= b:
            raise ValueError(f"span {a, b} is empty")
        source += [*pieces[at:a], SENTINEL.format(k)]
        target += [SENTINEL.format(k), *pieces[a:b]]
        at = b
    source += pieces[at:]
    target.append(SENTINEL.format(len(ordered)))
    return source, target
