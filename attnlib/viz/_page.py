"""What every browser output of attnlib.viz is built from: its script and stylesheet
files, its colours, its JSON payload made safe for a <script> element, and the id of
its root element (a second copy on one page gets "-2", "-3", ...)."""
from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from ._common import check_cmap

_RENDERED: Counter = Counter()  # output uid -> HTML fragments made so far in this process


@lru_cache(maxsize=None)
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@lru_cache(maxsize=8)
def _palette(cmap: str) -> str:
    """256 colours of a matplotlib colormap as one hex string (6 characters per colour)."""
    import matplotlib

    cmap = check_cmap(cmap)
    colours = (matplotlib.colormaps[cmap] if isinstance(cmap, str)
               else cmap)(np.linspace(0.0, 1.0, 256))
    return "".join("%02x%02x%02x" % tuple(int(round(255 * c)) for c in rgba[:3])
                   for rgba in colours)


def _json_for_script(obj: Any) -> str:
    """JSON that is safe inside <script>: no '<', '>' or '&' can close the tag or start a
    comment."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _root_id(kind: str, uid: str, full_page: bool) -> str:
    """The id of an output's root element. The same output shown twice on one page must not
    repeat its id: count the copies made in this process; the first keeps the plain id (so
    stored outputs stay as they were), later ones get "-2", "-3", ... (deterministic in a
    fresh kernel). A standalone page holds one copy."""
    root_id = f"attnlib-{kind}-{uid}"
    if not full_page:
        _RENDERED[uid] += 1
        if _RENDERED[uid] > 1:
            root_id += f"-{_RENDERED[uid]}"
    return root_id
