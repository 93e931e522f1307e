"""Nothing escapes the build: every notebook and page in the book's folders is listed in _toc.yml,
and every entry of _toc.yml exists."""

from pathlib import Path

import yaml

from toc import toc_order, toc_root

ROOT = Path(__file__).resolve().parents[2]


def _toc_files() -> set[str]:
    return {str(Path(f).with_suffix("")) for f in [toc_root(), *toc_order()]}


def _book_sources() -> set[str]:
    found = set()
    for folder in ("book", "notebooks"):
        for path in (ROOT / folder).rglob("*"):
            if ".ipynb_checkpoints" in path.parts or "vendor" in path.parts or "_ext" in path.parts:
                continue
            if path.suffix in {".ipynb", ".md"}:
                found.add(str(path.relative_to(ROOT).with_suffix("")))
    return found


def test_every_page_is_in_the_toc():
    missing = _book_sources() - _toc_files()
    assert not missing, f"pages or notebooks not listed in _toc.yml (never built or tested): {sorted(missing)}"


def test_every_toc_entry_exists():
    absent = [f for f in _toc_files() if not any((ROOT / f).with_suffix(s).exists() for s in (".md", ".ipynb"))]
    assert not absent, f"_toc.yml lists files that do not exist: {absent}"


def test_no_stray_notebooks_outside_the_book():
    stray = [
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*.ipynb")
        if not {".venv", "node_modules", "_build", ".ipynb_checkpoints"} & set(p.parts)
        and p.parts[len(ROOT.parts)] not in {"notebooks", "book"}
    ]
    assert not stray, f"notebooks outside notebooks/ and book/ are neither built nor tested: {stray}"


def test_the_map_of_the_book_places_every_chapter_of_the_toc():
    """Chapter 0's map of the game (mlm_lib.book.game_map.GAME_STAGES, AFTER_GAME) names only
    chapters of the toc, and every chapter after 0 at least once."""
    from mlm_lib.book.game_map import AFTER_GAME, GAME_STAGES

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = {Path(c["file"]).name for part in toc["parts"] for c in part["chapters"]
                if c["file"].startswith("notebooks/") and Path(c["file"]).name[:2] != "00"}
    drawn = {stem for *_, stems in GAME_STAGES for stem in stems} | {s for _, stems in AFTER_GAME for s in stems}
    assert drawn <= chapters, f"the map names chapters the toc lacks: {sorted(drawn - chapters)}"
    assert chapters <= drawn, f"chapters missing from the map: {sorted(chapters - drawn)}"
