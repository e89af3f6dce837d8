"""The lesson in view, the audit beside it (issue 48), held for every chapter.

Per chapter: at most 3,200 words of prose, 320 non-blank code lines in view (cells the book shows),
15 assert lines in view and 65 cells. A check cell (first line ``# Check``) is removed from the
page (tag ``remove-cell``) and folded in JupyterLab (``jupyter.source_hidden``), so nbval still runs
it. The numbers are counted as CONTRIBUTING.md describes. A section (from one ``##`` or ``###``
heading to the next) shows at most one cell with an assert: its one decisive check.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

CHAPTERS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
HIDDEN = {"remove-cell", "remove-input", "hide-input", "hide-cell"}
ASSERT = re.compile(r"^\s*assert\b|assert_close\(|assert_equal\(")
LIMITS = {"words": 3200, "code lines in view": 320, "asserts in view": 15, "cells": 65}
# an address is not prose: a diagram embedded for Colab (scripts/embed_figures.py) is
# ``![alt](data:image/png;base64,...)``, counted as its alt text, as its path was
IMAGE_URI = re.compile(r"\]\((?:data:[^)]*|[^)\s]+)\)")


def counts(nb: dict) -> dict[str, int]:
    out = dict.fromkeys(LIMITS, 0)
    out["cells"] = len(nb["cells"])
    for c in nb["cells"]:
        src = "".join(c["source"])
        tags = set(c.get("metadata", {}).get("tags", []))
        if c["cell_type"] == "markdown":
            out["words"] += len(IMAGE_URI.sub("]", src).split())
        elif c["cell_type"] == "code" and not tags & HIDDEN:
            lines = [line for line in src.splitlines() if line.strip()]
            out["code lines in view"] += len(lines)
            out["asserts in view"] += sum(1 for line in lines if ASSERT.search(line))
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_within_the_limits(path: Path) -> None:
    got = counts(json.loads(path.read_text(encoding="utf-8")))
    over = {k: f"{v} > {LIMITS[k]}" for k, v in got.items() if v > LIMITS[k]}
    assert not over, f"{path.name}: {over}"


HEADING = re.compile(r"^#{2,3} +(.+)$", re.M)


def checks_in_view(nb: dict) -> dict[str, list[int]]:
    """Per section ("cell N: its heading", or "top"), the indices of the shown code cells with an
    assert; a ``###`` subsection is a section of its own."""
    out: dict[str, list[int]] = {}
    section = "top"
    for i, c in enumerate(nb["cells"]):
        src = "".join(c["source"])
        if c["cell_type"] == "markdown" and HEADING.search(src):
            section = f"cell {i}: {HEADING.findall(src)[-1].strip()}"
        tags = set(c.get("metadata", {}).get("tags", []))
        if c["cell_type"] == "code" and not tags & HIDDEN \
                and any(ASSERT.search(line) for line in src.splitlines()):
            out.setdefault(section, []).append(i)
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_one_check_in_view_per_section(path: Path) -> None:
    got = checks_in_view(json.loads(path.read_text(encoding="utf-8")))
    over = {k: v for k, v in got.items() if len(v) > 1}
    assert not over, (f"{path.name}: sections showing more than one assert-bearing cell "
                      f"(move the others into check cells): {over}")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_check_cells_are_hidden_but_run(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    bad = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] == "code" and "".join(c["source"]).startswith("# Check"):
            meta = c.get("metadata", {})
            if "remove-cell" not in meta.get("tags", []) \
                    or not meta.get("jupyter", {}).get("source_hidden"):
                bad.append(i)
    assert not bad, f"{path.name}: check cells not hidden (remove-cell, source_hidden): {bad}"


def test_the_counter_counts() -> None:
    """What the limits count, on a made-up notebook (so the test above can fail)."""
    nb = {"cells": [
        {"cell_type": "markdown", "source": ["one two three"], "metadata": {}},
        {"cell_type": "code", "source": ["x = 1\n", "\n", "assert x == 1\n"], "metadata": {}},
        {"cell_type": "code", "source": ["# Check: x\n", "assert x\n"],
         "metadata": {"tags": ["remove-cell"]}},
    ]}
    assert counts(nb) == {"words": 3, "code lines in view": 2, "asserts in view": 1, "cells": 3}
    # a diagram's address, a path or a data URI whatever its length, counts no word
    for uri in ("../book/figures/d.svg", "data:image/png;base64," + "iVBOR\nw0KGgo" * 9999):
        image = {"cell_type": "markdown", "source": [f"![one two]({uri})\n*three.*"],
                 "metadata": {}}
        assert counts({"cells": [image]})["words"] == 3, uri[:30]


def test_the_section_counter_counts() -> None:
    """Two shown asserts in one section are found; a check cell, or a heading between them, is
    not a second check in view (so the test above can fail)."""
    md = lambda s: {"cell_type": "markdown", "source": [s], "metadata": {}}
    code = lambda s, tags=(): {"cell_type": "code", "source": [s],
                               "metadata": {"tags": list(tags)}}
    nb = {"cells": [md("## A"), code("assert 1"), code("x = 1\nassert x"),
                    code("# Check: x\nassert x", ["remove-cell"]),
                    md("text\n\n### B"), code("torch.testing.assert_close(x, x)"),
                    md("no heading"), code("y = 2")]}
    assert checks_in_view(nb) == {"cell 0: A": [1, 2], "cell 4: B": [5]}
