"""MultiHeadAttention: H heads of scaled dot-product attention, with a fused Q/K/V fast path.

``q_proj``, ``k_proj`` and ``v_proj`` are three ordinary ``nn.Linear`` modules: they load, train
and show up in ``state_dict()`` exactly as written. For self-attention without autograd (decoding,
evaluation) one matmul with the three weights stacked does the work of three; that stacked
weight is built once and rebuilt whenever any of the six parameters changes (an optimizer step,
``load_state_dict``, ``.to()``), detected from each parameter's version counter and storage.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import _check_mask, causal_mask, scaled_dot_product_attention
from .cache import check_cache
from .kernels import Linear, linear, params_key


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

    fuse_qkv: bool = True  # class-wide switch for the fused q/k/v matmul (benchmarks turn it off)

    def __init__(self, d_model: int, n_heads: int, *, n_kv_heads: Optional[int] = None, bias: bool = True,
                 dropout: float = 0.0) -> None:
        super().__init__()
        for name, n in (("d_model", d_model), ("n_heads", n_heads)):
            if isinstance(n, bool) or not isinstance(n, int):
                raise TypeError(f"{name} must be an int, got {n!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
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
        self.q_proj = Linear(d_model, d_model, bias=bias)
        self.k_proj = Linear(d_model, kv_width, bias=bias)
        self.v_proj = Linear(d_model, kv_width, bias=bias)
        self.out_proj = Linear(d_model, d_model, bias=bias)
        # (key, weight (C + 2 G D, C), bias or None): the stacked q/k/v projection, see fused_qkv
        self._fused: Optional[tuple[tuple[Any, ...], Tensor, Optional[Tensor]]] = None

    def _qkv_params(self) -> list[Optional[Tensor]]:
        return [self.q_proj.weight, self.k_proj.weight, self.v_proj.weight,
                self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]

    def fused_qkv(self) -> tuple[Tensor, Optional[Tensor]]:
        """The q/k/v weights stacked into one (C + 2 G D, C) matrix (and biases into one vector).

        Built once and reused while every one of the six parameters keeps its version counter
        (bumped by every in-place update: optimizer steps, ``load_state_dict``, ``nn.init``) and
        its storage (``.to()``, reassignment). Writes through ``param.data`` bypass the version
        counter: after one, call ``train()`` (which drops the stack). Call it without
        autograd only: the stack is a copy, so gradients would not reach the three modules. It
        costs the memory of the three weights once more while held."""
        params = self._qkv_params()
        key = params_key(params)  # None: parameters made under inference_mode, rebuilt every call
        fused = self.__dict__.get("_fused")  # absent on a module pickled before it existed
        if fused is None or key is None or fused[0] != key:
            with torch.no_grad():
                w = torch.cat(params[:3])  # (C + 2 G D, C): rows of W_Q, then W_K, then W_V
                b = None if params[3] is None else torch.cat(params[3:])  # (C + 2 G D,)
            fused = self._fused = (key, w, b)
        return fused[1], fused[2]

    def train(self, mode: bool = True) -> "MultiHeadAttention":
        """As nn.Module.train; ``train(True)`` also drops the stacked q/k/v weight (training does
        not use it); ``eval()`` keeps it, so repeated ``generate`` calls reuse it."""
        if mode:
            self._fused = None
        return super().train(mode)

    def __getstate__(self) -> dict:
        """Pickling (``torch.save(module)``, ``copy.deepcopy``) leaves the stacked q/k/v out."""
        state = super().__getstate__()
        state["_fused"] = None
        return state

    def _unfused_needed(self, x: Tensor) -> bool:
        """Autograd needs the three modules (gradients reach them); so do hooks on them."""
        projs = (self.q_proj, self.k_proj, self.v_proj)
        if not self.fuse_qkv:
            return True
        if torch.is_grad_enabled() and (x.requires_grad or any(m.weight.requires_grad for m in projs)):
            return True
        hooks = nn.modules.module
        return bool(hooks._global_forward_hooks or hooks._global_forward_pre_hooks
                    or any(m._forward_hooks or m._forward_pre_hooks for m in projs))

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention projections of x (B, T, C): q (B, H, T, D), k and v (B, G, T, D).

        Without autograd one matmul with the stacked weight (see :meth:`fused_qkv`), split by
        [C, G D, G D]; with autograd, or forward hooks on the projections, the three nn.Linear
        modules (so gradients reach them and their hooks fire)."""
        if self._unfused_needed(x):
            return (self.split_heads(self.q_proj(x)), self.split_heads(self.k_proj(x)),
                    self.split_heads(self.v_proj(x)))
        w, b = self.fused_qkv()
        kv = self.n_kv_heads * self.head_dim
        q, k, v = linear(x, w, b).split([self.d_model, kv, kv], dim=-1)  # (B, T, C), (B, T, G D) x 2
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

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
        if t.dtype != self.q_proj.weight.dtype and not torch.is_autocast_enabled(t.device.type):
            raise TypeError(f"{name} has dtype {t.dtype} but the module's weights are {self.q_proj.weight.dtype}; "
                            f"convert one of them, e.g. {name}.to({self.q_proj.weight.dtype}) or module.to({t.dtype})")

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
        if cache is not None:
            check_cache(cache)
        if attn_mask is not None:  # its kind and shape, before anything is projected or cached
            if context is None:  # the queries see what the cache holds and themselves
                tk = (cache.layer_len(layer_idx) if cache is not None else 0) + Tq
            elif cache is not None and cache.has_cross(layer_idx):
                tk = cache.get_cross(layer_idx)[0].shape[-2]
            else:
                self._check_input("context", context)
                tk = context.shape[1]
            _check_mask(attn_mask, (B, self.n_heads, Tq, tk), values=False)  # values: in the kernel call
        if context is None:  # self-attention
            q, k, v = self.project_qkv(x)  # (B, H, Tq, D), (B, G, Tq, D), (B, G, Tq, D)
            if rope is not None:
                if positions is None:
                    start = cache.layer_len(layer_idx) if cache is not None else 0
                    positions = torch.arange(start, start + Tq, device=x.device)
                q, k = rope(q, positions), rope(k, positions)
            if cache is not None:
                k, v = cache.update(layer_idx, k, v)  # (B, G, T_total, D): the cache holds G heads
        else:  # cross-attention: keys and values come from the other sequence
            q = self.split_heads(self.q_proj(x))  # (B, H, Tq, D)
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
