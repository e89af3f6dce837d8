"""A toy translation task: dates from "30 Nov 2026" to "2026-11-30".

Generated, not downloaded: the pairs come from Python's ``datetime`` (the proleptic Gregorian
calendar), sampled with a seeded ``random.Random``, so every run makes the same data. The task
suits cross-attention because its correct alignment is not the diagonal: the first output
characters (the year) copy the *last* input characters, the last ones (the day) copy the first,
and the month digits must be looked up from three letters in the middle.

Both sides are read one character at a time by :class:`DateTokenizer`, which adds the three
special tokens a sequence-to-sequence model needs (padding, begin and end of sequence).
"""
from __future__ import annotations

import datetime as _dt
import random
from typing import Sequence

import torch
from torch import Tensor

from ._checks import token_ids

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
SOURCE_FORMAT = "DD Mon YYYY"  # 11 characters, the day zero-padded ("03 Nov 2026")
TARGET_FORMAT = "YYYY-MM-DD"   # 10 characters (ISO 8601)


def format_pair(day: _dt.date) -> tuple[str, str]:
    """``date(2026, 11, 30)`` -> ``("30 Nov 2026", "2026-11-30")``."""
    return f"{day.day:02d} {MONTHS[day.month - 1]} {day.year:04d}", day.isoformat()


def date_pairs(n: int, *, seed: int = 0, first: _dt.date = _dt.date(1900, 1, 1),
               last: _dt.date = _dt.date(2099, 12, 31)) -> list[tuple[str, str]]:
    """``n`` distinct random dates between ``first`` and ``last`` (inclusive), as (source, target).

    Distinct, so slicing the list gives train and held-out sets that share no date.

    Raises:
        ValueError: ``n`` < 1 or more than the days in the range.
    """
    for name, day in (("first", first), ("last", last)):
        if not isinstance(day, _dt.date) or (isinstance(day, _dt.datetime)
                                             and day.time() != _dt.time()):
            raise TypeError(f"{name} must be a datetime.date (a day, no time of day), got {day!r}")
    if last < first:
        raise ValueError(f"last={last} is before first={first}")
    first = _dt.date(first.year, first.month, first.day)  # a datetime at midnight: its day
    last = _dt.date(last.year, last.month, last.day)
    days = (last - first).days + 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= days:
        raise ValueError(f"n must be an int in [1, {days}] (the days from {first} to {last}), "
                         f"got {n!r}")
    offsets = random.Random(seed).sample(range(days), n)  # without replacement: distinct dates
    return [format_pair(first + _dt.timedelta(days=k)) for k in offsets]


class DateTokenizer:
    """Characters of both date formats, after three special tokens: ``<pad>`` 0, ``<bos>`` 1,
    ``<eos>`` 2. Source and target share one vocabulary (an EncoderDecoder shares embeddings)."""

    specials = ("<pad>", "<bos>", "<eos>")
    pad_id, bos_id, eos_id = 0, 1, 2

    def __init__(self) -> None:
        chars = sorted(set("0123456789 -" + "".join(MONTHS)))
        self.itos: list[str] = [*self.specials, *chars]
        self.stoi: dict[str, int] = {c: i for i, c in enumerate(self.itos)}

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str, *, eos: bool = False) -> list[int]:
        """One id per character, plus ``<eos>`` at the end if ``eos``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        for pos, c in enumerate(text):
            if c not in self.stoi or len(c) != 1 or c in self.specials:
                raise ValueError(f"character {c!r} at position {pos} of {text!r} is not in "
                                 f"the date vocabulary (digits, space, '-', month letters)")
        return [self.stoi[c] for c in text] + ([self.eos_id] if eos else [])

    def tokens(self, ids: Sequence[int]) -> list[str]:
        """The token string of every id, specials included (labels for plots)."""
        return [self.itos[i] for i in token_ids(ids, self.vocab_size)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text up to the first ``<eos>``; ``<bos>`` and ``<pad>`` are dropped."""
        out = []
        for t in self.tokens(ids):
            if t == "<eos>":
                break
            if t not in self.specials:
                out.append(t)
        return "".join(out)

    def encode_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[Tensor, Tensor]:
        """(source, target) strings -> src ids (N, S) and tgt ids (N, T + 1) ending in ``<eos>``,
        right-padded with ``<pad>`` to the longest row."""
        if len(pairs) == 0:
            raise ValueError("pairs is empty")
        src = [self.encode(s) for s, _ in pairs]
        tgt = [self.encode(t, eos=True) for _, t in pairs]
        return self._pad(src), self._pad(tgt)

    def _pad(self, rows: list[list[int]]) -> Tensor:
        width = max(len(r) for r in rows)
        return torch.tensor([r + [self.pad_id] * (width - len(r)) for r in rows])  # (N, width)
