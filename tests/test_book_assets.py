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
