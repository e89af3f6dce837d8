"""Sliding-window attention (Mistral, Gemma 2): each query sees only its last W positions.

A causal model with window W lets the query at position i attend to keys i-W+1 .. i (W keys,
itself included, never a later one). Stacked layers still carry information further back: after
L layers a token can be reached from up to L x (W - 1) positions away. The keys a query can no
longer see need not be kept, so a KV cache of such a model is a rolling buffer of W positions
(:class:`attnlib.KVCache`).
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from ._checks import as_size


def sliding_window_mask(q_len: int, k_len: int, window: Optional[int], *,
                        device: Optional[torch.device | str] = None) -> Tensor:
    """Bool (q_len, k_len) mask, True where query i may attend to key j.

    Aligned lower-right like :func:`attnlib.causal_mask`: query i sits at key position
    ``p = k_len - q_len + i`` and sees keys p - window + 1 .. p. ``window=None`` (no window) is the
    causal mask itself; a window >= k_len changes nothing either.

    Args:
        q_len, k_len: numbers of queries and keys (the queries are the last q_len positions).
        window: W >= 1, the keys each query sees (itself included), or None.
        device: where to make the mask.

    Returns:
        bool (q_len, k_len).
    """
    q, k = as_size("q_len", q_len), as_size("k_len", k_len)
    w = None if window is None else check_window(window, "window")
    ones = torch.ones(q, k, dtype=torch.bool, device=device)
    causal = torch.tril(ones, diagonal=k - q)  # key j <= p
    return causal if w is None else causal & torch.triu(ones, diagonal=k - q - w + 1)  # j > p - W


def check_window(window: Any, name: str = "sliding_window") -> int:
    """A window as a plain int >= 1 (TypeError for another kind, ValueError below 1)."""
    return as_size(name, window)
