"""The live model's still picture, for hosts that run no scripts (GitHub's notebook view, an
untrusted notebook): its first state as inline SVG (text as text, no URL, no font rasterised, so
the same on every machine) and the most likely next characters as text."""
from __future__ import annotations

import html

import numpy as np

__all__ = ["static_picture"]


def _shown(tok: str) -> str:
    """A token as a label: newline, tab and space made visible (as the page shows them)."""
    return {"\n": "\u23ce", "\t": "\u21e5", " ": "\u2423"}.get(tok, tok)


def static_picture(weights: np.ndarray, tokens: list[str], next_tokens: list[tuple[str, float]],
                   palette: str, title: str) -> str:
    """HTML: a sentence saying what this is, the (T, T) attention as SVG, the top next tokens.

    Args:
        weights: (T, T) causal attention weights of one head; tokens: the T token strings.
        next_tokens: [(token, probability)] for the next position; palette: 256 hex colours.
    """
    T = len(tokens)
    cell = max(8, min(26, 360 // max(T, 1)))
    left, top = 34, 6
    W, H = left + T * cell + 8, top + T * cell + 34
    parts = [f'<svg class="attnlib-static" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
             f'aria-label="attention of layer 1, head 1">']
    for i in range(T):
        for j in range(T):
            if j > i:  # the future: masked by the causal mask
                fill = "#e6e6e6"
            else:
                k = int(min(255, max(0, np.floor(float(weights[i, j]) * 256))))
                fill = "#" + palette[6 * k:6 * k + 6]
            parts.append(f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell - 1}" '
                         f'height="{cell - 1}" fill="{fill}"/>')
    for i, t in enumerate(tokens):
        label = html.escape(_shown(t))
        y = top + i * cell + cell / 2 + 4
        parts.append(f'<text x="{left - 4}" y="{y:g}" text-anchor="end" font-size="11">{label}</text>')
        x = left + i * cell + cell / 2
        parts.append(f'<text x="{x:g}" y="{top + T * cell + 13}" text-anchor="middle" '
                     f'font-size="11">{label}</text>')
    parts.append(f'<text x="{left + T * cell / 2:g}" y="{H - 4}" text-anchor="middle" '
                 'font-size="10">key (query rows; colour: weight 0 to 1, viridis)</text></svg>')
    nxt = ", ".join(f"\u201c{html.escape(_shown(t))}\u201d {p:.2f}" for t, p in next_tokens)
    intro = (f"<b>{html.escape(title)}</b>: a trained model that runs in your browser, where you type "
             "your own text. Scripts do not run here (a notebook viewer, or an untrusted notebook: "
             "run the cell or trust it; in the book, allow JavaScript), so this is a still picture of "
             "its first state: the attention of layer 1, head 1 over the starting text.")
    return (f'<p style="margin:0 0 6px">{intro}</p>{"".join(parts)}'
            f'<p style="margin:6px 0 0">Most likely next characters: {nxt}.</p>')
