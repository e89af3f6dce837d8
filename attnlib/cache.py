"""KVCache: the keys and values of past tokens, kept so decoding does not recompute them."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


class KVCache:
    """Per-layer keys and values of every token processed so far.

    A model appends each layer's new keys/values with :meth:`update` and attends over what it
    returns. Queries are never stored: a past query was used once, for its own token's output.
    Cross-attention keys/values (an encoder-decoder's view of the source) are stored separately
    with :meth:`set_cross`; they are computed once and never grow.

    Attributes:
        seq_len: tokens held (in layer 0).
        nbytes: bytes of the self-attention keys and values held for those tokens
            = 2 x n_layers x B x seq_len x n_kv_heads x head_dim x element size
            (= 2 x n_layers x B x seq_len x d_model x element size for multi-head attention, where
            n_kv_heads = n_heads; grouped-query attention stores only the n_kv_heads key/value heads).
    """

    def __init__(self) -> None:
        self.keys: list[Tensor] = []    # per layer, (B, G, T, D): G = n_kv_heads key/value heads
        self.values: list[Tensor] = []
        self._cross: dict[int, tuple[Tensor, Tensor]] = {}

    def update(self, layer_idx: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append k, v (B, H, T_new, D) to layer ``layer_idx``; return all held (B, H, T_total, D)."""
        if layer_idx == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        elif layer_idx < len(self.keys):
            held = self.keys[layer_idx]
            if held.shape[0] != k.shape[0] or held.shape[1] != k.shape[1] or held.shape[3] != k.shape[3]:
                raise ValueError(
                    f"cache layer {layer_idx} holds keys of shape {tuple(held.shape)} but got new keys "
                    f"{tuple(k.shape)}; batch, heads and head width must match (call reset() for a new batch)"
                )
            self.keys[layer_idx] = torch.cat([held, k], dim=-2)  # (B, H, T_total, D)
            self.values[layer_idx] = torch.cat([self.values[layer_idx], v], dim=-2)
        else:
            raise ValueError(f"layers must be filled in order: got layer {layer_idx}, cache has {len(self.keys)}")
        return self.keys[layer_idx], self.values[layer_idx]

    def layer_len(self, layer_idx: int) -> int:
        """Tokens held in layer ``layer_idx`` (0 before its first update)."""
        return self.keys[layer_idx].shape[-2] if layer_idx < len(self.keys) else 0

    def has_cross(self, layer_idx: int) -> bool:
        return layer_idx in self._cross

    def get_cross(self, layer_idx: int) -> tuple[Tensor, Tensor]:
        return self._cross[layer_idx]

    def set_cross(self, layer_idx: int, k: Tensor, v: Tensor) -> None:
        self._cross[layer_idx] = (k, v)

    @property
    def n_layers(self) -> int:
        return len(self.keys)

    @property
    def seq_len(self) -> int:
        return 0 if not self.keys else self.keys[0].shape[-2]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def reset(self) -> None:
        """Forget everything (a new prompt or a new batch)."""
        self.keys, self.values, self._cross = [], [], {}

    def __len__(self) -> int:
        return self.seq_len

    def __repr__(self) -> str:
        return f"KVCache(n_layers={self.n_layers}, seq_len={self.seq_len}, nbytes={self.nbytes})"
