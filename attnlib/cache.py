"""KVCache: the keys and values of past tokens, kept so decoding does not recompute them."""
from __future__ import annotations

import weakref
from typing import Any, Optional

import torch
from torch import Tensor

from ._checks import as_int, checking, eager


class KVCache:
    """Per-layer keys and values of every token processed so far.

    A model appends each layer's new keys/values with :meth:`update` and attends over what it
    returns. Queries are never stored: a past query was used once, for its own token's output.
    Cross-attention keys/values (an encoder-decoder's view of the source) are stored separately
    with :meth:`set_cross`; they are computed once and never grow.

    Storage: layer i keeps one buffer for its keys and one for its values, (B, G, capacity, D)
    each, of which the first ``T`` rows are held; ``keys[i]`` / ``values[i]`` are views of those
    rows. A decode step writes its one new row in place instead of copying everything held, and
    a full buffer is replaced by one twice as long. G = n_kv_heads key/value heads.

    A cache belongs to the model that filled it: the model records its name and sizes with
    :meth:`bind`, and a model of another kind, depth, head count or width (or an encoder-decoder
    step against another source) is a ValueError. :meth:`snapshot` / :meth:`restore` let a model
    put the cache back as it was when a step fails.

    Attributes:
        keys, values: per layer, the held (B, G, T, D) (read-only views; use update to add).
        seq_len: tokens held (in layer 0).
        nbytes: bytes of the self-attention keys and values held for those tokens (used, not
            reserved) = 2 x n_layers x B x seq_len x n_kv_heads x head_dim x element size.
    """

    def __init__(self) -> None:
        self._k: list[Tensor] = []    # per layer, (B, G, capacity, D) buffers
        self._v: list[Tensor] = []
        self._len: list[int] = []     # per layer, rows held
        self.cross: dict[int, tuple[Tensor, Tensor]] = {}   # layer -> the source's (k, v)
        self.owner: Optional[dict[str, Any]] = None          # the model that filled it (bind)
        self.source: Optional[Tensor] = None                 # its encoder output, if any

    @property
    def keys(self) -> list[Tensor]:
        return [k[:, :, :n] for k, n in zip(self._k, self._len)]  # (B, G, T, D) per layer

    @property
    def values(self) -> list[Tensor]:
        return [v[:, :, :n] for v, n in zip(self._v, self._len)]

    def update(self, layer_idx: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append k, v (B, G, T_new, D) to layer ``layer_idx``; return all held (B, G, T_total, D)."""
        i = self._check_update(layer_idx, k, v) if checking() else layer_idx  # a model checked them
        if i == len(self._k):  # a new layer: an empty buffer
            self._k.append(k[:, :, :0])
            self._v.append(v[:, :, :0])
            self._len.append(0)
        start = self._len[i]
        end = start + k.shape[2]
        kb, vb = self._k[i], self._v[i]
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad):
            # under autograd, concatenate: writing into a buffer would overwrite tensors that
            # the backward pass still needs
            kb, vb = torch.cat([kb[:, :, :start], k], dim=2), torch.cat([vb[:, :, :start], v], dim=2)
        else:
            if kb.shape[2] < end or kb.dtype != k.dtype or kb.device != k.device:
                capacity = max(end, 2 * kb.shape[2], 16)  # doubling: O(1) copies per token, on average
                kb, vb = self._grow(kb, k, start, capacity), self._grow(vb, v, start, capacity)
            kb[:, :, start:end] = k  # in place: nothing already held is copied
            vb[:, :, start:end] = v
        self._k[i], self._v[i], self._len[i] = kb, vb, end
        return kb[:, :, :end], vb[:, :, :end]

    @staticmethod
    def _grow(buf: Tensor, new: Tensor, held: int, capacity: int) -> Tensor:
        """A buffer of ``capacity`` rows holding the first ``held`` rows of ``buf``."""
        out = new.new_empty(new.shape[0], new.shape[1], capacity, new.shape[3])
        out[:, :, :held] = buf[:, :, :held]
        return out

    def _check_update(self, layer_idx: Any, k: Any, v: Any) -> int:
        i, n = as_int(layer_idx), len(self._len)
        if i is None or i < 0:
            raise ValueError(f"layer_idx must be an int >= 0, got {layer_idx!r}")
        if i > n:
            raise ValueError(f"layers must be filled in order: got layer {i}, cache has {n}")
        if not (isinstance(k, Tensor) and isinstance(v, Tensor)):
            raise TypeError(f"k and v must be torch.Tensors, got {type(k).__name__} and {type(v).__name__}")
        if k.dim() != 4 or v.dim() != 4 or k.shape[:3] != v.shape[:3]:
            raise ValueError(f"k and v must be (B, G, T_new, D) with the same batch, heads and length, got k "
                             f"{tuple(k.shape)} and v {tuple(v.shape)}")
        if not (k.is_floating_point() and v.dtype == k.dtype):
            raise TypeError(f"k and v must be floating tensors of one dtype, got {k.dtype} and {v.dtype}")
        if i < n:
            hk = (*self._k[i].shape[:2], self._len[i], self._k[i].shape[3])  # held (B, G, T, D)
            hv = (*self._v[i].shape[:2], self._len[i], self._v[i].shape[3])
            if hk[:2] != k.shape[:2] or hk[3] != k.shape[3] or hv[3] != v.shape[3]:
                raise ValueError(f"cache layer {i} holds keys of shape {tuple(hk)} but got new keys "
                                 f"{tuple(k.shape)} (values: {tuple(hv)} held, {tuple(v.shape)} new); batch, "
                                 f"heads and head width must match (call reset() for a new batch)")
        return i

    def check_batch(self, batch: int) -> None:
        """A model's step must continue the batch the cache holds (its first check, once per step)."""
        if self._k and self._k[0].shape[0] != batch:
            raise ValueError(f"this KVCache holds keys/values of a batch of {self._k[0].shape[0]} sequences, "
                             f"but the step has a batch of {batch}; batch, heads and head width must match "
                             f"(call reset() for a new batch)")

    def layer_len(self, layer_idx: int) -> int:
        """Tokens held in layer ``layer_idx`` (0 before its first update)."""
        return self._len[layer_idx] if layer_idx < len(self._len) else 0

    def has_cross(self, layer_idx: int) -> bool:
        return layer_idx in self.cross

    def get_cross(self, layer_idx: int) -> tuple[Tensor, Tensor]:
        return self.cross[layer_idx]

    def set_cross(self, layer_idx: int, k: Tensor, v: Tensor) -> None:
        self.cross[layer_idx] = (k, v)

    @property
    def n_layers(self) -> int:
        return len(self._len)

    @property
    def seq_len(self) -> int:
        return self._len[0] if self._len else 0

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def reset(self) -> None:
        """Forget everything (a new prompt, a new batch or another model)."""
        self.__init__()

    # --- Which model filled it, and undoing a failed step -----------------------------------
    def bind(self, model: Any, source: Optional[Tensor] = None) -> None:
        """Tie the cache to one model (what :func:`owner_of` records: the model itself and its
        sizes) and, for an encoder-decoder, to one source (the encoder output (B, S, C)). The
        first call records them; a later call with others is a ValueError that says what differs."""
        if self.owner is None:
            self.owner = owner_of(model)
        elif self.owner["instance"]() is not model:  # another model (or the first one is gone)
            owner = owner_of(model)
            differ = [k for k in owner if k != "instance" and owner[k] != self.owner.get(k)]
            if differ:
                held = ", ".join(f"{k}={self.owner.get(k)!r}" for k in differ)
                new = ", ".join(f"{k}={owner[k]!r}" for k in differ)
                what = f"a model with {held}, but it is used with a model with {new}"
            else:
                what = f"another {owner['model']} (of the same sizes)"
            raise ValueError(f"this KVCache holds keys/values of {what}; a cache serves the one model that "
                             f"filled it: call cache.reset() or make a new KVCache for this model")
        if source is None:
            return
        if self.source is None:
            self.source = source
        elif source is not self.source and (source.shape != self.source.shape
                                            or (eager(source) and not torch.equal(source, self.source))):
            raise ValueError(f"this KVCache holds cross-attention keys/values of another source (memory "
                             f"{tuple(self.source.shape)}, now {tuple(source.shape)}, or equal shapes with "
                             f"other values); call cache.reset() before decoding a new source")

    def snapshot(self) -> tuple:
        """What a step may change. Lengths, not contents: a step only appends rows."""
        return list(self._len), dict(self.cross), self.owner, self.source

    def restore(self, snap: tuple) -> None:
        """Back to a :meth:`snapshot`: every layer cut to its old length, the rest as it was."""
        lengths, self.cross, self.owner, self.source = snap
        n = len(lengths)
        self._k, self._v, self._len = self._k[:n], self._v[:n], list(lengths)

    def __len__(self) -> int:
        return self.seq_len

    def __repr__(self) -> str:
        return f"KVCache(n_layers={self.n_layers}, seq_len={self.seq_len}, nbytes={self.nbytes})"


def check_cache(cache: Any) -> None:
    """A ``cache`` argument is an attnlib.KVCache or None."""
    if cache is not None and not isinstance(cache, KVCache):
        raise TypeError(f"cache must be an attnlib.KVCache or None, got {type(cache).__name__}; "
                        f"make one with attnlib.KVCache()")


def owner_of(model: Any) -> dict[str, Any]:
    """What a KVCache records of the model that fills it (see KVCache.bind): the model itself
    (a weak reference, equal only to a reference to the same live model) and its sizes."""
    cfg = model.cfg
    return {"model": type(model).__name__, "n_layers": cfg.n_layers, "n_heads": cfg.n_heads,
            "n_kv_heads": cfg.n_kv_heads, "d_model": cfg.d_model, "positional": cfg.positional,
            "instance": weakref.ref(model)}
