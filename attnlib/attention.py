"""Scaled dot-product attention, the two standard masks, and multi-head attention.

Two paths compute the same thing:

* ``"math"`` spells out ``softmax(Q K^T / sqrt(d_k) + M) V`` and can hand back the weights,
  which is what every heatmap in the book draws;
* ``"sdpa"`` calls ``torch.nn.functional.scaled_dot_product_attention``, which dispatches to
  fused kernels (FlashAttention and friends) and never materialises the weights.

Mask semantics follow PyTorch SDPA: a bool mask is True where a query MAY attend, a float mask
is ADDED to the scores. A query row whose keys are all masked returns zeros, never NaN.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

BACKENDS = ("math", "sdpa", "auto")


def _check_tensor(name: str, t: Any) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() < 2:
        raise ValueError(f"{name} must have shape (..., T, D) with at least 2 dims, got shape {tuple(t.shape)}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")


def _check_inputs(query: Tensor, key: Tensor, value: Tensor, enable_gqa: bool = False) -> tuple[int, ...]:
    """Validate Q/K/V shapes; return the broadcast batch shape (of the queries' heads under GQA)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(name, t)
    if enable_gqa:
        return _check_gqa(query, key, value)
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same width d_k to be compared: query is {tuple(query.shape)} "
            f"(d_k={query.shape[-1]}), key is {tuple(key.shape)} (d_k={key.shape[-1]})"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same length Tk (one value per key): key is {tuple(key.shape)} "
            f"(Tk={key.shape[-2]}), value is {tuple(value.shape)} (Tk={value.shape[-2]})"
        )
    try:
        batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch/head) dims of query {tuple(query.shape)}, key {tuple(key.shape)} and "
            f"value {tuple(value.shape)} do not broadcast together"
        ) from None
    return tuple(batch)


def _check_gqa(query: Tensor, key: Tensor, value: Tensor) -> tuple[int, ...]:
    """Grouped-query shapes: query (..., Hq, Tq, D), key/value (..., G, Tk, D) with Hq % G == 0."""
    if min(query.dim(), key.dim(), value.dim()) < 3:
        raise ValueError(
            f"enable_gqa=True needs a head dim: query (..., Hq, Tq, D) and key/value (..., G, Tk, D); got "
            f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
        )
    hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
    if hk != hv or hq % hk != 0:
        raise ValueError(
            f"enable_gqa=True needs key and value to have the same number of heads G dividing the "
            f"query heads Hq: got Hq={hq} (query {tuple(query.shape)}), key heads {hk}, value heads {hv}"
        )
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"query and key must have the same width d_k, and key and value the same length Tk: got "
            f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
        )
    try:
        lead = torch.broadcast_shapes(query.shape[:-3], key.shape[:-3], value.shape[:-3])
    except RuntimeError:
        raise ValueError(
            f"the batch dims (before the head dim) of query {tuple(query.shape)}, key {tuple(key.shape)} "
            f"and value {tuple(value.shape)} do not broadcast together"
        ) from None
    return (*lead, hq)


def _check_mask(attn_mask: Tensor, scores_shape: tuple[int, ...]) -> None:
    if not isinstance(attn_mask, Tensor):
        raise TypeError(f"attn_mask must be a torch.Tensor (bool or float), got {type(attn_mask).__name__}")
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise TypeError(
            f"attn_mask must be bool (True = may attend) or floating (added to the scores), got dtype "
            f"{attn_mask.dtype}; for a 0/1 integer mask use attn_mask.bool()"
        )
    try:
        ok = torch.broadcast_shapes(attn_mask.shape, scores_shape) == torch.Size(scores_shape)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the scores shape "
            f"(..., Tq, Tk) = {tuple(scores_shape)}"
        )


def _dead_rows(attn_mask: Tensor) -> Tensor:
    """True for query rows in which every key is masked out, shape (..., Tq, 1)."""
    if attn_mask.dtype == torch.bool:
        return ~attn_mask.any(dim=-1, keepdim=True)
    return torch.isneginf(attn_mask).all(dim=-1, keepdim=True)


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
            (..., Tq, Tk).
        dropout_p: dropout on the weights; pass 0.0 at evaluation time.
        is_causal: query i attends to keys 0..i. Needs Tq == Tk: for a decode step with a cache use
            ``attn_mask=causal_mask(q_len, k_len)`` (lower-right aligned) instead.
        scale: defaults to 1 / sqrt(Dk).
        need_weights: also return the (..., Tq, Tk) attention weights (the math path).
        backend: "math", "sdpa" (torch's fused kernel, no weights) or "auto" (sdpa unless weights
            are needed).
        enable_gqa: grouped-query attention, as in torch: query (..., Hq, Tq, Dk) and key/value
            (..., G, Tk, D) with Hq % G == 0; query head h reads key/value head h // (Hq / G). The
            sdpa path passes it to torch (no copy of K/V); the math path repeats K/V per query head.

    Returns:
        (out (..., Tq, Dv), weights (..., Tq, Tk) or None). Fully masked query rows are zeros.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(map(repr, BACKENDS))}")
    if backend == "sdpa" and need_weights:
        raise ValueError(
            "backend='sdpa' cannot return weights (the fused kernel never forms them); "
            "use backend='math' or 'auto' with need_weights=True"
        )
    batch = _check_inputs(query, key, value, enable_gqa)
    tq, tk = query.shape[-2], key.shape[-2]
    scores_shape = (*batch, tq, tk)
    if is_causal:
        if attn_mask is not None:
            raise ValueError(
                "pass either attn_mask or is_causal=True, not both; to combine them, build "
                "causal_mask(q_len, k_len) & your_mask and pass it as attn_mask"
            )
        if tq != tk:
            raise ValueError(
                f"is_causal=True needs Tq == Tk, got Tq={tq}, Tk={tk}. PyTorch aligns is_causal to the "
                f"top-left, which is wrong for a decode step with cached keys; pass "
                f"attn_mask=causal_mask({tq}, {tk}) (lower-right aligned) instead"
            )
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")

    dead = None
    if attn_mask is not None:
        _check_mask(attn_mask, scores_shape)
        if attn_mask.is_floating_point():
            attn_mask = attn_mask.to(query.dtype)
        dead = _dead_rows(attn_mask)
        if bool(dead.any()):
            # Un-mask the dead rows so softmax stays finite (no NaN, forward or backward);
            # their outputs are zeroed below.
            attn_mask = attn_mask | dead if attn_mask.dtype == torch.bool else attn_mask.masked_fill(dead, 0.0)
        else:
            dead = None

    if backend == "math" or need_weights:
        if enable_gqa and key.shape[-3] != query.shape[-3]:
            # query head h reads key/value head h // group: each K/V head repeated `group` times in a row
            group = query.shape[-3] // key.shape[-3]
            key = key.repeat_interleave(group, dim=-3)  # (..., G, Tk, D) -> (..., Hq, Tk, D)
            value = value.repeat_interleave(group, dim=-3)
        out, weights = _math_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    else:
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
            enable_gqa=enable_gqa,
        )
        weights = None
    if dead is not None:
        out = out.masked_fill(dead, 0.0)
        if weights is not None:
            weights = weights.masked_fill(dead, 0.0)
    return out, (weights if need_weights else None)


def _math_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    dropout_p: float,
    is_causal: bool,
    scale: Optional[float],
) -> tuple[Tensor, Tensor]:
    """The readable path: every step of the formula, weights kept."""
    d_k = query.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale  # (..., Tq, Dk) @ (..., Dk, Tk) -> (..., Tq, Tk)
    if is_causal:
        scores = scores.masked_fill(~causal_mask(scores.shape[-2], scores.shape[-1], device=scores.device), float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    # softmax in float32 for half inputs: exp() of bf16 scores loses too much
    weights = torch.softmax(scores.float(), dim=-1).to(query.dtype)  # (..., Tq, Tk), rows sum to 1
    used = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    out = used @ value  # (..., Tq, Tk) @ (..., Tk, Dv) -> (..., Tq, Dv)
    return out, weights


def causal_mask(q_len: int, k_len: Optional[int] = None, *, device: Optional[torch.device | str] = None) -> Tensor:
    """Bool (q_len, k_len) mask, True where query i may attend to key j.

    Aligned lower-right: query i sits at key position ``k_len - q_len + i``, so the last query
    sees every key. With q_len == k_len this is the familiar lower triangle; with q_len=1 (one
    decode step after a cache of k_len-1 tokens) it is a row of all True.
    """
    k_len = q_len if k_len is None else k_len
    for name, n in (("q_len", q_len), ("k_len", k_len)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be a positive int, got {n!r}")
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
    return (token_ids != pad_id)[:, None, None, :]  # (B, 1, 1, T)


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention in parallel, concatenated, then mixed by W_O.

    With ``n_kv_heads`` = G < H (grouped-query attention; G = 1 is multi-query) the keys and values
    have only G heads, ``k_proj``/``v_proj`` map C -> G * D, and query head h reads key/value head
    h // (H / G). Fewer key/value heads mean a smaller KV cache; the weights are still per query head.

    Args:
        d_model: model width C; must be divisible by n_heads.
        n_heads: number of (query) heads H; each head has width D = C / H.
        n_kv_heads: number of key/value heads G (None = H); H must be divisible by G.
        bias: bias in the four projections.
        dropout: dropout on the attention weights (training only).

    Shapes:
        x (B, Tq, C); context (B, Tk, C) for cross-attention (keys and values from it).
        Returns out (B, Tq, C) and weights (B, H, Tq, Tk) when need_weights, else None.
    """

    def __init__(self, d_model: int, n_heads: int, *, n_kv_heads: Optional[int] = None, bias: bool = True,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if n_heads < 1 or d_model < 1:
            raise ValueError(f"d_model and n_heads must be positive, got d_model={d_model}, n_heads={n_heads}")
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}: each head needs an equal "
                f"share D = d_model / n_heads; pick n_heads among the divisors of {d_model}"
            )
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, int) or n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(
                f"n_heads={n_heads} must be divisible by n_kv_heads={n_kv_heads!r} (a positive int): each "
                f"key/value head serves an equal group of query heads; pick a divisor of {n_heads}"
            )
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.n_kv_heads = n_kv_heads
        self.dropout = dropout
        kv_width = n_kv_heads * self.head_dim  # G * D (= C for multi-head attention)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.v_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, t: Tensor) -> Tensor:
        """(B, T, H * D) -> (B, H, T, D). The transpose matters: a bare view would cut across tokens.

        Also splits keys/values (B, T, G * D) -> (B, G, T, D): the head count is read off the width."""
        B, T, width = t.shape
        return t.view(B, T, width // self.head_dim, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def merge_heads(self, t: Tensor) -> Tensor:
        """(B, H, T, D) -> (B, T, C): heads side by side (concatenation, not a sum)."""
        B, H, T, D = t.shape
        return t.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H, D) -> (B, T, C)

    def _check_input(self, name: str, t: Tensor) -> None:
        if not isinstance(t, Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
            shape = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must have shape (B, T, d_model={self.d_model}), got {shape}")

    def forward(
        self,
        x: Tensor,
        context: Optional[Tensor] = None,
        *,
        attn_mask: Optional[Tensor] = None,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: Any = None,
        layer_idx: int = 0,
        rope: Optional[nn.Module] = None,
        positions: Optional[Tensor] = None,
        backend: str = "auto",
    ) -> tuple[Tensor, Optional[Tensor]]:
        """Self-attention (context None) or cross-attention over ``context``.

        ``rope`` (an :class:`attnlib.RotaryEmbedding`) with ``positions`` (Tq,) rotates the queries
        and keys of self-attention before the scores (and before caching the keys).

        ``cache`` (an :class:`attnlib.KVCache`) makes decoding incremental: for self-attention the
        new keys/values are appended to layer ``layer_idx`` and the queries attend to everything
        held; for cross-attention the context's keys/values are computed once and reused.
        """
        self._check_input("x", x)
        B, Tq, _ = x.shape
        q = self.split_heads(self.q_proj(x))  # (B, H, Tq, D)
        if context is None:  # self-attention
            k = self.split_heads(self.k_proj(x))  # (B, G, Tq, D)
            v = self.split_heads(self.v_proj(x))
            if rope is not None:
                if positions is None:
                    start = cache.layer_len(layer_idx) if cache is not None else 0
                    positions = torch.arange(start, start + Tq, device=x.device)
                q, k = rope(q, positions), rope(k, positions)
            if cache is not None:
                k, v = cache.update(layer_idx, k, v)  # (B, G, T_total, D): the cache holds G heads
        else:  # cross-attention: keys and values come from the other sequence
            if cache is not None and cache.has_cross(layer_idx):
                k, v = cache.get_cross(layer_idx)
            else:
                self._check_input("context", context)
                if context.shape[0] != B:
                    raise ValueError(f"x has batch {B} but context has batch {context.shape[0]}")
                k = self.split_heads(self.k_proj(context))  # (B, G, Tk, D)
                v = self.split_heads(self.v_proj(context))
                if cache is not None:
                    cache.set_cross(layer_idx, k, v)
        tk = k.shape[-2]
        if is_causal and Tq == 1 and tk > 1 and attn_mask is None:
            # One decode step: the single query is the newest token and may see every held key,
            # so no mask is needed (and the fused kernels stay available).
            is_causal = False
        elif is_causal and tk != Tq:
            # A decode step: the queries are the last Tq of Tk positions (lower-right alignment).
            causal = causal_mask(Tq, tk, device=x.device)
            attn_mask = causal if attn_mask is None else (attn_mask & causal if attn_mask.dtype == torch.bool
                                                          else attn_mask.masked_fill(~causal, float("-inf")))
            is_causal = False
        elif is_causal and attn_mask is not None:
            causal = causal_mask(Tq, tk, device=x.device)
            attn_mask = (attn_mask & causal if attn_mask.dtype == torch.bool
                         else attn_mask.masked_fill(~causal, float("-inf")))
            is_causal = False
        out, weights = scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal, need_weights=need_weights, backend=backend,
            enable_gqa=self.n_kv_heads != self.n_heads,
        )  # out (B, H, Tq, D), weights (B, H, Tq, Tk)
        return self.out_proj(self.merge_heads(out)), weights
