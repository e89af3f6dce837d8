"""``precomputed_slider``: an ipywidgets slider that moves in the static book (client-side
jslink)."""
from __future__ import annotations

import base64
from typing import Any, Callable, Sequence


FIGURE_DPI = 80  # figures in a slider's states: 80 px per inch as shown (exported at 2x that)


def _output(obj: Any) -> dict[str, Any]:
    """A display_data output for what ``render`` returned (figures become PNGs, then closed)."""
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .heatmap import figure_png

    if isinstance(obj, Axes):
        obj = obj.figure
    if isinstance(obj, Figure):
        # 2x pixels, shown at 1x (the size metadata), so the states are sharp on 2x screens;
        # bbox_inches=None: every state of a slider keeps the same size, the picture does not jump
        png, meta = figure_png(obj, dpi=FIGURE_DPI, bbox_inches=None)
        plt.close(obj)
        data = {"image/png": base64.b64encode(png).decode("ascii"),
                "text/plain": f"<Figure size {obj.get_figwidth():g}x{obj.get_figheight():g} in>"}
        return {"output_type": "display_data", "data": data, "metadata": {"image/png": meta}}
    if hasattr(obj, "_repr_mimebundle_"):
        data = obj._repr_mimebundle_()
        data = dict(data[0] if isinstance(data, tuple) else data)
    elif hasattr(obj, "_repr_html_"):
        data = {"text/html": obj._repr_html_(), "text/plain": repr(obj)}
    else:
        data = {"text/plain": str(obj)}
    return {"output_type": "display_data", "data": data, "metadata": {}}


def precomputed_slider(values: Sequence[Any], render: Callable[[Any], Any], *,
                       description: str = "value", continuous_update: bool = True,
                       value: Any = None) -> Any:
    """A slider over ``values`` linked in the browser to a ``Stack`` of precomputed outputs.

    ``render(v)`` returns what to show for ``v``: a matplotlib Figure/Axes (stored as a
    PNG, shown at 80 px per inch and drawn at twice that, then closed: keep figures
    small, the PNGs live in the notebook's widget state), or anything with
    ``_repr_html_`` / ``_repr_mimebundle_`` (e.g. an explorer), or text; figures it
    opens without returning them are captured too (do not call ``plt.show()`` inside).
    The slider's index is ``jslink``ed to the Stack's ``selected_index``, so it moves
    with no kernel (static book, Colab).

    ``value`` is the value the slider opens on (one of ``values``; default the first): open on the
    typical setting, not on the end of the range.

    Where widgets cannot be drawn (an untrusted notebook in JupyterLab, GitHub's
    notebook view), the output shows the first state's picture (a figure's PNG, or the
    state's HTML) and a line that says what the slider is and how to get it live,
    instead of ``VBox(children=...)``. Displayed, the slider is two outputs: the widget
    (whose plain-text and PNG forms are that line and that picture), then the line as
    HTML with a style that hides it wherever styles apply, that is, wherever the widget
    itself is drawn (the book, a trusted notebook, Colab). JupyterLab's sanitizer
    removes the style from an untrusted notebook, so there it shows under the picture.
    (One output could not show both: a viewer draws one of its forms, and an HTML form
    holding the PNG would make nbval compare image bytes.)

    Returns:
        ``ipywidgets.VBox([slider, stack])``; ``.children[0]`` is the slider,
        ``.children[1]`` the Stack.
    """
    import ipywidgets as widgets

    values = list(values)
    if not values:
        raise ValueError("precomputed_slider needs at least one value, got an empty sequence")
    if not callable(render):
        raise TypeError(f"render must be callable, got {type(render).__name__}")
    labels = [str(v) for v in values]
    if len(set(labels)) != len(labels):
        raise ValueError(f"values must have distinct labels, got {labels}")
    start = 0
    if value is not None:
        if str(value) not in labels:
            raise ValueError(f"value={value!r} is not one of the slider's values {labels}")
        start = labels.index(str(value))
    import matplotlib.pyplot as plt

    outputs = []
    for v in values:
        before = set(plt.get_fignums())
        result = render(v)
        # figures render(v) opened but did not return are shown too (and closed), in order
        items = [plt.figure(n) for n in plt.get_fignums() if n not in before]
        if result is not None:
            owner = getattr(result, "figure", result)
            items = [f for f in items if f is not owner] + [result]
        if not items:
            raise ValueError(f"render({v!r}) returned None and drew no figure; return a "
                             "matplotlib Figure/Axes or a displayable object (and do not call "
                             "plt.show() inside)")
        out = widgets.Output()
        out.outputs = tuple(_output(x) for x in items)
        outputs.append(out)
    stack = widgets.Stack(outputs, selected_index=start)
    slider = widgets.SelectionSlider(options=list(zip(labels, range(len(values)))), index=start,
                                     description=description, continuous_update=continuous_update,
                                     style={"description_width": "initial"})
    widgets.jslink((slider, "index"), (stack, "selected_index"))
    first = outputs[start].outputs[0]["data"]   # the picture shown where widgets cannot draw
    shown = "the first state" if start == 0 else f"the state {labels[start]}"
    box = _slider_box_class(widgets)([slider, stack])
    line = (f"Slider {description!r} over {len(values)} precomputed states ({labels[0]} ... "
            f"{labels[-1]}); {shown} is shown. The live slider appears once the notebook is "
            "trusted or its cells are run; in the book it works with no kernel.")
    # the picture of the state it opens on: a figure's PNG, else the state's own HTML (an
    # explorer, a row of tokens), which JupyterLab shows sanitized in an untrusted notebook
    still = ({"image/png": first["image/png"]} if "image/png" in first else
             {"text/html": first["text/html"]} if "text/html" in first else {})
    box._fallback = {"text/plain": line, **still}
    box._fallback_metadata = ({"image/png": outputs[start].outputs[0]["metadata"]["image/png"]}
                              if "image/png" in first else {})
    box._line = line
    return box


_SLIDER_BOX: Any = None


def _slider_box_class(widgets: Any) -> Any:
    """A VBox whose stored output carries a readable fallback (made once, after ipywidgets
    loads)."""
    global _SLIDER_BOX
    if _SLIDER_BOX is None:
        class PrecomputedSlider(widgets.VBox):
            """VBox([slider, stack]); displayed, it also carries a text/picture fallback."""

            _fallback: dict[str, str] = {}
            _fallback_metadata: dict[str, Any] = {}
            _line = ""

            def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
                data = super()._repr_mimebundle_(**kwargs)
                return {**data, **self._fallback}

            def _ipython_display_(self) -> None:
                from IPython.display import display

                display(self._repr_mimebundle_(), metadata=self._fallback_metadata, raw=True)
                if self._line:
                    display(_line_bundle(self._line), raw=True)

        _SLIDER_BOX = PrecomputedSlider
    return _SLIDER_BOX


LINE_CLASS = "attnlib-widget-fallback"


def _line_bundle(line: str) -> dict[str, str]:
    """The slider's line as HTML that shows only where styles are stripped (see above)."""
    import html

    return {"text/html": f'<style>.{LINE_CLASS}{{display:none}}</style>'
                         f'<p class="{LINE_CLASS}">{html.escape(line)}</p>',
            "text/plain": ""}
