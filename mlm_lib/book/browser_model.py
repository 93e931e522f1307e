"""The book's model for the reader's browser: ONNX weights and a ``tokenizer.json``, built with the site.

The site runs the book's model with onnxruntime-web (WebAssembly, one thread) and tokenizes with
tokenizers.js (``@huggingface/tokenizers``), both served by the site itself, so every control that
asks the model answers on the published page, offline. ``export_site_model(folder)`` writes:

- ``book-model.onnx``: for one sequence of any length up to the model's positions, log P over V at
  every position, the attention probabilities of every layer and head, the pooled [CLS] vector and
  the NSP logits. The attention bias is an input, so a page can apply the causal mask of chapter 8.
  The weights are stored in float16, as the book's checkpoint stores them (so nothing is rounded:
  half the bytes, the same numbers), and cast to float32 inside the graph;
- ``nsp.onnx``, the same outputs for chapter 11's NSP model, and ``classifier-pretrained.onnx`` and
  ``classifier-random.onnx``, chapter 12's two classifiers, whose one output is log P over the
  labels (``label_log_probs``); each classifier's label names are in the ``.json`` of its name.
  All three come from ``mlm_lib.book.chapter_models``, saved by their chapters;
- ``tokenizer.json`` and ``tokenizer_config.json``: BERT's WordPiece on the book's vocabulary, in
  the format of Hugging Face's tokenizers (written by the ``tokenizers`` package), and the same two
  files for BERT-base's vocabulary (``bert-base-uncased-`` in front), which chapter 9 compares.

Nothing here is committed: it is built from the committed checkpoints, the same bytes on every run.

    python -m mlm_lib.book.browser_model book/vendor/model
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper
from torch import nn

from mlm_lib.book.book_model import bert_base_uncased_vocab, book_model, book_model_tokenizer
from mlm_lib.book.chapter_models import CHAPTER_MODEL_NAMES, load_chapter_model
from mlm_lib.finetune import BertClassifier
from mlm_lib.model import BertForPreTraining
from mlm_lib.tokenizer import WordPieceTokenizer

MODEL_FILE = "book-model.onnx"
INPUTS = ("input_ids", "token_type_ids", "attn_bias")
OUTPUTS = ("log_probs", "attentions", "pooled", "nsp_logits")
CLASSIFIER_OUTPUTS = ("label_log_probs",)
OPSET = 18
BERT_BASE_POSITIONS = 512


class BrowserOutputs(nn.Module):
    """Everything a page asks of the model, from one forward pass of one sequence: the encoder's
    own forward (which skips its input checks when traced) and the two heads."""

    def __init__(self, model: BertForPreTraining) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attn_bias: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        bert, heads = self.model.bert, self.model.cls
        enc = bert(input_ids, token_type_ids, attn_bias=attn_bias, output_attentions=True)
        logits = heads.mlm_logits(enc.last_hidden_state, bert.embeddings.word_embeddings.weight)
        # [1, T, V], [1, L, A, T, T], [1, H], [1, 2]
        return (logits.log_softmax(-1), torch.stack(enc.attentions, 1), enc.pooled_output,
                heads.seq_relationship(enc.pooled_output))


class ClassifierOutputs(nn.Module):
    """A fine-tuned classifier's log P over its labels for one sequence (dropout is off in eval)."""

    def __init__(self, model: BertClassifier) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attn_bias: torch.Tensor
                ) -> torch.Tensor:
        # the explicit attention path (output_attentions), as in the other graph; the unused
        # probabilities are not exported
        enc = self.model.bert(input_ids, token_type_ids, attn_bias=attn_bias, output_attentions=True)
        return self.model.classifier(enc.pooled_output).log_softmax(-1)  # [1, number of labels]


def export_onnx(model: BertForPreTraining | BertClassifier, path: Path) -> None:
    """Write ``model`` as one ONNX file (weights inside) with a dynamic sequence length."""
    if isinstance(model, BertClassifier):
        wrapper: nn.Module = ClassifierOutputs(model.eval())
        outputs = CLASSIFIER_OUTPUTS
    else:
        wrapper, outputs = BrowserOutputs(model.eval()), OUTPUTS
    example = (torch.tensor([[2, 5, 3]]), torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 1, 3, 3))
    # The TorchScript exporter (dynamo=False): under a second a model, where the dynamo exporter
    # spent about ten tracing it. Its deprecation notice is silenced; requirements.txt pins torch.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapper, example, str(path), dynamo=False, opset_version=OPSET,
                          input_names=list(INPUTS), output_names=list(outputs),
                          dynamic_axes={"input_ids": {1: "T"}, "token_type_ids": {1: "T"},
                                        "attn_bias": {2: "T", 3: "T"}})
    graph = onnx.load(str(path))
    _without_export_notes(graph)
    _weights_in_float16(graph)
    onnx.save(graph, str(path))


def _without_export_notes(graph: onnx.ModelProto) -> None:
    """Drop the exporter's notes on each node (the Python stack trace that made it, with the
    machine's file paths, and the name of the module that ran the export): the site need not
    carry them, and the file's bytes then depend only on the model."""
    for proto in (graph, graph.graph, *graph.graph.node, *graph.graph.input, *graph.graph.output,
                  *graph.graph.value_info, *graph.graph.initializer):
        del proto.metadata_props[:]
        proto.doc_string = ""


def _weights_in_float16(graph: onnx.ModelProto) -> None:
    """Store every float32 weight as float16 followed by a Cast back to float32, where the value
    survives the round trip exactly (the book's checkpoint is float16, so all of them do)."""
    nodes = []
    for init in graph.graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        value = numpy_helper.to_array(init)
        half = value.astype(np.float16)
        if not np.array_equal(half.astype(np.float32), value):
            continue
        name = init.name
        init.CopyFrom(numpy_helper.from_array(half, name + "_f16"))
        nodes.append(helper.make_node("Cast", [name + "_f16"], [name], to=onnx.TensorProto.FLOAT))
    rest = list(graph.graph.node)
    del graph.graph.node[:]
    graph.graph.node.extend(nodes + rest)


def tokenizer_files(tokenizer: WordPieceTokenizer, max_length: int) -> dict[str, str]:
    """``tokenizer.json`` and ``tokenizer_config.json`` for ``tokenizer``'s vocabulary."""
    from tokenizers import BertWordPieceTokenizer

    vocab = {token: i for i, token in enumerate(tokenizer.vocab_text().splitlines())}
    hf = BertWordPieceTokenizer(vocab, lowercase=True, clean_text=True, handle_chinese_chars=True,
                                strip_accents=None, wordpieces_prefix="##")
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True,
              "model_max_length": max_length}
    return {"tokenizer.json": hf.to_str(),
            "tokenizer_config.json": json.dumps(config, sort_keys=True)}


def export_site_model(folder: str | Path) -> list[Path]:
    """Write the model and its tokenizer into ``folder``; return the files written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = book_model()
    export_onnx(model, folder / MODEL_FILE)
    written = [folder / MODEL_FILE]
    for name in CHAPTER_MODEL_NAMES:
        chapter_model = load_chapter_model(name)
        export_onnx(chapter_model, folder / f"{name}.onnx")
        written.append(folder / f"{name}.onnx")
        if isinstance(chapter_model, BertClassifier):
            labels = folder / f"{name}.json"
            labels.write_text(json.dumps({"labels": chapter_model.label_names}), encoding="utf-8")
            written.append(labels)
    bert_base = WordPieceTokenizer.from_vocab_file(bert_base_uncased_vocab())
    for prefix, tokenizer, length in [("", book_model_tokenizer(), model.config.max_position_embeddings),
                                      ("bert-base-uncased-", bert_base, BERT_BASE_POSITIONS)]:
        for name, text in tokenizer_files(tokenizer, length).items():
            (folder / (prefix + name)).write_text(text, encoding="utf-8")
            written.append(folder / (prefix + name))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="where to write the model and tokenizer files")
    for path in export_site_model(parser.parse_args().folder):
        print(f"{path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
