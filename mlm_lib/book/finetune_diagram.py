"""Fine-tuning drawn from the models: what is kept, what is dropped, what is new, and what trains.

``finetune_diagram(pretrained, classifier)`` counts every part's parameters from the two models
(the pretraining model and the :class:`~mlm_lib.finetune.BertClassifier` built from it), draws the
pretraining model on the left and the classifier on the right, the encoder and pooler carried
across, the MLM and NSP heads left behind, the classifier new; under it, one row per arm of
chapter 12 says which parts start where and which train. An SVG, like
:func:`~mlm_lib.book.diagram.bert_diagram`.
"""

from __future__ import annotations

from html import escape

from mlm_lib.book.diagram import FAMILY, arrow_marker
from mlm_lib.book.viz import REFERENCE_COLOR, TEXT_COLOR, TRUE_TEXT_COLOR
from mlm_lib.finetune import BertClassifier
from mlm_lib.model import BertForPreTraining

WIDTH, BOX_W, BOX_H = 560, 200, 34
LEFT_X, RIGHT_X = 20, 340
ENCODER_FILL, HEAD_FILL, NEW_FILL, DROPPED_FILL = "#e8f0fa", "#fff1e3", "#e6f4ea", "#f3f3f3"
MARKER = "finetune-arrow"
# chapter 12's arms: what each part of the classifier starts from and whether it trains
ARMS = (("pretrained encoder", "pretrained", "trains"),
        ("frozen encoder", "pretrained", "frozen"),
        ("random encoder", "random", "trains"))


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def part_sizes(pretrained: BertForPreTraining, classifier: BertClassifier) -> dict[str, int]:
    """Parameters of each part: the encoder without its pooler, the pooler, the two pretraining
    heads (the MLM head without the output matrix it shares with the word embeddings), and the
    classifier's new layer."""
    if not isinstance(pretrained, BertForPreTraining):
        raise ValueError(f"expected a BertForPreTraining, got {type(pretrained).__name__}")
    if not isinstance(classifier, BertClassifier):
        raise ValueError(f"expected a BertClassifier, got {type(classifier).__name__}")
    if classifier.bert.config.hidden_size != pretrained.config.hidden_size:
        raise ValueError("the classifier was not built from this model: hidden sizes "
                         f"{classifier.bert.config.hidden_size} and {pretrained.config.hidden_size}")
    nsp = _count(pretrained.cls.seq_relationship)
    pooler = _count(pretrained.bert.pooler)
    return {"encoder": _count(pretrained.bert) - pooler, "pooler": pooler,
            "mlm head": _count(pretrained.cls) - nsp, "nsp head": nsp,
            "classifier": _count(classifier.classifier)}


def _box(x: float, y: float, title: str, note: str, fill: str, dashed: bool = False) -> str:
    dash = " stroke-dasharray='5 3'" if dashed else ""
    return (f"<rect x='{x}' y='{y}' width='{BOX_W}' height='{BOX_H}' rx='5' fill='{fill}' "
            f"stroke='{REFERENCE_COLOR}'{dash}/>"
            f"<text x='{x + BOX_W / 2}' y='{y + 14}' text-anchor='middle' fill='{TEXT_COLOR}' {FAMILY} "
            f"font-size='11.5' font-weight='bold'>{escape(title)}</text>"
            f"<text x='{x + BOX_W / 2}' y='{y + 28}' text-anchor='middle' fill='{TEXT_COLOR}' {FAMILY} "
            f"font-size='11'>{escape(note)}</text>")


def _text(x: float, y: float, s: str, size: float = 11, anchor: str = "middle", bold: bool = False,
          color: str = TEXT_COLOR) -> str:
    weight = " font-weight='bold'" if bold else ""
    return (f"<text x='{x}' y='{y}' text-anchor='{anchor}' fill='{color}' {FAMILY} "
            f"font-size='{size}'{weight}>{escape(s)}</text>")


def finetune_diagram(pretrained: BertForPreTraining, classifier: BertClassifier) -> str:
    """The SVG: the pretraining model and the classifier side by side, and the arms' table."""
    n = part_sizes(pretrained, classifier)
    labels = classifier.num_labels
    h = pretrained.config.hidden_size
    out = [arrow_marker(MARKER),
           _text(LEFT_X + BOX_W / 2, 18, "the book's model, MLM only", 12.5, bold=True),
           _text(RIGHT_X + BOX_W / 2, 18, f"fine-tuned: which of {labels} labels?", 12.5, bold=True)]
    y_head, y_pool, y_enc = 36, 90, 144
    # left: the pretraining model
    out.append(_box(LEFT_X, y_head, "MLM head: dropped", f"{n['mlm head']:,} parameters, trained",
                    DROPPED_FILL, dashed=True))
    out.append(_box(LEFT_X, y_pool, "pooler + NSP head", f"{n['pooler']:,} + {n['nsp head']:,}, never trained",
                    HEAD_FILL))
    out.append(_box(LEFT_X, y_enc, "encoder: embeddings, layers", f"{n['encoder']:,} parameters, trained",
                    ENCODER_FILL))
    # right: the classifier
    out.append(_box(RIGHT_X, y_head, "classifier: new", f"linear {h} → {labels}: {n['classifier']:,} parameters",
                    NEW_FILL))
    out.append(_box(RIGHT_X, y_pool, "pooler: kept", f"tanh(W h_[CLS] + b), {n['pooler']:,}", HEAD_FILL))
    out.append(_box(RIGHT_X, y_enc, "encoder: kept", f"{n['encoder']:,} parameters", ENCODER_FILL))
    for y in (y_pool, y_enc):  # carried across
        mid = y + BOX_H / 2
        out.append(f"<line x1='{LEFT_X + BOX_W}' y1='{mid}' x2='{RIGHT_X - 4}' y2='{mid}' "
                   f"stroke='{TEXT_COLOR}' marker-end='url(#{MARKER})'/>")
    out.append(_text((LEFT_X + BOX_W + RIGHT_X) / 2, y_pool - 4, "the NSP head is left behind", 11,
                     color=TRUE_TEXT_COLOR))
    # the arms
    y = y_enc + BOX_H + 30
    columns = (LEFT_X, LEFT_X + 150, LEFT_X + 280, LEFT_X + 390)
    for x, head in zip(columns, ("chapter 12's arm", "encoder starts", "encoder", "pooler, classifier")):
        out.append(_text(x, y, head, 11, anchor="start", bold=True))
    for k, (arm, start, trains) in enumerate(ARMS, start=1):
        row = (arm, start, trains, "train")
        for x, cell in zip(columns, row):
            out.append(_text(x, y + 18 * k, cell, 11, anchor="start"))
    height = y + 18 * len(ARMS) + 12
    label = (f"Fine-tuning the book's model: its encoder ({n['encoder']:,} parameters) and its never "
             f"trained pooler ({n['pooler']:,}) are kept; the MLM head ({n['mlm head']:,}) and the "
             f"never trained NSP head ({n['nsp head']:,}) are dropped; a new linear classifier "
             f"({n['classifier']:,}) reads the pooled [CLS] vector. The pretrained arm trains every "
             "part, the frozen arm only the pooler and classifier, the random arm every part from "
             "random weights.")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{escape(label)}' "
            f"viewBox='0 0 {WIDTH} {height}' width='{WIDTH}' style='max-width:100%'>"
            f"<title>{escape(label)}</title>" + "".join(out) + "</svg>")
