"""Int8KVCache: a KV cache that keeps its keys and values as int8 codes.

Each key or value row (one head, one token: D numbers) gets its own scale, as
:func:`attnlib.quant.quantize_rows` gives it: ``s = max |x| / 127`` and ``x ~ s * round(x / s)``.
A row then takes D bytes of codes and 4 bytes of scale instead of D x 4 bytes in float32, and
every read of the cache (the prefill's own attention included) sees the dequantized rows, so a
model decoding with it computes exactly what it would with those rows in a float cache.

It is a :class:`attnlib.KVCache`, so a GPT takes it as it is: ``model(ids, cache=Int8KVCache())``.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from ._checks import checking
from .cache import KVCache
from .quant import dequantize_rows, quantize_rows


class Int8KVCache(KVCache):
    """Keys and values held as int8 codes with one float32 scale per head and token.

    Storage per layer: codes (B, G, T, D) int8 (in ``KVCache``'s own lists) and scales
    (B, G, T, 1) float32. ``keys``/``values`` and :meth:`update` return dequantized rows in the
    dtype the model computes in. Sliding-window models (which need a rolling cache) are refused.

    Attributes:
        nbytes: bytes held, codes and scales = 2 x n_layers x B x T x G x (D + 4).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._k_scale: list[Tensor] = []   # per layer, (B, G, T, 1)
        self._v_scale: list[Tensor] = []
        self._dtype: Optional[torch.dtype] = None   # what the model computes in

    def update(self, layer_idx: int, k: Tensor, v: Tensor,
               window: Optional[int] = None) -> tuple[Tensor, Tensor]:
        """Quantize k, v (B, G, T_new, D), append them to layer ``layer_idx``; return every row
        the layer holds, dequantized: (B, G, T, D) each."""
        if window is not None:
            raise ValueError(f"Int8KVCache does not roll: a sliding-window model (window={window}) "
                             f"needs attnlib.KVCache")
        if checking():
            self._check_update(layer_idx, k, v)
        (qk, sk), (qv, sv) = quantize_rows(k.detach()), quantize_rows(v.detach())  # int8, scale
        self._dtype = k.dtype
        if layer_idx == len(self._k):  # the layer's first tokens
            for held, new in zip((self._k, self._v, self._k_scale, self._v_scale),
                                 (qk, qv, sk, sv)):
                held.append(new)
        else:
            for held, new in zip((self._k, self._v, self._k_scale, self._v_scale),
                                 (qk, qv, sk, sv)):
                held[layer_idx] = torch.cat([held[layer_idx], new], dim=2)  # along time
        return self._read(layer_idx)

    def _read(self, i: int) -> tuple[Tensor, Tensor]:
        """Layer i's keys and values, dequantized: (B, G, T, D) each."""
        k = dequantize_rows(self._k[i], self._k_scale[i]).to(self._dtype)
        v = dequantize_rows(self._v[i], self._v_scale[i]).to(self._dtype)
        return k, v

    @property
    def keys(self) -> list[Tensor]:
        return [self._read(i)[0] for i in range(len(self._k))]   # (B, G, T, D) per layer

    @property
    def values(self) -> list[Tensor]:
        return [self._read(i)[1] for i in range(len(self._k))]

    @property
    def nbytes(self) -> int:
        held = (*self._k, *self._v, *self._k_scale, *self._v_scale)
        return sum(t.numel() * t.element_size() for t in held)

    def crop(self, n: int) -> None:
        """Keep the first ``n`` tokens of every layer, codes and scales alike."""
        super().crop(n)
        self._k_scale = [s[:, :, :self.layer_len(i)] for i, s in enumerate(self._k_scale)]
        self._v_scale = [s[:, :, :self.layer_len(i)] for i, s in enumerate(self._v_scale)]

    def _state(self) -> tuple:
        return super()._state(), list(self._k_scale), list(self._v_scale), self._dtype

    def _set_state(self, state: tuple) -> None:
        base, self._k_scale, self._v_scale, self._dtype = state
        super()._set_state(base)
