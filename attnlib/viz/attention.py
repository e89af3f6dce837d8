"""``attention_explorer``: the explorer fed straight from model outputs (per-layer attention
lists)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .._checks import as_int
from ._common import example_names, to_numpy
from .explorer import Explorer, explorer


def _layers_heads(att: Any, batch_index: int) -> np.ndarray:
    """One example's attention as (L, H, Tq, Tk), (H, Tq, Tk) or (Tq, Tk)."""
    # a model's out.attentions: per layer (B, H, Tq, Tk) or (H, Tq, Tk)
    if isinstance(att, (list, tuple)):
        if len(att) == 0:
            raise ValueError("attentions is an empty list "
                             "(was the model called with need_weights=True?)")
        layers = [to_numpy(a, f"attentions[{i}]") for i, a in enumerate(att)]
        shapes = {a.shape for a in layers}
        if len(shapes) != 1:
            raise ValueError(f"every layer's attention must have the same shape, "
                             f"got {sorted(shapes)}")
        nd = layers[0].ndim
        if nd == 4:
            b = layers[0].shape[0]
            if not -b <= batch_index < b:
                raise ValueError(f"batch_index={batch_index} is out of range for batch size {b}")
            layers = [a[batch_index] for a in layers]
        elif nd != 3:
            raise ValueError(f"each layer's attention must be (B, H, Tq, Tk) or (H, Tq, Tk), "
                             f"got shape {layers[0].shape}")
        return np.stack(layers)  # (L, H, Tq, Tk)
    arr = to_numpy(att, "attentions")
    if arr.ndim not in (2, 3, 4):
        raise ValueError(f"attentions must be (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk), "
                         f"got shape {arr.shape}")
    return arr


def attention_explorer(attentions: Any, tokens: Sequence[Any],
                       key_tokens: Optional[Sequence[Any]] = None, *,
                       examples: Optional[Sequence[str]] = None, title: Optional[str] = None,
                       batch_index: int = 0, digits: int = 3) -> Explorer:
    """An explorer of attention weights with layer and head sliders.

    Args:
        attentions: (H, Tq, Tk) or (L, H, Tq, Tk) tensor; or a model's ``out.attentions``
            (list over layers of (B, H, Tq, Tk); item ``batch_index`` is shown); or a list
            of those, one per example (then ``tokens`` is a list of token lists, or
            ``examples`` names them).
        tokens: the query tokens (Tq); if there are Tk of them and Tq < Tk (a decode step
            with a KV cache), the queries are the last Tq tokens, matching ``causal_mask``'s
            alignment.
        key_tokens: the key tokens (Tk), e.g. the source sentence for cross-attention.
        examples: example names; title: shown above the plot.
    Returns:
        An ``Explorer``. Raises ``ValueError`` when token counts and matrix sizes disagree.
    """
    if as_int(batch_index) is None:
        raise TypeError(f"batch_index must be an int, got {batch_index!r}")
    batch_index = int(batch_index)
    for name, toks in (("tokens", tokens), ("key_tokens", key_tokens)):
        if toks is None and name == "key_tokens":
            continue
        if isinstance(toks, str) or not hasattr(toks, "__len__"):
            raise TypeError(f"{name} must be a list of token strings (or of token lists, "
                            f"one per example), got {toks!r}")
        if name == "key_tokens" and len(toks) == 0:
            raise ValueError("key_tokens is empty; pass the Tk key tokens or None")
    multi = examples is not None or (len(tokens) > 0 and isinstance(tokens[0], (list, tuple)))
    if multi:
        if not isinstance(attentions, (list, tuple)):
            raise ValueError("with several examples, attentions must be a list with one entry "
                             "per example")
        n = len(attentions)
        tok_lists = list(tokens) if isinstance(tokens[0], (list, tuple)) else [tokens] * n
        key_lists = (list(key_tokens) if key_tokens is not None
                     and isinstance(key_tokens[0], (list, tuple)) else [key_tokens] * n)
        if len(tok_lists) != n or len(key_lists) != n:
            raise ValueError(f"attentions has {n} examples but tokens has {len(tok_lists)} "
                             f"token lists"
                             + ("" if key_tokens is None else f" and key_tokens {len(key_lists)}"))
        arrays = [_layers_heads(a, batch_index) for a in attentions]
    else:
        arrays, tok_lists, key_lists = ([_layers_heads(attentions, batch_index)], [tokens],
                                        [key_tokens])

    rows, cols = [], []
    for i, (a, tq_tokens, tk_tokens) in enumerate(zip(arrays, tok_lists, key_lists)):
        tq, tk = a.shape[-2:]
        where = f" (example {i})" if multi else ""
        tq_tokens = [str(t) for t in tq_tokens]
        if tk_tokens is None:
            if len(tq_tokens) == tk and tq <= tk:
                tk_tokens, tq_tokens = tq_tokens, tq_tokens[tk - tq:]
            else:
                raise ValueError(f"attention{where} is {tq} queries x {tk} keys but "
                                 f"{len(tq_tokens)} tokens were given; pass {tq} query tokens "
                                 f"and key_tokens ({tk}), or {tk} tokens")
        if len(tq_tokens) != tq:
            raise ValueError(f"attention{where} has {tq} query rows but {len(tq_tokens)} "
                             f"query tokens were given")
        if len(tk_tokens) != tk:
            raise ValueError(f"attention{where} has {tk} key columns but {len(tk_tokens)} "
                             f"key tokens were given")
        rows.append(tq_tokens)
        cols.append([str(t) for t in tk_tokens])

    lead = arrays[0].ndim - 2
    dims = ("layer", "head")[2 - lead:] if lead else ()
    if multi:
        names = (example_names(examples) if examples is not None
                 else [f"example {i}" for i in range(len(arrays))])
        return explorer(arrays, rows, cols, dims=dims, examples=names, title=title, digits=digits)
    return explorer(arrays[0], rows[0], cols[0], dims=dims, title=title, digits=digits)
