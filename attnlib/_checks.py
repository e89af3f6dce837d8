"""The predicates every argument check in attnlib shares: what counts as an int or a number.

An int is a Python or numpy integer or a 0-d integer tensor (not a bool); a number is a Python or numpy real or a 0-d
real tensor (not a bool). Each returns the plain value, or None for anything else, so a check
reads ``if as_int(n) is None or n < 1: raise ValueError(...)`` and says in its own message what
the argument is for.
"""
from __future__ import annotations

import numbers
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import torch


def as_int(x: Any) -> Optional[int]:
    """x as an int if it is an integer (a Python or numpy int or a 0-d integer tensor; not a
    bool), else None."""
    if type(x) is int:  # the usual case first
        return x
    if isinstance(x, torch.Tensor):
        integer = not (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool)
        return int(x) if x.dim() == 0 and integer and x.device.type != "meta" else None
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


def eager(t: Any = None) -> bool:
    """Should a check that reads tensor values run? Not under ``torch.compile`` (reading a value
    would split the compiled graph: compiled code trusts what eager mode has checked) and not
    for a meta tensor (it has no values)."""
    if torch.compiler.is_compiling():
        return False
    return not (isinstance(t, torch.Tensor) and t.device.type == "meta")


_trust = threading.local()  # per thread: inside a call that has checked its arguments


def checking() -> bool:
    """Should this call check its arguments? Yes, unless a caller has checked them already.

    Checks run once, at the entry point: a model's forward checks its input, then the layers
    it calls trust it; ``generate`` checks the prompt, then every step trusts it. A layer called
    on its own still checks everything. (Under ``torch.compile`` a check is traced once and costs
    nothing afterwards, so it always runs.)"""
    if torch.compiler.is_compiling():
        return True
    return not getattr(_trust, "inside", False)


@contextmanager
def checked() -> Iterator[None]:
    """Inside the block, :func:`checking` is False: the caller has checked what it passes on."""
    if torch.compiler.is_compiling():
        yield
        return
    before = getattr(_trust, "inside", False)
    _trust.inside = True
    try:
        yield
    finally:
        _trust.inside = before


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


def check_text(text: Any, name: str = "text") -> None:
    """A text for a tokenizer backed by Hugging Face ``tokenizers``: a str of real characters.

    Python strings can hold lone surrogates (half of a UTF-16 pair, e.g. from
    ``bytes.decode("utf-8", "surrogateescape")``); they are not characters and have no UTF-8 form,
    and ``tokenizers`` refuses them with a message about its own types."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name} holds a lone surrogate {text[e.start]!r} at position {e.start}, which is not "
                         f"a character and has no UTF-8 form; remove it or replace it, e.g. "
                         f"{name}.encode('utf-8', 'replace').decode('utf-8')") from None


def check_generator(generator: Any) -> None:
    """A ``generator`` argument is a torch.Generator or None."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}; "
                        f"e.g. torch.Generator().manual_seed(0)")


def token_ids(ids: Any, vocab_size: int) -> list[int]:
    """Token ids to decode, as a list of ints each in [0, vocab_size): a sequence of ints, or a
    1-D tensor or array of them. Anything else is a TypeError or ValueError that says what."""
    if hasattr(ids, "tolist") and not isinstance(ids, (list, tuple)):  # a tensor or array
        if getattr(ids, "ndim", 1) != 1:
            raise ValueError(f"ids must be one sequence (T,), got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"ids must be a sequence of int token ids, got {type(ids).__name__} {ids!r}")
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
