"""The book's table of contents, read once for the tests that check pages against it."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_order() -> list[str]:
    """The files of _toc.yml's parts (the root page not included), in the order the book shows them."""
    order: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                order.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    walk(toc.get("parts", toc.get("chapters", [])))
    return order


def toc_root() -> str:
    return yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]
