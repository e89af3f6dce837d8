"""``precomputed_slider``: an ipywidgets slider that moves in the static book (client-side jslink)."""
from __future__ import annotations

import base64
import io
from typing import Any, Callable, Sequence


def _bundle(obj: Any) -> dict[str, Any]:
    """A display bundle for what ``render`` returned (figures become small PNGs, then closed)."""
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    if isinstance(obj, Axes):
        obj = obj.figure
    if isinstance(obj, Figure):
        buf = io.BytesIO()
        obj.savefig(buf, format="png", dpi=80, metadata={"Software": None})
        plt.close(obj)
        return {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                "text/plain": f"<Figure size {obj.get_figwidth():g}x{obj.get_figheight():g} in>"}
    if hasattr(obj, "_repr_mimebundle_"):
        data = obj._repr_mimebundle_()
        return dict(data[0] if isinstance(data, tuple) else data)
    if hasattr(obj, "_repr_html_"):
        return {"text/html": obj._repr_html_(), "text/plain": repr(obj)}
    return {"text/plain": str(obj)}


def precomputed_slider(values: Sequence[Any], render: Callable[[Any], Any], *,
                       description: str = "value", continuous_update: bool = True,
                       value: Any = None) -> Any:
    """A slider over ``values`` linked in the browser to a ``Stack`` of precomputed outputs.

    ``render(v)`` returns what to show for ``v``: a matplotlib Figure/Axes (stored as a PNG at 80 dpi
    and closed: keep figures small, the PNGs live in the notebook's widget state), or anything with
    ``_repr_html_`` / ``_repr_mimebundle_`` (e.g. an explorer), or text; figures it opens without
    returning them are captured too (do not call ``plt.show()`` inside). The slider's index is
    ``jslink``ed to the Stack's ``selected_index``, so it moves with no kernel (static book, Colab).

    ``value`` is the value the slider opens on (one of ``values``; default the first): open on the
    typical setting, not on the end of the range.

    Where widgets cannot be drawn (an untrusted notebook in JupyterLab, GitHub's notebook view),
    the output shows the first state's picture (when it is a figure) and a line that says what the
    slider is and how to get it live, instead of ``VBox(children=...)``.

    Returns:
        ``ipywidgets.VBox([slider, stack])``; ``.children[0]`` is the slider, ``.children[1]`` the Stack.
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
            raise ValueError(f"render({v!r}) returned None and drew no figure; return a matplotlib "
                             "Figure/Axes or a displayable object (and do not call plt.show() inside)")
        out = widgets.Output()
        out.outputs = tuple({"output_type": "display_data", "data": _bundle(x), "metadata": {}} for x in items)
        outputs.append(out)
    stack = widgets.Stack(outputs, selected_index=start)
    slider = widgets.SelectionSlider(options=list(zip(labels, range(len(values)))), index=start,
                                     description=description, continuous_update=continuous_update,
                                     style={"description_width": "initial"})
    widgets.jslink((slider, "index"), (stack, "selected_index"))
    first = outputs[start].outputs[-1]["data"]   # the picture shown where widgets cannot draw
    shown = "the first state" if start == 0 else f"the state {labels[start]}"
    box = _slider_box_class(widgets)([slider, stack])
    box._fallback = {"text/plain": (
        f"Slider {description!r} over {len(values)} precomputed states ({labels[0]} ... {labels[-1]}); "
        f"{shown} is shown. The live slider appears once the notebook is trusted or its "
        f"cells are run; in the book it works with no kernel."),
        **({"image/png": first["image/png"]} if "image/png" in first else {})}
    return box


_SLIDER_BOX: Any = None


def _slider_box_class(widgets: Any) -> Any:
    """A VBox whose stored output carries a readable fallback (made once, after ipywidgets loads)."""
    global _SLIDER_BOX
    if _SLIDER_BOX is None:
        class PrecomputedSlider(widgets.VBox):
            """VBox([slider, stack]); displayed, it also carries a text/picture fallback."""

            _fallback: dict[str, str] = {}

            def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
                data = super()._repr_mimebundle_(**kwargs)
                return {**data, **self._fallback}

        _SLIDER_BOX = PrecomputedSlider
    return _SLIDER_BOX
