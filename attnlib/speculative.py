"""Speculative decoding (Leviathan et al. 2023): a small draft model proposes, the target checks.

A decode step of a large model is bound by reading its weights, so scoring k + 1 tokens in one
forward costs about as much as scoring one. The draft proposes up to k tokens, one at a time;
the target scores them all in one forward over its KV cache; the longest acceptable prefix is
kept, plus one token of the target's own (a correction, or a bonus when all k pass), and both
caches are cropped back to what was kept.

Sampling stays exact: a draft token x, drawn from the draft's q, is accepted with probability
min(1, p(x) / q(x)), and after a rejection the token is drawn from norm(max(0, p - q)), so every
token is distributed as the target's own p (p and q after temperature, top_k and top_p, built by
:func:`attnlib.generation.distribution`, as ``generate`` samples them). Greedy decoding accepts
a draft token when it is the target's argmax, so it returns the target's greedy tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import Tensor

from ._checks import as_size, trusted
from .cache import KVCache
from .checks import check_device, check_finite, check_generate
from .generation import distribution, draw, pick
from .models import GPT


@dataclass
class SpeculativeStats:
    """What one :func:`speculative_generate` call did (plain ints).

    Attributes:
        proposed: draft tokens proposed; accepted: those the target kept (accepted / proposed is
            the acceptance rate); target_calls: target forwards, one per round (a plain
            ``generate`` makes one per token); draft_calls: draft forwards.
    """

    proposed: int = 0
    accepted: int = 0
    target_calls: int = 0
    draft_calls: int = 0


def speculative_generate(target: GPT, draft: GPT, input_ids: Tensor, max_new_tokens: int, *,
                         k: int = 4, temperature: float = 0.0, top_k: Optional[int] = None,
                         top_p: Optional[float] = None,
                         generator: Optional[torch.Generator] = None
                         ) -> tuple[Tensor, SpeculativeStats]:
    """Extend one prompt by max_new_tokens tokens of ``target``, drafted by ``draft``.

    temperature 0 returns ``target.generate(input_ids, max_new_tokens, temperature=0.0)``'s
    tokens (up to floating-point ties: the target scores k + 1 positions at once); at
    temperature > 0 every token is distributed as ``target.generate`` samples it.

    Args:
        target, draft: attnlib GPTs with one vocabulary (the draft: smaller, faster).
        input_ids: (1, T) long. One sequence only: the rows of a batch would accept different
            numbers of draft tokens each round (a ValueError for B != 1; call it once per row).
        max_new_tokens: tokens to add; T + max_new_tokens <= target.cfg.max_len.
        k: draft tokens proposed per round (>= 1).
        temperature, top_k, top_p, generator: sampling, as in :meth:`GPT.generate`.

    Returns:
        (ids (1, T + max_new_tokens), the prompt first; :class:`SpeculativeStats`).
    """
    n, sampling, k = check_speculative(target, draft, input_ids, max_new_tokens, k, temperature,
                                       top_k, top_p, generator)
    stats, tops = SpeculativeStats(), ([], [])  # tops: target's and draft's largest logits
    # both caches are cropped by up to k tokens a round: a rolling (sliding-window) cache
    # keeps k - 1 positions beyond its window for that
    caches = KVCache(extra=k - 1), KVCache(extra=k - 1)
    ids, end = input_ids, input_ids.shape[1] + n
    with torch.inference_mode(), trusted():
        while ids.shape[1] < end:  # each round adds the kept drafts and one token of the target
            ids = _round(target, draft, caches, ids, min(k, end - ids.shape[1] - 1), sampling,
                         generator, stats, tops)
        for name, top in zip(("target", "draft"), tops):
            if top:
                try:  # one read for the whole call, as generate
                    check_finite(torch.cat(top)[None])  # (1, positions)
                except ValueError as e:
                    raise ValueError(f"the {name} model: {e}") from None
    return torch.cat([input_ids, ids[:, input_ids.shape[1]:]], dim=1), stats  # ordinary tensor


def _round(target: GPT, draft: GPT, caches: tuple[KVCache, KVCache], ids: Tensor, k: int,
           sampling: tuple, generator: Optional[torch.Generator], stats: SpeculativeStats,
           tops: tuple[list, list]) -> Tensor:
    """One round: k drafts, one target forward, the kept tokens appended to ids (1, T)."""
    temperature = sampling[0]
    target_cache, draft_cache = caches
    past = ids.shape[1]
    drafted, q = [], []  # (1, 1) tokens; (V,) draft distributions (when sampling)
    step = ids[:, draft_cache.seq_len:]  # what the draft has not read yet: 1 or 2 tokens
    for _ in range(k):
        logits = draft(step, cache=draft_cache, logits_to_keep=1).logits[0]  # (1, V)
        if temperature == 0:
            step, top = pick(logits, 0.0, None, None, None), logits.amax(dim=-1)  # (1,) each
        else:
            probs, top = distribution(logits, *sampling)  # (1, V), (1,)
            step = draw(probs, generator)
            q.append(probs[0])
        step = step[None]  # (1, 1)
        drafted.append(step), tops[1].append(top)
    # the target reads what its cache misses (the last kept token, or the prompt) and the drafts
    fed = torch.cat([ids[:, target_cache.seq_len:], *drafted], dim=1)
    logits = target(fed, cache=target_cache, logits_to_keep=k + 1).logits[0]  # (k + 1, V)
    x = fed[0, fed.shape[1] - k:]  # (k,) the drafts
    if temperature == 0:
        best, top = pick(logits, 0.0, None, None, None), logits.amax(dim=-1)  # (k + 1,) each
        accept = best[:k] == x  # a draft passes where it is the target's argmax
    else:
        p, top = distribution(logits, *sampling)  # (k + 1, V), (k + 1,)
        qs = torch.stack(q) if q else p[:0]  # (k, V)
        px, qx = p[:k].gather(1, x[:, None])[:, 0], qs.gather(1, x[:, None])[:, 0]  # (k,) each
        u = _uniform(k, generator, p.device)
        accept = u * qx < px  # probability min(1, p(x) / q(x))
    tops[0].append(top)
    a = int(accept.long().cumprod(0).sum()) if k else 0  # drafts kept: the one read of a round
    if temperature == 0:
        last = best[a:a + 1]  # the target's token after them: a correction or a bonus
    elif a < k:  # the first rejection: draw from what p has beyond q, norm(max(0, p - q))
        rest = (p[a] - qs[a]).clamp(min=0)
        last = draw(torch.where(rest.sum() > 0, rest, p[a])[None], generator)  # (1,)
    else:  # every draft passed: a bonus token from the target's last position
        last = draw(p[k:], generator)
    stats.proposed, stats.accepted = stats.proposed + k, stats.accepted + a
    stats.target_calls, stats.draft_calls = stats.target_calls + 1, stats.draft_calls + k
    target_cache.crop(past + a)  # forget the rejected drafts (the new token is not fed yet)
    draft_cache.crop(min(draft_cache.seq_len, past + a))
    return torch.cat([ids, x[None, :a], last[None]], dim=1)  # (1, T + a + 1)


def _uniform(n: int, generator: Optional[torch.Generator], device: torch.device) -> Tensor:
    """n draws from U[0, 1), made where the generator lives (a CPU generator, a CUDA model)."""
    on = generator.device if generator is not None else device
    return torch.rand(n, generator=generator, device=on).to(device)


def check_speculative(target: Any, draft: Any, input_ids: Any, max_new_tokens: Any, k: Any,
                      temperature: Any, top_k: Any, top_p: Any,
                      generator: Any) -> tuple[int, tuple, int]:
    """Every argument of :func:`speculative_generate`, at the door.

    Returns (max_new_tokens, (temperature, top_k, top_p), k)."""
    for name, model in (("target", target), ("draft", draft)):
        if not isinstance(model, GPT):
            raise TypeError(f"{name} must be an attnlib.GPT, got {type(model).__name__}")
    if draft.cfg.vocab_size != target.cfg.vocab_size:
        raise ValueError(f"the draft's vocab_size={draft.cfg.vocab_size} differs from the "
                         f"target's vocab_size={target.cfg.vocab_size}: its tokens would mean "
                         f"other things; pick a draft trained with the target's tokenizer")
    n, temperature, top_k, top_p = check_generate(target, input_ids, max_new_tokens, temperature,
                                                  top_k, top_p, True, generator)
    if input_ids.shape[0] != 1:
        raise ValueError(f"speculative_generate decodes one sequence, input_ids of shape (1, T); "
                         f"got a batch of {input_ids.shape[0]} (rows accept different numbers "
                         f"of draft tokens): call it once per row")
    check_device("input_ids", input_ids, draft.lm_head.weight.device)
    read = input_ids.shape[1] + n - 1  # the draft never reads the last token
    if read > draft.cfg.max_len:
        raise ValueError(f"prompt length {input_ids.shape[1]} + max_new_tokens {n} needs the "
                         f"draft to read {read} tokens, more than its max_len="
                         f"{draft.cfg.max_len}; ask for fewer tokens or use a longer draft")
    return n, (temperature, top_k, top_p), as_size("k", k)
