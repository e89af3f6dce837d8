"""Batches for next-token training: what each step of :func:`attnlib.train` reads.

A sequence of T + 1 tokens gives T next-token examples at once, inputs ``ids[:, :-1]``
and targets ``ids[:, 1:]`` (:func:`shift_targets`). An encoder-decoder learns from
(source, target) pairs with *teacher forcing* (:func:`teacher_forcing`): the decoder
reads the true target shifted right behind a begin-of-sequence token. :func:`sample_batch`
draws one batch from a corpus, from rows of sequences, from pairs, or from a function
that makes them.
"""
from __future__ import annotations

from typing import Callable, Optional, Union

import torch
from torch import Tensor

from ._checks import as_int, as_size

Pairs = tuple[Tensor, Tensor]
Data = Union[Tensor, Pairs, Callable[[torch.Generator], Union[Tensor, Pairs]]]


def shift_targets(ids: Tensor) -> tuple[Tensor, Tensor]:
    """(B, T + 1) token ids -> inputs (B, T) and targets (B, T), targets[:, t] = ids[:, t + 1]."""
    if not isinstance(ids, Tensor):
        raise TypeError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise TypeError(f"ids must be an integer tensor, got dtype {ids.dtype}")
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must have shape (B, T + 1) with T + 1 >= 2, got {tuple(ids.shape)}")
    return ids[:, :-1], ids[:, 1:]


def teacher_forcing(tgt_ids: Tensor, bos_id: int) -> tuple[Tensor, Tensor]:
    """Decoder input and targets for an encoder-decoder: the target shifted right behind ``bos_id``.

    Args:
        tgt_ids: (B, T) target ids, usually ending in an end-of-sequence id.
        bos_id: the begin-of-sequence id the decoder starts from (as in ``generate``).

    Returns:
        decoder_input (B, T) = ``[bos_id, tgt[:, 0], ..., tgt[:, T-2]]`` and targets (B, T) =
        ``tgt_ids``: position t reads tokens < t of the target and is scored on token t.
    """
    if not isinstance(tgt_ids, Tensor):
        raise TypeError(f"tgt_ids must be a torch.Tensor, got {type(tgt_ids).__name__}")
    if tgt_ids.is_floating_point() or tgt_ids.dtype == torch.bool:
        raise TypeError(f"tgt_ids must be an integer tensor, got dtype {tgt_ids.dtype}")
    if tgt_ids.dim() != 2 or tgt_ids.shape[1] < 1:
        raise ValueError(f"tgt_ids must have shape (B, T) with T >= 1, got {tuple(tgt_ids.shape)}")
    if as_int(bos_id) is None:  # numpy ints and 0-d tensors are ints too
        raise TypeError(f"bos_id must be an int, got {bos_id!r}")
    bos = torch.full_like(tgt_ids[:, :1], as_int(bos_id))  # (B, 1)
    return torch.cat([bos, tgt_ids[:, :-1]], dim=1), tgt_ids  # (B, T) each


def sample_batch(data: Data, batch_size: int, block_size: Optional[int],
                 generator: torch.Generator) -> Union[Tensor, Pairs]:
    """One (B, T + 1) batch of token ids, or one (src (B, S), tgt (B, T)) batch of pairs.

    ``data`` is either a 1-D corpus (random windows of ``block_size + 1`` tokens), a 2-D tensor
    (N, L) of sequences (``batch_size`` random rows), a pair ``(src (N, S), tgt (N, T))`` of
    aligned 2-D tensors (the same ``batch_size`` random rows of both), or a callable
    ``f(generator)`` returning a batch of either kind (synthetic tasks).
    """
    if callable(data) and not isinstance(data, Tensor):
        batch = data(generator)
        pair = isinstance(batch, (tuple, list)) and len(batch) == 2
        if not (isinstance(batch, Tensor) or pair and all(isinstance(b, Tensor) for b in batch)):
            raise TypeError(f"data(generator) must return a (B, T + 1) tensor of token ids or a "
                            f"(src, tgt) pair of tensors, got {type(batch).__name__}")
        return batch
    batch_size = as_size("batch_size", batch_size)
    if isinstance(data, (tuple, list)):
        if len(data) != 2 or not all(isinstance(d, Tensor) and d.dim() == 2 for d in data):
            raise ValueError("pairs must be (src_ids (N, S), tgt_ids (N, T)): two 2-D tensors "
                             "(a list or tuple is read as such a pair; for a corpus of token ids "
                             "pass a 1-D tensor, e.g. torch.tensor(ids))")
        src, tgt = data
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src_ids has {src.shape[0]} rows but tgt_ids has {tgt.shape[0]}; "
                             "pairs need one target row per source row")
        rows = torch.randint(0, src.shape[0], (batch_size,), generator=generator)
        return src[rows], tgt[rows]  # (B, S), (B, T)
    if not isinstance(data, Tensor):
        raise TypeError(f"data must be a token-id tensor or a callable, got {type(data).__name__}")
    if data.dim() == 1:
        if block_size is None or block_size < 1:
            raise ValueError(f"a 1-D corpus needs a positive block_size, got {block_size}")
        if data.numel() < block_size + 1:
            raise ValueError(
                f"the corpus has {data.numel()} tokens, "
                f"fewer than block_size + 1 = {block_size + 1}"
            )
        starts = torch.randint(0, data.numel() - block_size, (batch_size,),
                               generator=generator)
        return torch.stack([data[s : s + block_size + 1] for s in starts.tolist()])  # (B, T + 1)
    if data.dim() == 2:
        if data.shape[0] < 1 or data.shape[1] < 2:
            raise ValueError(f"2-D data needs rows of at least 2 tokens (inputs and their "
                             f"next-token targets), got data of shape {tuple(data.shape)}")
        rows = torch.randint(0, data.shape[0], (batch_size,), generator=generator)
        return data[rows]  # (B, L)
    raise ValueError(f"data must be 1-D (a corpus) or 2-D (N, L) sequences, "
                     f"got shape {tuple(data.shape)}")
