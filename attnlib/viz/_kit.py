"""The carrier of the computing outputs (vectors, mask, heads grid, exercise): one
self-contained HTML fragment with the stylesheet, a still picture for hosts that run no
scripts, a JSON payload and the scripts (the attention engine, the drawing kit and the
output's own file), no CDN, no require.js, no URL. Element ids derive from the content;
a second copy shown in one kernel gets the suffix "-2", "-3", ... (shared with the
precomputed explorers)."""
from __future__ import annotations

import hashlib
import html
import math
from typing import Any, Sequence

import numpy as np

from ._common import HtmlOutput, standalone_page
from ._page import _asset, _json_for_script, _root_id

__all__ = ["KitOutput", "rounded", "as_matrix", "as_vector", "check_names"]


def rounded(x: Any, places: int = 6) -> Any:
    """Numbers for a payload: plain floats rounded to ``places`` decimals (identical on every CPU
    to the last printed digit; -0.0 as 0.0), nested lists kept."""
    if isinstance(x, (list, tuple)):
        return [rounded(v, places) for v in x]
    v = round(float(x), places)
    return 0.0 if v == 0 else v


def as_matrix(data: Any, name: str) -> np.ndarray:
    """A 2-D float64 array of finite numbers (a tensor, an array or nested lists)."""
    from ._common import to_numpy

    arr = to_numpy(data, name)
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(f"{name} must be a non-empty 2-D array (rows, width), "
                         f"got shape {tuple(arr.shape)}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must hold finite numbers (the page edits and computes them), "
                         f"got NaN or inf")
    return arr


def as_vector(data: Any, name: str) -> np.ndarray:
    from ._common import to_numpy

    arr = to_numpy(data, name)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D vector, got shape {tuple(arr.shape)}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must hold finite numbers, got NaN or inf")
    return arr


def check_names(names: Any, n: int, what: str, default: str) -> list[str]:
    """n labels as strings (default ``default`` + index); a wrong count is a ValueError."""
    if names is None:
        return [f"{default}{i}" for i in range(n)]
    if isinstance(names, str) or not hasattr(names, "__len__"):
        raise TypeError(f"{what} must be a list of {n} strings, got {names!r}")
    names = [str(t) for t in names]
    if len(names) != n:
        raise ValueError(f"{what} has {len(names)} names but there are {n}")
    return names


def check_title(title: Any) -> str:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, got {title!r}")
    return title or ""


class KitOutput(HtmlOutput):
    """A computing output. Display it (the last line of a cell) to show it.

    Attributes:
        kind: "vectors", "mask", "heads" or "exercise" (the root's class is attnlib-<kind>).
        payload: the JSON-able dict the page reads; still: the HTML shown where scripts do
            not run.
        uid: a content hash; element ids derive from it.
    """

    ROOT = "attnlib-explorer"
    DATA = "attnlib-payload"

    def __init__(self, kind: str, payload: dict[str, Any], still: str, label: str,
                 summary: str, scripts: Sequence[str] = ("engine.js", "kit.js"),
                 start: str | None = None):
        (self.kind, self.payload, self.still, self.label,
         self.summary) = kind, payload, still, label, summary
        # start: the script that starts this output (default "<kind>.js", which also defines it)
        self._scripts = tuple(scripts) + (start or f"{kind}.js",)
        self._json = _json_for_script(payload)
        self.uid = hashlib.sha1((kind + self._json).encode("utf-8")).hexdigest()[:12]

    def __repr__(self) -> str:
        return self.summary

    @property
    def nbytes(self) -> int:
        """Size of the HTML fragment in bytes (what one page carries)."""
        return len(self.to_html(full_page=True).encode("utf-8"))

    def to_html(self, *, full_page: bool = False) -> str:
        """The self-contained fragment; ``full_page=True`` wraps it in a minimal HTML document."""
        root_id = _root_id(self.kind, self.uid, full_page)
        label = html.escape(self.label)
        scripts = "\n".join(_asset(name) for name in self._scripts)
        fragment = (
            f'<div class="{self.ROOT} attnlib-kit attnlib-{self.kind}" id="{root_id}" '
            f'data-attnlib-uid="{self.uid}" data-state="" role="group" aria-label="{label}">'
            f"<style>{_asset('explorer.css')}{_asset('kit.css')}"
            f"{_asset(self.kind + '.css')}</style>"
            f'<div class="attnlib-noscript">{self.still}</div>'
            f'<script type="application/json" class="{self.DATA}">{self._json}</script>'
            f"<script>{scripts}</script></div>"
        )
        if not full_page:
            return fragment
        return standalone_page(fragment, label, 760)


def finite(x: float) -> float:
    if not math.isfinite(x):
        raise ValueError(f"expected a finite number, got {x}")
    return float(x)
