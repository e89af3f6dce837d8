"""The blocks models are stacked from: the feed-forward network, encoder and decoder layers.

Submodule names follow ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` so that
weights copy over one to one (the tests do exactly that):

==========================  ==========================  ======================================
attnlib                     torch.nn                     role
==========================  ==========================  ======================================
``self_attn``               ``self_attn``                self-attention (q/k/v/out_proj here,
                                                         one packed ``in_proj_weight`` there)
``cross_attn``              ``multihead_attn``           decoder: queries from x, keys/values
                                                         from the encoder output
``ffn.fc1``, ``ffn.fc2``    ``linear1``, ``linear2``     the position-wise feed-forward network
``norm1``                   ``norm1``                    around self-attention
``norm2``                   ``norm2``                    encoder: around the FFN;
                                                         decoder: around cross-attention
``norm3`` (decoder)         ``norm3``                    decoder: around the FFN
==========================  ==========================  ======================================

A decoder layer without cross-attention (a GPT block) has ``norm1`` and ``norm3`` and no
``norm2``, so the names mean the same thing in every decoder.

Pre-norm vs post-norm, the most common confusion: with ``norm_first=True`` each sublayer is
``x + f(norm(x))`` (GPT-2 onwards; the residual path is never normalised); with ``False`` it is
the 2017 ``norm(x + f(x))``.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import as_dropout, as_int, check_like_weights, checking
from .config import ACTIVATIONS, TransformerConfig
from .dropout import dropped
from .embeddings import Embeddings  # noqa: F401 (attnlib.layers.Embeddings, as before)
from .mha import MultiHeadAttention
from .mla import MultiHeadLatentAttention
from .norms import RMSNorm, make_norm


class FeedForward(nn.Module):
    """Position-wise FFN: fc2(act(fc1(x))), applied to every token independently.

    With ``activation="swiglu"`` (Llama) a second input projection ``gate`` multiplies in:
    fc2(silu(gate(x)) * fc1(x)). The hidden width is ``d_ff`` either way (see TransformerConfig).

    Args:
        d_model: C; d_ff: hidden width; activation: "relu" | "gelu" | "gelu_tanh" | "swiglu";
        bias: biases in the projections; dropout: on the output (training only).

    Shapes:
        x (..., C) -> (..., C).
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "gelu", bias: bool = True,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of "
                             f"{', '.join(map(repr, ACTIVATIONS))}")
        for name, n in (("d_model", d_model), ("d_ff", d_ff)):
            if as_int(n) is None or n < 1:
                raise ValueError(f"{name} must be a positive int, got {name}={n!r}")
        d_model, d_ff = as_int(d_model), as_int(d_ff)
        dropout = as_dropout(dropout)
        self.activation, self.act = activation, ACTIVATION_FNS[activation]
        self.fc1 = nn.Linear(d_model, d_ff, bias=bias)
        self.gate = nn.Linear(d_model, d_ff, bias=bias) if activation == "swiglu" else None
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        if checking():
            self.check_input(x)
        # (..., d_ff); SwiGLU gates the hidden layer: silu(gate(x)) * fc1(x)
        h = self.act(self.fc1(x)) if self.gate is None else self.act(self.gate(x)) * self.fc1(x)
        return dropped(self.drop, self.fc2(h))  # (..., C)

    def check_input(self, x: Any) -> None:
        if not isinstance(x, Tensor) or x.dim() < 1 or x.shape[-1] != self.fc1.in_features:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (..., d_model={self.fc1.in_features}), "
                             f"got {shape}")
        check_like_weights("x", x, self.fc1.weight)


# The FFN's nonlinearity on its hidden layer (SwiGLU multiplies in a gate: see FeedForward)
ACTIVATION_FNS = {"relu": F.relu, "gelu": F.gelu,
                  "gelu_tanh": functools.partial(F.gelu, approximate="tanh"), "swiglu": F.silu}


class EncoderLayer(nn.Module):
    """Bidirectional self-attention then FFN, each wrapped in a residual and a LayerNorm.

    Args:
        d_model, n_heads, d_ff: sizes C, H and the FFN width.
        activation, norm_first, dropout, bias, layer_norm_eps, n_kv_heads, norm: as in
        TransformerConfig (``norm`` "layernorm" | "rmsnorm", with eps ``layer_norm_eps``).

    Shapes:
        x (B, T, C) -> (B, T, C); weights (B, H, T, T) when need_weights.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, activation: str = "gelu",
                 norm_first: bool = True, dropout: float = 0.0, bias: bool = True,
                 layer_norm_eps: float = 1e-5, n_kv_heads: Optional[int] = None,
                 norm: str = "layernorm") -> None:
        super().__init__()
        self.norm_first = norm_first
        dropout = as_dropout(dropout)
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias,
                                            dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, activation, bias, dropout)
        self.norm1 = make_norm(norm, d_model, layer_norm_eps)
        self.norm2 = make_norm(norm, d_model, layer_norm_eps)
        self.drop = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, cfg: TransformerConfig) -> "EncoderLayer":
        if cfg.attention != "mha":  # MLA's point is a smaller cache, which only decoding has
            raise ValueError(f"attention={cfg.attention!r} is built by attnlib.GPT only; Encoder "
                             f"and EncoderDecoder need attention='mha'")
        return cls(cfg.d_model, cfg.n_heads, cfg.d_ff, activation=cfg.activation,
                   norm_first=cfg.norm_first, dropout=cfg.dropout, bias=cfg.bias,
                   layer_norm_eps=cfg.layer_norm_eps, n_kv_heads=cfg.n_kv_heads, norm=cfg.norm)

    def forward(self, x: Tensor, *, attn_mask: Optional[Tensor] = None, need_weights: bool = False,
                rope: Optional[tuple[Tensor, Tensor]] = None) -> tuple[Tensor, Optional[Tensor]]:
        """Args: attn_mask (bool True = may attend, or float added), e.g. a padding mask
        (B, 1, 1, T); rope: (cos, sin) (T, D) at the tokens' positions, if any.

        Returns (x (B, T, C), weights (B, H, T, T) or None)."""
        if checking():
            self.self_attn.check_input("x", x)  # before the first LayerNorm sees it
        if self.norm_first:
            a, weights = self.self_attn(self.norm1(x), attn_mask=attn_mask,
                                        need_weights=need_weights, rope=rope)
            x = x + dropped(self.drop, a)
            x = x + self.ffn(self.norm2(x))
        else:
            a, weights = self.self_attn(x, attn_mask=attn_mask, need_weights=need_weights,
                                        rope=rope)
            x = self.norm1(x + dropped(self.drop, a))
            x = self.norm2(x + self.ffn(x))
        return x, weights


class DecoderLayer(nn.Module):
    """Causal self-attention, optional cross-attention over an encoder's output, then FFN.

    Args:
        as EncoderLayer, plus cross_attention: add the cross-attention sublayer (EncoderDecoder);
        False gives a GPT block. self_attn: a ready self-attention module instead of
        MultiHeadAttention (``from_config`` passes MultiHeadLatentAttention for attention="mla").
        sliding_window: W, self-attention's window (see MultiHeadAttention; cross-attention has
        none).

    Shapes:
        x (B, T, C), memory (B, S, C) -> x (B, T, C); self weights (B, H, T, T_total) and cross
        weights (B, H, T, S) when need_weights (T_total = cached + new tokens).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, cross_attention: bool = False,
                 activation: str = "gelu", norm_first: bool = True, dropout: float = 0.0,
                 bias: bool = True, layer_norm_eps: float = 1e-5,
                 n_kv_heads: Optional[int] = None, norm: str = "layernorm",
                 sliding_window: Optional[int] = None,
                 self_attn: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.norm_first = norm_first
        dropout = as_dropout(dropout)
        if self_attn is not None and not isinstance(self_attn, nn.Module):
            raise TypeError(f"self_attn must be an nn.Module (e.g. a MultiHeadLatentAttention) or "
                            f"None, got {type(self_attn).__name__}")
        self.self_attn = self_attn if self_attn is not None else MultiHeadAttention(
            d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias, dropout=dropout,
            sliding_window=sliding_window)
        self.norm1 = make_norm(norm, d_model, layer_norm_eps)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias,
                                                 dropout=dropout)
            self.norm2 = make_norm(norm, d_model, layer_norm_eps)
        else:
            self.cross_attn, self.norm2 = None, None
        self.ffn = FeedForward(d_model, d_ff, activation, bias, dropout)
        self.norm3 = make_norm(norm, d_model, layer_norm_eps)
        self.drop = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, cfg: TransformerConfig, cross_attention: bool = False) -> "DecoderLayer":
        mla = MultiHeadLatentAttention.from_config(cfg) if cfg.attention == "mla" else None
        return cls(cfg.d_model, cfg.n_heads, cfg.d_ff, cross_attention=cross_attention,
                   activation=cfg.activation, norm_first=cfg.norm_first, dropout=cfg.dropout,
                   bias=cfg.bias, layer_norm_eps=cfg.layer_norm_eps, n_kv_heads=cfg.n_kv_heads,
                   norm=cfg.norm, sliding_window=cfg.sliding_window, self_attn=mla)

    def forward(self, x: Tensor, memory: Optional[Tensor] = None, *,
                attn_mask: Optional[Tensor] = None, memory_mask: Optional[Tensor] = None,
                cache: Any = None, layer_idx: int = 0, need_weights: bool = False,
                rope: Optional[tuple[Tensor, Tensor]] = None
                ) -> tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        """Args:
            memory: the encoder output (needed iff the layer has cross-attention).
            attn_mask: extra self-attention mask, combined with the causal one.
            memory_mask: cross-attention mask over the source, e.g. padding (B, 1, 1, S).
            cache, layer_idx: a KVCache and this layer's slot in it (incremental decoding).
            rope: (cos, sin) (T, D) at the new tokens' positions, if any.

        Returns (x, self weights or None, cross weights or None)."""
        if checking():
            self.check_call(x, memory)
        # pre-norm (norm_first): x + f(norm(x)); the 2017 post-norm: norm(x + f(x))
        pre = self.norm_first
        a, self_w = self.self_attn(self.norm1(x) if pre else x, attn_mask=attn_mask, rope=rope,
                                   is_causal=True, cache=cache, layer_idx=layer_idx,
                                   need_weights=need_weights)
        x = x + dropped(self.drop, a) if pre else self.norm1(x + dropped(self.drop, a))
        cross_w = None
        if self.cross_attn is not None:  # queries from x, keys and values from the source
            a, cross_w = self.cross_attn(self.norm2(x) if pre else x, memory, attn_mask=memory_mask,
                                         need_weights=need_weights, cache=cache,
                                         layer_idx=layer_idx)
            x = x + dropped(self.drop, a) if pre else self.norm2(x + dropped(self.drop, a))
        x = x + self.ffn(self.norm3(x)) if pre else self.norm3(x + self.ffn(x))
        return x, self_w, cross_w

    def check_call(self, x: Any, memory: Any) -> None:
        self.self_attn.check_input("x", x)  # before the first LayerNorm sees it
        if (memory is None) != (self.cross_attn is None):
            raise ValueError(f"memory must be given exactly when the layer has cross-attention "
                             f"(cross_attention={self.cross_attn is not None}, memory given="
                             f"{memory is not None})")


def init_weights(module: nn.Module) -> None:
    """GPT-2 style: Linear and Embedding weights ~ N(0, 0.02), biases 0, norms' gains 1 (and
    LayerNorm's biases 0). Small random logits at the start mean a near-uniform prediction: the
    loss starts near ln(vocab_size). Models call ``self.apply(init_weights)``."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
    elif isinstance(module, RMSNorm):
        nn.init.ones_(module.weight)
