"""notebooks/conftest.py: nbval accepts an explorer whose numbers moved by one rounding step, and
nothing more (other CPUs sum in another order; a value on a rounding edge then flips)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import numpy as np
import pytest

from attnlib import viz

pytest.importorskip("nbval")
_spec = importlib.util.spec_from_file_location(
    "nb_conftest", Path(__file__).resolve().parent.parent / "notebooks" / "conftest.py")
nb_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nb_conftest)

TOKENS = ["a", "b", "c"]


def output(data, tokens=TOKENS, title="t"):
    """A display_data output as nbval hands it over (a NotebookNode: attribute access too)."""
    html = viz.explorer(np.asarray(data, dtype=float), tokens, title=title, digits=3).to_html()
    return nbformat.from_dict({"output_type": "display_data",
                               "data": {"text/html": html, "text/plain": "E"}, "metadata": {}})


BASE = np.array([[0.2, 0.3, 0.5], [0.1235, 0.4, 0.4765], [1.0, 0.0, 0.0]])


def aligned(test, ref) -> bool:
    out = nb_conftest._align([test], [ref])[0]
    assert out.output_type == "display_data"  # still a NotebookNode
    return out["data"]["text/html"] == ref["data"]["text/html"]


def test_one_rounding_step_is_accepted():
    flipped = BASE.copy()
    flipped[1, 0] = 0.12349  # rounds to 0.123 instead of 0.124 (BASE's 0.1235 rounds up)
    ref, test = output(BASE), output(flipped)
    assert ref["data"]["text/html"] != test["data"]["text/html"]  # the bytes differ
    assert aligned(test, ref)


@pytest.mark.parametrize("change", ["two_steps", "tokens", "title", "shape"])
def test_anything_more_still_fails(change):
    ref = output(BASE)
    if change == "two_steps":
        moved = BASE.copy()
        moved[0, 0] += 0.002
        test = output(moved)
    elif change == "tokens":
        test = output(BASE, tokens=["a", "b", "d"])
    elif change == "title":
        test = output(BASE, title="other")
    else:
        test = output(BASE[:2, :2], tokens=["a", "b"])
    assert not aligned(test, ref)


def test_other_outputs_pass_through_unchanged():
    text = {"output_type": "stream", "name": "stdout", "text": "loss 2.10\n"}
    other = {"output_type": "stream", "name": "stdout", "text": "loss 2.11\n"}
    assert nb_conftest._align([text], [other]) == [text]


def test_sanitizer_equates_tiny_gaps_and_nothing_larger():
    """tests/nbval_sanitize.cfg [tiny_gaps]: gaps printed with :.0e below 1e-5 read the same on
    every CPU; a gap of 1e-5 or more, and any other number, is compared as printed."""
    import configparser
    import re
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parent / "nbval_sanitize.cfg")
    rx = re.compile(cfg["tiny_gaps"]["regex"])
    clean = lambda s: rx.sub(cfg["tiny_gaps"]["replace"], s)  # noqa: E731
    assert clean("largest gap 6e-08") == clean("largest gap 3e-06") == clean("largest gap 0e+00")
    for other in ("largest gap 1e-05", "largest gap 2e-03", "loss 2.5e-07", "x 12e-07", "0.00000"):
        assert clean(other) == other
    assert clean("largest gap 6e-08") != clean("largest gap 1e-05")
