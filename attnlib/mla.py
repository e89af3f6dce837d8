"""MultiHeadLatentAttention: DeepSeek-V2/V3's attention, whose cache holds one latent per token.

Multi-head attention caches H keys and H values per token and layer. Multi-head latent attention
(MLA, DeepSeek-V2, 2024) caches one latent vector c_kv of width r = kv_lora_rank per token, plus
one small RoPE key shared by every head; each head's key and value are read off the latent by a
linear map (``kv_b_proj`` holds W_UK and W_UV, head by head):

    c_kv    = RMSNorm(W_DKV x)            (r,)          cached
    k_rope  = RoPE(W_KR x)                (dr,)         cached, shared by the H heads
    k_h     = [W_UK_h c_kv ; k_rope]      (dn + dr,)    expanded from the cache at every step
    v_h     = W_UV_h c_kv                 (dv,)

Position rides on separate dims (dr = qk_rope_head_dim) because a key that is a linear function
of the latent must stay one: q_h . k_h = (W_UK_h^T q_nope_h) . c_kv + q_rope_h . k_rope, so
W_UK can be folded into the query, and likewise W_UV into the output, and attention can run over
the cached latent itself. :meth:`MultiHeadLatentAttention.forward` expands keys and values (the
readable path); :meth:`MultiHeadLatentAttention.absorbed` is the folded computation; tests hold
them equal.

With a :class:`attnlib.KVCache` a layer stores ``update(layer_idx, c_kv, k_rope)``, (B, 1, T, r)
and (B, 1, T, dr): the cache's "keys" are the latents and its "values" the RoPE keys, so
``cache.nbytes`` = n_layers x B x T x (r + dr) x element size.

Submodule names and shapes are Hugging Face's ``DeepseekV3Attention``, so weights load one to one.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor, nn

from ._checks import as_dropout, as_int, as_size, check_flag, check_like_weights, checking
from .attention import attend, check_backend, check_mask
from .cache import KVCache
from .checks import check_cache
from .config import TransformerConfig
from .dropout import dropping
from .mha import causal
from .norms import RMSNorm
from .positional import apply_rotary, check_rope


class MultiHeadLatentAttention(nn.Module):
    """H heads whose keys and values are expanded from one cached latent per token (DeepSeek).

    Args:
        d_model: model width C. n_heads: number of heads H.
        kv_lora_rank: r, width of the latent c_kv (what a KVCache holds, with the RoPE key).
        qk_nope_head_dim: dn, per-head query/key dims that carry no position (keys: from c_kv).
        qk_rope_head_dim: dr, per-head query dims rotated by RoPE; the key's dr rotated dims are
            one vector shared by every head (even; 0: no RoPE).
        v_head_dim: dv, per-head value width.
        q_lora_rank: queries pass through a latent of this width too (q_a_proj -> q_a_layernorm
            -> q_b_proj: fewer weights, nothing cached); None: one q_proj.
        bias: biases in q_a_proj, kv_a_proj_with_mqa and o_proj (DeepSeek's attention_bias; the
            up-projections q_proj, q_b_proj and kv_b_proj have none, as in DeepSeek).
        dropout: on the attention weights (training only).
        eps: of the two latents' RMSNorms (DeepSeek's 1e-6, whatever its rms_norm_eps).

    Shapes:
        x (B, Tq, C) -> out (B, Tq, C); weights (B, H, Tq, Tk) when need_weights, else None.
    """

    def __init__(self, d_model: int, n_heads: int, *, kv_lora_rank: int, qk_nope_head_dim: int,
                 qk_rope_head_dim: int, v_head_dim: int, q_lora_rank: Optional[int] = None,
                 bias: bool = True, dropout: float = 0.0, eps: float = 1e-6) -> None:
        super().__init__()
        C, H = as_size("d_model", d_model), as_size("n_heads", n_heads)
        r, dn = as_size("kv_lora_rank", kv_lora_rank), as_size("qk_nope_head_dim", qk_nope_head_dim)
        dr = as_size("qk_rope_head_dim", qk_rope_head_dim, minimum=0)
        dv = as_size("v_head_dim", v_head_dim)
        if dr % 2:
            raise ValueError(f"qk_rope_head_dim must be even (RoPE turns dims in pairs), got "
                             f"qk_rope_head_dim={qk_rope_head_dim!r}")
        rq = None if q_lora_rank is None else as_size("q_lora_rank", q_lora_rank)
        check_flag("bias", bias)
        self.d_model, self.n_heads, self.dropout = C, H, as_dropout(dropout)
        self.kv_lora_rank, self.q_lora_rank = r, rq
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = dn, dr, dv
        self.scale = (dn + dr) ** -0.5  # 1/sqrt of the width of a query-key dot product
        if rq is None:
            self.q_proj = nn.Linear(C, H * (dn + dr), bias=False)  # W_Q: every head's query
            self.q_a_proj = self.q_a_layernorm = self.q_b_proj = None
        else:
            self.q_proj = None
            self.q_a_proj = nn.Linear(C, rq, bias=bias)            # down to the query latent
            self.q_a_layernorm = RMSNorm(rq, eps)
            self.q_b_proj = nn.Linear(rq, H * (dn + dr), bias=False)  # up to every head's query
        self.kv_a_proj_with_mqa = nn.Linear(C, r + dr, bias=bias)  # [W_DKV; W_KR]: latent, RoPE key
        self.kv_a_layernorm = RMSNorm(r, eps)
        self.kv_b_proj = nn.Linear(r, H * (dn + dv), bias=False)  # per head: [W_UK_h; W_UV_h]
        self.o_proj = nn.Linear(H * dv, C, bias=bias)              # W_O: mixes the heads

    @classmethod
    def from_config(cls, cfg: TransformerConfig) -> "MultiHeadLatentAttention":
        """The attention of a ``attention="mla"`` config (its MLA sizes, bias and dropout)."""
        return cls(cfg.d_model, cfg.n_heads, kv_lora_rank=cfg.kv_lora_rank,
                   qk_nope_head_dim=cfg.qk_nope_head_dim, qk_rope_head_dim=cfg.qk_rope_head_dim,
                   v_head_dim=cfg.v_head_dim, q_lora_rank=cfg.q_lora_rank, bias=cfg.bias,
                   dropout=cfg.dropout)

    # --- The three projections ------------------------------------------------------------------
    def queries(self, x: Tensor, rope: Optional[tuple[Tensor, Tensor]] = None
                ) -> tuple[Tensor, Tensor]:
        """Every head's query, split into the dims that meet the latent and the RoPE dims.

        Returns q_nope (B, H, T, dn) and q_rope (B, H, T, dr), rotated when ``rope`` is given."""
        B, T, _ = x.shape
        if self.q_proj is not None:
            q = self.q_proj(x)  # (B, T, H * (dn + dr))
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))  # through the query latent
        q = q.view(B, T, self.n_heads, -1).transpose(1, 2)  # (B, H, T, dn + dr)
        q_nope, q_rope = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        return q_nope, (apply_rotary(q_rope, *rope) if rope is not None else q_rope)

    def latent(self, x: Tensor, rope: Optional[tuple[Tensor, Tensor]] = None
               ) -> tuple[Tensor, Tensor]:
        """What a token offers to later queries, as the cache holds it: the normalised latent
        c_kv (B, 1, T, r) and the RoPE key (B, 1, T, dr), rotated when ``rope`` is given. The
        1 is the one "head" both have: the RoPE key serves every head."""
        c_kv, k_rope = self.kv_a_proj_with_mqa(x).split([self.kv_lora_rank, self.qk_rope_head_dim],
                                                        dim=-1)  # (B, T, r), (B, T, dr)
        c_kv = self.kv_a_layernorm(c_kv)[:, None]  # (B, 1, T, r)
        k_rope = k_rope[:, None]  # (B, 1, T, dr)
        return c_kv, (apply_rotary(k_rope, *rope) if rope is not None else k_rope)

    def expand(self, c_kv: Tensor, k_rope: Tensor) -> tuple[Tensor, Tensor]:
        """Every head's keys and values from the latent (kv_b_proj) and the shared RoPE key.

        c_kv (B, 1, Tk, r), k_rope (B, 1, Tk, dr) -> k (B, H, Tk, dn + dr), v (B, H, Tk, dv)."""
        B, _, Tk, _ = c_kv.shape
        kv = self.kv_b_proj(c_kv).view(B, Tk, self.n_heads, -1)  # (B, Tk, H, dn + dv)
        kv = kv.transpose(1, 2)  # (B, H, Tk, dn + dv)
        k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        k_rope = k_rope.expand(-1, self.n_heads, -1, -1)  # (B, H, Tk, dr): a view, no copy
        k = torch.cat([k_nope, k_rope], dim=-1)  # (B, H, Tk, dn + dr)
        return k, v

    # --- Attention ------------------------------------------------------------------------------
    def forward(self, x: Tensor, context: Optional[Tensor] = None, *,
                attn_mask: Optional[Tensor] = None, is_causal: bool = False,
                need_weights: bool = False, cache: Optional[KVCache] = None, layer_idx: int = 0,
                rope: Optional[tuple[Tensor, Tensor]] = None,
                backend: str = "auto") -> tuple[Tensor, Optional[Tensor]]:
        """Self-attention over x (and what the cache holds), as MultiHeadAttention's call.

        Args:
            context: must be None: MLA is self-attention (the argument keeps the call shape).
            attn_mask: bool (True = may attend) or float (added), broadcastable to
                (B, H, Tq, Tk); with is_causal it is combined with the causal mask.
            is_causal: query i sees keys up to its own position (after what the cache holds).
            cache, layer_idx: a KVCache and this layer's slot: the new latents and RoPE keys are
                appended there and keys and values are expanded from everything held.
            rope: (cos, sin), each (Tq, dr), the rotation at x's positions.
            backend: "auto" | "math" | "sdpa", as in :func:`attnlib.scaled_dot_product_attention`.
        """
        if checking():  # a model that calls this layer has checked its arguments already
            self.check_call(x, context, attn_mask, is_causal, need_weights, cache, layer_idx,
                            backend, rope)
        q_nope, q_rope = self.queries(x, rope)  # (B, H, Tq, dn), (B, H, Tq, dr)
        c_kv, k_rope = self.latent(x, rope)  # (B, 1, Tq, r), (B, 1, Tq, dr)
        if cache is not None:  # the cache holds the latent, never the expanded keys and values
            c_kv, k_rope = cache.update(layer_idx, c_kv, k_rope)  # (B, 1, Tk, r), (B, 1, Tk, dr)
        k, v = self.expand(c_kv, k_rope)  # (B, H, Tk, dn + dr), (B, H, Tk, dv)
        q = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, Tq, dn + dr)
        if is_causal:
            attn_mask, is_causal = causal(attn_mask, x.shape[1], k)
        p = self.dropout if self.training and dropping(self) else 0.0  # weights' dropout
        out, weights = attend(q, k, v, attn_mask, p, is_causal, self.scale,
                              need_weights=need_weights, backend=backend)  # (B, H, Tq, dv)
        return self.o_proj(out.transpose(1, 2).flatten(2)), weights  # (B, Tq, H * dv) -> (B, Tq, C)

    def absorbed(self, x: Tensor, *, attn_mask: Optional[Tensor] = None, is_causal: bool = False,
                 need_weights: bool = False, cache: Optional[KVCache] = None, layer_idx: int = 0,
                 rope: Optional[tuple[Tensor, Tensor]] = None,
                 backend: str = "auto") -> tuple[Tensor, Optional[Tensor]]:
        """:meth:`forward`'s result computed over the latent itself, with W_UK and W_UV absorbed.

        W_UK_h is folded into head h's query (q_nope_h W_UK_h, width r) and W_UV_h into its
        output, so no key or value is ever expanded: attention becomes multi-query attention
        with one key [c_kv ; k_rope] (width r + dr) and one value c_kv (width r) shared by every
        head, still scaled by 1/sqrt(dn + dr). Same arguments, cache use and results as forward
        (up to rounding); the model itself runs forward, the readable path."""
        if checking():
            self.check_call(x, None, attn_mask, is_causal, need_weights, cache, layer_idx, backend,
                            rope)
        q_nope, q_rope = self.queries(x, rope)  # (B, H, Tq, dn), (B, H, Tq, dr)
        c_kv, k_rope = self.latent(x, rope)  # (B, 1, Tq, r), (B, 1, Tq, dr)
        if cache is not None:
            c_kv, k_rope = cache.update(layer_idx, c_kv, k_rope)  # (B, 1, Tk, r), (B, 1, Tk, dr)
        H, dn, dv, r = self.n_heads, self.qk_nope_head_dim, self.v_head_dim, self.kv_lora_rank
        w_uk, w_uv = self.kv_b_proj.weight.view(H, dn + dv, r).split([dn, dv], dim=1)
        q_lat = q_nope @ w_uk  # (B, H, Tq, dn) @ (H, dn, r) -> (B, H, Tq, r): W_UK absorbed
        q = torch.cat([q_lat, q_rope], dim=-1)  # (B, H, Tq, r + dr)
        k = torch.cat([c_kv, k_rope], dim=-1)  # (B, 1, Tk, r + dr): one key for every head
        if is_causal:
            attn_mask, is_causal = causal(attn_mask, x.shape[1], k)
        p = self.dropout if self.training and dropping(self) else 0.0
        o_lat, weights = attend(q, k, c_kv, attn_mask, p, is_causal, self.scale,
                                need_weights=need_weights, backend=backend,
                                enable_gqa=True)  # (B, H, Tq, r): a mix of latents per head
        out = o_lat @ w_uv.transpose(1, 2)  # (B, H, Tq, r) @ (H, r, dv) -> (B, H, Tq, dv)
        return self.o_proj(out.transpose(1, 2).flatten(2)), weights  # (B, Tq, C)

    # --- Checks at the door ---------------------------------------------------------------------
    def check_input(self, name: str, t: Any) -> None:
        """t must be (B, T, d_model) on the weights' device, in their dtype (or under autocast)."""
        if not isinstance(t, Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
            shape = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must have shape (B, T, d_model={self.d_model}), got {shape}")
        check_like_weights(name, t, self.kv_a_proj_with_mqa.weight)

    def check_call(self, x: Any, context: Any, attn_mask: Any, is_causal: Any, need_weights: Any,
                   cache: Any, layer_idx: Any, backend: Any, rope: Any = None) -> None:
        """Every argument of :meth:`forward`, before anything is projected or cached."""
        if context is not None:
            raise ValueError("MultiHeadLatentAttention is self-attention only: context must be "
                             "None (for cross-attention use attnlib.MultiHeadAttention)")
        self.check_input("x", x)
        check_rope(rope, x.shape[1], self.qk_rope_head_dim)
        check_cache(cache)
        for name, flag in (("is_causal", is_causal), ("need_weights", need_weights)):
            check_flag(name, flag)
        check_backend(backend, need_weights)
        if attn_mask is not None:  # the queries see what the cache holds and themselves
            held = cache.layer_len(as_int(layer_idx) or 0) if cache is not None else 0
            check_mask(attn_mask, (x.shape[0], self.n_heads, x.shape[1], held + x.shape[1]))
