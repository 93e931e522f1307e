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
- ``second-model.onnx``, the book's second model (:mod:`mlm_lib.book.second_model`: a sentence
  encoder given back an MLM head), which a reader may choose on the fill-mask and attention
  controls: log P over V and the attention probabilities only (its pooler and NSP head are
  untrained). Every weight matrix is stored in int8 with one scale per row (per output channel), so
  the file is a quarter of float32; the word embeddings are stored once and serve both the input
  and the tied decoder. :func:`second_browser_model` is the same model in ``mlm_lib``, its matrices
  rounded the same way, so the browser can be checked against it exactly; ``second-model.json``
  names it, its licence, its size in bytes, layers and heads;
- ``tokenizer.json`` and ``tokenizer_config.json``: BERT's WordPiece on the book's vocabulary, in
  the format of Hugging Face's tokenizers (written by the ``tokenizers`` package), and the same two
  files for BERT-base's vocabulary (``bert-base-uncased-`` in front), which chapter 9 compares and
  the second model reads.

Nothing here is committed: it is built from the committed checkpoints (and, for the second model,
the encoder package and the shipped regrown tensors), the same bytes on every run.

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
from mlm_lib.book.second_model import ENCODER, ENCODER_LICENCE, regrown_model
from mlm_lib.finetune import BertClassifier
from mlm_lib.model import BertForPreTraining
from mlm_lib.tokenizer import WordPieceTokenizer

MODEL_FILE = "book-model.onnx"
INPUTS = ("input_ids", "token_type_ids", "attn_bias")
OUTPUTS = ("log_probs", "attentions", "pooled", "nsp_logits")
CLASSIFIER_OUTPUTS = ("label_log_probs",)
SECOND_MODEL = "second-model"
SECOND_OUTPUTS = ("log_probs", "attentions")
INT8_MAX = 127  # symmetric int8: q in [-127, 127], zero point 0
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


class MaskedLMOutputs(nn.Module):
    """The second model's outputs: log P over V at every position and the attention probabilities
    (not its pooled vector or NSP logits: that head was never trained)."""

    def __init__(self, model: BertForPreTraining) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attn_bias: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        bert, heads = self.model.bert, self.model.cls
        enc = bert(input_ids, token_type_ids, attn_bias=attn_bias, output_attentions=True)
        logits = heads.mlm_logits(enc.last_hidden_state, bert.embeddings.word_embeddings.weight)
        return logits.log_softmax(-1), torch.stack(enc.attentions, 1)  # [1, T, V], [1, L, A, T, T]


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


def export_onnx(model: BertForPreTraining | BertClassifier, path: Path, mlm_only: bool = False) -> None:
    """Write ``model`` as one ONNX file (weights inside) with a dynamic sequence length;
    ``mlm_only``: log P and the attention probabilities only (:class:`MaskedLMOutputs`)."""
    if isinstance(model, BertClassifier):
        wrapper: nn.Module = ClassifierOutputs(model)
        outputs = CLASSIFIER_OUTPUTS
    elif mlm_only:
        wrapper, outputs = MaskedLMOutputs(model), SECOND_OUTPUTS
    else:
        wrapper, outputs = BrowserOutputs(model), OUTPUTS
    # eval on the wrapper, not only the model: the exporter restores the wrapper's mode afterwards,
    # which would otherwise switch the model's dropout back on
    wrapper.eval()
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


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 with one scale per row: ``q = round(w / s)``, ``s = max|row| / 127``. A row is
    an output channel of a linear layer (its weight is [out, in]) or one vector of an embedding."""
    scale = weight.abs().amax(1).clamp_min(torch.finfo(torch.float32).tiny) / INT8_MAX
    return torch.round(weight / scale[:, None]).clamp(-INT8_MAX, INT8_MAX).to(torch.int8), scale


def dequantize_rows(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``q * s`` in float32: one product per weight, as onnx's DequantizeLinear computes it."""
    return q.float() * scale[:, None]


def _quantized_matrices(model: BertForPreTraining) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Every weight matrix of the encoder and the MLM head, quantized per row."""
    return {name: quantize_rows(w.detach().float()) for name, w in model.state_dict().items()
            if w.ndim == 2 and name.startswith(("bert.embeddings.", "bert.layers.", "cls.transform."))}


def second_browser_model() -> BertForPreTraining:
    """The second model as the browser runs it: :func:`~mlm_lib.book.second_model.regrown_model`
    with each weight matrix replaced by its int8 rounding (:func:`quantize_rows`); the vectors
    (biases, LayerNorms) are unchanged. Parity with the browser is checked against this model."""
    model = regrown_model()
    rounded = {name: dequantize_rows(*qs) for name, qs in _quantized_matrices(model).items()}
    model.load_state_dict({**model.state_dict(), **rounded})
    return model.eval()


def export_second_model(path: Path) -> dict[str, object]:
    """Write the second model's ONNX file with int8 weight matrices; return what a page shows of it."""
    quantized = _quantized_matrices(regrown_model())
    model = second_browser_model()
    export_onnx(model, path, mlm_only=True)
    graph = onnx.load(str(path))
    _weights_in_int8(graph, quantized)
    _weights_in_float16(graph)
    name = f"{ENCODER}'s encoder with a regrown MLM head"
    helper.set_model_props(graph, {"name": name, "licence": ENCODER_LICENCE})  # carried with the weights
    onnx.save(graph, str(path))
    config = model.config
    return {"name": name, "licence": ENCODER_LICENCE,
            "file": path.name, "bytes": path.stat().st_size, "layers": config.num_hidden_layers,
            "heads": config.num_attention_heads, "positions": config.max_position_embeddings,
            "vocabulary": "bert-base-uncased"}


def _weights_in_int8(graph: onnx.ModelProto, quantized: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Replace each float32 weight matrix of ``graph`` by its int8 rows and their scales, with a
    DequantizeLinear node in front. The exporter stores a linear layer's weight transposed
    ([in, out]) and the tied decoder as a second, transposed copy of the word embeddings; each
    initializer is matched by value to the matrix it came from, and a transposed copy of a matrix
    already stored reads it through a Transpose node, so every matrix is stored once."""
    found: dict[bytes, tuple[str, bool]] = {}
    for name, (q, s) in quantized.items():
        value = dequantize_rows(q, s).numpy()
        found[value.tobytes()] = (name, False)
        found.setdefault(np.ascontiguousarray(value.T).tobytes(), (name, True))
    uses: dict[str, list[tuple[str, bool]]] = {}
    keep = []
    for init in graph.graph.initializer:
        if init.data_type == onnx.TensorProto.FLOAT and len(init.dims) == 2:
            key = numpy_helper.to_array(init).tobytes()
            if key not in found:
                raise ValueError(f"{init.name} {list(init.dims)}: a weight matrix with no int8 rounding")
            source, transposed = found[key]
            uses.setdefault(source, []).append((init.name, transposed))
        else:
            keep.append(init)
    del graph.graph.initializer[:]
    graph.graph.initializer.extend(keep)
    nodes = []
    for source, targets in uses.items():
        q, s = quantized[source]
        # stored as the first use reads it: rows (axis 0), or transposed with the scales on axis 1
        first_transposed = targets[0][1]
        stored = q.T if first_transposed else q
        graph.graph.initializer.extend([
            numpy_helper.from_array(np.ascontiguousarray(stored.numpy()), source + "_int8"),
            numpy_helper.from_array(s.numpy(), source + "_scale")])
        nodes.append(helper.make_node("DequantizeLinear", [source + "_int8", source + "_scale"],
                                      [targets[0][0]], axis=1 if first_transposed else 0))
        for name, transposed in targets[1:]:
            op = "Transpose" if transposed != first_transposed else "Identity"
            nodes.append(helper.make_node(op, [targets[0][0]], [name]))
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
    about = export_second_model(folder / f"{SECOND_MODEL}.onnx")
    (folder / f"{SECOND_MODEL}.json").write_text(json.dumps(about, sort_keys=True), encoding="utf-8")
    written += [folder / f"{SECOND_MODEL}.onnx", folder / f"{SECOND_MODEL}.json"]
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
