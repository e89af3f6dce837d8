"""The two normalisations a Transformer block uses: LayerNorm (2017, GPT-2, BERT) and
RMSNorm (Llama).

LayerNorm centres each token vector and scales it to unit variance, then applies a learned gain
and bias. RMSNorm (Zhang & Sennrich, 2019) skips the centring and the bias: it only divides by
the root mean square, ``x / sqrt(mean(x^2) + eps) * weight``. One reduction instead of two, and
in practice the same quality; every Llama-family model uses it.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ._checks import as_int, as_real
from .config import NORMS


def _check_eps(eps: object) -> float:
    """The eps of a norm: a positive, finite number (as a float)."""
    value = as_real(eps)
    if value is None:
        raise TypeError(f"eps must be a positive number, got eps={eps!r}")
    if not 0 < value < math.inf:
        raise ValueError(f"eps must be positive and finite, got eps={eps!r}")
    return value


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dim, with a learned gain (no bias).

    Equal to ``torch.nn.RMSNorm(dim, eps=eps)``. The statistic is computed in float32 even for
    bf16/fp16 inputs (as Hugging Face's Llama does), in float64 for float64 inputs; the result has
    the input's dtype. Rows too large to square (float32: |x| past ~1e19) are scaled down first.

    Args:
        dim: width C of the normalised (last) dim.
        eps: added to the mean square before the square root (Llama: 1e-5 or 1e-6).

    Shapes:
        x (..., C) -> (..., C).
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        if as_int(dim) is None or as_int(dim) < 1:
            raise ValueError(f"dim must be a positive int, got dim={dim!r}")
        self.dim, self.eps = as_int(dim), _check_eps(eps)
        self.weight = nn.Parameter(torch.ones(dim))  # the gain g, one per channel, starts at 1

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.dim() < 1 or x.shape[-1] != self.dim:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (..., dim={self.dim}), got {shape}")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}; "
                            f"e.g. x.float()")
        h = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        # x^2 overflows past ~1e19 in float32: a row with |x| > 2^40 is scaled down to 2^40 first
        # (RMSNorm(s x), with eps s^2, is RMSNorm(x)); s = 1 exactly for every other row
        big = h.detach().abs().amax(dim=-1, keepdim=True)                             # (..., 1)
        s = 2.0 ** 40 / big.clamp(2.0 ** 40, torch.finfo(h.dtype).max)  # an inf row stays inf
        h = h * s
        ms = h.pow(2).mean(dim=-1, keepdim=True)                                      # (..., 1)
        rms_inv = torch.rsqrt(torch.addcmul(ms, s, s, value=self.eps))  # 1 / RMS(x s), eps s^2
        return (h * rms_inv).to(x.dtype) * self.weight.to(x.dtype)  # (..., C)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"


def make_norm(kind: str, dim: int, eps: float) -> nn.Module:
    """``nn.LayerNorm(dim, eps)`` for "layernorm", :class:`RMSNorm` for "rmsnorm" (config
    ``norm``)."""
    eps = _check_eps(eps)
    if kind == "layernorm":
        return nn.LayerNorm(dim, eps=eps)
    if kind == "rmsnorm":
        return RMSNorm(dim, eps=eps)
    raise ValueError(f"unknown norm {kind!r}; choose one of {', '.join(map(repr, NORMS))}")
