"""Llama-family decoders (Llama, SmolLM2) in two plain steps: a config dict and a state dict
with Hugging Face names in, attnlib's out. Other sources of Llama weights (a GGUF file,
safetensors) reuse them without building a ``transformers`` model.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from torch import Tensor

from ..config import TransformerConfig
from ._common import Settings, Used, final_norm_and_head
from .names import NAMES

# attnlib's name -> Hugging Face's, in each layer
_LLAMA_LAYER = (("q", "self_attn.q_proj"), ("k", "self_attn.k_proj"), ("v", "self_attn.v_proj"),
                ("o", "self_attn.o_proj"), ("fc1", "mlp.up_proj"), ("fc2", "mlp.down_proj"),
                ("gate", "mlp.gate_proj"))


def _rope_theta(hf: dict[str, Any]) -> float:
    """RoPE base of a Llama config; refuses RoPE scaling (Llama 3.1 "llama3", "linear", "yarn").

    transformers < 5 puts ``rope_theta`` and ``rope_scaling`` at the top level; 5.x nests them in
    ``rope_parameters`` (with ``rope_type`` "default" when there is no scaling)."""
    params = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling")
    rope_type = params.get("rope_type", "default")
    if scaling is not None or rope_type != "default":
        raise ValueError(f"RoPE scaling is not supported by attnlib (plain RoPE only): got "
                         f"rope_scaling={scaling!r}, rope_parameters={params!r}; use a checkpoint "
                         f"with rope_scaling=None")
    theta = hf.get("rope_theta", params.get("rope_theta"))
    if theta is None:
        raise ValueError("the Llama config has no rope_theta (neither at the top level nor in "
                         "rope_parameters)")
    return float(theta)


def llama_config(hf_config: dict[str, Any], name: str = "Llama") -> TransformerConfig:
    """TransformerConfig of a Llama-family decoder (``LlamaConfig.to_dict()``).

    Pre-norm with RMSNorm (eps ``rms_norm_eps``), RoPE with base ``rope_theta``, SwiGLU FFN of
    width ``intermediate_size``, grouped-query attention with ``num_key_value_heads`` key/value
    heads.

    Args:
        hf_config: the config as a dict. Keys read: hidden_size, num_attention_heads,
            num_key_value_heads, num_hidden_layers, intermediate_size, max_position_embeddings,
            rms_norm_eps, rope_theta (or rope_parameters), vocab_size, tie_word_embeddings,
            hidden_act, attention_bias, mlp_bias, head_dim, rope_scaling.
        name: the family, as error messages call it ("Llama", "Mistral").

    Returns:
        TransformerConfig. attnlib has one ``bias`` switch: it is on when attention_bias or
        mlp_bias is (:func:`llama_state` then gives the bias-free projections zero biases, which
        is exact).
        Raises ValueError for options attnlib cannot reproduce (RoPE scaling, an activation other
        than silu, head_dim != hidden_size / num_attention_heads).
    """
    hf = Settings(hf_config, f"{name} config")
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{name} with hidden_act={hf['hidden_act']!r} is not supported; attnlib's "
                         f"SwiGLU uses silu")
    any_bias = bool(hf.get("attention_bias", False)) or bool(hf.get("mlp_bias", False))
    if hf.get("pretraining_tp", 1) != 1:
        raise ValueError(f"pretraining_tp={hf['pretraining_tp']} (sliced projections) is not "
                         f"supported; use 1")
    d, heads = hf["hidden_size"], hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or d // heads
    if head_dim * heads != d:
        raise ValueError(f"head_dim={head_dim} x num_attention_heads={heads} != hidden_size={d}: "
                         f"attnlib needs head_dim = hidden_size / num_attention_heads")
    return TransformerConfig(
        vocab_size=hf["vocab_size"], d_model=d, n_heads=heads, n_layers=hf["num_hidden_layers"],
        d_ff=hf["intermediate_size"], max_len=hf["max_position_embeddings"], positional="rope",
        activation="swiglu", norm_first=True, dropout=0.0, bias=any_bias,
        tie_weights=bool(hf.get("tie_word_embeddings", False)), layer_norm_eps=hf["rms_norm_eps"],
        n_kv_heads=hf.get("num_key_value_heads") or heads, norm="rmsnorm",
        rope_base=_rope_theta(hf),
    )


def mistral_config(hf_config: dict[str, Any]) -> TransformerConfig:
    """TransformerConfig of a Mistral decoder (``MistralConfig.to_dict()``): Llama's, plus its
    ``sliding_window`` (query i sees keys i-W+1 .. i, transformers' convention; None: every key).
    The parameters are Llama's (:func:`llama_state`). Raises ValueError for what attnlib cannot
    reproduce: Llama's refusals, and ``layer_types`` that mix windowed and full layers."""
    hf = Settings(hf_config, "Mistral config")
    window = hf.get("sliding_window")
    kinds = set(hf.get("layer_types") or ())  # newer checkpoints may name each layer's kind
    if kinds - {"sliding_attention" if window is not None else "full_attention"}:
        raise ValueError(f"layer_types={hf['layer_types']!r} with sliding_window={window!r}: "
                         f"attnlib gives every layer the same window; use a config whose layers "
                         f"all match it")
    return dataclasses.replace(llama_config(hf, "Mistral"), sliding_window=window)  # validated


def llama_state(sd: dict[str, Tensor], cfg: TransformerConfig) -> dict[str, Tensor]:
    """attnlib GPT state dict from a LlamaForCausalLM state dict.

    Args:
        sd: tensors by Hugging Face name, with the ``model.`` prefix (``model.embed_tokens.weight``,
            ``model.layers.{i}.self_attn.q_proj.weight``, ..., ``model.norm.weight``,
            ``lm_head.weight``). ``lm_head.weight`` may be left out when ``cfg.tie_weights``.
        cfg: the model's TransformerConfig (from :func:`llama_config`).

    Returns:
        dict for ``attnlib.GPT(cfg).load_state_dict`` (tensors as given, not copied). Raises
        ValueError for a missing or a leftover parameter.

    HF's q/k/v/o, gate/up/down are ``nn.Linear`` like ours (weights (out, in)) and its rotate-half
    RoPE is attnlib's, so every tensor is copied as it is: up_proj -> ffn.fc1, gate_proj ->
    ffn.gate, down_proj -> ffn.fc2; input_layernorm -> norm1, post_attention_layernorm -> norm3.
    """
    a, out = NAMES, {}
    # (old checkpoints carry RoPE's inv_freq buffers: not parameters)
    hf = Used({k: v for k, v in sd.items() if not k.endswith("rotary_emb.inv_freq")})
    # One bias switch in attnlib, two in Llama (attention_bias, mlp_bias): a group that has no
    # biases in the checkpoint (judged by layer 0) gets zero biases when cfg.bias is on: exact.
    has_bias = {group: f"model.layers.0.{group}.{proj}.bias" in hf
                for group, proj in (("self_attn", "q_proj"), ("mlp", "up_proj"))}
    out[a["emb"]] = hf["model.embed_tokens.weight"]
    for i in range(cfg.n_layers):
        L, h = a["layer"].format(i=i), f"model.layers.{i}."
        for ours, theirs in _LLAMA_LAYER:
            w = out[f"{L}.{a[ours]}.weight"] = hf[f"{h}{theirs}.weight"]  # (out, in) on both sides
            if cfg.bias:
                has = has_bias[theirs.split(".")[0]]
                b = hf[f"{h}{theirs}.bias"] if has else w.new_zeros(w.shape[0])
                out[f"{L}.{a[ours]}.bias"] = b
        out[f"{L}.{a['norm1']}.weight"] = hf[h + "input_layernorm.weight"]  # RMSNorm: weight only
        out[f"{L}.{a['dec_norm2']}.weight"] = hf[h + "post_attention_layernorm.weight"]
    final_norm_and_head(out, hf, a, cfg.tie_weights, "Llama")
    hf.check_all_used("the Llama checkpoint")
    return out
