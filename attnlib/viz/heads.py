"""``heads_grid``: every layer x head of a model as a thumbnail of its attention,
bertviz's model view without a kernel. Click a thumbnail to enlarge it (again to close
it), hover for the weight under the pointer, click a query in the enlarged view to
follow that row through every head. The weights are precomputed (a real model's
attention is more than a page can compute) and travel in the explorer's compact payload
(attnlib/viz/heads.js draws them)."""
from __future__ import annotations

import html
from typing import Any, Optional, Sequence

from .._checks import as_int
from ._kit import KitOutput
from ._packing import decode_payload
from ._static import matrix_svg
from .attention import attention_explorer

__all__ = ["heads_grid"]


class HeadsGrid(KitOutput):
    """The heads grid: its payload is the explorer's (dims layer, head), so the notebooks' nbval
    tolerance (one rounding step between CPUs) applies to it as to every explorer."""

    DATA = "attnlib-data"


def heads_grid(attentions: Any, tokens: Sequence[Any],
               key_tokens: Optional[Sequence[Any]] = None, *,
               examples: Optional[Sequence[str]] = None, title: Optional[str] = None,
               head: Optional[tuple[int, int]] = None, digits: int = 3) -> KitOutput:
    """All heads of a model at once: an L x H grid of thumbnails, one enlarged.

    Args:
        attentions: (L, H, Tq, Tk), or a model's ``out.attentions`` (per layer
            (B, H, Tq, Tk); item 0), or a list of those, one per example (then ``tokens`` is
            a list of token lists and ``examples`` names them), as for
            ``attention_explorer``.
        tokens, key_tokens: the query and key tokens (key_tokens default to tokens).
        title: shown above; head: (layer, head) enlarged at the start (default (0, 0)),
            counted from 0.
        digits: decimals kept and shown.

    Returns:
        An output to display (``.payload`` holds the numbers, ``viz.decode_payload`` reads them).
    """
    ex = attention_explorer(attentions, tokens, key_tokens, examples=examples, title=title,
                            digits=digits)
    p = dict(ex.payload)
    names = [d["name"] for d in p["dims"]]
    if names != ["layer", "head"]:
        raise ValueError(f"heads_grid needs every layer and head: attentions of shape "
                         f"(L, H, Tq, Tk) or a model's out.attentions, got dims {names}")
    L, H = (len(d["labels"]) for d in p["dims"])
    start = (0, 0) if head is None else tuple(head)
    if (len(start) != 2 or any(as_int(x) is None for x in start)
            or not (0 <= int(start[0]) < L and 0 <= int(start[1]) < H)):
        raise ValueError(f"head must be (layer, head) with 0 <= layer < {L} and "
                         f"0 <= head < {H}, got {head!r}")
    p["start"] = [int(start[0]), int(start[1])]
    first = decode_payload(p, 0)[p["start"][0], p["start"][1]]
    e0 = p["examples"][0]
    name = p["title"] or "every head"
    svg = matrix_svg(first, e0["rows"], e0["cols"], palette=p["palette"], vmin=p["vmin"],
                     vmax=p["vmax"], label=f"{name}: layer {p['start'][0]}, head {p['start'][1]}",
                     footer=f"layer {p['start'][0]}, head {p['start'][1]}: "
                            f"weight from {p['vmin']:g} to {p['vmax']:g}")
    where = f" on {e0['name']!r}" if len(p["examples"]) > 1 else ""
    still = (f"<p style='margin:0 0 6px'>Interactive grid of all {L * H} heads "
             f"({L} layers x {H} heads) of {html.escape(name)}: click one to enlarge it. "
             f"Scripts do not run here, so this is a still picture of the head enlarged at the "
             f"start (layer {p['start'][0]}, head {p['start'][1]}){html.escape(where)}. "
             "In Jupyter, run the cell or trust the notebook; in the book, allow JavaScript.</p>"
             + svg)
    shapes = "|".join(str(len(e["rows"])) for e in p["examples"])
    summary = (f"HeadsGrid({p['title']!r}, examples={len(p['examples'])}, layers={L}, "
               f"heads={H}, tokens={shapes}, "
               f"start=layer {p['start'][0]} head {p['start'][1]})")
    return HeadsGrid("heads", p, still, p["title"] or "all heads", summary)
