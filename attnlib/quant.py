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
"""
from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import Tensor, nn

from ._checks import as_int

# The NF4 code book of QLoRA (Dettmers et al., 2023; bitsandbytes' ``NF4`` table): 16 levels in
# [-1, 1], equal-probability bins of a standard normal, with an exact 0.
NF4_LEVELS = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
              -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
              0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
              0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0)


_F32_MAX = torch.finfo(torch.float32).max
_F16_MAX = torch.finfo(torch.float16).max


def _check_weight(w: Tensor, name: str = "w") -> None:
    if not isinstance(w, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(w).__name__}")
    if not w.is_floating_point() or w.dim() < 1:
        raise TypeError(f"{name} must be a floating-point tensor with at least 1 dim, got dtype "
                        f"{w.dtype} and shape {tuple(w.shape)}")
    if w.shape[-1] < 1:
        raise ValueError(f"{name} has no weights along its last dim: shape {tuple(w.shape)}")
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"{name} holds NaN or inf: a scale computed from it would spoil "
                         f"every code of its row or block")
    big = float(w.abs().max()) if w.dtype == torch.float64 and w.numel() else 0.0
    if big > _F32_MAX:
        raise ValueError(f"{name} holds |{name}| up to {big:.3g}, past float32's range "
                         f"({_F32_MAX:.3g}), where the codes' scales are kept; scale {name} "
                         f"down first")


def _check_codes(q: Tensor, params: tuple[Tensor, ...], kind: str, top: int = 0,
                 low: int = 0, *, index: bool = False) -> None:
    """Codes (..., n, block) or (..., C) and parameters that broadcast against them without
    changing their shape (one per row or block, or one for all). Codes that pick a table entry
    (``index``) must be integers in [low, top]; codes that are multiplied may be any numbers."""
    if not isinstance(q, Tensor) or q.dtype == torch.bool or q.is_complex():
        got = q.dtype if isinstance(q, Tensor) else type(q).__name__
        raise TypeError(f"{kind} codes must be a tensor of numbers, got {got}")
    for p in params:
        ok = isinstance(p, Tensor)
        try:
            ok = ok and torch.broadcast_shapes(q.shape, p.shape) == q.shape
        except RuntimeError:
            ok = False
        if not ok:
            got = tuple(p.shape) if isinstance(p, Tensor) else type(p).__name__
            raise ValueError(f"{kind}: codes of shape {tuple(q.shape)} need one parameter "
                             f"per row or block, shape {(*q.shape[:-1], 1)} (or one for all); "
                             f"got {got}")
    if index:
        if q.is_floating_point():
            raise TypeError(f"{kind} codes pick one of {top - low + 1} levels: they must be "
                            f"an integer tensor, got {q.dtype}")
        if q.numel() and not low <= int(q.min()) <= int(q.max()) <= top:
            raise ValueError(f"{kind} codes lie in {low}..{top}, "
                             f"got {int(q.min())}..{int(q.max())}")


def _blocks(w: Tensor, block: int) -> Tensor:
    """(..., C) -> (..., C / block, block); C must be a multiple of block."""
    if not isinstance(block, int) or block < 1 or w.shape[-1] % block:
        raise ValueError(f"block must be a positive int dividing the last dim of w: "
                         f"got block={block!r} for shape {tuple(w.shape)}; "
                         f"pick a divisor of {w.shape[-1]}")
    return w.reshape(*w.shape[:-1], w.shape[-1] // block, block)  # (..., n_blocks, block)


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
                module.weight.copy_(new.to(module.weight.dtype))
    return copy_
