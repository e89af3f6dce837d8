"""RoPE scaling: running a RoPE model on longer windows than it was trained on.

A RoPE model trained on windows of T positions has only met rotation angles m * theta_i with
m < T. Two recipes squeeze longer windows into what it knows, by a factor s (e.g. s = 4 to run a
model trained on 32 positions at 128):

* **position interpolation** (PI, Chen et al. 2023): position m is rotated as if it were m / s,
  so every angle stays inside the trained range; neighbours move s times closer in angle;
* **NTK-aware scaling** (bloc97 2023): the base is raised to base * s^(D / (D - 2)), so the
  slowest pair turns s times more slowly (its angles stay in range) while the fastest pair, which
  tells neighbours apart, keeps its speed; the pairs in between are stretched less and less.

Both change only the angles, never a weight. ``scaled_rope(model, method, factor)`` swaps a GPT's
rotary embedding for a :class:`ScaledRotaryEmbedding` inside a ``with`` block.
"""
from __future__ import annotations

import contextlib
import math
from typing import Iterator

import torch
from torch import Tensor, nn

from ._checks import as_real, checking
from .positional import RotaryEmbedding, _check_positions

METHODS = ("none", "pi", "ntk")


def ntk_base(base: float, factor: float, head_dim: int) -> float:
    """NTK-aware base: base * factor^(D / (D - 2)), which slows the slowest pair by ``factor``."""
    return float(base) * float(factor) ** (head_dim / (head_dim - 2))


class ScaledRotaryEmbedding(RotaryEmbedding):
    """:class:`attnlib.RotaryEmbedding` with its angles scaled for longer windows.

    Args:
        head_dim: rotated width D (even); base: the trained model's base.
        method: "pi" (positions divided by ``factor``), "ntk" (base raised, see
            :func:`ntk_base`) or "none" (the plain rotation).
        factor: s >= 1, how many times longer than the trained windows.
    """

    def __init__(self, head_dim: int, base: float = 10000.0, *, method: str = "pi",
                 factor: float = 2.0) -> None:
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        s = as_real(factor)
        if s is None or not 1.0 <= s < math.inf:
            raise ValueError(f"factor must be a finite number >= 1, got factor={factor!r}")
        super().__init__(head_dim, base)
        self.trained_base, self.method, self.factor = self.base, method, float(s)
        if method == "ntk":
            self.base = ntk_base(self.base, s, self.head_dim)

    def cos_sin(self, positions: Tensor,
                dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
        """cos and sin (T, D) of the scaled angles: (m / s) * theta_i for "pi"."""
        if self.method != "pi":  # "ntk" differs only in its base
            return super().cos_sin(positions, dtype)
        if checking():
            _check_positions(positions)
        angle = (positions.float() / self.factor)[:, None] * self.inv_freq(positions.device)
        angle = torch.cat((angle, angle), dim=-1)  # (T, D)
        return angle.cos().to(dtype), angle.sin().to(dtype)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, method={self.method!r}, factor={self.factor}"


@contextlib.contextmanager
def scaled_rope(model: nn.Module, method: str, factor: float) -> Iterator[nn.Module]:
    """``with scaled_rope(gpt, "pi", 4):`` gpt rotates with scaled angles; restored on exit.

    ``model`` is an :class:`attnlib.GPT` with RoPE (``model.rope``); its weights are untouched."""
    rope = getattr(model, "rope", None)
    if not isinstance(rope, RotaryEmbedding):
        raise ValueError("scaled_rope needs a model with RoPE positions (a GPT built with "
                         "positional='rope'), whose .rope it replaces")
    model.rope = ScaledRotaryEmbedding(rope.head_dim, rope.base, method=method, factor=factor)
    try:
        yield model
    finally:
        model.rope = rope
