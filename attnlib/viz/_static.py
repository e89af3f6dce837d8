"""A matrix as a still SVG picture, for hosts that run no scripts (GitHub's and nbviewer's notebook
view, an untrusted notebook): the first state of an explorer or a live model, drawn as text and
rectangles (no font rasterised, no URL), so it is the same on every machine."""
from __future__ import annotations

import html
from typing import Optional, Sequence

import numpy as np

__all__ = ["matrix_svg", "MAX_CELLS"]

MAX_CELLS = 1600  # larger matrices (over 40 x 40) get no picture: it would outweigh the data
BLOCKED = "#e6e6e6"  # -inf / NaN / masked cells, as the explorer's hatching


def _label(tok: object) -> str:
    """A token as a label: newline, tab and space made visible (as the explorers show them)."""
    text = str(tok)
    return html.escape({"\n": "\u23ce", "\t": "\u21e5", " ": "\u2423"}.get(text, text))


def matrix_svg(values: np.ndarray, rows: Sequence[object], cols: Sequence[object], *, palette: str,
               vmin: float, vmax: float, label: str, footer: Optional[str] = None) -> str:
    """An (R, C) matrix as inline SVG: one coloured cell per value, row and column labels.

    Args:
        values: (R, C) numbers; non-finite cells (a blocked -inf, a masked NaN) are drawn grey.
        rows, cols: the R row and C column labels (escaped here).
        palette: 256 colours as one hex string (6 characters each), low to high.
        vmin, vmax: the values mapped to the first and the last colour.
        label: the picture's accessible name; footer: a line of text under the matrix.

    Returns:
        ``<svg class="attnlib-static" ...>...</svg>``, or "" when R x C > MAX_CELLS.
    """
    values = np.asarray(values, dtype=np.float64)
    R, C = values.shape
    if R * C > MAX_CELLS or R == 0 or C == 0:
        return ""
    cell = max(8, min(26, 360 // max(R, C)))
    left = 8 + 7 * max(len(str(r)) for r in rows)
    left = min(max(left, 24), 120)
    top, bottom = 6, 30 if footer is None else 46
    W, H = left + C * cell + 8, top + R * cell + bottom
    span = (vmax - vmin) or 1.0
    parts = [f'<svg class="attnlib-static" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
             f'aria-label="{html.escape(label)}" style="font-family:sans-serif">']
    for i in range(R):
        for j in range(C):
            v = values[i, j]
            if np.isfinite(v):
                k = int(min(255, max(0, np.floor((v - vmin) / span * 256))))
                fill = "#" + palette[6 * k:6 * k + 6]
            else:
                fill = BLOCKED
            parts.append(f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell - 1}" '
                         f'height="{cell - 1}" fill="{fill}"/>')
    for i, r in enumerate(rows):
        parts.append(f'<text x="{left - 4}" y="{top + i * cell + cell / 2 + 4:g}" text-anchor="end" '
                     f'font-size="11">{_label(r)}</text>')
    for j, c in enumerate(cols):
        parts.append(f'<text x="{left + j * cell + cell / 2:g}" y="{top + R * cell + 13}" '
                     f'text-anchor="middle" font-size="11">{_label(c)}</text>')
    if footer is not None:
        parts.append(f'<text x="{left + C * cell / 2:g}" y="{H - 6}" text-anchor="middle" '
                     f'font-size="10">{html.escape(footer)}</text>')
    parts.append("</svg>")
    return "".join(parts)
