"""Input handling shared by the static heatmap and the browser explorer."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np


def to_numpy(data: Any, name: str = "data") -> np.ndarray:
    """Any tensor / array / nested list -> float64 numpy array (detached, on the CPU)."""
    if data is None:
        raise TypeError(f"{name} is None: pass the attention weights, e.g. a model's "
                        f"out.attentions from a call with need_weights=True")
    if isinstance(data, (list, tuple)) and any(hasattr(x, "detach") for x in data):
        data = [to_numpy(x, name) for x in data]  # tensors of any dtype (bf16 too), one by one
    if hasattr(data, "detach"):  # torch.Tensor, without importing torch here
        if data.is_complex():
            raise TypeError(f"{name} must be real numbers, got dtype {data.dtype}")
        data = data.detach().to("cpu").float().numpy()
    try:
        arr = np.asarray(data)
    except ValueError as exc:  # rows of different lengths
        raise TypeError(f"{name} must be an array-like with rows of equal length, got "
                        f"{type(data).__name__}") from exc
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real numbers, got complex values")
    try:
        return arr.astype(np.float64)
    except (TypeError, ValueError) as exc:  # strings, objects
        raise TypeError(f"{name} must be numeric array-like, got {type(data).__name__}") from exc


def check_tokens(tokens: Optional[Sequence[Any]], n: int, what: str, unit: str) -> list[str]:
    """Token labels as strings; ``None`` means positions 0..n-1. Wrong length is a ValueError."""
    if tokens is None:
        return [str(i) for i in range(n)]
    if hasattr(tokens, "tolist"):  # a tensor / array of token ids
        tokens = tokens.tolist()
    if isinstance(tokens, str):
        raise TypeError(f"{what} must be a sequence of token strings, not one string {tokens!r}")
    if not hasattr(tokens, "__iter__"):
        raise TypeError(f"{what} must be a sequence of token strings (or None), got {tokens!r}")
    # a lone surrogate (a byte-level BPE token can decode to one) has no UTF-8 form: show it escaped
    tokens = [str(t).encode("utf-8", "backslashreplace").decode("utf-8") for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"{what} has {len(tokens)} tokens but the matrix has {n} {unit}")
    return tokens


def example_names(examples: Any) -> list[str]:
    """The names of several examples (starting states) as strings: one str is refused, since it
    would name one example per character."""
    if isinstance(examples, str) or not hasattr(examples, "__len__"):
        raise TypeError(f"examples must be a list of names, one per example, got {examples!r}; "
                        f"for one example pass [{examples!r}]")
    return [str(e) for e in examples]


def finite_range(arr: np.ndarray) -> tuple[float, float]:
    """(min, max) over finite entries; (0, 1) if there are none."""
    finite = arr[np.isfinite(arr)]
    if finite.size == 0:
        return 0.0, 1.0
    return float(finite.min()), float(finite.max())


def check_limits(vmin: Any, vmax: Any) -> None:
    """A colour limit is None (from the data) or a finite number: inf/NaN cannot be drawn or sent
    to the browser (JSON has no -Infinity)."""
    for name, v in (("vmin", vmin), ("vmax", vmax)):
        if v is not None and (isinstance(v, (bool, str)) or not hasattr(v, "__float__")):
            raise TypeError(f"{name} must be a number (or None to take it from the data), "
                            f"got {v!r}")
        if v is not None and not math.isfinite(float(v)):
            raise ValueError(f"{name} must be a finite number (or None to take it from the "
                             f"data), got {v}")


def colour_range(arr: np.ndarray, vmin: Optional[float], vmax: Optional[float],
                 diverging: bool) -> tuple[float, float]:
    """The colour scale: diverging data centre on 0; otherwise [min(0, data), max(1, data)]."""
    check_limits(vmin, vmax)
    lo, hi = finite_range(arr)
    if diverging:
        m = max(abs(lo), abs(hi)) or 1.0
        lo, hi = -m, m
    else:
        lo, hi = min(0.0, lo), max(1.0, hi)
    lo = lo if vmin is None else float(vmin)
    hi = hi if vmax is None else float(vmax)
    if not hi > lo:
        raise ValueError(f"colour range needs vmin < vmax, got vmin={lo}, vmax={hi}")
    return lo, hi


def check_cmap(cmap: Any) -> str:
    """A matplotlib colormap name (or a Colormap), checked: an unknown name is a ValueError."""
    import matplotlib

    if isinstance(cmap, matplotlib.colors.Colormap):
        return cmap
    if not isinstance(cmap, str):
        raise TypeError(f"cmap must be a matplotlib colormap name such as 'viridis' (or a "
                        f"Colormap), got cmap={cmap!r}")
    if cmap not in matplotlib.colormaps:
        raise ValueError(f"unknown colormap {cmap!r} (cmap={cmap!r}); pass cmap= a matplotlib "
                         f"colormap name such as 'viridis', 'magma', 'cividis' or (signed data) "
                         f"'RdBu_r'")
    return cmap


def default_cmap(diverging: bool) -> str:
    """Colour-blind-safe, perceptually ordered defaults: viridis for [0, 1], RdBu_r for signed."""
    return "RdBu_r" if diverging else "viridis"


def standalone_page(fragment: str, title: str, width: int) -> str:
    """A minimal HTML document around one output fragment (``title`` already escaped)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title></head>"
            f"<body style=\"max-width:{width}px;margin:16px auto;font-family:sans-serif\">"
            f"{fragment}</body></html>\n")


class HtmlOutput:
    """A notebook output drawn by its own HTML and JavaScript: displays as ``to_html()`` and saves
    as a standalone page. Subclasses define ``to_html(*, full_page=False)`` and ``__repr__``."""

    def to_html(self, *, full_page: bool = False) -> str:
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": self.to_html(), "text/plain": repr(self)}

    def save(self, path: Any) -> None:
        """Write a standalone HTML page (for sharing or a browser test)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_html(full_page=True))
