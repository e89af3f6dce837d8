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
