"""Numbers one attention call moves between main memory (HBM) and on-chip memory (SRAM), counted.

A GPU keeps its tensors in main memory (HBM: tens of GB, a few TB/s) and computes on what it has
brought into the small on-chip memory of each streaming multiprocessor (SRAM: a few hundred KB,
an order of magnitude faster). Attention's arithmetic is the same however it is ordered; what the
order changes is how many numbers cross between the two. These functions count them for one head
of T queries and T keys, as Dao et al. (2022) analyse them:

- :func:`naive_attention_io`: S = Q K^T is written to HBM, read back for the softmax, P is written
  and read back to multiply by V: 4 T d + 4 T^2 numbers for d_v = d, Theta(T d + T^2).
- :func:`flash_attention_io`: FlashAttention's forward in FlashAttention-2's loop order, walked
  tile by tile: each tile of ``block_q`` queries is read once, every tile of ``block_k`` keys and
  values is read for it, the scores and the running max and sum stay on chip, and the tile's
  output and its rows' log-sum-exp (what the backward pass needs) are written once. K and V are
  read T / block_q times: about 2 T^2 d / block_q numbers. The tiles must fit on chip
  (:func:`tile_footprint`), so an SRAM of M numbers allows block_q of about M / (3 d) and the
  traffic is Theta(T^2 d^2 / M).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["AttentionIO", "naive_attention_io", "flash_attention_io", "tile_footprint"]


@dataclass(frozen=True)
class AttentionIO:
    """Numbers read from and written to HBM by one attention call (one head).

    Attributes:
        read, written: numbers moved each way; element_size: bytes per number.
    """

    read: int
    written: int
    element_size: int = 2

    @property
    def nbytes(self) -> int:
        """Bytes moved, both ways."""
        return (self.read + self.written) * self.element_size


def _positive(**sizes: object) -> None:
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def naive_attention_io(T: int, d: int, *, d_v: Optional[int] = None,
                       element_size: int = 2) -> AttentionIO:
    """The three passes of plain attention, each through HBM (Dao et al. 2022, Algorithm 0).

    Returns:
        AttentionIO: 2 T d + 2 T^2 + T d_v read, 2 T^2 + T d_v written.
    """
    d_v = d if d_v is None else d_v
    _positive(T=T, d=d, d_v=d_v, element_size=element_size)
    read = written = 0
    read += T * d + T * d          # 1. S = Q K^T / sqrt(d): read Q and K,
    written += T * T               #    write S (T, T)
    read += T * T                  # 2. P = softmax(S): read S,
    written += T * T               #    write P (T, T)
    read += T * T + T * d_v        # 3. O = P V: read P and V,
    written += T * d_v             #    write O (T, d_v)
    return AttentionIO(read, written, element_size)


def flash_attention_io(T: int, d: int, block_q: int, block_k: int, *, d_v: Optional[int] = None,
                       element_size: int = 2) -> AttentionIO:
    """Walk FlashAttention's forward loops over query and key tiles, counting HBM traffic.

    Returns:
        AttentionIO: T d (Q) + ceil(T / block_q) T (d + d_v) (K, V) read; T d_v (O) + T (the
        log-sum-exp of each row) written. The last tile of either loop may be shorter.
    """
    d_v = d if d_v is None else d_v
    _positive(T=T, d=d, block_q=block_q, block_k=block_k, d_v=d_v, element_size=element_size)
    read = written = 0
    for q0 in range(0, T, block_q):
        bq = min(block_q, T - q0)
        read += bq * d                          # Q_i, once
        for k0 in range(0, T, block_k):
            bk = min(block_k, T - k0)
            read += bk * (d + d_v)              # K_j, V_j; S_ij, m, l, O_i stay on chip
        written += bq * d_v + bq                # O_i and its rows' log-sum-exp, once
    return AttentionIO(read, written, element_size)


def tile_footprint(block_q: int, block_k: int, d: int, *, d_v: Optional[int] = None) -> int:
    """Numbers on chip during one tile step: Q_i, K_j, V_j, S_ij, O_i and the running m and l."""
    d_v = d if d_v is None else d_v
    _positive(block_q=block_q, block_k=block_k, d=d, d_v=d_v)
    return block_q * d + block_k * (d + d_v) + block_q * block_k + block_q * d_v + 2 * block_q
