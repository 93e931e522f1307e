"""The recall widgets: the four kinds, escaping, math, stable output, clear errors; the items as
data (well-formed, unique ids, shown once in their chapter, no answer in any chapter's source);
the Anki deck the build writes."""

import ast
import csv
import json
import os
import re
from pathlib import Path

import pytest
import recall_anki
import recall_directive
import yaml

from mlm_lib.book import recall
from mlm_lib.book.recall import multiple_choice, reveal, spot_the_error, true_or_false


def test_reveal_hides_answer_in_details():
    w = reveal("Why?", "Because.")
    assert w.kind == "reveal"
    html = w._repr_html_()
    assert re.search(r"<details[^>]*>\s*<summary[^>]*>[^<]+</summary>.*Because\.", html, re.S)
    # the question sits outside the <details>, the answer inside
    assert html.index("Why?") < html.index("<details")
    assert html.index("Because.") > html.index("<details")


def test_true_or_false_commit_then_verdict():
    html = true_or_false("BERT generates left to right.", False, "It fills blanks.").html
    choices = re.findall(r'<details class="recall-choice" data-choice="(\w+)" data-correct="(\w+)"', html)
    assert choices == [("true", "false"), ("false", "true")]
    true_part, false_part = html.split('data-choice="false"')
    assert "Not quite: it is false." in true_part and "Right: it is false." in false_part
    assert html.count("It fills blanks.") == 2  # the justification follows either choice


def test_spot_the_error():
    html = spot_the_error("Logs make numbers bigger.", "Logs turn products into sums.").html
    assert "Spot the error" in html and "Logs turn products into sums." in html


@pytest.mark.parametrize("evil", ["<script>alert(1)</script>", '<img src=x onerror="alert(1)">'])
def test_text_is_escaped(evil):
    for w in (reveal(evil, evil), true_or_false(evil, True, evil), spot_the_error(evil, evil)):
        assert "<script" not in w.html and "<img" not in w.html
        assert "&lt;script&gt;" in w.html or "&lt;img" in w.html


def test_math_becomes_mathjax_delimiters_and_stays_escaped():
    html = reveal("Is $x_i < y$ and $$\\sum_i a_i$$?", "Yes.").html
    assert r"\(x_i &lt; y\)" in html
    assert r"\[\sum_i a_i\]" in html
    assert "$" not in html
    assert "tex2jax_process" in html  # the site's MathJax only typesets marked HTML


def test_code_spans():
    assert "<code>[MASK]</code>" in reveal("What is `[MASK]`?", "A token.").html


def test_output_is_stable_and_has_no_script():
    a = true_or_false("Same?", True, "Yes.", item="TF4").html
    b = true_or_false("Same?", True, "Yes.", item="TF4").html
    assert a == b
    assert "<script" not in a and "onclick" not in a and " id=" not in a
    assert 'data-item="TF4"' in a


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: reveal("", "a"), "question is empty"),
        (lambda: reveal("   ", "a"), "question is empty"),
        (lambda: reveal("q", ""), "answer is empty"),
        (lambda: true_or_false("s", "false", "why"), "answer must be True or False"),
        (lambda: true_or_false("s", 1, "why"), "answer must be True or False"),
        (lambda: true_or_false("s", None, "why"), "answer must be True or False"),
        (lambda: spot_the_error("s", "  "), "error is empty"),
        (lambda: reveal(3, "a"), "question must be a string"),
        (lambda: reveal("q", "a", item="has space"), "item must be a short id"),
    ],
)
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_repr_is_short():
    assert repr(reveal("q", "a")) == "Recall(kind='reveal')"
    assert recall.render_text("a < b") == "a &lt; b"


def test_emphasis_and_code_do_not_leak_into_each_other():
    out = recall.render_text("a *word*, **strong**, `a*b*c` and 2 * 3 * 4")
    assert "<em>word</em>" in out and "<strong>strong</strong>" in out
    assert "<code>a*b*c</code>" in out and "2 * 3 * 4" in out


# --- items as data: mlm_lib/book/assets/recall/*.yml ------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ITEMS = recall.load_items()

OPTIONS = [
    {"text": "Over the masked positions", "correct": False, "why": "Then each column would sum to 1."},
    {"text": "Over the vocabulary $V$", "correct": True, "why": "One distribution per position."},
    {"text": "Over `[CLS]` & <friends>", "correct": False, "why": "No such thing."},
]


def _write(directory: Path, name: str, items: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(yaml.safe_dump(items, sort_keys=False), encoding="utf-8")
    return directory


def test_there_is_one_data_file_per_chapter_and_one_for_the_gym():
    files = sorted(p.name for p in recall.ITEMS_DIR.glob("*.yml"))
    assert files == sorted([nb.with_suffix(".yml").name for nb in NOTEBOOKS] + ["gym.yml", "pages.yml"])


def test_prose_pages_show_items_by_id_only():
    """A prose page names its items (```{recall} I1```); their text lives in pages.yml, never in the
    page's source, where it would sit in plain view of anyone reading the Markdown."""
    pages = sorted((ROOT / "book").glob("*.md"))
    inline = [p.name for p in pages if re.search(r"```\{recall\}[^\n]*\n(?!```)", p.read_text())]
    assert not inline, f"recall items written inline in {inline}: move them to pages.yml"
    shown = {m for p in pages for m in re.findall(r"```\{recall\} (\S+)", p.read_text())}
    assert shown == {i.id for i in ITEMS.values() if i.file == "pages.yml"}


@pytest.mark.parametrize("item_id", sorted(ITEMS))
def test_every_item_is_well_formed(item_id):
    item = ITEMS[item_id]
    recall.check(item)
    html = recall.recall(item_id, **{name: 0.5 for name in item.placeholders()}).html
    assert f'data-item="{item_id}"' in html


def test_gym_items_are_the_gym_wording_of_a_chapter_item():
    for item in ITEMS.values():
        if item.file == "gym.yml":
            assert item.id.endswith(".gym"), f"{item.id}: the gym's own items are named <bank id>.gym"
            assert item.id[: -len(".gym")] in ITEMS, f"{item.id}: no chapter item {item.id[:-4]}"
        else:
            assert not item.id.endswith(".gym"), f"{item.id} belongs in gym.yml"


def test_a_gym_item_is_labelled_with_its_bank_id():
    html = reveal("q", "a", item="TF9.gym").html
    assert 'data-item="TF9.gym"' in html and "Recall · TF9</span>" in html


def test_an_id_defined_twice_is_an_error(tmp_path):
    item = {"kind": "reveal", "question": "q", "answer": "a"}
    _write(tmp_path, "01_a.yml", {"TF9": item})
    _write(tmp_path, "02_b.yml", {"TF9": item})
    with pytest.raises(ValueError, match=r"TF9 is defined twice: in 01_a.yml and in 02_b.yml"):
        recall.load_items(tmp_path)


def test_recall_gives_the_same_html_as_the_widget_functions():
    tf9 = ITEMS["TF9"].fields
    assert recall.recall("TF9").html == true_or_false(tf9["statement"], tf9["answer"], tf9["why"], item="TF9").html
    s1 = ITEMS["S1"].fields
    assert recall.recall("S1").html == reveal(s1["question"], s1["answer"], item="S1").html


def test_each_kind_has_one_name_in_the_data_and_the_html():
    tf9 = ITEMS["TF9"]
    html = recall.recall("TF9").html
    assert f'class="recall recall-{tf9.kind} ' in html
    assert f'data-recall="{tf9.kind}" data-choices="true"' in html
    assert recall.TRUE_OR_FALSE.widget(tf9.fields["statement"], tf9.fields["answer"], tf9.fields["why"],
                                       item="TF9").html == html
    assert 'data-recall="reveal" data-choices="false"' in reveal("q", "a").html
    assert set(recall.KINDS) == {"reveal", "true-or-false", "spot-the-error", "multiple-choice"}


def test_unknown_id_names_the_nearest_ids():
    with pytest.raises(ValueError, match=r"no recall item 'TF99'.*did you mean .*TF9"):
        recall.recall("TF99")


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"kind": "reveal", "question": "q"}, r"bad.yml: item X1: field 'answer' is missing"),
        ({"kind": "riddle", "question": "q", "answer": "a"}, r"bad.yml: item X1: field 'kind' is 'riddle'"),
        ({"kind": "true-or-false", "statement": "s", "answer": "no", "why": "w"},
         r"bad.yml: item X1: answer must be True or False"),
        ({"kind": "spot-the-error", "statement": "s", "error": ""}, r"bad.yml: item X1: error is empty"),
        ({"kind": "reveal", "question": "q", "answer": "a", "why": "w"}, r"bad.yml: item X1: unknown field"),
        ({"kind": "multiple-choice", "question": "q",
          "options": [{"text": "a", "correct": False, "why": "w"}, {"text": "b", "correct": False, "why": "w"}]},
         r"bad.yml: item X1: no option is correct"),
        ({"kind": "multiple-choice", "question": "q", "options": [{"text": "a", "correct": True, "why": "w"}]},
         r"bad.yml: item X1: options must be a list of at least two"),
        ({"kind": "multiple-choice", "question": "q",
          "options": [{"text": "a", "correct": True}, {"text": "b", "correct": False, "why": "w"}]},
         r"bad.yml: item X1: option 1 why must be a string"),
        ({"kind": "multiple-choice", "question": "q",
          "options": [{"text": "a", "correct": "yes", "why": "w"}, {"text": "b", "correct": False, "why": "w"}]},
         r"bad.yml: item X1: option 1 correct must be true or false"),
    ],
)
def test_a_malformed_item_names_its_file_and_field(tmp_path, monkeypatch, fields, message):
    monkeypatch.setattr(recall, "ITEMS_DIR", _write(tmp_path, "bad.yml", {"X1": fields}))
    with pytest.raises(ValueError, match=message):
        recall.recall("X1")


def test_placeholders_take_the_chapters_numbers(tmp_path, monkeypatch):
    item = {"kind": "reveal", "question": "How good, with $x_{i}$?", "answer": "{{acc:.0%}} over {{n}} seeds."}
    monkeypatch.setattr(recall, "ITEMS_DIR", _write(tmp_path, "05_x.yml", {"N5.1": item}))
    assert "91% over 5 seeds." in recall.recall("N5.1", acc=0.912, n=5).html
    with pytest.raises(ValueError, match=r"05_x.yml: item N5.1 needs the values \['acc', 'n'\]; missing \['n'\]"):
        recall.recall("N5.1", acc=0.9)
    with pytest.raises(ValueError, match=r"not used \['m'\]"):
        recall.recall("N5.1", acc=0.9, n=5, m=1)


def test_an_edited_file_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(recall, "ITEMS_DIR", _write(tmp_path, "a.yml", {"A1": {"kind": "reveal", "question": "q", "answer": "one"}}))
    assert "one" in recall.recall("A1").html
    path = tmp_path / "a.yml"
    path.write_text(path.read_text().replace("one", "two"))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert "two" in recall.recall("A1").html


# --- multiple choice ---------------------------------------------------------------------------

def test_multiple_choice_markup():
    html = multiple_choice("Over what does the softmax run?", OPTIONS, item="W9").html
    assert 'data-recall="multiple-choice" data-choices="true"' in html and 'data-item="W9"' in html
    choices = re.findall(r'<details class="recall-choice" data-choice="(\d+)" data-correct="(\w+)"', html)
    assert choices == [("0", "false"), ("1", "true"), ("2", "false")]
    tags = re.findall(r"<details([^>]*)>", html)
    assert len(tags) == 3 and not any("open" in re.sub(r'"[^"]*"', "", t) for t in tags)  # all closed
    parts = html.split('<details class="recall-choice"')[1:]
    assert "Not quite." in parts[0] and "Then each column would sum to 1." in parts[0]
    assert "Right." in parts[1] and r"\(V\)" in parts[1]
    assert "<code>[CLS]</code> &amp; &lt;friends&gt;" in parts[2] and "<friends>" not in html
    assert "<script" not in html and "onclick" not in html
    # the summary is the option's text, the body its verdict and why
    assert re.search(r"<summary[^>]*>Over the vocabulary \\\(V\\\)</summary>", parts[1])


def test_multiple_choice_may_have_several_right_options():
    two = [dict(o, correct=True) for o in OPTIONS[:2]] + OPTIONS[2:]
    html = multiple_choice("q", two).html
    assert html.count('data-correct="true"') == 2 and html.count('data-correct="false"') == 1


def test_multiple_choice_is_stable():
    assert multiple_choice("q", OPTIONS, item="W9").html == multiple_choice("q", OPTIONS, item="W9").html


# --- no chapter gives the answer away in its source ----------------------------------------------

def _norm(text: str) -> str:
    return " ".join(text.split())


def _answer_texts(item: recall.Item) -> list[str]:
    """What the reader must not see before committing: answers, whys, errors, option whys (split
    at run-time placeholders; fragments too short to be telling are left out)."""
    f = item.fields
    texts = [f.get("why"), f.get("error"), f.get("answer") if isinstance(f.get("answer"), str) else None]
    texts += [o.get("why") for o in f.get("options") or [] if isinstance(o, dict)]
    out = []
    for text in filter(None, texts):
        out += [_norm(part) for part in re.split(r"\{\{[^{}]*\}\}", text) if len(_norm(part)) >= 20]
    return out


def _visible_texts(nb: dict) -> list[str]:
    """Every cell's source as the reader sees it, and each code cell's string constants with
    Python's escapes and implicit concatenation undone (how a pasted answer would sit there)."""
    out = []
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        out.append(_norm(src))
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append(_norm(node.value))
            elif isinstance(node, ast.JoinedStr):
                out.append(_norm("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)))
    return out


def _leaks(nb: dict) -> list[str]:
    visible = "\n".join(_visible_texts(nb))
    return [f"{item.id}: {text[:60]}..." for item in ITEMS.values() for text in _answer_texts(item)
            if text in visible]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_chapter_source_contains_an_answer(notebook):
    assert _leaks(json.loads(notebook.read_text())) == []


def test_an_answer_pasted_back_into_a_chapter_is_found():
    nb = json.loads(NOTEBOOKS[2].read_text())
    why = ITEMS["TF9"].fields["why"]
    words = why.split(" ")
    half = len(words) // 2
    pasted = ('true_or_false(\n    "s",\n    False,\n    %s\n    %s,\n)'
              % (json.dumps(" ".join(words[:half]) + " "), json.dumps(" ".join(words[half:]))))
    nb["cells"].append({"cell_type": "code", "source": pasted, "metadata": {}, "outputs": []})
    assert any(leak.startswith("TF9:") for leak in _leaks(nb))


# --- the chapters show their items with recall("ID") --------------------------------------------

_RECALL_CALL = re.compile(r"""\brecall\(\s*["']([^"']+)["']""")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_recall_cells(notebook):
    """Each item of a chapter's data file is shown once, in that chapter, by a cell whose input
    the site removes and JupyterLab folds; no widget is written inline any more."""
    nb = json.loads(notebook.read_text())
    shown = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        assert not re.search(r"\b(reveal|true_or_false|spot_the_error|multiple_choice)\(", src), \
            f"an inline recall widget in {notebook.name}: write it in {notebook.stem}.yml and call recall()"
        ids = _RECALL_CALL.findall(src)
        if not ids:
            continue
        assert "remove-input" in cell["metadata"].get("tags", []), f"{ids}: tag the cell remove-input"
        assert cell["metadata"].get("jupyter", {}).get("source_hidden") is True, f"{ids}: hide the cell's source"
        shown += ids
    mine = sorted(i for i, item in ITEMS.items() if item.file == notebook.with_suffix(".yml").name)
    assert sorted(shown) == mine, f"{notebook.name} shows {sorted(shown)}; its data file has {mine}"


# --- the Anki export ---------------------------------------------------------------------------

def _rows(deck: str) -> list[list[str]]:
    lines = deck.splitlines()
    assert lines[:3] == ["#separator:tab", "#html:true", "#tags column:3"]
    return list(csv.reader(lines[3:], delimiter="\t"))


def test_anki_deck_has_one_note_per_item_with_three_fields():
    rows = _rows(recall_anki.deck(ITEMS, recall_directive.coverage()))
    assert len(rows) == len(ITEMS)
    assert all(len(r) == 3 and r[0] and r[1] for r in rows)
    tags = [set(r[2].split()) for r in rows]
    assert all(any(re.fullmatch(r"chapter-\d\d|pages", t) for t in ts) for ts in tags)
    assert all(ts & set(recall.KINDS) for ts in tags)


def test_anki_note_of_every_kind_is_tagged_with_its_name():
    fields = {"question": "q", "answer": "a", "statement": "s", "why": "w", "error": "e", "options": OPTIONS}
    for kind in recall.KINDS.values():
        values = {f: fields[f] for f in kind.fields}
        if kind is recall.TRUE_OR_FALSE:
            values["answer"] = True
        item = recall.Item("X1", "03_x.yml", {"kind": kind.name, **values})
        front, back, tags = recall_anki.note(item, {})
        assert front and back and tags == f"chapter-03 {kind.name}"


def test_anki_note_of_a_multiple_choice_item_lists_its_options():
    item = recall.Item("W9", "08_x.yml", {"kind": "multiple-choice", "question": 'Say "why"?', "options": OPTIONS})
    front, back, tags = recall_anki.note(item, {})
    assert "A. Over the masked positions" in front and "C. Over <code>[CLS]</code> &amp; &lt;friends&gt;" in front
    assert back.startswith("<b>B.</b>") and tags == "chapter-08 multiple-choice"
    rows = _rows(recall_anki.deck({"W9": item}, {}))
    assert rows[0][0].startswith('Say "why"?')  # a quote survives the round trip


def test_anki_note_takes_the_numbers_the_chapter_printed():
    item = recall.Item("N5.1", "05_x.yml", {"kind": "reveal", "question": "How good?",
                                            "answer": "{{acc:.0%}} over {{n}} seeds, $p < {{acc:.0%}}$."})
    printed = recall.render(item, acc=0.912, n=5).html
    values = recall_anki.stored_values(item, ["<div>other</div>", printed])
    assert values == {"acc": "91%", "n": "5"}
    assert "91% over 5 seeds" in recall_anki.note(item, {}, values)[1]
    # an output older than the item's text gives nothing, and the note elides the numbers
    assert recall_anki.stored_values(item, [printed.replace("seeds", "runs")]) == {}
    assert "… over … seeds" in recall_anki.note(item, {})[1]


def test_gym_links_keep_code_spans_as_written():
    text = recall_directive._link_text("Chapter 6, Corrupting the input: 100% `[MASK]` versus [a] b")
    assert text == "Chapter 6, Corrupting the input: 100% `[MASK]` versus \\[a\\] b"


def test_the_escape_check_sees_a_planted_backslash():
    assert re.findall(r"\\[\[\]]", re.sub(r"<[^>]+>", "", "<a>100% <code>\\[MASK\\]</code></a>"))


def test_worked_numbers_are_checked():
    fields = {"kind": "reveal", "question": "What is $-\\log 0.5$?", "answer": "0.693 nats."}
    recall.check(recall.Item("Z1", "z.yml", {**fields, "worked": {"0.693": "-math.log(0.5)"}}))
    with pytest.raises(ValueError, match=r"z.yml: item Z2: worked number '0.693' is 1.09861"):
        recall.check(recall.Item("Z2", "z.yml", {**fields, "worked": {"0.693": "math.log(3)"}}))
    with pytest.raises(ValueError, match="does not evaluate"):
        recall.check(recall.Item("Z3", "z.yml", {**fields, "worked": {"0.693": "open('x')"}}))
    assert recall.rounds_to(0.85, "85%") and not recall.rounds_to(0.86, "85%")


def test_a_chapter_being_stamped_reads_only_its_own_items(monkeypatch):
    """``scripts/execute_notebooks.py`` names the chapter (``CHAPTER_ENV``): its items come from its
    own file, without reading the others, so its stamp covers that file alone; an item of another
    file is still found, by reading them all."""
    monkeypatch.setenv(recall.CHAPTER_ENV, "03_the_log")
    everything = recall.load_items
    monkeypatch.setattr(recall, "load_items", lambda *a: pytest.fail("read every item file"))
    assert "data-recall" in recall.recall("P3.1")._repr_html_()
    monkeypatch.setattr(recall, "load_items", everything)
    assert "data-recall" in recall.recall("P4.1")._repr_html_()
