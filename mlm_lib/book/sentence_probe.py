"""Chapter 15's second probe of one encoder trained two ways: which of two sentences shares an article?

The second model's layers learned two objectives in turn: sentence-transformers trained
all-MiniLM-L6-v2 contrastively (a sentence's vector close to its partner's, far from the batch's
other sentences), and the book then trained them again with MLM under a new head. Fill-mask asks
what the MLM head recovers; this probe asks what the sentence vectors hold.

Each sentence of an article the book's models never read (an *anchor*) gets two partners drawn
once: another sentence of its article and a sentence of another unread article. An encoder's
sentence vector is the mean of its last layer over the pieces (sentence-transformers' pooling for
this model); the encoder *picks* the partner whose vector has the larger cosine with the anchor's.
Chance is one half. Every encoder sees the same triples, so two encoders pair anchor by anchor.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from mlm_lib.corpus import Document
from mlm_lib.model import BertModel

PROBE_SEED = 0
MIN_WORDS = 8  # an anchor or partner long enough to be about something


def probe_triples(docs: Sequence[Document], seed: int = PROBE_SEED
                  ) -> list[tuple[str, str, str]]:
    """(anchor, same-article partner, other-article partner) for every usable sentence."""
    rng = random.Random(seed)
    usable = {d.title: [s for s in d.sentences if len(s.split()) >= MIN_WORDS] for d in docs}
    titles = [t for t, s in usable.items() if len(s) >= 2]
    if len(titles) < 2:
        raise ValueError("the probe needs two articles with two usable sentences each")
    triples = []
    for title in titles:
        for i, anchor in enumerate(usable[title]):
            same = rng.choice([s for j, s in enumerate(usable[title]) if j != i])
            other = rng.choice(usable[rng.choice([t for t in titles if t != title])])
            triples.append((anchor, same, other))
    return triples


@torch.no_grad()
def sentence_vectors(encoder: BertModel, tokenizer: Any, texts: Sequence[str], max_length: int,
                     batch_size: int = 64) -> torch.Tensor:
    """The mean of the last layer over each text's pieces ([CLS] and [SEP] included, padding not)."""
    encoder.eval()
    out = []
    for k in range(0, len(texts), batch_size):
        batch = tokenizer.encode_batch(list(texts[k:k + batch_size]), max_length=max_length)
        h = encoder(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(h.dtype)
        out.append((h * mask).sum(1) / mask.sum(1))
    return torch.cat(out)


def picks_same_article(encoder: BertModel, tokenizer: Any, triples: Sequence[tuple[str, str, str]],
                       max_length: int) -> torch.Tensor:
    """Per anchor: 1 if the same-article partner is the closer (cosine), 0 if the other, 0.5 on a tie."""
    texts = sorted({text for triple in triples for text in triple})  # each sentence encoded once
    row = {text: k for k, text in enumerate(texts)}
    vectors = sentence_vectors(encoder, tokenizer, texts, max_length)
    anchors, same, other = (vectors[[row[t[k]] for t in triples]] for k in range(3))
    near, far = F.cosine_similarity(anchors, same), F.cosine_similarity(anchors, other)
    return (near > far).float() + 0.5 * (near == far).float()
