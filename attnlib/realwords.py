"""Does a character model write words? Long samples and the share of real words in them.

A character-level GPT reads at most ``max_len`` characters, so :func:`generate_long` writes
longer samples by sliding the window: each new character is drawn from the model reading the
last ``max_len`` characters (no cache; up to ``max_len`` it is ``GPT.generate(use_cache=False)``
draw for draw). :func:`real_word_share` counts how many of the complete words in samples occur,
ignoring case, in a word list such as :func:`words_of` the training text. Chapter 10 and the
Playground measure the book's tiny GPT with them; the recipe (``attnlib.tiny_gpt``) was chosen
with them.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

import torch
from torch import Tensor

from ._checks import as_size, check_text
from .generation import sample_next

__all__ = ["words_of", "real_word_share", "generate_long", "sample_texts"]

_WORD = re.compile(r"[A-Za-z]+")
_COMPLETE = re.compile(r"[A-Za-z]+(?=[^A-Za-z])")  # a run of letters followed by a non-letter


def words_of(text: str) -> frozenset[str]:
    """The word list of ``text``: its runs of letters, lower-cased."""
    check_text(text)
    return frozenset(w.lower() for w in _WORD.findall(text))


def real_word_share(samples: Iterable[str], words: frozenset[str]) -> tuple[int, int]:
    """(real, total): the complete words of ``samples`` and how many of them are in ``words``.

    A word is a run of letters followed by a non-letter (a sample's unfinished last word is not
    counted); it is real when its lower-cased form is in ``words`` (see :func:`words_of`)."""
    if isinstance(samples, str):
        raise TypeError("samples must be a list of strings, not one string")
    found = [w.lower() for s in samples for w in _COMPLETE.findall(s)]
    return sum(w in words for w in found), len(found)


def generate_long(model: torch.nn.Module, input_ids: Tensor, max_new_tokens: int, *,
                  temperature: float = 1.0, top_k: Optional[int] = None,
                  top_p: Optional[float] = None,
                  generator: Optional[torch.Generator] = None) -> Tensor:
    """Extend each prompt by ``max_new_tokens``, reading at most the model's last ``max_len``
    tokens.

    Shapes: input_ids (B, T) -> (B, T + max_new_tokens), the prompt first."""
    if not isinstance(input_ids, Tensor):
        raise TypeError(f"input_ids must be a (B, T) tensor of token ids, got "
                        f"{type(input_ids).__name__}")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be (B, T), got shape {tuple(input_ids.shape)}")
    max_new_tokens = as_size("max_new_tokens", max_new_tokens, minimum=0)
    window = model.cfg.max_len
    ids = input_ids
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            logits = model(ids[:, -window:], logits_to_keep=1).logits[:, -1]  # (B, vocab)
            token = sample_next(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                                generator=generator)  # (B, 1)
            ids = torch.cat([ids, token], dim=1)
    return ids.clone()  # outside inference mode: an ordinary tensor


def sample_texts(model: torch.nn.Module, tokenizer, prompt: str, n_chars: int, *,
                 n_samples: int = 8, temperature: float = 0.8, seed: int = 0) -> list[str]:
    """``n_samples`` continuations of ``prompt``, ``n_chars`` characters each (the prompt left
    out), drawn together from one ``torch.Generator`` seeded with ``seed``."""
    check_text(prompt, "prompt")
    if not prompt:  # the model needs a first character to read
        raise ValueError("prompt must hold at least one character, e.g. prompt='And'")
    n_chars, n_samples = as_size("n_chars", n_chars, minimum=0), as_size("n_samples", n_samples)
    ids = torch.tensor([tokenizer.encode(prompt)] * n_samples)  # (n_samples, len(prompt))
    out = generate_long(model, ids, n_chars, temperature=temperature,
                        generator=torch.Generator().manual_seed(seed))
    return [tokenizer.decode(row[ids.shape[1]:].tolist()) for row in out]
