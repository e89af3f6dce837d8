"""Where a token sits: sinusoidal and learned position vectors, and rotary embeddings (RoPE).

Attention on its own is blind to order: permute the tokens and the outputs permute with them.
Two families fix that:

* **additive** positions (sinusoidal, learned): a vector per position is added to the token
  embedding once, at the bottom of the stack;
* **rotary** positions (RoPE): queries and keys are rotated by an angle proportional to their
  position inside every attention layer, so a query-key dot product depends only on how far apart
  the two tokens are.

Both additive modules share one call shape, ``module(positions) -> (T, C)``, so a model can swap
one for the other.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import as_int, as_real, eager, checking


def _check_positions(positions: Tensor, length: int | None = None,
                     max_len: int | None = None) -> None:
    """positions: (T,) integers >= 0 (and < max_len when given); values checked in eager mode.
    Callers ask ``if checking():`` first: a model's forward made its positions itself."""
    if not isinstance(positions, Tensor):
        raise TypeError(f"positions must be a torch.Tensor of integer positions, got "
                        f"{type(positions).__name__}")
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be an integer (long) tensor, got dtype {positions.dtype}")
    if positions.dim() != 1:
        raise ValueError(f"positions must have shape (T,), got {tuple(positions.shape)}")
    if length is not None and positions.shape[0] != length:
        raise ValueError(f"positions has length {positions.shape[0]} but the input has "
                         f"T={length} tokens")
    if not positions.numel() or not eager(positions):
        return
    top = max_len if max_len is not None else torch.iinfo(torch.long).max
    if bool(((positions < 0) | (positions >= top)).any()):  # one sync; the details only on failure
        lo, hi = int(positions.min()), int(positions.max())
        if lo < 0:
            raise ValueError(f"positions must be >= 0, got {lo}")
        raise ValueError(f"position {hi} is out of range for max_len={max_len}")


def _check_sizes(max_len: int, d_model: int) -> None:
    for name, n in (("max_len", max_len), ("d_model", d_model)):
        if as_int(n) is None or n < 1:
            raise ValueError(f"{name} must be a positive int, got {name}={n!r}")


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The 2017 table: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same angle).

    Each pair of columns is a clock ticking at its own speed, from one turn every 2*pi tokens
    (columns 0, 1) to one turn every 2*pi*10000 tokens (the last pair).

    Args:
        max_len: number of positions T.
        d_model: width C (an odd width drops the last cosine column).

    Returns:
        float32 tensor (max_len, d_model).
    """
    _check_sizes(max_len, d_model)
    max_len, d_model = int(max_len), int(d_model)
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (ceil(C/2),): 0, 2, 4, ...
    freq = torch.exp(-math.log(10000.0) * two_i / d_model)  # 1 / 10000^(2i/d)
    angle = pos * freq  # (T, ceil(C/2))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed (not learned) sinusoidal position vectors, looked up by position.

    Args:
        max_len: longest sequence; d_model: width C.

    Shapes:
        positions (T,) long -> (T, C), in the dtype/device of the module's ``pe`` buffer.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        # A buffer, not a parameter: it moves with .to(device) but is never trained. Not saved in
        # state_dict (persistent=False): it is a formula, recomputed on construction.
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        if checking():
            _check_positions(positions, max_len=self.max_len)
        return self.pe[positions]  # (T, C)


class LearnedPositionalEmbedding(nn.Embedding):
    """One trained vector per position (GPT-2, BERT): an ``nn.Embedding(max_len, d_model)``.

    Shapes:
        positions (T,) long -> (T, C).
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        _check_sizes(max_len, d_model)
        max_len, d_model = int(max_len), int(d_model)
        super().__init__(max_len, d_model)
        self.max_len, self.d_model = max_len, d_model

    def forward(self, positions: Tensor) -> Tensor:
        if checking():
            _check_positions(positions, max_len=self.max_len)
        return F.embedding(positions, self.weight)  # (T, C): row p of the table for position p


def rotate_half(x: Tensor) -> Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dim: a 90-degree turn of each pair
    (x[i], x[i + D/2]). This is the GPT-NeoX / Hugging Face Llama pairing, not interleaved pairs."""
    if x.shape[-1] % 2:
        raise ValueError(f"rotate_half turns pairs of coordinates: the last dim must be even, got "
                         f"shape {tuple(x.shape)}")
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((-x2, x1), dim=-1)


def check_rope(rope: Any, tq: int, width: int) -> None:
    """A layer's ``rope`` argument: None, or (cos, sin), each (Tq, width), as
    :meth:`RotaryEmbedding.cos_sin` makes them for the Tq positions of the layer's input."""
    if rope is None:
        return
    if not (isinstance(rope, (tuple, list)) and len(rope) == 2
            and all(isinstance(t, Tensor) for t in rope)):
        raise TypeError(f"rope must be None or the (cos, sin) pair of tensors that "
                        f"RotaryEmbedding.cos_sin(positions) returns, got {type(rope).__name__}")
    for name, t in zip(("cos", "sin"), rope):
        if tuple(t.shape) != (tq, width):
            raise ValueError(f"rope's {name} must have shape (Tq, {width}) = ({tq}, {width}), one "
                             f"row per position of x, got {tuple(t.shape)}; make it with "
                             f"RotaryEmbedding({width}).cos_sin(positions)")


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x (..., T, D) rotated pair by pair by the angles whose cos and sin (T, D) are given."""
    return x * cos + rotate_half(x) * sin


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE, Su et al. 2021), rotate-half convention.

    Pair i = (x[i], x[i + D/2]) of a query or key at position m is rotated by the angle
    m * theta_i with theta_i = base^(-2i/D). Rotating q by m*theta and k by n*theta leaves their
    dot product a function of (m - n) only: relative position, with no parameters.

    The module holds no tensors: the angles are computed from the positions in float32 at every
    call (a model computes them once per forward, :meth:`cos_sin`, and hands them to each layer),
    so no table can go stale, be rounded by ``.half()`` or be left on another device.

    Args:
        head_dim: width D of one head; must be even (dims are rotated in pairs).
        base: the slowest clock's period scale, 10000 as in the paper.

    Shapes:
        x (..., T, D), positions (T,) long -> (..., T, D), same dtype as x.
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        d = as_int(head_dim)
        if d is None or d < 2 or d % 2:
            raise ValueError(f"RoPE rotates dims in pairs, so head_dim must be a positive even "
                             f"int, got {head_dim!r}")
        if as_real(base) is None:
            raise TypeError(f"base must be a positive number (10000 in the paper), got {base!r}")
        if not 0 < as_real(base) < math.inf:
            raise ValueError(f"base must be positive and finite, got {base}")
        self.head_dim, self.base = d, as_real(base)

    def inv_freq(self, device: torch.device | None = None) -> Tensor:
        """theta_i = base^(-2i/D), float32 (D/2,)."""
        two_i = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=device)
        return self.base ** (-two_i / self.head_dim)

    def cos_sin(self, positions: Tensor,
                dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
        """cos and sin (T, D) of the angles m * theta_i at ``positions`` (T,), in ``dtype``
        (computed in float32). Column i and column i + D/2 hold the same angle: a pair turns
        together."""
        if checking():
            _check_positions(positions)
        angle = positions.float()[:, None] * self.inv_freq(positions.device)[None, :]  # (T, D/2)
        angle = torch.cat((angle, angle), dim=-1)  # (T, D)
        return angle.cos().to(dtype), angle.sin().to(dtype)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.dim() < 2 or x.shape[-1] != self.head_dim:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (..., T, head_dim={self.head_dim}), got {shape}")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor (queries or keys), got dtype "
                            f"{x.dtype}")
        cos, sin = self.cos_sin(positions, x.dtype)  # (T, D) each; checks the positions
        if cos.shape[0] != x.shape[-2]:
            raise ValueError(f"positions has length {cos.shape[0]} but x has T={x.shape[-2]} "
                             f"tokens")
        return apply_rotary(x, cos.to(x.device), sin.to(x.device))

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}"
