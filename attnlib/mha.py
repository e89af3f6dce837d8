"""MultiHeadAttention: H heads of scaled dot-product attention, side by side, mixed by W_O."""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor, nn

from ._checks import as_dropout, as_int, checking
from .attention import attend, check_backend, check_flag, check_mask, causal_mask
from .cache import KVCache
from .positional import apply_rotary


def check_sizes(d_model: Any, n_heads: Any, n_kv_heads: Any = None) -> tuple[int, int, int]:
    """d_model, n_heads and n_kv_heads (None = n_heads) as ints that split into equal heads."""
    C, H = as_int(d_model), as_int(n_heads)
    for name, n, value in (("d_model", d_model, C), ("n_heads", n_heads, H)):
        if value is None:
            raise TypeError(f"{name} must be an int, got {n!r}")
        if value < 1:
            raise ValueError(f"{name} must be a positive int, got {name}={n!r}")
    if C % H != 0:
        raise ValueError(f"d_model={C} is not divisible by n_heads={H}: each head needs an equal share "
                         f"D = d_model / n_heads; pick n_heads among the divisors of {C}")
    G = H if n_kv_heads is None else as_int(n_kv_heads)
    if G is None or G < 1 or H % G:
        raise ValueError(f"n_heads={H} must be divisible by n_kv_heads={n_kv_heads!r} (a positive int): each "
                         f"key/value head serves an equal group of query heads; pick a divisor of {H}")
    return C, H, G


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
        C, H, G = check_sizes(d_model, n_heads, n_kv_heads)
        check_flag("bias", bias)
        p = as_dropout(dropout)
        self.d_model, self.n_heads, self.n_kv_heads, self.head_dim = C, H, G, C // H
        self.dropout = p
        self.q_proj = nn.Linear(C, C, bias=bias)           # W_Q: all H query heads side by side
        self.k_proj = nn.Linear(C, G * self.head_dim, bias=bias)  # W_K: G key heads
        self.v_proj = nn.Linear(C, G * self.head_dim, bias=bias)  # W_V: G value heads
        self.out_proj = nn.Linear(C, C, bias=bias)         # W_O: mixes the concatenated heads

    def split_heads(self, t: Tensor) -> Tensor:
        """(B, T, H * D) -> (B, H, T, D). The transpose matters: a bare view would cut across tokens.

        Also splits keys/values (B, T, G * D) -> (B, G, T, D): the head count is read off the width."""
        B, T, width = t.shape
        return t.view(B, T, width // self.head_dim, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def merge_heads(self, t: Tensor) -> Tensor:
        """(B, H, T, D) -> (B, T, C): heads side by side (concatenation, not a sum)."""
        B, H, T, D = t.shape
        return t.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H, D) -> (B, T, C)

    def check_input(self, name: str, t: Any) -> None:
        """t must be (B, T, d_model) on the weights' device, in their dtype (or under autocast)."""
        if not isinstance(t, Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
            shape = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must have shape (B, T, d_model={self.d_model}), got {shape}")
        dtype, device = self.q_proj.weight.dtype, self.q_proj.weight.device
        if t.device != device:
            raise ValueError(f"{name} is on {t.device} but the module's weights are on {device}; move one of "
                             f"them, e.g. {name}.to({str(device)!r})")
        if t.dtype != dtype and not torch.is_autocast_enabled(t.device.type):
            raise TypeError(f"{name} has dtype {t.dtype} but the module's weights are {dtype}; convert one "
                            f"of them, e.g. {name}.to({dtype}) or module.to({t.dtype})")

    def forward(
        self,
        x: Tensor,
        context: Optional[Tensor] = None,
        *,
        attn_mask: Optional[Tensor] = None,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: Optional[KVCache] = None,
        layer_idx: int = 0,
        rope: Optional[tuple[Tensor, Tensor]] = None,
        backend: str = "auto",
    ) -> tuple[Tensor, Optional[Tensor]]:
        """Self-attention (context None) or cross-attention over ``context``.

        Args:
            attn_mask: bool (True = may attend) or float (added), broadcastable to (B, H, Tq, Tk);
                with is_causal it is combined with the causal mask.
            is_causal: query i sees keys up to its own position (after what the cache holds).
            cache, layer_idx: a KVCache and this layer's slot in it. Self-attention appends its new
                keys/values there and attends over everything held; cross-attention computes the
                context's keys/values once and reuses them.
            rope: (cos, sin), each (Tq, D), the rotation at x's positions
                (:meth:`attnlib.RotaryEmbedding.cos_sin`): self-attention rotates queries and
                keys with it before the scores (and before caching the keys).
        """
        if checking():  # a model that calls this layer has checked its arguments already
            self.check_call(x, context, attn_mask, is_causal, need_weights, cache, layer_idx, backend)
        B, Tq, _ = x.shape
        q = self.split_heads(self.q_proj(x))  # (B, H, Tq, D)
        if context is None:  # self-attention: keys and values from x itself
            k = self.split_heads(self.k_proj(x))  # (B, G, Tq, D)
            v = self.split_heads(self.v_proj(x))
            if rope is not None:
                q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
            if cache is not None:
                k, v = cache.update(layer_idx, k, v)  # (B, G, T_total, D): everything held
        elif cache is not None and cache.has_cross(layer_idx):
            k, v = cache.get_cross(layer_idx)  # the source's keys/values, computed at the first step
        else:  # cross-attention: keys and values from the other sequence
            k = self.split_heads(self.k_proj(context))  # (B, G, Tk, D)
            v = self.split_heads(self.v_proj(context))
            if cache is not None:
                cache.set_cross(layer_idx, k, v)

        tk = k.shape[-2]
        if is_causal and Tq == 1 and attn_mask is None:
            is_causal = False  # one new token sees every key held: nothing to mask
        elif is_causal and (attn_mask is not None or Tq != tk):
            # queries are the last Tq of tk positions (lower-right): one explicit mask
            causal = causal_mask(Tq, tk, device=x.device)
            if attn_mask is None:
                attn_mask = causal
            elif attn_mask.dtype == torch.bool:
                attn_mask = attn_mask & causal
            else:
                attn_mask = attn_mask.masked_fill(~causal, float("-inf"))
            is_causal = False
        out, weights = attend(q, k, v, attn_mask, self.dropout if self.training else 0.0, is_causal,
                              need_weights=need_weights, backend=backend,
                              enable_gqa=self.n_kv_heads != self.n_heads)  # (B, H, Tq, D)
        return self.out_proj(self.merge_heads(out)), weights  # (B, Tq, C)

    def check_call(self, x: Any, context: Any, attn_mask: Any, is_causal: Any, need_weights: Any, cache: Any,
                   layer_idx: Any, backend: Any) -> None:
        """Every argument of :meth:`forward`, before anything is projected or cached."""
        self.check_input("x", x)
        B, Tq, _ = x.shape
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"cache must be an attnlib.KVCache or None, got {type(cache).__name__}; "
                            f"make one with attnlib.KVCache()")
        if context is not None and not (cache is not None and cache.has_cross(layer_idx)):
            self.check_input("context", context)
            if context.shape[0] != B:
                raise ValueError(f"x has batch {B} but context has batch {context.shape[0]}")
        for name, flag in (("is_causal", is_causal), ("need_weights", need_weights)):
            check_flag(name, flag)
        check_backend(backend, need_weights)
        if attn_mask is not None:  # its kind and shape
            if context is None:  # the queries see what the cache holds and themselves
                tk = (cache.layer_len(as_int(layer_idx) or 0) if cache is not None else 0) + Tq
            else:
                tk = cache.get_cross(layer_idx)[0].shape[-2] if cache is not None and cache.has_cross(
                    layer_idx) else context.shape[1]
            check_mask(attn_mask, (B, self.n_heads, Tq, tk))
