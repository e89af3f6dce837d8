"""The blocks models are stacked from: embeddings, the feed-forward network, encoder and decoder layers.

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

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import as_dropout, as_int, checking
from .config import ACTIVATIONS, TransformerConfig
from .mha import MultiHeadAttention
from .norms import make_norm
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


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
            raise ValueError(f"unknown activation {activation!r}; choose one of {', '.join(map(repr, ACTIVATIONS))}")
        for name, n in (("d_model", d_model), ("d_ff", d_ff)):
            if as_int(n) is None or n < 1:
                raise ValueError(f"{name} must be a positive int, got {name}={n!r}")
        d_model, d_ff = as_int(d_model), as_int(d_ff)
        dropout = as_dropout(dropout)
        self.activation = activation
        self.fc1 = nn.Linear(d_model, d_ff, bias=bias)
        self.gate = nn.Linear(d_model, d_ff, bias=bias) if activation == "swiglu" else None
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        if checking():
            self.check_input(x)
        h = activate(self.activation, self.fc1(x), self.gate(x) if self.gate is not None else None)  # (..., d_ff)
        return dropped(self.drop, self.fc2(h))  # (..., C)

    def check_input(self, x: Any) -> None:
        if not isinstance(x, Tensor) or x.dim() < 1 or x.shape[-1] != self.fc1.in_features:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (..., d_model={self.fc1.in_features}), got {shape}")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")


def dropped(drop: nn.Dropout, x: Tensor) -> Tensor:
    """``drop(x)`` while training. In eval mode dropout is the identity, so x itself, without
    the call: decoding passes here several times per layer for every token."""
    return drop(x) if drop.training else x


def activate(activation: str, h: Tensor, gate: Optional[Tensor] = None) -> Tensor:
    """The FFN's nonlinearity on its hidden layer h = fc1(x) (..., d_ff); ``gate`` = gate(x) for
    "swiglu" (silu(gate) * h), ignored otherwise."""
    if activation == "relu":
        return F.relu(h)
    if activation == "gelu":
        return F.gelu(h)
    if activation == "gelu_tanh":
        return F.gelu(h, approximate="tanh")
    return F.silu(gate) * h  # swiglu


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
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, activation, bias, dropout)
        self.norm1 = make_norm(norm, d_model, layer_norm_eps)
        self.norm2 = make_norm(norm, d_model, layer_norm_eps)
        self.drop = nn.Dropout(dropout)

    @classmethod
    def from_config(cls, cfg: TransformerConfig) -> "EncoderLayer":
        return cls(cfg.d_model, cfg.n_heads, cfg.d_ff, activation=cfg.activation, norm_first=cfg.norm_first,
                   dropout=cfg.dropout, bias=cfg.bias, layer_norm_eps=cfg.layer_norm_eps,
                   n_kv_heads=cfg.n_kv_heads, norm=cfg.norm)

    def forward(self, x: Tensor, *, attn_mask: Optional[Tensor] = None, need_weights: bool = False,
                rope: Optional[tuple[Tensor, Tensor]] = None,
                backend: str = "auto") -> tuple[Tensor, Optional[Tensor]]:
        """Args: attn_mask (bool True = may attend, or float added), e.g. a padding mask (B, 1, 1, T);
        rope: (cos, sin) (T, D) at the tokens' positions (RotaryEmbedding.cos_sin), if any.

        Returns (x (B, T, C), weights (B, H, T, T) or None)."""
        if checking():
            self.self_attn.check_input("x", x)  # before the first LayerNorm sees it

        def attend(h: Tensor) -> tuple[Tensor, Optional[Tensor]]:
            out, w = self.self_attn(h, attn_mask=attn_mask, need_weights=need_weights, rope=rope,
                                    backend=backend)
            return dropped(self.drop, out), w

        if self.norm_first:
            a, weights = attend(self.norm1(x))
            x = x + a
            x = x + self.ffn(self.norm2(x))
        else:
            a, weights = attend(x)
            x = self.norm1(x + a)
            x = self.norm2(x + self.ffn(x))
        return x, weights


class DecoderLayer(nn.Module):
    """Causal self-attention, optional cross-attention over an encoder's output, then FFN.

    Args:
        as EncoderLayer, plus cross_attention: add the cross-attention sublayer (EncoderDecoder);
        False gives a GPT block.

    Shapes:
        x (B, T, C), memory (B, S, C) -> x (B, T, C); self weights (B, H, T, T_total) and cross
        weights (B, H, T, S) when need_weights (T_total = cached + new tokens).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, *, cross_attention: bool = False,
                 activation: str = "gelu", norm_first: bool = True, dropout: float = 0.0, bias: bool = True,
                 layer_norm_eps: float = 1e-5, n_kv_heads: Optional[int] = None,
                 norm: str = "layernorm") -> None:
        super().__init__()
        self.norm_first = norm_first
        dropout = as_dropout(dropout)
        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias, dropout=dropout)
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
        return cls(cfg.d_model, cfg.n_heads, cfg.d_ff, cross_attention=cross_attention,
                   activation=cfg.activation, norm_first=cfg.norm_first, dropout=cfg.dropout,
                   bias=cfg.bias, layer_norm_eps=cfg.layer_norm_eps, n_kv_heads=cfg.n_kv_heads, norm=cfg.norm)

    def forward(self, x: Tensor, memory: Optional[Tensor] = None, *, attn_mask: Optional[Tensor] = None,
                memory_mask: Optional[Tensor] = None, cache: Any = None, layer_idx: int = 0,
                need_weights: bool = False, rope: Optional[tuple[Tensor, Tensor]] = None,
                backend: str = "auto") -> tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        """Args:
            memory: the encoder output (needed iff the layer has cross-attention).
            attn_mask: extra self-attention mask, combined with the causal one.
            memory_mask: cross-attention mask over the source, e.g. padding (B, 1, 1, S).
            cache, layer_idx: a KVCache and this layer's slot in it (incremental decoding).
            rope: (cos, sin) (T, D) at the new tokens' positions (RotaryEmbedding.cos_sin), if any.

        Returns (x, self weights or None, cross weights or None)."""
        if checking():
            self.self_attn.check_input("x", x)  # before the first LayerNorm sees it
            if (memory is None) != (self.cross_attn is None):
                raise ValueError("memory must be given exactly when the layer has cross-attention (cross_attention="
                                 f"{self.cross_attn is not None}, memory given={memory is not None})")

        def self_block(h: Tensor) -> tuple[Tensor, Optional[Tensor]]:
            out, w = self.self_attn(h, attn_mask=attn_mask, is_causal=True, need_weights=need_weights,
                                    cache=cache, layer_idx=layer_idx, rope=rope, backend=backend)
            return dropped(self.drop, out), w

        def cross_block(h: Tensor) -> tuple[Tensor, Optional[Tensor]]:
            out, w = self.cross_attn(h, memory, attn_mask=memory_mask, need_weights=need_weights,
                                     cache=cache, layer_idx=layer_idx, backend=backend)
            return dropped(self.drop, out), w

        cross_w = None
        if self.norm_first:
            a, self_w = self_block(self.norm1(x))
            x = x + a
            if self.cross_attn is not None:
                a, cross_w = cross_block(self.norm2(x))
                x = x + a
            x = x + self.ffn(self.norm3(x))
        else:
            a, self_w = self_block(x)
            x = self.norm1(x + a)
            if self.cross_attn is not None:
                a, cross_w = cross_block(x)
                x = self.norm2(x + a)
            x = self.norm3(x + self.ffn(x))
        return x, self_w, cross_w


class Embeddings(nn.Module):
    """Token vectors plus (additive) position vectors, optionally token types and a LayerNorm.

    Attributes (weight names that loaders rely on): ``tok_emb`` (vocab, C); ``pos_emb`` a
    LearnedPositionalEmbedding (``.weight`` (max_len, C)), a SinusoidalPositionalEncoding, or
    None for "rope"/"none"; ``type_emb`` (type_vocab_size, C) or None; ``norm`` (the config's
    ``norm`` kind) or None.

    Shapes:
        input_ids (B, T) long, positions (T,) long, token_type_ids (B, T) long -> (B, T, C).
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.positional == "learned":
            self.pos_emb: Optional[nn.Module] = LearnedPositionalEmbedding(cfg.max_len, cfg.d_model)
        elif cfg.positional == "sinusoidal":
            self.pos_emb = SinusoidalPositionalEncoding(cfg.max_len, cfg.d_model)
        else:  # "rope" rotates q/k inside attention; "none" has no positions at all
            self.pos_emb = None
        self.type_emb = nn.Embedding(cfg.type_vocab_size, cfg.d_model) if cfg.type_vocab_size > 0 else None
        self.norm = make_norm(cfg.norm, cfg.d_model, cfg.layer_norm_eps) if cfg.embedding_norm else None
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, input_ids: Tensor, positions: Tensor, token_type_ids: Optional[Tensor] = None) -> Tensor:
        if checking():
            self.check_input(input_ids, positions, token_type_ids)
        x = self.tok_emb(input_ids)  # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb(positions).to(x.dtype)  # (T, C) broadcasts over the batch
        if self.type_emb is not None:
            types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
            x = x + self.type_emb(types)
        if self.norm is not None:
            x = self.norm(x)
        return dropped(self.drop, x)

    @staticmethod
    def check_input(input_ids: Tensor, positions: Tensor, token_type_ids: Optional[Tensor]) -> None:
        if positions.shape != input_ids.shape[-1:]:
            raise ValueError(f"positions must be (T,) = {tuple(input_ids.shape[-1:])}, one per token of "
                             f"input_ids {tuple(input_ids.shape)}; got {tuple(positions.shape)}")
        if token_type_ids is not None and token_type_ids.shape != input_ids.shape:
            raise ValueError(f"token_type_ids must have input_ids' shape {tuple(input_ids.shape)}, got "
                             f"{tuple(token_type_ids.shape)}")
