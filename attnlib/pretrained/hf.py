"""Hugging Face ``transformers`` models -> attnlib models with the same outputs.

``gpt_parts`` / ``encoder_parts`` turn an already-built ``transformers`` model (GPT2LMHeadModel,
LlamaForCausalLM or DeepseekV3ForCausalLM, BertModel) into an attnlib config and state dict;
``GPT.from_hf`` and ``Encoder.from_hf`` load them into a model (this module never imports
attnlib.models). ``transformers`` itself is never imported here: the functions read the model's
config and state dict. The Llama family's conversion is in :mod:`attnlib.pretrained.llama`,
DeepSeek-V3's in :mod:`attnlib.pretrained.deepseek`.
"""
from __future__ import annotations

from typing import Any

from torch import Tensor

from ..config import TransformerConfig
from ._common import Settings, Used
from .deepseek import deepseek_config, deepseek_state
from .llama import llama_config, llama_state, mistral_config
from .names import NAMES

# Hugging Face activation names -> TransformerConfig.activation
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                   "relu": "relu"}


# --- Configs: Hugging Face config (as a dict) -> TransformerConfig -----------------------------
def _activation(name: str) -> str:
    if name not in _HF_ACTIVATIONS:
        raise ValueError(f"unsupported Hugging Face activation {name!r}; supported: "
                         f"{sorted(_HF_ACTIVATIONS)}")
    return _HF_ACTIVATIONS[name]


def bert_config(hf: dict[str, Any]) -> Any:
    """TransformerConfig of a BERT-family encoder (post-norm, token types, embedding LayerNorm)."""
    hf = Settings(hf, "BERT config")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"only absolute (learned) positions are supported, got position_embedding_type="
            f"{hf['position_embedding_type']!r}"
        )
    if hf.get("is_decoder", False) or hf.get("add_cross_attention", False):
        raise ValueError("a BERT decoder / cross-attention config cannot load into attnlib.Encoder")
    return TransformerConfig(
        vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_heads=hf["num_attention_heads"],
        n_layers=hf["num_hidden_layers"], d_ff=hf["intermediate_size"],
        max_len=hf["max_position_embeddings"], positional="learned",
        activation=_activation(hf["hidden_act"]), norm_first=False, dropout=0.0, bias=True,
        tie_weights=False, layer_norm_eps=hf["layer_norm_eps"],
        type_vocab_size=hf.get("type_vocab_size", 0), embedding_norm=True,
        pad_id=hf.get("pad_token_id") or 0,
    )


def gpt2_config(hf: dict[str, Any]) -> Any:
    """TransformerConfig of a GPT-2 decoder (pre-norm, tanh-GELU, learned positions, tied head)."""
    hf = Settings(hf, "GPT-2 config")
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
                 "add_cross_attention"):
        if hf.get(flag, False):
            raise ValueError(f"GPT-2 config option {flag}=True is not supported by attnlib.GPT")
    if not hf.get("scale_attn_weights", True):
        raise ValueError("GPT-2 with scale_attn_weights=False (no 1/sqrt(d_k)) is not supported "
                         "by attnlib.GPT")
    d = hf["n_embd"]
    return TransformerConfig(
        vocab_size=hf["vocab_size"], d_model=d, n_heads=hf["n_head"], n_layers=hf["n_layer"],
        d_ff=hf.get("n_inner") or 4 * d, max_len=hf["n_positions"], positional="learned",
        activation=_activation(hf["activation_function"]), norm_first=True, dropout=0.0, bias=True,
        tie_weights=hf.get("tie_word_embeddings", True), layer_norm_eps=hf["layer_norm_epsilon"],
    )



# --- Parameters: Hugging Face names -> attnlib names -------------------------------------------
def _bert_state(hf: dict[str, Tensor], n_layers: int) -> dict[str, Tensor]:
    """attnlib Encoder state dict from a BertModel state dict (names without a ``bert.`` prefix)."""
    a, out = NAMES, {}
    hf = Used({k: v for k, v in hf.items()
               if not k.startswith("pooler.") and k != "embeddings.position_ids"})
    out[a["emb"]] = hf["embeddings.word_embeddings.weight"]
    out[a["pos"]] = hf["embeddings.position_embeddings.weight"]
    out[a["type"]] = hf["embeddings.token_type_embeddings.weight"]
    for p in ("weight", "bias"):
        out[f"{a['emb_norm']}.{p}"] = hf[f"embeddings.LayerNorm.{p}"]
    for i in range(n_layers):
        L, h = a["layer"].format(i=i), f"encoder.layer.{i}."
        for p in ("weight", "bias"):  # nn.Linear weights are (out, in) on both sides: as they are
            out[f"{L}.{a['q']}.{p}"] = hf[h + f"attention.self.query.{p}"]
            out[f"{L}.{a['k']}.{p}"] = hf[h + f"attention.self.key.{p}"]
            out[f"{L}.{a['v']}.{p}"] = hf[h + f"attention.self.value.{p}"]
            out[f"{L}.{a['o']}.{p}"] = hf[h + f"attention.output.dense.{p}"]
            # post-norm: norm1 after attention, norm2 after the FFN
            out[f"{L}.{a['norm1']}.{p}"] = hf[h + f"attention.output.LayerNorm.{p}"]
            out[f"{L}.{a['fc1']}.{p}"] = hf[h + f"intermediate.dense.{p}"]
            out[f"{L}.{a['fc2']}.{p}"] = hf[h + f"output.dense.{p}"]
            out[f"{L}.{a['enc_norm2']}.{p}"] = hf[h + f"output.LayerNorm.{p}"]
    hf.check_all_used("the BERT checkpoint")
    return out


def _gpt2_state(hf: dict[str, Tensor], n_layers: int, d_model: int) -> dict[str, Tensor]:
    """attnlib GPT state dict from a GPT2LMHeadModel state dict.

    GPT-2 uses ``Conv1D`` layers whose weight is (in, out), the transpose of ``nn.Linear``'s, and
    a single ``c_attn`` projection producing [q | k | v] side by side (C -> 3C).
    """
    a, out, C = NAMES, {}, d_model
    hf = Used({k.removeprefix("transformer."): v for k, v in hf.items()})
    out[a["emb"]] = hf["wte.weight"]
    out[a["pos"]] = hf["wpe.weight"]
    for i in range(n_layers):
        L, h = a["layer"].format(i=i), f"h.{i}."
        w_qkv = hf[h + "attn.c_attn.weight"]  # (C, 3C): columns [q | k | v]
        b_qkv = hf[h + "attn.c_attn.bias"]  # (3C,)
        for j, name in enumerate(("q", "k", "v")):
            out[f"{L}.{a[name]}.weight"] = w_qkv[:, j * C:(j + 1) * C].t()  # (C, C) as (out, in)
            out[f"{L}.{a[name]}.bias"] = b_qkv[j * C:(j + 1) * C]
        for ours, theirs in (("o", "attn.c_proj"), ("fc1", "mlp.c_fc"), ("fc2", "mlp.c_proj")):
            # Conv1D (in, out) -> Linear (out, in)
            out[f"{L}.{a[ours]}.weight"] = hf[h + theirs + ".weight"].t()
            out[f"{L}.{a[ours]}.bias"] = hf[h + theirs + ".bias"]
        for p in ("weight", "bias"):  # pre-norm: ln_1 before attention, ln_2 before the MLP
            out[f"{L}.{a['norm1']}.{p}"] = hf[h + f"ln_1.{p}"]
            out[f"{L}.{a['dec_norm2']}.{p}"] = hf[h + f"ln_2.{p}"]
    for p in ("weight", "bias"):
        out[f"{a['norm_f']}.{p}"] = hf[f"ln_f.{p}"]
    out[a["head"]] = hf["lm_head.weight"] if "lm_head.weight" in hf else hf["wte.weight"]
    hf.check_all_used("the GPT-2 checkpoint")
    return out


def encoder_parts(model: Any) -> tuple[TransformerConfig, dict[str, Tensor], str]:
    """The config and attnlib state dict of a ``transformers`` ``BertModel`` (``Encoder.from_hf``).

    Args:
        model: a ``BertModel`` (or a ``BertFor...`` model: its ``.bert`` is used; the pooler and
            task heads are not copied). Absolute positions only.

    Returns:
        (config: post-norm, token types, embedding LayerNorm; state dict; the model's class name).
        Raises ``TypeError`` for a non-BERT model, ``ValueError`` for unsupported options.
    """
    base = getattr(model, "bert", model)  # accept BertFor... heads too: use their BertModel
    if getattr(getattr(base, "config", None), "model_type", None) != "bert":
        raise TypeError(f"Encoder.from_hf expects a transformers BertModel, got "
                        f"{type(model).__name__}")
    cfg = bert_config(base.config.to_dict())
    return cfg, _bert_state(base.state_dict(), cfg.n_layers), type(model).__name__


def gpt_parts(model: Any) -> tuple[TransformerConfig, dict[str, Tensor], str]:
    """The config and attnlib state dict of a ``transformers`` ``GPT2LMHeadModel``,
    ``LlamaForCausalLM``, ``MistralForCausalLM`` or ``DeepseekV3ForCausalLM`` (``GPT.from_hf``).

    GPT-2's ``Conv1D`` weights are transposed and ``c_attn`` is split into q/k/v: pre-norm, tanh
    GELU, learned positions, tied head. Llama (:mod:`attnlib.pretrained.llama`): pre-RMSNorm,
    RoPE, SwiGLU, grouped-query attention, tied or untied head; Mistral: Llama plus a window.
    DeepSeek-V3 with dense layers only (:mod:`attnlib.pretrained.deepseek`): a Llama layout with
    multi-head latent attention.

    Returns:
        (config, state dict, the model's class name). Raises ``TypeError`` for another model
        class, ``ValueError`` for unsupported options.
    """
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in DECODERS or not hasattr(model, "lm_head"):
        raise TypeError(f"GPT.from_hf expects a transformers GPT2LMHeadModel, LlamaForCausalLM, "
                        f"MistralForCausalLM or DeepseekV3ForCausalLM, got {type(model).__name__}")
    config, state = DECODERS[model_type]
    hf = model.config.to_dict()
    cfg = config(hf)
    # a checkpoint whose RoPE dims are interleaved pairs says so; its conversion reorders them
    pairs = {"rope_interleave": bool(hf["rope_interleave"])} if "rope_interleave" in hf else {}
    return cfg, state(model.state_dict(), cfg, **pairs), type(model).__name__


# model_type -> (config from a config dict, state dict from a state dict): what GPT.from_hf reads
DECODERS = {
    "gpt2": (gpt2_config, lambda sd, cfg: _gpt2_state(sd, cfg.n_layers, cfg.d_model)),
    "llama": (llama_config, llama_state),
    "mistral": (mistral_config, llama_state),   # Llama plus a sliding window
    "deepseek_v3": (deepseek_config, deepseek_state),  # dense layers only
}
