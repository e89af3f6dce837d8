"""MultiHeadAttention: H heads of scaled dot-product attention, side by side, mixed by W_O."""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor, nn

from ._checks import as_dropout, as_int, check_flag, check_like_weights, checking
from .attention import attend, causal_mask, check_backend, check_mask
from .dropout import dropping
from .cache import KVCache
from .checks import check_cache
from .positional import apply_rotary, check_rope
from .windows import check_window, sliding_window_mask


def check_sizes(d_model: Any, n_heads: Any, n_kv_heads: Any = None) -> tuple[int, int, int]:
    """d_model, n_heads and n_kv_heads (None = n_heads) as ints that split into equal heads."""
    C, H = as_int(d_model), as_int(n_heads)
    for name, n, value in (("d_model", d_model, C), ("n_heads", n_heads, H)):
        if value is None:
            raise TypeError(f"{name} must be an int, got {n!r}")
        if value < 1:
            raise ValueError(f"{name} must be a positive int, got {name}={n!r}")
    if C % H != 0:
        raise ValueError(f"d_model={C} is not divisible by n_heads={H}: each head needs an equal "
                         f"share D = d_model / n_heads; pick n_heads among the divisors of {C}")
    G = H if n_kv_heads is None else as_int(n_kv_heads)
    if G is None or G < 1 or H % G:
        raise ValueError(f"n_heads={H} must be divisible by n_kv_heads={n_kv_heads!r} (a positive "
                         f"int): each key/value head serves an equal group of query heads; pick a "
                         f"divisor of {H}")
    return C, H, G


class MultiHeadAttention(nn.Module):
    """h heads of scaled dot-product attention in parallel, concatenated, then mixed by W_O.

    With ``n_kv_heads`` = G < H (grouped-query attention; G = 1 is multi-query) the keys and values
    have only G heads, ``k_proj``/``v_proj`` map C -> G * D, and query head h reads key/value head
    h // (H / G). Fewer key/value heads mean a smaller KV cache; the weights are still per query
    head.

    Args:
        d_model: model width C; must be divisible by n_heads.
        n_heads: number of (query) heads H; each head has width D = C / H.
        n_kv_heads: number of key/value heads G (None = H); H must be divisible by G.
        bias: bias in the four projections.
        dropout: dropout on the attention weights (training only).
        sliding_window: W: causal self-attention where query i sees keys i-W+1 .. i only
            (Mistral); None = every earlier key. Keys older than that leave a KVCache.

    Shapes:
        x (B, Tq, C); context (B, Tk, C) for cross-attention (keys and values from it).
        Returns out (B, Tq, C) and weights (B, H, Tq, Tk) when need_weights, else None.
    """

    def __init__(self, d_model: int, n_heads: int, *, n_kv_heads: Optional[int] = None,
                 bias: bool = True, dropout: float = 0.0,
                 sliding_window: Optional[int] = None) -> None:
        super().__init__()
        C, H, G = check_sizes(d_model, n_heads, n_kv_heads)
        check_flag("bias", bias)
        p = as_dropout(dropout)
        self.sliding_window = None if sliding_window is None else check_window(sliding_window)
        self.d_model, self.n_heads, self.n_kv_heads, self.head_dim = C, H, G, C // H
        self.dropout = p
        self.q_proj = nn.Linear(C, C, bias=bias)           # W_Q: all H query heads side by side
        self.k_proj = nn.Linear(C, G * self.head_dim, bias=bias)  # W_K: G key heads
        self.v_proj = nn.Linear(C, G * self.head_dim, bias=bias)  # W_V: G value heads
        self.out_proj = nn.Linear(C, C, bias=bias)         # W_O: mixes the concatenated heads

    def split_heads(self, t: Tensor) -> Tensor:
        """(B, T, H * D) -> (B, H, T, D). The transpose matters: a bare view would cut across
        tokens.

        Also splits keys/values (B, T, G * D) -> (B, G, T, D): the count is read off the width.
        :meth:`forward` writes the same view out (a method call per head split is a decode
        step's Python overhead)."""
        return t.view(t.shape[0], t.shape[1], -1, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def merge_heads(self, t: Tensor) -> Tensor:
        """(B, H, T, D) -> (B, T, C): heads side by side (concatenation, not a sum); written out
        in :meth:`forward`."""
        return t.transpose(1, 2).flatten(2)  # (B, T, H, D) -> (B, T, H * D)

    def check_input(self, name: str, t: Any) -> None:
        """t must be (B, T, d_model) on the weights' device, in their dtype (or under autocast)."""
        if not isinstance(t, Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
            shape = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must have shape (B, T, d_model={self.d_model}), got {shape}")
        check_like_weights(name, t, self.q_proj.weight)

    def forward(self, x: Tensor, context: Optional[Tensor] = None, *,
                attn_mask: Optional[Tensor] = None, is_causal: bool = False,
                need_weights: bool = False, cache: Optional[KVCache] = None, layer_idx: int = 0,
                rope: Optional[tuple[Tensor, Tensor]] = None,
                backend: str = "auto") -> tuple[Tensor, Optional[Tensor]]:
        """Self-attention (context None) or cross-attention over ``context``.

        Args:
            attn_mask: bool (True = may attend) or float (added), broadcastable to (B, H, Tq, Tk);
                with is_causal it is combined with the causal mask.
            is_causal: query i sees keys up to its own position (after what the cache holds);
                with a sliding window, only the last ``sliding_window`` of them (required then).
            cache, layer_idx: a KVCache and this layer's slot in it. Self-attention appends its new
                keys/values there and attends over everything held; cross-attention computes the
                context's keys/values once and reuses them.
            rope: (cos, sin), each (Tq, D), the rotation at x's positions
                (:meth:`attnlib.RotaryEmbedding.cos_sin`): self-attention rotates queries and
                keys with it before the scores (and before caching the keys).
            backend: "auto" | "math" | "sdpa", as in :func:`attnlib.scaled_dot_product_attention`.
        """
        if checking():  # a model that calls this layer has checked its arguments already
            self.check_call(x, context, attn_mask, is_causal, need_weights, cache, layer_idx,
                            backend, rope)
        B, T, D = x.shape[0], x.shape[1], self.head_dim  # split_heads written out, as nanoGPT
        q = self.q_proj(x).view(B, T, -1, D).transpose(1, 2)  # (B, H, Tq, D)
        if context is None:  # self-attention: keys and values from x itself
            # (B, G, Tq, D) each: G key/value heads
            k = self.k_proj(x).view(B, T, -1, D).transpose(1, 2)
            v = self.v_proj(x).view(B, T, -1, D).transpose(1, 2)
            if rope is not None:
                q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
            if cache is not None:
                # (B, G, T_total, D): everything held (with a window: what the queries can see)
                k, v = cache.update(layer_idx, k, v, window=self.sliding_window)
        elif cache is not None and cache.has_cross(layer_idx):
            k, v = cache.get_cross(layer_idx)  # the source's keys/values, from the first step
        else:  # cross-attention: keys and values from the other sequence
            k, v = self.split_heads(self.k_proj(context)), self.split_heads(self.v_proj(context))
            if cache is not None:
                cache.set_cross(layer_idx, k, v, source=context)
        if is_causal:
            attn_mask, is_causal = causal(attn_mask, T, k, self.sliding_window)
        p = self.dropout if self.training and dropping(self) else 0.0  # weights' dropout
        out, weights = attend(q, k, v, attn_mask, p, is_causal, need_weights=need_weights,
                              backend=backend, enable_gqa=self.n_kv_heads != self.n_heads)
        return self.out_proj(out.transpose(1, 2).flatten(2)), weights  # merge_heads: (B, Tq, C)

    def check_call(self, x: Any, context: Any, attn_mask: Any, is_causal: Any, need_weights: Any,
                   cache: Any, layer_idx: Any, backend: Any, rope: Any = None) -> None:
        """Every argument of :meth:`forward`, before anything is projected or cached."""
        self.check_input("x", x)
        B, Tq, _ = x.shape
        if context is not None and rope is not None:  # forward would ignore it
            raise ValueError("rope rotates self-attention's queries and keys; with a context "
                             "(cross-attention) pass rope=None")
        check_rope(rope, Tq, self.head_dim)
        check_cache(cache)
        cached = cache is not None and cache.has_cross(layer_idx)
        if context is not None:
            self.check_input("context", context)
            if context.shape[0] != B:
                raise ValueError(f"x has batch {B} but context has batch {context.shape[0]}")
            if cached:  # the held keys/values must be this context's
                cache.check_source(context)
        for name, flag in (("is_causal", is_causal), ("need_weights", need_weights)):
            check_flag(name, flag)
        check_backend(backend, need_weights)
        if self.sliding_window is not None and (context is not None or not is_causal):
            raise ValueError(f"this MultiHeadAttention has sliding_window={self.sliding_window}, "
                             f"a window over its own earlier keys: call it with is_causal=True "
                             f"and no context (or build it with sliding_window=None)")
        if attn_mask is not None:  # its kind and shape
            if context is None:  # the queries see what the cache holds and themselves
                held = cache.layer_len(as_int(layer_idx) or 0) if cache is not None else 0
                if self.sliding_window is not None:  # a rolling cache hands over the last W - 1
                    held = min(held, self.sliding_window - 1)
                tk = held + Tq
            else:
                tk = context.shape[1]
            check_mask(attn_mask, (B, self.n_heads, Tq, tk))


def causal(attn_mask: Optional[Tensor], tq: int, keys: Tensor,
           window: Optional[int] = None) -> tuple[Optional[Tensor], bool]:
    """(mask, is_causal) for Tq queries that are the last of the Tk positions of ``keys``
    (..., Tk, D) (lower-right): torch's own is_causal where it means that (Tq == Tk, no other
    mask), else one explicit mask. With a sliding ``window`` shorter than the Tk keys, the
    explicit mask also hides the keys behind it."""
    if window is not None and keys.shape[-2] > window:  # some query has keys behind its window
        allowed = sliding_window_mask(tq, keys.shape[-2], window, device=keys.device)
    elif attn_mask is None and tq in (1, keys.shape[-2]):  # the square, or one new token that
        return None, tq == keys.shape[-2]                    # sees every key: nothing to mask
    else:
        allowed = causal_mask(tq, keys.shape[-2], device=keys.device)
    if attn_mask is None:
        return allowed, False
    if attn_mask.dtype == torch.bool:
        return attn_mask & allowed, False
    return attn_mask.masked_fill(~allowed, float("-inf")), False
