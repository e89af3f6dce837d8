"""GGUF files (llama.cpp's format) -> Hugging Face Llama names, float32, with no network.

A GGUF file holds metadata (sizes, the tokenizer, the chat template) and tensors, most
of them quantized in blocks of 32 numbers. The ``gguf`` package (llama.cpp's own Python
reader) parses the file; dequantization is done here, one short function per block type,
each tested equal to ``gguf.quants.dequantize``:

- F32: plain float32 (4 bytes per weight); F16: plain float16 (2 bytes).
- Q8_0, 34 bytes per block of 32: a scale ``d`` (float16) and 32 signed bytes ``q``:
  ``w = d * q``.
- Q4_1, 20 bytes per block of 32 (5 bits per weight): a scale ``d`` and a minimum ``m``
  (float16), then 32 four-bit ``q`` in 0..15 packed two per byte (low nibbles are
  weights 0-15, high nibbles 16-31): ``w = d * q + m``.

llama.cpp also reorders the rows of the query and key projections of Llama models (each
head's rows go from "first half, second half" to "interleaved pairs", which suits its
RoPE); :func:`unpermute_qk` undoes that, so the weights match Hugging Face's
``LlamaForCausalLM`` and the rotate-half RoPE of :class:`attnlib.RotaryEmbedding`.
"""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .._checks import as_int, as_real
from ..quant import dequantize_groupwise, unpack_q4_1
from ._common import MissingEntry

GGUF_PIP = "gguf"
BLOCK = 32  # weights per quantization block (Q4_1, Q8_0)


def open_gguf(path: str | Path) -> Any:
    """A ``gguf.GGUFReader`` of ``path``: ``.fields`` (metadata), ``.tensors`` (name, type,
    shape, raw data). A copy-on-write memory map: nothing is read until used."""
    if importlib.util.find_spec("gguf") is None:
        raise ModuleNotFoundError(f"reading GGUF files needs the package {GGUF_PIP!r}; "
                                  f"install it with:  pip install {GGUF_PIP}")
    import gguf

    class Reader(gguf.GGUFReader):
        # The reader slices its np.memmap ~10^6 times while parsing the 49k-token vocabulary; a
        # plain ndarray view of the same mapping makes each slice several times cheaper (1-2 s
        # -> ~0.4 s here). Nothing else changes: the arrays still point into the mapped file.
        @property
        def data(self) -> np.ndarray:
            return self._plain

        @data.setter
        def data(self, value: np.ndarray) -> None:
            self._plain = value.view(np.ndarray)

    try:  # "c": writable arrays (torch.from_numpy) without copying the file
        reader = Reader(str(path), "c")
    except (ValueError, IndexError, KeyError, OverflowError) as e:
        # the parser ran past the end, or garbage
        raise ValueError(f"{path} is truncated or damaged: the GGUF reader could not parse "
                         f"it ({e})") from None
    size = Path(path).stat().st_size
    for t in reader.tensors:  # a tensor whose bytes end past the file: cut short
        if t.data_offset + t.n_bytes > size:
            raise ValueError(f"{path} is truncated or damaged: tensor {t.name!r} needs bytes up to "
                             f"{t.data_offset + t.n_bytes:,} but the file has {size:,}")
    return reader


# --- Dequantization: one function per block type ----------------------------------------------
def _f16(b: Tensor) -> Tensor:
    """Two bytes per row of ``b`` (N, 2) uint8 -> (N, 1) float32, read as little-endian
    float16."""
    return b.contiguous().view(torch.float16).float()


def dequantize_q8_0(blocks: Tensor) -> Tensor:
    """Q8_0: ``w = d * q`` with one float16 scale ``d`` and 32 int8 ``q`` per block.

    Shapes:
        blocks (N, 34) uint8 -> (N, 32) float32.
    """
    d = _f16(blocks[:, :2])                                # (N, 1)
    q = blocks[:, 2:].contiguous().view(torch.int8)        # (N, 32)
    return q.float().mul_(d)


def dequantize_q4_1(blocks: Tensor) -> Tensor:
    """Q4_1: ``w = d * q + m``, scale ``d`` and minimum ``m`` (float16), 32 four-bit ``q``
    in 0..15.

    Byte j of the 16 packed bytes holds weight j in its low nibble and weight j + 16 in its
    high one. The block format and the arithmetic are attnlib.quant's (chapter 13 builds
    them by hand).

    Shapes:
        blocks (N, 20) uint8 -> (N, 32) float32.
    """
    return dequantize_groupwise(*unpack_q4_1(blocks)).view(-1, BLOCK)  # (N, 32)


def dequantize_f16(data: Tensor) -> Tensor:
    """F16: plain float16 values (as raw bytes or float16) -> float32."""
    return (data.contiguous().view(torch.float16).float() if data.dtype == torch.uint8
            else data.float())


def dequantize_f32(data: Tensor) -> Tensor:
    """F32: plain float32 values (as raw bytes or float32)."""
    return data.contiguous().view(torch.float32) if data.dtype == torch.uint8 else data.float()


# ggml type name -> (bytes per block, weights per block, function)
DEQUANTIZERS = {"F32": (4, 1, dequantize_f32), "F16": (2, 1, dequantize_f16),
                "Q8_0": (34, BLOCK, dequantize_q8_0), "Q4_1": (20, BLOCK, dequantize_q4_1)}


def dequantize(data: np.ndarray | Tensor, type_name: str, shape: tuple[int, ...]) -> Tensor:
    """A GGUF tensor's data -> float32 tensor of ``shape`` (torch order: rows first).

    Args:
        data: the tensor's bytes as the reader gives them (uint8 for quantized types, float32 or
            float16 for plain ones), any shape.
        type_name: ggml type name ("Q4_1", "Q8_0", "F16", "F32").
        shape: the wanted shape, e.g. (out_features, in_features) for a weight matrix.
    """
    if type_name not in DEQUANTIZERS:
        raise ValueError(f"GGUF tensor type {type_name!r} is not supported; "
                         f"supported: {sorted(DEQUANTIZERS)}")
    nbytes, per_block, fn = DEQUANTIZERS[type_name]
    t = torch.from_numpy(np.ascontiguousarray(data)) if isinstance(data, np.ndarray) else data
    if per_block == 1:
        return fn(t.reshape(-1)).reshape(shape)
    blocks = t.reshape(-1).view(torch.uint8).reshape(-1, nbytes)  # (N, bytes per block)
    return fn(blocks).reshape(shape)


# --- llama.cpp's row order of Q and K ----------------------------------------------------------
def unpermute_qk(w: Tensor, n_heads: int) -> Tensor:
    """Undo llama.cpp's reordering of a query or key projection's rows.

    Within each head (D rows), Hugging Face orders the rows as [first half | second half] (RoPE
    rotates dims i and i + D/2 together: rotate-half); llama.cpp's converter interleaves them as
    pairs (i, i + D/2) side by side (its RoPE rotates dims 2i and 2i + 1). This is the inverse of
    ``permute`` in llama.cpp's ``convert_hf_to_gguf.py``.

    Args:
        w: (n_heads * D, d_model) weight (or (n_heads * D,) bias) as stored in the GGUF file.
        n_heads: heads of this projection (the key/value head count for k).
    """
    D = w.shape[0] // n_heads
    rest = w.shape[1:]
    # rows (pair i, member 0/1) -> member 0 of every pair first, then member 1
    return (w.reshape(n_heads, D // 2, 2, *rest)  # (H, D/2, 2, ...)
            .transpose(1, 2)                       # (H, 2, D/2, ...)
            .reshape(w.shape))


# --- GGUF Llama -> Hugging Face names and config -----------------------------------------------
_HF_NAMES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
             "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
_HF_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm",
           "output": "lm_head"}


def hf_name(gguf_name: str) -> str:
    """"blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight" (llama.cpp -> HF
    Llama)."""
    parts = gguf_name.split(".")
    if parts[0] == "blk" and len(parts) == 4 and parts[2] in _HF_NAMES:
        return f"model.layers.{parts[1]}.{_HF_NAMES[parts[2]]}.{parts[3]}"
    if len(parts) == 2 and parts[0] in _HF_TOP:
        return f"{_HF_TOP[parts[0]]}.{parts[1]}"
    raise ValueError(f"GGUF tensor {gguf_name!r} has no Hugging Face Llama name")


def read_metadata(reader: Any) -> dict[str, Any]:
    """Every key/value of the file's header (strings, numbers, lists), by key."""
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def llama_hf_config(meta: dict[str, Any], source: str = "the GGUF file") -> dict[str, Any]:
    """A Hugging Face ``LlamaConfig``-style dict from a GGUF file's ``llama.*`` metadata.

    A missing or impossible size (no head count, 0 heads, a width the heads do not divide) is a
    ValueError that names the key and ``source`` (the file)."""
    if meta.get("general.architecture") != "llama":
        raise ValueError(f"{source}: expected a GGUF file of architecture 'llama', got "
                         f"{meta.get('general.architecture')!r}")

    def need(key: str, default: Any = None) -> Any:
        if f"llama.{key}" not in meta and default is None:
            raise MissingEntry(f"{source} has no metadata key 'llama.{key}', which a Llama GGUF "
                               f"file needs; the file is incomplete or was not written for llama")
        return meta.get(f"llama.{key}", default)

    def size(key: str, default: Any = None) -> int:
        value = need(key, default)
        if as_int(value) is None or as_int(value) < 1:
            raise ValueError(f"{source}: metadata 'llama.{key}' must be an int >= 1, got {value!r}")
        return as_int(value)

    d, heads = size("embedding_length"), size("attention.head_count")
    kv_heads = size("attention.head_count_kv", heads)
    if d % heads or heads % kv_heads:
        raise ValueError(f"{source}: metadata 'llama.attention.head_count'={heads} must divide "
                         f"'llama.embedding_length'={d}, and 'llama.attention.head_count_kv'="
                         f"{kv_heads} must divide it")
    eps = as_real(need("attention.layer_norm_rms_epsilon"))
    if eps is None or not 0 < eps < math.inf:
        raise ValueError(f"{source}: metadata 'llama.attention.layer_norm_rms_epsilon' must be a "
                         f"positive number, got {meta['llama.attention.layer_norm_rms_epsilon']!r}")
    theta = as_real(need("rope.freq_base", 10000.0))
    if theta is None or not 0 < theta < math.inf:
        raise ValueError(f"{source}: metadata 'llama.rope.freq_base' must be a positive number, "
                         f"got {meta['llama.rope.freq_base']!r}")
    if "llama.vocab_size" in meta:
        vocab = size("vocab_size")
    elif "tokenizer.ggml.tokens" in meta:
        vocab = len(meta["tokenizer.ggml.tokens"])
    else:
        raise MissingEntry(f"{source} has neither 'llama.vocab_size' nor 'tokenizer.ggml.tokens' "
                           f"in its metadata: the vocabulary size is unknown")
    return {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "vocab_size": vocab, "hidden_size": d,
        "intermediate_size": size("feed_forward_length"), "num_hidden_layers": size("block_count"),
        "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "head_dim": d // heads, "hidden_act": "silu",
        "max_position_embeddings": size("context_length"),
        "rms_norm_eps": eps, "rope_theta": theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": theta},
        "attention_bias": False, "mlp_bias": False,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
    }


def llama_hf_state(reader: Any, config: dict[str, Any]) -> dict[str, Tensor]:
    """Every tensor of a GGUF Llama file, float32, under Hugging Face ``LlamaForCausalLM`` names.

    Q and K rows are put back in Hugging Face order (:func:`unpermute_qk`). ``lm_head.weight`` is
    present only when the file has an ``output.weight`` (otherwise the head is tied to the
    embeddings, ``config["tie_word_embeddings"]`` is True).
    """
    heads = {"attn_q": config["num_attention_heads"], "attn_k": config["num_key_value_heads"]}
    out = {}
    for t in reader.tensors:
        shape = tuple(int(s) for s in reversed(t.shape))  # ggml lists dims innermost first
        w = dequantize(t.data, t.tensor_type.name, shape)
        kind = t.name.split(".")[2] if t.name.startswith("blk.") else None
        if kind in heads:
            w = unpermute_qk(w, heads[kind])
        out[hf_name(t.name)] = w
    config["tie_word_embeddings"] = "lm_head.weight" not in out
    return out


def read_llama_gguf(path: str | Path) -> tuple[dict[str, Any], dict[str, Tensor], dict[str, Any]]:
    """Read a GGUF Llama file: (Hugging Face config dict, HF-named float32 state dict,
    metadata).

    The metadata dict holds every header key (``tokenizer.ggml.tokens``,
    ``tokenizer.chat_template``, ...), for building the tokenizer.
    """
    reader = open_gguf(path)
    meta = read_metadata(reader)
    config = llama_hf_config(meta, str(path))
    return config, llama_hf_state(reader, config), meta
