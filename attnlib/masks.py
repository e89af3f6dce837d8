"""Converting attention masks between the conventions the ecosystem uses.

attnlib follows PyTorch SDPA: a bool mask is True where a query MAY attend, a float mask is
ADDED to the scores (0 = allowed, -inf = blocked). Two popular APIs disagree:

* ``nn.MultiheadAttention``: a bool ``attn_mask`` / ``key_padding_mask`` is True where a query
  is BLOCKED (the opposite polarity), and a 3-D ``attn_mask`` stacks batch and heads as
  ``(B * H, Tq, Tk)``;
* Hugging Face ``attention_mask``: an integer (B, T) tensor over KEYS, 1 = real token,
  0 = padding.

Each helper below goes one way; every pair is tested to round-trip.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch
from torch import Tensor

from ._checks import as_int, as_real


def _check_bool(name: str, mask: object) -> Tensor:
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor, got dtype {mask.dtype}; "
                        f"for a 0/1 mask use .bool()")
    return mask


def to_additive(mask: Tensor, dtype: torch.dtype = torch.float32, *,
                fill: Optional[float] = None) -> Tensor:
    """Bool mask (True = may attend) -> float mask to ADD to the scores: 0 allowed, ``fill``
    blocked.

    Args:
        mask: bool, any shape. A float mask is returned cast to ``dtype`` (it already is additive).
        dtype: floating dtype of the result.
        fill: value at blocked positions; default ``-inf``. (A "large negative" such as
            ``torch.finfo(dtype).min`` is what some libraries use instead; the book shows why
            -inf plus attnlib's fully-masked-row rule is the cleaner choice.)

    Returns:
        A float tensor of ``mask``'s shape.
    """
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype (e.g. torch.float32), got {dtype!r}")
    if fill is not None:
        value = as_real(fill)
        if value is None:
            raise TypeError(f"fill must be a number (the score added at blocked positions), "
                            f"got {fill!r}")
        fill = value
        if math.isnan(fill) or fill == math.inf:
            raise ValueError(f"fill must be -inf or a finite number (it is added to the scores), "
                             f"got {fill}")
    if mask.is_floating_point():
        if mask.numel() and not float(mask.max()) < math.inf:
            raise ValueError("a float mask is already additive: finite values or -inf; "
                             "this one holds NaN or +inf")
        return mask.to(dtype)
    _check_bool("mask", mask)
    blocked = float("-inf") if fill is None else fill
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return out.masked_fill(~mask, blocked)


def from_additive(mask: Tensor) -> Tensor:
    """Float additive mask -> bool (True = may attend): a position is blocked iff it is -inf."""
    if not isinstance(mask, Tensor) or not mask.is_floating_point():
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"mask must be a floating tensor (0 / -inf), got {got}")
    if mask.numel() and not float(mask.max()) < math.inf:  # NaN or +inf: not an additive mask
        raise ValueError("an additive mask holds finite values or -inf; this one holds NaN or +inf")
    return ~torch.isneginf(mask)


def from_key_padding(key_padding_mask: Tensor) -> Tensor:
    """``nn.MultiheadAttention``'s ``key_padding_mask`` (B, Tk), True = padding -> bool
    (B, 1, 1, Tk), True = attend."""
    _check_bool("key_padding_mask", key_padding_mask)
    if key_padding_mask.dim() != 2:
        raise ValueError(f"key_padding_mask must have shape (B, Tk), "
                         f"got {tuple(key_padding_mask.shape)}")
    return ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk)


def to_key_padding(mask: Tensor) -> Tensor:
    """Bool (B, 1, 1, Tk) padding mask (True = attend) -> ``key_padding_mask`` (B, Tk),
    True = padding."""
    _check_bool("mask", mask)
    if mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[2] != 1:
        raise ValueError(f"a padding mask has shape (B, 1, 1, Tk), got {tuple(mask.shape)}")
    return ~mask[:, 0, 0, :]  # (B, Tk)


def from_hf_attention_mask(attention_mask: Tensor) -> Tensor:
    """Hugging Face ``attention_mask`` (B, Tk), 1 = real token -> bool (B, 1, 1, Tk),
    True = attend."""
    if not isinstance(attention_mask, Tensor):
        raise TypeError(f"attention_mask must be a torch.Tensor, "
                        f"got {type(attention_mask).__name__}")
    if attention_mask.is_floating_point():
        raise TypeError(f"attention_mask must hold integers 0/1 (or bools), "
                        f"got dtype {attention_mask.dtype}")
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must have shape (B, Tk), "
                         f"got {tuple(attention_mask.shape)}")
    if (attention_mask.dtype != torch.bool
            and not bool(((attention_mask == 0) | (attention_mask == 1)).all())):
        raise ValueError("attention_mask must contain only 0 (padding) and 1 (real token)")
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, Tk)


def to_hf_attention_mask(mask: Tensor) -> Tensor:
    """Bool (B, 1, 1, Tk) padding mask (True = attend) -> Hugging Face ``attention_mask``
    (B, Tk) long, 1 = real."""
    _check_bool("mask", mask)
    if mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[2] != 1:
        raise ValueError(f"a padding mask has shape (B, 1, 1, Tk), got {tuple(mask.shape)}")
    return mask[:, 0, 0, :].long()  # (B, Tk)


def _polarity_flip(mask: Tensor) -> Callable[[Tensor], Tensor]:
    """Check a bool/float mask; return what converts it between True=attend and True=blocked
    (a bool mask flips, a float mask is added either way and stays as it is)."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"mask must be bool or floating, got dtype {mask.dtype}")
    return (lambda m: ~m) if mask.dtype == torch.bool else (lambda m: m)


def _check_heads(n_heads: Any) -> None:
    if as_int(n_heads) is None or n_heads < 1:
        raise ValueError(f"n_heads must be a positive int, got n_heads={n_heads!r}")


def to_nn_mha(mask: Tensor, n_heads: Optional[int] = None) -> Tensor:
    """attnlib/SDPA mask -> ``nn.MultiheadAttention``'s ``attn_mask``.

    Args:
        mask: bool (True = may attend) or float (added). Either (Tq, Tk), shared by every batch
            item and head, or 4-D broadcastable to (B, H, Tq, Tk).
        n_heads: H; needed for a 4-D mask, because nn.MultiheadAttention wants (B * H, Tq, Tk).

    Returns:
        (Tq, Tk) or (B * H, Tq, Tk); a bool result is True where a query is BLOCKED.
    """
    flip = _polarity_flip(mask)
    if mask.dim() == 2:
        return flip(mask)
    if mask.dim() != 4:
        raise ValueError(f"mask must have shape (Tq, Tk) or (B, H, Tq, Tk), "
                         f"got {tuple(mask.shape)}")
    if n_heads is None:
        raise ValueError(f"a 4-D mask {tuple(mask.shape)} needs n_heads to build the "
                         f"(B * H, Tq, Tk) layout")
    _check_heads(n_heads)
    B, H, Tq, Tk = mask.shape
    if H not in (1, n_heads):
        raise ValueError(f"mask has {H} heads in dim 1, expected 1 or n_heads={n_heads}")
    full = mask.expand(B, n_heads, Tq, Tk)  # (B, H, Tq, Tk)
    return flip(full.reshape(B * n_heads, Tq, Tk))  # batch-major, heads inner: nn.MHA's order


def from_nn_mha(mask: Tensor, n_heads: Optional[int] = None) -> Tensor:
    """``nn.MultiheadAttention``'s ``attn_mask`` -> attnlib/SDPA mask (bool True = may attend).

    Args:
        mask: (Tq, Tk) or (B * H, Tq, Tk); bool True = blocked, or float (added, unchanged).
        n_heads: H; needed for the 3-D form, to unstack it into (B, H, Tq, Tk).
    """
    flip = _polarity_flip(mask)
    if mask.dim() == 2:
        return flip(mask)
    if mask.dim() != 3:
        raise ValueError(f"mask must have shape (Tq, Tk) or (B * H, Tq, Tk), "
                         f"got {tuple(mask.shape)}")
    if n_heads is not None:
        _check_heads(n_heads)
    if n_heads is None or mask.shape[0] % n_heads != 0:
        raise ValueError(
            f"a 3-D mask of shape {tuple(mask.shape)} needs n_heads dividing its first dim "
            f"{mask.shape[0]} (= B * H), got n_heads={n_heads}"
        )
    BH, Tq, Tk = mask.shape
    return flip(mask.reshape(BH // n_heads, n_heads, Tq, Tk))  # (B, H, Tq, Tk)
