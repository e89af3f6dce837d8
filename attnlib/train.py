"""A tiny training loop for next-token models: shifted targets, AdamW, a fixed number of steps.

Small on purpose: the book trains models of a few thousand parameters for a few hundred
steps on a laptop CPU, so there is no scheduler, no checkpointing and no evaluation loop
here. What it does show is the one idea that makes language-model training parallel: a
sequence of T + 1 tokens gives T next-token examples at once, inputs ``ids[:, :-1]`` and
targets ``ids[:, 1:]``.

Encoder-decoders train the same way, on (source, target) pairs, with *teacher forcing*: the
decoder reads the true target shifted right by one, behind a begin-of-sequence token
(``[bos, y_0, ..., y_{T-2}]``), and position t is scored on ``y_t``, the token after the ones it
has read (:func:`teacher_forcing`).

The batches (shifted targets, teacher forcing, random windows and rows) come from
:mod:`attnlib.batches`.
"""
from __future__ import annotations

import math
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, Sequence

import torch
from torch import Tensor, nn

from ._checks import as_int, as_real, check_generator
from .batches import Data, Pairs, sample_batch, shift_targets, teacher_forcing
from .encoder_decoder import Encoder, EncoderDecoder
from .models import GPT
from .outputs import IGNORE_INDEX, lm_loss

__all__ = ["train", "train_many", "shift_targets", "teacher_forcing", "sample_batch", "Data",
           "Pairs"]


_TAKES = ("an attnlib.GPT (or any module mapping ids (B, T) to logits (B, T, V)) with a corpus "
          "or (N, L) sequences, or an attnlib.EncoderDecoder with (src, tgt) pairs and bos_id")


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
    bos_id: Optional[int] = None,
    pad_id: Optional[int] = None,
    callback: Optional[Callable[[int, float], None]] = None,
) -> list[float]:
    """Train ``model`` to predict the next token; return the loss of every step.

    Args:
        model: maps input ids (B, T) to logits (B, T, V), returned directly or as ``.logits``
            (e.g. :class:`attnlib.GPT`); for pairs, ``model(src_ids, decoder_input)`` does
            (e.g. :class:`attnlib.EncoderDecoder`).
        data: a 1-D corpus of token ids, a 2-D (N, L) tensor of sequences, a pair
            ``(src_ids (N, S), tgt_ids (N, T))`` for an encoder-decoder, or a callable
            ``f(generator)`` returning a batch of either kind (see :func:`sample_batch`).
        steps: number of optimisation steps (one batch each).
        batch_size, block_size: B and T (block_size only for a 1-D corpus).
        lr, weight_decay: AdamW's learning rate and decoupled weight decay.
        grad_clip: clip the gradient norm to this value (None: no clipping).
        generator: seeds batch sampling (a fresh ``torch.Generator().manual_seed(0)`` if None), so
            a run is reproducible.
        progress: show a tqdm progress bar.
        bos_id: pairs only (required there): the decoder's start token, see :func:`teacher_forcing`.
        pad_id: pairs only: padding id; padded targets are left out of the loss and padded source
            tokens are masked (the model is called with ``src_attention_mask``).
        callback: called as ``callback(step, loss)`` after each update (step counts from 1), e.g.
            to save attention snapshots during training.

    Returns:
        A list of ``steps`` floats: the mean cross-entropy of each step's batch, before its update.
        The model is left in the mode (train/eval) it had before the call.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (e.g. attnlib.GPT), "
                        f"got {type(model).__name__}")
    if isinstance(model, Encoder):
        raise TypeError(f"train trains a next-token model: {_TAKES}; an attnlib.Encoder returns "
                        f"hidden states, not next-token logits (train it with a loop of your own)")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    for name, n in (("batch_size", batch_size), ("block_size", block_size)):
        if n is None and name == "block_size":
            continue
        if as_int(n) is None or n < 1:
            raise ValueError(f"{name} must be a positive int, got {name}={n!r}")
    for name, x, low in (("lr", lr, ">= 0"), ("weight_decay", weight_decay, ">= 0"),
                         ("grad_clip", grad_clip, ">= 0 or None")):
        if x is None and name == "grad_clip":
            continue
        value = as_real(x)  # a number, or a 0-d tensor (AdamW takes a tensor lr)
        if value is None:
            raise TypeError(f"{name} must be a number {low}, got {name}={x!r}")
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number {low}, got {name}={x!r}")
    check_generator(generator)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable as callback(step, loss), "
                        f"got {type(callback).__name__}")
    for name, tok in (("bos_id", bos_id), ("pad_id", pad_id)):
        if tok is not None and (as_int(tok) is None):
            raise TypeError(f"{name} must be an int token id or None, got {name}={tok!r}")
    bos_id, pad_id = (None if t is None else as_int(t) for t in (bos_id, pad_id))  # plain ints
    generator = torch.Generator().manual_seed(0) if generator is None else generator
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    device = params[0].device
    # fused: AdamW's update in one PyTorch kernel (faster; the loop's numbers up to float rounding)
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay,
                                  fused=device.type in ("cpu", "cuda"))
    was_training = model.training
    model.train()
    rng = range(steps)
    if progress:
        from tqdm.auto import tqdm  # only here: the library itself never prints

        rng = tqdm(rng, desc="training")
    history: list[float] = []
    try:  # the caller's mode comes back however the loop ends (an error, a callback's, Ctrl-C)
        for step in rng:
            batch = sample_batch(data, batch_size, block_size, generator)
            pairs = isinstance(batch, (tuple, list))
            seq2seq = isinstance(model, EncoderDecoder)
            if (isinstance(model, GPT) or seq2seq) and pairs != seq2seq:
                got = "(src, tgt) pairs" if pairs else "one sequence of ids per row"
                raise TypeError(f"data gives {got}, which an attnlib.{type(model).__name__} "
                                f"does not take: train takes {_TAKES}")
            if pairs:
                out, targets = _seq2seq_forward(model, batch, bos_id, pad_id, device)
            else:
                inputs, targets = shift_targets(batch.to(device))
                out = model(inputs)
            logits = out.logits if hasattr(out, "logits") else out  # (B, T, V)
            if not isinstance(logits, Tensor) or logits.dim() != 3:
                got = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
                raise TypeError(f"model must return next-token logits (B, T, V), directly or as "
                                f".logits; got {got}. train takes {_TAKES}")
            if logits.shape[:2] != targets.shape:
                raise ValueError(f"model returned logits {tuple(logits.shape)} "
                                 f"for targets {tuple(targets.shape)}")
            loss = lm_loss(logits, targets)  # mean cross-entropy over the targets not skipped
            value = loss.item()
            if not math.isfinite(value):  # checked before this step's update
                if not bool((targets != IGNORE_INDEX).any()):
                    # a batch whose targets are all padding scores nothing: no update, a NaN
                    # in the history
                    warnings.warn(f"step {step + 1}: every target in the batch is padding; "
                                  f"the step is skipped (its loss is recorded as nan)",
                                  stacklevel=2)
                    history.append(value)
                    if callback is not None:
                        callback(step + 1, value)
                    continue
                raise ValueError(
                    f"the loss at step {step + 1} is {value}: the weights or activations "
                    f"overflowed (a learning rate too large? lr={lr}) or the model's output "
                    f"is broken"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, grad_clip)
            optimizer.step()
            history.append(value)
            if progress:
                rng.set_postfix(loss=f"{history[-1]:.3f}")
            if callback is not None:
                callback(step + 1, history[-1])
    finally:
        model.train(was_training)
    return history


def _seq2seq_forward(model: nn.Module, batch: Sequence[Tensor], bos_id: Optional[int],
                     pad_id: Optional[int], device: torch.device) -> tuple[Any, Tensor]:
    """Teacher-forced forward pass on one (src, tgt) batch; returns (model output, targets)."""
    if bos_id is None:
        raise ValueError("training on (src, tgt) pairs needs bos_id, the decoder's start token "
                         "(e.g. train(model, pairs, steps=..., bos_id=tok.bos_id))")
    if len(batch) != 2:
        raise ValueError(f"a pair batch must be (src_ids, tgt_ids), got {len(batch)} tensors")
    src, tgt = (t.to(device) for t in batch)
    if src.shape[0] != tgt.shape[0]:
        raise ValueError(f"src_ids batch {src.shape[0]} != tgt_ids batch {tgt.shape[0]}")
    decoder_input, targets = teacher_forcing(tgt, bos_id)  # (B, T) each
    if pad_id is None:
        return model(src, decoder_input), targets
    targets = targets.masked_fill(targets == pad_id, IGNORE_INDEX)  # no loss on padding
    src_mask = (src != pad_id).long()  # (B, S), 1 real / 0 pad
    return model(src, decoder_input, src_attention_mask=src_mask), targets


def _check_unshared(models: list[nn.Module]) -> None:
    """Parameters two models share (the same module in both, weights tied by hand) would be
    updated by two threads at once; shared frozen ones are only read, and are fine."""
    # memory -> (first model, its name, trained there)
    seen: dict[tuple, tuple[int, str, bool]] = {}
    for i, m in enumerate(models):
        for name, p in m.named_parameters():
            if p.device.type == "meta" or not p.numel():
                continue
            key = (p.device, p.untyped_storage().data_ptr())
            j, first, trained = seen.setdefault(key, (i, name, p.requires_grad))
            if j != i and (trained or p.requires_grad):
                raise ValueError(f"models[{j}] and models[{i}] share parameters ({first} of "
                                 f"models[{j}] is {name} of models[{i}]): two threads would update "
                                 f"them at once; give each model its own copy (copy.deepcopy) or "
                                 f"train them one after the other with attnlib.train")


def train_many(models: Sequence[nn.Module], data: Data, *, seeds: Sequence[int],
               workers: Optional[int] = None, **kwargs: Any) -> list[list[float]]:
    """:func:`train` for several models at once, each on its own CPU core; their loss histories.

    Model i trains exactly as ``train(models[i], data, generator=torch.Generator().manual_seed(
    seeds[i]), **kwargs)`` would on one thread, and comes out bit for bit the same (tested): each
    model has its own weights, optimizer and batches, and the data is only read. This is how a
    chapter compares several trained models (schemes, seeds) in the time of a few.

    Build the models first (seeding each): their initial weights come from torch's global random
    generator, which threads share. For the same reason models with dropout are refused.

    Args:
        models: distinct modules to train; data and kwargs: as :func:`train` (not ``generator``).
        seeds: one batch-sampling seed per model.
        workers: models trained at once (default: one per CPU core, at most one per model).
    """
    models, seeds = list(models), list(seeds)
    if not models or not all(isinstance(m, nn.Module) for m in models):
        raise TypeError("models must be a non-empty list of torch.nn.Modules (e.g. attnlib.GPT)")
    if len({id(m) for m in models}) != len(models):
        raise ValueError("the same model appears twice in models: "
                         "two threads would train it at once")
    _check_unshared(models)
    if len(seeds) != len(models) or any(as_int(s) is None for s in seeds):
        raise ValueError(f"seeds must hold one int per model: {len(models)} models, "
                         f"got seeds={seeds!r}")
    if "generator" in kwargs:
        raise TypeError("train_many seeds each model's batches itself: pass seeds=[...], "
                        "not generator")
    for i, m in enumerate(models):
        if any(getattr(x, "p", 0) > 0 for x in m.modules() if isinstance(x, nn.Dropout)) or any(
                getattr(x, "dropout", 0) > 0 for x in m.modules()
                if type(x).__name__ == "MultiHeadAttention"):
            raise ValueError(f"models[{i}] has dropout, which draws from torch's global random "
                             "generator that threads share (the result would depend on timing); "
                             "train it with attnlib.train")
    n = min(len(models), os.cpu_count() or 1) if workers is None else as_int(workers)
    if n is None or n < 1:
        raise ValueError(f"workers must be a positive int or None, got {workers!r}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core per model: the same arithmetic as a one-thread run
    try:
        with ThreadPoolExecutor(n) as pool:  # torch lets go of Python's lock inside its operations
            jobs = [pool.submit(train, m, data,
                                generator=torch.Generator().manual_seed(as_int(s)), **kwargs)
                    for m, s in zip(models, seeds)]
            return [job.result() for job in jobs]
    finally:
        torch.set_num_threads(threads)
