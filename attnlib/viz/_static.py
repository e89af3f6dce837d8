"""A matrix as a still SVG picture, for hosts that run no scripts (GitHub's and
nbviewer's notebook view, an untrusted notebook): the first state of an explorer or a
live model, drawn as text and rectangles (no font rasterised, no URL), so it is the same
on every machine.

Two hosts, one markup. Where the HTML is kept whole (nbviewer, a browser with scripts
off) the inline SVG is the picture. JupyterLab shows an untrusted notebook's HTML
through its sanitizer, which removes ``<svg>`` and everything in it but the text, so the
labels ran together ("Theanimalrested...") and the picture was gone. So the same matrix
also travels as an HTML table of coloured cells (tables and ``bgcolor`` pass the
sanitizer) inside a zero-size ``<foreignObject>``: invisible where the SVG is drawn,
while the sanitizer drops the wrapper and keeps the table. The SVG's labels sit in an
SVG ``<a>`` with the ``hidden`` attribute: HTML's ``hidden`` does not apply to SVG
elements, so they show in the SVG, but once sanitized the ``<a>`` is an HTML element and
hides them.
"""
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


def matrix_svg(values: np.ndarray, rows: Sequence[object], cols: Sequence[object], *,
               palette: str, vmin: float, vmax: float, label: str,
               footer: Optional[str] = None, colorbar: Optional[str] = None) -> str:
    """An (R, C) matrix as inline SVG: one coloured cell per value, row and column labels.

    Args:
        values: (R, C) numbers; non-finite cells (a blocked -inf, a masked NaN) are drawn grey.
        rows, cols: the R row and C column labels (escaped here).
        palette: 256 colours as one hex string (6 characters each), low to high.
        vmin, vmax: the values mapped to the first and the last colour.
        label: the picture's accessible name; footer: a line of text under the matrix.
        colorbar: the name of the values (e.g. "weight"): a colour bar from vmin (bottom) to
            vmax (top) right of the matrix; None: no bar.

    Returns:
        ``<svg class="attnlib-static" ...>...</svg>`` (the picture inline, and again as a table
        for sanitized views; see the module docstring), or "" when R x C > MAX_CELLS.
    """
    values = np.asarray(values, dtype=np.float64)
    R, C = values.shape
    if R * C > MAX_CELLS or R == 0 or C == 0:
        return ""
    cell = max(8, min(26, 360 // max(R, C)))
    left = 8 + 7 * max(len(str(r)) for r in rows)
    left = min(max(left, 24), 120)
    # column labels wider than a cell (about 6.5 px a character at 11 px) stand upright
    longest = max(len(str(c)) for c in cols)
    upright = 6.5 * longest > cell - 2
    under = 8 + 6.5 * longest if upright else 18  # room the column labels take
    top, bottom = 6, (6 + under) if footer is None else (22 + under)
    ticks = (f"{vmax:g}", f"{vmin:g}")
    bar_w = 0 if colorbar is None else 40 + 6.5 * max(len(t) for t in ticks)
    W, H = left + C * cell + 8 + bar_w, top + R * cell + bottom
    span = (vmax - vmin) or 1.0
    fills = np.full((R, C), BLOCKED, dtype=object)
    ok = np.isfinite(values)
    k = np.clip(np.floor((np.where(ok, values, vmin) - vmin) / span * 256), 0, 255).astype(int)
    for i, j in zip(*np.nonzero(ok)):
        fills[i, j] = "#" + palette[6 * k[i, j]:6 * k[i, j] + 6]
    # one group per row; x, width and height unquoted (valid HTML): bytes count, up to 1,600 cells
    cells = "".join(f'<g transform="translate(0 {top + i * cell})">'
                    + "".join(f'<rect x={left + j * cell} width={cell - 1} height={cell - 1} '
                              f'fill="{fills[i, j]}"/>' for j in range(C))
                    + "</g>" for i in range(R))
    rows_text = "".join(f'<text x="{left - 4}" y="{top + i * cell + cell / 2 + 4:g}">'
                        f'{_label(r)}</text>' for i, r in enumerate(rows))
    if upright:  # rotated a quarter turn, read bottom to top, ending at the matrix
        cols_text = "".join(
            f'<text text-anchor="end" transform="translate({left + j * cell + cell / 2 + 4:g} '
            f'{top + R * cell + 4}) rotate(-90)">{_label(c)}</text>' for j, c in enumerate(cols))
    else:
        cols_text = "".join(f'<text x="{left + j * cell + cell / 2:g}" y="{top + R * cell + 13}">'
                            f'{_label(c)}</text>' for j, c in enumerate(cols))
    foot = "" if footer is None else (f'<text x="{left + C * cell / 2:g}" y="{H - 6}" '
                                      f'font-size="10">{html.escape(footer)}</text>')
    labels = (f'<g text-anchor="end">{rows_text}</g><g text-anchor="middle">{cols_text}{foot}</g>')
    bar = ""
    if colorbar is not None:  # 32 steps, vmax at the top; its labels hide with the others
        x, h = left + C * cell + 14, R * cell
        bar = (f'<g class="attnlib-colorbar">'
               + "".join(f'<rect x="{x}" y="{top + s * h / 32:g}" width="10" '
                         f'height="{h / 32 + 0.5:g}" fill="#{palette[6 * k:6 * k + 6]}"/>'
                         for s, k in enumerate(range(251, -1, -8)))
               + "</g>")
        labels += (f'<g text-anchor="start"><text x="{x + 14}" y="{top + 9}">{ticks[0]}</text>'
                   f'<text x="{x + 14}" y="{top + h}">{ticks[1]}</text></g>'
                   f'<text text-anchor="middle" transform="translate({W - 6:g} {top + h / 2:g}) '
                   f'rotate(-90)">{html.escape(colorbar)}</text>')
    table = _table(fills, rows, cols, cell, footer)
    if colorbar is not None:  # for sanitized views: the bar as a row of coloured cells
        strip = "".join(f"<td bgcolor=#{_short('#' + palette[6 * k:6 * k + 6])[1:]} "
                        f'width="{cell - 1}">' for k in range(4, 256, 32))
        table += (f'<table aria-hidden="true" cellspacing="0" style="font:11px sans-serif">'
                  f'<tr><td>{html.escape(colorbar)}: {ticks[1]}&nbsp;</td>{strip}'
                  f'<td>&nbsp;{ticks[0]}</td></tr></table>')
    return (f'<svg class="attnlib-static" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
            f'role="img" aria-label="{html.escape(label)}" style="font-family:sans-serif">'
            f'<foreignObject width="0" height="0">{table}'
            f'</foreignObject>{cells}{bar}<a hidden="hidden" font-size="11">{labels}</a></svg>')


def _short(colour: str) -> str:
    """#rrggbb -> #rgb (nearest), for the table's bgcolor: 4,096 colours are plenty for a still."""
    if len(colour) != 7:
        return colour
    return "#" + "".join(f"{round(int(colour[i:i + 2], 16) / 17):x}" for i in (1, 3, 5))


def _table(fills: np.ndarray, rows: Sequence[object], cols: Sequence[object], cell: int,
           footer: Optional[str]) -> str:
    """The matrix as an HTML table of coloured cells, row labels in front, column labels below:
    what remains of the picture once a sanitizer has removed the SVG around it."""
    R, C = fills.shape
    head = (f'<table aria-hidden="true" cellspacing="1" cellpadding="0" '
            f'style="font:11px sans-serif;table-layout:fixed;border-collapse:separate">'
            f'<colgroup><col><col span="{C}" width="{cell - 1}"></colgroup>')
    body = "".join(f'<tr><th align="right" height="{cell - 1}">{_label(r)}&nbsp;</th>'
                   + "".join(f"<td bgcolor={_short(f)}>" for f in fills[i])
                   for i, r in enumerate(rows))
    keys = ", ".join(_label(c) for c in cols)
    note = "" if footer is None else f"; {html.escape(footer)}"
    return (f'{head}{body}<caption style="caption-side:bottom;text-align:left">'
            f'columns: {keys}{note}</caption></table>')
