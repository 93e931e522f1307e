"""The 🤗 cells of chapters 12 and 13 run unchanged on another checkpoint and a reader's files.

The pages say their Trainer cells are what a project writes: one argument names the checkpoint
and one call names the data. Here they are given the book's second model exported as a 🤗 folder
(6 layers of 384 on BERT's 30,522-piece vocabulary, an MLM head on top) and small CoNLL and SQuAD
files with tags the book never uses; only those lines change, each found exactly once, and every cell a reader runs (solutions included) must run. An encoder saved without
its MLM head fine-tunes too: a tagger and a reader need the encoder only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from mlm_lib.book.second_model import regrown_model, regrown_tokenizer
from mlm_lib.book.wiki_links import SQUAD_FILES, TAGGING_FILES, conll_text, read_conll
from mlm_lib.hf import save_hf_bert

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "notebooks" / "13_with_transformers.ipynb"
CHAPTER_12 = ROOT / "notebooks" / "12_fine_tuning.ipynb"
TRAINER_SECTION = "## The same fine-tuning with Trainer"  # chapter 12's 🤗 cells
# What chapter 12's Trainer cells take from the cells above them: a reader's sentences in four
# classes, the seeds, and mlm_lib's accuracies to compare with.
CHAPTER_12_PRELUDE = """
from mlm_lib.finetune import LabelledSet
from mlm_lib.stats import seed_interval

SEEDS = range(2)
texts = {texts!r}
train_set = LabelledSet(texts[:32], [k % 4 for k in range(32)], ["a", "b", "c", "d"])
test_set = LabelledSet(texts[32:], [k % 4 for k in range(len(texts) - 32)], ["a", "b", "c", "d"])
final = {{"pretrained encoder": [0.5, 0.6]}}
"""
# The lines a reader changes, as the page writes them: each must be on the page exactly once.
SWAPS = {
    "CHECKPOINT = book_hf_folder()": "CHECKPOINT = {checkpoint!r}",
    "tags = load_link_tagging()": "tags = load_link_tagging({tagging!r})",
    "questions = load_link_questions()": "questions = load_link_questions({squad!r})",
}
RUN_TIMEOUT_S = 600


def page_program(page: Path = PAGE, **values: object) -> str:
    """The page's code cells as one program (not the install cell, not the recall widgets), with
    the reader's lines swapped."""
    cells = [c for c in nbformat.read(page, as_version=4).cells if c.cell_type == "code"
             and "remove-cell" not in c.metadata.get("tags", []) and "recall(" not in c.source]
    program = "\n\n".join(c.source for c in cells)
    for line, swapped in SWAPS.items():
        found = sum(1 for row in program.splitlines() if row.split("#")[0].strip() == line)
        assert found == 1, f"the page writes `{line}` {found} times, not once"
        program = program.replace(line, swapped.format(**values))
    return program


def section_program(path: Path, heading: str) -> str:
    """The code cells of one section of a chapter (from its heading to the next ``## ``)."""
    cells, inside = [], False
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            inside = cell.source.startswith(heading)
        elif inside and cell.cell_type == "code":
            cells.append(cell.source)
    assert cells, f"{path.name} has no code under {heading!r}"
    return "\n\n".join(cells)


def test_a_page_without_a_readers_line_is_refused(tmp_path):
    program = page_program(checkpoint="x", tagging={"train": "a"}, squad={"train": "b"})
    assert "CHECKPOINT = 'x'" in program and "load_link_tagging({'train': 'a'})" in program
    page = nbformat.read(PAGE, as_version=4)
    for cell in page.cells:  # a page that names its checkpoint another way
        cell.source = cell.source.replace("CHECKPOINT = book_hf_folder()", "CHECKPOINT = BOOK")
    planted = tmp_path / "planted.ipynb"
    nbformat.write(page, planted)
    with pytest.raises(AssertionError, match=r"CHECKPOINT = book_hf_folder\(\)` 0 times"):
        page_program(planted, checkpoint="x", tagging={}, squad={})


@pytest.fixture(scope="module")
def readers_files(tmp_path_factory) -> dict[str, dict[str, str]]:
    """30 training and 10 test sentences tagged PLACE (not LINK), 24 and 8 questions."""
    folder = tmp_path_factory.mktemp("own-files")
    sentences = [(w, [t.replace("LINK", "PLACE") for t in ts])
                 for w, ts in read_conll(TAGGING_FILES["test"])]
    tagging = {}
    for split, rows in (("train", sentences[:30]), ("test", sentences[30:40])):
        (folder / f"{split}.conll").write_text(conll_text(rows), encoding="utf-8")
        tagging[split] = str(folder / f"{split}.conll")
    articles = json.loads(SQUAD_FILES["test"].read_text(encoding="utf-8"))["data"]
    qas = [(a["title"], p["context"], q) for a in articles for p in a["paragraphs"] for q in p["qas"]]
    squad = {}
    for split, rows in (("train", qas[:24]), ("test", qas[24:32])):
        data = [{"title": t, "paragraphs": [{"context": c, "qas": [q]}]} for t, c, q in rows]
        (folder / f"{split}.json").write_text(json.dumps({"data": data}), encoding="utf-8")
        squad[split] = str(folder / f"{split}.json")
    return {"tagging": tagging, "squad": squad}


def _run(program: str, tmp_path: Path) -> str:
    script = tmp_path / "page.py"
    script.write_text(program, encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# About 45 s a case on two cores (the second model is 22M parameters): `make test-slow` runs them.
@pytest.mark.slow
@pytest.mark.parametrize("head", ["with its MLM head", "encoder only"])
def test_the_pages_cells_run_on_the_second_model_and_a_readers_files(head, readers_files, tmp_path):
    model = regrown_model()
    checkpoint = tmp_path / "second-model"
    save_hf_bert(model if head == "with its MLM head" else model.bert, checkpoint,
                 tokenizer=regrown_tokenizer())
    out = _run(page_program(checkpoint=str(checkpoint), **readers_files), tmp_path)
    assert "tagging_f1" in out and "span_exact_match" in out and "span_f1" in out
    assert "24 questions" in out  # the reader's questions, not the book's 480
    assert "every window minus answering windows, paired by seed" in out
    assert "first:" in out and "stride=0:" in out  # the solutions ran too


@pytest.mark.slow
def test_chapter_12s_trainer_cells_run_on_the_second_model(tmp_path):
    checkpoint = tmp_path / "second-model"
    save_hf_bert(regrown_model(), checkpoint, tokenizer=regrown_tokenizer())
    texts = [" ".join(words) for words, _ in read_conll(TAGGING_FILES["test"])[:48]]
    program = section_program(CHAPTER_12, TRAINER_SECTION)
    line = "CHECKPOINT = book_hf_folder()"
    assert program.count(line) == 1, f"chapter 12's Trainer cells write `{line}` not once"
    program = CHAPTER_12_PRELUDE.format(texts=texts) + program.replace(line, f"CHECKPOINT = {str(checkpoint)!r}")
    out = _run(program, tmp_path)
    assert "Trainer's mean inside the mlm_lib runs' interval:" in out
