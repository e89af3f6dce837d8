"""KVCache: the keys and values of past tokens, kept so decoding does not recompute them."""
from __future__ import annotations

import weakref
from typing import Any, Optional

import torch
from torch import Tensor

from ._checks import as_int, as_size, checking, eager
from .windows import check_window


class KVCache:
    """Per-layer keys and values of every token processed so far.

    A model appends each layer's new keys/values with :meth:`update` and attends over what it
    returns. Queries are never stored: a past query was used once, for its own token's output.
    Cross-attention keys/values (an encoder-decoder's view of the source) are stored separately
    with :meth:`set_cross`; they are computed once and never grow.

    Storage: layer i holds its keys and its values, (B, G, T, D) each (G = n_kv_heads key/value
    heads); a step concatenates its new rows along time, as nanoGPT-style caches do. Nothing
    held is ever written to, so autograd (which may have saved it) and torch.inference_mode()
    (whose tensors cannot be written outside it) never get in the way.

    Sliding-window layers (``update(..., window=W)``, Mistral) roll: a layer keeps only its last
    W positions (W + ``extra``), since no later query can see an older one; ``seq_len`` still
    counts every position seen, so positions (and RoPE) keep counting after the window is full.

    A cache serves the one model that filled it (:meth:`check_model`, at the model's door); an
    empty cache serves any. A model runs each step inside :class:`all_or_nothing`, so a step that
    fails leaves the cache as it was.

    Args:
        extra: positions a rolling layer holds beyond its window, so that :meth:`crop` can take
            back up to extra + 1 tokens once the window is full (speculative decoding needs k).

    Attributes:
        keys, values: per layer, the held (B, G, T, D) (read-only; use update to add).
        seq_len: positions seen (in layer 0): all of them held, except by a rolling layer.
        nbytes: bytes of the self-attention keys and values held
            = 2 x n_layers x B x T_held x n_kv_heads x head_dim x element size.
    """

    def __init__(self, *, extra: int = 0) -> None:
        self._k: list[Tensor] = []    # per layer, (B, G, T, D)
        self._v: list[Tensor] = []
        self.cross: dict[int, tuple[Tensor, Tensor]] = {}   # layer -> the source's (k, v)
        self.source: Optional[Tensor] = None   # the context those were computed from
        self.owner: Optional[dict[str, Any]] = None   # the model that filled it (check_model)
        self.extra = as_size("extra", extra, minimum=0)
        self._window: dict[int, int] = {}    # rolling layers: layer -> sliding window W
        self._dropped: dict[int, int] = {}   # rolling layers: layer -> positions let go

    @property
    def keys(self) -> list[Tensor]:
        return list(self._k)  # (B, G, T, D) per layer

    @property
    def values(self) -> list[Tensor]:
        return list(self._v)

    def update(self, layer_idx: int, k: Tensor, v: Tensor,
               window: Optional[int] = None) -> tuple[Tensor, Tensor]:
        """Append k, v (B, G, T_new, D) to layer ``layer_idx``; return all it holds (B, G, T, D).

        With the layer's sliding ``window`` W the layer rolls (:meth:`_roll`) and returns the last
        W - 1 + T_new positions: all that its new queries can see."""
        if checking():
            self._check_update(layer_idx, k, v, window)
        if window is not None:
            return self._roll(layer_idx, k, v, window)
        if layer_idx == len(self._k):  # the layer's first tokens
            self._k.append(k), self._v.append(v)
            return k, v
        held_k, held_v = self._k[layer_idx], self._v[layer_idx]
        if held_k.dtype != k.dtype or held_k.device != k.device:  # the model was moved or cast
            held_k, held_v = held_k.to(k), held_v.to(v)
        self._k[layer_idx] = torch.cat([held_k, k], dim=2)  # (B, G, T_total, D)
        self._v[layer_idx] = torch.cat([held_v, v], dim=2)
        return self._k[layer_idx], self._v[layer_idx]

    def _roll(self, i: int, k: Tensor, v: Tensor, window: int) -> tuple[Tensor, Tensor]:
        """:meth:`update` of a sliding-window layer: hold the last window + extra positions."""
        T, keep = k.shape[2], window + self.extra
        if i == len(self._k):  # the layer's first tokens: nothing held yet
            self._k.append(k[:, :, :0]), self._v.append(v[:, :, :0])
            self._window[i], self._dropped[i] = window, 0
        held_k, held_v = self._k[i], self._v[i]
        # held positions that neither the new queries (W - 1) nor the buffer (keep - T) need
        cut = max(0, held_k.shape[2] - max(keep - T, window - 1))
        full_k = torch.cat([held_k[:, :, cut:].to(k), k], dim=2)  # (B, G, held - cut + T, D)
        full_v = torch.cat([held_v[:, :, cut:].to(v), v], dim=2)
        drop = max(0, full_k.shape[2] - keep)  # a long step: more new positions than fit
        self._dropped[i] += cut + drop
        # a part of `full` is copied, so that nothing but the held positions stays in memory
        self._k[i] = full_k[:, :, drop:].clone() if drop else full_k  # (B, G, <= keep, D)
        self._v[i] = full_v[:, :, drop:].clone() if drop else full_v
        seen = window - 1 + T  # the oldest key the first new query can see, and all after it
        return full_k[:, :, -seen:], full_v[:, :, -seen:]

    def crop(self, n: int) -> None:
        """Keep the first ``n`` tokens of every layer (0 <= n <= seq_len): the later ones are
        forgotten, as if they had never been fed (speculative decoding drops rejected tokens).

        A rolling layer can go back only as far as it still holds the W - 1 positions before
        the n-th: to n >= seq_len - extra - 1 once its window is full (else a ValueError)."""
        m = as_int(n)
        if m is None or not 0 <= m <= self.seq_len:
            raise ValueError(f"crop needs an int n with 0 <= n <= seq_len={self.seq_len}, "
                             f"got {n!r}")
        for i, window in self._window.items():  # every layer first: a refused crop changes nothing
            gone = self._dropped[i]
            if m and gone > max(0, m - window + 1):  # position m needs m - W + 1 .. m - 1
                raise ValueError(
                    f"crop({m}): this rolling cache (sliding window {window}) has let go of the "
                    f"first {gone} positions of layer {i}, but continuing after {m} tokens needs "
                    f"positions {max(0, m - window + 1)}..{m - 1}; crop to 0 or to n >= "
                    f"{gone + window - 1} only, or make the cache with KVCache(extra=r) to hold "
                    f"r more positions")
        dropped = {i: min(gone, m) for i, gone in self._dropped.items()}  # crop(0): none left
        self._k = [k[:, :, :m - dropped.get(i, 0)] for i, k in enumerate(self._k)]
        self._v = [v[:, :, :m - dropped.get(i, 0)] for i, v in enumerate(self._v)]
        self._dropped = dropped

    # --- Cross-attention: the source's keys and values, computed once -------------------------
    def has_cross(self, layer_idx: int) -> bool:
        return layer_idx in self.cross

    def get_cross(self, layer_idx: int) -> tuple[Tensor, Tensor]:
        return self.cross[layer_idx]

    def set_cross(self, layer_idx: int, k: Tensor, v: Tensor,
                  source: Optional[Tensor] = None) -> None:
        """Keep layer ``layer_idx``'s keys/values of ``source`` (the context they came from)."""
        self.cross[layer_idx] = (k, v)
        if source is not None:
            self.source = source

    def check_source(self, source: Tensor) -> None:
        """Cross-attention keys/values held are those of ``source``: refuse another one (another
        shape, or in eager mode other values), which would silently reuse the first."""
        if self.source is None or source is self.source:
            return
        other = source.shape != self.source.shape
        if other or (eager(source) and not torch.equal(source, self.source)):
            raise ValueError(f"this KVCache holds cross-attention keys/values of another source "
                             f"(context {tuple(self.source.shape)}, now {tuple(source.shape)}, or "
                             f"equal shapes with other values); call cache.reset() before decoding "
                             f"a new source")

    # --- Which model it serves -----------------------------------------------------------------
    def check_model(self, model: Any, batch: int) -> None:
        """A model's step continues what the cache holds: the same model (the first to fill it is
        recorded; an empty cache serves any) and the same batch size."""
        if not self.seq_len and not self.cross:
            self.owner = owner_of(model)
            return
        if self.owner is not None and self.owner["instance"]() is not model:
            owner = owner_of(model)
            differ = [k for k in owner if k != "instance" and owner[k] != self.owner.get(k)]
            if differ:
                held = ", ".join(f"{k}={self.owner.get(k)!r}" for k in differ)
                new = ", ".join(f"{k}={owner[k]!r}" for k in differ)
                what = f"a model with {held}, but it is used with a model with {new}"
            else:
                what = f"another {owner['model']} (of the same sizes)"
            raise ValueError(f"this KVCache holds keys/values of {what}; a cache serves the one "
                             f"model that filled it: call cache.reset() or make a new KVCache")
        if self._k and self._k[0].shape[0] != batch:
            raise ValueError(f"this KVCache holds keys/values of a batch of {self._k[0].shape[0]} "
                             f"sequences, but the step has a batch of {batch}; batch, heads and "
                             f"head width must match (call reset() for a new batch)")

    # --- Sizes -----------------------------------------------------------------------------------
    def layer_len(self, layer_idx: int) -> int:
        """Tokens held in layer ``layer_idx`` (0 before its first update; a rolling layer holds
        at most its window + extra)."""
        return self._k[layer_idx].shape[2] if layer_idx < len(self._k) else 0

    @property
    def n_layers(self) -> int:
        return len(self._k)

    @property
    def seq_len(self) -> int:
        """Positions seen: those layer 0 holds, and those it let go (a rolling layer)."""
        return self._k[0].shape[2] + self._dropped.get(0, 0) if self._k else 0

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def reset(self) -> None:
        """Forget everything (a new prompt, a new batch or another model); keep ``extra``."""
        self.__init__(extra=self.extra)

    def __len__(self) -> int:
        return self.seq_len

    def __repr__(self) -> str:
        return f"KVCache(n_layers={self.n_layers}, seq_len={self.seq_len}, nbytes={self.nbytes})"

    def _state(self) -> tuple:
        """What a step may change. A growing layer only appends, so its length (and dtype and
        device: a failed step that cast it is cast back) says what was there. Its old tensors are
        not kept alive: each step frees a layer's previous keys as it replaces them, as a plain
        loop does (holding them cost a d=256 model 6% of its decoding time)."""
        held = [(k.shape[2], k.dtype, k.device) for k in self._k]
        return held, self._rolling(), dict(self.cross), self.source, self.owner, dict(self._window)

    def _rolling(self) -> tuple:
        """Rolling layers let positions go: their buffers and counts are kept whole."""
        return {i: (self._k[i], self._v[i]) for i in self._window}, self._dropped.copy()

    def _set_state(self, state: tuple) -> None:
        held, (rolled, self._dropped), self.cross, self.source, self.owner, self._window = state
        back = [(k[:, :, :n].to(device, dtype), v[:, :, :n].to(device, dtype))  # what was held
                for (n, dtype, device), k, v in zip(held, self._k, self._v)]
        self._k, self._v = [k for k, _ in back], [v for _, v in back]
        for i, (k, v) in rolled.items():
            self._k[i], self._v[i] = k, v

    def _check_update(self, layer_idx: Any, k: Any, v: Any, window: Any = None) -> None:
        i, n = as_int(layer_idx), len(self._k)
        if i is None or i < 0:
            raise ValueError(f"layer_idx must be an int >= 0, got {layer_idx!r}")
        if i > n:
            raise ValueError(f"layers must be filled in order: got layer {i}, cache has {n}")
        if not (isinstance(k, Tensor) and isinstance(v, Tensor)):
            raise TypeError(f"k and v must be torch.Tensors, got {type(k).__name__} and "
                            f"{type(v).__name__}")
        if k.dim() != 4 or v.dim() != 4 or k.shape[:3] != v.shape[:3]:
            raise ValueError(f"k and v must be (B, G, T_new, D) with the same batch, heads and "
                             f"length, got k {tuple(k.shape)} and v {tuple(v.shape)}")
        if not (k.is_floating_point() and v.dtype == k.dtype):
            raise TypeError(f"k and v must be floating tensors of one dtype, got {k.dtype} and "
                            f"{v.dtype}")
        if i < n:
            hk, hv = tuple(self._k[i].shape), tuple(self._v[i].shape)  # held (B, G, T, D)
            if hk[:2] != k.shape[:2] or hk[3] != k.shape[3] or hv[3] != v.shape[3]:
                raise ValueError(f"cache layer {i} holds keys of shape {tuple(hk)} but got new "
                                 f"keys {tuple(k.shape)} (values: {tuple(hv)} held, "
                                 f"{tuple(v.shape)} new); batch, heads and head width must match "
                                 f"(call reset() for a new batch)")
        w = None if window is None else check_window(window, "window")
        if i < n and w != self._window.get(i):  # a full layer never rolls, nor changes its W
            raise ValueError(f"cache layer {i} was filled with window={self._window.get(i)} "
                             f"but this update has window={w}; a cache serves one model: call "
                             f"reset() or make a new KVCache")


class all_or_nothing:
    """``with all_or_nothing(cache):`` one model step, entered before :class:`trusted`: if it
    raises, the cache is put back as it was, so no layer holds half a step. ``cache`` may be None.

    A step that attnlib runs inside a call it has checked already (``generate``'s loop) owns its
    cache, which nobody else sees and which a failure discards: there nothing is kept."""

    def __init__(self, cache: Optional[KVCache]) -> None:
        self.cache = cache

    def __enter__(self) -> None:
        self.saved = self.cache._state() if checking() and self.cache is not None else None

    def __exit__(self, kind: Any, *rest: Any) -> None:
        if kind is not None and self.saved is not None:
            self.cache._set_state(self.saved)


def owner_of(model: Any) -> dict[str, Any]:
    """What a KVCache records of the model that fills it: the model itself (a weak reference)
    and its sizes (to say what differs when another model comes)."""
    cfg = model.cfg
    return {"model": type(model).__name__, "n_layers": cfg.n_layers, "n_heads": cfg.n_heads,
            "n_kv_heads": cfg.n_kv_heads, "d_model": cfg.d_model, "positional": cfg.positional,
            "instance": weakref.ref(model)}
