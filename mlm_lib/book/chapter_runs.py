"""The chapters' live runs: small, seeded trainings and the data they use, in seconds on a CPU.

- :func:`chapter_data` is the Wikipedia excerpt cut into examples with the book's tokenizer;
- :func:`train_micro` (chapters 6, 7 and 11) trains the chapters' small BERT, preset ``"micro"``
  (2 layers x 64, no dropout), or continues a trained one, with a chosen
  :class:`~mlm_lib.masking.Corruption`, and returns the model with its training history;
- :func:`score` (chapters 6 and 7) evaluates any model on held-out blanks corrupted by any
  recipe, e.g. inputs that contain no [MASK] at all (what a model meets when it is fine-tuned);
- :func:`four_partners` and :func:`answered_is_next` (chapter 11) ask a trained NSP head about four
  kinds of B for the same A, two of which the pair builder never makes;
- :func:`article_task` (chapter 12) is the fine-tuning task made from the corpus itself;
- :func:`score_blanks` (chapter 12) fills the chapters' blanks with any BERT that has an MLM head,
  the book's or a full-size one loaded from a Hugging Face folder, and gives each -log P.

Small models learn little in a few hundred steps, so what the chapters compare is always two
runs that differ in exactly one setting, with the same seed, data and number of steps.
"""

from __future__ import annotations

import copy
import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from mlm_lib.batches import EVAL_SEED, masked_batches
from mlm_lib.book.book_model import book_model, book_tokenizer
from mlm_lib.corpus import Document
from mlm_lib.finetune import LabelledSet
from mlm_lib.inference import MaskPrediction, fill_mask
from mlm_lib.init import build_model
from mlm_lib.loop import History
from mlm_lib.masking import BERT_CORRUPTION, EVAL_CORRUPTION, Corruption
from mlm_lib.model import BertForPreTraining, check_model_fits
from mlm_lib.pretraining import PreparedData, prepare_data
from mlm_lib.train import TrainConfig, evaluate_mlm, train

# The chapters' model: preset "micro" (2 layers, hidden 64, 2 heads) without dropout, so that a
# few hundred steps take seconds on two CPU cores and two runs differ only where they are told to.
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
WARMUP_STEPS = 20  # a tenth of the usual 200-step run
# How the chapters continue the book's model (chapters 6, 9, 11, 12, 13): 150 steps at its own
# pretraining learning rate.
CONTINUE = dict(steps=150, lr=1e-3, batch_size=32)
# The size of the model's description that a continued run copies from the model it starts from.
MODEL_SHAPE = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")


@functools.lru_cache(maxsize=4)
def chapter_data(max_seq_length: int = 64, nsp: bool = False, seed: int = 0,
                 pair_task: str = "nsp") -> PreparedData:
    """The Wikipedia excerpt cut into examples with the book's tokenizer (cached per process:
    every run of a chapter trains on exactly the same examples, tokenized once). With ``nsp``,
    pairs of ``pair_task``: next sentence (``"nsp"``) or sentence order (``"sop"``)."""
    return prepare_data("wikipedia", book_tokenizer(), max_seq_length=max_seq_length,
                        short_seq_prob=0.0, nsp=nsp, seed=seed, pair_task=pair_task)


def _micro_config(**overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` of the chapters' runs; any field can be overridden
    (``model`` overrides are merged into the no-dropout settings)."""
    model = {**NO_DROPOUT, **overrides.pop("model", {})}
    base = dict(preset="micro", model=model, max_seq_length=64, short_seq_prob=0.0, nsp=False,
                batch_size=32, lr=1e-2, position_init="sinusoidal", warmup_steps=WARMUP_STEPS,
                max_steps=200, log_every=10,
                eval_every=0, seed=0, device="cpu", amp=False, threads=None, progress=False)
    base.update(overrides)
    return TrainConfig(**base)


@dataclass
class MicroRun:
    """A trained small model, what it was trained on, and how its training loss went."""

    model: torch.nn.Module
    tokenizer: Any
    history: History
    config: TrainConfig
    data: PreparedData = field(repr=False)

    def train_curve(self, key: str = "mlm_loss") -> tuple[list[int], list[float]]:
        """(steps, values) of a training metric, ready for ``plt.plot``."""
        cols = self.history.columns("step", key, kind="train")
        return cols["step"], cols[key]


def train_micro(corruption: Corruption = BERT_CORRUPTION, steps: int = 200, seed: int = 0,
                data: PreparedData | None = None, start_from: BertForPreTraining | None = None,
                **overrides: Any) -> MicroRun:
    """Train the chapters' small BERT with one corruption recipe; everything else fixed and seeded.

    ``corruption.select`` is the share of tokens put in M; ``mask``/``random``/``keep`` split M
    into [MASK], random tokens and unchanged tokens (BERT: 0.8/0.1/0.1). Other
    :class:`TrainConfig` fields (``lr``, ``batch_size``, ``model``...) pass through ``overrides``.

    ``start_from``: continue training a copy of this model (e.g. the book's model) instead of a
    fresh one. A fresh BERT spends its first few hundred steps on the unigram plateau, where every
    recipe looks the same; a trained one shows in a few hundred steps what a recipe does to it.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    overrides.setdefault("warmup_steps", min(WARMUP_STEPS, steps))
    if start_from is not None:
        config = start_from.config
        overrides.setdefault("model", {k: getattr(config, k) for k in MODEL_SHAPE})
        overrides.setdefault("max_seq_length", config.max_position_embeddings)
    cfg = _micro_config(corruption=corruption, max_steps=steps, seed=seed, **overrides)
    if data is None:
        data = chapter_data(cfg.max_seq_length, cfg.nsp)
    if start_from is not None:
        check_model_fits(start_from, data.tokenizer.vocab_size, cfg.max_seq_length)
        model = copy.deepcopy(start_from).float().train()
    else:
        model = build_model(**cfg.model_options(data.tokenizer.vocab_size))
    result = train(model, data.tokenizer, data.train_examples, cfg)
    result.model.eval()
    return MicroRun(result.model, data.tokenizer, result.history, cfg, data)


def continue_book_model(corruption: Corruption, seed: int, pairs: bool = False,
                        nsp: bool = False, pair_task: str = "nsp") -> MicroRun:
    """The book's model continued for CONTINUE's steps with ``corruption`` (the start of chapters
    6, 7, 9 and 11's experiments). ``pairs``: on [CLS] A [SEP] B [SEP] pairs (made as
    ``pair_task`` makes them) instead of single segments; ``nsp``: with the pair head's loss added
    to the MLM loss."""
    model = book_model()
    data = chapter_data(model.config.max_position_embeddings, nsp=pairs, pair_task=pair_task)
    return train_micro(corruption, seed=seed, data=data, start_from=model, nsp=nsp, **CONTINUE)


def score(model: BertForPreTraining, data: PreparedData, corruption: Corruption = EVAL_CORRUPTION,
          seed: int = EVAL_SEED, max_examples: int | None = None) -> dict[str, float]:
    """Held-out masked-token loss and accuracy (``mlm_loss``, ``mlm_acc``) of ``model`` on the
    validation examples of ``data``, corrupted as :func:`~mlm_lib.batches.masked_batches` does
    (same seed, same blanks for every model)."""
    batches = masked_batches(data.valid_examples, data.tokenizer, corruption, seed,
                             max_examples=max_examples)
    return evaluate_mlm(model, batches, nsp=False)


# ---------------------------------------------------------------- chapter 11's four kinds of B

B_KINDS = ("next", "other article", "same article, far", "previous")
FAR = 5  # sentences between A and a "far" B of the same article, at least
EVERY = 3  # every third sentence of a held-out article is an A


def four_partners(doc: Document, i: int, others: Sequence[Document], rng: random.Random
                  ) -> dict[str, tuple[str, str, str]]:
    """Sentence ``i`` of ``doc`` as A and four ways to choose B: kind -> (A, B, how B was chosen).
    Only the first two are pairs the library builds (IsNext, NotNext)."""
    s = doc.sentences
    other = rng.choice([d for d in others if d is not doc])
    j = rng.choice([k for k in range(len(s)) if abs(k - i) > FAR])
    return {"next": (s[i], s[i + 1], f"B followed A in {doc.title!r}: IsNext"),
            "other article": (s[i], rng.choice(other.sentences),
                              f"B is from another article, {other.title!r}: NotNext"),
            "same article, far": (s[i], s[j], f"B is from the same article, {j - i:+d} sentences "
                                              "away: not the next sentence, a pair the library never builds"),
            "previous": (s[i + 1], s[i], "B is the sentence just *before* A: not the next sentence, "
                                         "a pair the library never builds")}


def partner_pairs(docs: Sequence[Document], seed: int = 1) -> dict[str, tuple[list[str], list[str]]]:
    """Every third sentence of every article with a far sentence as A, with B of each kind:
    kind -> (the As, the Bs)."""
    rng, ways = random.Random(seed), {}
    for doc in docs:
        for i in range(0, len(doc.sentences) - 1, EVERY):
            if not any(abs(k - i) > FAR for k in range(len(doc.sentences))):
                continue
            for kind, (a, b, _) in four_partners(doc, i, docs, rng).items():
                ways.setdefault(kind, ([], []))[0].append(a)
                ways[kind][1].append(b)
    return ways


@torch.no_grad()
def is_next_probability(model: BertForPreTraining, tokenizer: Any, a_texts: Sequence[str],
                        b_texts: Sequence[str], max_length: int = 64) -> torch.Tensor:
    """The NSP head's P(IsNext) for each pair (A, B), read off [CLS] through the pooler."""
    batch = tokenizer.encode_batch(list(a_texts), list(b_texts), max_length=max_length)
    out = model.eval()(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    return out.nsp_logits.softmax(-1)[:, 0]  # column 0 is IsNext


def answered_is_next(model: BertForPreTraining, tokenizer: Any, docs: Sequence[Document],
                     seed: int = 1) -> dict[str, float]:
    """For each kind of B, the share of pairs the head answers IsNext (P(IsNext) > 0.5)."""
    return {kind: float((is_next_probability(model, tokenizer, a, b) > 0.5).float().mean())
            for kind, (a, b) in partner_pairs(docs, seed).items()}


# ---------------------------------------------------------------- chapter 12's labelled task

def usable_sentences(document: Document, min_words: int) -> list[str]:
    """The article's distinct sentences of at least ``min_words`` words (a sentence repeated
    inside the article would be an easy duplicate across the split)."""
    return sorted({s for s in document.sentences if len(s.split()) >= min_words})


def _choose_articles(documents: Sequence[Document], titles: Sequence[str] | None,
                     num_articles: int, min_words: int) -> list[Document]:
    """The articles named by ``titles``, or the ``num_articles`` with the most usable sentences
    (ties broken by title)."""
    if titles is None:
        if num_articles < 2:
            raise ValueError(f"num_articles must be at least 2 for a classification task, got {num_articles}")
        ranked = sorted(documents, key=lambda d: (-len(usable_sentences(d, min_words)), d.title))
        chosen = ranked[:num_articles]
        if len(chosen) < num_articles:
            raise ValueError(f"asked for {num_articles} articles, the corpus has {len(chosen)}")
        return chosen
    if len(titles) < 2:
        raise ValueError(f"need at least 2 titles for a classification task, got {len(titles)}")
    by_title = {d.title: d for d in documents}
    missing = [t for t in titles if t not in by_title]
    if missing:
        raise ValueError(f"no article titled {missing[0]!r} in the corpus")
    return [by_title[t] for t in titles]


def article_task(documents: Sequence[Document], titles: Sequence[str] | None = None,
                 num_articles: int = 4, per_article: int = 150, test_fraction: float = 0.3,
                 min_words: int = 6, seed: int = 0) -> tuple[LabelledSet, LabelledSet]:
    """"Which article is this sentence from?": a balanced classification task from a corpus.

    ``titles`` picks the articles (default: the ``num_articles`` with the most usable
    sentences, ties broken by title). From each, ``per_article`` sentences of at least
    ``min_words`` words are drawn with a seeded ``random.Random``, so every label has the same
    number of examples and the majority-class baseline is exactly ``1 / num_articles``. The
    split is per article, so train and test keep that balance and never share a sentence.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if per_article < 2:
        raise ValueError(f"per_article must be at least 2 (one train, one test), got {per_article}")
    chosen = _choose_articles(documents, titles, num_articles, min_words)
    rng = random.Random(seed)
    n_test = max(1, round(per_article * test_fraction))
    names = [d.title for d in chosen]
    train_part: tuple[list[str], list[int]] = ([], [])
    test_part: tuple[list[str], list[int]] = ([], [])
    for label, d in enumerate(chosen):
        pool = usable_sentences(d, min_words)
        if len(pool) < per_article:
            raise ValueError(f"article {d.title!r} has {len(pool)} sentences of at least "
                             f"{min_words} words; per_article={per_article} is too many")
        for k, s in enumerate(rng.sample(pool, per_article)):
            part = test_part if k < n_test else train_part
            part[0].append(s)
            part[1].append(label)
    # Interleave the labels: batches then mix articles from the first step.
    order = list(range(len(train_part[0])))
    rng.shuffle(order)
    train_set = LabelledSet([train_part[0][i] for i in order], [train_part[1][i] for i in order],
                            names)
    return train_set, LabelledSet(test_part[0], test_part[1], names)


# ---------------------------------------------------------------- chapter 12's real checkpoint

@dataclass
class BlankScore:
    """One blank: the model's top fillers, and -log P of the word that was there."""

    text: str
    answer: str
    top: MaskPrediction
    nll: float


@torch.no_grad()
def score_blanks(model: torch.nn.Module, tokenizer: Any, blanks: Sequence[tuple[str, str]],
                 top_k: int = 3) -> list[BlankScore]:
    """For each (sentence with one [MASK], the word that was there): the top ``top_k`` fillers and
    -log P(word | x\\M), the one term of the MLM loss L that the blank contributes."""
    if not isinstance(model, BertForPreTraining):
        raise ValueError(f"a {type(model).__name__} has no MLM head: fill-mask and the MLM loss need "
                         f"a BertForPreTraining (a BertForPreTraining or BertForMaskedLM folder)")
    out = []
    for text, answer in blanks:
        answer_id = tokenizer.vocab.get(answer)
        if answer_id is None:
            raise ValueError(f"{answer!r} is not one piece of this vocabulary; choose a word that is")
        preds = fill_mask(model, tokenizer, text, top_k=top_k)
        if len(preds) != 1:
            raise ValueError(f"{text!r} has {len(preds)} [MASK]s; score_blanks takes exactly one")
        enc = tokenizer.encode(text)
        ids = torch.tensor([enc.input_ids], device=next(model.parameters()).device)
        masked = ids == tokenizer.mask_id
        log_p = model.eval()(ids, masked_positions=masked).mlm_logits.float().log_softmax(-1)
        out.append(BlankScore(text, answer, preds[0], -float(log_p[0, answer_id])))
    return out
