"""Turning next-token logits into text: sampling, and the two decoding loops (GPT, encoder-decoder).

Generation is a loop of forward passes. Without a cache each step re-runs the whole sequence;
with a :class:`KVCache` each step feeds only the newest token, and attention reads the keys and
values of the earlier tokens from the cache. Both give the same tokens (tested).
"""
from __future__ import annotations

import math
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator, Optional

import torch
from torch import Tensor, nn

from ._checks import as_int, as_real, check_generator
from .cache import KVCache
from .decode import FastDecoder


@contextmanager
def eval_no_grad(model: nn.Module) -> Iterator[None]:
    """Eval mode and no autograd inside; the caller's training flag is restored afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


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
    return _nucleus(logits, top_p)


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


def check_max_new_tokens(max_new_tokens: int, prompt_len: int, max_len: int) -> None:
    if (as_int(max_new_tokens) is None
            or max_new_tokens < 0):
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if prompt_len + max_new_tokens > max_len:
        raise ValueError(
            f"prompt length {prompt_len} + max_new_tokens {max_new_tokens} = {prompt_len + max_new_tokens} "
            f"exceeds the model's max_len={max_len}"
        )


def sample_next(logits: Tensor, *, temperature: float = 1.0, top_k: Optional[int] = None,
                top_p: Optional[float] = None, generator: Optional[torch.Generator] = None) -> Tensor:
    """Pick one token per row from next-token logits.

    temperature 0 is greedy (argmax); otherwise softmax(logits / temperature), restricted to the
    top_k most likely tokens when top_k is given, then to the nucleus (the smallest set of tokens
    whose probability sums to >= top_p, see :func:`top_p_filter`) when top_p is given, sampled
    with ``generator``.

    Shapes:
        logits (B, V) -> (B, 1) long; any leading dims: (..., V) -> (..., 1).
    """
    check_sampling(temperature, top_k, top_p)
    check_generator(generator)
    check_logits_shape(logits)
    if logits.dim() != 2:  # one row per sequence, then the caller's shape back
        lead = logits.shape[:-1]
        return sample_next(logits.reshape(-1, logits.shape[-1]), temperature=temperature, top_k=top_k,
                           top_p=top_p, generator=generator).reshape(*lead, 1)
    logits = logits.float()  # sample in float32 even for a bf16 model
    check_logits(logits)
    if temperature == 0:
        # argmax: the first of equal maxima, as argmax returns it; torch.max(dim) finds it in
        # ~1/3 of argmax's time for a 50,257-token row on the CPU (23 against 63 us, one thread)
        return logits.max(dim=-1, keepdim=True).indices  # (B, 1)
    if temperature == math.inf:  # the limit: every token with a finite logit equally likely
        scaled = torch.zeros_like(logits).masked_fill(torch.isneginf(logits), float("-inf"))
    else:
        scaled = logits / temperature
    # Only a temperature below 1 can overflow a finite logit (|x / T| <= |x| for T >= 1). Then
    # one sum says whether every scaled logit is finite; a -inf logit (it stays -inf) or a sum
    # that overflows takes the exact test, which picks out the finite logits (~15 us for 512
    # logits and ~400 us for 50,257 on one CPU thread, against ~2 us for the sum).
    if temperature < 1 and not math.isfinite(float(scaled.sum())):
        if not bool(torch.isfinite(scaled[torch.isfinite(logits)]).all()):
            # so small a temperature that logits / temperature overflows: the limit, greedy
            return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    logits = scaled
    if top_k is not None and top_k < logits.shape[-1]:  # top_k >= V keeps every token
        kth = torch.topk(logits, int(top_k), dim=-1).values[:, -1:]  # (B, 1): the k-th largest logit
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        logits = _nucleus(logits, top_p)  # on the tempered, top-k-filtered distribution
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    if generator is not None and generator.device != probs.device:
        # a CPU generator cannot drive a CUDA multinomial: sample where the generator lives
        return torch.multinomial(probs.to(generator.device), 1, generator=generator).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)


def generate_decoder_only(model: Any, input_ids: Tensor, max_new_tokens: int, *, temperature: float,
                          top_k: Optional[int], use_cache: bool,
                          generator: Optional[torch.Generator], top_p: Optional[float] = None) -> Tensor:
    """The GPT loop (see :meth:`attnlib.GPT.generate`). Returns (B, T + max_new_tokens)."""
    model.check_ids(input_ids)
    check_max_new_tokens(max_new_tokens, input_ids.shape[1], model.cfg.max_len)
    max_new_tokens = int(max_new_tokens)
    check_sampling(temperature, top_k, top_p)
    check_generator(generator)
    B, T = input_ids.shape
    ids = input_ids.new_empty((B, T + max_new_tokens), dtype=torch.long)  # filled in place, never regrown
    ids[:, :T] = input_ids  # never the caller's tensor, even for 0 new tokens
    with eval_no_grad(model):
        cache = KVCache() if use_cache else None
        if cache is not None:
            cache.reserve(max_new_tokens)  # room for every new token: no reallocation while decoding
        # the same steps with less Python per token, where that cannot change them (attnlib/decode.py)
        fast = FastDecoder.for_model(model) if use_cache else None
        # The fast loop runs under inference mode (no version counters, no view tracking: a
        # tiny model's step 10-13% faster, ad hoc). The cache, logits and sampled ids made there
        # stay inside this function: ``ids`` was made before it and is only written into, so
        # the caller gets an ordinary tensor. The model's kept copies (q/k/v stack, W^T) were
        # built by for_model above, outside it; RoPE's tables are made as ordinary tensors
        # wherever they are first needed (RotaryEmbedding.cos_sin); oneDNN's packed weights and
        # the embedding bags' indices, kept beside the weights, serve only no-grad calls.
        with torch.inference_mode() if fast is not None else nullcontext():
            step_input = ids[:, :T]  # the whole prompt first, then one token at a time when cached
            for t in range(T, T + max_new_tokens):
                if fast is not None:
                    logits = fast.step(step_input, cache)  # (B, V)
                else:
                    logits = model(step_input, cache=cache).logits[:, -1, :]  # (B, V)
                ids[:, t:t + 1] = sample_next(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                                              generator=generator)  # (B, 1)
                step_input = ids[:, t:t + 1] if use_cache else ids[:, :t + 1]
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
        if not 0 <= tok < vocab:
            raise ValueError(f"{name}={int(tok)} is outside [0, vocab_size={vocab})")
    bos_id, eos_id = int(bos_id), (None if eos_id is None else int(eos_id))
    check_max_new_tokens(max_new_tokens, 1, model.cfg.max_len)
    max_new_tokens = int(max_new_tokens)
    check_sampling(temperature, top_k, top_p)
    check_generator(generator)
    with eval_no_grad(model):
        memory, memory_mask, _ = model.encode(src_ids, src_attention_mask=src_attention_mask)  # once
        B = src_ids.shape[0]
        ids = torch.full((B, 1), bos_id, dtype=torch.long, device=src_ids.device)  # (B, 1)
        finished = torch.zeros(B, dtype=torch.bool, device=src_ids.device)
        # With a cache, each decoder layer projects the encoder output to cross-attention keys and
        # values on the first step (KVCache.set_cross) and reuses them on every later step.
        cache = KVCache() if use_cache else None
        if cache is not None:
            cache.reserve(max_new_tokens)
        step_input = ids
        for _ in range(max_new_tokens):
            logits = model.decode(step_input, memory, memory_mask=memory_mask, cache=cache).logits[:, -1, :]
            nxt = sample_next(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                              generator=generator)  # (B, 1)
            if eos_id is not None:
                nxt = nxt.masked_fill(finished[:, None], eos_id)  # finished rows keep emitting eos
                finished = finished | (nxt[:, 0] == eos_id)
            ids = torch.cat([ids, nxt], dim=1)
            step_input = nxt if use_cache else ids
            if eos_id is not None and bool(finished.all()):
                break
    return ids
