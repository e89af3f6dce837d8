"""The predicates every argument check in attnlib shares: what counts as an int or a number.

An int is a Python or numpy integer (not a bool); a number is a Python or numpy real or a 0-d
real tensor (not a bool). Each returns the plain value, or None for anything else, so a check
reads ``if as_int(n) is None or n < 1: raise ValueError(...)`` and says in its own message what
the argument is for.
"""
from __future__ import annotations

import numbers
from typing import Any, Optional

import torch


def as_int(x: Any) -> Optional[int]:
    """x as an int if it is an integer (a Python or numpy int, not a bool), else None."""
    if type(x) is int:  # the usual case first: decode loops call this
        return x
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        return None
    return int(x)


def as_real(x: Any) -> Optional[float]:
    """x as a float if it is a real number (a Python or numpy number, or a 0-d real tensor; not
    a bool), else None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, numbers.Real):
        return float(x)
    if isinstance(x, torch.Tensor) and x.dim() == 0 and x.dtype != torch.bool and not x.is_complex():
        return float(x)
    return None


def check_generator(generator: Any) -> None:
    """A ``generator`` argument is a torch.Generator or None."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}; "
                        f"e.g. torch.Generator().manual_seed(0)")
