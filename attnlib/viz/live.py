"""A live model in the page: a small trained attnlib.GPT whose forward pass runs in the browser.

``live_model(gpt, tokenizer)`` ships the weights (float32 or float16, base64), the
character vocabulary and the scripts in one self-contained HTML fragment: no kernel, no
CDN, no network. The scripts: ``live_model.js`` (the forward pass in plain JavaScript
with typed arrays and its KV cache, on the shared attention engine ``engine.js``),
``sampling.js`` (seeded sampling), ``kit.js`` and ``heatmap_keys.js`` (the DOM kit every
output draws with), ``live_lab.js`` (the laboratory) and ``live.js`` (the page, which
starts the output). The reader types text and sees every layer's and head's attention
over it, the next-token probabilities, and generation step by step with the KV cache
growing. Where scripts do not run (GitHub's notebook view, an untrusted notebook) a
static SVG of the first state shows instead.

This module is the output (``LiveModel``, its HTML and its still picture); what the page
can run, the packed weights and the guided experiments are :mod:`attnlib.viz.live_export`.
"""
from __future__ import annotations

import hashlib
import html
import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import torch

from .._checks import as_int, as_real
from ..lora import LoRALinear, merge_lora
from ..models import GPT
from ..tokenizers import CharTokenizer
from ._common import HtmlOutput, check_cmap, standalone_page
from ._page import _asset, _json_for_script, _palette, _root_id
from .live_export import _DTYPES, _check_supported, _experiments, _pack, _tensors
from .live_export import STEPS  # noqa: F401 (importable from here, as before)

__all__ = ["LiveModel", "live_model"]

# in the order they run: each file finds what it uses defined by the ones before it
_LIVE_FILES = ("engine.js", "kit.js", "heatmap_keys.js", "sampling.js", "weights.js",
               "live_model.js",
               "live_lab.js", "live.js")
_LIVE_SCRIPTS = "\n".join(_asset(name) for name in _LIVE_FILES)


class LiveModel(HtmlOutput):
    """A GPT exported to the browser. Display it (last line of a cell) to show it.

    Attributes:
        payload: the JSON-able dict shipped to the page (config, vocabulary, packed weights).
        uid: a content hash; element ids derive from it (the same model gives the same HTML).
    """

    def __init__(self, payload: dict[str, Any], gpt: GPT, values: dict[str, np.ndarray],
                 fallback: str):
        self.payload = payload
        self._gpt, self._values, self._fallback = gpt, values, fallback
        self._json = _json_for_script(payload)
        self.uid = hashlib.sha1(self._json.encode("utf-8")).hexdigest()[:12]

    def __repr__(self) -> str:
        c = self.payload["config"]
        return (f"LiveModel({self.payload['title']!r}, L={c['L']}, H={c['H']}, C={c['C']}, "
                f"vocab={c['V']}, max_len={c['T']}, weights={self.payload['weightsDtype']}, "
                f"{self.nbytes // 1024} KiB)")

    @property
    def nbytes(self) -> int:
        """Size of the HTML fragment in bytes (what one page carries)."""
        return len(self._fragment(f"attnlib-live-{self.uid}").encode("utf-8"))

    def reference_model(self) -> GPT:
        """A copy of the GPT holding exactly the shipped (dequantized) weights: what the page
        computes."""
        import copy

        ref = copy.deepcopy(self._gpt).float().cpu().eval()
        with torch.no_grad():
            for name, t in _tensors(ref):
                if name != "pos":  # positions ship in float32: the model's own table is exact
                    t.copy_(torch.from_numpy(self._values[name]).view_as(t))
        return ref

    def to_html(self, *, full_page: bool = False) -> str:
        """The self-contained fragment; ``full_page=True`` wraps it in a minimal HTML
        document. A second copy shown in one kernel gets the root id suffix "-2", "-3", ...
        (as an explorer)."""
        root_id = _root_id("live", self.uid, full_page)
        fragment = self._fragment(root_id)
        if not full_page:
            return fragment
        return standalone_page(fragment, html.escape(self.payload["title"]), 760)

    def _fragment(self, root_id: str) -> str:
        title = html.escape(self.payload["title"])
        return (
            f'<div class="attnlib-explorer attnlib-live" id="{root_id}" '
            f'data-attnlib-uid="{self.uid}" data-state="" role="group" aria-label="{title}">'
            f"<style>{_asset('explorer.css')}{_asset('kit.css')}{_asset('live.css')}</style>"
            f'<div class="attnlib-noscript">{self._fallback}</div>'
            f'<script type="application/json" class="attnlib-live-data">{self._json}</script>'
            f"<script>{_LIVE_SCRIPTS}</script>"
            "</div>"
        )


def live_model(gpt: GPT, tokenizer: CharTokenizer, *, title: Optional[str] = None,
               prompt: str = "And God said", weights: str = "float16",
               temperature: float = 0.8, top_k: int = 10, top_p: float = 1.0, seed: int = 0,
               cmap: Optional[str] = None, lab: bool = True,
               experiments: Optional[Sequence[Mapping[str, Any]]] = None) -> LiveModel:
    """Export a small trained GPT and its character tokenizer to a live page.

    Args:
        gpt: an attnlib.GPT (learned/sinusoidal/no positions, relu/gelu/gelu_tanh, LayerNorm,
            pre- or post-norm, tied or untied head; LoRA adapters are folded in); tokenizer:
            its attnlib.CharTokenizer.
        title: shown above; prompt: the text the page starts with.
        weights: "float16" (half the bytes; LayerNorm and biases stay float32) or "float32".
        temperature, top_k, top_p, seed: the sampling controls' starting values (top_k 0 =
            off).
        cmap: a matplotlib colormap name for the attention (default viridis).
        lab: add the laboratory under the model: switch heads off (each head's output zeroed
            before out_proj) and compare the next-token probabilities and the greedy
            continuation; the logit lens (norm_f and lm_head after every layer); one token
            through the network, step by step, with each step's numbers, shape and attnlib
            module.
        experiments: guided experiments for the laboratory, each a dict with ``sentence``
            (what to try, shown with a button that sets it up) and any of ``text`` (the text
            to type), ``off`` (heads to switch off, [(layer, head)], counted from 0), ``show``
            ((layer, head) drawn in the model's matrix), ``lens`` (the position the lens
            shows; -1 = the last) and ``step`` ((step name, layer) where the step-through
            starts, e.g. ("weights", 0)).

    Returns:
        A ``LiveModel``; display it. ``.reference_model()`` is a GPT with the shipped weights.
    """
    if isinstance(gpt, GPT) and any(isinstance(m, LoRALinear) for m in gpt.modules()):
        gpt = merge_lora(gpt)  # the page runs plain weights: the adapters folded in
    _check_supported(gpt, tokenizer)
    cmap = "viridis" if cmap is None else check_cmap(cmap)
    if weights not in _DTYPES:
        raise ValueError(f"weights must be one of {sorted(_DTYPES)}, got {weights!r}")
    for name, x in (("temperature", temperature), ("top_p", top_p)):
        if as_real(x) is None:
            raise TypeError(f"{name} must be a number, got {name}={x!r}")
    if not (0 <= temperature < math.inf and isinstance(top_k, int) and top_k >= 0
            and 0 < top_p <= 1):
        raise ValueError(f"need a finite temperature >= 0, an int top_k >= 0 and "
                         f"0 < top_p <= 1; got temperature={temperature}, top_k={top_k!r}, "
                         f"top_p={top_p}")
    if as_int(seed) is None:
        raise TypeError(f"seed must be an int, got seed={seed!r}")
    for name, text in (("title", title), ("prompt", prompt)):
        if not isinstance(text, str) and not (name == "title" and text is None):
            raise TypeError(f"{name} must be a str, got {name}={text!r}")
    cfg = gpt.cfg
    try:
        prompt_ids = tokenizer.encode(prompt)
    except ValueError as e:  # the tokenizer names the character; say it is the prompt's
        raise ValueError(f"prompt: {e}") from None
    if not 0 < len(prompt_ids) <= cfg.max_len:
        raise ValueError(f"prompt has {len(prompt_ids)} tokens; it needs 1 to "
                         f"max_len={cfg.max_len}")
    was_training = gpt.training
    gpt.eval()
    try:
        with torch.no_grad():
            named = _tensors(gpt)
            broken = [n for n, t in named if not bool(torch.isfinite(t).all())]
            if broken:
                raise ValueError(f"the model has NaN or inf weights ({', '.join(broken[:3])}); the "
                                 f"page would only show NaN")
            index, blob, values = _pack(named, weights)
    finally:
        gpt.train(was_training)
    payload = {
        "v": 1, "title": title or "A tiny GPT, live in your browser",
        "config": {"V": cfg.vocab_size, "C": cfg.d_model, "H": cfg.n_heads,
                   "L": cfg.n_layers, "T": cfg.max_len, "F": cfg.d_ff,
                   "eps": cfg.layer_norm_eps, "act": cfg.activation,
                   "normFirst": bool(cfg.norm_first)},
        "vocab": list(tokenizer.itos), "weightsDtype": weights, "tensors": index, "blob": blob,
        "prompt": prompt, "sampling": {"temperature": float(temperature), "topK": int(top_k),
                                       "topP": float(top_p), "seed": int(seed)},
        "palette": _palette(cmap), "paletteDiv": _palette("RdBu_r"),
        "lab": bool(lab), "experiments": _experiments(experiments, cfg, tokenizer),
    }
    live = LiveModel(payload, gpt, values, "")
    live._fallback = _fallback(live, prompt, prompt_ids, tokenizer)
    return live


def _fallback(live: LiveModel, prompt: str, ids: list[int], tok: CharTokenizer) -> str:
    """Static first state (for hosts that run no scripts): layer 0 head 0 as SVG, top next
    tokens."""
    from .live_static import static_picture

    ref = live.reference_model()
    with torch.no_grad():
        out = ref(torch.tensor([ids]), need_weights=True)
    weights = out.attentions[0][0, 0].double().numpy()  # (T, T)
    probs = torch.softmax(out.logits[0, -1].double(), -1)
    top = torch.topk(probs, min(5, probs.numel()))
    nxt = [(tok.itos[int(i)], float(p)) for p, i in zip(top.values, top.indices)]
    return static_picture(weights, list(prompt), nxt, live.payload["palette"],
                          live.payload["title"])
