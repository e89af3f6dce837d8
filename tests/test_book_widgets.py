"""Every widget a chapter shows can be drawn by the static book: its state is stored.

The html-manager in the built book draws a widget view (an output with mime type
``application/vnd.jupyter.widget-view+json``) only from the notebook's ``metadata.widgets`` state.
A view whose model is missing there (a notebook hand-saved from JupyterLab, or executed without
``store_widget_state``) renders as nothing at all, silently. So: every view's model, and every
model those reference (a VBox's children, a jslink's targets, ...), must be in the stored state.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"


def widget_views(nb: dict) -> list[tuple[int, str]]:
    """(cell index, model id) of every widget view in the stored outputs."""
    views = []
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []) or []:
            data = out.get("data", {})
            if VIEW in data:
                views.append((i, data[VIEW]["model_id"]))
    return views


def stored_state(nb: dict) -> dict:
    return nb.get("metadata", {}).get("widgets", {}).get(STATE, {}).get("state", {})


def model_refs(value) -> set[str]:
    """Model ids referenced from a widget's state ("IPY_MODEL_<id>" strings, at any depth)."""
    if isinstance(value, str):
        return {value[len("IPY_MODEL_"):]} if value.startswith("IPY_MODEL_") else set()
    if isinstance(value, dict):
        return set().union(*(model_refs(v) for v in value.values())) if value else set()
    if isinstance(value, (list, tuple)):
        return set().union(*(model_refs(v) for v in value)) if value else set()
    return set()


def missing_models(nb: dict) -> list[str]:
    """Problems, as readable strings; empty when every view can be drawn from the stored state."""
    state = stored_state(nb)
    problems, seen = [], set()
    todo = [(f"cell {i}", mid) for i, mid in widget_views(nb)]
    while todo:
        where, mid = todo.pop()
        if mid in seen:
            continue
        seen.add(mid)
        if mid not in state:
            problems.append(f"{where}: model {mid} is not in metadata.widgets")
            continue
        for ref in sorted(model_refs(state[mid].get("state", {}))):
            todo.append((f"{where} -> {mid}", ref))
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_widget_view_has_stored_state(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    problems = missing_models(nb)
    assert not problems, (f"{path.name}: {len(problems)} widget model(s) missing; re-run "
                          f"`python scripts/execute_notebooks.py notebooks/{path.name}`:\n"
                          + "\n".join(problems[:20]))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_state_is_ipywidgets_8(path):
    """The book's html-manager (1.x) reads widget state schema 2 (ipywidgets 8)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    if not widget_views(nb):
        pytest.skip("no widgets in this chapter")
    meta = nb["metadata"]["widgets"][STATE]
    assert meta.get("version_major") == 2, f"{path.name}: widget state version {meta.get('version_major')}"
    for mid, model in stored_state(nb).items():
        assert model.get("model_module") and model.get("model_name"), f"{path.name}: model {mid} incomplete"


def test_checker_catches_a_missing_model():
    """The check itself: a view with no state, and a child missing from the state, are both found."""
    child, box = "c" * 32, "b" * 32
    nb = {
        "cells": [{"cell_type": "code", "outputs": [
            {"output_type": "display_data", "data": {VIEW: {"model_id": box}}}]}],
        "metadata": {"widgets": {STATE: {"version_major": 2, "state": {
            box: {"model_module": "@jupyter-widgets/controls", "model_name": "VBoxModel",
                  "state": {"children": [f"IPY_MODEL_{child}"]}}}}}},
    }
    assert missing_models(nb) == [f"cell 0 -> {box}: model {child} is not in metadata.widgets"]
    nb["metadata"]["widgets"][STATE]["state"][child] = {"model_module": "m", "model_name": "n", "state": {}}
    assert missing_models(nb) == []
    del nb["metadata"]["widgets"]
    assert missing_models(nb) == [f"cell 0: model {box} is not in metadata.widgets"]
