"""Chapter 12's task, *which article is this sentence from?*, and the classifiers compared on it.

Two versions of the task, cut from the Wikipedia excerpt by
:func:`~mlm_lib.book.chapter_runs.article_task`: four articles the book's model read in pretraining
(100 sentences each, 30% held out) and the held-out articles with at least 60 sentences of six
words or more (60 each). Three arms fine-tune the same classifier shape: from the book's
pretrained encoder, from a random encoder, and from the pretrained encoder frozen (only the pooler,
which MLM never trained, and the classifier learn). The random encoder also gets a longer run at
three learning rates. A fourth arm, :data:`SECOND_ARM`, fine-tunes the encoder of the book's second
model (:mod:`mlm_lib.book.second_model`: a larger encoder pretrained on far more text, whose MLM
head was regrown on the book's training split, so it read the same four articles) with the same
recipe and its own tokenizer. :func:`short_run_accuracies` and :func:`long_run_accuracies` run one
arm with one seed on both tasks: the rows of the results files ``finetune`` and ``finetune_long``.
"""

from __future__ import annotations

import functools

from mlm_lib.book.book_model import book_model, book_model_tokenizer
from mlm_lib.book.chapter_runs import article_task, usable_sentences
from mlm_lib.book.second_model import regrown_model, regrown_tokenizer
from mlm_lib.book.task_shapes import read_and_unread
from mlm_lib.corpus import load_wikipedia
from mlm_lib.finetune import BertClassifier, FinetuneConfig, LabelledSet, finetune
from mlm_lib.tokenizer import WordPieceTokenizer

ARMS = ("pretrained encoder", "random encoder", "frozen encoder")
SECOND_ARM = "second model's encoder"
EXPERIMENT_ARMS = ARMS + (SECOND_ARM,)  # the rows of the finetune results
# The chapter's recipe: 3 epochs of at most 16 sentences (54 steps on the read articles), at a
# learning rate that suits the pretrained encoder.
EPOCHS, BATCH_SIZE, LR, MAX_LENGTH = 3, 16, 5e-4, 48
# The random encoder's longer run: 10 epochs (180 steps) at each of three learning rates.
LONG_EPOCHS = 10
LONG_ARMS = {f"random encoder, lr {lr:g}": lr for lr in (5e-4, 1e-3, 2e-3)}
MIN_WORDS = 6         # article_task's rule for a usable sentence
UNREAD_SENTENCES = 60  # per held-out article, and the fewest it must have


@functools.lru_cache(maxsize=1)
def read_task() -> tuple[LabelledSet, LabelledSet]:
    """(train, test) from the four articles with the most sentences, all of them read in
    pretraining: 70 and 30 sentences of each."""
    return article_task(load_wikipedia(), num_articles=4, per_article=100, test_fraction=0.3, seed=0)


def unread_titles() -> list[str]:
    """The articles pretraining held out that have UNREAD_SENTENCES usable sentences."""
    return [d.title for d in read_and_unread()[1]
            if len(usable_sentences(d, MIN_WORDS)) >= UNREAD_SENTENCES]


@functools.lru_cache(maxsize=1)
def unread_task() -> tuple[LabelledSet, LabelledSet]:
    """(train, test) from :func:`unread_titles`: 42 and 18 sentences of each."""
    return article_task(load_wikipedia(), titles=unread_titles(), per_article=UNREAD_SENTENCES,
                        test_fraction=0.3, seed=0)


def frozen_classifier(seed: int, num_labels: int = 4) -> BertClassifier:
    """The pretrained encoder with its embeddings and layers frozen: only the pooler (which MLM
    never trained) and the classifier learn."""
    m = BertClassifier.from_pretraining(book_model(), num_labels=num_labels, seed=seed)
    for name, p in m.bert.named_parameters():
        p.requires_grad_(name.startswith("pooler."))
    return m


def classifier(arm: str, seed: int, num_labels: int = 4) -> BertClassifier:
    """A fresh classifier of ``arm`` (one of EXPERIMENT_ARMS); ``seed`` sets the new weights."""
    if arm == SECOND_ARM:  # its pooler is the package's, which MLM never trained either
        return BertClassifier.from_pretraining(regrown_model(), num_labels, seed=seed)
    if arm == "pretrained encoder":
        return BertClassifier.from_pretraining(book_model(), num_labels, seed=seed)
    if arm == "random encoder":
        return BertClassifier.from_scratch(book_model().config, num_labels, seed=seed)
    if arm == "frozen encoder":
        return frozen_classifier(seed, num_labels)
    raise ValueError(f"unknown arm {arm!r}; the arms are {EXPERIMENT_ARMS}")


def tokenizer_of(arm: str) -> WordPieceTokenizer:
    """The vocabulary ``arm``'s encoder reads: BERT's 30,522 pieces for the second model's."""
    return regrown_tokenizer() if arm == SECOND_ARM else book_model_tokenizer()


def final_accuracy(model: BertClassifier, seed: int, train: LabelledSet, test: LabelledSet,
                   epochs: int = EPOCHS, lr: float = LR,
                   tokenizer: WordPieceTokenizer | None = None) -> float:
    """Fine-tune with the chapter's settings (``seed``: data order and dropout) and return the
    held-out accuracy after the last epoch; ``tokenizer``: the book's unless given."""
    c = FinetuneConfig(epochs=epochs, batch_size=BATCH_SIZE, lr=lr, max_length=MAX_LENGTH,
                       seed=seed, progress=False)
    return finetune(model, tokenizer or book_model_tokenizer(), train, c, eval_set=test).column(
        "accuracy", kind="eval")[-1]


def _on_both_tasks(arm: str, seed: int, epochs: int, lr: float) -> dict[str, float]:
    """``arm`` fine-tuned for ``epochs`` at ``lr`` on the read and on the unread articles."""
    accuracies = {}
    for name, (train, test) in (("read", read_task()), ("unread", unread_task())):
        model = classifier(arm, seed, len(train.label_names))
        accuracies[f"{name}_acc"] = final_accuracy(model, seed, train, test, epochs, lr,
                                                   tokenizer_of(arm))
    return accuracies


def short_run_accuracies(arm: str, seed: int) -> dict[str, float]:
    """``arm`` (one of EXPERIMENT_ARMS) with the chapter's recipe: a row of the ``finetune`` results."""
    return _on_both_tasks(arm, seed, EPOCHS, LR)


def long_run_accuracies(arm: str, seed: int) -> dict[str, float]:
    """The random encoder for LONG_EPOCHS at ``arm``'s learning rate (``arm``: one of LONG_ARMS):
    a row of the ``finetune_long`` results."""
    return _on_both_tasks("random encoder", seed, LONG_EPOCHS, LONG_ARMS[arm])
