"""Chapter 15's replaced token detection: ELECTRA's discriminator trained in seconds on the
samples of a fixed generator.

The generator is fixed (the second stage of the paper's two-stage variant): a CPU budget has no
room to train two networks at once. Two generators (``GENERATORS``): the book's model, and the
paper's weakest, a unigram sampler that ignores context. Three detectors (``STARTS``), each
trained on the corrupted text of the articles the book's model read:

- ``from the book's encoder``: a copy of the book's model's encoder under a new head (the
  paper's two-stage start: the discriminator begins with the generator's weights);
- ``from scratch``: the same 2 x 128 encoder started at random;
- ``token only``: the control that cannot read context. It counts, over the same training
  batches, how often each vocabulary token was a replacement, and says "replaced" with that
  frequency. It ranks by the token alone; counted from 200 batches over 8,000 tokens it is also
  overconfident, so its held-out loss is above the read-nothing detector's.

All are scored on the same corrupted sequences of the five held-out articles (masks and samples
drawn once per generator, from ``EVAL_SEED``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from mlm_lib.batches import EVAL_SEED, BatchStream, make_batch, masked_batches
from mlm_lib.book.book_model import book_model
from mlm_lib.book.chapter_runs import chapter_data
from mlm_lib.electra import Electra, ElectraDiscriminator, UnigramGenerator, detection_sums, roc_auc
from mlm_lib.loop import Batch, History, Metrics, train_loop
from mlm_lib.masking import EVAL_CORRUPTION
from mlm_lib.model import BertForPreTraining
from mlm_lib.optim import WarmupLinearSchedule, build_optimizer
from mlm_lib.pretraining import PreparedData

GENERATORS = ("book model", "unigram")
STARTS = ("from the book's encoder", "from scratch", "token only")
ARMS = {f"{g}, {s}": (g, s) for g in GENERATORS for s in STARTS}
# One recipe for both trained discriminators. M is chosen as BERT chooses it (15%), every chosen
# token becomes [MASK] for the generator (the paper's x_masked), and a sample replaces it.
STEPS = 200
BATCH_SIZE = 32
LR = 1e-3
WARMUP_STEPS = 30
LOG_EVERY = 10
SEQ_LENGTH = 64  # the book's model's positions
COUNT_PRIOR = 1.0  # pseudo-tokens per vocabulary entry in the token-only control's counts


def electra_data() -> PreparedData:
    """The Wikipedia excerpt as chapter 10 split it: the articles the book's model read, and the
    five it never read."""
    return chapter_data(SEQ_LENGTH)


@functools.lru_cache(maxsize=1)
def unigram_generator() -> UnigramGenerator:
    """Token frequencies of the articles the book's model read."""
    data = electra_data()
    return UnigramGenerator.from_sequences((e.input_ids for e in data.train_examples),
                                           data.tokenizer.vocab_size, data.tokenizer.special_ids)


def make_generator(name: str) -> BertForPreTraining | UnigramGenerator:
    """One of ``GENERATORS``."""
    if name == GENERATORS[0]:
        return book_model()
    if name == GENERATORS[1]:
        return unigram_generator()
    raise ValueError(f"generator must be one of {GENERATORS}, got {name!r}")


def corrupter(name: str, seed: int) -> Electra:
    """A fixed generator with an untrained discriminator slot: the corruption step alone, its
    samples drawn from ``seed``."""
    config = book_model().config
    return Electra(make_generator(name), ElectraDiscriminator.from_scratch(config),
                   train_generator=False, sample_seed=seed)


def training_batches(data: PreparedData, seed: int) -> Iterator[list[Batch]]:
    """Batches of the read articles, epoch after epoch in a seeded order, with a fresh M each
    time (dynamic masking); the generator's samples are drawn in the step itself."""
    stream = BatchStream(len(data.train_examples), BATCH_SIZE, seed)
    g = torch.Generator().manual_seed(seed)
    while True:
        idx = stream.next()
        yield [make_batch([data.train_examples[i] for i in idx], data.tokenizer, EVAL_CORRUPTION, g)]


@dataclass
class Corrupted:
    """Sequences after the generator: what every detector is scored on."""

    x_corrupt: torch.Tensor
    is_original: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor


def corrupted(electra: Electra, batches: list[Batch]) -> list[Corrupted]:
    """Each batch after the generator, with its samples drawn from the generator's own stream."""
    out = []
    with torch.no_grad():
        for b in batches:
            x_corrupt, is_original, _ = electra.corrupt_batch(b)
            out.append(Corrupted(x_corrupt, is_original, b["attention_mask"], b["token_type_ids"]))
    return out


@functools.lru_cache(maxsize=len(GENERATORS))
def held_out(generator: str) -> list[Corrupted]:
    """The five unread articles, masked and sampled by ``generator`` once, from ``EVAL_SEED``: the
    same corrupted sequences for every detector and every seed."""
    data = electra_data()
    return corrupted(corrupter(generator, EVAL_SEED).eval(),
                     masked_batches(data.valid_examples, data.tokenizer))


def scores(detector: torch.nn.Module | torch.Tensor, c: Corrupted) -> torch.Tensor:
    """The logit of D(x, t) at every position: the discriminator's, or the token-only control's
    log-odds of its token (a [V] tensor)."""
    if isinstance(detector, torch.Tensor):
        return detector[c.x_corrupt]
    with torch.no_grad():
        return detector.eval()(c.x_corrupt, c.token_type_ids, c.attention_mask)


def detection_metrics(detector: torch.nn.Module | torch.Tensor, sequences: list[Corrupted]
                      ) -> dict[str, float]:
    """On ``sequences``: the mean L_Disc per position, the accuracy of D > 1/2, the replaced
    share, and the AUC of "replaced" (the chance that a replaced token looks more replaced than
    an original one)."""
    metrics, all_scores, all_labels = Metrics(), [], []
    for c in sequences:
        logits = scores(detector, c)
        metrics.add(detection_sums(logits, c.is_original, c.attention_mask))
        real = c.attention_mask.bool()
        all_scores.append(-logits[real])  # high = looks replaced
        all_labels.append(c.is_original[real] == 0)
    out = metrics.summary()
    out["disc_auc"] = roc_auc(torch.cat(all_scores), torch.cat(all_labels))
    return out


def constant_detector_loss(replaced_share: float) -> float:
    """L_Disc per position of the best detector that reads nothing: it says "replaced" with the
    replaced share p everywhere, and scores the binary entropy of p."""
    p = torch.tensor(replaced_share, dtype=torch.float64)
    return float(-(p * p.log() + (1 - p) * (1 - p).log()))


def token_only_detector(generator: str, seed: int, steps: int = STEPS) -> torch.Tensor:
    """The control: over the same ``steps`` training batches a discriminator sees, count how often
    each token of x_corrupt was original and replaced; return each token's log-odds of original,
    each count smoothed by one pseudo-token at the overall original share (so a token never seen
    gets the answer of a detector that reads nothing)."""
    data, electra = electra_data(), corrupter(generator, seed)
    counts = torch.zeros((2, data.tokenizer.vocab_size), dtype=torch.float64)
    batches = training_batches(data, seed)
    for _ in range(steps):
        for c in corrupted(electra.eval(), next(batches)):
            real = c.attention_mask.bool()
            counts.index_put_((c.is_original[real], c.x_corrupt[real]),
                              torch.ones(int(real.sum()), dtype=torch.float64), accumulate=True)
    original_share = counts[1].sum() / counts.sum()
    original = counts[1] + COUNT_PRIOR * original_share
    replaced = counts[0] + COUNT_PRIOR * (1 - original_share)
    return (original.log() - replaced.log()).float()


@dataclass
class DiscriminatorRun:
    """A trained discriminator (or the control's log-odds) and how its training went."""

    detector: torch.nn.Module | torch.Tensor
    history: History


def train_discriminator(generator: str, start: str, seed: int, steps: int = STEPS
                        ) -> DiscriminatorRun:
    """Train a detector on ``generator``'s samples for ``steps`` steps; ``start`` is one of
    ``STARTS``. Only the discriminator learns: L_Disc alone, the generator stays fixed."""
    if start == STARTS[2]:
        return DiscriminatorRun(token_only_detector(generator, seed, steps), History())
    model = book_model()
    if start == STARTS[0]:
        discriminator = ElectraDiscriminator.from_generator(model, seed=seed)
    elif start == STARTS[1]:
        discriminator = ElectraDiscriminator.from_scratch(model.config, seed=seed)
    else:
        raise ValueError(f"start must be one of {STARTS}, got {start!r}")
    electra = Electra(make_generator(generator), discriminator, train_generator=False,
                      sample_seed=seed)
    optimizer = build_optimizer(discriminator, LR)
    schedule = WarmupLinearSchedule(optimizer, WARMUP_STEPS, steps)
    torch.manual_seed(seed)
    state = train_loop(electra, type(electra).objective, training_batches(electra_data(), seed),
                       optimizer, schedule, steps, log_every=LOG_EVERY)
    return DiscriminatorRun(discriminator.eval(), state.history)


def electra_metrics(arm: str, seed: int) -> dict[str, float]:
    """One arm of ``ARMS`` (a generator and a detector) and one seed, scored on the held-out
    sequences of its generator: ``disc_loss``, ``disc_acc`` and ``disc_auc``."""
    generator, start = ARMS[arm]
    metrics = detection_metrics(train_discriminator(generator, start, seed).detector,
                                held_out(generator))
    return {k: metrics[k] for k in ("disc_loss", "disc_acc", "disc_auc")}
