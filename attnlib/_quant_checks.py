"""The checks every quantization scheme makes of its weights and codes, and the
reshape into blocks: one place, so each scheme stays its arithmetic."""
from __future__ import annotations

import torch
from torch import Tensor

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
