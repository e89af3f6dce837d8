"""The live model's export: a trained GPT as ``live_model`` ships it to the page.

What the JavaScript forward pass supports (checked first), the weights under the
page's names packed into one little-endian blob (matrices in float16 or float32,
vectors in float32), and the laboratory's guided experiments, checked against the
model. The HTML output that carries them is :mod:`attnlib.viz.live`.
"""
from __future__ import annotations

import base64
from typing import Any, Mapping

import numpy as np
import torch

from .._checks import as_int
from ..models import GPT
from ..tokenizers import CharTokenizer

_DTYPES = {"float32": ("f32", np.float32), "float16": ("f16", np.float16)}


def _tensors(gpt: GPT) -> list[tuple[str, torch.Tensor]]:
    """The weights the JS forward pass reads, by its names (matrices are (out, in), like
    nn.Linear)."""
    named = [("tok", gpt.embed.tok_emb.weight)]
    # learned or sinusoidal: ship the (max_len, C) table itself
    if gpt.embed.pos_emb is not None:
        named.append(("pos", gpt.embed.pos_emb(torch.arange(gpt.cfg.max_len))))
    for i, layer in enumerate(gpt.layers):
        a = layer.self_attn
        parts = [("n1", layer.norm1), ("q", a.q_proj), ("k", a.k_proj), ("v", a.v_proj),
                 ("o", a.out_proj), ("n3", layer.norm3), ("f1", layer.ffn.fc1),
                 ("f2", layer.ffn.fc2)]
        for short, mod in parts:
            named.append((f"l{i}.{short}.w", mod.weight))
            if getattr(mod, "bias", None) is not None:
                named.append((f"l{i}.{short}.b", mod.bias))
    if gpt.norm_f is not None:
        named += [("nf.w", gpt.norm_f.weight), ("nf.b", gpt.norm_f.bias)]
    if gpt.lm_head.weight is not gpt.embed.tok_emb.weight:
        named.append(("head", gpt.lm_head.weight))
    return named


def _check_supported(gpt: Any, tokenizer: Any) -> None:
    if not isinstance(gpt, GPT):
        raise TypeError(f"gpt must be an attnlib.GPT, got {type(gpt).__name__}")
    if not isinstance(tokenizer, CharTokenizer):
        raise TypeError(f"tokenizer must be an attnlib.CharTokenizer (the JS tokenizer is one "
                        f"token per character), got {type(tokenizer).__name__}")
    cfg = gpt.cfg
    if tokenizer.vocab_size != cfg.vocab_size:
        raise ValueError(f"tokenizer has {tokenizer.vocab_size} entries but the model's "
                         f"vocab_size is {cfg.vocab_size}")
    unsupported = []
    if cfg.positional not in ("learned", "sinusoidal", "none"):
        unsupported.append(f"positional={cfg.positional!r}")
    if cfg.activation == "swiglu":
        unsupported.append("activation='swiglu'")
    if cfg.type_vocab_size or cfg.embedding_norm:
        unsupported.append("token types / embedding_norm")
    if getattr(cfg, "norm", "layernorm") != "layernorm":
        unsupported.append(f"norm={cfg.norm!r}")
    if getattr(cfg, "n_kv_heads", None) not in (None, cfg.n_heads):
        unsupported.append(f"n_kv_heads={cfg.n_kv_heads}")
    if cfg.sliding_window is not None:  # the page attends to every key
        unsupported.append(f"sliding_window={cfg.sliding_window}")
    if cfg.attention != "mha":
        unsupported.append(f"attention={cfg.attention!r}")
    if unsupported:
        raise ValueError("live_model's JavaScript forward pass supports learned/sinusoidal/no "
                         "positions, relu/gelu/gelu_tanh, LayerNorm, pre- or post-norm and "
                         f"multi-head attention; this model has {', '.join(unsupported)}")
    n_params = sum(p.numel() for p in gpt.parameters())
    if n_params > 1_000_000:
        raise ValueError(f"the model has {n_params} parameters; a page carries at most "
                         "1,000,000 (about 2 MB in float16): pass a smaller model")


def _pack(named: list[tuple[str, torch.Tensor]],
          dtype: str) -> tuple[list[dict], str, dict]:
    """Matrices in ``dtype``, vectors in float32, one little-endian blob (4-byte aligned
    offsets).

    Returns (index [{name, shape, dtype, offset}], base64 blob, {name: dequantized float32
    array})."""
    code, np_dtype = _DTYPES[dtype]
    index, chunks, values, offset = [], [], {}, 0
    for name, t in named:
        arr = t.detach().to("cpu", torch.float32).numpy()
        # matrices in the chosen dtype; vectors (LayerNorm, biases) and position tables in float32
        kind, nd = (code, np_dtype) if arr.ndim == 2 and name != "pos" else ("f32", np.float32)
        raw = arr.astype(np.dtype(nd).newbyteorder("<")).tobytes(order="C")
        index.append({"name": name, "shape": list(arr.shape), "dtype": kind, "offset": offset})
        values[name] = arr.astype(nd).astype(np.float32)
        pad = (-len(raw)) % 4
        chunks.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    return index, base64.b64encode(b"".join(chunks)).decode("ascii"), values


STEPS = ("embed", "norm1", "qkv", "weights", "out", "add1", "norm3", "ffn1", "ffn2", "normf",
         "logits")


def _experiments(experiments: Any, cfg: Any, tok: CharTokenizer) -> list[dict[str, Any]]:
    """Checked guided experiments (see live_model), as the page reads them."""
    if experiments is None:
        return []
    out = []
    for n, e in enumerate(experiments):
        where = f"experiments[{n}]"
        if not isinstance(e, Mapping) or not isinstance(e.get("sentence"), str):
            raise TypeError(f"{where} must be a dict with a 'sentence' string, got {e!r}")
        unknown = set(e) - {"sentence", "text", "off", "show", "lens", "step"}
        if unknown:
            raise ValueError(f"{where} has unknown keys {sorted(unknown)}")
        x: dict[str, Any] = {"sentence": e["sentence"]}
        if "text" in e:
            try:
                ids = tok.encode(e["text"])
            except ValueError as err:
                raise ValueError(f"{where}: text: {err}") from None
            if not 0 < len(ids) <= cfg.max_len:
                raise ValueError(f"{where}: text has {len(ids)} tokens; it needs 1 to "
                                 f"max_len={cfg.max_len}")
            x["text"] = e["text"]
        for key in ("off", "show"):
            pairs = e.get(key, [] if key == "off" else None)
            if pairs is None:
                continue
            pairs = [pairs] if key == "show" else list(pairs)
            for lh in pairs:
                if (len(lh) != 2 or any(as_int(v) is None for v in lh)
                        or not (0 <= int(lh[0]) < cfg.n_layers
                                and 0 <= int(lh[1]) < cfg.n_heads)):
                    raise ValueError(f"{where}: {key} needs (layer, head) pairs with "
                                     f"0 <= layer < {cfg.n_layers} and 0 <= head < {cfg.n_heads} "
                                     f"(counted from 0), got {lh!r}")
            x[key] = ([[int(a), int(b)] for a, b in pairs] if key == "off"
                      else [int(v) for v in pairs[0]])
        if e.get("lens") is not None:
            if as_int(e["lens"]) is None:
                raise TypeError(f"{where}: lens must be a position (int), got {e['lens']!r}")
            x["lens"] = int(e["lens"])
        if e.get("step") is not None:
            name, layer = e["step"]
            if name not in STEPS or as_int(layer) is None:
                raise ValueError(f"{where}: step must be (name, layer) with a name among "
                                 f"{STEPS}, got {e['step']!r}")
            x["step"] = [name, int(layer)]
        out.append(x)
    return out
