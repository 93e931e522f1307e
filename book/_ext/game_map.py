"""``{game-map}`` in a page: the map of the game BERT plays, the drawing chapter 0 shows
(``mlm_lib.book.game_map.game_map``), with its links pointing from ``book/`` to the chapters' pages.

One drawing, one source: the landing page and the whole formula show the figure chapter 0 draws,
not a copy of it that could drift.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from mlm_lib.book.game_map import game_map


class GameMap(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        svg = game_map(href=lambda stem: f"../notebooks/{stem}.html")
        return [nodes.raw("", f"<div class='game-map'>{svg}</div>", format="html")]


def setup(app):  # noqa: D103 - Sphinx entry point
    app.add_directive("game-map", GameMap)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
