"""The drawing of BERT reads its sizes from the config, so it cannot drift from the code."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from mlm_lib.book.diagram import DIFFERS_COLOR, Stage, bert_diagram, flow_diagram, nsp_diagram, token_grid
from mlm_lib.book.game_map import AFTER_GAME, GAME_STAGES, game_map
from mlm_lib.config import BertConfig
from mlm_lib.sizes import parameter_counts

ODD = BertConfig(vocab_size=1234, hidden_size=96, num_hidden_layers=5, num_attention_heads=3,
                 intermediate_size=333, max_position_embeddings=77, type_vocab_size=2)


def _text(svg: str) -> str:
    return " ".join("".join(e.itertext()) for e in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"))


def test_every_size_in_the_drawing_comes_from_the_config():
    text = _text(bert_diagram(ODD, "odd"))
    total = sum(parameter_counts(ODD).values())
    for phrase in ["L = 5 layers", "3 heads of d = 32", "96 → 333 → 96", "V = 1,234 words",
                   "token: 1,234 × 96", "position: 77 × 96", "segment: 2 × 96", "at most 77 positions",
                   f"{total:,} parameters"]:
        assert phrase in text, f"{phrase!r} not in the drawing"


def test_the_drawing_has_the_parts_of_bert():
    text = _text(bert_diagram(ODD, "odd"))
    for part in ["post-LN", "self-attention", "feed-forward", "Add (residual) and LayerNorm", "pooler",
                 "NSP head", "tied token table", "GELU", "every position i in M", "[CLS] only"]:
        assert part in text, f"the drawing lacks {part!r}"


def test_numbers_that_differ_from_the_compared_config_are_marked():
    svg = bert_diagram(ODD, "odd", compare=BertConfig.preset("tiny", vocab_size=1234))
    marked = re.findall(rf"<tspan fill='{DIFFERS_COLOR}'[^>]*>([^<]+)</tspan>", svg)
    assert "96" in marked and "5" in marked and "333" in marked
    assert "1,234" not in marked  # the same vocabulary size: not marked
    assert "<tspan" not in bert_diagram(ODD, "odd", compare=ODD)


def test_two_drawings_on_one_page_do_not_share_ids():
    ids = [re.findall(r"id='([^']+)'", bert_diagram(ODD, title)) for title in ("one", "two")]
    assert ids[0] and not set(ids[0]) & set(ids[1])


def test_the_flow_shows_every_stage_its_shape_and_values_bottom_up():
    stages = [Stage("tokens x", (1, 5), "0:[CLS] 1:a <b> 2:[SEP]"), Stage("embeddings", (1, 5, 8), "0.1, -0.2"),
              Stage("L", (), "1.234 nats")]
    svg = flow_diagram(stages, "one sentence")
    text = _text(svg)  # parses: the values are escaped
    for phrase in ["tokens x", "[1, 5]", "0:[CLS] 1:a <b> 2:[SEP]", "embeddings", "[1, 5, 8]", "scalar",
                   "1.234 nats"]:
        assert phrase in text, f"{phrase!r} not in the flow"
    assert text.index("1.234 nats") < text.index("0.1, -0.2") < text.index("0:[CLS]")  # the loss on top
    label = ET.fromstring(svg).get("aria-label")
    assert label.startswith("one sentence: tokens x, shape [1, 5]") and "L, shape scalar" in label


def test_a_flow_needs_a_stage():
    with pytest.raises(ValueError, match="at least one stage"):
        flow_diagram([], "empty")


def test_the_token_grid_aligns_each_position_down_the_rows():
    rows = [("x", ["[CLS]", "the", "cat"], [None, "in M", None]),
            ("label", ["original", "replaced", "original"], ["original", "replaced", "original"])]
    svg = token_grid(rows, "one sequence")
    root = ET.fromstring(svg)
    rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.get("height") == "26"]
    xs = [float(r.get("x")) for r in rects]
    assert xs[:3] == xs[3:6]  # position k is the same column in both rows
    assert "x: [CLS] the cat; label: original replaced original" in root.get("aria-label")
    assert "in M" in _text(svg) and "replaced" in _text(svg)


@pytest.mark.parametrize("rows, message", [
    ([], "at least one row"),
    ([("x", ["a", "b"], [None])], "2 tokens and 1 marks"),
    ([("x", ["a"], ["hidden"])], "unknown marks"),
])
def test_a_bad_grid_names_its_problem(rows, message):
    with pytest.raises(ValueError, match=message):
        token_grid(rows, "bad")


def test_the_map_draws_the_game_in_order_and_links_each_stages_chapters():
    svg = game_map()
    links = re.findall(r"<a href='([^']+)'", svg)
    stems = [s for *_, ss in GAME_STAGES for s in ss] + [s for _, ss in AFTER_GAME for s in ss]
    assert links == [f"{s}.ipynb" for s in stems]
    text = _text(svg)
    names = [f"{k + 1}. {name}" for k, (name, _, _) in enumerate(GAME_STAGES)]
    assert [text.index(n) for n in names] == sorted(text.index(n) for n in names)
    assert "next" in text and "batch" in text  # the loop closes
    assert ET.fromstring(svg).get("role") == "group"  # its links stay reachable
    for shown, name in re.findall(r"<a href='[^']+' aria-label='([^']+)'><text[^>]*>([^<]+)</text>", svg):
        assert name in shown.split(":")[0], f"link {name!r} is named {shown!r}: a name must hold its visible text"


def test_a_page_outside_the_notebooks_gives_the_maps_links_its_own_path():
    links = re.findall(r"<a href='([^']+)'", game_map(href=lambda stem: f"../notebooks/{stem}.html"))
    assert links[0] == "../notebooks/01_words_and_symbols.html"


def test_the_nsp_drawing_makes_both_pairs_and_reads_them_at_cls_with_the_configs_sizes():
    own = ("A city", ["The bridge opened in 1932.", "Bananas are sold here.", "The hall."])
    other = ("A planet", ["Mars has two small moons."])
    text = _text(nsp_diagram(own, other, ODD))
    assert "[CLS] The bridge opened in 1932. [SEP] Bananas are sold here. [SEP]" in text
    assert "[CLS] The bridge opened in 1932. [SEP] Mars has two small moons. [SEP]" in text
    assert "IsNext" in text and "NotNext" in text and "96 × 96" in text and "96 → 2" in text
    with pytest.raises(ValueError, match="two sentences"):
        nsp_diagram(("x", ["one"]), other, ODD)
