"""Why BERT's layer has residuals and LayerNorm where it has them: the library's own layers, run
with one part taken out or moved, in a fresh 12-layer stack (chapter 7).

A BERT layer is two blocks, each ``x -> LN(x + F(x))`` (post-LN). :func:`layer_forward` runs a
:class:`~mlm_lib.model.BertLayer`'s own weights in four arrangements, and :func:`depth_profile`
measures, after each layer of a fresh stack, three things a deep stack can lose: how alike the
positions' vectors become, how large they grow, and how much of the MLM loss's gradient reaches
the layer's weights.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from mlm_lib.batches import masked_batches
from mlm_lib.book.book_model import book_model
from mlm_lib.book.chapter_runs import chapter_data
from mlm_lib.init import build_model
from mlm_lib.masking import EVAL_CORRUPTION
from mlm_lib.model import BertLayer

POST_LN, PRE_LN = "post-LN (BERT)", "pre-LN"
NO_RESIDUAL, NO_LAYER_NORM = "post-LN, no residual", "residual, no LayerNorm"
ARRANGEMENTS = (POST_LN, PRE_LN, NO_RESIDUAL, NO_LAYER_NORM)
DEPTH = 12  # BERT-base's number of layers, at the book's width
BATCH = 32  # held-out sequences, the same for every arrangement and seed


def layer_forward(layer: BertLayer, x: torch.Tensor, bias: torch.Tensor | None,
                  arrangement: str = POST_LN) -> torch.Tensor:
    """``layer``'s weights in one arrangement of each block: BERT's ``LN(x + F(x))``, pre-LN's
    ``x + F(LN(x))``, ``LN(F(x))`` without the residual, or ``x + F(x)`` without LayerNorm."""
    def attention(v: torch.Tensor) -> torch.Tensor:
        return layer.attention_output(layer.attention(v, bias)[0])

    def feed_forward(v: torch.Tensor) -> torch.Tensor:
        return layer.output(layer.act(layer.intermediate(v)))

    if arrangement == POST_LN:
        return layer(x, bias)[0]
    if arrangement == PRE_LN:
        x = x + attention(layer.attention_norm(x))
        return x + feed_forward(layer.output_norm(x))
    if arrangement == NO_RESIDUAL:
        return layer.output_norm(feed_forward(layer.attention_norm(attention(x))))
    if arrangement == NO_LAYER_NORM:
        x = x + attention(x)
        return x + feed_forward(x)
    raise ValueError(f"arrangement must be one of {ARRANGEMENTS}, got {arrangement!r}")


def depth_profile(arrangement: str, seed: int = 0, depth: int = DEPTH,
                  initializer_range: float | None = None) -> dict[str, list[float]]:
    """After each of ``depth`` fresh layers (the book's width and, unless given, initialisation;
    no dropout), on the same held-out blanks: ``alike``, the mean cosine between two real
    positions of a sequence; ``rms``, the root mean square of their vectors' entries; and
    ``gradient``, the norm of the MLM loss's gradient over the layer's weights. Pre-LN ends with
    one more LayerNorm before the head, as pre-LN models do."""
    config = book_model().config
    config = dataclasses.replace(
        config, num_hidden_layers=depth, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        initializer_range=initializer_range or config.initializer_range)
    # float64: without LayerNorm the sums grow by orders of magnitude, and float32's rounding,
    # which differs between CPU kernels, would grow with them
    model = build_model(config, seed=seed).double()
    data = chapter_data(config.max_position_embeddings)
    batch = masked_batches(data.valid_examples, data.tokenizer, EVAL_CORRUPTION,
                           batch_size=BATCH, max_examples=BATCH)[0]
    real = batch["attention_mask"].bool()
    pairs = real[:, :, None] & real[:, None, :] & ~torch.eye(real.shape[1], dtype=torch.bool)
    x, bias = model.bert.embed(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    alike, rms = [], []
    for layer in model.bert.layers:
        x = layer_forward(layer, x, bias, arrangement)
        unit = F.normalize(x.detach(), dim=-1)
        alike.append(float((unit @ unit.transpose(1, 2))[pairs].mean()))
        rms.append(float(x.detach()[real].pow(2).mean().sqrt()))
    if arrangement == PRE_LN:
        x = F.layer_norm(x, x.shape[-1:], eps=config.layer_norm_eps)
    masked = batch["masked"]
    logits = model.cls.mlm_logits(x[masked], model.bert.embeddings.word_embeddings.weight)
    F.cross_entropy(logits, batch["labels"][masked]).backward()
    gradient = [float(torch.cat([p.grad.flatten() for p in layer.parameters()
                                    if p.grad is not None]).norm())
                for layer in model.bert.layers]
    return {"alike": alike, "rms": rms, "gradient": gradient}
