"""BERT's four task shapes drawn from the code: ``shapes_diagram(config, num_labels)`` builds each
head on an encoder of ``config`` (:class:`~mlm_lib.finetune.BertClassifier` for one sentence and
for a pair, :class:`~mlm_lib.tasks.BertTokenClassifier`, :class:`~mlm_lib.tasks.BertSpanHead`)
and draws, per shape, its input, what the head reads, its parameters counted from the built layer,
and where its softmax runs. SVGs, like chapter 7's :func:`~mlm_lib.book.diagram.bert_diagram`.
"""

from __future__ import annotations

from html import escape

from mlm_lib.book.viz import MODEL_COLOR, REFERENCE_COLOR, TEXT_COLOR, TRUE_COLOR
from mlm_lib.config import BertConfig
from mlm_lib.finetune import BertClassifier, FinetunedBert
from mlm_lib.tasks import BertSpanHead, BertTokenClassifier

PANEL_W, HEIGHT, TOKEN_W, TOKEN_H = 250, 232, 28, 22
FAMILY = "font-family='DejaVu Sans, Arial, sans-serif'"
A_FILL, B_FILL, SPECIAL_FILL, HEAD_FILL = "#e8f0fa", "#fff1e3", "#f3f3f3", "#fff1e3"


def _head_parameters(model: FinetunedBert) -> int:
    return sum(p.numel() for p in model.classifier.parameters())


def shape_heads(config: BertConfig, num_labels: dict[str, int]) -> dict[str, FinetunedBert]:
    """The four heads, each on a random encoder of ``config`` (only their sizes are drawn)."""
    return {"one sentence": BertClassifier.from_scratch(config, num_labels=num_labels["one sentence"]),
            "a pair": BertClassifier.from_scratch(config, num_labels=num_labels["a pair"]),
            "a label per token": BertTokenClassifier.from_scratch(
                config, num_labels=num_labels["a label per token"]),
            "a start and an end": BertSpanHead.from_scratch(config)}


def _text(x: float, y: float, s: str, extra: str = "", color: str = TEXT_COLOR,
          anchor: str = "middle") -> str:
    size = "" if "font-size" in extra else "font-size='11'"
    return (f"<text x='{x}' y='{y}' text-anchor='{anchor}' fill='{color}' {FAMILY} {size} {extra}>"
            f"{escape(s)}</text>")


def _panel(x0: float, title: str, tokens: list[str], reads: list[int], head: str, softmax: str,
           pooled: bool, color: str) -> str:
    """One shape: tokens at the bottom, the encoder, arrows from the positions the head reads."""
    out = [_text(x0 + PANEL_W / 2, 16, title, "font-weight='bold' font-size='12.5'")]
    n = len(tokens)
    left = x0 + (PANEL_W - n * TOKEN_W) / 2
    y_tok, y_enc, y_head = 200, 150, 62
    out.append(f"<rect x='{x0 + 8}' y='{y_enc}' width='{PANEL_W - 16}' height='28' rx='5' "
               f"fill='{A_FILL}' stroke='{REFERENCE_COLOR}'/>")
    out.append(_text(x0 + PANEL_W / 2, y_enc + 18, "the encoder: h_1 … h_T"))
    segment_b = False
    for k, tok in enumerate(tokens):
        fill = SPECIAL_FILL if tok.startswith("[") else (B_FILL if segment_b else A_FILL)
        if tok == "[SEP]":
            segment_b = True
        x = left + k * TOKEN_W
        out.append(f"<rect x='{x + 1}' y='{y_tok}' width='{TOKEN_W - 2}' height='{TOKEN_H}' "
                   f"rx='3' fill='{fill}' stroke='{REFERENCE_COLOR}'/>")
        out.append(_text(x + TOKEN_W / 2, y_tok + 15, tok.strip("[]") if tok.startswith("[") else tok,
                         "font-size='11'"))
        out.append(f"<line x1='{x + TOKEN_W / 2}' y1='{y_tok}' x2='{x + TOKEN_W / 2}' "
                   f"y2='{y_enc + 28}' stroke='{REFERENCE_COLOR}'/>")
    for k in reads:
        x = left + k * TOKEN_W + TOKEN_W / 2
        out.append(f"<line x1='{x}' y1='{y_enc}' x2='{x}' y2='{y_head + 44}' stroke='{color}' "
                   f"stroke-width='2'/>")
    if pooled:  # beside the line from [CLS], not across it
        x_cls = left + TOKEN_W / 2
        out.append(_text(x_cls + 6, y_head + 62, "pooled: tanh(W h_[CLS] + b)",
                         "font-style='italic'", anchor="start"))
    out.append(f"<rect x='{x0 + 8}' y='{y_head}' width='{PANEL_W - 16}' height='44' rx='5' "
               f"fill='{HEAD_FILL}' stroke='{color}'/>")
    out.append(_text(x0 + PANEL_W / 2, y_head + 17, head))
    out.append(_text(x0 + PANEL_W / 2, y_head + 34, softmax, "font-weight='bold'", color))
    return "".join(out)


def shapes_diagram(config: BertConfig, num_labels: dict[str, int]) -> str:
    """Four SVGs, one per shape, in a row that wraps; each head's size and softmax read from the
    built head, each drawing with its own alt text."""
    heads = shape_heads(config, num_labels)
    h = config.hidden_size
    one = ["[CLS]", "A", "A", "A", "[SEP]"]
    pair = ["[CLS]", "A", "A", "[SEP]", "B", "B", "B", "[SEP]"]
    panels = [
        ("one sentence", one, [0], True, "over the {n} labels, once"),
        ("a pair", pair, [0], True, "over the {n} labels, once"),
        ("a label per token", one, [1, 2, 3], False, "over {n} labels, at each word"),
        ("a start and an end", pair, [4, 5, 6], False, "over B's positions, twice"),
    ]
    descriptions = {
        "one sentence": "one sentence: the head reads the pooled [CLS] vector, softmax over labels once",
        "a pair": "a pair, A then B: the head reads the pooled [CLS] vector, softmax over labels once",
        "a label per token": "a label per token: the head reads every h_i, softmax over labels at each word",
        "a start and an end": "a start and an end: the head reads B's h_i, softmax over B's positions, "
                              "once for the start and once for the end",
    }
    svgs = []
    for name, tokens, reads, pooled, softmax in panels:
        model = heads[name]
        n = model.num_labels
        head = f"linear {h} → {n}: {_head_parameters(model):,} parameters"
        color = TRUE_COLOR if name == "a start and an end" else MODEL_COLOR
        label = escape(descriptions[name])
        svgs.append(f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
                    f"viewBox='0 0 {PANEL_W} {HEIGHT}' width='{PANEL_W}' style='max-width:100%'>"
                    f"<title>{label}</title>"
                    + _panel(0, name, tokens, reads, head, "softmax " + softmax.format(n=n), pooled,
                             color)
                    + "</svg>")
    # Four drawings in a row that wraps: side by side on a wide page, two or one per row on a phone,
    # each at its own size so that its text stays legible.
    return ("<div class='task-shapes' style='display:flex;flex-wrap:wrap;gap:4px'>"
            + "".join(svgs) + "</div>")
