"""The files the site's browser model is built from: the ONNX export and the tokenizer.json.

The site's parity test runs them in chromium; here onnxruntime and the tokenizers package check
them against mlm_lib first, so a mismatch is found without a browser.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from onnxruntime import InferenceSession
from tokenizers import Tokenizer

from mlm_lib.book.book_model import book_model, book_model_tokenizer
from mlm_lib.book.browser_model import MODEL_FILE, export_site_model
from mlm_lib.book.chapter_models import load_chapter_model
from mlm_lib.corpus import load_wikipedia, train_valid_split
from mlm_lib.finetune import predict
from mlm_lib.model import attention_bias
from mlm_lib.numerics import max_diff, tolerance

# Where `make setup` exports the model for the site (the Makefile's SITE_MODEL folder).
SITE_EXPORT = Path(__file__).resolve().parents[2] / "book" / "vendor" / "model"
# Log-probabilities of 8,000 words pass through exp and a sum of 8,000 terms: the library's
# tolerance (mlm_lib.numerics) is derived for sums of up to 1,536 terms, so allow the ratio more.
LOG_PROB_ULPS = 256 * 8


@pytest.fixture(scope="module")
def site_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    export_site_model(folder)
    return folder


@pytest.fixture(scope="module")
def held_out() -> list[str]:
    _, valid = train_valid_split(load_wikipedia())
    return [s for d in valid for s in d.sentences][:20]


def _library(model, ids: torch.Tensor, causal: bool) -> list[torch.Tensor]:
    bias = attention_bias(ids.shape[1], causal=True) if causal else None
    with torch.no_grad():
        enc = model.bert(ids, attn_bias=bias, output_attentions=True)
        logits = model.cls.mlm_logits(enc.last_hidden_state, model.bert.embeddings.word_embeddings.weight)
        return [logits.log_softmax(-1), torch.stack(enc.attentions, 1), enc.pooled_output,
                model.cls.seq_relationship(enc.pooled_output)]


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_the_onnx_model_computes_what_the_library_computes(site_model, held_out, causal):
    session = InferenceSession(str(site_model / MODEL_FILE))
    model, tok = book_model(), book_model_tokenizer()
    for sentence in held_out[:8]:
        enc = tok.encode(sentence.replace(" the ", " [MASK] ", 1))
        ids = torch.tensor([enc.input_ids[:model.config.max_position_embeddings]])
        bias = attention_bias(ids.shape[1], causal=True) if causal else torch.zeros(1, 1, *ids.shape[1:] * 2)
        got = session.run(None, {"input_ids": ids.numpy(), "token_type_ids": np.zeros_like(ids.numpy()),
                                 "attn_bias": bias.numpy()})
        for name, ours, expected in zip(["log P", "attention", "pooled", "NSP"], got, _library(model, ids, causal)):
            ulps = LOG_PROB_ULPS if name == "log P" else 256
            assert max_diff(torch.from_numpy(ours), expected) <= tolerance(expected, ulps), f"{name}: {sentence!r}"


def test_the_tokenizer_json_tokenizes_as_the_library(site_model, held_out):
    tok = book_model_tokenizer()
    hf = Tokenizer.from_file(str(site_model / "tokenizer.json"))
    for text in held_out + ["the [MASK] crossed the river .", "Café naïve ümlaut, 東京!", "", "[MASK][MASK]"]:
        assert hf.encode(text).ids == tok.encode(text).input_ids, text


def test_the_export_is_the_same_bytes_every_time(site_model):
    """A fresh export matches the one `make setup` made for the site, file for file: the export is
    deterministic, and the site does not serve a model older than the library's."""
    if not (SITE_EXPORT / MODEL_FILE).exists():
        pytest.fail(f"{SITE_EXPORT} has no {MODEL_FILE}: run `make setup`")
    for name in (MODEL_FILE, "nsp.onnx", "classifier-pretrained.onnx", "classifier-pretrained.json",
                 "tokenizer.json", "tokenizer_config.json"):
        digest = [hashlib.sha256((folder / name).read_bytes()).hexdigest() for folder in (site_model, SITE_EXPORT)]
        assert digest[0] == digest[1], (f"{name} differs between a fresh export and {SITE_EXPORT}; "
                                        f"export it again: python -m mlm_lib.book.browser_model {SITE_EXPORT}")


def test_the_chapter_models_compute_in_onnx_what_they_compute_in_the_library(site_model, held_out):
    tok = book_model_tokenizer()
    nsp = load_chapter_model("nsp")
    session = InferenceSession(str(site_model / "nsp.onnx"))
    pairs = [(a, b) for a, b in zip(held_out, held_out[1:])
             if len(tok.encode(a, pair=b).input_ids) <= nsp.config.max_position_embeddings]
    assert len(pairs) >= 6, "too few held-out pairs that fit the model"
    for a, b in pairs[:6]:
        enc = tok.encode(a, pair=b)
        ids, types = torch.tensor([enc.input_ids]), torch.tensor([enc.token_type_ids])
        got = session.run(["nsp_logits"], {"input_ids": ids.numpy(), "token_type_ids": types.numpy(),
                                           "attn_bias": np.zeros((1, 1, ids.shape[1], ids.shape[1]), np.float32)})[0]
        with torch.no_grad():
            expected = nsp(ids, types).nsp_logits
        assert max_diff(torch.from_numpy(got), expected) <= tolerance(expected, 256), (a, b)
    for name in ("classifier-pretrained", "classifier-random"):
        model = load_chapter_model(name)
        session = InferenceSession(str(site_model / f"{name}.onnx"))
        assert json.loads((site_model / f"{name}.json").read_text())["labels"] == model.label_names
        for text in held_out[:6]:
            ids = torch.tensor([tok.encode(text).input_ids])
            got = session.run(None, {"input_ids": ids.numpy(), "token_type_ids": np.zeros_like(ids.numpy()),
                                     "attn_bias": np.zeros((1, 1, ids.shape[1], ids.shape[1]), np.float32)})[0]
            expected = predict(model, tok, [text]).log()
            assert max_diff(torch.from_numpy(got), expected) <= tolerance(expected, 256), (name, text)
