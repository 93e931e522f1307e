"""The chapters' table and figure helpers: exact text, bar heights, clear errors."""

import matplotlib

matplotlib.use("Agg")

import re  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from mlm_lib.book import viz  # noqa: E402
from mlm_lib.book.viz import (REFERENCE_COLOR, REST_LABEL, TRUE_COLOR, corrupt,  # noqa: E402
                              plot_attention, position_bars, position_similarity, prob_bars,
                              text_table, token_table)


def test_text_table_aligns_and_rounds():
    out = text_table(["word", "n", "p"], [("the", 12, 0.12345), ("a", 3, 1.0)])
    assert out.splitlines() == [
        "word   n      p",
        "----  --  -----",
        "the   12  0.123",
        "a      3  1.000",
    ]


def test_text_table_custom_float_format():
    out = text_table(["x"], [(0.5,)], float_format="{:.1e}")
    assert out.splitlines()[-1] == "5.0e-01"


def test_text_table_rejects_ragged_rows():
    with pytest.raises(ValueError, match="row 1 has 1 cells"):
        text_table(["a", "b"], [(1, 2), (3,)])
    with pytest.raises(ValueError, match="at least one column"):
        text_table([], [])


def test_corrupt_hides_exactly_m():
    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert corrupt(tokens, [False, False, True, False, False]) == [
        "[CLS]", "the", "[MASK]", "sat", "[SEP]"]
    with pytest.raises(ValueError, match="masked has 2 entries"):
        corrupt(tokens, [True, False])


def test_token_table_rows():
    tokens = ["[CLS]", "the", "cat", "[SEP]"]
    lines = token_table(tokens, [False, True, False, False]).splitlines()
    assert lines[0].split() == ["i", "x_i", "in", "M", "x_\\M"]
    assert lines[3].split() == ["1", "the", "yes", "[MASK]"]
    assert lines[4].split() == ["2", "cat", "cat"]
    # A kept-unchanged position is in M but the model sees the original token.
    kept = token_table(tokens, [False, True, False, False], seen=tokens).splitlines()
    assert kept[3].split() == ["1", "the", "yes", "the"]
    with pytest.raises(ValueError, match="seen has 1 tokens"):
        token_table(tokens, None, seen=["x"])


def test_prob_bars_heights_and_highlight():
    fig, ax = plt.subplots()
    bars = prob_bars(ax, ["hill", "road"], [0.75, 0.25], highlight="road", title="t")
    assert [b.get_height() for b in bars] == [0.75, 0.25]
    assert bars[1].get_facecolor() != bars[0].get_facecolor()
    assert ax.get_title() == "t"
    with pytest.raises(ValueError, match="not one of the labels"):
        prob_bars(ax, ["a"], [1.0], highlight="b")
    with pytest.raises(ValueError, match="2 labels but 1"):
        prob_bars(ax, ["a", "b"], [1.0])
    plt.close(fig)


def test_prob_bars_rest_of_vocabulary_bar():
    fig, ax = plt.subplots()
    bars = prob_bars(ax, ["hill", "road"], [0.5, 0.25], highlight="hill", rest=0.25)
    assert [b.get_height() for b in bars] == [0.5, 0.25, 0.25]
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == REST_LABEL
    assert to_hex(bars[0].get_facecolor()) == to_hex(TRUE_COLOR)
    assert to_hex(bars[2].get_facecolor()) == to_hex(REFERENCE_COLOR)
    with pytest.raises(ValueError, match="rest is the probability"):
        prob_bars(ax, ["a"], [0.5], rest=1.5)
    plt.close(fig)


def test_position_bars_marks_m():
    fig, ax = plt.subplots()
    bars = position_bars(ax, ["a", "b", "c"], [0.0, 2.5, 0.0], [False, True, False])
    assert [b.get_height() for b in bars] == [0.0, 2.5, 0.0]
    colors = [b.get_facecolor() for b in bars]
    assert colors[0] == colors[2] != colors[1]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0:a", "1:b", "2:c"]
    with pytest.raises(ValueError, match="2 values but 3 tokens"):
        position_bars(ax, ["a", "b", "c"], [1.0, 2.0])
    plt.close(fig)


def test_colours_are_hex_and_the_named_matplotlib_colours():
    """One home for the colours, as hex, so the live charts need no matplotlib to use them."""
    colours = {name: value for name, value in vars(viz).items() if name.endswith("_COLOR")}
    assert colours and all(re.fullmatch(r"#[0-9a-f]{6}", v) for v in colours.values()), colours
    assert (viz.TRUE_COLOR, viz.MODEL_COLOR, viz.REFERENCE_COLOR) == tuple(
        to_hex(c) for c in ("tab:orange", "tab:blue", "tab:gray"))


def test_position_similarity_is_a_cosine_table():
    table = torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
    sim = position_similarity(table)
    assert torch.allclose(sim.diagonal(), torch.ones(5), atol=1e-6)
    assert torch.allclose(sim, sim.T)
    with pytest.raises(ValueError, match="position table"):
        position_similarity(torch.zeros(3))


def test_plot_attention_labels_and_boxes():
    fig, ax = plt.subplots()
    plot_attention(ax, torch.full((3, 3), 1 / 3), ["a", "b", "c"], "t", highlight=[1])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert ax.get_title() == "t" and len(ax.patches) == 1
    with pytest.raises(ValueError, match="attention"):
        plot_attention(ax, torch.zeros(2, 2), ["a", "b", "c"])
    plt.close(fig)


def test_forest_fills_the_rows_whose_interval_excludes_the_reference():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mlm_lib.book.viz import forest
    from mlm_lib.stats import Interval

    fig, ax = plt.subplots()
    drawn = forest(ax, [("clear", Interval(0.3, 0.2, 0.4, 5)), ("reaches", Interval(0.1, -0.05, 0.25, 5))],
                   reference=0.0)
    faces = [d.lines[0].get_markerfacecolor() for d in drawn]
    assert faces[0] != "white" and faces[1] == "white"
    top = max(zip(ax.get_yticks(), ax.get_yticklabels()), key=lambda pair: pair[0])[1]
    assert top.get_text() == "clear"  # the first row is drawn at the top
    plt.close(fig)


def test_forest_rejects_a_mean_outside_its_interval():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mlm_lib.book.viz import forest
    from mlm_lib.stats import Interval

    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="outside"):
        forest(ax, [("bad", Interval(0.5, 0.1, 0.2, 5))])
    plt.close(fig)


def test_forest_figure_has_a_difference_panel_against_zero():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mlm_lib.book.viz import forest_figure
    from mlm_lib.stats import Interval

    fig = forest_figure([("a", Interval(0.3, 0.2, 0.4, 5)), ("b", Interval(0.2, 0.1, 0.3, 5))],
                        [("a - b", Interval(0.1, 0.05, 0.15, 5))], reference=0.1, metric="accuracy")
    assert len(fig.axes) == 2
    assert fig.axes[1].lines[-1].get_xdata()[0] == 0.0  # the reference line of the differences
    plt.close(fig)


def test_a_column_figure_is_drawn_at_the_width_it_is_shown_and_its_text_is_readable():
    import matplotlib
    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    from mlm_lib.book.viz import (COLUMN_WIDTH_PX, SMALLEST_TEXT_KEY, SMALLEST_TEXT_PX, column_figure,
                                  column_png, legend_below, shown_text_px)

    fig, axes = column_figure(1, 2, sharey=True)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set_title("a title")
    legend_below(fig)
    image = Image.open(io.BytesIO(column_png(fig)))
    assert image.size[0] == COLUMN_WIDTH_PX  # shown at its own size: nothing to scale down
    assert float(image.info[SMALLEST_TEXT_KEY]) == pytest.approx(shown_text_px(fig), abs=0.05)
    assert shown_text_px(fig) >= SMALLEST_TEXT_PX
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in axes)  # one legend, outside
    plt.close(fig)


def test_the_shown_text_size_counts_the_scale_of_a_figure_wider_than_the_column():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mlm_lib.book.viz import COLUMN_WIDTH_PX, shown_text_px

    fig, ax = plt.subplots(figsize=(2 * COLUMN_WIDTH_PX / 100, 3), dpi=100)
    ax.set_title("t", fontsize=10)
    ax.tick_params(labelsize=10)
    assert shown_text_px(fig) == pytest.approx(10 * 100 / 72 / 2)  # shown at half its size
    plt.close(fig)


def test_a_forest_figure_stacks_its_panels_and_names_the_reference_under_the_axis():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mlm_lib.book.viz import COLUMN_WIDTH_IN, forest_figure
    from mlm_lib.stats import Interval

    fig = forest_figure([("a", Interval(0.3, 0.2, 0.4, 5))], [("a - b", Interval(0.1, 0.05, 0.15, 5))],
                        reference=0.1, reference_label="the start", metric="accuracy", title="t")
    top, bottom = fig.axes
    assert fig.get_figwidth() == pytest.approx(COLUMN_WIDTH_IN)
    assert top.get_position().y0 > bottom.get_position().y1  # one above the other
    assert "the start" in top.get_xlabel() and top.get_legend() is None
    plt.close(fig)


def test_a_long_title_is_wrapped_to_the_column():
    from mlm_lib.book.viz import TITLE_CHARS, wrap_title

    assert wrap_title("short") == "short"
    assert all(len(line) <= TITLE_CHARS for line in wrap_title("word " * 60).split("\n"))
