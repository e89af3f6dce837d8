"""KVCache: the keys and values of past tokens, kept so decoding does not recompute them."""
from __future__ import annotations

import weakref
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Optional

import torch
from torch import Tensor

from ._checks import as_int


class KVCache:
    """Per-layer keys and values of every token processed so far.

    A model appends each layer's new keys/values with :meth:`update` and attends over what it
    returns. Queries are never stored: a past query was used once, for its own token's output.
    Cross-attention keys/values (an encoder-decoder's view of the source) are stored separately
    with :meth:`set_cross`; they are computed once and never grow.

    A cache belongs to the model that filled it (see :meth:`bind`): a model of another depth,
    head count or width, or an encoder-decoder step against another source, is a ValueError.
    A step that fails (see :meth:`atomic`) leaves the cache exactly as it was.

    Storage: each layer's ``keys``/``values`` are views of the first ``seq_len`` positions of a
    larger buffer, so a decode step writes its token in place (no copy of what is held). Room is
    reserved with :meth:`reserve` (``generate`` reserves ``max_new_tokens``) and otherwise doubles
    when it runs out; :meth:`capacity` tells how much there is. The buffers are kept beside the
    cache, so ``vars(cache)`` is still ``keys``, ``values`` and the cross entries. Assigning other
    tensors to ``keys``/``values`` (a copy, or a cut such as ``k[:, :, :n]``) is respected: a cut
    keeps writing into the same buffer, anything else is copied into a new one on the next update.

    Attributes:
        seq_len: tokens held (in layer 0).
        nbytes: bytes of the self-attention keys and values held for those tokens
            = 2 x n_layers x B x seq_len x n_kv_heads x head_dim x element size
            (= 2 x n_layers x B x seq_len x d_model x element size for multi-head attention, where
            n_kv_heads = n_heads; grouped-query attention stores only the n_kv_heads key/value heads).
    """

    preallocate: bool = True  # class-wide switch: False concatenates at every step (benchmarks compare)

    def __init__(self) -> None:
        self.keys: list[Tensor] = []    # per layer, (B, G, T, D): G = n_kv_heads key/value heads
        self.values: list[Tensor] = []
        self._cross: dict[int, tuple[Tensor, Tensor]] = {}

    def update(self, layer_idx: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append k, v (B, G, T_new, D) to layer ``layer_idx``; return all held (B, G, T_total, D).

        The held keys/values are views of a larger buffer with room reserved ahead (see
        :meth:`reserve`; otherwise the room doubles when it runs out), so a decode step writes
        its token in place instead of copying the whole cache. Under autograd (a k or v that
        requires grad) the layer is concatenated instead, so gradients flow as usual."""
        # (checked in a few plain comparisons: a decode step calls this once per layer)
        n = len(self.keys)
        index = as_int(layer_idx)
        if index is None or index < 0:
            raise ValueError(f"layer_idx must be an int >= 0, got {layer_idx!r}")
        layer_idx = index
        if layer_idx > n:
            raise ValueError(f"layers must be filled in order: got layer {layer_idx}, cache has {n}")
        if not (isinstance(k, Tensor) and isinstance(v, Tensor)):
            raise TypeError(f"k and v must be torch.Tensors, got {type(k).__name__} and {type(v).__name__}")
        ks, vn = k.shape, v.shape
        if len(ks) != 4 or len(vn) != 4 or ks[0] != vn[0] or ks[1] != vn[1] or ks[2] != vn[2]:
            raise ValueError(
                f"k and v must be (B, G, T_new, D) with the same batch, heads and length, got k "
                f"{tuple(ks)} and v {tuple(v.shape)}"
            )
        held = self.keys[layer_idx] if layer_idx < n else None
        if held is not None:
            hs, vs = held.shape, self.values[layer_idx].shape
            if hs[0] != ks[0] or hs[1] != ks[1] or hs[3] != ks[3] or vs[3] != vn[3]:
                raise ValueError(
                    f"cache layer {layer_idx} holds keys of shape {tuple(hs)} but got new keys "
                    f"{tuple(ks)} (values: {tuple(vs)} held, {tuple(v.shape)} new); batch, heads and "
                    f"head width must match (call reset() for a new batch)"
                )
        if not self.preallocate or k.requires_grad or v.requires_grad or (held is not None and held.dtype != k.dtype):
            if held is None:
                self.keys.append(k)
                self.values.append(v)
            else:
                self.keys[layer_idx] = torch.cat([held, k], dim=-2)  # (B, G, T_total, D)
                self.values[layer_idx] = torch.cat([self.values[layer_idx], v], dim=-2)
            return self.keys[layer_idx], self.values[layer_idx]
        start = 0 if held is None else held.shape[-2]
        end = start + k.shape[-2]
        kb, vb = self._room(layer_idx, k, end)  # (B, G, capacity >= end, D) each
        kb.narrow(2, start, end - start).copy_(k)  # in place: nothing already held is copied
        vb.narrow(2, start, end - start).copy_(v)
        held_k, held_v = kb.narrow(2, 0, end), vb.narrow(2, 0, end)  # (B, G, T_total, D) views
        if held is None:
            self.keys.append(held_k)
            self.values.append(held_v)
        else:
            self.keys[layer_idx], self.values[layer_idx] = held_k, held_v
        return held_k, held_v

    # The buffers behind keys/values (and the room to reserve) are kept beside the cache, like
    # the binding below, so that vars(cache) is still just keys, values and cross entries.
    _backing: "weakref.WeakKeyDictionary[KVCache, dict[str, Any]]" = weakref.WeakKeyDictionary()

    def reserve(self, n_tokens: int) -> None:
        """Reserve room for ``n_tokens`` more tokens per layer at the next allocation (e.g.
        ``max_new_tokens`` before a decode loop), so that decoding never reallocates."""
        if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 0:
            raise ValueError(f"n_tokens must be an int >= 0, got {n_tokens!r}")
        KVCache._backing.setdefault(self, {"layers": {}, "reserve": 0})["reserve"] = n_tokens

    def capacity(self, layer_idx: int) -> int:
        """Tokens that layer ``layer_idx`` can hold before its buffer is reallocated."""
        bufs = KVCache._backing.get(self, {"layers": {}})["layers"].get(layer_idx)
        if layer_idx >= len(self.keys) or bufs is None or not self._backs(layer_idx, bufs):
            return self.layer_len(layer_idx)
        return bufs[0].shape[-2]

    def _backs(self, layer_idx: int, bufs: tuple[Tensor, Tensor]) -> bool:
        """Are layer ``layer_idx``'s keys/values still the leading views of ``bufs``? (Not after
        someone assigned other tensors to cache.keys, e.g. a copy or a concatenation.)"""
        k, v = self.keys[layer_idx], self.values[layer_idx]
        return (k.data_ptr() == bufs[0].data_ptr() and v.data_ptr() == bufs[1].data_ptr()
                and k.stride() == bufs[0].stride() and v.stride() == bufs[1].stride())

    def _room(self, layer_idx: int, k: Tensor, end: int) -> tuple[Tensor, Tensor]:
        """Buffers for layer ``layer_idx`` with room for ``end`` tokens, holding what is held."""
        backing = KVCache._backing.get(self)
        if backing is None:
            backing = KVCache._backing.setdefault(self, {"layers": {}, "reserve": 0})
        bufs = backing["layers"].get(layer_idx)
        held = layer_idx < len(self.keys)
        if held and bufs is not None and self._backs(layer_idx, bufs):
            if bufs[0].shape[-2] >= end and bufs[0].device == k.device:
                return bufs
            capacity = max(end, 2 * bufs[0].shape[-2])  # grown geometrically: O(1) copies per token
        else:
            capacity = end
        capacity = max(capacity, end + backing["reserve"])
        B, G, _, D = k.shape
        bufs = (k.new_empty(B, G, capacity, D), k.new_empty(B, G, capacity, D))
        if held:
            start = self.keys[layer_idx].shape[-2]
            bufs[0][:, :, :start].copy_(self.keys[layer_idx])
            bufs[1][:, :, :start].copy_(self.values[layer_idx])
        backing["layers"][layer_idx] = bufs
        return bufs

    # Which model (and source) filled a cache is bookkeeping, not contents: it is kept beside the
    # cache, so that vars(cache) is still just its contents: keys, values and cross entries.
    _bindings: "weakref.WeakKeyDictionary[KVCache, tuple[Optional[dict[str, Any]], Optional[Tensor]]]" = \
        weakref.WeakKeyDictionary()

    @property
    def _spec(self) -> Optional[dict[str, Any]]:
        return KVCache._bindings.get(self, (None, None))[0]

    @property
    def _source(self) -> Optional[Tensor]:
        return KVCache._bindings.get(self, (None, None))[1]

    def _bind_as(self, spec: Optional[dict[str, Any]], source: Optional[Tensor]) -> None:
        KVCache._bindings[self] = (spec, source)

    def bind(self, spec: Mapping[str, Any], source: Optional[Tensor] = None) -> None:
        """Tie the cache to one model (``spec``: its name and sizes) and, for an encoder-decoder,
        to one source (the encoder output ``source`` (B, S, C)). The first call records them; a
        later call with other values is a ValueError that says what differs."""
        spec = dict(spec)
        if self._spec is None:
            self._bind_as(spec, self._source)
        elif spec != self._spec:
            held = ", ".join(f"{k}={self._spec.get(k)!r}" for k in spec if spec[k] != self._spec.get(k))
            new = ", ".join(f"{k}={spec[k]!r}" for k in spec if spec[k] != self._spec.get(k))
            raise ValueError(f"this KVCache holds keys/values of a model with {held}, but it is used with a "
                             f"model with {new}; call cache.reset() or make a new KVCache for this model")
        if source is None:
            return
        if self._source is None:
            self._bind_as(self._spec, source)
        elif source is not self._source and (source.shape != self._source.shape
                                             or not torch.equal(source, self._source)):
            raise ValueError(f"this KVCache holds cross-attention keys/values of another source (memory "
                             f"{tuple(self._source.shape)}, now {tuple(source.shape)}, or equal shapes with "
                             f"other values); call cache.reset() before decoding a new source")

    @contextmanager
    def atomic(self) -> Iterator["KVCache"]:
        """Run one model step; if it raises, put the cache back as it was (lengths, contents,
        cross entries, binding) and re-raise. Only lengths are recorded: appends are undone by
        cutting each layer back to its old length."""
        lengths = [k.shape[-2] for k in self.keys]
        cross, spec, source = dict(self._cross), self._spec, self._source
        try:
            yield self
        except BaseException:
            n = len(lengths)
            self.keys = [k[..., :t, :] for k, t in zip(self.keys[:n], lengths)]  # (B, H, t, D)
            self.values = [v[..., :t, :] for v, t in zip(self.values[:n], lengths)]
            self._cross = cross
            self._bind_as(spec, source)
            raise

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
        self._bind_as(None, None)
        KVCache._backing.pop(self, None)

    def __len__(self) -> int:
        return self.seq_len

    def __repr__(self) -> str:
        return f"KVCache(n_layers={self.n_layers}, seq_len={self.seq_len}, nbytes={self.nbytes})"


def check_cache(cache: Any) -> None:
    """A ``cache`` argument must be a KVCache (or None, checked by the caller)."""
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be an attnlib.KVCache or None, got {type(cache).__name__}; "
                        f"make one with attnlib.KVCache()")


def cache_spec(model: Any) -> dict[str, Any]:
    """What a KVCache must agree with to be continued by ``model`` (see KVCache.bind)."""
    cfg = model.cfg
    return {"model": type(model).__name__, "n_layers": cfg.n_layers, "n_heads": cfg.n_heads,
            "n_kv_heads": getattr(cfg, "n_kv_heads", None) or cfg.n_heads, "d_model": cfg.d_model}


@contextmanager
def cache_step(model: Any, cache: Any, source: Optional[Tensor] = None) -> Iterator[None]:
    """One forward step with ``cache``: tie it to ``model`` (and ``source``); undo it all on error."""
    if cache is None:
        yield
        return
    check_cache(cache)
    with cache.atomic():
        cache.bind(cache_spec(model), source)
        yield
