"""``mask_explorer``: a mask the reader clicks. Cells of a causal / padding mask toggle,
keys can be made padding, and the weights softmax(q k^T / sqrt(d) + M) are recomputed in
the page by the shared attention engine (attnlib/viz/mask.js), fully masked rows
included (zeros, as attnlib). The same mask is shown in the four conventions of the
ecosystem, chosen with named buttons: PyTorch SDPA's bool (True = may attend), additive
float (0 / -inf), nn.MultiheadAttention's bool (True = blocked) and Hugging Face's
attention_mask (1 = real token, one flag per key)."""
from __future__ import annotations

import html
from typing import Any, Optional, Sequence

import numpy as np
import torch

from .._checks import as_int
from ..attention import causal_mask, scaled_dot_product_attention
from ._common import example_names
from ._kit import KitOutput, as_matrix, check_names, check_title, rounded
from ._page import _palette
from ._static import matrix_svg

__all__ = ["mask_explorer", "CONVENTIONS"]

CONVENTIONS = ("sdpa", "additive", "nn_mha", "hf")
MAX_T = 10


def _pad_flags(pad: Any, tokens: list[str], name: str) -> list[bool]:
    if pad is None:
        return [False] * len(tokens)
    if isinstance(pad, str):
        return [t == pad for t in tokens]
    flags = [bool(p) for p in pad]
    if len(flags) != len(tokens):
        raise ValueError(f"{name}: pad has {len(flags)} flags but there are {len(tokens)} tokens")
    return flags


def _state(name: str, query: Any, keys: Any, tokens: Any, pad: Any, causal: bool) -> dict[str, Any]:
    q = as_matrix(query, f"query of {name!r}")
    k = as_matrix(keys, f"keys of {name!r}")
    if q.shape != k.shape:
        raise ValueError(f"{name!r}: query and keys must both be (T, d) for self-attention, "
                         f"got {q.shape} and {k.shape}")
    T = q.shape[0]
    if T > MAX_T:
        raise ValueError(f"{name!r}: the page draws masks of up to {MAX_T} tokens, got T={T}")
    if isinstance(tokens, str) or tokens is None:
        raise TypeError(f"tokens must be a list of {T} token strings, got {tokens!r}")
    toks = check_names(tokens, T, "tokens", "t")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    return {"name": name, "tokens": toks, "q": rounded(q.tolist()), "k": rounded(k.tolist()),
            "pad": _pad_flags(pad, toks, name), "causal": causal}


def allowed(st: dict[str, Any]) -> torch.Tensor:
    """The starting mask of a state (bool (T, T), True = may attend): causal AND not padding."""
    T = len(st["tokens"])
    m = causal_mask(T) if st["causal"] else torch.ones(T, T, dtype=torch.bool)
    return m & ~torch.tensor(st["pad"])[None, :]


def weights(st: dict[str, Any], mask: Optional[torch.Tensor] = None) -> np.ndarray:
    """attnlib's weights for a state under ``mask`` (default: its starting mask), float64."""
    q = torch.tensor(st["q"], dtype=torch.float64)
    k = torch.tensor(st["k"], dtype=torch.float64)
    m = allowed(st) if mask is None else mask
    _, w = scaled_dot_product_attention(q, k, k, attn_mask=m, need_weights=True)
    return w.numpy()


def _still(st: dict[str, Any], palette: str, title: str) -> str:
    m = allowed(st)
    w = np.where(m.numpy(), weights(st), np.nan)  # blocked cells grey
    svg = matrix_svg(w, st["tokens"], st["tokens"], palette=palette, vmin=0.0, vmax=1.0,
                     label=f"{title or 'mask explorer'}: weights under the starting mask",
                     footer="key (grey: blocked by the mask, weight 0)")
    dead = [t for t, row in zip(st["tokens"], m.tolist()) if not any(row)]
    note = (f" Queries with no key to attend to (weights zero): {', '.join(dead)}." if dead else "")
    return ("<p style='margin:0 0 6px'>" + html.escape(
        "Interactive mask explorer: you click cells of the mask and the weights are recomputed. "
        f"Scripts do not run here, so this is a still picture of its first state "
        f"({st['name']}).{note} In Jupyter, run the cell or trust the notebook; in the book, "
        "allow JavaScript.") + f"</p>{svg}")


def mask_explorer(query: Any, keys: Any, tokens: Sequence[str], *, pad: Any = None,
                  causal: bool = True, examples: Optional[Sequence[str]] = None,
                  title: Optional[str] = None, convention: str = "sdpa",
                  digits: int = 3) -> KitOutput:
    """A mask the reader clicks, with the weights recomputed in the page.

    The page draws the mask as a grid of cells (click one: blocked <-> allowed; the key labels
    above make a key padding or not; a button switches the causal mask) and the attention weights
    softmax(q k^T / sqrt(d) + M) beside it, computed by the same engine the book's tests hold equal
    to attnlib; a query with every key blocked gets zeros (attnlib's rule), and the page says
    where a plain softmax would give NaN. Named buttons write the same mask in each convention:
    "sdpa" (bool, True = may attend), "additive" (0 / -inf), "nn_mha" (bool, True = blocked),
    "hf" (one flag per key, 1 = real; the model adds its causal part itself).

    Args:
        query, keys: (T, d) each (self-attention over T <= 10 tokens); or lists of those, one
            per starting state named by ``examples`` (then ``tokens`` and ``pad`` are lists
            too).
        tokens: the T token strings.
        pad: which keys are padding at the start: a token string (every position holding it),
            T bools (True = padding), or None.
        causal: start with the causal mask on.
        convention: the convention shown first; digits: decimals shown.

    Returns:
        An output to display; its starting weights are attnlib's (``viz.mask.weights``).
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    if as_int(digits) is None or not 0 <= int(digits) <= 6:
        raise ValueError(f"digits must be an int in [0, 6], got {digits!r}")
    title = check_title(title)
    if examples is None:
        states = [_state("start", query, keys, tokens, pad, causal)]
    else:
        names = example_names(examples)
        n = len(names)
        if not all(isinstance(x, (list, tuple)) and len(x) == n for x in (query, keys, tokens)):
            raise ValueError(f"with examples={names}, query, keys and tokens must be lists of {n}")
        pads = (list(pad) if isinstance(pad, (list, tuple)) and len(pad) == n
                and not isinstance(pad[0], bool) else [pad] * n)
        causals = list(causal) if isinstance(causal, (list, tuple)) else [causal] * n
        states = [_state(*args) for args in zip(names, query, keys, tokens, pads, causals)]
    palette = _palette("viridis")
    payload = {"v": 1, "title": title, "digits": int(digits), "palette": palette,
               "examples": states, "convention": convention}
    summary = (f"MaskExplorer({title!r}, examples={len(states)}, tokens="
               + "|".join(str(len(s["tokens"])) for s in states)
               + f", convention={convention!r})")
    return KitOutput("mask", payload, _still(states[0], palette, title),
                     title or "mask explorer", summary)
