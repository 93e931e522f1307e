"""The book's model as a Hugging Face folder: what transformers, and every project built on it, reads.

Chapters 1, 5, 10 and 12 ask the book's model the same question twice, through ``mlm_lib`` and
through transformers, and show the same answer. Transformers reads a model from a folder (or a Hub
name, which it downloads into one): ``config.json``, ``model.safetensors``, and for the tokenizer
``vocab.txt`` with ``tokenizer_config.json``. :func:`book_hf_folder` writes that folder for the book's
model, so a chapter passes its path wherever a project passes ``"bert-base-uncased"``; changing that
one argument runs the same transformers lines on a real checkpoint.

What the folder holds beyond the trained weights: the pooler and the NSP head, which MLM-only
pretraining never trained (their initial weights, as in the book's model). ``AutoModelForMaskedLM``
leaves both out; ``BertForSequenceClassification`` reads the pooler.
Nothing here imports transformers: the format is files.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from mlm_lib.book.book_model import book_model, book_model_tokenizer
from mlm_lib.hf import save_hf_bert


def book_hf_folder(folder: str | Path | None = None) -> Path:
    """Write the book's model and tokenizer as a Hugging Face BERT folder (a fresh temporary one
    unless ``folder`` is given) and return its path.

    The tokenizer lower-cases (``do_lower_case``, as bert-base-uncased) and reads at most as many
    pieces as the model has positions (``model_max_length``), so a tokenizer call with
    ``truncation=True`` cuts where the model would fail.
    """
    folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp()) / "book-model"
    save_hf_bert(book_model(), folder, tokenizer=book_model_tokenizer())
    return folder
