"""Scaled dot-product attention and the two standard masks.

Two paths compute the same thing:

* ``"math"`` spells out ``softmax(Q K^T / sqrt(d_k) + M) V`` and can hand back the weights,
  which is what every heatmap in the book draws;
* ``"sdpa"`` calls ``torch.nn.functional.scaled_dot_product_attention``, which dispatches to
  fused kernels (FlashAttention and friends) and never materialises the weights.

Mask semantics follow PyTorch SDPA: a bool mask is True where a query MAY attend, a float mask
is ADDED to the scores. A query row whose keys are all masked returns zeros, never NaN.

:func:`scaled_dot_product_attention` checks its arguments, then calls :func:`attend`, which does
the arithmetic and nothing else (MultiHeadAttention calls it after checking its own inputs).
"""
from __future__ import annotations

import math
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import as_int, as_real, check_flag, eager

BACKENDS = ("math", "sdpa", "auto")


def attend(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
           dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None, *,
           need_weights: bool = False, backend: str = "auto",
           enable_gqa: bool = False) -> tuple[Tensor, Optional[Tensor]]:
    """The arithmetic of :func:`scaled_dot_product_attention`, on arguments already checked.

    Returns (out (..., Tq, Dv), weights (..., Tq, Tk) or None)."""
    # rows with no key to see ("dead"): un-masked, so softmax stays finite, and zeroed after
    attn_mask, dead = (None, None) if attn_mask is None else _open_dead_rows(attn_mask)
    if backend != "math" and not need_weights:  # torch's fused kernel: no weights to return
        if attn_mask is not None and (attn_mask.dtype
                                      not in (torch.bool, torch.float32, query.dtype)):
            # torch takes a float32 mask or one of the query's dtype; a narrower cast would round
            # large finite biases (-1e5 in fp16) to -inf and mask rows that are not masked
            wide = torch.float64 if query.dtype == torch.float64 else torch.float32
            attn_mask = attn_mask.to(wide)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                             scale=scale, enable_gqa=enable_gqa)
        return (out if dead is None else out.masked_fill(dead, 0.0)), None
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        # query head h reads key/value head h // group: each K/V head repeated `group` times
        group = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(group, dim=-3)  # (..., G, Tk, D) -> (..., Hq, Tk, D)
        value = value.repeat_interleave(group, dim=-3)
    out, weights = _math_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    if dead is not None:
        out, weights = out.masked_fill(dead, 0.0), weights.masked_fill(dead, 0.0)
    return out, (weights if need_weights else None)


def _open_dead_rows(mask: Tensor) -> tuple[Tensor, Tensor]:
    """(mask with every fully masked row opened, dead (..., Tq, 1)): a row that may see no key
    would make softmax 0/0 = NaN (forward and backward); attend zeroes its output instead."""
    if mask.dtype == torch.bool:
        dead = ~mask.any(dim=-1, keepdim=True)
        return mask | dead, dead
    dead = torch.isneginf(mask).all(dim=-1, keepdim=True)
    return mask.masked_fill(dead, 0.0), dead


def _math_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor],
                    dropout_p: float, is_causal: bool,
                    scale: Optional[float]) -> tuple[Tensor, Tensor]:
    """The readable path: every step of the formula, weights kept."""
    d_k = query.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    # Half inputs (fp16, bf16) are scored and softmaxed in float32: Q K^T can overflow fp16
    # (65,504) before the scale brings it back, and exp() of bf16 scores loses too much.
    acc = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    scores = (query.to(acc) @ key.to(acc).transpose(-2, -1)) * scale  # (..., Tq, Tk)
    if is_causal:
        tq, tk = scores.shape[-2:]
        allowed = torch.ones(tq, tk, dtype=torch.bool, device=scores.device).tril(tk - tq)
        scores = scores.masked_fill(~allowed, float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask  # float32 scores (or wider): biases added without rounding
    weights = torch.softmax(scores, dim=-1).to(query.dtype)  # (..., Tq, Tk), rows sum to 1
    used = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return used @ value, weights  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    *,
    need_weights: bool = False,
    backend: str = "auto",
    enable_gqa: bool = False,
) -> tuple[Tensor, Optional[Tensor]]:
    """Attention(Q, K, V) = softmax(Q K^T * scale + M) V.

    Args:
        query, key, value: (..., Tq, Dk), (..., Tk, Dk), (..., Tk, Dv).
        attn_mask: bool (True = may attend) or float (added to the scores), broadcastable to
            (..., Tq, Tk). A float mask holds finite biases or -inf; NaN or +inf is a ValueError
            (it would make the weights NaN).
        dropout_p: dropout on the weights; pass 0.0 at evaluation time.
        is_causal: query i attends to keys 0..i. Needs Tq == Tk: for a decode step with a cache use
            ``attn_mask=causal_mask(q_len, k_len)`` (lower-right aligned) instead.
        scale: defaults to 1 / sqrt(Dk); must be finite.
        need_weights: also return the (..., Tq, Tk) attention weights (the math path).
        backend: "math", "sdpa" (torch's fused kernel, no weights) or "auto" (sdpa unless weights
            are needed).
        enable_gqa: grouped-query attention, as in torch: query (..., Hq, Tq, Dk) and key/value
            (..., G, Tk, D) with Hq % G == 0; query head h reads key/value head h // (Hq / G). The
            sdpa path passes it to torch (no copy of K/V); the math path repeats K/V per query head.

    Returns:
        (out (..., Tq, Dv), weights (..., Tq, Tk) or None). Fully masked query rows are zeros.
    """
    check_backend(backend, need_weights)
    for name, flag in (("is_causal", is_causal), ("need_weights", need_weights),
                       ("enable_gqa", enable_gqa)):
        check_flag(name, flag)
    batch = check_inputs(query, key, value, enable_gqa)
    tq, tk = query.shape[-2], key.shape[-2]
    if is_causal:
        check_causal(attn_mask, tq, tk)
    if as_real(dropout_p) is None:
        raise TypeError(f"dropout_p must be a number in [0, 1), got {dropout_p!r}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    scale = check_scale(scale)
    if attn_mask is not None:
        check_mask(attn_mask, (*batch, tq, tk))
    keep = 3 if enable_gqa else 2  # under GQA the head counts differ: compare the dims before them
    same = query.shape[:-keep] == key.shape[:-keep] == value.shape[:-keep]
    if backend != "math" and not need_weights and not same:
        # torch's kernels do not broadcast every combination (a batch only in value fails), so
        # expand the leading dims (views, no copy) to the common batch shape
        lead = batch[:len(batch) + 2 - keep]
        query, key, value = (t.expand(*lead, *t.shape[-keep:]) for t in (query, key, value))
    return attend(query, key, value, attn_mask, float(dropout_p), is_causal, scale,
                  need_weights=need_weights, backend=backend, enable_gqa=enable_gqa)


# --- Argument checks (shared with MultiHeadAttention and tiled_attention) -------------------
def check_backend(backend: Any, need_weights: bool) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of "
                         f"{', '.join(map(repr, BACKENDS))}")
    if backend == "sdpa" and need_weights:
        # the message's first 55 characters are printed by chapter 17: keep them
        raise ValueError("backend='sdpa' cannot return weights (the fused kernel never forms "
                         "them, and F.scaled_dot_product_attention returns only the output "
                         "whichever kernel runs); use backend='math' or 'auto' with "
                         "need_weights=True")


def _check_tensor(name: str, t: Any) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() < 2:
        raise ValueError(f"{name} must have shape (..., T, D) with at least 2 dims, got shape "
                         f"{tuple(t.shape)}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")


def _broadcast(what: str, *shapes: torch.Size) -> tuple[int, ...]:
    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        raise ValueError(f"the leading (batch/head) dims of {what} do not broadcast "
                         f"together") from None


def check_inputs(query: Tensor, key: Tensor, value: Tensor,
                 enable_gqa: bool = False) -> tuple[int, ...]:
    """Validate Q/K/V; return the broadcast batch shape (of the queries' heads under GQA)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(name, t)
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)} and value {tuple(value.shape)}"
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(f"query, key and value must have the same dtype, got {query.dtype}, "
                        f"{key.dtype} and {value.dtype}; convert them, e.g. key.to(query.dtype)")
    if query.shape[-1] < 1:
        raise ValueError(f"query and key need a width d_k of at least 1, got query "
                         f"{tuple(query.shape)}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"query and key must have the same width d_k to be compared: query is "
                         f"{tuple(query.shape)} (d_k={query.shape[-1]}), key is {tuple(key.shape)} "
                         f"(d_k={key.shape[-1]})")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value must have the same length Tk (one value per key): key is "
                         f"{tuple(key.shape)} (Tk={key.shape[-2]}), value is {tuple(value.shape)} "
                         f"(Tk={value.shape[-2]})")
    if not enable_gqa:
        return _broadcast(shapes, query.shape[:-2], key.shape[:-2], value.shape[:-2])
    if min(query.dim(), key.dim(), value.dim()) < 3:
        raise ValueError(f"enable_gqa=True needs a head dim: query (..., Hq, Tq, D) and key/value "
                         f"(..., G, Tk, D); got {shapes}")
    hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
    if hk != hv or hq % hk != 0:
        raise ValueError(f"enable_gqa=True needs key and value to have the same number of heads G "
                         f"dividing the query heads Hq: got Hq={hq}, key heads {hk}, value heads "
                         f"{hv} ({shapes})")
    return (*_broadcast(shapes, query.shape[:-3], key.shape[:-3], value.shape[:-3]), hq)


def check_causal(attn_mask: Optional[Tensor], tq: int, tk: int) -> None:
    if attn_mask is not None:
        raise ValueError("pass either attn_mask or is_causal=True, not both; to combine them, "
                         "build causal_mask(q_len, k_len) & your_mask and pass it as attn_mask")
    if tq != tk:
        raise ValueError(f"is_causal=True needs Tq == Tk, got Tq={tq}, Tk={tk}. PyTorch aligns "
                         f"is_causal to the top-left, which is wrong for a decode step with cached "
                         f"keys; pass attn_mask=causal_mask({tq}, {tk}) (lower-right aligned) "
                         f"instead")


def check_mask(attn_mask: Any, scores_shape: tuple[int, ...]) -> None:
    """Kind, dtype and shape of a mask, and (in eager mode) that a float mask holds no NaN or
    +inf."""
    if not isinstance(attn_mask, Tensor):
        raise TypeError(f"attn_mask must be a torch.Tensor (bool or float), got "
                        f"{type(attn_mask).__name__}")
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise TypeError(f"attn_mask must be bool (True = may attend) or floating (added to the "
                        f"scores), got dtype {attn_mask.dtype}; for a 0/1 integer mask use "
                        f"attn_mask.bool()")
    try:
        ok = tuple(torch.broadcast_shapes(attn_mask.shape, scores_shape)) == tuple(scores_shape)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the "
                         f"scores shape (..., Tq, Tk) = {tuple(scores_shape)}")
    if attn_mask.is_floating_point() and eager(attn_mask) and attn_mask.numel():
        top = float(attn_mask.max())  # NaN if any entry is, +inf if any entry is
        if not top < math.inf:
            held = "NaN" if math.isnan(top) else "+inf"
            raise ValueError(f"a float attn_mask is added to the scores, so it must hold 0 (may "
                             f"attend) or -inf (may not) or other finite biases; it holds {held}, "
                             f"which would make the weights NaN")


def check_scale(scale: Any) -> Optional[float]:
    """None (1 / sqrt(d_k)) or a finite number, as a float."""
    if scale is None:
        return None
    value = as_real(scale)
    if value is None:
        raise TypeError(f"scale must be a number (or None for 1/sqrt(d_k)), got {scale!r}")
    if not math.isfinite(value):
        raise ValueError(f"scale must be finite (or None for 1/sqrt(d_k)), got {value}")
    return value


# --- The two standard masks -------------------------------------------------------------------
def causal_mask(q_len: int, k_len: Optional[int] = None, *,
                device: Optional[torch.device | str] = None) -> Tensor:
    """Bool (q_len, k_len) mask, True where query i may attend to key j.

    Aligned lower-right: query i sits at key position ``k_len - q_len + i``, so the last query
    sees every key. With q_len == k_len this is the familiar lower triangle; with q_len=1 (one
    decode step after a cache of k_len-1 tokens) it is a row of all True.
    """
    k_len = q_len if k_len is None else k_len
    for name, n in (("q_len", q_len), ("k_len", k_len)):
        if as_int(n) is None or n < 1:
            raise ValueError(f"{name} must be a positive int, got {n!r}")
    q_len, k_len = int(q_len), int(k_len)
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=k_len - q_len)


def padding_mask(token_ids: Tensor, pad_id: int) -> Tensor:
    """Bool (B, 1, 1, T) mask, True at real tokens: broadcasts over heads and queries."""
    if not isinstance(token_ids, Tensor):
        raise TypeError(f"token_ids must be a torch.Tensor, got {type(token_ids).__name__}")
    if token_ids.is_floating_point() or token_ids.dtype == torch.bool:
        raise TypeError(f"token_ids must be an integer tensor, got dtype {token_ids.dtype}")
    if token_ids.dim() != 2:
        raise ValueError(f"token_ids must have shape (B, T), got {tuple(token_ids.shape)}")
    if as_int(pad_id) is None:
        raise TypeError(f"pad_id must be an int (the padding token's id), got {pad_id!r}")
    return (token_ids != pad_id)[:, None, None, :]  # (B, 1, 1, T)
