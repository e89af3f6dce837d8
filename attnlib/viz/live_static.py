"""The live model's still picture, for hosts that run no scripts (GitHub's notebook view, an
untrusted notebook): its first state as inline SVG (text as text, no URL, no font rasterised, so
the same on every machine) and the most likely next characters as text."""
from __future__ import annotations

import html

import numpy as np

from ._static import matrix_svg

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
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # masked by the causal mask: drawn grey
    svg = matrix_svg(np.where(future, np.nan, weights), tokens, tokens, palette=palette,
                     vmin=0.0, vmax=1.0,
                     label="attention of layer 0, head 0 (counted from 0)",
                     footer="key (query rows; colour: weight 0 to 1, viridis)")
    nxt = ", ".join(f"\u201c{html.escape(_shown(t))}\u201d {p:.2f}" for t, p in next_tokens)
    intro = (f"<b>{html.escape(title)}</b>: a trained model that runs in your browser, "
             "where you type your own text. Scripts do not run here (a notebook viewer, or an "
             "untrusted notebook: run the cell or trust it; in the book, allow JavaScript), so "
             "this is a still picture of its first state: the attention of layer 0, head 0 "
             "(counted from 0) over the starting text.")
    return (f'<p style="margin:0 0 6px">{intro}</p>{svg}'
            f'<p style="margin:6px 0 0">Most likely next characters: {nxt}.</p>')
