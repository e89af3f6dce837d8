"""Pictures of attention: static matplotlib heatmaps and kernel-free browser outputs.

``heatmap`` draws one (Tq, Tk) matrix; ``explorer`` / ``attention_explorer`` ship every
layer/head/example state to the browser as compact numbers and draw them there (no kernel, no
network); ``precomputed_slider`` links an ipywidgets slider to precomputed outputs client-side.
The computing outputs work out their numbers in the page with one JavaScript attention engine
(engine.js, held equal to attnlib by a browser test): ``vector_explorer`` (the reader's own query,
keys and values), ``mask_explorer`` (a mask the reader clicks) and ``live_model`` (a small GPT and
its laboratory: heads switched off, the logit lens, a step-through); ``llm_lab`` runs a real LLM
(SmolLM2-135M-Instruct) in the page from its GGUF file, fetched when the reader asks;
``heads_grid`` shows every head of a real model at once; ``exercise`` grades the reader's answer
in the page.
"""
from .attention import attention_explorer
from .exercise import exercise
from .explorer import Explorer, decode_payload, explorer
from .heads import heads_grid
from .heatmap import heatmap
from .live import LiveModel, live_model
from .llm import llm_lab
from .mask import mask_explorer
from .vectors import vector_explorer
from .widgets import precomputed_slider

__all__ = ["heatmap", "explorer", "attention_explorer", "precomputed_slider", "Explorer",
           "decode_payload", "live_model", "LiveModel", "llm_lab", "vector_explorer",
           "mask_explorer", "heads_grid", "exercise"]
