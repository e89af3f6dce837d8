"""A tiny training loop for next-token models: shifted targets, AdamW, a fixed number of steps.

Small on purpose: the book trains models of a few thousand parameters for a few hundred steps on
a laptop CPU, so there is no scheduler, no checkpointing and no evaluation loop here. What it does
show is the one idea that makes language-model training parallel: a sequence of T + 1 tokens gives
T next-token examples at once, inputs ``ids[:, :-1]`` and targets ``ids[:, 1:]``.
"""
from __future__ import annotations

from typing import Callable, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Data = Union[Tensor, Callable[[torch.Generator], Tensor]]


def shift_targets(ids: Tensor) -> tuple[Tensor, Tensor]:
    """(B, T + 1) token ids -> inputs (B, T) and targets (B, T), targets[:, t] = ids[:, t + 1]."""
    if not isinstance(ids, Tensor):
        raise TypeError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise TypeError(f"ids must be an integer tensor, got dtype {ids.dtype}")
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must have shape (B, T + 1) with T + 1 >= 2, got {tuple(ids.shape)}")
    return ids[:, :-1], ids[:, 1:]


def sample_batch(data: Data, batch_size: int, block_size: Optional[int], generator: torch.Generator) -> Tensor:
    """One (B, T + 1) batch of token ids.

    ``data`` is either a 1-D corpus (random windows of ``block_size + 1`` tokens), a 2-D tensor
    (N, L) of sequences (``batch_size`` random rows), or a callable ``f(generator) -> (B, L)`` that
    makes a fresh batch (synthetic tasks).
    """
    if callable(data) and not isinstance(data, Tensor):
        return data(generator)
    if not isinstance(data, Tensor):
        raise TypeError(f"data must be a token-id tensor or a callable, got {type(data).__name__}")
    if data.dim() == 1:
        if block_size is None or block_size < 1:
            raise ValueError(f"a 1-D corpus needs a positive block_size, got {block_size}")
        if data.numel() < block_size + 1:
            raise ValueError(
                f"the corpus has {data.numel()} tokens, fewer than block_size + 1 = {block_size + 1}"
            )
        starts = torch.randint(0, data.numel() - block_size, (batch_size,), generator=generator)
        return torch.stack([data[s : s + block_size + 1] for s in starts.tolist()])  # (B, T + 1)
    if data.dim() == 2:
        rows = torch.randint(0, data.shape[0], (batch_size,), generator=generator)
        return data[rows]  # (B, L)
    raise ValueError(f"data must be 1-D (a corpus) or 2-D (N, L) sequences, got shape {tuple(data.shape)}")


def train(
    model: nn.Module,
    data: Data,
    *,
    steps: int,
    batch_size: int = 32,
    block_size: Optional[int] = None,
    lr: float = 3e-3,
    weight_decay: float = 0.01,
    grad_clip: Optional[float] = 1.0,
    generator: Optional[torch.Generator] = None,
    progress: bool = False,
) -> list[float]:
    """Train ``model`` to predict the next token; return the loss of every step.

    Args:
        model: maps input ids (B, T) to logits (B, T, V), returned directly or as ``.logits``
            (e.g. :class:`attnlib.GPT`).
        data: a 1-D corpus of token ids, a 2-D (N, L) tensor of sequences, or a callable
            ``f(generator) -> (B, L)`` (see :func:`sample_batch`).
        steps: number of optimisation steps (one batch each).
        batch_size, block_size: B and T (block_size only for a 1-D corpus).
        lr, weight_decay: AdamW's learning rate and decoupled weight decay.
        grad_clip: clip the gradient norm to this value (None: no clipping).
        generator: seeds batch sampling (a fresh ``torch.Generator().manual_seed(0)`` if None), so
            a run is reproducible.
        progress: show a tqdm progress bar.

    Returns:
        A list of ``steps`` floats: the mean cross-entropy of each step's batch, before its update.
        The model is left in the mode (train/eval) it had before the call.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    generator = torch.Generator().manual_seed(0) if generator is None else generator
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    device = params[0].device
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    was_training = model.training
    model.train()
    rng = range(steps)
    if progress:
        from tqdm.auto import tqdm  # only here: the library itself never prints

        rng = tqdm(rng, desc="training")
    history: list[float] = []
    for _ in rng:
        inputs, targets = shift_targets(sample_batch(data, batch_size, block_size, generator).to(device))
        out = model(inputs)
        logits = out.logits if hasattr(out, "logits") else out  # (B, T, V)
        if logits.shape[:2] != targets.shape:
            raise ValueError(f"model returned logits {tuple(logits.shape)} for inputs {tuple(inputs.shape)}")
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()
        history.append(loss.item())
        if progress:
            rng.set_postfix(loss=f"{history[-1]:.3f}")
    model.train(was_training)
    return history
