"""Block-wise weight quantization: each block of consecutive weights of a row gets its
own parameters.

- **group-wise with a minimum** (GGUF's Q4_1 for bits=4, block=32): a scale and a
  minimum per block; :func:`pack_q4_1` / :func:`unpack_q4_1` write and read llama.cpp's
  20-byte Q4_1 blocks byte for byte.
- **NF4** (QLoRA): 16 fixed levels at quantiles of a normal distribution, scaled per
  block by the block's largest magnitude.

The formulas are in :mod:`attnlib.quant`, which also holds the per-row scheme and the
round trips that measure what a scheme costs.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ._quant_checks import _F16_MAX, _F32_MAX, _blocks, _check_codes, _check_weight

# The NF4 code book of QLoRA (Dettmers et al., 2023; bitsandbytes' ``NF4`` table): 16 levels in
# [-1, 1], equal-probability bins of a standard normal, with an exact 0.
NF4_LEVELS = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
              -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
              0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
              0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0)


def quantize_groupwise(w: Tensor, bits: int = 4, block: int = 32, *,
                       half_params: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """Asymmetric group-wise quantization: a scale and a minimum per block of ``block`` weights.

    With bits=4, block=32 and half_params=True this is GGUF's Q4_1, computed as llama.cpp does
    (``d = (max - min) / 15``, ``q = trunc((w - min) * (1 / d) + 0.5)`` clipped to 0..15).

    Args:
        w: (..., C) weights; C must be a multiple of ``block``.
        bits: 1..8; codes lie in [0, 2^bits - 1].
        block: weights per block (along the last dim).
        half_params: store the scale and minimum as float16 (as GGUF does); the codes are
            computed with the float32 scale, as llama.cpp does.

    A block whose float32 arithmetic overflows (max - min past float32's range) is computed in
    float64 instead, so weights up to float32's largest still round-trip.

    Returns:
        (q (..., C/block, block) uint8, scale (..., C/block, 1), minimum (..., C/block, 1)),
        float32 (values rounded to float16 when half_params) with ``w ~ q * scale + minimum``.
    """
    _check_weight(w)
    if not isinstance(bits, int) or not 1 <= bits <= 8:
        raise ValueError(f"bits must be an int in 1..8 for codes stored in uint8, got {bits!r}")
    x = _blocks(w.float(), block)                                        # (..., n, block)
    q, d, lo = _groupwise(x, bits)
    if not bool(torch.isfinite(d).all()):
        # float32 as llama.cpp computes it overflows (max - min past 3.4e38, 1 / d of a tiny d):
        # the same arithmetic in float64 is right, and its scale fits float32 unless bits = 1
        q, d, lo = _groupwise(x.double(), bits)
        if float(d.max()) > _F32_MAX:
            raise ValueError(f"w has a block whose max - min ({float(d.max()):.3g}) is "
                             f"past float32's range, so its scale cannot be kept; use bits >= 2 "
                             f"or scale w down")
        d, lo = d.float(), lo.float()
    if half_params:
        d16, lo16 = d.half(), lo.half()
        if not bool(torch.isfinite(d16).all() and torch.isfinite(lo16).all()):
            big = max(float(d.max()), float(lo.abs().max()))
            raise ValueError(f"half_params=True keeps each block's scale and minimum in float16 "
                             f"(|x| <= {_F16_MAX:g}), but w needs {big:.3g}; pass "
                             f"half_params=False or scale w down")
        d, lo = d16.float(), lo16.float()
    return q, d, lo


def _groupwise(x: Tensor, bits: int) -> tuple[Tensor, Tensor, Tensor]:
    """Codes, scale and minimum of blocks x (..., n, block), in x's dtype; a scale that is not
    finite (or whose inverse is not) comes back as inf, for the caller to redo in float64."""
    lo = x.amin(dim=-1, keepdim=True)                                    # (..., n, 1)
    d = (x.amax(dim=-1, keepdim=True) - lo) / (2 ** bits - 1)
    inv = torch.where(d == 0, torch.zeros_like(d), 1.0 / d)             # a constant block: q = 0
    q = torch.trunc((x - lo) * inv + 0.5).clamp(0, 2 ** bits - 1).to(torch.uint8)
    return q, torch.where(torch.isfinite(inv), d, torch.inf), lo


def dequantize_groupwise(q: Tensor, scale: Tensor, minimum: Tensor) -> Tensor:
    """``scale * q + minimum`` per block, flattened back: (..., n, block) -> (..., n * block)."""
    _check_codes(q, (scale, minimum), "group-wise")
    if q.dim() < 2:
        raise ValueError(f"group-wise codes have shape (..., n_blocks, block), "
                         f"got {tuple(q.shape)}")
    w = q.float() * scale + minimum                                      # (..., n, block)
    # d * q past float32's range although d * q + m is not
    if not bool(torch.isfinite(w).all()):
        w = (q.double() * scale.double() + minimum.double()).float()
    return w.reshape(*w.shape[:-2], -1)


def pack_q4_1(q: Tensor, scale: Tensor, minimum: Tensor) -> Tensor:
    """Q4_1 blocks as llama.cpp stores them: 20 bytes per 32 weights (5 bits per weight).

    Bytes 0-1: the scale ``d`` (float16), 2-3: the minimum ``m`` (float16), 4-19: 32
    four-bit codes, weight j in the low nibble of byte j and weight j + 16 in its high nibble.

    Shapes:
        q (..., n, 32) uint8 in 0..15, scale and minimum (..., n, 1) -> (N, 20) uint8,
        N = all blocks.
    """
    _check_codes(q, (scale, minimum), "Q4_1", 15, index=True)
    if q.shape[-1] != 32 or q.numel() == 0:
        raise ValueError(f"Q4_1 needs blocks of 32 four-bit codes (0..15), "
                         f"got shape {tuple(q.shape)}; use quantize_groupwise(w, 4, 32)")
    d, m = scale.reshape(-1, 1).half(), minimum.reshape(-1, 1).half()  # (N, 1) each
    if not bool(torch.isfinite(d).all() and torch.isfinite(m).all()):
        big = max(float(scale.abs().max()), float(minimum.abs().max()))
        raise ValueError(f"Q4_1 keeps scale and minimum in float16 (|x| <= {_F16_MAX:g}), got "
                         f"{big:.3g}: these weights do not fit Q4_1 blocks")
    q = q.reshape(-1, 32).to(torch.uint8)                                # (N, 32)
    nibbles = q[:, :16] | (q[:, 16:] << 4)                               # (N, 16)
    return torch.cat([d.view(torch.uint8), m.view(torch.uint8), nibbles], dim=1)  # (N, 20)


def unpack_q4_1(blocks: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The inverse of :func:`pack_q4_1`: (N, 20) uint8 -> q (N, 32) uint8, scale and
    minimum (N, 1).

    ``dequantize_groupwise(*unpack_q4_1(blocks))`` is GGUF's Q4_1 dequantization.
    """
    if blocks.dtype != torch.uint8 or blocks.dim() != 2 or blocks.shape[1] != 20:
        raise ValueError(f"Q4_1 blocks must be (N, 20) uint8, "
                         f"got {tuple(blocks.shape)} {blocks.dtype}")
    d = blocks[:, 0:2].contiguous().view(torch.float16).float()         # (N, 1)
    m = blocks[:, 2:4].contiguous().view(torch.float16).float()         # (N, 1)
    packed = blocks[:, 4:]                                               # (N, 16)
    q = torch.cat([packed & 0x0F, packed >> 4], dim=1)                   # (N, 32): low, then high
    return q, d, m


def quantize_nf4(w: Tensor, block: int = 64) -> tuple[Tensor, Tensor]:
    """NF4 (QLoRA): each block scaled by its largest magnitude, then the nearest of 16 levels.

    Returns:
        (codes (..., C/block, block) uint8 in 0..15, absmax (..., C/block, 1) float32).
    """
    _check_weight(w)
    x = _blocks(w.float(), block)                                        # (..., n, block)
    absmax = x.abs().amax(dim=-1, keepdim=True)                          # (..., n, 1)
    safe = torch.where(absmax == 0, torch.ones_like(absmax), absmax)
    levels = torch.tensor(NF4_LEVELS, device=w.device)                   # (16,)
    codes = ((x / safe)[..., None] - levels).abs().argmin(dim=-1)        # (..., n, block)
    return codes.to(torch.uint8), absmax


def dequantize_nf4(codes: Tensor, absmax: Tensor) -> Tensor:
    """``NF4_LEVELS[code] * absmax`` per block, flattened back to (..., C)."""
    _check_codes(codes, (absmax,), "NF4", 15, index=True)
    levels = torch.tensor(NF4_LEVELS, device=codes.device)
    w = levels[codes.long()] * absmax                                    # (..., n, block)
    return w.reshape(*w.shape[:-2], -1)
