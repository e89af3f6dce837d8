"""Turning next-token logits into a token: greedy, temperature, top-k and nucleus (top-p).

The decoding loops (``GPT.generate``, ``EncoderDecoder.generate``) call :func:`pick` at every
step; :func:`sample_next` and :func:`top_p_filter` are the same operations for a reader's own
logits, with their arguments checked.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .checks import check_finite, check_logits_shape, check_sampling


def pick(logits: Tensor, temperature: float, top_k: Optional[int], top_p: Optional[float],
         generator: Optional[torch.Generator]) -> Tensor:
    """One token for each row of next-token logits (..., V) -> (...) long: (B, 1) for the model's
    last position (B, 1, V).

    Greedy (temperature 0) is argmax: the first of equal maxima. Arguments are checked by the
    caller, and so are NaN and inf: the decoding loops hand each step's logits to a
    :class:`~attnlib.checks.LogitWatch`, which reads them once, after the loop (reading them
    here would stop a GPU at every token). float64 logits are sampled in float64, others in
    float32."""
    if temperature == 0:
        return logits.argmax(dim=-1)  # exact in any dtype: comparisons need no widening
    probs, _ = distribution(logits, temperature, top_k, top_p)  # (..., V)
    return draw(probs, generator)


def _wide(logits: Tensor) -> Tensor:
    """Logits to sample from: float64 stays, every other dtype becomes float32 (a bf16 model)."""
    return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()


def distribution(logits: Tensor, temperature: float, top_k: Optional[int],
                 top_p: Optional[float]) -> tuple[Tensor, Tensor]:
    """The distribution :func:`pick` draws from at temperature > 0, and each row's largest logit.

    softmax(logits / temperature) restricted to the top_k most likely tokens, then to the nucleus
    (top_p). Speculative decoding compares two models' distributions built exactly this way.

    Shapes:
        logits (..., V) -> probs (..., V) (rows sum to 1; a row holding NaN or inf is all ones,
        drawn and refused later by the caller's check), top (...)."""
    logits = _wide(logits)
    top = logits.amax(dim=-1, keepdim=True)  # (..., 1); NaN where the row holds a NaN
    if top_k is not None and top_k < logits.shape[-1]:  # ranked before any temperature can tie
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    # softmax ignores a constant per row: with the top moved to 0 first no temperature overflows,
    # a tiny one gives the argmax and an infinite one every finite-logit token alike (held in
    # the dtype's range: 1e-310 would round to 0 in float32)
    info = torch.finfo(logits.dtype)
    z = (logits - top) / min(max(temperature, info.tiny), info.max)
    if top_p is not None and top_p < 1:
        z = _nucleus(z, top_p)  # on the tempered, top-k-filtered distribution
    probs = torch.softmax(z, dim=-1)  # (..., V)
    probs = torch.where(torch.isfinite(top), probs, 1.0)  # a broken row: drawn, refused later
    return probs, top[..., 0]


def draw(probs: Tensor, generator: Optional[torch.Generator]) -> Tensor:
    """One token per row of probabilities (..., V) (each row's sum need not be 1) -> (...)."""
    rows = probs.reshape(-1, probs.shape[-1])  # (N, V): multinomial draws from rows
    # a CPU generator cannot drive a CUDA multinomial: sample where the generator lives
    on = generator.device if generator is not None else rows.device
    token = torch.multinomial(rows.to(on), 1, generator=generator).to(rows.device)  # (N, 1)
    return token.view(probs.shape[:-1])


def _nucleus(logits: Tensor, top_p: float) -> Tensor:
    """Keep the smallest set of most likely tokens whose probability sums to >= top_p; the
    others get -inf. The most likely token is always kept."""
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (B, V), likeliest first
    probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs  # (B, V): mass ranked strictly above
    drop_sorted = mass_before >= top_p  # the set already reached top_p without this token
    drop_sorted[..., 0] = False  # even for a top_p below float32's smallest number
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def sample_next(logits: Tensor, *, temperature: float = 1.0, top_k: Optional[int] = None,
                top_p: Optional[float] = None,
                generator: Optional[torch.Generator] = None) -> Tensor:
    """Pick one token per row from next-token logits.

    temperature 0 is greedy (argmax); otherwise softmax(logits / temperature), restricted to the
    top_k most likely tokens when top_k is given, then to the nucleus (the smallest set of tokens
    whose probability sums to >= top_p, see :func:`top_p_filter`) when top_p is given, sampled
    with ``generator``. float64 logits are sampled in float64, others in float32.

    Shapes:
        logits (B, V) -> (B, 1) long; any leading dims: (..., V) -> (..., 1).
    """
    temperature, top_k, top_p = check_sampling(temperature, top_k, top_p, generator)
    check_logits_shape(logits)
    rows = logits.detach().reshape(-1, logits.shape[-1])  # (B, V): one row per sequence
    check_finite(rows.amax(dim=-1))  # (B,): NaN, +inf, or a row with no finite logit
    return pick(rows, temperature, top_k, top_p, generator).reshape(*logits.shape[:-1], 1)


def top_p_filter(logits: Tensor, top_p: float) -> Tensor:
    """Nucleus filter: keep the smallest set of tokens whose probability sums to >= top_p.

    Tokens are ranked by probability; a token is kept when the mass of the tokens ranked strictly
    above it is still below top_p, so the most likely token is always kept. The others get -inf.

    Shapes:
        logits (..., V) -> (..., V), usually (B, V).
    """
    if top_p is None:
        raise ValueError("top_p must be a number in (0, 1] (1 keeps every token), got None")
    _, _, top_p = check_sampling(1.0, None, top_p)
    check_logits_shape(logits)
    if not logits.is_floating_point():
        logits = logits.float()  # integer scores: -inf needs a float
    check_finite(logits.reshape(-1, logits.shape[-1]).amax(dim=-1))
    return logits if top_p >= 1 else _nucleus(logits, top_p)  # 1 keeps every token
