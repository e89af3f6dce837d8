"""Static attention heatmaps with matplotlib: token axes, a labelled colour bar, masked cells
hatched.

Also how the book's matplotlib figures are exported (``figure_png``): at twice their pixels, so
they are sharp on high-density screens, with the size they are shown at as metadata, and as a
256-colour PNG, which keeps the bytes near a plain 1x export. Importing attnlib in a Jupyter
kernel (every chapter's setup cell does) makes this the inline backend's PNG format, unless the
reader chose another one.
"""
from __future__ import annotations

import io
from functools import partial
from typing import Any, Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from .._checks import as_int, as_real
from ._common import check_cmap, check_limits, check_tokens, default_cmap, finite_range, to_numpy

ANNOTATE_MAX = 10  # annotate every cell automatically when both sides have at most this many tokens
LABEL_MAX = 40     # show every token label up to this many; beyond, every n-th


def _label(token: str, width: int = 14) -> str:
    """A token as a tick label: visible whitespace, '$' escaped (mathtext), long tokens
    shortened."""
    shown = token.replace("\n", "\u23ce").replace("$", r"\$")
    if not token.strip():
        shown = "\u2423" * max(1, len(token))  # a run of spaces shows as open boxes
    return shown if len(shown) <= width else shown[: width - 1] + "\u2026"


def _ticks(ax: Axes, axis: str, tokens: Sequence[str]) -> None:
    step = max(1, -(-len(tokens) // LABEL_MAX))
    idx = list(range(0, len(tokens), step))
    labels = [_label(tokens[i]) for i in idx]
    if axis == "x":
        ax.set_xticks(idx)
        ax.set_xticklabels(labels, rotation=45, ha="right", rotation_mode="anchor")
    else:
        ax.set_yticks(idx)
        ax.set_yticklabels(labels)


def heatmap(weights: Any, row_tokens: Optional[Sequence[Any]] = None,
            col_tokens: Optional[Sequence[Any]] = None, *, ax: Optional[Axes] = None,
            title: Optional[str] = None, cmap: Optional[str] = None, vmin: Optional[float] = 0.0,
            vmax: Optional[float] = 1.0, annotate: Optional[bool] = None,
            colorbar_label: str = "attention weight", xlabel: str = "key",
            ylabel: str = "query", digits: int = 2, colorbar: bool = True,
            figsize: Optional[tuple[float, float]] = None, blocked: Any = None) -> Axes:
    """Draw a (Tq, Tk) matrix as a heatmap with query tokens down the side and key tokens
    along the bottom.

    Args:
        weights: (Tq, Tk) tensor or array; ``-inf`` / NaN cells (masked scores) are drawn
            hatched grey.
        row_tokens: Tq labels for the rows (queries); ``None`` numbers them.
        col_tokens: Tk labels for the columns (keys); defaults to ``row_tokens`` when square.
        ax: axes to draw into; a new figure of about (5, 4) inches is made when ``None``.
        title: the axes title (defaults to "attention weights").
        cmap: colormap name; default viridis, or RdBu_r when the range straddles 0 (signed data).
        vmin, vmax: colour range, default [0, 1] for weights; ``None`` takes it from the data
            (centred on 0 for signed data). Values outside the range get arrow ends on the
            colour bar.
        annotate: write each value in its cell; default when both sides have at most 10 tokens.
        colorbar_label: the colour bar's label (the weight scale).
        xlabel, ylabel: axis names; digits: decimals of the annotations.
        blocked: optional (Tq, Tk) bool matrix, True = a masked (query, key) pair: drawn
            hatched like a ``-inf`` score, with its value (a blocked weight: 0) still written
            in it on a white plate. ``None`` (the default) hatches only ``-inf`` / NaN cells.
    Returns:
        The matplotlib ``Axes`` (``ax.figure`` is the figure; close it after showing).
    """
    arr = to_numpy(weights, "weights")
    if as_int(digits) is None or digits < 0:
        raise ValueError(f"digits must be an int >= 0 (decimals of the annotations), "
                         f"got {digits!r}")
    if arr.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D (Tq, Tk) matrix, got shape {tuple(arr.shape)}; "
                         "select one layer/head first, e.g. weights[0, 0]")
    n_rows, n_cols = arr.shape
    if n_rows == 0 or n_cols == 0:
        raise ValueError(f"heatmap needs a non-empty matrix; it has an empty axis: "
                         f"shape {tuple(arr.shape)}")
    check_limits(vmin, vmax)
    hide = np.zeros(arr.shape, dtype=bool) if blocked is None else _blocked(blocked, arr.shape)
    both_given = vmin is not None and vmax is not None
    rows = check_tokens(row_tokens, n_rows, "row_tokens", "rows (queries)")
    if col_tokens is None and row_tokens is not None and n_rows == n_cols:
        col_tokens = row_tokens
    cols = check_tokens(col_tokens, n_cols, "col_tokens", "columns (keys)")

    lo, hi = finite_range(arr)
    if vmin is None and vmax is None and lo < 0 < hi:  # signed data: centre the scale on 0
        m = max(-lo, hi)
        vmin, vmax = -m, m
    vmin = lo if vmin is None else float(vmin)
    vmax = hi if vmax is None else float(vmax)
    if not vmax > vmin:
        if both_given:
            raise ValueError(f"colour range needs vmin < vmax, got vmin={vmin}, vmax={vmax} "
                             "(vmin or vmax=None takes that end from the data)")
        vmax = vmin + 1.0  # a constant matrix: any non-empty range shows it
    cmap = check_cmap(default_cmap(vmin < 0 < vmax) if cmap is None else cmap)  # before a figure
    if figsize is not None:  # matplotlib's own message names no argument
        size = [as_real(v) for v in figsize] if isinstance(figsize, (tuple, list)) else []
        if len(size) != 2 or not all(v is not None and 0 < v < float("inf") for v in size):
            raise ValueError(f"figsize must be (width, height) in inches, two positive numbers, "
                             f"got {figsize!r}")

    if ax is None:
        if figsize is None:
            side = max(n_rows, n_cols)
            figsize = (5.0, 4.0) if side <= 12 else (6.0, 5.0) if side <= 24 else (7.0, 6.0)
        _, ax = plt.subplots(figsize=figsize)  # no layout engine: callers may still tight_layout()

    masked = ~np.isfinite(arr) & ~np.isposinf(arr)  # -inf and NaN are "no score"; +inf is just big
    masked |= hide  # blocked pairs: hatched whatever their value
    shown = np.ma.masked_array(np.where(np.isposinf(arr), vmax, arr), mask=masked)
    # bad (masked) cells transparent: the hatched patch underneath shows through
    colormap = plt.get_cmap(cmap).with_extremes(bad=(0, 0, 0, 0))
    norm = Normalize(vmin=vmin, vmax=vmax)
    ax.add_patch(Rectangle((-0.5, -0.5), n_cols, n_rows, facecolor="0.88", edgecolor="0.55",
                           hatch="///", linewidth=0, zorder=0))
    image = ax.imshow(shown, cmap=colormap, norm=norm, aspect="auto", interpolation="nearest",
                      zorder=1)
    ax.set_xlim(-0.5, n_cols - 0.5)
    ax.set_ylim(n_rows - 0.5, -0.5)
    _ticks(ax, "x", cols)
    _ticks(ax, "y", rows)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title("attention weights" if title is None else title)
    ax.tick_params(length=2)

    if colorbar:
        extend = {(False, False): "neither", (True, False): "min", (False, True): "max",
                  (True, True): "both"}[(lo < vmin, hi > vmax)]
        cbar = ax.figure.colorbar(image, ax=ax, extend=extend, fraction=0.046, pad=0.03)
        cbar.set_label(colorbar_label)

    if annotate is None:
        annotate = max(n_rows, n_cols) <= ANNOTATE_MAX
    if annotate:
        for i in range(n_rows):
            for j in range(n_cols):
                v = arr[i, j]
                if np.isfinite(v):
                    r, g, b, _ = colormap(norm(v))
                    dark = 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5  # relative luminance
                    text, colour = f"{v:.{digits}f}", "white" if dark else "black"
                else:
                    text, colour = ("-\u221e" if v < 0 else "+\u221e" if v > 0 else "NaN"), "0.25"
                plate = {}
                if hide[i, j] and np.isfinite(v):  # a value on the hatch: black on white
                    colour, plate = "black", {"bbox": dict(facecolor="white", edgecolor="none",
                                                           pad=1.0)}
                # 9.5-10 pt: still ~9 px when a 5-inch figure is shown on a phone's column
                ax.text(j, i, text, ha="center", va="center", color=colour,
                        fontsize=9.5 if max(n_rows, n_cols) > 6 else 10, **plate)
    return ax


def _blocked(blocked: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``blocked`` checked: a bool matrix of the weights' shape."""
    arr = np.asarray(blocked.detach().cpu() if hasattr(blocked, "detach") else blocked)
    if arr.dtype != np.bool_:
        raise TypeError(f"blocked must be a bool matrix (True = a masked pair), got "
                        f"dtype {getattr(blocked, 'dtype', arr.dtype)}")
    if arr.shape != tuple(shape):
        raise ValueError(f"blocked must have the weights' shape {tuple(shape)}, got "
                         f"{tuple(arr.shape)}")
    return arr


# ------------------------------------------------------------------------- exporting figures
SCALE = 2  # pixels per CSS pixel in exported PNGs


def smallest_text_px(fig: Figure) -> Optional[float]:
    """The smallest font size of the figure's drawn text, in the pixels it is shown at (1x);
    None when it has no text. Call after the figure was drawn (savefig draws it)."""
    box = fig.bbox
    sizes = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        try:
            ext = t.get_window_extent()
        except RuntimeError:  # never drawn
            continue
        if ext.x1 < box.x0 or ext.x0 > box.x1 or ext.y1 < box.y0 or ext.y0 > box.y1:
            continue  # a tick label outside the axes' range: not drawn
        sizes.append(t.get_fontsize())
    return round(min(sizes) * fig.dpi / 72, 1) if sizes else None


def figure_png(fig: Figure, *, dpi: Optional[float] = None, **savefig_kwargs: Any
               ) -> tuple[bytes, dict[str, Any]]:
    """A figure as a PNG at ``SCALE`` times its pixels, reduced to 256 colours.

    Args:
        fig: the figure. dpi: its pixels per inch at 1x (default ``fig.dpi``).
        savefig_kwargs: passed on (``bbox_inches`` defaults to "tight", as inline figures).
    Returns:
        (png bytes, metadata): ``width``/``height`` in 1x pixels (what notebooks and the book show
        it at), ``text_px``: the smallest text size in those pixels.
    """
    from PIL import Image

    dpi = float(fig.dpi if dpi is None else dpi)
    savefig_kwargs.setdefault("bbox_inches", "tight")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi * SCALE, metadata={"Software": None}, **savefig_kwargs)
    image = Image.open(io.BytesIO(buf.getvalue()))
    opaque = image.mode != "RGBA" or image.getextrema()[3][0] == 255
    image = image.convert("RGB" if opaque else "RGBA")
    small = image.quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    small.save(out, format="png", optimize=True)
    w, h = image.size
    meta: dict[str, Any] = {"width": round(w / SCALE), "height": round(h / SCALE)}
    px = smallest_text_px(fig) if dpi == fig.dpi else None
    if px is None and dpi != fig.dpi:
        base = smallest_text_px(fig)
        px = None if base is None else round(base * dpi / fig.dpi, 1)
    if px is not None:
        meta["text_px"] = px
    return out.getvalue(), meta


def _inline_png(fig: Figure, **kwargs: Any) -> Optional[tuple[str, dict[str, Any]]]:
    """IPython's PNG formatter for figures: ``figure_png``, base64 (None for an empty figure)."""
    import base64

    if not fig.axes and not fig.texts and not fig.images:
        return None
    data, meta = figure_png(fig, **kwargs)
    return base64.b64encode(data).decode("ascii"), meta


def _sharp_inline_figures() -> None:
    """In a Jupyter kernel whose figures go inline as plain PNGs (the default), export them
    with ``figure_png``. A reader's own choice (svg, retina, another backend) is left alone."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None or not hasattr(ip, "kernel"):
        return
    import matplotlib

    try:
        backend = matplotlib.get_backend(auto_select=False)  # matplotlib >= 3.10
    except TypeError:
        backend = matplotlib.rcParams._get("backend")
    if "inline" not in str(backend):
        return
    # The inline backend selects its formats when it is first activated, at the first figure:
    # activate it now, so that what is set below is not replaced then.
    import matplotlib_inline.backend_inline  # noqa: F401

    png = ip.display_formatter.formatters["image/png"]
    current = png.type_printers.get(Figure)
    keywords = getattr(current, "keywords", None)
    if keywords is None or keywords.get("fmt") != "png":
        return  # not the default PNG printer: svg, retina or another choice
    kwargs = {k: v for k, v in keywords.items() if k not in ("fmt", "base64")}
    png.for_type(Figure, partial(_inline_png, **kwargs))


_sharp_inline_figures()
