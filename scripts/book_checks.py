"""Sphinx extension (loaded from _config.yml): two fixes Jupyter Book does not make itself.

1. With execution off, myst-nb renders a stored error output like any other output, so a chapter
   committed with a traceback would build "successfully". Here every notebook page with an error
   output emits a warning, which `jupyter-book build -W` turns into a failed build.
2. Jupyter Book always loads sphinx-thebe, even with `launch_buttons.thebe: false`. Its inline
   script points at a CDN and (sphinx-thebe 0.3.1 under Sphinx 7) is added twice to every page,
   which is a JavaScript SyntaxError ("THEBE_JS_URL has already been declared"). We drop its
   assets from every page; the book has no "live code" button, so nothing uses them.
"""
from __future__ import annotations

import json
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)


def error_outputs(nb: dict) -> list[tuple[int, str]]:
    """(cell index, "EName: message") for each stored error output of a notebook dict."""
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "error":
                found.append((i, f"{out.get('ename', '?')}: {out.get('evalue', '')}"))
    return found


def check_notebook(app, docname: str, source: list) -> None:
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    nb = json.loads(path.read_text(encoding="utf-8"))
    for index, err in error_outputs(nb):
        logger.warning("notebook has a stored error output in cell %d: %s", index, err,
                       location=docname, type="attnlib", subtype="error_output")


def _is_thebe(asset) -> bool:
    name = getattr(asset, "filename", None) or str(asset)
    body = (getattr(asset, "attributes", None) or {}).get("body", "") or ""
    return "sphinx-thebe" in (name or "") or "THEBE_JS_URL" in body


def drop_thebe_assets(app, pagename, templatename, context, doctree) -> None:
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [a for a in context[key] if not _is_thebe(a)]


def setup(app):
    app.connect("source-read", check_notebook)
    app.connect("html-page-context", drop_thebe_assets, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
