"""A kernel-free attention explorer: every state precomputed in Python, drawn as SVG in the
browser.

The output is one self-contained HTML fragment (inline <style>, a JSON payload, an
inline <script>; no CDN, no require.js), so it works in the static book, in JupyterLab
and in Colab with no kernel. Numbers travel as integers ``round(value * 10**digits)``
(offset by the smallest one), packed into little-endian uint8/16/32 and base64-encoded
(``_packing.py``): the tooltip shows exactly ``round(value, digits)``.
"""
from __future__ import annotations

import hashlib
import html
import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ._static import matrix_svg
from ._common import (HtmlOutput, check_cmap, check_tokens, colour_range, default_cmap,
                      example_names, standalone_page, to_numpy)
from ._packing import _encode, decode_payload
from ._page import _asset, _json_for_script, _palette, _root_id

__all__ = ["Explorer", "explorer", "decode_payload"]

_DEFAULT_DIMS = ("layer", "head")


class Explorer(HtmlOutput):
    """A precomputed, browser-drawn attention explorer. Display it (last line of a cell) to
    show it.

    Attributes:
        payload: the JSON-able dict shipped to the browser (see ``decode_payload``).
        uid: a content hash; element ids derive from it, so the same input gives the same HTML.
    """

    def __init__(self, payload: dict[str, Any]):
        self.payload = payload
        self._json = _json_for_script(payload)
        self.uid = hashlib.sha1(self._json.encode("utf-8")).hexdigest()[:12]

    def _still(self) -> str:
        """The first state as a still SVG picture plus a line saying what it is (for
        no-script hosts)."""
        p = self.payload
        ex = p["examples"][0]
        start = p.get("initial") or [0] * len(p["dims"])  # the state it opens on
        first = decode_payload(p, 0)[tuple(start)]  # (Tq, Tk) of that state
        where = ", ".join(f"{d['name']} {d['labels'][i]}" for d, i in zip(p["dims"], start))
        if len(p["examples"]) > 1:
            where = f"example {ex['name']!r}" + (f", {where}" if where else "")
        name = p["title"] or "attention explorer"
        which = "opening state" if p.get("initial") else "first state"
        svg = matrix_svg(first, ex["rows"], ex["cols"], palette=p["palette"], vmin=p["vmin"],
                         vmax=p["vmax"], label=f"{name}: {which}",
                         footer=f"{p['valueName']} from {p['vmin']:g} to {p['vmax']:g}")
        shown = f"a still picture of its {which} ({where})" if where else "a still picture of it"
        text = (f"Interactive explorer ({html.escape(repr(self))}). Scripts do not run here, so "
                + (f"this is {html.escape(shown)}" if svg
                   else "its matrices are too large to draw as a still")
                + ". In Jupyter, run the cell or trust the notebook; in the book, "
                  "allow JavaScript.")
        return f'<div class="attnlib-noscript"><p style="margin:0 0 6px">{text}</p>{svg}</div>'

    def _opening_script(self) -> str:
        """Only for an explorer given ``initial``: a script that moves its sliders there once
        explorer.js has drawn it (so every other explorer's HTML stays exactly as it was)."""
        if not self.payload.get("initial"):
            return ""
        return f'<script class="attnlib-initial">{_asset("explorer_initial.js")}</script>'

    def __repr__(self) -> str:
        p = self.payload
        parts = [f"{d['name']}={len(d['labels'])}" for d in p["dims"]]
        if len(p["examples"]) > 1:
            parts.insert(0, f"examples={len(p['examples'])}")
        shapes = sorted({(len(e["rows"]), len(e["cols"])) for e in p["examples"]})
        if all(r == c for r, c in shapes):
            parts.append("tokens=" + "|".join(str(r) for r, _ in shapes))
        else:
            row_name, col_name = p.get("axes", ("queries", "keys"))
            parts.append(f"{row_name}=" + "|".join(str(r) for r, _ in shapes))
            parts.append(f"{col_name}=" + "|".join(str(c) for _, c in shapes))
        title = f"{p['title']!r}, " if p["title"] else ""
        return f"Explorer({title}{', '.join(parts)})"

    def to_html(self, *, full_page: bool = False) -> str:
        """The self-contained fragment; ``full_page=True`` wraps it in a minimal HTML document."""
        root_id = _root_id("explorer", self.uid, full_page)
        title = html.escape(self.payload["title"] or "")
        fragment = (
            f'<div class="attnlib-explorer" id="{root_id}" data-attnlib-uid="{self.uid}" '
            f'data-state="" role="group" aria-label="{title or "attention explorer"}">'
            f"<style>{_asset('explorer.css')}</style>"
            f"{self._still()}"
            f'<script type="application/json" class="attnlib-data">{self._json}</script>'
            f"<script>{_asset('kit.js')}\n{_asset('heatmap_keys.js')}\n"
            f"{_asset('explorer.js')}</script>"
            f"{self._opening_script()}"
            "</div>"
        )
        if not full_page:
            return fragment
        return standalone_page(fragment, title or "attention explorer", 720)


def _is_token_list_of_lists(tokens: Any) -> bool:
    return (tokens is not None and not isinstance(tokens, str) and len(tokens) > 0
            and not isinstance(tokens[0], str) and isinstance(tokens[0], (list, tuple)))


def explorer(data: Any, row_tokens: Optional[Sequence[Any]] = None,
             col_tokens: Optional[Sequence[Any]] = None, *, dims: Optional[Sequence[str]] = None,
             dim_labels: Optional[Mapping[str, Sequence[Any]]] = None,
             examples: Optional[Sequence[str]] = None, title: Optional[str] = None,
             value_name: str = "weight", diverging: bool = False, vmin: Optional[float] = None,
             vmax: Optional[float] = None, digits: int = 3, cmap: Optional[str] = None,
             initial: Optional[Mapping[str, Any]] = None,
             axis_names: Optional[Sequence[str]] = None) -> Explorer:
    """Precompute every state of a (*leading, Tq, Tk) array for the browser explorer.

    Args:
        data: array-like (*leading, Tq, Tk), or a list of those (one per example, as many
            leading dims each; Tq/Tk may differ, then ``row_tokens``/``col_tokens`` are lists
            of lists).
        row_tokens, col_tokens: query / key labels (``col_tokens`` defaults to
            ``row_tokens``).
        dims: names of the leading axes (default: the last ones of ("layer", "head")).
        dim_labels: {dim name: labels}, one label per index (default 0, 1, ...).
        examples: names of the examples (a ``select`` picks one).
        title: shown above the plot; value_name: what a cell holds ("weight", "score", ...).
        diverging: signed data: a diverging colour-blind-safe palette centred on 0.
        vmin, vmax: colour range (default [min(0, data), max(1, data)], or +-max|data|
            diverging).
        digits: decimals kept and shown (the payload holds round(value, digits) exactly).
        cmap: any matplotlib colormap name (default viridis / RdBu_r).
        initial: {dim name: label} of the state it opens on, e.g. {"step": 400} to open at the
            end of training (default: the first label of every dim); the still picture shows it
            too.
        axis_names: (rows, columns): what the axis titles, hover text and row panel call them
            (default ("query", "key")), e.g. ("blocks", "offset") for a matrix that is not
            attention.
    Returns:
        An ``Explorer``; display it to draw it. ``-inf``/NaN cells are drawn as masked.
    """
    if not isinstance(digits, int) or not 0 <= digits <= 6:
        raise ValueError(f"digits must be an int in [0, 6], got {digits!r}")
    cmap = default_cmap(diverging) if cmap is None else check_cmap(cmap)  # "" is not the default
    multi = isinstance(data, (list, tuple)) and (examples is not None
                                                 or _is_token_list_of_lists(row_tokens))
    arrays = [to_numpy(d, f"data[{i}]") for i, d in enumerate(data)] if multi else [to_numpy(data)]
    n_ex = len(arrays)
    if n_ex == 0:
        raise ValueError("explorer needs at least one example, got an empty list")
    if examples is None:
        examples = [f"example {i}" for i in range(n_ex)]
    examples = example_names(examples)
    if len(examples) != n_ex:
        raise ValueError(f"examples has {len(examples)} names but data has {n_ex} examples")

    def per_example(tokens: Any, what: str) -> list[Any]:
        if tokens is None or not _is_token_list_of_lists(tokens):
            return [tokens] * n_ex
        if len(tokens) != n_ex:
            raise ValueError(f"{what} has {len(tokens)} token lists but data has {n_ex} examples")
        return list(tokens)

    rows_per, cols_per = (per_example(row_tokens, "row_tokens"),
                          per_example(col_tokens, "col_tokens"))
    lead = arrays[0].shape[:-2]
    for i, a in enumerate(arrays):
        if a.ndim < 2:
            raise ValueError(f"data must be (*leading, Tq, Tk); example {i} has shape "
                             f"{tuple(a.shape)}")
        if a.shape[:-2] != lead:
            raise ValueError(f"every example needs the same leading shape; example 0 has "
                             f"{tuple(lead)}, example {i} has {tuple(a.shape[:-2])}")
        if a.shape[-1] == 0 or a.shape[-2] == 0 or 0 in lead:
            raise ValueError(f"example {i} has an empty axis: shape {tuple(a.shape)}")
    if dims is None:
        dims = (_DEFAULT_DIMS[-len(lead):] if 0 < len(lead) <= 2
                else [f"axis {k}" for k in range(len(lead))])
    dims = [str(d) for d in dims]
    if len(dims) != len(lead):
        raise ValueError(f"dims names {len(dims)} axes {dims} but data has {len(lead)} leading "
                         f"axes (shape {tuple(arrays[0].shape)})")
    dim_labels = dict(dim_labels or {})
    unknown = set(dim_labels) - set(dims)
    if unknown:
        raise ValueError(f"dim_labels names unknown dims {sorted(unknown)}; dims are {dims}")
    dim_spec = []
    for name, size in zip(dims, lead):
        labels = [str(x) for x in dim_labels.get(name, range(size))]
        if len(labels) != size:
            raise ValueError(f"dim_labels[{name!r}] has {len(labels)} labels but the {name} "
                             f"axis has {size}")
        dim_spec.append({"name": name, "labels": labels})

    start = _initial_indices(initial, dim_spec)
    axes = None if axis_names is None else [str(a) for a in axis_names]
    if axes is not None and (len(axes) != 2 or not all(axes)):
        raise ValueError(f"axis_names must be two non-empty names (rows, columns), got "
                         f"{axis_names!r}")
    lo, hi = colour_range(np.concatenate([a.ravel() for a in arrays]), vmin, vmax, diverging)
    ex_payload = []
    for name, a, rt, ct in zip(examples, arrays, rows_per, cols_per):
        tq, tk = a.shape[-2:]
        if ct is None and rt is not None and tq == tk:
            ct = rt
        rows = check_tokens(rt, tq, "row_tokens", f"rows (queries) in {name!r}")
        cols = check_tokens(ct, tk, "col_tokens", f"columns (keys) in {name!r}")
        ex_payload.append({"name": name, "rows": rows, "cols": cols, **_encode(a, digits)})
    payload = {
        "v": 1, "title": "" if title is None else str(title), "valueName": str(value_name),
        "digits": digits, "vmin": _round(lo), "vmax": _round(hi), "diverging": bool(diverging),
        "palette": _palette(cmap), "dims": dim_spec, "examples": ex_payload,
    }
    if start is not None:  # only then: an explorer opened on its first state keeps its old HTML
        payload["initial"] = start
    if axes is not None and axes != ["query", "key"]:  # likewise: only where named
        payload["axes"] = axes
    return Explorer(payload)


def _initial_indices(initial: Optional[Mapping[str, Any]],
                     dim_spec: list[dict[str, Any]]) -> Optional[list[int]]:
    """{dim name: label} -> one index per dim (0 where not named); None when ``initial`` is
    None."""
    if initial is None:
        return None
    if not isinstance(initial, Mapping):
        raise TypeError(f"initial must be a dict {{dim name: label}}, got {type(initial).__name__}")
    names = [d["name"] for d in dim_spec]
    unknown = sorted(set(map(str, initial)) - set(names))
    if unknown:
        raise ValueError(f"initial names unknown dims {unknown}; dims are {names}")
    wanted = {str(k): str(v) for k, v in initial.items()}
    start = []
    for d in dim_spec:
        label = wanted.get(d["name"])
        if label is not None and label not in d["labels"]:
            raise ValueError(f"initial[{d['name']!r}] is {label!r}, not one of the "
                             f"{d['name']} labels {d['labels']}")
        start.append(0 if label is None else d["labels"].index(label))
    return start


def _round(x: float) -> float:
    return float(f"{x:.6g}") if math.isfinite(x) else x
