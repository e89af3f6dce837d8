"""Write the book's schematic diagrams to book/figures/*.svg.

    python scripts/make_diagrams.py          # (re)write every diagram, then embed the changed
                                             # ones in the chapters (scripts/embed_figures.py)
    python scripts/make_diagrams.py --check  # fail if a committed SVG differs from what this writes

Plain string templates, no dependency beyond the standard library. One visual language for the
whole book:

- the same colours in every diagram (Okabe-Ito, colour-blind safe): queries blue, keys vermilion,
  values bluish green; token vectors grey; attention weights reddish purple; positions and the
  feed-forward network orange; LayerNorm yellow; masked (blocked) entries hatched grey, as
  in the chapters' heatmaps;
- the letters of book/notation.md: B, T, C, H, D = C/H, d_k, d_v, T_q, T_k;
- every diagram sits on its own light rounded card, so it reads the same in JupyterLab and on
  GitHub; all text is SVG text (searchable, selectable, scalable). The book's dark theme turns
  a diagram's lightness over and its hues back (book/_static/book.css): the card goes dark, the
  ink light, a pale tint deep and a deep one paler. So a diagram's words never name a lightness
  ("dark cells", "white boxes"): they name a colour, a pattern or a size;
- each file carries a <title> and <desc>; the notebooks give the same alt text;
- on a phone a diagram is not shrunk until its labels are 7 px high: a diagram with a narrow
  layout (``NARROW`` below) also gets ``<name>.narrow.svg``, at most 360 px wide, made of
  pieces of the wide drawing stacked top to bottom (its panels one under another) and its long
  lines of text wrapped; the book shows it below 600 px of screen (scripts/book_checks.py).
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from html import escape
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "book" / "figures"

FONT = "'DejaVu Sans', 'Helvetica Neue', Helvetica, Arial, sans-serif"
INK = "#222222"        # text and outlines
MUTED = "#5f5f5f"      # shapes and notes
CARD = "#ffffff"
CARD_EDGE = "#d6d6d6"

# role -> (stroke, fill). Okabe-Ito hues, light tints as fills (text on them stays dark).
COLORS = {
    "Q": ("#0072B2", "#d3e6f3"),
    "K": ("#D55E00", "#f8dccb"),
    "V": ("#009E73", "#c9ece1"),
    "X": ("#767676", "#ececec"),
    "A": ("#CC79A7", "#f4dfeb"),      # scores / attention weights / attention sublayers
    "P": ("#E69F00", "#fbe9c4"),      # positions
    "F": ("#E69F00", "#fbe9c4"),      # feed-forward network
    "N": ("#b8a800", "#f8f3b8"),      # LayerNorm
    "M": ("#4d4d4d", "url(#blocked)"),   # blocked by a mask: hatched grey (pattern in <defs>)
    "W": ("#767676", "#ffffff"),      # learned matrices
    "L": ("#56B4E9", "#dcf0fb"),      # trained low-rank adapters (LoRA's A and B)
}
HEADS = ["#56B4E9", "#E69F00", "#CC79A7", "#F0E442"]   # one tint per head in chapter 6


# ---------------------------------------------------------------- text with sub/superscripts
_TOKEN = re.compile(r"(?<!\\)([_^])(\{[^}]*\}|.)")


def rich(s: str, size: float) -> str:
    """SVG tspans for a label: ``_x``/``_{xy}`` subscripts, ``^T``/``^{..}`` superscripts.

    A literal underscore is written ``\\_`` (``max\\_len``).

    Uses dy shifts (not baseline-shift, which Firefox ignores) and returns to the baseline after
    each script, so labels such as ``W_Q (C, d_k)`` read as in the text.
    """
    out, pos, shift = [], 0, 0.0
    small = round(size * 0.72, 1)
    for m in _TOKEN.finditer(s):
        if m.start() > pos:
            out.append(_base(s[pos:m.start()], shift))
            shift = 0.0
        body = m.group(2).strip("{}")
        dy = size * (0.28 if m.group(1) == "_" else -0.38)
        out.append(f'<tspan dy="{dy - shift:.1f}" font-size="{small}">{escape(body)}</tspan>')
        shift = dy
        pos = m.end()
    if pos < len(s):
        out.append(_base(s[pos:], shift))
    return "".join(out)


def _base(text: str, shift: float) -> str:
    text = text.replace("\\_", "_")
    if not shift:
        return escape(text)
    return f'<tspan dy="{-shift:.1f}">{escape(text)}</tspan>'


class Svg:
    """A card of the given size with helpers for boxes, arrows, text and little matrices."""

    def __init__(self, name: str, width: int, height: int, title: str, desc: str):
        self.name, self.w, self.h, self.title, self.desc = name, width, height, title, desc
        self.parts: list[str] = []
        self.texts: list[dict] = []  # every text() call, for the narrow layout's wrapped lines
        self.arrows: list[tuple] = []  # (points, part) of every arrow(), for the narrow "drop"

    # -- primitives
    def text(self, x, y, s, size=16, anchor="middle", color=INK, weight="normal", italic=False,
             halo=False):
        """Text at (x, y); halo=True draws a white outline behind it, so lines may cross it."""
        style = ' font-style="italic"' if italic else ""
        if halo:
            style += (' stroke="#ffffff" stroke-width="5" stroke-linejoin="round"'
                      ' paint-order="stroke"')
        bold = f' font-weight="{weight}"' if weight != "normal" else ""
        self.texts.append(dict(x=x, y=y, s=s, size=size, color=color, weight=weight,
                               italic=italic, part=len(self.parts)))
        self.parts.append(
            f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" fill="{color}"'
            f'{bold}{style}>{rich(s, size)}</text>')

    def rect(self, x, y, w, h, fill, stroke, rx=6, width=1.5, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" fill="{fill}"'
                          f' stroke="{stroke}" stroke-width="{width}"{d}/>')

    def box(self, cx, y, w, h, role, label, shape=None, size=18, rx=8, dash=None):
        """A box centred at cx with a label and, under it, a shape in grey."""
        stroke, fill = COLORS[role]
        self.rect(cx - w / 2, y, w, h, fill, stroke, rx=rx, width=2, dash=dash)
        if shape:
            self.text(cx, y + h / 2 - 2, label, size=size)
            self.text(cx, y + h / 2 + 17, shape, size=14, color=MUTED)
        else:
            self.text(cx, y + h / 2 + size * 0.35, label, size=size)

    def arrow(self, *points, color=INK, width=1.6, dash=None, head=True):
        d = "M" + " L".join(f"{x},{y}" for x, y in points)
        dd = f' stroke-dasharray="{dash}"' if dash else ""
        mk = ' marker-end="url(#arrow)"' if head else ""
        self.arrows.append((points, len(self.parts)))
        self.parts.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="{width}"'
                          f'{dd}{mk}/>')

    def circle(self, cx, cy, r, fill, stroke, label=None, size=18):
        self.parts.append(f'<circle cx="{cx}" cy="{cy}" r="{r}" fill="{fill}" stroke="{stroke}"'
                          f' stroke-width="1.8"/>')
        if label:
            self.text(cx, cy + size * 0.35, label, size=size)

    def cells(self, x, y, fills, cell=16, stroke="#939393", gap_every=None, gap=0):
        """A little matrix: fills is a list of rows, each a list of fill colours (None = empty)."""
        for r, row in enumerate(fills):
            for c, fill in enumerate(row):
                if fill is None:
                    continue
                gx = (c // gap_every) * gap if gap_every else 0
                self.parts.append(f'<rect x="{x + c * cell + gx}" y="{y + r * cell}" width="{cell}"'
                                  f' height="{cell}" fill="{fill}" stroke="{stroke}"'
                                  f' stroke-width="0.8"/>')

    def raw(self, s: str):
        self.parts.append(s)

    def defs(self) -> str:
        return (
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="10"'
            ' markerHeight="10" markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"'
            f' fill="{INK}"/></marker>'
            '<pattern id="blocked" width="7" height="7" patternUnits="userSpaceOnUse"'
            ' patternTransform="rotate(45)"><rect width="7" height="7" fill="#c4c4c4"/>'
            '<line x1="0" y1="0" x2="0" y2="7" stroke="#7a7a7a" stroke-width="2.2"/></pattern>')

    def render_narrow(self, pieces: list[tuple]) -> str:
        """The narrow layout: ``pieces`` stacked top to bottom, centred in a NARROW_W card.

        ("crop", x0, y0, x1, y1[, scale][, {"hide": [(ya, yb), ...], "drop": [(x, y), ...]}]):
        that region of the wide drawing, without the texts whose baseline lies in a hidden band
        (set them again with a "wrap") and without the arrows that start or end at a dropped
        point (an arrow the crop's edge would cut: the reader sees it in another piece, or the
        pieces' order says it); ("row", crop, crop, ...[, {"scale": s, "hide": ..., "drop":
        ...}]): crops (x0, y0, x1, y1) side by side, top-aligned; ("wrap", y0, y1[, x0, x1]): the
        texts whose baseline lies in [y0, y1] (and anchor in [x0, x1]), each set again as lines
        that fit the card; ("label", text, size): a centred line, such as the "+" between two
        matrices; ("rule",): a line; ("drawing", svg): the whole of another Svg at 1:1, a
        narrow arrangement drawn for the phone where crops of the wide one cannot work.
        """
        W, pad = NARROW_W, 10
        out, y, arts = [], 12, {}

        def art(hide, drop=(), drawing=None) -> str:
            """The id of a copy of the drawing without the texts in the hidden bands and the
            arrows with an end at a dropped point (or of another drawing, whole)."""
            key = (tuple(hide), tuple(map(tuple, drop)), id(drawing))
            if key not in arts:
                src = drawing or self
                gone = {t["part"] for t in src.texts if any(a <= t["y"] <= b for a, b in hide)}
                gone |= {part for pts, part in src.arrows
                         if any(tuple(pts[0]) == tuple(d) or tuple(pts[-1]) == tuple(d)
                                for d in drop)}
                arts[key] = (f"art{len(arts)}" if hide or drop or drawing else "art",
                             "\n".join(p for i, p in enumerate(src.parts) if i not in gone))
            return arts[key][0]

        for piece in pieces:
            kind = piece[0]
            if kind in ("crop", "row"):
                opts = piece[-1] if isinstance(piece[-1], dict) else {}
                body = piece[1:-1] if opts else piece[1:]
                if kind == "crop":
                    scale = body[4] if len(body) > 4 else opts.get("scale", 1.0)
                    crops = [tuple(body[:4])]
                else:
                    scale, crops = opts.get("scale", 1.0), [tuple(c) for c in body]
                ref = art(opts.get("hide", []), opts.get("drop", []))
                sizes = [((x1 - x0) * scale, (y1 - y0) * scale) for x0, y0, x1, y1 in crops]
                total = sum(w for w, _ in sizes) + 8 * (len(crops) - 1)
                if total > W - 2 * pad + 0.5:
                    raise ValueError(f"{self.name}: {piece} is {total:.0f} px wide, over "
                                     f"{W - 2 * pad}")
                x = (W - total) / 2
                for (x0, y0, x1, y1), (w, h) in zip(crops, sizes):
                    out.append(f'<svg x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" '
                               f'viewBox="{x0} {y0} {x1 - x0} {y1 - y0}"><use href="#{ref}"/></svg>')
                    x += w + 8
                y += max(h for _, h in sizes) + 6
            elif kind == "label":
                text, size = piece[1:3]
                y += size
                out.append(f'<text x="{W / 2:g}" y="{y:g}" font-size="{size}" text-anchor="middle"'
                           f' fill="{INK}">{escape(text)}</text>')
                y += size * 0.4
            elif kind == "wrap":
                y0, y1 = piece[1:3]
                x0, x1 = piece[3:5] if len(piece) > 3 else (-math.inf, math.inf)
                chosen = sorted((t for t in self.texts if y0 <= t["y"] <= y1 and x0 <= t["x"] <= x1),
                                key=lambda t: (t["y"], t["x"]))
                for t in chosen:
                    for line in _wrap(t["s"], t["size"], W - 2 * pad):
                        y += t["size"] * 1.3
                        bold = f' font-weight="{t["weight"]}"' if t["weight"] != "normal" else ""
                        it = ' font-style="italic"' if t["italic"] else ""
                        out.append(f'<text x="{W / 2:g}" y="{y:.1f}" font-size="{t["size"]}" '
                                   f'text-anchor="middle" fill="{t["color"]}"{bold}{it}>'
                                   f'{rich(line, t["size"])}</text>')
                    y += t["size"] * 0.35
                y += 6
            elif kind == "drawing":
                d = piece[1]
                if d.w > W - 2 * pad:
                    raise ValueError(f"{self.name}: drawing {d.name} is {d.w} px wide")
                out.append(f'<svg x="{(W - d.w) / 2:g}" y="{y:g}" width="{d.w}" height="{d.h}" '
                           f'viewBox="0 0 {d.w} {d.h}"><use href="#{art([], [], d)}"/></svg>')
                y += d.h + 6
            elif kind == "rule":
                y += 4
                out.append(f'<line x1="{pad + 10}" y1="{y:g}" x2="{W - pad - 10}" y2="{y:g}" '
                           f'stroke="{CARD_EDGE}" stroke-width="1.5"/>')
                y += 10
            else:
                raise ValueError(f"{self.name}: unknown narrow piece {piece!r}")
        H = round(y + 8)
        groups = "".join(f'<g id="{ident}">{body}</g>' for ident, body in arts.values())
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}"'
            f' viewBox="0 0 {W} {H}" role="img" aria-labelledby="title desc"'
            f' font-family="{FONT}">\n'
            f'<title id="title">{escape(self.title)}</title>\n'
            f'<desc id="desc">{escape(self.desc)}</desc>\n'
            f'{self.defs()}{groups}</defs>\n'
            f'<rect x="1" y="1" width="{W - 2}" height="{H - 2}" rx="14" fill="{CARD}"'
            f' stroke="{CARD_EDGE}" stroke-width="1.5"/>\n' + "\n".join(out) + "\n</svg>\n")

    def render(self) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}"'
            f' viewBox="0 0 {self.w} {self.h}" role="img" aria-labelledby="title desc"'
            f' font-family="{FONT}">\n'
            f'<title id="title">{escape(self.title)}</title>\n'
            f'<desc id="desc">{escape(self.desc)}</desc>\n'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="10"'
            ' markerHeight="10" markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"'
            f' fill="{INK}"/></marker>'
            '<pattern id="blocked" width="7" height="7" patternUnits="userSpaceOnUse"'
            ' patternTransform="rotate(45)"><rect width="7" height="7" fill="#c4c4c4"/>'
            '<line x1="0" y1="0" x2="0" y2="7" stroke="#7a7a7a" stroke-width="2.2"/></pattern>'
            '</defs>\n'
            f'<rect x="1" y="1" width="{self.w - 2}" height="{self.h - 2}" rx="14" fill="{CARD}"'
            f' stroke="{CARD_EDGE}" stroke-width="1.5"/>\n')
        return head + "\n".join(self.parts) + "\n</svg>\n"


NARROW_W = 360  # the narrow layout's width: a phone's column (390 px screen) shows it at 1:1


def _wrap(s: str, size: float, width: float) -> list[str]:
    """Split a label into lines of at most ``width`` px (DejaVu Sans: ~0.6 em per character;
    sub/superscript markup counts as the characters it shows)."""
    shown = lambda part: len(re.sub(r"(?<!\\)[_^]\{?|[{}]|\\", "", part))
    limit = max(8, int(width / (0.6 * size)))
    lines, line = [], ""
    for word in s.split(" "):
        trial = f"{line} {word}" if line else word
        if line and shown(trial) > limit:
            lines.append(line)
            line = word
        else:
            line = trial
    return lines + ([line] if line else [])


def shade(hex_color: str, t: float) -> str:
    """Mix a colour with white: t = 0 white, t = 1 the colour itself."""
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    mix = [round(255 + (v - 255) * t) for v in (r, g, b)]
    return "#" + "".join(f"{v:02x}" for v in mix)


def vector(seed: int, n: int, color: str) -> list[str]:
    """n deterministic shades of one colour: a picture of 'some numbers', the same every run."""
    out, s = [], seed * 7919 + 17
    for _ in range(n):
        s = (s * 1103515245 + 12345) % 2**31
        out.append(shade(color, 0.2 + 0.75 * (s % 1000) / 1000))
    return out


def legend(svg: Svg, x, y, items, size=14):
    """Small legend: items are (fill, stroke, text)."""
    for fill, stroke, label in items:
        svg.rect(x, y - 12, 16, 16, fill, stroke, rx=2, width=1)
        svg.text(x + 22, y + 1, label, size=size, anchor="start", color=INK)
        x += 36 + len(label) * size * 0.62


def _layout(table: dict, narrow: bool) -> SimpleNamespace:
    """One column of a layout table {field: (wide, narrow)}: its values as attributes."""
    return SimpleNamespace(**{field: pair[narrow] for field, pair in table.items()})


# ------------------------------------------------------------------------------- the diagrams
# chapter 1's opening diagram: all-MiniLM-L6-v2's WordPiece pieces and ids for this text, typed
# here and held equal to the tokenizer's own by tests/test_book_figures.py
TOKENIZE_TEXT = "The Transformer attends"
TOKENIZE_PIECES = ["[CLS]", "the", "transform", "##er", "attends", "[SEP]"]
TOKENIZE_IDS = [101, 1996, 10938, 2121, 23933, 102]


def tokenize_pipeline() -> Svg:
    pieces, ids = TOKENIZE_PIECES, TOKENIZE_IDS
    s = Svg("tokenize_pipeline", 700, 480,
            "From text to pieces to ids to vectors",
            "The text 'The Transformer attends' is split by the WordPiece tokenizer of "
            "all-MiniLM-L6-v2 into six pieces: [CLS], the, transform, ##er, attends, [SEP]. Each "
            "piece is looked up in the vocabulary to give an integer id (101, 1996, 10938, 2121, "
            "23933, 102). Each id selects one row of the embedding table E of shape (|V|, C), a "
            "vector of C numbers, so T = 6 tokens become a (T, C) matrix X.")
    xs = [152 + i * 98 for i in range(6)]
    mid = (xs[0] + xs[-1]) / 2
    s.rect(mid - 170, 20, 340, 44, COLORS["X"][1], COLORS["X"][0], rx=8, width=2)
    s.text(mid, 48, f"“{TOKENIZE_TEXT}”", size=18)
    for y, lab in ((42, "text"), (146, "pieces"), (220, "ids"), (338, "vectors")):
        s.text(20, y, lab, size=15, anchor="start", color=MUTED, weight="bold")
    for x in xs:
        s.arrow((mid, 66), (x, 124), color="#939393", width=1.2)
    # what the tokenizer does, in the left column like the other steps, clear of the arrows
    for y, lab in ((66, "tokenizer:"), (82, "lower-case, split"), (98, "into WordPiece pieces")):
        s.text(20, y, lab, size=13, anchor="start", color=MUTED)
    for x, p, i in zip(xs, pieces, ids):
        s.rect(x - 46, 126, 92, 36, "#ffffff", INK, rx=6)
        s.text(x, 150, p, size=15)
        s.arrow((x, 164), (x, 196))
        s.rect(x - 40, 198, 80, 34, "#f7f7f7", MUTED, rx=6)
        s.text(x, 221, str(i), size=16)
        s.arrow((x, 234), (x, 264))
        s.cells(x - 9, 268, [[c] for c in vector(i, 8, COLORS["X"][0])], cell=18)
    # what each step does, in the left column, clear of the arrows
    for y, lab in ((240, "its index"), (256, "in the"), (272, "vocabulary"),
                   (358, "row E[id]"), (374, "of table E,"), (390, "(|V|, C)")):
        s.text(20, y, lab, size=13, anchor="start", color=MUTED)
    s.text(350, 440, "T = 6 tokens: ids (T,) → token vectors (T, C)", size=15)
    s.text(350, 464, "C numbers per token, the model's width (8 drawn; 384 in this model)",
           size=14, color=MUTED)
    return s


def embedding_position() -> Svg:
    words, ids = ["i", "like", "tea"], [1045, 2066, 5572]  # as the tokenizer writes them
    s = Svg("embedding_position", 700, 440,
            "x_i = e_i + p_i: token vector plus position vector",
            "For 'I like tea' (tokens 'i', 'like', 'tea'; [CLS] and [SEP] left out), each token at position i gets its token vector e_i, the row of the "
            "embedding table E for its id (1045, 2066, 5572), and a position vector p_i, row i of "
            "the position table P. The two are added element by element, so x_i has the same "
            "width C. Stacking x_0, x_1, x_2 gives X of shape (T, C) = (3, C).")
    xs = [230, 350, 470]
    grey, orange = COLORS["X"][0], COLORS["P"][0]
    labels = [(78, "token, id"), (134, "e_i = E[id]"), (196, "p_i = P[i]"), (262, "x_i = e_i + p_i")]
    for y, lab in labels:
        s.text(24, y, lab, size=15, anchor="start")
    s.text(24, 40, "position i", size=15, anchor="start", color=MUTED)
    for k, (x, w, i) in enumerate(zip(xs, words, ids)):
        s.text(x, 40, str(k), size=16, color=MUTED)
        s.text(x, 70, w, size=18, weight="bold")
        s.text(x, 90, str(i), size=13, color=MUTED)
        e = vector(i, 6, grey)
        p = vector(100 + k, 6, orange)
        x0 = x - 48
        s.cells(x0, 118, [e])
        s.text(x, 172, "+", size=22)
        s.cells(x0, 180, [p])
        s.text(x, 236, "=", size=22)
        mixed = [shade(grey, 0.35 + 0.6 * ((k * 5 + j * 3) % 7) / 7) for j in range(6)]
        s.rect(x0 - 4, 242, 104, 24, "none", INK, rx=4, width=1.5)
        s.cells(x0, 246, [mixed])
    s.text(534, 131, "row of E: (|V|, C)", size=13, anchor="start", color=MUTED)
    s.text(534, 193, "row of P: (max\\_len, C)", size=13, anchor="start", color=MUTED)
    # stack
    s.arrow((350, 276), (350, 300))
    s.text(300, 334, "X", size=18, weight="bold", anchor="end")
    for r, k in enumerate(range(3)):
        mixed = [shade(grey, 0.35 + 0.6 * ((k * 5 + j * 3) % 7) / 7) for j in range(6)]
        s.cells(350, 306 + r * 16, [mixed])
        s.text(344, 319 + r * 16, f"x_{k}", size=13, anchor="end", color=MUTED)
    s.text(316, 334, "=", size=18)
    s.text(456, 334, "(T, C) = (3, C)", size=15, anchor="start")
    s.text(330, 384, "added, not appended: x_i keeps the width C", size=15)
    s.text(330, 410, "one row per token; a batch of B sentences gives (B, T, C)", size=14,
           color=MUTED)
    return s


def attention_shapes() -> Svg:
    s = Svg("attention_shapes", 620, 740,
            "Self-attention, step by step, with the shape of every tensor",
            "X of shape (T, C) is multiplied by three learned matrices: W_Q (C, d_k) gives the "
            "queries Q (T, d_k), W_K (C, d_k) the keys K (T, d_k), W_V (C, d_v) the values V "
            "(T, d_v). Q times K transposed gives the unscaled scores (T, T), one row per query and one "
            "column per key. The scores are divided by the square root of d_k, a mask M (0 or minus "
            "infinity) is added, and a softmax turns each row into weights A (T, T) that sum to 1. "
            "Finally A times V gives the output (T, d_v): one mixed value vector per token.")
    cq, ck, cv = 130, 310, 490
    s.box(310, 18, 220, 58, "X", "X", "(T, C), C = d_{model}")
    for c, r, w in ((cq, "Q", "d_k"), (ck, "K", "d_k"), (cv, "V", "d_v")):
        s.arrow((310, 78), (c, 118), color="#939393", width=1.4)
        s.box(c, 120, 150, 50, "W", f"× W_{r}", f"(C, {w})", size=17)
        s.rect(c - 75, 120, 150, 50, "none", COLORS[r][0], rx=8, width=2)
        s.arrow((c, 172), (c, 196))
        s.box(c, 198, 150, 58, r, r, f"(T, {w})")
    # scores
    s.arrow((cq, 258), (195, 300))
    s.arrow((ck, 258), (245, 300))
    s.box(220, 302, 180, 58, "A", "Q K^T", "(T, T)")
    s.text(320, 336, "every query · every key", size=13, anchor="start", color=MUTED)
    # the variance claim holds only for unit-variance q and k: said on a second line
    steps = [("÷ √d_k", "keeps the scores' variance near 1",
              "if q and k have unit variance (chapter 4)"),
             ("+ M", "mask: 0 = may look, −∞ = may not", ""),
             ("softmax", "each row → weights ≥ 0, summing to 1", "")]
    y = 372
    for lab, note, condition in steps:
        s.arrow((220, y - 10), (220, y + 2))
        s.rect(150, y + 2, 140, 34, "#ffffff", COLORS["A"][0], rx=17, width=1.8)
        s.text(220, y + 25, lab, size=17)
        s.text(302, y + (18 if condition else 25), note, size=13, anchor="start",
               color=MUTED)
        if condition:
            s.text(302, y + 34, condition, size=12, anchor="start", color=MUTED)
        y += 50
    s.arrow((220, y - 12), (220, y + 2))
    s.box(220, y + 2, 180, 58, "A", "A", "(T, T), rows sum to 1")
    # output
    yo = y + 100
    s.arrow((220, y + 62), (290, yo))
    s.arrow((cv + 75, 227), (598, 227), (598, yo + 29), (432, yo + 29))
    s.box(340, yo, 180, 58, "V", "output = A V", "(T, d_v)")
    s.text(340, yo + 84, "each output row: a weighted average of the rows of V", size=14,
           color=MUTED)
    return s


def weighted_average() -> Svg:
    toks = ["The", "animal", "rested", "because", "it", "was", "tired"]
    a = [0.03, 0.62, 0.08, 0.05, 0.12, 0.04, 0.06]
    v = [[0.2, 0.6], [0.8, 0.3], [0.2, 0.9], [0.4, 1.0], [0.4, 0.5], [0.1, 0.6], [0.5, 1.0]]
    s = Svg("weighted_average", 640, 430,
            "Attention for one query: a weighted average of the values",
            "The query of 'it' gives a weight to every key token: The 0.03, animal 0.62, rested "
            "0.08, because 0.05, it 0.12, was 0.04, tired 0.06; the weights sum to 1. Each value "
            "vector is multiplied by its weight and the products are added: the output for 'it' "
            "is [0.62, 0.47]; animal has the largest weight, 0.62.")
    qs, qf = COLORS["Q"]
    s.rect(20, 160, 86, 50, qf, qs, rx=8, width=2)
    s.text(63, 183, "query", size=14, color=MUTED)
    s.text(63, 202, "“it”", size=17, weight="bold")
    heads = [(190, "key j"), (300, "weight A_{it,j}"), (460, "value v_j"), (568, "A_{it,j} v_j")]
    for x, h in heads:
        s.text(x, 34, h, size=14, color=MUTED)
    y0 = 50
    for j, (t, w, vec) in enumerate(zip(toks, a, v)):
        y = y0 + j * 38
        bold = "bold" if t == "animal" else "normal"
        s.arrow((108, 185), (140, y + 17), color="#939393", width=1)
        s.rect(142, y + 2, 96, 30, COLORS["K"][1], COLORS["K"][0], rx=6, width=1.5)
        s.text(190, y + 23, t, size=15, weight=bold)
        s.rect(250, y + 7, 110 * w / 0.62, 20, COLORS["A"][1], COLORS["A"][0], rx=3, width=1.2)
        s.text(256 + 110 * w / 0.62, y + 23, f"{w:.2f}", size=14, anchor="start", weight=bold)
        s.rect(410, y + 2, 100, 30, COLORS["V"][1], COLORS["V"][0], rx=6, width=1.5)
        s.text(460, y + 23, f"[{vec[0]}, {vec[1]}]", size=14)
        s.text(568, y + 23, f"[{w * vec[0]:.3f}, {w * vec[1]:.3f}]", size=14, weight=bold)
    y = y0 + 7 * 38 + 6
    for x1, x2 in ((250, 380), (512, 630)):   # one rule under each column that is summed
        s.parts.append(f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{INK}"'
                       ' stroke-width="1.2"/>')
    s.text(300, y + 24, "sum = 1.00", size=15)
    s.text(568, y + 24, "[0.620, 0.470]", size=15, weight="bold")
    s.rect(400, y + 44, 226, 50, COLORS["V"][1], COLORS["V"][0], rx=8, width=2)
    s.text(513, y + 75, "o_{it} = Σ_j A_{it,j} v_j", size=17)
    s.text(30, y + 64, "output for “it”: a mix in which", size=14, anchor="start", color=MUTED)
    s.text(30, y + 84, "animal has the largest weight", size=14, anchor="start", color=MUTED)
    return s


def padding_mask() -> Svg:
    s = Svg("padding_mask", 660, 420,
            "The padding mask for 'Birds fly' and 'The cat slept'",
            "A batch of two sentences: 'Birds fly <PAD>' and 'The cat slept'. The padding mask "
            "has one flag per key, 1 for a real token and 0 for <PAD>, shape (B, 1, 1, T). It is "
            "broadcast over heads and queries: in sentence 0 every query, including the <PAD> "
            "query, may look at Birds and fly but not at the <PAD> key; in sentence 1 nothing is "
            "blocked.")
    batch = [["Birds", "fly", "<PAD>"], ["The", "cat", "slept"]]
    flags = [[1, 1, 0], [1, 1, 1]]
    blocked = COLORS["M"][1]
    s.text(30, 40, "padded batch (B, T) = (2, 3)", size=15, anchor="start", weight="bold")
    s.text(400, 40, "key flags (B, 1, 1, T)", size=15, anchor="start", weight="bold")
    for b in range(2):
        y = 56 + b * 40
        s.text(30, y + 22, f"sentence {b}", size=14, anchor="start", color=MUTED)
        for t, w in enumerate(batch[b]):
            pad = w == "<PAD>"
            s.rect(120 + t * 72, y, 68, 32, "#eaeaea" if pad else "#ffffff", MUTED, rx=4, width=1.2)
            s.text(154 + t * 72, y + 22, w, size=14, color=MUTED if pad else INK)
        for t, f in enumerate(flags[b]):
            s.rect(400 + t * 40, y, 36, 32, "#ffffff" if f else blocked, MUTED, rx=4, width=1.2)
            s.text(418 + t * 40, y + 22, str(f), size=16, weight="normal" if f else "bold",
                   halo=not f)
    s.text(330, 166, "the same key flags for every query (and every head):", size=14,
           color=MUTED)
    for b in range(2):
        x0 = 160 + b * 280
        s.text(x0 + 78, 196, f"sentence {b}: allowed (T_q, T_k)", size=14)
        for t, w in enumerate(batch[b]):
            s.text(x0 + 22 + t * 52, 222, w, size=12, color=MUTED)
            s.text(x0 - 8, 250 + t * 44, w, size=12, anchor="end", color=MUTED)
        for r in range(3):
            for c in range(3):
                ok = flags[b][c]
                s.rect(x0 + c * 52 - 4, 230 + r * 44, 50, 42, "#ffffff" if ok else blocked,
                       MUTED, rx=2, width=1)
                if not ok:
                    s.text(x0 + c * 52 + 21, 257 + r * 44, "0", size=15, weight="bold",
                           halo=True)
    s.text(30, 278, "queries ↓", size=13, anchor="start", color=MUTED)
    s.text(30, 222, "keys →", size=13, anchor="start", color=MUTED)
    legend(s, 130, 392, [("#ffffff", MUTED, "may attend (True)"),
                         (blocked, MUTED, "blocked: score −∞, weight 0")])
    return s


def causal_mask_added() -> Svg:
    words = ["The", "cat", "slept", "."]
    scores = [[1.2, 0.3, -0.5, 0.8], [0.4, 1.5, 0.2, -0.3],
              [-0.2, 0.9, 1.1, 0.6], [0.7, 0.1, 1.3, 0.5]]
    weights = []
    for i, row in enumerate(scores):
        e = [math.exp(x) if j <= i else 0.0 for j, x in enumerate(row)]
        weights.append([x / sum(e) for x in e])
    s = Svg("causal_mask_added", 700, 360,
            "The causal mask is added to the scores before the softmax",
            "For 'The cat slept .', a 4 by 4 matrix of scaled scores (one row per query, one column "
            "per key) is added to the causal mask M, which is 0 where the key is at or before the "
            "query and minus infinity after it. The softmax of each row then gives weight exactly 0 "
            "to the blocked keys, and the remaining weights still sum to 1: the first row is 1, 0, "
            "0, 0; the second 0.25, 0.75, 0, 0.")
    cell, top = 38, 92
    blocked = COLORS["M"][1]
    panels = [(90, "scaled scores Q K^T/√d_k", "scores"), (300, "mask M", "mask"),
              (510, "softmax, row by row", "weights")]
    for x0, title, kind in panels:
        s.text(x0 + 2 * cell, 40, title, size=15, weight="bold")
        for j, w in enumerate(words):
            s.text(x0 + j * cell + cell / 2, top - 8, w, size=12, color=MUTED)
        for i in range(4):
            for j in range(4):
                ok = j <= i
                if kind == "scores":
                    fill, label, color = COLORS["A"][1], f"{scores[i][j]:.1f}", INK
                elif kind == "mask":
                    fill, label = ("#ffffff", "0") if ok else (blocked, "−∞")
                    color = INK
                else:
                    fill = shade(COLORS["A"][0], 0.1 + 0.8 * weights[i][j]) if ok else blocked
                    label, color = f"{weights[i][j]:.2f}", INK
                s.rect(x0 + j * cell, top + i * cell, cell, cell, fill, CARD_EDGE, rx=0, width=1.2)
                s.text(x0 + j * cell + cell / 2, top + i * cell + 24, label, size=12, color=color,
                       halo=not ok and kind != "scores")
    for i, w in enumerate(words):
        s.text(82, top + i * cell + 24, w, size=12, anchor="end", color=MUTED)
    s.text(30, 66, "queries ↓   keys →", size=12, anchor="start", color=MUTED)
    s.text(266, top + 2 * cell + 8, "+", size=26)
    s.text(476, top + 2 * cell + 8, "→", size=26)
    s.text(350, 278, "e^{−∞} = 0: a blocked key gets weight exactly 0, and each row still sums to 1",
           size=14)
    s.text(350, 304, "boolean form (PyTorch, attnlib): True = may attend → 0, False → −∞",
           size=14, color=MUTED)
    s.text(350, 330, "query i may use keys j ≤ i: “cat” sees “The” and itself, never “slept”",
           size=14, color=MUTED)
    return s


def heads_split_merge() -> Svg:
    s = Svg("heads_split_merge", 680, 628,
            "Splitting C into H heads of width D, and merging them again",
            "The split: Q = X W_Q has shape (B, T, C); view(B, T, H, D) cuts each token's C numbers "
            "into H rows of D, one (H, D) block per token (drawn: T = 3, C = 8, H = 4, D = 2); "
            "transpose(1, 2) swaps the token and head axes, giving (B, H, T, D): one (T, D) matrix "
            "per head, holding that head's rows of every token, and each head runs attention on "
            "its own. The merge runs the same steps backwards: the head outputs (B, H, T, D) are "
            "transposed back to (B, T, H, D), one (H, D) block per token again, reshaped to "
            "(B, T, C) so each token's head outputs sit side by side (concatenated), and "
            "multiplied by W_O (C, C), which mixes the heads.")
    T, H, D = 3, 4, 2
    cell = 16

    def shade_of(t, h, c, out=False):
        """The colour of head h's number c of token t (before or after attention)."""
        if out:
            return shade(HEADS[h], 0.45 + 0.12 * ((2 * t + c + h) % 3))
        return shade(HEADS[h], 0.55 + 0.1 * ((t + h * D + c) % 3))

    def per_token(x0, y0, out=False):
        """(B, T, H, D): one (H, D) block per token, a head per row."""
        for t in range(T):
            s.cells(x0 + t * 52, y0, [[shade_of(t, h, c, out) for c in range(D)] for h in range(H)],
                    cell=cell)
            s.text(x0 + t * 52 + cell, y0 + H * cell + 16, f"t{t}", size=12, color=MUTED)

    def per_head(x0, y0, out=False):
        """(B, H, T, D): one (T, D) matrix per head, a token per row."""
        for h in range(H):
            s.cells(x0 + h * 66, y0, [[shade_of(t, h, c, out) for c in range(D)] for t in range(T)],
                    cell=cell)
            s.text(x0 + h * 66 + cell, y0 + T * cell + 18, f"head {h}", size=12, color=MUTED)

    qs = COLORS["Q"][0]
    s.text(170, 34, "split", size=17, weight="bold")
    s.text(510, 34, "merge", size=17, weight="bold")
    # the split, top to bottom
    s.text(170, 64, "Q = X W_Q : (B, T, C)", size=15)
    s.cells(106, 76, [[shade_of(t, c // D, c % D) for c in range(H * D)] for t in range(T)], cell=cell)
    s.rect(104, 74, 132, 52, "none", qs, rx=3, width=2)
    for t in range(T):
        s.text(98, 89 + t * cell, f"t{t}", size=11, anchor="end", color=MUTED)
    s.arrow((170, 132), (170, 168))
    s.text(180, 155, "view(B, T, H, D)", size=14, anchor="start", color=MUTED)
    s.text(170, 190, "(B, T, H, D): a block per token", size=15)
    per_token(118, 202)
    s.arrow((170, 300), (170, 336))
    s.text(180, 316, "transpose(1, 2)", size=14, anchor="start", color=MUTED)
    s.text(180, 333, "swaps T and H", size=13, anchor="start", color=MUTED)
    s.text(170, 358, "(B, H, T, D): a matrix per head", size=15)
    per_head(50, 370)
    s.text(170, 474, "each head: softmax(Q K^T / √D) V", size=14)
    s.text(170, 494, "on its own (T, D) slice", size=14, color=MUTED)
    # the merge, the same steps backwards
    s.text(510, 64, "head outputs (B, H, T, D)", size=15)
    per_head(390, 76, out=True)
    s.arrow((510, 148), (510, 184))
    s.text(520, 164, "transpose(1, 2)", size=14, anchor="start", color=MUTED)
    s.text(520, 181, "back", size=13, anchor="start", color=MUTED)
    s.text(510, 206, "(B, T, H, D): a block per token", size=15)
    per_token(458, 218, out=True)
    s.arrow((510, 316), (510, 352))
    s.text(520, 339, "reshape(B, T, C)", size=14, anchor="start", color=MUTED)
    s.text(510, 374, "(B, T, C): heads side by side", size=15)
    s.cells(446, 384, [[shade_of(t, c // D, c % D, out=True) for c in range(H * D)] for t in range(T)],
            cell=cell)
    s.text(510, 452, "each token: [head 0 | head 1 | … | head H−1]", size=13, color=MUTED)
    s.arrow((510, 462), (510, 498))
    s.text(520, 485, "× W_O : (C, C)", size=14, anchor="start", color=MUTED)
    s.text(510, 520, "output (B, T, C)", size=15)
    s.cells(446, 530, [vector(40 + t, H * D, COLORS["X"][0]) for t in range(T)], cell=cell)
    s.text(510, 598, "W_O mixes the heads' results", size=14, color=MUTED)
    s.text(170, 560, "C = H · D: the split and the merge", size=15)
    s.text(170, 580, "move no number to another token", size=15)
    s.text(170, 600, "(the tempting view(B, H, T, D) would:", size=14, color=MUTED)
    s.text(170, 618, "see below)", size=14, color=MUTED)
    return s


def pre_post_norm() -> Svg:
    s = Svg("pre_post_norm", 680, 660,
            "Post-norm and pre-norm Transformer blocks side by side",
            "First, post-norm (the 2017 paper, BERT): attention, add the residual, then LayerNorm; "
            "FFN, add the residual, then LayerNorm; x becomes LN(x + f(x)), so the LayerNorms sit "
            "on the residual stream. Second, pre-norm (GPT-2 and most large models): LayerNorm, "
            "attention, add; LayerNorm, FFN, add; x becomes x + f(LN(x)); the residual stream "
            "bypasses every LayerNorm, and the model ends with one final LayerNorm.")

    def column(cx, pre: bool):
        stream = "#767676"
        y = 80
        s.text(cx, y - 8, "x : (B, T, C)", size=15)
        y += 4
        for sub, role in (("multi-head attention", "A"), ("feed-forward (FFN)", "F")):
            top = y
            if pre:
                s.arrow((cx, y), (cx, y + 26))
                s.box(cx, y + 28, 150, 36, "N", "LayerNorm", size=15)
                s.arrow((cx, y + 66), (cx, y + 86))
                s.box(cx, y + 88, 190, 44, role, sub, size=15)
                s.arrow((cx, y + 134), (cx, y + 160))
                plus_y = y + 176
            else:
                s.arrow((cx, y), (cx, y + 26))
                s.box(cx, y + 28, 190, 44, role, sub, size=15)
                s.arrow((cx, y + 74), (cx, y + 100))
                plus_y = y + 116
            # residual branch around the sublayer
            s.arrow((cx, top + 12), (cx + 120, top + 12), (cx + 120, plus_y), (cx + 18, plus_y),
                    color=stream, width=2.4)
            s.circle(cx, plus_y, 16, "#ffffff", INK, "+", size=20)
            y = plus_y + 16
            if not pre:
                s.arrow((cx, y), (cx, y + 20))
                s.box(cx, y + 22, 150, 36, "N", "LayerNorm", size=15)
                y += 58
        s.arrow((cx, y), (cx, y + 26))
        s.text(cx, y + 44, "x : (B, T, C)", size=15)
        return y + 44

    s.text(180, 36, "post-norm (2017, BERT)", size=17, weight="bold")
    s.text(510, 36, "pre-norm (GPT-2, most LLMs)", size=17, weight="bold")
    end_l = column(160, pre=False)
    end_r = column(490, pre=True)
    s.text(160, end_l + 34, "x ← LN(x + f(x))", size=17)
    s.text(160, end_l + 56, "LayerNorm on the residual stream", size=13, color=MUTED)
    s.text(490, end_r + 34, "x ← x + f(LN(x))", size=17)
    s.text(490, end_r + 56, "stream never normalised; one final", size=13, color=MUTED)
    s.text(490, end_r + 74, "LayerNorm after the last block", size=13, color=MUTED)
    s.parts.append(f'<line x1="340" y1="60" x2="340" y2="{max(end_l, end_r) + 70}" '
                   f'stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    legend(s, 40, 636, [(COLORS["A"][1], COLORS["A"][0], "attention"),
                        (COLORS["F"][1], COLORS["F"][0], "FFN"),
                        (COLORS["N"][1], COLORS["N"][0], "LayerNorm"),
                        ("#767676", "#767676", "residual stream")], size=13)
    return s


# encoder_decoder's two layouts, {field: (wide, narrow)}: the wide card puts the two layers side
# by side; the narrow one (a phone, 340 px) puts the encoder above the decoder, with K and V
# running down the right edge from the encoder output into cross-attention.
ENCODER_DECODER_LAYOUT = {
    "name": ("encoder_decoder", "encoder_decoder_narrow"),
    "size": ((680, 580), (340, 1010)),
    "enc": ((170, 36), (150, 30)),        # the encoder column: centre x, its heading's baseline
    "dec": ((480, 36), (150, 404)),       # the decoder column
    "dec_w": (230, 210),                  # the decoder's boxes (the encoder's are 210 wide)
    "head_gap": (34, 30),                 # heading -> the layer's input line
    "enc_arrows": ((30, 50, 44), (24, 28, 28)),          # into self-attention, FFN, output
    "dec_arrows": ((30, 50, 34, 32), (24, 48, 30, 30)),  # into masked, cross, FFN, output
    "read_gap": (32, 24),                 # encoder output's box -> the note under it
    "cross_h": (84, 100),
    "cross_note": (("Q from the decoder, K, V from", "the encoder: (B, H, T_q, T_k)"),
                   ("Q from the decoder,", "K, V from the encoder:", "(B, H, T_q, T_k)")),
    "kv_x": ((330, 345), (288, 308)),     # where the K and V lines run down
    "kv_in": ((44, 66), (34, 64)),        # where they enter cross-attention, below its top
    "kv_labels": (((300, 346, "middle"), (300, 392, "middle")),
                  ((278, 290, "end"), (316, 346, "start"))),
    "foot_x": (340, 170),
    "foot": (((506, "every sublayer: residual connection + LayerNorm (omitted here);"),
              (526, "each layer is repeated L times (L = 6 in the 2017 model);"),
              (546, "the final encoder output feeds every decoder layer")),
             ((872, "every sublayer: residual connection"), (892, "+ LayerNorm (omitted here);"),
              (918, "each layer is repeated L times"), (938, "(L = 6 in the 2017 model);"),
              (964, "the final encoder output feeds"), (984, "every decoder layer"))),
}


def encoder_decoder(narrow: bool = False) -> Svg:
    """The wide drawing, or (narrow) the one the phone layout shows whole."""
    L = _layout(ENCODER_DECODER_LAYOUT, narrow)
    s = Svg(L.name, *L.size,
            "An encoder layer and a decoder layer with cross-attention",
            "First, the encoder layer reads the source 'The cat sleeps .' (T_k tokens): "
            "self-attention with no causal mask, then the FFN; its output, (B, T_k, C), is the "
            "memory. Then the decoder layer reads the target so far (T_q tokens): masked (causal) "
            "self-attention, then cross-attention whose queries come from the decoder and whose "
            "keys and values come from the encoder output, with weights of shape (B, H, T_q, T_k), "
            "then the FFN. Every sublayer has a residual connection and a LayerNorm. Each layer "
            "is repeated L times; the final encoder output feeds every decoder layer.")

    def layer_input(x, y, heading, source, shape, arrow):
        """A layer's heading and input line, and the arrow down; returns its first box's top."""
        s.text(x, y, heading, size=17, weight="bold")
        s.text(x, y + L.head_gap, source, size=14)
        s.text(x, y + L.head_gap + 20, shape, size=14, color=MUTED)
        return down(x, y + L.head_gap + 28, arrow)

    def down(x, y, length):
        """An arrow down from y; returns the top of the box under it."""
        s.arrow((x, y), (x, y + length))
        return y + length + 2

    # encoder
    (le, top), (a1, a2, a3) = L.enc, L.enc_arrows
    y = layer_input(le, top, "encoder layer", "source “The cat sleeps .”", "(B, T_k, C)", a1)
    s.box(le, y, 210, 56, "A", "self-attention", "no mask: all T_k keys", size=16)
    y = down(le, y + 58, a2)
    s.box(le, y, 210, 44, "F", "FFN", size=16)
    memory = down(le, y + 46, a3)
    s.box(le, memory, 210, 56, "X", "encoder output", "memory (B, T_k, C)", size=16)
    s.text(le, memory + 56 + L.read_gap, "computed once per source sentence", size=13, color=MUTED)
    # decoder
    (rd, top), (a1, a2, a3, a4), w = L.dec, L.dec_arrows, L.dec_w
    y = layer_input(rd, top, "decoder layer", "target so far “<bos> Le chat”", "(B, T_q, C)", a1)
    s.box(rd, y, w, 56, "A", "masked self-attention", "causal: keys ≤ its position", size=16)
    cross = down(rd, y + 58, a2)
    s.text(rd - 8, cross - 14, "Q", size=17, anchor="end", color=COLORS["Q"][0], weight="bold")
    s.box(rd, cross, w, L.cross_h, "A", "", size=16)
    s.text(rd, cross + 24, "cross-attention", size=16)
    for i, line in enumerate(L.cross_note):
        s.text(rd, cross + 50 + 18 * i, line, size=13, color=MUTED)
    y = down(rd, cross + L.cross_h + 2, a3)
    s.box(rd, y, w, 44, "F", "FFN", size=16)
    y = down(rd, y + 46, a4)
    s.text(rd, y + 18, "decoder output (B, T_q, C)", size=14)
    # memory -> cross-attention: K and V leave the encoder output and enter cross-attention
    # from the side they run down on
    side = w // 2 + 2 if L.kv_x[0] > rd else -(w // 2 + 2)
    for role, dy, x, y_in in zip("KV", (20, 40), L.kv_x, L.kv_in):
        s.arrow((le + 105, memory + dy), (x, memory + dy), (x, cross + y_in),
                (rd + side, cross + y_in), color=COLORS[role][0], width=2.4)
    for role, (x, y, anchor) in zip("KV", L.kv_labels):
        s.text(x, y, role, size=17, color=COLORS[role][0], weight="bold", anchor=anchor)
    for y, line in L.foot:
        s.text(L.foot_x, y, line, size=14, color=MUTED)
    return s


def shifted_targets() -> Svg:
    window = list("aters cal")
    show = ["␣" if c == " " else c for c in window]
    x_in, y_tg = show[:-1], show[1:]
    T = len(x_in)
    s = Svg("shifted_targets", 640, 500,
            "Shifted targets next to the causal mask",
            "A window of T + 1 = 9 characters of Genesis, 'aters cal'. The inputs are its first 8 "
            "characters, the targets the same window shifted by one. In the causal mask, the row of "
            "position t may look at inputs 0 to t only, and its output must predict target t, the "
            "character at t + 1. One window thus holds 8 training examples, and no position sees "
            "its own answer.")
    cell = 30
    s.text(30, 40, "window of T + 1 = 9 tokens", size=15, anchor="start", weight="bold")
    for i, c in enumerate(show):
        s.rect(270 + i * cell, 20, cell, 30, "#ffffff", MUTED, rx=2, width=1)
        s.text(285 + i * cell, 41, c, size=16)
    s.text(30, 84, "inputs x = window[:-1]", size=14, anchor="start")
    s.text(30, 108, "targets y = window[1:]", size=14, anchor="start")
    for i in range(T):
        s.rect(270 + i * cell, 66, cell, 26, COLORS["X"][1], COLORS["X"][0], rx=2, width=1)
        s.text(285 + i * cell, 85, x_in[i], size=15)
        s.rect(300 + i * cell, 94, cell, 26, COLORS["P"][1], COLORS["P"][0], rx=2, width=1)
        s.text(315 + i * cell, 113, y_tg[i], size=15)
    # mask grid
    gx, gy = 150, 182
    s.text(gx + T * cell / 2, 150, "causal mask: key (input) position", size=14, color=MUTED)
    for j in range(T):
        s.text(gx + j * cell + 15, gy - 8, x_in[j], size=14)
    for t in range(T):
        s.text(gx - 10, gy + t * cell + 21, x_in[t], size=14, anchor="end")
        for j in range(T):
            ok = j <= t
            s.rect(gx + j * cell, gy + t * cell, cell, cell,
                   COLORS["A"][1] if ok else COLORS["M"][1], "#ffffff", rx=0, width=1.5)
        s.arrow((gx + T * cell + 8, gy + t * cell + 15), (gx + T * cell + 40, gy + t * cell + 15),
                color="#939393", width=1.2)
        s.rect(gx + T * cell + 44, gy + t * cell + 2, 28, 26, COLORS["P"][1], COLORS["P"][0],
               rx=2, width=1)
        s.text(gx + T * cell + 58, gy + t * cell + 21, y_tg[t], size=15)
    s.text(30, gy + 4 * cell, "query", size=14, anchor="start", color=MUTED)
    s.text(30, gy + 4 * cell + 18, "position t", size=14, anchor="start", color=MUTED)
    s.text(gx + T * cell + 58, gy - 8, "predict", size=13, color=MUTED)
    legend(s, 60, gy + T * cell + 36, [(COLORS["A"][1], COLORS["A"][0], "may look (j ≤ t)"),
                                       (COLORS["M"][1], COLORS["M"][0], "blocked (j > t)"),
                                       (COLORS["P"][1], COLORS["P"][0], "target y_t = x_{t+1}")],
           size=13)
    s.text(320, gy + T * cell + 70, "one window = T examples, trained in one forward pass",
           size=14, color=MUTED)
    return s


def kv_cache() -> Svg:
    prompt = ["A", "n", "d", "␣"]
    new = ["G", "o"]
    s = Svg("kv_cache", 680, 580,
            "The KV cache: prefill, then one token per decode step",
            "Prefill: the prompt's 4 tokens run at once; each layer computes their queries, keys "
            "and values and writes the 4 key rows and 4 value rows into the cache; the scores are "
            "4 by 4 with the causal mask. Decode step 1: only the new token G is fed; its key and "
            "value row are computed and appended (new), the 4 older rows are read from the cache, "
            "and its one query scores against 5 keys (1 by 5). Step 2: token o appends a sixth "
            "row and scores against 6 keys. Queries are used once and never stored.")
    cols = [(30, "prefill", prompt, 4), (260, "decode step 1", ["G"], 5),
            (470, "decode step 2", ["o"], 6)]
    cell = 22
    seq = prompt + new
    for x0, title, fed, total in cols:
        n_new = len(fed)
        s.text(x0 + 90, 36, title, size=16, weight="bold")
        s.text(x0, 64, "fed:", size=13, anchor="start", color=MUTED)
        for i, t in enumerate(fed):
            s.rect(x0 + 34 + i * 26, 48, 24, 24, COLORS["X"][1], COLORS["X"][0], rx=3, width=1)
            s.text(x0 + 46 + i * 26, 66, t, size=14)
        s.text(x0, 100, f"Q: {n_new} new row{'s' if n_new > 1 else ''}", size=13,
               anchor="start", color=COLORS["Q"][0])
        s.cells(x0 + 110, 86, [[COLORS["Q"][1]] * 4 for _ in range(n_new)], cell=cell / 1.4,
                stroke=COLORS["Q"][0])
        for k, role in enumerate(("K", "V")):
            y = 184 + k * 170
            s.text(x0, y - 10, f"{role} cache (rows = tokens)", size=13, anchor="start",
                   color=COLORS[role][0])
            for r in range(total):
                is_new = r >= total - n_new
                fill = shade(COLORS[role][0], 0.75) if is_new else COLORS[role][1]
                s.cells(x0 + 24, y + r * cell, [[fill] * 4], cell=cell, stroke=COLORS[role][0])
                s.text(x0 + 16, y + r * cell + 16, seq[r], size=12, anchor="end", color=MUTED)
                s.text(x0 + 24 + 4 * cell + 8, y + r * cell + 16,
                       "new" if is_new else "read", size=12, anchor="start",
                       color=INK if is_new else MUTED)
        shape = f"scores ({n_new}, {total})" if n_new > 1 else f"scores (1, {total})"
        s.text(x0 + 90, 508, shape, size=14)
        s.text(x0 + 90, 526, "causal" if n_new > 1 else "one query, all keys", size=12,
               color=MUTED)
    s.text(340, 562, "per layer: K and V caches of shape (B, H, T, D); queries are used once,"
           " never stored", size=13, color=MUTED)
    s.raw(f'<line x1="240" y1="20" x2="240" y2="530" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    s.raw(f'<line x1="455" y1="20" x2="455" y2="530" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    return s


def sentence_embedding() -> Svg:
    toks = ["[CLS]", "the", "cat", "slept", "[SEP]", "[PAD]"]
    s = Svg("sentence_embedding", 660, 450,
            "From token vectors to one sentence vector in all-MiniLM-L6-v2",
            "The tokens [CLS] the cat slept [SEP] and one [PAD] go through 6 post-norm encoder "
            "layers with 12 heads of width D = 32 (C = 384). The output is still one vector per "
            "token, (T, 384). Mean pooling averages the vectors of the real tokens (the padding is "
            "left out by the attention mask) and scales the result to length 1: one (384,) "
            "sentence vector. BERT's alternative takes the final [CLS] vector instead.")
    xs = [95 + i * 94 for i in range(6)]
    for x, t in zip(xs, toks):
        pad = t == "[PAD]"
        s.rect(x - 42, 24, 84, 30, "#eaeaea" if pad else "#ffffff", MUTED, rx=5, width=1.2)
        s.text(x, 45, t, size=14, color=MUTED if pad else INK)
        s.arrow((x, 56), (x, 80), color="#939393", width=1.2)
    s.box(330, 82, 580, 64, "A", "6 encoder layers (post-norm)",
          "12 heads of D = 32 each, C = 384", size=17)
    s.text(330, 170, "still one vector per token: (T, C) = (6, 384)", size=14, color=MUTED)
    for i, x in enumerate(xs):  # below the line above, so no arrow crosses it
        s.arrow((x, 180), (x, 210), color="#939393", width=1.2)
        fills = vector(60 + i, 6, COLORS["X"][0])
        if toks[i] == "[PAD]":
            fills = ["#f0f0f0"] * 6
        s.cells(x - 8, 214, [[f] for f in fills], cell=16)
    s.text(xs[5], 330, "left out", size=13, color=MUTED)
    s.text(xs[5], 346, "(mask 0)", size=13, color=MUTED)
    for i, x in enumerate(xs[:5]):
        s.arrow((x, 314), (250 + i * 50, 360), color="#939393", width=1.1)
    s.rect(200, 362, 300, 48, COLORS["X"][1], COLORS["X"][0], rx=8, width=2)
    s.text(350, 384, "mean over real tokens, ÷ length", size=15)
    s.text(350, 402, "sentence vector (384,), length 1", size=13, color=MUTED)
    s.text(30, 434, "alternative (BERT classification): take the final [CLS] vector",
           size=13, anchor="start", color=MUTED)
    return s


# ------------------------------------------------------------------ chapters 9, 11, 12, 15 and 16
def teacher_forcing_cross() -> Svg:
    src = list("30 Nov 2026")
    reads = ["<bos>"] + list("2026-11-30")
    writes = list("2026-11-30") + ["<eos>"]
    s = Svg("teacher_forcing_cross", 720, 676,
            "Teacher forcing and cross-attention for '30 Nov 2026' to '2026-11-30'",
            "The source '30 Nov 2026', S = 11 characters, goes through the encoder (bidirectional "
            "self-attention, no mask); its output, the memory, has shape (B, S, C). The decoder "
            "reads the target shifted right behind the start token bos: bos 2 0 2 6 - 1 1 - 3 0, "
            "and row t is scored against target token t: 2 0 2 6 - 1 1 - 3 0 eos (the end "
            "token), so row t reads token t - 1 "
            "and writes token t, and all T = 11 rows train in one pass. In every decoder layer, "
            "cross-attention takes its queries from the decoder, (B, T, C), and its keys and "
            "values from the encoder's memory, (B, S, C); its weights have shape (B, H, T, S), "
            "one row per target position and one column per source character, with no causal "
            "mask.")
    cell, x0 = 40, 240
    xs = [x0 + i * cell for i in range(11)]

    def row(y, toks, role, special=()):
        stroke, fill = COLORS[role]
        for x, t in zip(xs, toks):
            s.rect(x, y, cell - 2, 30, fill if t not in special else "#ffffff", stroke, rx=3,
                   width=1.2)
            s.text(x + cell / 2 - 1, y + 20, "␣" if t == " " else t,
                   size=10 if len(t) > 1 else 16)  # "<bos>" inside its box

    s.text(20, 46, "source “30 Nov 2026”", size=15, anchor="start", weight="bold")
    s.text(20, 66, "S = 11 characters", size=13, anchor="start", color=MUTED)
    row(38, src, "X")
    s.arrow((460, 70), (460, 92))
    s.box(460, 94, 440, 56, "A", "encoder: self-attention with no mask, FFN",
          "memory (B, S, C) = (1, 11, 32)", size=15)
    s.text(20, 186, "decoder row t", size=13, anchor="start", color=MUTED)
    for t, x in enumerate(xs):
        s.text(x + cell / 2 - 1, 186, str(t), size=12, color=MUTED)
    s.text(20, 214, "reads (input):", size=15, anchor="start", weight="bold")
    s.text(20, 232, "target shifted right", size=13, anchor="start", color=MUTED)
    row(196, reads, "X", special=("<bos>",))
    for t in range(10):          # target t is the input of row t + 1
        s.arrow((xs[t] + cell / 2 - 1, 256), (xs[t + 1] + cell / 2 - 1, 230),
                color="#939393", width=1.1, head=False)
    s.text(20, 274, "writes (target):", size=15, anchor="start", weight="bold")
    s.text(20, 292, "scored, cross-entropy", size=13, anchor="start", color=MUTED)
    row(256, writes, "P", special=("<eos>",))
    s.text(360, 318, "row t reads token t − 1 and writes token t: all T = 11 rows train in "
           "one pass", size=14, color=MUTED)
    # cross-attention
    s.raw(f'<line x1="20" y1="336" x2="700" y2="336" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    s.text(20, 364, "cross-attention, in every decoder layer", size=15, anchor="start",
           weight="bold")
    for k, (role, lab, shape) in enumerate((
            ("Q", "Q from the decoder", "(B, T, C) → (B, H, T, D)"),
            ("K", "K from the memory", "(B, S, C) → (B, H, S, D)"),
            ("V", "V from the memory", "(B, S, C) → (B, H, S, D)"))):
        s.box(130, 384 + k * 76, 220, 58, role, lab, shape, size=15)
    gx, gy, gc = 350, 410, 15
    s.text(gx + 5.5 * gc, 380, "weights (B, H, T, S)", size=14)
    s.text(gx + 5.5 * gc, 398, "= (1, 4, 11, 11)", size=13, color=MUTED)
    # where the task points: the source character each output copies, or the month letters
    # (a schematic, not measured; the chapter measures where the trained model looks)
    hot = {(t, 7 + t) for t in range(4)} | {(5, j) for j in (3, 4, 5)} | \
          {(6, j) for j in (3, 4, 5)} | {(8, 0), (9, 1)}
    fills = [[shade(COLORS["A"][0], 0.85 if (t, j) in hot else 0.18) for j in range(11)]
             for t in range(11)]
    s.cells(gx, gy, fills, cell=gc, stroke="#ffffff")
    for t in range(11):
        label = f"{reads[t] if t else 'bos'}→{writes[t] if t < 10 else 'eos'}"
        s.text(gx - 5, gy + t * gc + 12, label, size=11, anchor="end", color=MUTED)
    for j in range(11):
        s.text(gx + j * gc + gc / 2, gy + 11 * gc + 14, "␣" if src[j] == " " else src[j],
               size=11, color=MUTED)
    s.arrow((240, 413), (gx - 40, 436), color=COLORS["Q"][0], width=2)
    s.arrow((240, 489), (gx - 40, 500), color=COLORS["K"][0], width=2)
    s.text(gx + 5.5 * gc, gy + 11 * gc + 32, "rows: reads→writes, T = 11; columns: S = 11",
           size=12, color=MUTED)
    notes = ["no causal mask: every row", "may read the whole source", "",
             "strong pink: where the task", "points: a schematic,", "not a measurement"]
    for i, n in enumerate(notes):
        s.text(528, 430 + i * 20, n, size=13, anchor="start", color=MUTED)
    s.text(360, 632, "output A V: (B, H, T, D) → concatenated heads (B, T, C), one row per "
           "target position", size=14)
    s.text(360, 656, "queries: one per target row; keys and values: one per source character",
           size=14, color=MUTED)
    return s


def _arc(s: Svg, cx, cy, r, a0, a1, color, width=1.6, head=True):
    """An arc of radius r from angle a0 to a1 (radians, counter-clockwise on screen)."""
    x0, y0 = cx + r * math.cos(a0), cy - r * math.sin(a0)
    x1, y1 = cx + r * math.cos(a1), cy - r * math.sin(a1)
    large = 1 if (a1 - a0) % (2 * math.pi) > math.pi else 0
    mk = ' marker-end="url(#arrow)"' if head else ""
    s.raw(f'<path d="M{x0:.1f},{y0:.1f} A{r},{r} 0 {large} 0 {x1:.1f},{y1:.1f}" fill="none"'
          f' stroke="{color}" stroke-width="{width}"{mk}/>')


def rope_rotation() -> Svg:
    q, k, theta = (1.0, 2.0), (-0.5, 1.5), 0.3      # chapter 11's pair and speed
    s = Svg("rope_rotation", 700, 664,
            "RoPE: one pair rotated by m theta and n theta; d coordinates in d/2 pairs",
            "Top: one pair of a query, q = (1, 2), and the same pair of a key, k = (-0.5, 1.5), "
            "with theta = 0.3. First, the query sits at position m = 3 and is rotated by 3 theta, "
            "the key at n = 1 and is rotated by 1 theta. Then both move 7 positions on, to 10 "
            "and 8: both turn further, but the angle between them is the same, so the score "
            "R(m theta) q . R(n theta) k is the same, 3.47: it depends only on (m - n) theta. "
            "Bottom: a head of d = 8 coordinates forms d/2 = 4 pairs (x_i, x_{i+d/2}), the "
            "rotate-half pairing; pair i turns by theta_i = base^(-2i/d) per position, which for "
            "base 10000 and d = 8 is 1, 0.1, 0.01 and 0.001 radians, periods of about 6, 63, 628 "
            "and 6283 tokens. Only queries and keys are rotated, never values.")
    unit = 46

    def plane(cx, cy, m, n):
        s.raw(f'<line x1="{cx - 120}" y1="{cy}" x2="{cx + 120}" y2="{cy}" stroke="{CARD_EDGE}"'
              f' stroke-width="1.2"/>')
        s.raw(f'<line x1="{cx}" y1="{cy - 120}" x2="{cx}" y2="{cy + 120}" stroke="{CARD_EDGE}"'
              f' stroke-width="1.2"/>')
        s.text(cx, 44, f"query at m = {m}, key at n = {n}", size=15, weight="bold")
        # the angle between the rotated pair (about 11 degrees): a wedge drawn first, under
        # the arrows, and small enough that the rotation arcs (outside it) keep their heads
        # clear of it; near-opaque and outlined, so that so thin a wedge still shows
        rot = {"Q": math.atan2(q[1], q[0]) + m * theta,
               "K": math.atan2(k[1], k[0]) + n * theta}
        a0, a1, r = min(rot.values()), max(rot.values()), 48
        s.raw(f'<path d="M{cx},{cy} L{cx + r * math.cos(a0):.1f},{cy - r * math.sin(a0):.1f}'
              f' A{r},{r} 0 0 0 {cx + r * math.cos(a1):.1f},{cy - r * math.sin(a1):.1f} Z"'
              f' fill="{COLORS["A"][0]}" fill-opacity="0.9" stroke="{COLORS["A"][0]}"'
              f' stroke-width="1.5" stroke-linejoin="round"/>')
        out = {}
        for vec, pos, role, r_arc in ((q, m, "Q", 80), (k, n, "K", 60)):
            a0 = math.atan2(vec[1], vec[0])
            a1 = a0 + pos * theta
            length = math.hypot(*vec) * unit
            color = COLORS[role][0]
            s.arrow((cx, cy), (cx + length * math.cos(a0), cy - length * math.sin(a0)),
                    color=shade(color, 0.45), width=1.4, dash="4 3")
            _arc(s, cx, cy, r_arc, a0, a1, color, width=1.4)
            tip = (cx + length * math.cos(a1), cy - length * math.sin(a1))
            s.arrow((cx, cy), tip, color=color, width=2.6)
            out[role] = (a1, tip)
        aq, tq = out["Q"]
        ak, tk = out["K"]
        # each label beside its tip, on the side away from the other vector
        for role, a, other, tip, pos, name in (("Q", aq, ak, tq, m, "q"),
                                               ("K", ak, aq, tk, n, "k")):
            side = a + (math.pi / 2 if a > other else -math.pi / 2)
            x = tip[0] + 10 * math.cos(a) + 12 * math.cos(side)
            y = tip[1] - 10 * math.sin(a) - 12 * math.sin(side)
            s.text(x, y + 5, f"R({pos}θ) {name}", size=14, color=COLORS[role][0],
                   weight="bold", anchor="end" if math.cos(side) < 0 else "start",
                   halo=True)
        rq = (math.hypot(*q) * math.cos(aq), math.hypot(*q) * math.sin(aq))
        rk = (math.hypot(*k) * math.cos(ak), math.hypot(*k) * math.sin(ak))
        score = rq[0] * rk[0] + rq[1] * rk[1]
        s.text(cx, cy + 146, f"score = {score:.2f}", size=15)
        return score

    s1 = plane(180, 190, 3, 1)
    s2 = plane(520, 190, 10, 8)
    assert abs(s1 - s2) < 1e-9
    s.text(350, 372, "(R(mθ) q) · (R(nθ) k) = q · R((n − m)θ) k: only the offset m − n = 2 "
           "counts", size=15)
    # the first legend item is a dashed line, as the unrotated q and k are drawn
    first = "dashed: q, k before rotation"
    s.arrow((110, 396), (126, 396), color=MUTED, width=1.6, dash="4 3", head=False)
    s.text(132, 401, first, size=13, anchor="start", color=INK)
    legend(s, 110 + 36 + len(first) * 13 * 0.62, 400,
           [(COLORS["A"][0], COLORS["A"][0], "the angle that sets the score")], size=13)
    s.raw(f'<line x1="20" y1="420" x2="680" y2="420" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    # pairs
    s.text(20, 448, "one head, d = 8: pair i = (x_i, x_{i+d/2})", size=15, anchor="start",
           weight="bold")
    cx0, cw = 380, 36
    for c in range(8):
        i = c % 4
        s.rect(cx0 + c * cw, 480, cw - 2, 30, shade(HEADS[i], 0.45), MUTED, rx=3, width=1)
        s.text(cx0 + c * cw + cw / 2 - 1, 500, f"x_{c}", size=13)
    for i in range(4):
        a, b = cx0 + i * cw + cw / 2 - 1, cx0 + (i + 4) * cw + cw / 2 - 1
        top = 474 - i * 6
        s.arrow((a, 478), (a, top), (b, top), (b, 478), color=HEADS[i] if i != 3 else "#b8a800",
                width=1.6, head=False)
    s.text(20, 470, "rotate-half: coordinate i turns", size=13, anchor="start", color=MUTED)
    s.text(20, 488, "with coordinate i + d/2", size=13, anchor="start", color=MUTED)
    s.text(20, 506, "(attnlib, GPT-NeoX, HF's Llama)", size=13, anchor="start", color=MUTED)
    heads = [(50, "pair i"), (170, "θ_i = base^{−2i/d}"), (330, "turn per position"),
             (500, "one full turn every")]
    for x, h in heads:
        s.text(x, 542, h, size=13, color=MUTED, anchor="start")
    for i in range(4):
        th = 10000 ** (-2 * i / 8)
        y = 562 + i * 18
        s.rect(30, y - 11, 12, 12, shade(HEADS[i], 0.45), MUTED, rx=2, width=1)
        s.text(50, y, str(i), size=13, anchor="start")
        s.text(170, y, f"10000^{{−{2 * i}/8}} = {th:g}", size=13, anchor="start")
        s.text(330, y, f"{th:g} rad", size=13, anchor="start")
        s.text(500, y, f"{2 * math.pi / th:,.0f} tokens", size=13, anchor="start")
    s.text(350, 648, "base = 10000; values V are never rotated", size=13, color=MUTED)
    return s


def gqa_heads() -> Svg:
    H = 4
    s = Svg("gqa_heads", 700, 470,
            "Multi-head, grouped-query and multi-query attention: query heads share key/value "
            "heads",
            "One attention layer three ways, each with H = 4 query heads. Multi-head attention: "
            "G = 4 key/value heads, one per query head. Grouped-query attention: G = 2, query "
            "heads 0 and 1 read key/value head 0, heads 2 and 3 read key/value head 1 (head h "
            "reads h // (H/G)). "
            "Multi-query attention: G = 1, all four query heads read the one key/value head. The "
            "KV cache stores only the key/value heads: 2 x L x B x t x G x D x bytes per number, "
            "so it shrinks by H/G: 1, 1/2 and 1/4 of multi-head attention. Example: Llama-3-8B "
            "at 8,192 tokens in 16-bit, 4 GiB with 32 key/value heads, 1 GiB with its G = 8.")
    cols = [(120, "multi-head (MHA)", 4), (350, "grouped-query (GQA)", 2),
            (580, "multi-query (MQA)", 1)]
    qs, qf = COLORS["Q"]
    for cx, title, G in cols:
        s.text(cx, 40, title, size=16, weight="bold")
        s.text(cx, 60, f"H = {H} query heads, G = {G}", size=13, color=MUTED)
        qx = [cx - 75 + h * 50 for h in range(H)]
        for h, x in enumerate(qx):
            s.rect(x - 18, 80, 36, 32, qf, qs, rx=5, width=1.8)
            s.text(x, 101, f"q_{h}", size=14)
        gx = [cx + (g - (G - 1) / 2) * 56 for g in range(G)]
        for h, x in enumerate(qx):
            g = h // (H // G)
            s.arrow((x, 113), (gx[g], 170), color="#939393", width=1.3, head=False)
        for g, x in enumerate(gx):
            for k, role in enumerate("KV"):
                st, fl = COLORS[role]
                s.rect(x - 24 + k * 25, 172, 23, 44, fl, st, rx=4, width=1.8)
                s.text(x - 12.5 + k * 25, 199, role, size=14)
            s.text(x, 236, f"head {g}", size=12, color=MUTED)
        # the cache, as a bar whose length is G
        s.text(cx, 272, "KV cache", size=14)
        for g in range(G):
            s.rect(cx - 100 + g * 50, 282, 24, 22, COLORS["K"][1], COLORS["K"][0], rx=2, width=1)
            s.rect(cx - 76 + g * 50, 282, 24, 22, COLORS["V"][1], COLORS["V"][0], rx=2, width=1)
        frac = {4: "1", 2: "1/2", 1: "1/4"}[G]
        s.text(cx, 328, f"× {frac} of MHA (H/G = {H // G})", size=13, color=MUTED)
    s.raw(f'<line x1="235" y1="24" x2="235" y2="336" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    s.raw(f'<line x1="465" y1="24" x2="465" y2="336" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    s.text(350, 372, "cache bytes = 2 · L · B · t · G · D · bytes per number", size=17)
    s.text(350, 396, "2: keys and values; L layers, B sequences, t tokens, G key/value heads "
           "of width D", size=13, color=MUTED)
    s.text(350, 426, "query head h reads key/value head h // (H/G); the model keeps H attention "
           "patterns", size=13, color=MUTED)
    s.text(350, 450, "Llama-3-8B, 8,192 tokens, 16-bit: 4 GiB with G = H = 32, 1 GiB with its "
           "G = 8", size=13, color=MUTED)
    return s


# smollm2_block's two layouts, {field: (wide, narrow)}: the narrow one (a phone, 340 px) has the
# same parts, its projections stacked, its labels 1 px smaller and its short arrows 2 px shorter.
SMOLLM2_BLOCK_LAYOUT = {
    "name": ("smollm2_block", "smollm2_block_narrow"),
    "width": (700, 340),
    "cx": (300, 172),                     # the column's centre
    "ids_y": (34, 22),                    # the first line, "token ids (B, T)"
    "size": (15, 14),                     # the main labels' font size
    "tight": (0, 2),                      # px the short arrows and gaps lose
    "big_box": ((260, 46), (230, 40)),    # the embedding and the LM head
    "norm_box": ((150, 32), (140, 30)),
    "frame": ((60, 620), (34, 334)),      # the dashed "× 30" frame's left and right
    "frame_label": (((72, 24, "× 30 layers", 16),),
                    ((44, 22, "× 30", 15), (44, 38, "layers", 13))),  # x, dy, text, size
    "stream_x": (570, 318),               # the residual stream's way round each sublayer
    "split_titles": (False, True),        # "(chapter N)" on a line of its own
    "attn_box": ((460, 206), (260, 262)),
    "proj": ((150, 140, 66, 34), (84, 78, 62, 46)),  # spacing, width, height, top
    "proj_text": ((20, 39, 57), (18, 36, 53)),        # its three lines, below its top
    "heads": (" × 64", ""),               # after "9 heads": the head width, or not
    "rope_w": (88, 68),
    "no_rope": ("no RoPE on V", "no RoPE"),
    "attn_lines": (((162, "softmax(Q K^T/√64 + causal mask) V, per head;", INK),
                    (179, "query heads 3g, 3g+1, 3g+2 read key/value head g", MUTED),
                    (198, "o\\_proj 576 → 576", INK)),
                   ((166, "heads of width 64", MUTED), (183, "softmax(Q K^T/√64 + causal", INK),
                    (200, "mask) V, per head;", INK), (217, "query heads 3g, 3g+1, 3g+2", MUTED),
                    (234, "read key/value head g", MUTED), (251, "o\\_proj 576 → 576", INK))),
    "ffn_box": ((460, 112), (260, 146)),
    "ffn_proj": ((((-205, 34), (5, 34)), (200, 28)),  # gate and up: (left, top) each; size
                 (((-100, 46), (-100, 78)), (200, 26))),
    "ffn_lines": ((82, 102), (122, 139)),  # SiLU(gate) ⊙ up, down_proj
    "tie_x": ((30, 44), (10, 22)),        # the tie's line, its label
    "legend": ((470, 40), (30, 176)),     # below the frame
    "notes": (((470, 70, "start", "no biases; RMSNorm:"),
               (470, 86, "start", "a scale, no centring")),
              ((172, 200, "middle", "no biases; RMSNorm: a scale, no centring"),)),
    "foot": (170, 212),                   # the card's bottom, below the frame
}


def smollm2_block(narrow: bool = False) -> Svg:
    """The wide drawing, or (narrow) the one the phone layout shows whole."""
    L = _layout(SMOLLM2_BLOCK_LAYOUT, narrow)
    s = Svg(L.name, L.width, 0,
            "One SmolLM2-135M decoder block, repeated 30 times",
            "Token ids (B, T) select rows of the embedding matrix E (49152, 576), giving x of "
            "shape (B, T, 576). Each of the 30 blocks is pre-norm: RMSNorm, then grouped-query "
            "attention with 9 query heads and 3 key/value heads of width 64 (q_proj 576 to 576, "
            "k_proj and v_proj 576 to 192, RoPE applied to Q and K, each key/value head shared by "
            "3 query heads, o_proj 576 to 576), added to the residual stream; then RMSNorm and a "
            "SwiGLU feed-forward network (gate_proj and up_proj 576 to 1536, SiLU(gate) times up, "
            "down_proj 1536 to 576), added to the residual stream. After the last block a final "
            "RMSNorm and the LM head, which is the embedding matrix E itself (tied), give logits "
            "(B, T, 49152). No projection has a bias.")
    cx, stream, size, tight = L.cx, "#767676", L.size, L.tight
    (bw, bh), (nw, nh) = L.big_box, L.norm_box
    ids = L.ids_y
    s.text(cx, ids, "token ids (B, T)", size=size)
    s.arrow((cx, ids + 8 - tight), (cx, ids + 28 - 2 * tight))
    emb = ids + 30 - 2 * tight
    s.box(cx, emb, bw, bh, "X", "embedding E: (49152, 576)", size=size)
    s.arrow((cx, emb + bh + 2), (cx, emb + bh + 30))
    s.text(cx + 10 - tight, emb + bh + 22, "x : (B, T, C), C = 576", size=size - 1,
           anchor="start", color=MUTED)
    top = emb + bh + 36

    def sublayer(y, draw, height):
        """Norm, the sublayer (drawn by draw(y0)), and the residual add; returns the next y."""
        s.arrow((cx, y), (cx, y + 20 - tight))
        s.box(cx, y + 22 - tight, nw, nh, "N", "RMSNorm", size=14)
        body = y + nh + 42 - 2 * tight
        s.arrow((cx, y + nh + 24 - tight), (cx, body - 2))
        draw(body)
        plus = body + height + 26 - tight
        s.arrow((cx, body + height), (cx, plus - 16))
        s.arrow((cx, y + 8), (L.stream_x, y + 8), (L.stream_x, plus), (cx + 18, plus),
                color=stream, width=2.4)
        s.circle(cx, plus, 16, "#ffffff", INK, "+", size=20)
        return plus + 16

    def title(y, name, chapter):
        """A sublayer's bold title, its chapter on the same line or (split_titles) under it."""
        if L.split_titles:
            s.text(cx, y + 22 - tight, name, size=size, weight="bold")
            s.text(cx, y + 37, f"({chapter})", size=12, color=MUTED)
        else:
            s.text(cx, y + 22 - tight, f"{name} ({chapter})", size=size, weight="bold")

    def attention(y):
        w, h = L.attn_box
        s.rect(cx - w // 2, y, w, h, COLORS["A"][1], COLORS["A"][0], rx=8, width=2)
        title(y, "grouped-query attention", "chapter 12")
        step, pw, ph, pt = L.proj
        for i, (role, lab, io, heads) in enumerate((("Q", "q\\_proj", "576 → 576", 9),
                                                     ("K", "k\\_proj", "576 → 192", 3),
                                                     ("V", "v\\_proj", "576 → 192", 3))):
            bx = cx - step + i * step
            s.rect(bx - pw // 2, y + pt, pw, ph, COLORS[role][1], COLORS[role][0], rx=8, width=2)
            for dy, line, lsize, color in zip(L.proj_text, (lab, io, f"{heads} heads{L.heads}"),
                                              (size - 1, size - 2, size - 2), (INK, MUTED, MUTED)):
                s.text(bx, y + dy + pt, line, size=lsize, color=color)
        rope = y + pt + ph + 16
        for i in range(2):
            bx = cx - step + i * step
            s.arrow((bx, rope - 14), (bx, rope - 2))
            s.rect(bx - L.rope_w // 2, rope, L.rope_w, 22, COLORS["P"][1], COLORS["P"][0], rx=11,
                   width=1.5)
            s.text(bx, rope + 16, "RoPE", size=size - 2)
        s.text(cx + step, rope + 16, L.no_rope, size=12, color=MUTED)
        for dy, line, color in L.attn_lines:
            s.text(cx, y + dy, line, size=13, color=color)

    def ffn(y):
        w, h = L.ffn_box
        s.rect(cx - w // 2, y, w, h, COLORS["F"][1], COLORS["F"][0], rx=8, width=2)
        title(y, "SwiGLU feed-forward", "chapter 7")
        places, (pw, ph) = L.ffn_proj
        for (dx, dy), lab in zip(places, ("gate\\_proj 576 → 1536", "up\\_proj 576 → 1536")):
            s.rect(cx + dx, y + dy, pw, ph, "#ffffff", COLORS["F"][0], rx=5, width=1.5)
            s.text(cx + dx + pw // 2, y + dy + ph // 2 + 5, lab, size=13)
        for dy, line in zip(L.ffn_lines, ("SiLU(gate) ⊙ up : (B, T, 1536)",
                                          "down\\_proj 1536 → 576")):
            s.text(cx, y + dy, line, size=13)

    y = sublayer(top + 4, attention, L.attn_box[1])
    y = sublayer(y, ffn, L.ffn_box[1])
    bottom = y + 10
    left, right = L.frame
    s.rect(left, top, right - left, bottom - top, "none", MUTED, rx=12, width=1.5, dash="6 4")
    for x, dy, line, lsize in L.frame_label:
        s.text(x, top + dy, line, size=lsize, anchor="start", weight="bold")
    s.arrow((cx, y), (cx, bottom + 16))
    s.box(cx, bottom + 18, nw, nh, "N", "final RMSNorm", size=14)
    head = bottom + nh + 40 - tight
    s.arrow((cx, bottom + nh + 20), (cx, head - 2))
    s.box(cx, head, bw, bh, "X", "LM head = E^T (tied)", size=size)
    s.arrow((cx, head + bh + 2), (cx, head + bh + 18))
    s.text(cx, head + bh + 36, "logits (B, T, 49152)", size=size)
    # the tie: the same matrix at both ends
    line_x, label_x = L.tie_x
    s.arrow((cx - bw // 2, emb + bh // 2), (line_x, emb + bh // 2),
            (line_x, head + bh // 2), (cx - bw // 2 - 2, head + bh // 2),
            color=COLORS["X"][0], width=1.6, dash="5 4")
    mid = (emb + bh // 2 + bottom) / 2
    s.raw(f'<text x="{label_x}" y="{mid}" font-size="12" text-anchor="middle" fill="{MUTED}"'
          f' transform="rotate(-90 {label_x} {mid})">the same matrix E (tied weights)</text>')
    legend(s, L.legend[0], bottom + L.legend[1], [("#767676", "#767676", "residual stream")],
           size=12)
    for x, dy, anchor, line in L.notes:
        s.text(x, bottom + dy, line, size=12, anchor=anchor, color=MUTED)
    s.h = round(bottom + L.foot)
    return s


def mask_polarity() -> Svg:
    toks = list("abcde")
    T, cell = 5, 30
    s = Svg("mask_polarity", 730, 420,
            "One bool mask, two meanings: SDPA's True = may attend, nn.MultiheadAttention's "
            "True = blocked",
            "Middle: the tensor causal_mask(5) for tokens a to e, True on and below the diagonal. "
            "Left, read by F.scaled_dot_product_attention or attnlib, where True means may attend: "
            "each query sees itself and the tokens before it. Right, the same tensor passed as "
            "attn_mask to nn.MultiheadAttention, where True means blocked: each query sees only "
            "the tokens after it, and the last query, e, has no key left, so its output is NaN. "
            "attnlib.to_nn_mha(mask), which is the negation ~mask, converts one convention to the "
            "other.")
    blocked = COLORS["M"][1]
    panels = [(40, "read by SDPA and attnlib", "True = may attend", "sdpa"),
              (290, "causal\\_mask(5)", "one torch.bool tensor", "tensor"),
              (525, "read by nn.MultiheadAttention", "attn\\_mask: True = blocked", "mha")]
    top = 100
    for x0, title, sub, kind in panels:
        cx = x0 + T * cell / 2
        s.text(cx, 36, title, size=14, weight="bold")
        s.text(cx, 56, sub, size=13, color=MUTED)
        for j, w in enumerate(toks):
            s.text(x0 + j * cell + cell / 2, top - 8, w, size=12, color=MUTED)
            s.text(x0 - 8, top + j * cell + 20, w, size=12, anchor="end", color=MUTED)
        for i in range(T):
            for j in range(T):
                true = j <= i
                if kind == "tensor":
                    fill, label = "#ffffff", "T" if true else "F"
                else:
                    may = true if kind == "sdpa" else not true
                    fill, label = ("#ffffff" if may else blocked), ""
                s.rect(x0 + j * cell, top + i * cell, cell, cell, fill, MUTED, rx=0, width=1)
                if label:
                    s.text(x0 + j * cell + cell / 2, top + i * cell + 20, label, size=14,
                           weight="bold" if true else "normal",
                           color=INK if true else MUTED)
    s.arrow((268, top + 75), (204, top + 75))
    s.arrow((450, top + 75), (502, top + 75))
    s.text(40 + 2.5 * cell, top + 5 * cell + 24, "each query: itself and earlier", size=12,
           color=MUTED)
    s.text(525 + 2.5 * cell, top + 5 * cell + 24, "each query: only later keys", size=12,
           color=MUTED)
    s.text(525 + 5 * cell + 6, top + 4 * cell + 20, "NaN", size=14, anchor="start",
           color=COLORS["K"][0], weight="bold")
    s.text(365, top + 5 * cell + 24, "rows: queries; columns: keys", size=12, color=MUTED)
    s.text(365, 318, "the same tensor, opposite masks: row e is all blocked, so softmax gives NaN",
           size=14)
    s.text(365, 346, "convert with attnlib.to\\_nn\\_mha(mask), that is ~mask, before "
           "nn.MultiheadAttention", size=14, color=MUTED)
    legend(s, 200, 390, [("#ffffff", MUTED, "may attend"),
                         (blocked, MUTED, "blocked (weight 0)")], size=13)
    return s


def tiled_softmax() -> Svg:
    tiles = [[0.5, 1.2, -0.3, 0.8], [2.0, 0.1, 1.1, -0.6], [0.9, 1.7, 0.2, 0.4]]
    s = Svg("tiled_softmax", 700, 470,
            "The online softmax over key tiles: a running maximum and a running sum",
            "One query's 12 scores are visited in three tiles of 4 keys, each tile with its own "
            "keys K_j and values V_j. After each tile the query keeps three things: the largest "
            "score so far m, the sum of exponentials so far l (relative to m) and the "
            "unnormalised output o. Tile 1 gives m = 1.2; tile 2 holds a larger score, 2.0, so "
            "the old l and o are rescaled by e^(m - m') before the tile's own terms are added; "
            "tile 3 changes nothing in m. After the last tile l is exactly the softmax "
            "denominator and the output is o / l, the same as softmax over the whole row. Only "
            "one tile of scores is held at a time: a tile of B_q queries by B_k keys, never "
            "the T x T matrix.")
    cell, xs = 34, [58, 282, 506]
    m, l = -math.inf, 0.0
    states = []
    for t in tiles:
        m_new = max(m, max(t))
        l = (math.exp(m - m_new) * l if l else 0.0) + sum(math.exp(v - m_new) for v in t)
        states.append((m_new, l, m_new > m and m != -math.inf))
        m = m_new
    full = sum(math.exp(v - m) for t in tiles for v in t)
    assert abs(full - l) < 1e-12
    s.text(350, 34, "one query row: T = 12 scores, visited in tiles of 4 keys", size=16,
           weight="bold")
    for j, (x0, t, (mj, lj, rescaled)) in enumerate(zip(xs, tiles, states)):
        cx = x0 + 2 * cell
        s.text(cx, 66, f"tile {j + 1}: reads K_{j + 1}, V_{j + 1}", size=14)
        s.rect(x0, 76, 4 * cell, 8, COLORS["K"][1], COLORS["K"][0], rx=2, width=1)
        s.rect(x0, 86, 4 * cell, 8, COLORS["V"][1], COLORS["V"][0], rx=2, width=1)
        if j == 0:
            s.text(x0 - 5, 84, "K", size=10, anchor="end", color=COLORS["K"][0])
            s.text(x0 - 5, 94, "V", size=10, anchor="end", color=COLORS["V"][0])
        for i, v in enumerate(t):
            big = v == max(t)
            s.rect(x0 + i * cell, 100, cell, 32, shade(COLORS["A"][0], 0.2 + 0.25 * (v + 0.6)),
                   "#ffffff", rx=0, width=1.5)
            s.text(x0 + i * cell + cell / 2, 121, f"{v:.1f}", size=13,
                   weight="bold" if big else "normal")
        s.text(cx, 150, "scores S_j = q K_j^T/√d", size=12, color=MUTED)
        s.arrow((cx, 158), (cx, 180))
        s.rect(x0 - 6, 182, 4 * cell + 12, 94, "#f7f7f7", MUTED, rx=8, width=1.5)
        s.text(cx, 206, f"m = {mj:.1f}", size=15, weight="bold" if rescaled else "normal")
        s.text(cx, 230, f"ℓ = {lj:.2f}", size=15)
        s.text(cx, 254, "o = Σ e^{S−m} v", size=14, color=COLORS["V"][0])
        s.text(cx, 270, "(so far)", size=11, color=MUTED)
        if j:
            px = xs[j - 1] + 4 * cell + 8
            s.arrow((px, 229), (x0 - 8, 229), color=INK, width=1.6)
            lines = ("rescale", "× e^{m − m'}") if rescaled else ("m", "unchanged")
            for k, line in enumerate(lines):
                s.text((px + x0 - 8) / 2, 252 + 16 * k, line, size=12,
                       color=COLORS["A"][0] if rescaled else MUTED)
    s.text(xs[2] + 2 * cell, 298, "output = o / ℓ", size=14, weight="bold")
    s.raw(f'<line x1="20" y1="316" x2="680" y2="316" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    for x, formula in ((110, "m' = max(m, max S_j)"), (340, "ℓ' = e^{m − m'} ℓ + Σ e^{S − m'}"),
                       (572, "o' = e^{m − m'} o + Σ e^{S − m'} v")):
        s.text(x, 346, formula, size=14)
    s.text(350, 378, f"after the last tile ℓ = {l:.2f} = Σ over all 12 keys of e^{{S − max}}: "
           "exactly the softmax denominator", size=13, color=MUTED)
    s.text(350, 410, "held at once: one B_q × B_k tile of scores, never T × T; the same "
           "matmul FLOPs (4T²d)", size=14)
    s.text(350, 436, "FlashAttention also tiles the queries and keeps each block in on-chip "
           "memory", size=13, color=MUTED)
    return s


def quantized_block() -> Svg:
    w = [0.12, -0.31, 0.05, 0.27, -0.08, -0.19, 0.33, -0.02]
    lo, hi = min(w), max(w)
    d = (hi - lo) / 15
    q = [round((v - lo) / d) for v in w]
    back = [d * c + lo for c in q]
    assert max(abs(a - b) for a, b in zip(w, back)) <= d / 2 + 1e-12
    s = Svg("quantized_block", 700, 470,
            "Four-bit codes in blocks (Q4_1, 5 bits a weight with the scale and minimum), and "
            "LoRA adapters on a frozen 4-bit weight",
            f"First panel: 8 made-up weights taken as one block (Q4_1's blocks hold 32) keep "
            f"their scale d = (max "
            f"- min) / 15 = {d:.4f} and their minimum m = {lo}. Each weight becomes a 4-bit code q "
            f"= round((w - m) / d), one of 16 levels from 0 to 15: {', '.join(map(str, q))}. "
            f"Reading it back gives d q + m, within half a step d / 2 of the original. A block "
            "of 32 takes 20 bytes: two float16 numbers and 32 four-bit codes, 5 bits per weight "
            "instead of 32. Second panel: QLoRA. The input x goes through the frozen weight W "
            "(d_out, d_in), stored in 4 bits, and through two small trained matrices, A (r, "
            "d_in) then B (d_out, r); the two results are added: y = x W^T + x A^T B^T. Only A "
            "and B are trained, r (d_in + d_out) numbers instead of d_in d_out; B starts at zero, "
            "so training starts from the pre-trained layer.")
    s.text(175, 36, "4-bit codes, 5 bits a weight", size=16, weight="bold")
    s.text(175, 56, "8 made-up weights (a Q4\\_1 block holds 32)", size=13, color=MUTED)
    cell, x0 = 38, 23
    rows = [(76, "w", [f"{v:.2f}" for v in w], COLORS["X"][1]),
            (170, "q", [str(c) for c in q], None),
            (264, "d q + m", [f"{v:.2f}" for v in back], COLORS["X"][1])]
    for y, name, labels, fill in rows:
        for i, label in enumerate(labels):
            f = fill or shade("#767676", 0.08 + 0.42 * q[i] / 15)
            s.rect(x0 + 8 + i * cell, y, cell - 2, 30, f, COLORS["X"][0], rx=3, width=1)
            s.text(x0 + 8 + i * cell + (cell - 2) / 2, y + 20, label, size=12)
    s.text(175, 126, "q = round((w − m) / d), 16 levels: 0 … 15", size=13)
    s.arrow((175, 132), (175, 164))
    s.text(175, 220, "ŵ = d q + m", size=13)
    s.arrow((175, 226), (175, 258))
    s.text(175, 316, f"each weight moves by at most d / 2 = {d / 2:.3f}", size=13, color=MUTED)
    s.rect(35, 336, 280, 58, "#f7f7f7", MUTED, rx=8, width=1.2)
    s.text(175, 358, f"stored: d = {d:.4f}, minimum m = {lo:.2f}", size=13)
    s.text(175, 380, "(float16 each) + 32 codes of 4 bits", size=13)
    s.text(175, 420, "20 bytes per 32 weights: 5 bits a weight", size=14, weight="bold")
    s.text(175, 442, "float32 takes 128 bytes: 6.4 × more", size=13, color=MUTED)
    s.raw(f'<line x1="350" y1="24" x2="350" y2="450" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    # second panel: QLoRA
    s.text(525, 36, "LoRA on a frozen 4-bit W", size=16, weight="bold")
    s.text(525, 56, "QLoRA: only A and B are trained", size=13, color=MUTED)
    xs, xf = COLORS["X"]
    s.rect(368, 172, 34, 34, xf, xs, rx=4, width=1.8)
    s.text(385, 195, "x", size=17, italic=True)
    ws, _ = COLORS["W"]
    s.rect(440, 80, 104, 96, "#e4e4e4", ws, rx=4, width=1.8)
    s.text(492, 124, "W", size=17)
    s.text(492, 143, "(d_{out}, d_{in})", size=12, color=MUTED)
    s.text(492, 194, "frozen, 4-bit", size=12, color=MUTED)
    ls, lf = COLORS["L"]
    s.rect(440, 218, 104, 26, lf, ls, rx=3, width=1.8)
    s.text(492, 236, "A (r, d_{in})", size=12)
    s.rect(572, 218, 26, 96, lf, ls, rx=3, width=1.8)
    s.text(585, 270, "B", size=14)
    s.text(585, 332, "(d_{out}, r)", size=12, color=MUTED)
    s.text(585, 350, "B = 0 at first", size=12, color=MUTED)
    s.arrow((402, 185), (438, 130))
    s.arrow((402, 195), (438, 231))
    s.arrow((544, 231), (570, 231))
    s.circle(648, 150, 15, "#ffffff", INK, "+", size=20)
    s.arrow((544, 128), (632, 146))
    s.arrow((598, 240), (638, 162))
    s.arrow((648, 166), (648, 196))
    s.text(648, 214, "y", size=17, italic=True)
    s.text(525, 386, "y = x W^T + x A^T B^T", size=15)
    s.text(525, 414, "trained: r (d_{in} + d_{out}) numbers,", size=13)
    s.text(525, 434, "not d_{in} × d_{out}; W never changes", size=13)
    return s


DIAGRAMS = [tokenize_pipeline, embedding_position, attention_shapes, weighted_average,
            causal_mask_added, padding_mask, heads_split_merge, sentence_embedding,
            pre_post_norm, encoder_decoder, shifted_targets, kv_cache, teacher_forcing_cross,
            rope_rotation, gqa_heads, tiled_softmax, quantized_block, smollm2_block, mask_polarity]


# Narrow layouts (phones): pieces of the wide drawing, top to bottom (see Svg.render_narrow).
# Coordinates are the wide drawing's; tests check that a piece cuts no text and no box, and
# that every line or arrow in it is whole (or dropped from it with "drop").
POOL_FAN = [(x, 314) for x in (95, 189, 283, 377, 471)]  # sentence_embedding's pooling arrows
# Arrows a crop's edge would cut in every crop that holds them: each layout drops them all
# from every crop (one copy of the drawing, not one per crop).
MASK_POLARITY_DROP = [(268, 175), (450, 175)]
ATTENTION_SHAPES_DROP = [(310, 78), (130, 258), (310, 258), (565, 227), (220, 584)]
TEACHER_FORCING_DROP = [(460, 70), (459, 256), (240, 413), (240, 489)]
NARROW: dict[str, list[tuple]] = {
    "causal_mask_added": [("wrap", 30, 45, 0, 270), ("crop", 20, 50, 250, 245), ("label", "+", 26),
                          ("wrap", 30, 45, 280, 460), ("crop", 285, 50, 455, 245),
                          ("label", "↓", 26), ("wrap", 30, 45, 480, 700), ("crop", 492, 50, 680, 245),
                          ("wrap", 260, 340)],
    "padding_mask": [("crop", 20, 10, 345, 135), ("crop", 390, 10, 580, 135), ("wrap", 150, 170),
                     ("crop", 20, 172, 345, 364), ("crop", 400, 172, 630, 364),
                     ("crop", 125, 364, 545, 404, 0.8)],
    "heads_split_merge": [("crop", 20, 8, 320, 500), ("rule",), ("crop", 360, 8, 660, 606),
                          ("wrap", 550, 625)],
    "pre_post_norm": [("crop", 30, 5, 310, 575), ("rule",), ("crop", 360, 5, 660, 598),
                      ("crop", 30, 610, 470, 650, 0.77)],
    "encoder_decoder": [("drawing", encoder_decoder(narrow=True))],
    "kv_cache": [("crop", 20, 8, 236, 535), ("rule",), ("crop", 244, 8, 454, 535), ("rule",),
                 ("crop", 460, 8, 675, 535), ("wrap", 545, 570)],
    "gqa_heads": [("crop", 8, 12, 232, 340), ("rule",), ("crop", 238, 12, 462, 340), ("rule",),
                  ("crop", 468, 12, 692, 340), ("wrap", 350, 460)],
    "tiled_softmax": [("wrap", 10, 40), ("crop", 40, 46, 274, 280), ("crop", 275, 46, 499, 280),
                      ("crop", 499, 46, 690, 305), ("rule",), ("wrap", 320, 450)],
    "quantized_block": [("crop", 10, 14, 345, 450), ("rule",), ("crop", 352, 14, 690, 445)],
    "mask_polarity": [("crop", 262, 12, 470, 282, {"drop": MASK_POLARITY_DROP}),
                      ("crop", 8, 12, 224, 282, {"drop": MASK_POLARITY_DROP}),
                      ("crop", 476, 12, 728, 282, {"drop": MASK_POLARITY_DROP}), ("wrap", 295, 350), ("crop", 190, 364, 470, 402)],
    "weighted_average": [("crop", 18, 10, 404, 356, 0.88), ("crop", 408, 10, 634, 356),
                         ("crop", 22, 362, 258, 415), ("crop", 398, 362, 636, 422)],
    "rope_rotation": [("crop", 20, 10, 345, 345), ("crop", 355, 10, 690, 345), ("wrap", 350, 380),
                      ("crop", 110, 380, 330, 410), ("crop", 370, 380, 600, 410), ("rule",),
                      ("crop", 15, 425, 320, 515), ("crop", 370, 425, 690, 520),
                      ("row", (25, 522, 95, 622), (165, 522, 295, 622)),
                      ("row", (25, 522, 95, 622), (325, 522, 625, 622), {"scale": 0.88}),
                      ("wrap", 630, 655)],
    "smollm2_block": [("drawing", smollm2_block(narrow=True))],
    "attention_shapes": [("crop", 190, 14, 440, 95, {"drop": ATTENTION_SHAPES_DROP}), ("label", "↓", 20),
                         ("row", (50, 100, 220, 265), (230, 100, 400, 265),
                          {"scale": 0.95, "drop": ATTENTION_SHAPES_DROP}),
                         ("crop", 410, 100, 580, 265, {"drop": ATTENTION_SHAPES_DROP}),
                         ("crop", 120, 265, 570, 590, 0.75,
                          {"drop": ATTENTION_SHAPES_DROP}),
                         ("label", "↓", 20),
                         ("crop", 240, 600, 450, 685, {"drop": ATTENTION_SHAPES_DROP}),
                         ("wrap", 690, 712)],
    "embedding_position": [("row", (22, 10, 110, 276), (176, 10, 528, 276), {"scale": 0.755}),
                           ("wrap", 115, 200, 530, 700), ("crop", 280, 272, 570, 358),
                           ("wrap", 360, 420)],
    "tokenize_pipeline": [("crop", 220, 15, 575, 70, 0.95, {"drop": [(397, 66)]}),
                          ("wrap", 60, 104, 0, 200),
                          ("row", (15, 120, 95, 420), (105, 120, 398, 420),
                           {"scale": 0.88, "drop": [(397, 66)]}),
                          ("row", (15, 120, 95, 420), (398, 120, 695, 420),
                           {"scale": 0.88, "drop": [(397, 66)]}),
                          ("wrap", 180, 190), ("wrap", 430, 470)],
    "sentence_embedding": [("crop", 40, 18, 330, 80), ("crop", 330, 18, 626, 80), ("wrap", 100, 135),
                           ("wrap", 165, 175), ("crop", 40, 178, 330, 312),
                           ("crop", 330, 178, 626, 350, {"drop": POOL_FAN}),
                           ("crop", 196, 352, 512, 412, {"drop": POOL_FAN}),
                           ("wrap", 425, 445)],
    "shifted_targets": [("wrap", 30, 45, 0, 265), ("crop", 268, 16, 542, 54),
                        ("row", (25, 70, 200, 115), (268, 60, 542, 122), {"scale": 0.74}),
                        ("crop", 118, 128, 472, 440, 0.93), ("wrap", 290, 330, 0, 110),
                        ("crop", 55, 440, 510, 470, 0.74), ("wrap", 480, 500)],
    "teacher_forcing_cross": [("wrap", 40, 70, 0, 215), ("crop", 236, 28, 479, 72, {"drop": TEACHER_FORCING_DROP}),
                              ("crop", 479, 28, 682, 72), ("wrap", 110, 145, 230, 710),
                              ("wrap", 180, 300, 0, 200), ("crop", 236, 165, 479, 300, {"drop": TEACHER_FORCING_DROP}),
                              ("crop", 479, 165, 682, 300, {"drop": TEACHER_FORCING_DROP}), ("wrap", 305, 325), ("rule",),
                              ("wrap", 350, 370), ("crop", 18, 380, 245, 595, {"drop": TEACHER_FORCING_DROP}),
                              ("crop", 290, 364, 517, 594,
                               {"hide": [(355, 370)], "drop": TEACHER_FORCING_DROP}), ("wrap", 420, 540, 520, 720),
                              ("wrap", 600, 612), ("wrap", 620, 665)],
}


def build() -> dict[str, str]:
    """Every diagram, as {file name: SVG text}; a narrow layout too where NARROW has one."""
    out = {}
    for make in DIAGRAMS:
        svg = make()
        out[f"{svg.name}.svg"] = svg.render()
        if svg.name in NARROW:
            out[f"{svg.name}.narrow.svg"] = svg.render_narrow(NARROW[svg.name])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with book/figures, write nothing")
    args = ap.parse_args(argv)
    files = build()
    if args.check:
        stale = [n for n, text in files.items()
                 if not (OUT / n).is_file() or (OUT / n).read_text() != text]
        for n in stale:
            print(f"book/figures/{n} is not what scripts/make_diagrams.py writes", file=sys.stderr)
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for n, text in files.items():
        (OUT / n).write_text(text)
    print(f"wrote {len(files)} diagrams to {OUT.relative_to(ROOT)}")
    # the chapters hold their diagrams embedded (Colab gets the .ipynb alone): redraw those whose
    # file just changed, and embed any new one a chapter names by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import embed_figures

    for line in embed_figures.embed(ROOT):
        print("embedded", line)
    return 0


# ------------------------------------------------------ chapter 7: a GPT's shapes, step by step
def gpt_shapes() -> Svg:
    s = Svg("gpt_shapes", 680, 700,
            "A decoder-only model (GPT) with the shape after each step",
            "Token ids (B, T) pass through the token and position embeddings and become x of "
            "shape (B, T, C). Each of the L pre-norm blocks: LayerNorm, then masked multi-head "
            "attention (Q, K, V of shape (B, H, T, D), weights (B, H, T, T)), added to the "
            "residual stream; then LayerNorm and the feed-forward network (hidden width d_ff), "
            "added to the stream; each block returns (B, T, C). A final LayerNorm and the LM head, "
            "a C to |V| projection, give logits (B, T, |V|): one score per vocabulary entry at "
            "every position. Attention communicates between positions, the FFN computes within "
            "each position.")
    cx, stream = 185, "#767676"
    s.text(cx, 30, "token ids  (B, T)", size=15)
    s.arrow((cx, 38), (cx, 58))
    s.box(cx, 60, 250, 50, "X", "token + position embedding", "(B, T, C)", size=15)
    s.arrow((cx, 112), (cx, 140))
    top = 142

    def sublayer(y, role, lines, height):
        """LayerNorm, the sublayer box (title and grey lines) and the residual add; next y."""
        s.arrow((cx, y), (cx, y + 20))
        s.box(cx, y + 22, 130, 30, "N", "LayerNorm", size=14)
        s.arrow((cx, y + 54), (cx, y + 70))
        s.rect(cx - 118, y + 72, 236, height, COLORS[role][1], COLORS[role][0], rx=8, width=2)
        s.text(cx, y + 94, lines[0], size=15)
        for i, line in enumerate(lines[1:]):
            s.text(cx, y + 114 + 18 * i, line, size=13, color=MUTED)
        plus = y + 72 + height + 28
        s.arrow((cx, y + 72 + height), (cx, plus - 16))
        s.arrow((cx, y + 8), (cx + 135, y + 8), (cx + 135, plus), (cx + 18, plus), color=stream,
                width=2.4)
        s.circle(cx, plus, 16, "#ffffff", INK, "+", size=20)
        s.text(cx - 24, plus + 5, "(B, T, C)", size=13, anchor="end", color=MUTED)
        return plus + 16

    y = sublayer(top + 28, "A", ["masked multi-head attention", "Q, K, V: (B, H, T, D)",
                                 "weights: (B, H, T, T)"], 76)
    attn_mid = top + 28 + 110
    y = sublayer(y, "F", ["feed-forward network", "hidden: (B, T, d_{ff})"], 58)
    ffn_mid = y - 16 - 28 - 29
    bottom = y + 14
    s.rect(30, top, 315, bottom - top, "none", MUTED, rx=12, width=1.5, dash="6 4")
    s.text(44, top + 22, "× L blocks", size=15, anchor="start", weight="bold")
    s.arrow((cx, y), (cx, bottom + 24))
    s.box(cx, bottom + 26, 150, 30, "N", "final LayerNorm", size=14)
    s.arrow((cx, bottom + 58), (cx, bottom + 76))
    s.box(cx, bottom + 78, 250, 50, "W", "LM head: C → |V|", "logits (B, T, |V|)", size=15)
    # notes beside the parts they explain
    notes = [(36, ["B batch, T tokens, C = d_{model},", "H heads, D = C/H, |V| vocab entries"]),
             (82, ["a (|V|, C) table: one row per", "token id, plus its position's vector"]),
             (attn_mid - 10, ["attention: communication", "between positions (along T)"]),
             (attn_mid + 92, ["residual stream (grey): each", "sublayer adds to it, so every",
                              "block keeps (B, T, C)"]),
             (ffn_mid, ["FFN: computation within", "each position (along C)"]),
             (bottom + 96, ["one score per vocabulary entry", "at every position; often the",
                            "embedding matrix again (tied)"])]
    for y0, lines in notes:
        for i, line in enumerate(lines):
            s.text(380, y0 + 19 * i, line, size=14, anchor="start",
                   color=MUTED if y0 == 36 else INK)
    return s


DIAGRAMS.append(gpt_shapes)
NARROW["gpt_shapes"] = [("wrap", 30, 60, 370, 680), ("crop", 20, 10, 352, 141, 0.97),
                        ("wrap", 70, 110, 370, 680), ("crop", 20, 141, 352, 575, 0.97),
                        ("wrap", 260, 300, 370, 680), ("wrap", 365, 420, 370, 680),
                        ("wrap", 455, 490, 370, 680), ("crop", 20, 575, 352, 690, 0.97),
                        ("wrap", 640, 690, 370, 680)]



# ------------------------------------------- chapter 13: what MHA and MLA keep in the KV cache
def mla_cache() -> Svg:
    s = Svg("mla_cache", 700, 420,
            "What multi-head attention and multi-head latent attention keep in the KV cache",
            "Left, multi-head attention: a token x of width C is projected to H keys and H "
            "values, one per head, and all of them are cached: 2 x H x D numbers per token and "
            "layer (DeepSeek-V3's shape: 2 x 128 x 128 = 32,768). Right, multi-head latent "
            "attention (DeepSeek-V2, V3): x is projected down to one latent c_KV of width r and "
            "one RoPE key k_R of width d_r shared by every head; only these two are cached, r + "
            "d_r numbers (512 + 64 = 576). Each head's key part k_h = W_UK_h c_KV and value "
            "v_h = W_UV_h c_KV are read off the latent when needed, or W_UK is absorbed into the "
            "query and W_UV into the output, so attention runs over the cached latents "
            "themselves.")
    for cx, title, sub in ((175, "multi-head attention", "caches every head's key and value"),
                           (525, "multi-head latent attention", "caches a latent and one RoPE key")):
        s.text(cx, 34, title, size=16, weight="bold")
        s.text(cx, 54, sub, size=13, color=MUTED)
        s.box(cx, 68, 110, 32, "X", "token x  (C)", size=14)
    # MHA: H keys and H values, all cached
    s.rect(30, 146, 290, 70, "none", MUTED, rx=10, width=1.5, dash="6 4")
    s.text(40, 140, "KV cache", size=13, anchor="start", color=MUTED)
    for h in range(4):
        for k, role in enumerate("KV"):
            x = 48 + h * 68 + k * 28
            s.arrow((175, 101), (x + 12, 158), color="#939393", width=1.1)
            st, fl = COLORS[role]
            s.rect(x, 160, 24, 42, fl, st, rx=4, width=1.8)
            s.text(x + 12, 186, f"{role.lower()}_{h}", size=12)
    s.text(175, 246, "2 · H · D numbers per token and layer", size=14)
    s.text(175, 268, "DeepSeek-V3's shape: 2 · 128 · 128 = 32,768", size=13, color=MUTED)
    # MLA: the latent and the shared RoPE key are cached; keys and values are read off the latent
    s.rect(392, 104, 282, 66, "none", MUTED, rx=10, width=1.5, dash="6 4")
    s.text(664, 98, "KV cache", size=13, anchor="end", color=MUTED)
    s.arrow((505, 101), (470, 112))
    s.arrow((545, 101), (610, 112))
    s.box(470, 114, 140, 48, "L", "latent c^{KV}", "r = 512 in V3", size=14)
    s.box(610, 114, 104, 48, "K", "RoPE key k^R", "d_r = 64", size=14)
    for h, x in enumerate((430, 510)):
        s.arrow((470, 163), (x, 200), color="#939393", width=1.1)
    s.box(430, 202, 64, 40, "K", "k^N_h", size=14, dash="4 3")
    s.box(510, 202, 64, 40, "V", "v_h", size=14, dash="4 3")
    s.text(560, 212, "per head (with k^R:", size=12, color=MUTED, anchor="start")
    s.text(560, 228, "the head's key);", size=12, color=MUTED, anchor="start")
    s.text(560, 244, "not cached", size=12, color=MUTED, anchor="start")
    s.text(525, 268, "r + d_r = 576 numbers per token and layer", size=14)
    s.raw(f'<line x1="350" y1="24" x2="350" y2="280" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    s.text(350, 312, "read off the latent: k^N_h = W^{UK}_h c^{KV},  v_h = W^{UV}_h c^{KV}", size=15)
    s.text(350, 336, "score: q_h · k_h = ((W^{UK}_h)^T q^N_h) · c^{KV} + q^R_h · k^R", size=15)
    s.text(350, 364, "absorbed: W^{UK} moves into the query, W^{UV} into the output,", size=13,
           color=MUTED)
    s.text(350, 384, "so attention runs over the cached latents themselves", size=13,
           color=MUTED)
    return s


DIAGRAMS.append(mla_cache)
NARROW["mla_cache"] = [("crop", 20, 14, 335, 280), ("rule",), ("crop", 362, 14, 690, 280),
                       ("wrap", 300, 395)]


# ------------------------------------------- chapter 14: one round of speculative decoding
def speculative_round() -> Svg:
    s = Svg("speculative_round", 680, 330,
            "One round of speculative decoding with k = 4 guesses",
            "After the text 'And God said', a small draft model guesses four characters one at "
            "a time: comma, space, a and n. The target model reads the text and all four "
            "guesses in one forward pass and gives its own choice at each of the five "
            "positions: comma, space, B, n and d. The first two guesses equal its choices and "
            "are kept; the third, a, does not, so it and the guess after it are thrown away "
            "and the target's B takes its place: three tokens for one target call. A second "
            "panel counts the calls for these three tokens, not their time: plain decoding makes "
            "three target calls; speculative decoding makes four draft steps and one target call "
            "over five positions. Which is faster depends on what a draft step and a five-token "
            "check cost against a target step, which the chapter measures.")
    kept, own, grey = COLORS["Q"], ("#E69F00", "#fbe9c4"), COLORS["X"]
    s.text(175, 30, "one round, k = 4", size=16, weight="bold")
    s.text(175, 56, "text so far: ...And God said", size=13, color=MUTED)
    xs = [70, 120, 170, 220]
    s.text(20, 94, "draft", size=13, anchor="start", color=MUTED)
    for i, (x, c) in enumerate(zip(xs, [",", "\u2423", "a", "n"])):
        s.rect(x, 72, 40, 32, grey[1], grey[0], rx=4)
        s.text(x + 20, 94, c, size=16)
        if i:
            s.arrow((xs[i - 1] + 41, 88), (x - 1, 88), color=MUTED, width=1.2)
    s.text(175, 124, "4 guesses, one small step each", size=12, color=MUTED)
    s.rect(60, 136, 260, 34, "#ffffff", INK, rx=6)
    s.text(190, 158, "target: ONE forward, 5 positions", size=13, weight="bold")
    s.text(20, 198, "target", size=13, anchor="start", color=MUTED)
    picks = [",", "\u2423", "B", "n", "d"]  # the shipped target's argmax after each
    for i, c in enumerate(picks):
        x = 70 + 50 * i
        s.rect(x, 178, 40, 32, "#ffffff", MUTED, rx=4)
        s.text(x + 20, 200, c, size=16, color=INK if i < 3 else MUTED)
        if i < 3:  # nothing after the first miss counts
            s.text(x + 20, 230, "=" if i < 2 else "\u2260", size=16,
                   color=kept[0] if i < 2 else own[0], weight="bold")
    s.text(20, 268, "kept", size=13, anchor="start", color=MUTED)
    for i, c in enumerate([",", "\u2423", "B"]):
        x = 70 + 50 * i
        role = kept if i < 2 else own
        s.rect(x, 246, 40, 32, role[1], role[0], rx=4)
        s.text(x + 20, 268, c, size=16)
    s.text(242, 268, "a n", size=15, color=MUTED)
    s.raw('<line x1="228" y1="263" x2="256" y2="263" stroke="#5f5f5f" stroke-width="1.5"/>')
    s.text(175, 304, "2 guesses kept + the target's B:", size=13)
    s.text(175, 322, "3 tokens for 1 target call", size=13, weight="bold")
    # the second panel: the calls for these three tokens, a schematic (no clock reading:
    # what each call costs depends on the machine; the chapter measures it)
    u = 62  # px per target call
    s.text(515, 30, "calls for these 3 tokens", size=16, weight="bold")
    s.text(370, 80, "plain", size=13, anchor="start", color=MUTED)
    for i in range(3):
        s.rect(370 + u * i, 90, u - 2, 30, "#ffffff", INK, rx=4)
        s.text(369 + u * i + u / 2, 110, "target", size=12)
    s.text(370 + 3 * u + 6, 110, "3 target calls", size=12, anchor="start", color=MUTED)
    s.text(370, 160, "speculative", size=13, anchor="start", color=MUTED)
    draft_w, check_w = 0.45 * u, u
    for i in range(4):
        s.rect(370 + draft_w * i, 170, draft_w - 2, 30, grey[1], grey[0], rx=3)
    x0 = 370 + 4 * draft_w
    s.rect(x0, 170, check_w - 2, 30, "#ffffff", INK, rx=4)
    s.text(x0 + check_w / 2 - 1, 190, "check 5", size=12)
    s.text(370, 222, "4 draft steps + 1 target call", size=12, anchor="start", color=MUTED)
    s.text(515, 250, "small: a draft step; wide: a target call", size=12, color=MUTED)
    s.text(515, 284, "not to scale: which row is faster depends", size=12, color=MUTED)
    s.text(515, 302, "on what a draft step and a 5-token check", size=12, color=MUTED)
    s.text(515, 320, "cost (the chapter measures both)", size=12, color=MUTED)
    return s


DIAGRAMS.append(speculative_round)
NARROW["speculative_round"] = [("crop", 14, 10, 336, 328, 1.0),
                               ("rule",), ("crop", 350, 10, 670, 328, 1.0)]


# ---------------------------------------------------------------- added for chapter 12 (paged cache)
def paged_kv_cache() -> Svg:
    """Chapter 12: block tables map each sequence's positions to blocks anywhere in one pool."""
    bs, cell = 4, 12
    seqs = [("A", 10, HEADS[0], [0, 3, 5]), ("B", 5, HEADS[1], [1, 6]),
            ("C", 13, HEADS[2], [2, 4, 7, 8])]
    s = Svg("paged_kv_cache", 700, 450,
            "A paged KV cache: block tables map each sequence's blocks into one pool",
            "Three sequences of 10, 5 and 13 tokens, in blocks of 4 positions. Each has a block "
            "table that maps its logical blocks to pool blocks: sequence A to blocks 0, 3 and 5, "
            "sequence B to 1 and 6, sequence C to 2, 4, 7 and 8. In the pool the blocks of "
            "different sequences are interleaved, in the order they were taken as the sequences "
            "grew; only each sequence's last block is partly empty. Below, a contiguous cache "
            "reserves the maximum length, 16 positions, for every sequence, most of it empty.")
    s.text(170, 40, "sequences, in blocks of 4", size=15, weight="bold")
    s.text(400, 40, "block tables", size=15, weight="bold")
    s.text(578, 40, "the pool (shared)", size=15, weight="bold")
    owner = {}
    for r, (name, n, color, table) in enumerate(seqs):
        y = 70 + 50 * r
        s.text(24, y + 10, f"{name}: {n} tokens", size=13, anchor="start")
        for b in range((n + bs - 1) // bs):
            x = 118 + b * (bs * cell + 6)
            fills = [shade(color, 0.7) if b * bs + i < n else "#ffffff" for i in range(bs)]
            s.cells(x, y, [fills], cell=cell, stroke=color)
            s.text(x + bs * cell / 2, y + 26, f"block {b}", size=10, color=MUTED)
            owner[table[b]] = (name, color, min(bs, n - b * bs))
        s.text(342, y + 10, f"{name} → [{', '.join(map(str, table))}]", size=13,
               anchor="start")
    for k in range(12):
        x, y = 478 + (k % 4) * 52, 64 + (k // 4) * 50
        name, color, used = owner.get(k, ("free", "#939393", 0))
        fills = [shade(color, 0.7) if i < used else "#ffffff" for i in range(bs)]
        s.cells(x, y, [fills], cell=cell, stroke=color)
        s.text(x + bs * cell / 2, y + 26, f"{k}: {name}", size=10,
               color=INK if used else MUTED)
    s.raw(f'<line x1="20" y1="232" x2="680" y2="232" stroke="{CARD_EDGE}" stroke-width="1.5"/>')
    s.text(190, 260, "a contiguous cache: 16 positions each", size=14, weight="bold")
    for r, (name, n, color, _) in enumerate(seqs):
        y = 276 + 30 * r
        s.text(30, y + 10, name, size=13, anchor="start")
        fills = [shade(color, 0.7) if i < n else "url(#blocked)" for i in range(16)]
        s.cells(52, y, [fills], cell=cell + 2, stroke="#939393")
    s.text(520, 290, "paged: 9 blocks = 36 positions", size=13)
    s.text(520, 312, "for 28 tokens (the last block", size=13, color=MUTED)
    s.text(520, 330, "of each sequence partly empty)", size=13, color=MUTED)
    s.text(520, 358, "contiguous: 48 positions reserved", size=13)
    s.text(350, 400, "a sequence takes a new block only when its last one is full; a finished "
           "one gives its blocks back", size=13)
    s.text(350, 424, "hatched: reserved and never used", size=12, color=MUTED)
    return s


DIAGRAMS.append(paged_kv_cache)
NARROW["paged_kv_cache"] = [("crop", 18, 24, 336, 222), ("crop", 336, 24, 468, 222),
                            ("crop", 470, 24, 690, 222), ("rule",),
                            ("crop", 18, 244, 345, 372), ("wrap", 280, 365, 420, 700),
                            ("wrap", 390, 430)]


if __name__ == "__main__":
    sys.exit(main())
