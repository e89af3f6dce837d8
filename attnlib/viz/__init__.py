"""Pictures of attention: static matplotlib heatmaps and kernel-free browser explorers.

``heatmap`` draws one (Tq, Tk) matrix; ``explorer`` / ``attention_explorer`` ship every
layer/head/example state to the browser as compact numbers and draw them there (no kernel, no
network); ``precomputed_slider`` links an ipywidgets slider to precomputed outputs client-side.
"""
from .attention import attention_explorer
from .explorer import Explorer, decode_payload, explorer
from .heatmap import heatmap
from .live import LiveModel, live_model
from .heads import heads_grid
from .mask import mask_explorer
from .vectors import vector_explorer
from .widgets import precomputed_slider

__all__ = ["heatmap", "explorer", "attention_explorer", "precomputed_slider", "Explorer", "decode_payload",
           "live_model", "LiveModel", "vector_explorer", "mask_explorer", "heads_grid"]
