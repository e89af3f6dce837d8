"""Exact attention over key tiles with an online softmax (the idea behind FlashAttention).

``softmax(Q K^T * scale + M) V`` is computed one tile of keys at a time. Per query row three
running quantities are kept: the largest score seen so far ``m``, the sum of exponentials relative
to it ``l``, and the unnormalised output ``o``. A new tile of scores ``S_j`` updates them as

    m' = max(m, max S_j),  l' = exp(m - m') l + sum exp(S_j - m'),
    o' = exp(m - m') o + exp(S_j - m') V_j

and the output is ``o / l``. Nothing is approximated: the result equals
:func:`attnlib.scaled_dot_product_attention` up to the rounding of sums taken in another order.
The largest score block held is (Tq, tile) instead of (Tq, Tk). This is a teaching version in
plain PyTorch (a Python loop over tiles, slower than the fused kernel); a real kernel also tiles the
queries and keeps each block in on-chip memory.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from .attention import causal_mask, check_inputs, check_mask, check_scale


def tiled_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                    is_causal: bool = False, scale: Optional[float] = None, *,
                    tile: int = 64) -> Tensor:
    """Attention computed over tiles of ``tile`` keys with an online softmax.

    Args:
        query, key, value: (..., Tq, Dk), (..., Tk, Dk), (..., Tk, Dv); leading dims broadcast.
        attn_mask: bool (True = may attend) or float (added to the scores), broadcastable to
            (..., Tq, Tk), as in :func:`attnlib.scaled_dot_product_attention`.
        is_causal: query i attends to keys 0..i (needs Tq == Tk).
        scale: defaults to 1 / sqrt(Dk).
        tile: keys per tile (any positive number; the last tile may be shorter).

    Returns:
        out (..., Tq, Dv). A query row whose keys are all masked is zeros, never NaN.
    """
    if not isinstance(tile, int) or isinstance(tile, bool) or tile < 1:
        raise ValueError(f"tile must be a positive int (keys per tile), got {tile!r}")
    batch = check_inputs(query, key, value)
    scale = check_scale(scale)
    tq, tk = query.shape[-2], key.shape[-2]
    if is_causal:
        if attn_mask is not None:
            raise ValueError("pass either attn_mask or is_causal=True, not both")
        if tq != tk:
            raise ValueError(f"is_causal=True needs Tq == Tk, got Tq={tq}, Tk={tk}; pass "
                             f"attn_mask=causal_mask({tq}, {tk}) instead")
        attn_mask = causal_mask(tq, tk, device=query.device)
    if attn_mask is not None:
        check_mask(attn_mask, (*batch, tq, tk))
        attn_mask = attn_mask.expand(
            torch.broadcast_shapes(attn_mask.shape, (tq, tk)))      # (..., Tq, Tk)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale

    acc = torch.promote_types(query.dtype, torch.float32)     # accumulate in at least float32
    q = query.to(acc) * scale                                  # (..., Tq, Dk)
    m = torch.full((*batch, tq, 1), float("-inf"), dtype=acc, device=query.device)
    l = torch.zeros((*batch, tq, 1), dtype=acc, device=query.device)
    o = torch.zeros((*batch, tq, value.shape[-1]), dtype=acc, device=query.device)
    for start in range(0, tk, tile):
        k_j = key[..., start:start + tile, :].to(acc)          # (..., tile, Dk)
        v_j = value[..., start:start + tile, :].to(acc)        # (..., tile, Dv)
        s_j = q @ k_j.transpose(-2, -1)                        # (..., Tq, tile): one block only
        if attn_mask is not None:
            mask_j = attn_mask[..., start:start + tile]
            s_j = (s_j.masked_fill(~mask_j, float("-inf")) if mask_j.dtype == torch.bool
                   else s_j + mask_j.to(acc))
        m_new = torch.maximum(m, s_j.amax(-1, keepdim=True))  # (..., Tq, 1)
        # a row with no visible key yet has m_new = -inf; subtract 0 there so exp gives 0, not NaN
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p_j = torch.exp(s_j - shift)                           # (..., Tq, tile)
        rescale = torch.exp(m - shift)                         # shrink what came before
        l = rescale * l + p_j.sum(-1, keepdim=True)
        o = rescale * o + p_j @ v_j
        m = m_new
    out = o / torch.where(l == 0, torch.ones_like(l), l)       # fully masked rows: 0 / 1 = 0
    return out.to(torch.promote_types(query.dtype, value.dtype))
