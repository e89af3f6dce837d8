"""Turning next-token logits into text: sampling, and the two decoding loops (GPT, encoder-decoder).

Generation is a loop of forward passes. Without a cache each step re-runs the whole sequence;
with a :class:`KVCache` each step feeds only the newest token, and attention reads the keys and
values of the earlier tokens from the cache. Both give the same tokens (tested).
"""
from __future__ import annotations

import math
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import torch
from torch import Tensor, nn

from ._checks import as_int, as_real, check_generator, checked
from .attention import check_flag
from .cache import KVCache


@contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and inference mode inside; the caller's train/eval mode afterwards.

    Calls may overlap (two threads generating with one model): the first to enter records the
    mode, the last to leave restores it, so no call can restore the eval mode another one set."""
    with _modes_lock:
        users, mode = _modes.get(model, (0, model.training))
        _modes[model] = (users + 1, mode)
        model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        with _modes_lock:
            users, mode = _modes.pop(model)
            if users > 1:
                _modes[model] = (users - 1, mode)
            else:
                model.train(mode)


_modes: "weakref.WeakKeyDictionary[nn.Module, tuple[int, bool]]" = weakref.WeakKeyDictionary()
_modes_lock = threading.Lock()


def check_sampling(temperature: float, top_k: Optional[int], top_p: Optional[float] = None) -> None:
    if as_real(temperature) is None:
        raise TypeError(f"temperature must be a number >= 0 (0 means greedy), got {temperature!r}")
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature}")
    if top_k is not None and (as_int(top_k) is None or top_k < 1):
        raise ValueError(f"top_k must be a positive int or None, got {top_k!r}")
    if top_p is not None and (as_real(top_p) is None
                              or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be a number in (0, 1] or None (1 keeps every token), got top_p={top_p!r}")


def check_logits_shape(logits: Any) -> None:
    """Next-token logits: V >= 1 scores along the last dim, (..., V), usually (B, V)."""
    if not isinstance(logits, Tensor):
        raise TypeError(f"logits must be a torch.Tensor of shape (B, V), got {type(logits).__name__}")
    if logits.dim() < 1 or logits.shape[-1] < 1:
        raise ValueError(f"logits must have shape (..., V) with V >= 1 scores, usually (B, V) (the last "
                         f"position's scores, e.g. out.logits[:, -1]), got {tuple(logits.shape)}")
    if logits.dtype == torch.bool or logits.is_complex():
        raise TypeError(f"logits must be real numbers (float, or int scores), got dtype {logits.dtype}")


def top_p_filter(logits: Tensor, top_p: float) -> Tensor:
    """Nucleus filter: keep the smallest set of tokens whose probability sums to >= top_p.

    Tokens are ranked by probability; a token is kept when the mass of the tokens ranked strictly
    above it is still below top_p, so the most likely token is always kept. The others get -inf.

    Shapes:
        logits (..., V) -> (..., V), usually (B, V).
    """
    if top_p is None:
        raise ValueError("top_p must be a number in (0, 1] (1 keeps every token), got None")
    check_sampling(1.0, None, top_p)
    check_logits_shape(logits)
    if not logits.is_floating_point():
        logits = logits.float()  # integer scores: -inf needs a float
    check_logits(logits)
    return logits if top_p >= 1 else _nucleus(logits, top_p)  # 1 keeps every token


def _nucleus(logits: Tensor, top_p: float) -> Tensor:
    """:func:`top_p_filter` on logits already checked (sample_next checks them once)."""
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (B, V), most likely first
    probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs  # (B, V): mass ranked strictly above each token
    drop_sorted = mass_before >= top_p  # the set already reached top_p without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def check_logits(logits: Tensor) -> None:
    """NaN, +inf, or a row with no finite logit cannot be sampled from: say which row."""
    # The usual case in one vectorised pass and one sync: a sum is finite only if every term is
    # (NaN and +-inf carry through; +inf + -inf is NaN). A sum of finite logits that overflows
    # only takes the slower test below. (For GPT-2's 50,257 logits on one CPU thread: ~3 us,
    # against ~94 us for torch.isfinite(logits).all().)
    if math.isfinite(float(logits.sum())):
        return
    finite = torch.isfinite(logits)
    if bool(finite.all()):
        return
    logits = logits.reshape(-1, logits.shape[-1])  # (rows, V), whatever the leading dims
    for what, bad in (("NaN", torch.isnan(logits)), ("+inf", torch.isposinf(logits))):
        rows = bad.any(-1).nonzero()
        if rows.numel():
            raise ValueError(f"logits contain {what} (row {int(rows[0])}); the model's output is broken "
                             "(NaN/inf weights or inputs, or an overflow in half precision)")
    rows = torch.isneginf(logits).all(-1).nonzero()
    if rows.numel():
        raise ValueError(f"row {int(rows[0])} has no finite logit (every token is -inf): nothing to pick from")


def check_max_new_tokens(max_new_tokens: Any, prompt_len: int, max_len: int) -> int:
    """max_new_tokens as an int that fits after the prompt."""
    n = as_int(max_new_tokens)
    if n is None or n < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if prompt_len + n > max_len:
        raise ValueError(f"prompt length {prompt_len} + max_new_tokens {n} = {prompt_len + n} exceeds the "
                         f"model's max_len={max_len}")
    return n


def sample_next(logits: Tensor, *, temperature: float = 1.0, top_k: Optional[int] = None,
                top_p: Optional[float] = None, generator: Optional[torch.Generator] = None) -> Tensor:
    """Pick one token per row from next-token logits.

    temperature 0 is greedy (argmax); otherwise softmax(logits / temperature), restricted to the
    top_k most likely tokens when top_k is given, then to the nucleus (the smallest set of tokens
    whose probability sums to >= top_p, see :func:`top_p_filter`) when top_p is given, sampled
    with ``generator``. float64 logits are sampled in float64, others in float32.

    Shapes:
        logits (B, V) -> (B, 1) long; any leading dims: (..., V) -> (..., 1).
    """
    check_sampling(temperature, top_k, top_p)
    check_generator(generator)
    check_logits_shape(logits)
    lead = logits.shape[:-1]
    rows = logits.reshape(-1, logits.shape[-1])  # (B, V): one row per sequence
    return sample(rows, as_real(temperature), as_int(top_k), None if top_p is None else as_real(top_p),
                  generator).reshape(*lead, 1)


def sample(logits: Tensor, temperature: float, top_k: Optional[int], top_p: Optional[float],
           generator: Optional[torch.Generator]) -> Tensor:
    """:func:`sample_next` on (B, V) logits with checked arguments (the decoding loops call it
    at every step). Returns (B, 1) long."""
    if logits.dtype != torch.float64:
        logits = logits.float()  # sample in float32 even for a bf16 model
    check_logits(logits)
    if temperature == 0:
        # argmax: the first of equal maxima, as argmax returns it
        return logits.max(dim=-1, keepdim=True).indices  # (B, 1)
    if temperature == math.inf:  # the limit: every token with a finite logit equally likely
        scaled = torch.zeros_like(logits).masked_fill(torch.isneginf(logits), float("-inf"))
    else:
        scaled = logits / temperature
    # Only a temperature below 1 can overflow a finite logit (|x / T| <= |x| for T >= 1).
    if temperature < 1 and not math.isfinite(float(scaled.sum())):
        if not bool(torch.isfinite(scaled[torch.isfinite(logits)]).all()):
            # so small a temperature that logits / temperature overflows: the limit, greedy
            return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    logits = scaled
    if top_k is not None and top_k < logits.shape[-1]:  # top_k >= V keeps every token
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest logit
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        logits = _nucleus(logits, top_p)  # on the tempered, top-k-filtered distribution
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    if generator is not None and generator.device != probs.device:
        # a CPU generator cannot drive a CUDA multinomial: sample where the generator lives
        return torch.multinomial(probs.to(generator.device), 1, generator=generator).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)


def check_generation(temperature: Any, top_k: Any, top_p: Any, use_cache: Any,
                     generator: Any) -> tuple[float, Optional[int], Optional[float]]:
    """The sampling arguments of generate, checked once, as plain numbers."""
    check_sampling(temperature, top_k, top_p)
    check_flag("use_cache", use_cache)
    check_generator(generator)
    return as_real(temperature), as_int(top_k), None if top_p is None else as_real(top_p)


def generate_decoder_only(model: Any, input_ids: Tensor, max_new_tokens: int, *, temperature: float,
                          top_k: Optional[int], use_cache: bool,
                          generator: Optional[torch.Generator], top_p: Optional[float] = None) -> Tensor:
    """The GPT loop (see :meth:`attnlib.GPT.generate`). Returns (B, T + max_new_tokens)."""
    model.check_ids(input_ids)
    n_new = check_max_new_tokens(max_new_tokens, input_ids.shape[1], model.cfg.max_len)
    temperature, top_k, top_p = check_generation(temperature, top_k, top_p, use_cache, generator)
    B, T = input_ids.shape
    # made before inference mode and only written into there: the caller gets an ordinary tensor
    ids = input_ids.new_empty((B, T + n_new), dtype=torch.long)
    ids[:, :T] = input_ids
    cache = KVCache() if use_cache else None
    with evaluating(model), checked():  # the prompt is checked: the steps trust it
        step = ids[:, :T]  # the whole prompt first (prefill), then one token at a time
        for t in range(T, T + n_new):
            logits = model(step, cache=cache, logits_to_keep=1).logits[:, -1]  # (B, V)
            ids[:, t:t + 1] = sample(logits, temperature, top_k, top_p, generator)  # (B, 1)
            step = ids[:, t:t + 1] if use_cache else ids[:, :t + 1]  # without a cache: everything again
    return ids


def generate_encoder_decoder(model: Any, src_ids: Tensor, max_new_tokens: int, *, bos_id: int,
                             eos_id: Optional[int], temperature: float, top_k: Optional[int],
                             use_cache: bool, generator: Optional[torch.Generator],
                             src_attention_mask: Optional[Tensor], top_p: Optional[float] = None) -> Tensor:
    """The seq2seq loop (see :meth:`attnlib.EncoderDecoder.generate`). Returns (B, 1 + n)."""
    vocab = model.cfg.vocab_size
    for name, tok in (("bos_id", bos_id), ("eos_id", eos_id)):
        if tok is None and name == "eos_id":  # no end token: always max_new_tokens
            continue
        if as_int(tok) is None:  # numpy ints are fine
            raise TypeError(f"{name} must be an int token id, got {type(tok).__name__} {tok!r}")
        if not 0 <= as_int(tok) < vocab:
            raise ValueError(f"{name}={as_int(tok)} is outside [0, vocab_size={vocab})")
    bos_id, eos_id = as_int(bos_id), (None if eos_id is None else as_int(eos_id))
    n_new = check_max_new_tokens(max_new_tokens, 1, model.cfg.max_len)
    temperature, top_k, top_p = check_generation(temperature, top_k, top_p, use_cache, generator)
    B = src_ids.shape[0] if isinstance(src_ids, Tensor) and src_ids.dim() == 2 else 1
    ids = torch.full((B, 1 + n_new), bos_id, dtype=torch.long,
                     device=src_ids.device if isinstance(src_ids, Tensor) else None)
    with evaluating(model):
        memory, memory_mask, _ = model.encode(src_ids, src_attention_mask=src_attention_mask)  # once
        with checked():  # the source is checked: the steps trust it
            finished = torch.zeros(B, dtype=torch.bool, device=ids.device)
            # With a cache, each decoder layer projects the encoder output to cross-attention keys and
            # values on the first step (KVCache.set_cross) and reuses them on every later step.
            cache = KVCache() if use_cache else None
            n = 0
            for n in range(1, n_new + 1):
                step = ids[:, n - 1:n] if use_cache else ids[:, :n]
                logits = model.decode(step, memory, memory_mask=memory_mask, cache=cache).logits[:, -1]  # (B, V)
                nxt = sample(logits, temperature, top_k, top_p, generator)  # (B, 1)
                if eos_id is not None:
                    nxt = nxt.masked_fill(finished[:, None], eos_id)  # finished rows keep emitting eos
                    finished = finished | (nxt[:, 0] == eos_id)
                ids[:, n:n + 1] = nxt
                if eos_id is not None and bool(finished.all()):
                    break
    return ids[:, :1 + n].clone() if n < n_new else ids
