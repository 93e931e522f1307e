"""Kinds of slip a careful reading found, each caught where it can be.

- **A comparison without its paired interval.** A Markdown cell that reads a paired difference
  printed just above it (a code cell calling ``Results.difference``) states what it concludes in its
  metadata, ``"claims": [{"results": "task_shapes", "a": arm, "b": arm, "metric": m, "says":
  "higher" | "lower" | "no measurable difference"}]`` (an empty list when it compares nothing).
  Each claim is checked against the results file: "higher" needs the whole interval of a - b above
  0, "lower" below, and "no measurable difference" an interval that holds 0, whose cell then uses
  no comparative about it.
- **An untrained part used silently.** The book's model learned by MLM alone: segment B's embedding
  row, the pooler and the NSP head never trained. A section whose code feeds the book's model a
  pair, reads its pooler or its NSP head says so in its prose (or says which continuation trained
  them).
- **"Measured" where it was cited.** A table with an "in this book" column says per row which it
  is: measured (with the chapter that measured it), used but not compared, or not measured.
- **A reason no experiment isolated.** A sentence that gives a cause ("because", "since", "the
  reason", "is due to", "caused by", "explains why", "which is why") for a measured comparison (its
  effect holds a comparison, such as higher, lower, more, ahead or a paired difference, and a
  metric, such as loss, accuracy, F1 or nats, or a measured number) links the experiment that
  isolated the cause, or names it ("measured", "isolated", "ablation", "the arm"), or says the
  cause is untested ("not tested", "untested"). A reason that is a formula ("because log 1 = 0")
  is arithmetic, and a cited one is the source's; a sentence without a comparison and a metric
  ("the pooler trains, because MLM never trained it") explains a definition, not a measurement.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlm_lib.book.results import load_results

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

SAYS = ("higher", "lower", "no measurable difference")
# Words that claim a difference; a cell that says "no measurable difference" about a pair of arms
# must not also call one of them ahead.
COMPARATIVES = re.compile(r"\b(more|less|better|worse|higher|lower|ahead|behind|beats?|costs?|"
                          r"gains?|wins?)\b", re.I)
# Code that reaches a part MLM never trains: a second segment, the pooler, the NSP head.
UNTRAINED_USE = re.compile(
    r"encode_batch\(\s*[^,()]+,\s*[^=,()]+[,)]"   # a second positional argument: pairs
    r"|\bpairs=|\.pairs\b|is_next_probability|answered_is_next|nsp_logits|seq_relationship"
    r"|\.pooler\b|BertClassifier|task_data\(\s*[\"']pair")
UNTRAINED_NAMED = re.compile(r"untrained|never trained|not trained|never trains|trained only|"
                             r"continued (?:\w+ ){0,6}(?:with|on) (?:MLM \+ )?NSP|NSP-continued", re.I)
THIS_BOOK_COLUMN = re.compile(r"in this book|this book", re.I)
THIS_BOOK_VERDICT = re.compile(r"^\s*(\*{0,2})(measured|used, not compared|not measured|not compared|"
                               r"not used|cited|not run)\b", re.I)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


# ----------------------------------------------------------------------------- comparisons
def claim_errors(claims: list[dict], text: str) -> list[str]:
    """What is wrong with a cell's claims: unknown verdicts, verdicts the interval does not
    support, and a comparative beside "no measurable difference"."""
    errors = []
    for claim in claims:
        says = claim.get("says")
        if says not in SAYS:
            errors.append(f"{claim}: 'says' must be one of {SAYS}")
            continue
        diff = load_results(claim["results"]).difference(claim["a"], claim["b"], claim["metric"])
        holds_zero = diff.low <= 0 <= diff.high
        if says == "higher" and not diff.low > 0:
            errors.append(f"{claim}: says higher, but {claim['a']} - {claim['b']} is {diff}")
        if says == "lower" and not diff.high < 0:
            errors.append(f"{claim}: says lower, but {claim['a']} - {claim['b']} is {diff}")
        if says == "no measurable difference":
            if not holds_zero:
                errors.append(f"{claim}: says no difference, but {claim['a']} - {claim['b']} is {diff}")
            sentences = [s for s in re.split(r"(?<=[.;:])\s", text)
                         if claim["a"] in s and claim["b"] in s and COMPARATIVES.search(s)]
            errors += [f"{claim}: a comparative beside no measurable difference: {s!r}"
                       for s in sentences]
    return errors


def unmarked_readings(cells: list[dict]) -> list[int]:
    """Indices of the Markdown cells that first follow a code cell printing or drawing a paired
    difference (code and figures may come between) and carry no ``claims`` marker."""
    missing = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code" or ".difference(" not in _source(cell):
            continue
        reading = next((k for k in range(i + 1, len(cells)) if cells[k]["cell_type"] == "markdown"), None)
        if reading is not None and "claims" not in cells[reading]["metadata"] and reading not in missing:
            missing.append(reading)
    return missing


def test_a_claim_the_interval_does_not_support_is_caught():
    # task_shapes: pretrained - random on the pair task holds 0; on tagging F1 it is clear of 0
    holds = dict(results="task_shapes", a="pretrained encoder", b="random encoder", metric="pair_accuracy")
    clear = dict(holds, metric="tagging_f1")
    assert claim_errors([dict(holds, says="higher")], "")
    assert claim_errors([dict(clear, says="no measurable difference")], "")
    assert not claim_errors([dict(clear, says="higher")], "")
    assert not claim_errors([dict(holds, says="no measurable difference")], "")
    assert claim_errors([dict(holds, says="no measurable difference")],
                        "The pretrained encoder is ahead of the random encoder on pairs.")


def test_a_reading_without_a_marker_is_caught():
    cells = [{"cell_type": "code", "metadata": {}, "source": "print(r.difference('a', 'b', 'm'))"},
             {"cell_type": "markdown", "metadata": {}, "source": "A is better."},
             {"cell_type": "code", "metadata": {}, "source": "forest(ax, [r.difference('a', 'b', 'm')])"},
             {"cell_type": "code", "metadata": {}, "source": "plt.show()"},
             {"cell_type": "markdown", "metadata": {}, "source": "B is worse."},
             {"cell_type": "code", "metadata": {}, "source": "print(r.difference('a', 'b', 'm'))"},
             {"cell_type": "markdown", "metadata": {"claims": []}, "source": "Nothing compared."}]
    assert unmarked_readings(cells) == [1, 4]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_claims_follow_their_intervals(path):
    cells = _cells(path)
    assert not unmarked_readings(cells), (
        f"{path.stem}: cells {unmarked_readings(cells)} read a paired difference printed above them "
        "without a 'claims' marker in their metadata")
    errors = [e for c in cells if c["cell_type"] == "markdown"
              for e in claim_errors(c["metadata"].get("claims", []), _source(c))]
    assert not errors, f"{path.stem}: " + "; ".join(errors)


# -------------------------------------------------------------------------- untrained parts
def _sections(cells: list[dict]) -> list[list[dict]]:
    sections: list[list[dict]] = [[]]
    for cell in cells:
        if cell["cell_type"] == "markdown" and re.match(r"\s*#{1,2} ", _source(cell)):
            sections.append([])
        sections[-1].append(cell)
    return sections


def silent_untrained_uses(cells: list[dict]) -> list[str]:
    """Headings of sections whose code reaches segment B, the pooler or the NSP head of the book's
    model while their prose never says those parts are untrained (or what trained them)."""
    if not any("book_model(" in _source(c) for c in cells if c["cell_type"] == "code"):
        return []
    silent = []
    for section in _sections(cells):
        uses = [c for c in section if c["cell_type"] == "code" and UNTRAINED_USE.search(_source(c))]
        named = any(UNTRAINED_NAMED.search(_source(c)) for c in section if c["cell_type"] == "markdown")
        if uses and not named:
            silent.append(_source(section[0]).strip().splitlines()[0][:60])
    return silent


def test_a_silent_use_is_caught():
    cells = [{"cell_type": "code", "metadata": {}, "source": "model = book_model()"},
             {"cell_type": "markdown", "metadata": {}, "source": "## A classifier\n\nPut a head on it."},
             {"cell_type": "code", "metadata": {}, "source": "clf = BertClassifier.from_pretraining(model)"},
             {"cell_type": "markdown", "metadata": {}, "source": "## Pairs\n\nThe pooler is untrained."},
             {"cell_type": "code", "metadata": {}, "source": "b = tok.encode_batch(a_texts, b_texts)"}]
    assert silent_untrained_uses(cells) == ["## A classifier"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_untrained_parts_are_named_where_used(path):
    silent = silent_untrained_uses(_cells(path))
    assert not silent, (f"{path.stem}: these sections feed the book's model a pair, or read its pooler "
                        f"or NSP head, without saying those parts never trained by MLM: {silent}")


# ------------------------------------------------------------------------- measured or cited
def unlabelled_rows(markdown: str) -> list[str]:
    """Rows of a Markdown table with an "in this book" column whose cell there does not say
    measured, used but not compared, or not measured."""
    bad = []
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if not line.strip().startswith("|") or i + 1 >= len(lines) or "---" not in lines[i + 1]:
            continue
        header = [h.strip() for h in line.strip().strip("|").split("|")]
        column = next((k for k, h in enumerate(header) if THIS_BOOK_COLUMN.search(h)), None)
        if column is None:
            continue
        for row in lines[i + 2:]:
            if not row.strip().startswith("|"):
                break
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            if column < len(cells) and not THIS_BOOK_VERDICT.match(cells[column]):
                bad.append(row.strip()[:80])
    return bad


def test_a_row_that_does_not_say_which_is_caught():
    table = ("| change | the paper | in this book |\n|---|---|---|\n"
             "| dynamic masks | +0.4 | measured in [chapter 6](06_corrupting_the_input.ipynb) |\n"
             "| larger batches | +1.0 | larger batches, the same compute |\n"
             "| no NSP | +0.3 | not measured |\n")
    assert unlabelled_rows(table) == ["| larger batches | +1.0 | larger batches, the same compute |"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_tables_say_measured_or_cited(path):
    bad = [row for c in _cells(path) if c["cell_type"] == "markdown" for row in unlabelled_rows(_source(c))]
    assert not bad, f"{path.stem}: table rows that do not say measured / used, not compared / not measured: {bad}"


# ------------------------------------------------------------------------------ the reasons
# A cause given after its effect: "X, because Y"; since (not "since then"), the reason, due to,
# caused by, thanks to, owing to. And before it: "Y, which is why X"; "Y explains why X".
CAUSE_AFTER = re.compile(r"\b(?:because|the reason|(?:is|are|was|were) (?:partly |largely |mostly )?due to|"
                         r"caused by|(?<!ever )since(?! then\b| \d)|thanks to|owing to)\b", re.I)
CAUSE_BEFORE = re.compile(r"\b(?:(?:which|that|this) is why|explains why)\b", re.I)
# A sentence that opens with its marker takes the other half from the sentence before it.
OPENS = re.compile(r"^\W*(?:the reason|this is because|that is because|this is why|that is why)\b", re.I)
# What makes a sentence about a measured comparison: a comparison, and a metric or a measured number.
COMPARISON = re.compile(r"\b(?:higher|lower|highest|lowest|faster|slower|more|less|fewer|better|worse|"
                        r"best|worst|larger|smaller|above|below|ahead|behind|beats?|trails?|leads?|gaps?|"
                        r"differ\w*|paired|closes?|apart|agree\w*|gains?|loses?|falls?|rises?|within)\b", re.I)
METRIC = re.compile(r"\b(?:loss(?:es)?|accuracy|F1|perplexity|exact match|entropy|nats?|intervals?|"
                    r"IsNext|held-out|log-probability)\b", re.I)
MEASURED_NUMBER = re.compile(r"(?<![\w.])\d+\.\d+|\d\s?%")
# What backs a cause: the experiment that isolated it, linked or named, or a plain "not tested".
ISOLATED = re.compile(r"\]\((?:#|\d\d_)|\{(?:ref|numref)\}|\b(?:measured|isolat\w*|ablations?|the arms?)\b", re.I)
UNTESTED = re.compile(r"\b(?:not tested|untested|not isolated|not measured|not checked)\b", re.I)
FORMULA = "\u27e8formula\u27e9"  # a formula's place in a sentence: a reason that holds one is arithmetic


def _prose_sentences(markdown: str) -> list[str]:
    """A cell's sentences, with each formula kept as a marker and inline code dropped."""
    text = re.sub(r"\$\$.*?\$\$", FORMULA, markdown, flags=re.S)
    text = re.sub(r"\$[^$\n]*\$", FORMULA, text)
    text = re.sub(r"`[^`\n]*`", " ", text)
    return [" ".join(s.split()) for s in
            re.split(r"(?<=[.!?:])\s+(?=[A-Z*_(\[|])|\n\s*\n|\n\|", text) if s.strip()]


def unsupported_reasons(markdown: str) -> list[str]:
    """Sentences of a Markdown cell that give a cause for a measured comparison without naming or
    linking the experiment that isolated it or saying it is untested. The effect must hold a
    comparison and a metric or a measured number; a sentence that opens with its marker ("The
    reason is...", "That is why...") takes the other half from the sentence before it. A reason
    that holds a formula ("because log 1 = 0") is arithmetic, and a cited one is the source's."""
    sentences = _prose_sentences(markdown)
    bad = []
    for k, sentence in enumerate(sentences):
        if "{cite}" in sentence or sentence.startswith("#"):
            continue
        before = sentences[k - 1] if k and OPENS.search(sentence) else ""
        if m := CAUSE_AFTER.search(sentence):
            effect, reason = before + " " + sentence[:m.start()], sentence[m.end():]
        elif m := CAUSE_BEFORE.search(sentence):
            effect, reason = sentence[m.end():], before + " " + sentence[:m.start()]
        else:
            continue
        if FORMULA in reason or "=" in reason:
            continue
        if not COMPARISON.search(effect) or not (METRIC.search(effect) or MEASURED_NUMBER.search(effect)):
            continue
        if not (ISOLATED.search(sentence) or UNTESTED.search(sentence)):
            bad.append(sentence[:200])
    return bad


@pytest.mark.parametrize("text", [
    "The random encoder trails by 0.172, because its short training never left the plateau.",
    "Stage 1 sits below the unigram entropy. This is because kept tokens are copied.",
    "The accuracy is lower since the pooler is untrained.",
    "The loss with NSP is higher, which is due to the shared encoder.",
    "The blanks are harder, which is why the MLM loss is 0.3 nats higher.",
])
def test_a_reason_given_without_its_experiment_is_caught(text):
    assert unsupported_reasons(text)


@pytest.mark.parametrize("text", [
    # the experiment linked or named, or the cause marked untested
    "The random encoder trails by 0.172, because its short training never left the plateau "
    "([a fairer chance](#a-fairer-chance-for-the-random-encoder)).",
    "The accuracy is lower since the pooler is untrained (the arm *frozen pooler* isolated it).",
    "The loss is 0.3 higher, likely (not tested) because the warm-up is shorter.",
    # arithmetic, a definition, a time, a source
    "Its term is exactly 1 more, because $\\log 1 = 0$ and the loss is higher by $1$.",
    "In the frozen arm the pooler trains, because MLM never trained it.",
    "Kept positions are the easiest; the loss has been lower since then.",
    "NSP scores higher since topic is a shortcut, as ALBERT's authors say {cite}`lan2020albert`.",
])
def test_a_reason_with_its_experiment_arithmetic_or_untested_passes(text):
    assert not unsupported_reasons(text)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_reasons_for_measured_differences_say_what_isolated_them(path):
    bad = [(i, s) for i, c in enumerate(_cells(path)) if c["cell_type"] == "markdown"
           for s in unsupported_reasons(_source(c))]
    assert not bad, (f"{path.stem}: causes given for measured differences with neither the experiment "
                     "that isolated them nor 'not tested':\n" + "\n".join(f"  cell {i}: {s}" for i, s in bad))
