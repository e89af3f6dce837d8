"""The offline assets step (scripts/vendor_assets.py) and the build checks (scripts/book_checks.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import book_checks  # noqa: E402
import vendor_assets  # noqa: E402


def test_a_tampered_tarball_is_refused(tmp_path, monkeypatch):
    name, version, filename, pin = vendor_assets.PACKAGES["mathjax"]
    (tmp_path / filename).write_bytes(b"not the real mathjax")
    monkeypatch.setenv("ATTNLIB_NPM_TARBALLS", str(tmp_path))
    monkeypatch.setattr(vendor_assets, "CACHE", tmp_path / "empty-cache")
    monkeypatch.setattr(vendor_assets.shutil, "which", lambda _: None)  # no npm to fall back on
    with pytest.raises(SystemExit, match="npm is needed"):
        vendor_assets.fetch("mathjax")
    assert vendor_assets.integrity(tmp_path / filename) != pin


def test_pins_are_sha512_of_exact_versions():
    for key, (name, version, filename, pin) in vendor_assets.PACKAGES.items():
        assert version.count(".") == 2 and not version.startswith(("^", "~")), f"{name}: exact version"
        assert filename.endswith(f"-{version}.tgz")
        assert pin.startswith("sha512-") and len(pin) == len("sha512-") + 88


def test_cached_tarballs_match_their_pins():
    cached = [(spec, vendor_assets.CACHE / spec[2]) for spec in vendor_assets.PACKAGES.values()]
    cached = [(spec, path) for spec, path in cached if path.is_file()]
    if not cached:
        pytest.skip("no tarball fetched yet (scripts/vendor_assets.py does it)")
    for (name, version, _, pin), path in cached:
        assert vendor_assets.integrity(path) == pin, f"{name}@{version}: cached tarball changed"


def test_error_outputs_are_found():
    nb = {"cells": [
        {"cell_type": "markdown", "source": "# t"},
        {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout", "text": "ok"}]},
        {"cell_type": "code", "outputs": [{"output_type": "error", "ename": "ValueError", "evalue": "bad"}]},
    ]}
    assert book_checks.error_outputs(nb) == [(2, "ValueError: bad")]
    nb["cells"].pop()
    assert book_checks.error_outputs(nb) == []


def test_shared_assets_are_kept_once_per_page():
    """The first output keeps each shared script and stylesheet; later outputs drop their copies
    and keep the rest (their payload and their own start-up script)."""
    lib, css = "window.attnlibKit = window.attnlibKit || (function(){})();", ".attnlib-x{color:red}"
    one = f"<div><style>{css}</style><script>{lib}\nstart(1);</script></div>"
    two = f"<div><style>{css}</style><script>{lib}\nstart(2);</script></div>"
    first, second, plain = book_checks.dedupe_assets([one, two, "<p>text</p>"], [lib, css])
    assert first == one and plain == "<p>text</p>"
    assert second == "<div><style></style><script>\nstart(2);</script></div>"
    # a shared file that appears twice in one block keeps its first copy there
    assert book_checks.dedupe_assets([one + two], [lib, css]) == [one + two.replace(css, "").replace(lib, "")]


def test_shared_assets_are_the_library_files_and_stylesheets():
    texts = book_checks.shared_assets()
    viz = ROOT / "attnlib" / "viz"
    for name in book_checks.LIBRARY_JS:
        body = (viz / name).read_text(encoding="utf-8")
        assert body in texts
        # a library only defines globals: nothing that starts an output (see kit.js's boot)
        assert "document.currentScript" not in body, f"{name} starts an output"
    assert (viz / "explorer.css").read_text(encoding="utf-8") in texts
    assert (viz / "explorer.js").read_text(encoding="utf-8") not in texts  # it starts its output


def test_widget_state_is_compacted_to_what_the_defaults_do_not_restore():
    layout = {"model_name": "LayoutModel", "model_module": "@jupyter-widgets/base",
              "model_module_version": "2.0.0",
              "state": {"_model_name": "LayoutModel", "_view_count": None, "width": "95%",
                        "height": None, "border_top": None}}
    slider = {"model_name": "IntSliderModel", "model_module": "@jupyter-widgets/controls",
              "model_module_version": "2.0.0",
              "state": {"_dom_classes": [], "tooltip": None, "tabbable": None, "value": 3,
                        "description": "", "layout": "IPY_MODEL_a", "handle_color": None}}
    state = {"version_major": 2, "version_minor": 0, "state": {"a": layout, "b": slider}}
    out = book_checks.compact_widget_state(state)
    assert out["version_major"] == 2
    assert out["state"]["a"]["state"] == {"_model_name": "LayoutModel", "width": "95%"}
    # other models keep their nulls (their defaults may differ), but not the widget-wide ones
    assert out["state"]["b"]["state"] == {"value": 3, "description": "", "layout": "IPY_MODEL_a",
                                          "handle_color": None}
    assert {k: m["model_name"] for k, m in out["state"].items()} == {"a": "LayoutModel",
                                                                    "b": "IntSliderModel"}
    assert state["state"]["a"]["state"]["height"] is None  # the input is left as it was


def _slider_state(link: bool = True, kind: str = "OutputModel") -> dict:
    ctl = "@jupyter-widgets/controls"
    png = {"output_type": "display_data", "data": {"image/png": "iVBORw0K", "text/plain": "<Figure>"},
           "metadata": {"image/png": {"width": 320, "height": 240}}}
    html = {"output_type": "display_data", "data": {"text/html": "<b>two</b>", "text/plain": ""},
            "metadata": {}}
    state = {
        "box": {"model_name": "VBoxModel", "model_module": ctl,
                "state": {"children": ["IPY_MODEL_sl", "IPY_MODEL_st"]}},
        "sl": {"model_name": "SelectionSliderModel", "model_module": ctl,
               "state": {"_options_labels": ["1", "2"], "index": 1, "description": "d <k>"}},
        "st": {"model_name": "StackModel", "model_module": ctl,
               "state": {"children": ["IPY_MODEL_o1", "IPY_MODEL_o2"], "selected_index": 1}},
        "o1": {"model_name": kind, "model_module": "@jupyter-widgets/output",
               "state": {"outputs": [png]}},
        "o2": {"model_name": kind, "model_module": "@jupyter-widgets/output",
               "state": {"outputs": [html]}},
    }
    if link:
        state["ln"] = {"model_name": "LinkModel", "model_module": ctl,
                       "state": {"source": ["IPY_MODEL_sl", "index"],
                                 "target": ["IPY_MODEL_st", "selected_index"]}}
    return state


def test_precomputed_slider_is_read_from_the_stored_widget_state():
    """The book draws a precomputed slider itself (PrecomputedSliders) only when the stored state
    is one: a VBox of a SelectionSlider jslinked to a Stack of Output widgets, one per option;
    any other widget (no link: the kernel moves it) keeps the widget manager."""
    parts = book_checks.precomputed_slider_parts(_slider_state(), "box")
    assert parts["labels"] == ["1", "2"] and parts["index"] == 1 and parts["description"] == "d <k>"
    assert [o[0]["data"].get("text/html") for o in parts["states"]] == [None, "<b>two</b>"]
    assert book_checks.precomputed_slider_parts(_slider_state(link=False), "box") is None
    assert book_checks.precomputed_slider_parts(_slider_state(kind="HTMLModel"), "box") is None
    assert book_checks.precomputed_slider_parts(_slider_state(), "sl") is None


def test_precomputed_slider_html_is_a_labelled_range_over_the_states():
    parts = book_checks.precomputed_slider_parts(_slider_state(), "box")
    html = book_checks.precomputed_slider_html(parts, "s0", alt="A chart.")
    assert '<input type="range" class="attnlib-pslider-range" min="0" max="1" step="1" value="1" ' \
           'aria-label="d &lt;k&gt;" aria-valuetext="d &lt;k&gt; 2">' in html
    assert '<output class="attnlib-pslider-value">2</output>' in html
    # the state it opens on is shown, the other hidden and inert in a <template> until picked;
    # a figure keeps its stored size and alt
    assert '<div class="attnlib-pslider-state" data-label="1" hidden><template><img ' \
           'src="data:image/png;base64,iVBORw0K" width="320" height="240" ' \
           'alt="A chart. (shown: d &lt;k&gt; 1)"></template></div>' in html
    assert '<div class="attnlib-pslider-state" data-label="2"><div class="output text_html ' \
           'attnlib-pslider-html">' \
           '<b>two</b></div></div>' in html
    assert html.count("<script>") == 1 and "attnlibPSlider" in html
    assert "<script>" not in book_checks.precomputed_slider_html(parts, "s1", script=False)


def test_the_widget_manager_stays_only_where_a_widget_view_is_left():
    """drop_unused_widget_manager: a page with a widget view left (a live widget) keeps the widget
    state, the shim and html-manager/embed.js; a page with none drops exactly those three."""
    from types import SimpleNamespace

    from sphinx.builders.html._assets import _JavaScript

    app = SimpleNamespace(config=SimpleNamespace(nb_ipywidgets_js={
        "widgets-shim.js": {}, "html-manager/embed.js": {"data-jupyter-widgets-cdn": "x"}}))

    def files():
        return [_JavaScript("_static/book.js"),
                _JavaScript(None, type=book_checks.WIDGET_STATE, body="{}"),
                _JavaScript("_static/widgets-shim.js"), _JavaScript("_static/html-manager/embed.js")]

    live = {"body": f'<script type="{book_checks.WIDGET_VIEW}">{{}}</script>', "script_files": files()}
    book_checks.drop_unused_widget_manager(app, "p", "t", live, None)
    assert len(live["script_files"]) == 4
    gone = {"body": '<div class="attnlib-pslider"></div>', "script_files": files()}
    book_checks.drop_unused_widget_manager(app, "p", "t", gone, None)
    assert [a.filename for a in gone["script_files"]] == ["_static/book.js"]


def _html_strings(value):
    """Every string in a notebook's outputs or widget state (walks dicts and lists)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            yield "".join(value)  # a multi-line string as nbformat stores it
        else:
            for v in value:
                yield from _html_strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _html_strings(v)


def test_stored_outputs_carry_the_current_scripts_and_styles():
    """Every copy of an attnlib/viz script or stylesheet in a stored output is the file as it is
    now: a change to one is re-embedded (scripts/refresh_assets.py, or executing the notebook)."""
    import json
    viz = ROOT / "attnlib" / "viz"
    assets = {p.name: p.read_text(encoding="utf-8") for p in [*viz.glob("*.js"), *viz.glob("*.css")]}
    stale = []
    for nb_path in sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("book/*.ipynb")]):
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        texts = [t for c in nb["cells"] for t in _html_strings(c.get("outputs", []))]
        texts += list(_html_strings(nb.get("metadata", {}).get("widgets", {})))
        for name, body in assets.items():
            head = body[:80]  # the file's opening comment or first rule
            copies = sum(t.count(head) for t in texts)
            whole = sum(t.count(body) for t in texts)
            if copies != whole:
                stale.append(f"{nb_path.name}: {copies - whole} stale copies of {name}")
    assert stale == [], stale


def test_refresh_assets_swaps_old_text_for_new(tmp_path):
    import nbformat
    import refresh_assets
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("show()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "text/html": "<div><script>/* kit */ var v = 3;</script></div>", "text/plain": "X"})]
    nb.cells = [cell, nbformat.v4.new_code_cell("1")]
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    assets = {"kit.js": ("/* kit */ var v = 3;", "/* kit */ var v = 4;")}
    assert refresh_assets.refresh(path, assets) == {"kit.js"}
    out = nbformat.read(path, as_version=4).cells[0].outputs[0]
    assert out.data["text/html"] == "<div><script>/* kit */ var v = 4;</script></div>"
    assert refresh_assets.refresh(path, assets) == set()  # nothing old is left to swap
