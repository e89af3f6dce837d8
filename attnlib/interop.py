"""Weights between attnlib and torch.nn: the same multi-head attention in both libraries.

``nn.MultiheadAttention`` stores W_Q, W_K, W_V stacked in one (3C, C) ``in_proj_weight``;
attnlib keeps three ``nn.Linear`` (``q_proj``, ``k_proj``, ``v_proj``) so each can be read on
its own. These two functions move weights across, so that the book and the tests can run both
implementations on the same numbers. (Masks convert with :mod:`attnlib.masks`.)
"""
from __future__ import annotations

import torch
from torch import nn

from .mha import MultiHeadAttention


def mha_to_torch(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention`` (batch_first, same training mode) with ``mha``'s weights."""
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"mha must be an attnlib.MultiHeadAttention, got {type(mha).__name__}")
    if mha.n_kv_heads != mha.n_heads:
        raise ValueError(
            f"nn.MultiheadAttention has no grouped-query attention: this module has "
            f"n_kv_heads={mha.n_kv_heads} < n_heads={mha.n_heads}; compare it with "
            f"F.scaled_dot_product_attention(..., enable_gqa=True) instead"
        )
    bias = mha.q_proj.bias is not None
    ref = nn.MultiheadAttention(mha.d_model, mha.n_heads, dropout=mha.dropout, bias=bias,
                                batch_first=True)
    ref = ref.to(device=mha.q_proj.weight.device,
                 dtype=mha.q_proj.weight.dtype).train(mha.training)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight,
                                            mha.v_proj.weight]))                # (3C, C)
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias,
                                              mha.v_proj.bias]))                # (3C,)
            ref.out_proj.bias.copy_(mha.out_proj.bias)
    return ref


def mha_from_torch(ref: nn.MultiheadAttention) -> MultiHeadAttention:
    """An attnlib ``MultiHeadAttention`` with ``ref``'s weights (``ref`` must use one C for q,
    k, v)."""
    if not isinstance(ref, nn.MultiheadAttention):
        raise TypeError(f"ref must be a torch.nn.MultiheadAttention, got {type(ref).__name__}")
    if not ref._qkv_same_embed_dim:
        raise ValueError(
            f"nn.MultiheadAttention with kdim={ref.kdim} / vdim={ref.vdim} "
            f"!= embed_dim={ref.embed_dim} has separate projection weights; "
            f"attnlib's MultiHeadAttention needs one width d_model"
        )
    if ref.bias_k is not None:
        raise ValueError("nn.MultiheadAttention with add_bias_kv=True has no attnlib equivalent")
    bias = ref.in_proj_bias is not None
    mha = MultiHeadAttention(ref.embed_dim, ref.num_heads, bias=bias, dropout=ref.dropout)
    mha = mha.to(device=ref.in_proj_weight.device,
                 dtype=ref.in_proj_weight.dtype).train(ref.training)
    wq, wk, wv = ref.in_proj_weight.detach().chunk(3)  # each (C, C)
    with torch.no_grad():
        for proj, w in ((mha.q_proj, wq), (mha.k_proj, wk), (mha.v_proj, wv)):
            proj.weight.copy_(w)
        mha.out_proj.weight.copy_(ref.out_proj.weight)
        if bias:
            for proj, b in zip((mha.q_proj, mha.k_proj, mha.v_proj),
                               ref.in_proj_bias.detach().chunk(3)):
                proj.bias.copy_(b)
            mha.out_proj.bias.copy_(ref.out_proj.bias)
    return mha
