"""PagedKVCache: the keys and values of many sequences in one pool of fixed-size blocks.

vLLM's paged attention (Kwon et al., 2023), as a toy. A server that gives each sequence one
contiguous buffer must reserve it for the longest the sequence may grow; a paged cache cuts the
memory into blocks of ``block_size`` positions and gives a sequence a new block only when its
last one is full. A sequence's **block table** lists its blocks in order, wherever they lie in
the pool, and a finished sequence gives its blocks back for others to reuse.

- :class:`PagedKVCache`: the pool, the block tables, ``write`` and ``read`` of one sequence;
- :meth:`PagedKVCache.sequence`: one sequence seen as an :class:`attnlib.KVCache` (batch 1), so a
  GPT decodes into the pool with its own forward: ``model(ids, cache=pool.sequence("a"))``;
- :func:`paged_attention`: one attention call for a batch of sequences of different lengths,
  each read through its block table (what vLLM's kernel does on a GPU, here in plain PyTorch).
"""
from __future__ import annotations

from typing import Any, Hashable, Optional

import torch
from torch import Tensor

from ._checks import as_int, as_size, checking
from .attention import scaled_dot_product_attention
from .cache import KVCache


class PagedKVCache:
    """A pool of blocks per layer, each block ``block_size`` positions of every key/value head.

    Args:
        n_layers, n_kv_heads, head_dim: the model's L, G and D.
        n_blocks: blocks in the pool (per layer; a sequence's block holds it in every layer).
        block_size: positions per block.

    Attributes:
        k_pool, v_pool: (n_layers, n_blocks, G, block_size, D).
        block_table: {sequence id: [the pool block of its block 0, of its block 1, ...]}.
        free_blocks: blocks no sequence holds, handed out from the front.
    """

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, *, n_blocks: int,
                 block_size: int = 16, dtype: torch.dtype = torch.float32,
                 device: Optional[torch.device] = None) -> None:
        L, G, D = (as_size(n, v) for n, v in (("n_layers", n_layers),
                                              ("n_kv_heads", n_kv_heads), ("head_dim", head_dim)))
        self.n_blocks, self.block_size = as_size("n_blocks", n_blocks), as_size("block_size",
                                                                               block_size)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point torch.dtype (e.g. torch.float32, the "
                            f"model's), got {dtype!r}")
        shape = (L, self.n_blocks, G, self.block_size, D)
        self.k_pool = torch.zeros(shape, dtype=dtype, device=device)
        self.v_pool = torch.zeros(shape, dtype=dtype, device=device)
        self.block_table: dict[Hashable, list[int]] = {}
        self.free_blocks: list[int] = list(range(self.n_blocks))
        self._len: dict[Hashable, list[int]] = {}    # sequence -> positions held, per layer
        self._views: dict[Hashable, PagedSequence] = {}

    @classmethod
    def for_model(cls, model: Any, *, n_blocks: int, block_size: int = 16) -> "PagedKVCache":
        """A pool shaped for ``model`` (an attnlib.GPT with multi-, grouped- or multi-query
        attention), in its weights' dtype and device."""
        cfg, w = model.cfg, model.lm_head.weight
        if cfg.attention != "mha" or cfg.sliding_window is not None:
            raise ValueError("PagedKVCache holds full keys and values of attention='mha' models "
                             "without a sliding window")
        return cls(cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, n_blocks=n_blocks,
                   block_size=block_size, dtype=w.dtype, device=w.device)

    # --- One sequence ------------------------------------------------------------------------
    def sequence(self, seq_id: Hashable) -> "PagedSequence":
        """Sequence ``seq_id`` as a KVCache a GPT can fill and read (the same object each time)."""
        if seq_id not in self._views:
            self._views[seq_id] = PagedSequence(self, seq_id)
        return self._views[seq_id]

    def length(self, seq_id: Hashable, layer: int = 0) -> int:
        """Positions held for ``seq_id`` in ``layer`` (0 for a sequence never written)."""
        return self._len[seq_id][layer] if seq_id in self._len else 0

    def write(self, seq_id: Hashable, layer: int, k: Tensor, v: Tensor) -> None:
        """Append k, v (G, T_new, D) to sequence ``seq_id`` in ``layer``, taking a new block from
        the free list whenever the sequence's last block is full."""
        table = self.block_table.setdefault(seq_id, [])
        lengths = self._len.setdefault(seq_id, [0] * self.k_pool.shape[0])
        start, bs = lengths[layer], self.block_size
        end = start + k.shape[1]
        while len(table) * bs < end:  # past the last block: take the next free one
            if not self.free_blocks:
                raise RuntimeError(f"the pool's {self.n_blocks} blocks of {bs} positions are all "
                                   f"in use; free a finished sequence or make a larger pool")
            table.append(self.free_blocks.pop(0))
        for t in range(k.shape[1]):
            block, slot = table[(start + t) // bs], (start + t) % bs
            self.k_pool[layer, block, :, slot] = k[:, t].detach()  # (G, D)
            self.v_pool[layer, block, :, slot] = v[:, t].detach()
        lengths[layer] = end

    def read(self, seq_id: Hashable, layer: int) -> tuple[Tensor, Tensor]:
        """Sequence ``seq_id``'s keys and values in ``layer``, in order: (G, T, D) each."""
        table, T = self.block_table.get(seq_id, []), self.length(seq_id, layer)
        G, D = self.k_pool.shape[2], self.k_pool.shape[4]
        k = self.k_pool[layer, table]  # (n_blocks_held, G, block_size, D), in the table's order
        v = self.v_pool[layer, table]
        k = k.transpose(0, 1).reshape(G, -1, D)[:, :T]  # (G, n x block_size, D) -> (G, T, D)
        v = v.transpose(0, 1).reshape(G, -1, D)[:, :T]
        return k, v

    def free(self, seq_id: Hashable) -> None:
        """Sequence ``seq_id`` is finished: its blocks go back to the free list."""
        self.free_blocks += self.block_table.pop(seq_id, [])
        self._len.pop(seq_id, None)

    def truncate(self, seq_id: Hashable, n: int) -> None:
        """Keep the first ``n`` positions of ``seq_id``; blocks no longer needed are freed."""
        table = self.block_table.get(seq_id, [])
        keep = -(-n // self.block_size)  # ceil(n / block_size)
        self.free_blocks += table[keep:]
        del table[keep:]
        if seq_id in self._len:
            self._len[seq_id] = [min(t, n) for t in self._len[seq_id]]

    # --- Sizes -------------------------------------------------------------------------------
    @property
    def block_nbytes(self) -> int:
        """Bytes of one block across every layer: 2 (keys, values) x L x G x block_size x D x
        element size."""
        L, _, G, bs, D = self.k_pool.shape
        return 2 * L * G * bs * D * self.k_pool.element_size()

    @property
    def blocks_used(self) -> int:
        return self.n_blocks - len(self.free_blocks)

    @property
    def nbytes(self) -> int:
        """Bytes of the blocks that sequences hold (the pool's free blocks not counted)."""
        return self.blocks_used * self.block_nbytes

    def _snapshot(self, seq_id: Hashable) -> tuple:
        return (list(self.block_table.get(seq_id, [])), list(self._len.get(seq_id, [])),
                list(self.free_blocks))

    def _restore(self, seq_id: Hashable, snapshot: tuple) -> None:
        table, lengths, self.free_blocks = snapshot
        if lengths:
            self.block_table[seq_id], self._len[seq_id] = table, lengths
        else:
            self.block_table.pop(seq_id, None), self._len.pop(seq_id, None)


class PagedSequence(KVCache):
    """One sequence of a :class:`PagedKVCache`, seen as a KVCache (batch 1): a GPT fills and reads
    it with its own forward, while the rows live in the pool's blocks.

    ``nbytes`` counts the blocks the sequence holds (the last one may be partly empty)."""

    def __init__(self, pool: PagedKVCache, seq_id: Hashable) -> None:
        super().__init__()
        self.pool, self.seq_id = pool, seq_id

    def update(self, layer_idx: int, k: Tensor, v: Tensor,
               window: Optional[int] = None) -> tuple[Tensor, Tensor]:
        """Write k, v (1, G, T_new, D) into the pool; return all the layer holds (1, G, T, D)."""
        if window is not None:
            raise ValueError(f"a paged cache does not roll: a sliding-window model "
                             f"(window={window}) needs attnlib.KVCache")
        if checking():
            _, _, G, _, D = self.pool.k_pool.shape
            for name, t in (("k", k), ("v", v)):
                if not isinstance(t, Tensor) or t.dim() != 4 or t.shape[0] != 1 \
                        or t.shape[1] != G or t.shape[3] != D:
                    got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
                    raise ValueError(f"{name} must be (1, G={G}, T_new, D={D}) for one sequence "
                                     f"of this pool, got {got}")
        self.pool.write(self.seq_id, layer_idx, k[0], v[0])
        k_all, v_all = self.pool.read(self.seq_id, layer_idx)  # (G, T, D) each
        return k_all[None], v_all[None]

    def check_model(self, model: Any, batch: int) -> None:
        if batch != 1:
            raise ValueError(f"a paged sequence holds one sequence, but the step has a batch of "
                             f"{batch}; use one pool.sequence(id) per sequence")
        super().check_model(model, batch)

    @property
    def keys(self) -> list[Tensor]:
        return [self.pool.read(self.seq_id, i)[0][None] for i in range(self.n_layers)]

    @property
    def values(self) -> list[Tensor]:
        return [self.pool.read(self.seq_id, i)[1][None] for i in range(self.n_layers)]

    @property
    def n_layers(self) -> int:
        return sum(1 for n in self.pool._len.get(self.seq_id, []) if n)

    @property
    def seq_len(self) -> int:
        return self.pool.length(self.seq_id)

    def layer_len(self, layer_idx: int) -> int:
        return self.pool.length(self.seq_id, layer_idx) if layer_idx < self.pool.k_pool.shape[0] \
            else 0

    @property
    def nbytes(self) -> int:
        return len(self.pool.block_table.get(self.seq_id, [])) * self.pool.block_nbytes

    def crop(self, n: int) -> None:
        if not 0 <= n <= self.seq_len:
            raise ValueError(f"crop needs an int n with 0 <= n <= seq_len={self.seq_len}, "
                             f"got {n!r}")
        self.pool.truncate(self.seq_id, n)

    def reset(self) -> None:
        """Forget the sequence: its blocks go back to the pool."""
        self.pool.free(self.seq_id)
        self.owner = None

    def _state(self) -> tuple:
        return super()._state(), self.pool._snapshot(self.seq_id)

    def _set_state(self, state: tuple) -> None:
        base, snapshot = state
        super()._set_state(base)
        self.pool._restore(self.seq_id, snapshot)


def paged_attention(query: Tensor, pool: PagedKVCache, layer: int,
                    seq_ids: list[Hashable]) -> Tensor:
    """Causal attention for a batch of sequences of different lengths, in one call.

    Each sequence's keys and values are gathered through its block table and padded to the
    longest; a mask keeps every query to its own sequence's positions, up to its own.

    Args:
        query: (B, H, T_new, D), the queries of the last T_new positions of each of the B
            sequences ``seq_ids`` (their keys and values already written to ``pool``).

    Returns:
        (B, H, T_new, D), what attention over each sequence's own keys and values gives.
    """
    check_paged_call(query, pool, layer, seq_ids)
    tables = [pool.block_table[s] for s in seq_ids]
    dev = query.device
    lengths = torch.tensor([pool.length(s, layer) for s in seq_ids], device=dev)  # (B,)
    n = max(len(t) for t in tables)
    # (B, n) block ids; a short table padded with its own first block (masked below)
    padded = torch.tensor([t + t[:1] * (n - len(t)) for t in tables], device=pool.k_pool.device)
    B, G, D = len(seq_ids), pool.k_pool.shape[2], pool.k_pool.shape[4]
    k = pool.k_pool[layer, padded].transpose(1, 2).reshape(B, G, -1, D)   # (B, G, n x bs, D)
    v = pool.v_pool[layer, padded].transpose(1, 2).reshape(B, G, -1, D)
    T_new = query.shape[2]
    q_pos = lengths[:, None] - T_new + torch.arange(T_new, device=dev)     # (B, T_new)
    k_pos = torch.arange(k.shape[2], device=dev)                            # (n x bs,)
    mask = k_pos[None, None, :] <= q_pos[:, :, None]                        # (B, T_new, n x bs)
    out, _ = scaled_dot_product_attention(query, k, v, attn_mask=mask[:, None],
                                          enable_gqa=G != query.shape[1])
    return out


def check_paged_call(query: Any, pool: Any, layer: Any, seq_ids: Any) -> None:
    """:func:`paged_attention`'s arguments: queries (B, H, T_new, D) for B sequences the pool
    holds (a sequence shorter than T_new gives its extra query rows zeros, as a ragged batch
    needs)."""
    if not isinstance(pool, PagedKVCache):
        raise TypeError(f"pool must be an attnlib.PagedKVCache, got {type(pool).__name__}")
    L, D = pool.k_pool.shape[0], pool.k_pool.shape[4]
    if as_int(layer) is None or not 0 <= as_int(layer) < L:
        raise ValueError(f"layer must be an int in [0, {L}), the pool's layers, got {layer!r}")
    if isinstance(seq_ids, (str, bytes)) or not isinstance(seq_ids, (list, tuple)) or not seq_ids:
        raise TypeError(f"seq_ids must be a non-empty list of sequence ids, got {seq_ids!r}")
    unknown = [s for s in seq_ids if s not in pool.block_table]
    if unknown:
        raise ValueError(f"seq_ids {unknown} are not in the pool (it holds "
                         f"{list(pool.block_table)}); write their keys and values first")
    if not isinstance(query, Tensor) or query.dim() != 4 or query.shape[0] != len(seq_ids) \
            or query.shape[3] != D:
        got = tuple(query.shape) if isinstance(query, Tensor) else type(query).__name__
        raise ValueError(f"query must be (B, H, T_new, D) = ({len(seq_ids)}, H, T_new, {D}), one "
                         f"row of queries per sequence id, got {got}")
