"""``vector_explorer``: the reader's own query, keys and values; the page computes the
scores, the scaled scores, the softmax weights and the output at once
(attnlib/viz/vectors.js, through the shared attention engine), with d_k and the
1/sqrt(d_k) scaling as two separate controls. In 2-D the query, the keys and the values
can be dragged."""
from __future__ import annotations

import html
from typing import Any, Optional, Sequence

import numpy as np
import torch

from ..attention import scaled_dot_product_attention
from ._common import example_names
from ._kit import KitOutput, as_matrix, as_vector, check_names, check_title, rounded
from ._page import _palette

__all__ = ["vector_explorer"]

MAX_KEYS, MAX_DK = 8, 8
# The page edits numbers in [-MAX_ABS, MAX_ABS]: q . k stays finite (|q . k| <= d_k * MAX_ABS^2)
# and every number readable in its box; the page refuses (visibly) anything outside.
MAX_ABS = 1000.0


def _state(name: str, query: Any, keys: Any, values: Any, key_tokens: Any, query_token: str,
           scale: bool) -> dict[str, Any]:
    q = as_vector(query, f"query of {name!r}")
    K = as_matrix(keys, f"keys of {name!r}")
    if K.shape[1] != q.size:
        raise ValueError(f"{name!r}: the query has d_k={q.size} numbers but each key has "
                         f"{K.shape[1]}; a query and a key must have the same width to be "
                         "compared")
    if not 1 <= K.shape[0] <= MAX_KEYS or q.size > MAX_DK:
        raise ValueError(f"{name!r}: the page edits 1 to {MAX_KEYS} keys of width "
                         f"d_k <= {MAX_DK}, got {K.shape[0]} keys of width {q.size}")
    V = None
    if values is not None:
        V = as_matrix(values, f"values of {name!r}")
        if V.shape[0] != K.shape[0] or V.shape[1] > MAX_DK:
            raise ValueError(f"{name!r}: values must be (Tk, d_v) with one value per key and "
                             f"d_v <= {MAX_DK}: {K.shape[0]} keys, "
                             f"values of shape {tuple(V.shape)}")
    for what, arr in (("query", q), ("keys", K), ("values", V)):
        if arr is not None and np.abs(arr).max() > MAX_ABS:
            raise ValueError(f"{name!r}: the page edits numbers from -{MAX_ABS:g} to "
                             f"{MAX_ABS:g}, got {np.abs(arr).max():g} in the {what}")
    if not isinstance(scale, bool):
        raise TypeError(f"scale must be True or False, got {scale!r}")
    return {"name": name, "query": str(query_token),
            "keys": check_names(key_tokens, K.shape[0], "key_tokens", "k"),
            "q": rounded(q.tolist()), "K": rounded(K.tolist()),
            "V": None if V is None else rounded(V.tolist()), "scale": scale}


def _numbers(st: dict[str, Any]) -> dict[str, np.ndarray]:
    """The first state computed by attnlib (float64): what the page must show before any
    edit."""
    q = torch.tensor([st["q"]], dtype=torch.float64)
    K = torch.tensor(st["K"], dtype=torch.float64)
    V = torch.tensor(st["V"] if st["V"] is not None else [[0.0]] * K.shape[0],
                     dtype=torch.float64)
    out, w = scaled_dot_product_attention(q, K, V, scale=None if st["scale"] else 1.0,
                                          need_weights=True)
    dots = (q @ K.T)[0]
    factor = (1 / np.sqrt(q.shape[1])) if st["scale"] else 1.0
    return {"dot": dots.numpy(), "scaled": dots.numpy() * factor, "weight": w[0].numpy(),
            "out": out[0].numpy()}


def _still(st: dict[str, Any], digits: int, title: str) -> str:
    """The first state as an HTML table (for hosts that run no scripts)."""
    n = _numbers(st)
    f = lambda x: f"{x:.{digits}f}".replace("-0.000", "0.000")  # noqa: E731
    vec = lambda xs: "[" + ", ".join(f"{x:g}" for x in xs) + "]"  # noqa: E731
    d = len(st["q"])
    # unscaled, the scaled column would repeat q.k: one column, named as such
    scaled = f"<th>\u00f7\u221a{d}</th>" if st["scale"] else ""
    dot = "q\u00b7k" if st["scale"] else "q\u00b7k (not scaled)"
    head = ("<tr><th>key</th><th>k</th>" + ("<th>v</th>" if st["V"] is not None else "")
            + f"<th>{dot}</th>{scaled}<th>weight</th></tr>")
    rows = "".join(
        f"<tr><td>{html.escape(t)}</td><td>{vec(k)}</td>"
        + (f"<td>{vec(st['V'][j])}</td>" if st["V"] is not None else "")
        + f"<td>{f(n['dot'][j])}</td>"
        + (f"<td>{f(n['scaled'][j])}</td>" if st["scale"] else "")
        + f"<td>{f(n['weight'][j])}</td></tr>"
        for j, (t, k) in enumerate(zip(st["keys"], st["K"])))
    out = (f"<p style='margin:4px 0 0'>output o = [{', '.join(f(x) for x in n['out'])}]</p>"
           if st["V"] is not None else "")
    return (f"<p style='margin:0 0 6px'>Interactive explorer "
            f"({html.escape(title or 'your own vectors')}): you edit the query, the keys and "
            "the values and the page recomputes. Scripts do not run here, so this is its first "
            f"state ({html.escape(st['name'])}), query {html.escape(st['query'])} = "
            f"{vec(st['q'])}. In Jupyter, run the cell or trust the notebook; in the book, allow "
            f"JavaScript.</p><table style='font-style:normal'>{head}{rows}</table>{out}")


def vector_explorer(query: Any, keys: Any, values: Any = None, *,
                    key_tokens: Optional[Sequence[str]] = None, query_token: str = "q",
                    examples: Optional[Sequence[str]] = None, title: Optional[str] = None,
                    scale: bool = True, digits: int = 3) -> KitOutput:
    """Your own vectors: a query against a few keys, computed in the page as the reader
    edits them.

    The page shows, for every key, q . k, the scaled score q . k / sqrt(d_k), its
    softmax weight and the weighted value, and the output o = sum_j w_j v_j; every
    number updates as the reader types (or drags, when d_k or d_v is 2). d_k (the width
    of q and k: new components start at 0) and the division by sqrt(d_k) are two
    separate controls; keys can be added and removed.

    Args:
        query: (d_k,); keys: (Tk, d_k); values: (Tk, d_v) or None (scores and weights only).
            Several starting states: lists of these, one per state, named by ``examples`` (then
            ``key_tokens`` and ``query_token`` may be lists too).
        key_tokens: the keys' names (default k0, k1, ...); query_token: the query's name.
        title: shown above; scale: start with the division by sqrt(d_k) on; digits: decimals
            shown.

    Returns:
        An output to display. Its starting numbers are attnlib's (the browser test compares
        them).
    """
    if not isinstance(digits, int) or not 0 <= digits <= 6:
        raise ValueError(f"digits must be an int in [0, 6], got {digits!r}")
    title = check_title(title)
    if examples is None:
        states = [_state("example 0", query, keys, values, key_tokens, query_token, scale)]
    else:
        names = example_names(examples)
        n = len(names)
        per = lambda x, what: (list(x) if isinstance(x, (list, tuple))  # noqa: E731
                               and len(x) == n else None)
        qs, ks, vs = (per(query, "query"), per(keys, "keys"),
                      per(values, "values") if values is not None else [None] * n)
        if qs is None or ks is None or vs is None:
            raise ValueError(f"with examples={names}, query, keys and values must be lists of "
                             f"{n} (one per example)")
        toks = (key_tokens if key_tokens is not None and len(key_tokens) == n
                and not isinstance(key_tokens[0], str) else [key_tokens] * n)
        qts = list(query_token) if isinstance(query_token, (list, tuple)) else [query_token] * n
        states = [_state(nm, q, k, v, t, qt, scale)
                  for nm, q, k, v, t, qt in zip(names, qs, ks, vs, toks, qts)]
    payload = {"v": 1, "title": title, "digits": digits, "examples": states,
               "palette": _palette("viridis"), "maxKeys": MAX_KEYS, "maxDk": MAX_DK,
               "maxAbs": MAX_ABS}
    first = states[0]
    summary = (f"VectorExplorer({title!r}, examples={len(states)}, d_k={len(first['q'])}, "
               f"keys={len(first['K'])}"
               + (f", d_v={len(first['V'][0])})" if first["V"] is not None else ")"))
    # vectors.js defines the explorer once per page (the book keeps one copy);
    # vectors_boot.js starts this output
    return KitOutput("vectors", payload, _still(first, digits, title),
                     title or "your own vectors", summary,
                     scripts=("engine.js", "kit.js", "vectors.js"), start="vectors_boot.js")


def first_numbers(out: KitOutput, example: int = 0) -> dict[str, np.ndarray]:
    """attnlib's numbers for one starting state of a vector explorer (for tests and notebooks)."""
    return _numbers(out.payload["examples"][example])
