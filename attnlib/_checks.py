"""What every argument check shares: what counts as an int, a number or a switch, and the one
mechanism that runs checks once.

A model checks at the door (:mod:`attnlib.checks`) and the layers it calls trust what it hands
them: inside :class:`trusted`, :func:`checking` is False. A layer, an attention module or a
cache called on its own still checks everything.

The predicates at the top say what counts as an int or a number: a Python or numpy value or a
0-d tensor (never a bool). Each returns the plain value or None, so a check reads
``if as_int(n) is None or n < 1: raise ValueError(...)`` and says in its own message what the
argument is for.
"""
from __future__ import annotations

import numbers
import threading
from typing import Any, Optional

import torch
from torch import Tensor
from torch.compiler import is_dynamo_compiling


# --- What counts as an int, a number, a switch --------------------------------------------------
def as_int(x: Any) -> Optional[int]:
    """x as an int if it is an integer (Python, numpy, 0-d integer tensor, not a bool), or None."""
    if type(x) is int:  # the usual case first
        return x
    if isinstance(x, Tensor):
        integer = not (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool)
        return int(x) if x.dim() == 0 and integer and x.device.type != "meta" else None
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        return None
    return int(x)


def as_real(x: Any) -> Optional[float]:
    """x as a float if it is a real number (Python, numpy, 0-d real tensor, not a bool), or None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, numbers.Real):
        return float(x)
    if isinstance(x, Tensor) and x.dim() == 0 and x.dtype != torch.bool and not x.is_complex():
        return float(x)
    return None


def as_size(name: str, value: Any, *, minimum: int = 1) -> int:
    """A size (a width, a count, a length) as a plain int >= ``minimum``; else a clear error."""
    n = as_int(value)
    if n is None:
        raise TypeError(f"{name} must be an int, got {name}={value!r}")
    if n < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {name}={value!r}")
    return n


def as_dropout(value: Any, name: str = "dropout") -> float:
    """A dropout probability: a number in [0, 1), as a float."""
    p = as_real(value)
    if p is None:
        raise TypeError(f"{name} must be a number in [0, 1), got {value!r}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return p


def check_flag(name: str, flag: Any) -> None:
    """A switch is True or False (a string such as "no" would read as True)."""
    numpy_bool = type(flag).__module__ == "numpy" and type(flag).__name__ == "bool"
    if not isinstance(flag, bool) and not numpy_bool:
        raise TypeError(f"{name} must be True or False, got {flag!r}")


def eager(t: Any = None) -> bool:
    """Should a check read tensor values? Not under ``torch.compile`` (a read would split the
    graph; compiled code trusts what eager mode checked) and not for a meta tensor (no values)."""
    meta = isinstance(t, Tensor) and t.device.type == "meta"
    return not (meta or torch.compiler.is_compiling())


# --- Checked once: the door and the room ---------------------------------------------------------
class _Trust(threading.local):
    trusted = False  # per thread: is a call that checked its arguments running?


_local = _Trust()


def checking() -> bool:
    """Should this call check its arguments? Yes, unless a caller checked them (see
    :class:`trusted`). Under ``torch.compile`` a check is traced once, so it always runs (and the
    per-thread flag is never read there). Asked a few times per layer and decoded token: dynamo's
    own flag is one Python call (``is_compiling()`` three), the per-thread flag one attribute."""
    return is_dynamo_compiling() or not _local.trusted


class trusted:
    """``with trusted():`` the calls inside skip their checks: the caller made them at the door."""

    def __enter__(self) -> None:
        if not is_dynamo_compiling():
            self.before, _local.trusted = _local.trusted, True

    def __exit__(self, *exc: Any) -> None:
        if not is_dynamo_compiling():
            _local.trusted = self.before


def check_like_weights(name: str, t: Tensor, weight: Tensor) -> None:
    """A layer's input ``t``: floating point, on ``weight``'s device, in its dtype (or under
    autocast, which mixes them)."""
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (hidden states), got dtype "
                        f"{t.dtype}; token ids go through a model or its embeddings first")
    if t.device != weight.device:
        raise ValueError(f"{name} is on {t.device} but the module's weights are on "
                         f"{weight.device}; move one of them, e.g. "
                         f"{name}.to({str(weight.device)!r})")
    if t.dtype != weight.dtype and not torch.is_autocast_enabled(t.device.type):
        raise TypeError(f"{name} has dtype {t.dtype} but the module's weights are {weight.dtype}; "
                        f"convert one of them, e.g. {name}.to({weight.dtype}) or "
                        f"module.to({t.dtype})")


def check_generator(generator: Any) -> None:
    """A ``generator`` argument is a torch.Generator or None."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got "
                        f"{type(generator).__name__}; e.g. torch.Generator().manual_seed(0)")


# --- Texts and ids for tokenizers ---------------------------------------------------------------
def check_text(text: Any, name: str = "text") -> None:
    """A str of real characters: no lone surrogate (half of a UTF-16 pair, which has no UTF-8
    form; ``tokenizers`` refuses it with a message about its own types)."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name} holds a lone surrogate {text[e.start]!r} at position {e.start}, "
                         f"which is not a character and has no UTF-8 form; remove it or replace "
                         f"it, e.g. {name}.encode('utf-8', 'replace').decode('utf-8')") from None


def token_ids(ids: Any, vocab_size: int) -> list[int]:
    """Token ids to decode, as a list of ints in [0, vocab_size): a sequence of ints, or a 1-D
    tensor or array of them."""
    if hasattr(ids, "tolist") and not isinstance(ids, (list, tuple)):  # a tensor or an array
        if getattr(ids, "ndim", 1) != 1:
            raise ValueError(f"ids must be one sequence (T,), got shape {tuple(ids.shape)}; "
                             f"decode each row on its own, e.g. [decode(row) for row in ids]")
        ids = ids.tolist()
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"ids must be a sequence of int token ids, got {type(ids).__name__} "
                        f"{ids!r}")
    out = []
    for i in ids:
        n = as_int(i)
        if n is None:
            hint = "; for a tensor of ids pass ids.tolist()" if hasattr(i, "tolist") else ""
            raise TypeError(f"token ids must be ints, got {type(i).__name__} {i!r}{hint}")
        if not 0 <= n < vocab_size:
            raise ValueError(f"token id {n} is outside [0, {vocab_size}) (vocab_size={vocab_size})")
        out.append(n)
    return out
