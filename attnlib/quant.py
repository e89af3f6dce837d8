"""Weight quantization: fewer bits per number, plus a little extra to map them back.

Three schemes, each a ``quantize_*`` that returns integer codes and the numbers needed
to undo it, and a ``dequantize_*`` that maps them back to floats:

- **per-row symmetric** (int8 and narrower): one scale per output row, ``w = s_r * q`` with
  ``q`` in ``[-(2^(b-1) - 1), 2^(b-1) - 1]`` and ``s_r = max_c |w_rc| / (2^(b-1) - 1)``.
- **group-wise with a minimum** (GGUF's Q4_1 for bits=4, block=32): each block of
  ``block`` consecutive weights of a row gets a scale ``d = (max - min) / (2^b - 1)``
  and its minimum ``m``; ``q = round((w - m) / d)`` in ``[0, 2^b - 1]`` and
  ``w = d * q + m``. :func:`pack_q4_1` / :func:`unpack_q4_1` write and read llama.cpp's
  20-byte Q4_1 blocks (float16 ``d``, ``m``, then 32 four-bit codes two per byte), byte
  for byte as ``gguf.quants`` does.
- **NF4** (QLoRA): 16 fixed levels placed at quantiles of a normal distribution, scaled per block
  by the block's largest magnitude.

:func:`quantize_linears` applies a round trip to every ``nn.Linear`` weight of a model,
which is how the book measures what a scheme costs in logits and loss.

This module holds the per-row scheme and the round trips; the two block schemes live in
:mod:`attnlib.quant_blocks` and are imported from here as well.
"""
from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import Tensor, nn

from ._checks import as_int
from ._quant_checks import _check_codes, _check_weight
from .quant_blocks import (NF4_LEVELS, dequantize_groupwise, dequantize_nf4,
                           pack_q4_1, quantize_groupwise, quantize_nf4, unpack_q4_1)

__all__ = ["quantize_rows", "dequantize_rows", "quantize_groupwise", "dequantize_groupwise",
           "pack_q4_1", "unpack_q4_1", "NF4_LEVELS", "quantize_nf4", "dequantize_nf4",
           "round_trip", "bits_per_weight", "quantize_linears"]


def quantize_rows(w: Tensor, bits: int = 8) -> tuple[Tensor, Tensor]:
    """Symmetric per-row quantization (one scale per row of the last dim).

    Args:
        w: (..., C) weights, e.g. an ``nn.Linear`` weight (out, in).
        bits: 2..8; codes lie in [-(2^(bits-1) - 1), 2^(bits-1) - 1] (127 for int8).

    Returns:
        (q (..., C) int8, scale (..., 1) float32) with ``w ~ q * scale``.
    """
    _check_weight(w)
    if not isinstance(bits, int) or not 2 <= bits <= 8:
        raise ValueError(f"bits must be an int in 2..8 for per-row codes stored in int8, "
                         f"got {bits!r}")
    top = 2 ** (bits - 1) - 1
    scale = w.float().abs().amax(dim=-1, keepdim=True) / top             # (..., 1)
    # at float32's largest weights, a scale rounded up would put top * scale past the range
    below = torch.nextafter(scale, torch.zeros_like(scale))
    scale = torch.where(torch.isinf(scale * top), below, scale)
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)        # an all-zero row: q = 0
    q = torch.round(w.float() / safe).clamp(-top, top).to(torch.int8)    # (..., C)
    return q, scale


def dequantize_rows(q: Tensor, scale: Tensor) -> Tensor:
    """``q * scale`` as float32 (the inverse of :func:`quantize_rows`, up to rounding)."""
    _check_codes(q, (scale,), "per-row")
    return q.float() * scale


def round_trip(w: Tensor, scheme: str = "int8", *, bits: int = 4, block: int = 32) -> Tensor:
    """Quantize then dequantize ``w`` (same shape, float32), to measure what a scheme costs.

    Args:
        scheme: "int8" / "rows" (per-row symmetric, ``bits`` for "rows"), "groupwise"
            (scale and minimum per block; Q4_1 for bits=4, block=32), "q4_1" (float16
            parameters as in GGUF) or "nf4" (``block`` weights per absmax).
    """
    if scheme == "int8":
        return dequantize_rows(*quantize_rows(w, 8))
    if scheme == "rows":
        return dequantize_rows(*quantize_rows(w, bits))
    if scheme == "groupwise":
        return dequantize_groupwise(*quantize_groupwise(w, bits, block))
    if scheme == "q4_1":
        return dequantize_groupwise(*quantize_groupwise(w, 4, 32, half_params=True))
    if scheme == "nf4":
        return dequantize_nf4(*quantize_nf4(w, block))
    raise ValueError(f"unknown scheme {scheme!r}; "
                     f"choose 'int8', 'rows', 'groupwise', 'q4_1' or 'nf4'")


def bits_per_weight(scheme: str = "int8", *, bits: int = 4, block: int = 32,
                    row_len: int = 0, param_bits: int = 16) -> float:
    """Storage per weight, codes plus per-row or per-block parameters (each ``param_bits``
    wide).

    "int8"/"rows" need ``row_len`` (one scale per row); "groupwise" has a scale and a minimum per
    block, "nf4" one absmax per block, "q4_1" is 5.0 (20 bytes per 32 weights).
    """
    for name, n in (("bits", bits), ("block", block), ("row_len", row_len),
                    ("param_bits", param_bits)):
        low = 0 if name == "row_len" else 1
        if as_int(n) is None or n < low:
            raise ValueError(f"{name} must be an int >= {low}, got {name}={n!r}")
    if scheme in ("int8", "rows"):
        if row_len < 1:
            raise ValueError(f"per-row schemes need row_len (weights per row), got {row_len}")
        return (8 if scheme == "int8" else bits) + param_bits / row_len
    if scheme == "groupwise":
        return bits + 2 * param_bits / block
    if scheme == "q4_1":
        return 20 * 8 / 32
    if scheme == "nf4":
        return 4 + param_bits / block
    raise ValueError(f"unknown scheme {scheme!r}; "
                     f"choose 'int8', 'rows', 'groupwise', 'q4_1' or 'nf4'")


def quantize_linears(model: nn.Module, fn: Callable[[Tensor], Tensor],
                     where: Callable[[str], bool] = lambda name: True) -> nn.Module:
    """A deep copy of ``model`` whose ``nn.Linear`` weights are replaced by ``fn(weight)``.

    Args:
        fn: a round trip, e.g. ``lambda w: round_trip(w, "q4_1")``.
        where: picks linear layers by their module name (e.g. skip the tied output head).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(fn):
        raise TypeError(f"fn must be callable as fn(weight), got {type(fn).__name__}")
    copy_ = copy.deepcopy(model)
    with torch.no_grad():
        for name, module in copy_.named_modules():
            if isinstance(module, nn.Linear) and where(name):
                new = fn(module.weight)
                if not isinstance(new, Tensor) or new.shape != module.weight.shape:
                    got = tuple(new.shape) if isinstance(new, Tensor) else type(new).__name__
                    raise ValueError(f"fn must return a tensor of the weight's shape "
                                     f"{tuple(module.weight.shape)} ({name}), got {got}")
                if not bool(torch.isfinite(new).all()):  # every logit would be NaN, later
                    raise ValueError(f"fn returned NaN or inf for {name}'s weight; a round trip "
                                     f"through a quantizer should give finite numbers")
                module.weight.copy_(new.to(module.weight.dtype))
    return copy_
