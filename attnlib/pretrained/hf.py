"""Hugging Face ``transformers`` models -> attnlib models with the same outputs.

``gpt_parts`` / ``encoder_parts`` turn an already-built ``transformers`` model (GPT2LMHeadModel
or LlamaForCausalLM, BertModel) into an attnlib config and state dict; ``GPT.from_hf`` and
``Encoder.from_hf`` load them into a model (this module never imports attnlib.models). ``transformers`` itself is
never imported here: the functions read the model's config and state dict.

``llama_config`` / ``llama_state`` are the Llama conversion in two plain steps (a config dict and a
state dict with Hugging Face names in, attnlib's out), so other sources of Llama-family weights
(a GGUF file, safetensors) can reuse them without building a ``transformers`` model.
"""
from __future__ import annotations

from typing import Any

from torch import Tensor

from ..config import TransformerConfig
from ._common import Settings, Used, load_exact

# Hugging Face activation names -> TransformerConfig.activation
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}


# --- Configs: Hugging Face config (as a dict) -> TransformerConfig -----------------------------
def _activation(name: str) -> str:
    if name not in _HF_ACTIVATIONS:
        raise ValueError(f"unsupported Hugging Face activation {name!r}; supported: {sorted(_HF_ACTIVATIONS)}")
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
        n_layers=hf["num_hidden_layers"], d_ff=hf["intermediate_size"], max_len=hf["max_position_embeddings"],
        positional="learned", activation=_activation(hf["hidden_act"]), norm_first=False, dropout=0.0,
        bias=True, tie_weights=False, layer_norm_eps=hf["layer_norm_eps"],
        type_vocab_size=hf.get("type_vocab_size", 0), embedding_norm=True, pad_id=hf.get("pad_token_id") or 0,
    )


def gpt2_config(hf: dict[str, Any]) -> Any:
    """TransformerConfig of a GPT-2 decoder (pre-norm, tanh-GELU, learned positions, tied head)."""
    hf = Settings(hf, "GPT-2 config")
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
        if hf.get(flag, False):
            raise ValueError(f"GPT-2 config option {flag}=True is not supported by attnlib.GPT")
    if not hf.get("scale_attn_weights", True):
        raise ValueError("GPT-2 with scale_attn_weights=False (no 1/sqrt(d_k)) is not supported by attnlib.GPT")
    d = hf["n_embd"]
    return TransformerConfig(
        vocab_size=hf["vocab_size"], d_model=d, n_heads=hf["n_head"], n_layers=hf["n_layer"],
        d_ff=hf.get("n_inner") or 4 * d, max_len=hf["n_positions"], positional="learned",
        activation=_activation(hf["activation_function"]), norm_first=True, dropout=0.0, bias=True,
        tie_weights=hf.get("tie_word_embeddings", True), layer_norm_eps=hf["layer_norm_epsilon"],
    )


def _rope_theta(hf: dict[str, Any]) -> float:
    """RoPE base of a Llama config; refuses RoPE scaling (Llama 3.1 "llama3", "linear", "yarn", ...).

    transformers < 5 puts ``rope_theta`` and ``rope_scaling`` at the top level; 5.x nests them in
    ``rope_parameters`` (with ``rope_type`` "default" when there is no scaling)."""
    params = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling")
    rope_type = params.get("rope_type", "default")
    if scaling is not None or rope_type != "default":
        raise ValueError(
            f"RoPE scaling is not supported by attnlib (plain RoPE only): got rope_scaling={scaling!r}, "
            f"rope_parameters={params!r}; use a checkpoint with rope_scaling=None"
        )
    theta = hf.get("rope_theta", params.get("rope_theta"))
    if theta is None:
        raise ValueError("the Llama config has no rope_theta (neither at the top level nor in rope_parameters)")
    return float(theta)


def llama_config(hf_config: dict[str, Any]) -> TransformerConfig:
    """TransformerConfig of a Llama-family decoder (``LlamaConfig.to_dict()``).

    Pre-norm with RMSNorm (eps ``rms_norm_eps``), RoPE with base ``rope_theta``, SwiGLU FFN of width
    ``intermediate_size``, grouped-query attention with ``num_key_value_heads`` key/value heads.

    Args:
        hf_config: the config as a dict. Keys read: hidden_size, num_attention_heads,
            num_key_value_heads, num_hidden_layers, intermediate_size, max_position_embeddings,
            rms_norm_eps, rope_theta (or rope_parameters), vocab_size, tie_word_embeddings,
            hidden_act, attention_bias, mlp_bias, head_dim, rope_scaling.

    Returns:
        TransformerConfig. attnlib has one ``bias`` switch: it is on when attention_bias or mlp_bias
        is (:func:`llama_state` then gives the bias-free projections zero biases, which is exact).
        Raises ValueError for options attnlib cannot reproduce (RoPE scaling, an activation other
        than silu, head_dim != hidden_size / num_attention_heads).
    """
    hf = Settings(hf_config, "Llama config")
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"Llama with hidden_act={hf['hidden_act']!r} is not supported; attnlib's SwiGLU uses silu")
    any_bias = bool(hf.get("attention_bias", False)) or bool(hf.get("mlp_bias", False))
    if hf.get("pretraining_tp", 1) != 1:
        raise ValueError(f"pretraining_tp={hf['pretraining_tp']} (sliced projections) is not supported; use 1")
    d, heads = hf["hidden_size"], hf["num_attention_heads"]
    head_dim = hf.get("head_dim") or d // heads
    if head_dim * heads != d:
        raise ValueError(f"head_dim={head_dim} x num_attention_heads={heads} != hidden_size={d}: attnlib needs "
                         f"head_dim = hidden_size / num_attention_heads")
    return TransformerConfig(
        vocab_size=hf["vocab_size"], d_model=d, n_heads=heads, n_layers=hf["num_hidden_layers"],
        d_ff=hf["intermediate_size"], max_len=hf["max_position_embeddings"], positional="rope",
        activation="swiglu", norm_first=True, dropout=0.0, bias=any_bias,
        tie_weights=bool(hf.get("tie_word_embeddings", False)), layer_norm_eps=hf["rms_norm_eps"],
        n_kv_heads=hf.get("num_key_value_heads") or heads, norm="rmsnorm", rope_base=_rope_theta(hf),
    )


# --- Parameters: Hugging Face names -> attnlib names -------------------------------------------
# Every attnlib parameter name in one place. {i} is the layer index.
_ATTN = {"emb": "embed.tok_emb.weight", "pos": "embed.pos_emb.weight", "type": "embed.type_emb.weight",
         "emb_norm": "embed.norm", "layer": "layers.{i}", "q": "self_attn.q_proj", "k": "self_attn.k_proj",
         "v": "self_attn.v_proj", "o": "self_attn.out_proj", "norm1": "norm1", "fc1": "ffn.fc1",
         "fc2": "ffn.fc2", "gate": "ffn.gate", "enc_norm2": "norm2", "dec_norm2": "norm3", "norm_f": "norm_f",
         "head": "lm_head.weight"}


def _bert_state(hf: dict[str, Tensor], n_layers: int) -> dict[str, Tensor]:
    """attnlib Encoder state dict from a BertModel state dict (names without a ``bert.`` prefix)."""
    a, out = _ATTN, {}
    hf = Used({k: v for k, v in hf.items() if not k.startswith("pooler.") and k != "embeddings.position_ids"})
    out[a["emb"]] = hf["embeddings.word_embeddings.weight"]
    out[a["pos"]] = hf["embeddings.position_embeddings.weight"]
    out[a["type"]] = hf["embeddings.token_type_embeddings.weight"]
    for p in ("weight", "bias"):
        out[f"{a['emb_norm']}.{p}"] = hf[f"embeddings.LayerNorm.{p}"]
    for i in range(n_layers):
        L, h = a["layer"].format(i=i), f"encoder.layer.{i}."
        for p in ("weight", "bias"):  # nn.Linear weights are (out, in) on both sides: copied as they are
            out[f"{L}.{a['q']}.{p}"] = hf[h + f"attention.self.query.{p}"]
            out[f"{L}.{a['k']}.{p}"] = hf[h + f"attention.self.key.{p}"]
            out[f"{L}.{a['v']}.{p}"] = hf[h + f"attention.self.value.{p}"]
            out[f"{L}.{a['o']}.{p}"] = hf[h + f"attention.output.dense.{p}"]
            out[f"{L}.{a['norm1']}.{p}"] = hf[h + f"attention.output.LayerNorm.{p}"]  # post-norm: after attention
            out[f"{L}.{a['fc1']}.{p}"] = hf[h + f"intermediate.dense.{p}"]
            out[f"{L}.{a['fc2']}.{p}"] = hf[h + f"output.dense.{p}"]
            out[f"{L}.{a['enc_norm2']}.{p}"] = hf[h + f"output.LayerNorm.{p}"]  # post-norm: after the FFN
    hf.check_all_used("the BERT checkpoint")
    return out


def _gpt2_state(hf: dict[str, Tensor], n_layers: int, d_model: int) -> dict[str, Tensor]:
    """attnlib GPT state dict from a GPT2LMHeadModel state dict.

    GPT-2 uses ``Conv1D`` layers whose weight is (in, out), the transpose of ``nn.Linear``'s, and a
    single ``c_attn`` projection producing [q | k | v] side by side (C -> 3C).
    """
    a, out, C = _ATTN, {}, d_model
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
            out[f"{L}.{a[ours]}.weight"] = hf[h + theirs + ".weight"].t()  # Conv1D (in, out) -> Linear (out, in)
            out[f"{L}.{a[ours]}.bias"] = hf[h + theirs + ".bias"]
        for p in ("weight", "bias"):  # pre-norm: ln_1 before attention, ln_2 before the MLP
            out[f"{L}.{a['norm1']}.{p}"] = hf[h + f"ln_1.{p}"]
            out[f"{L}.{a['dec_norm2']}.{p}"] = hf[h + f"ln_2.{p}"]
    for p in ("weight", "bias"):
        out[f"{a['norm_f']}.{p}"] = hf[f"ln_f.{p}"]
    out[a["head"]] = hf["lm_head.weight"] if "lm_head.weight" in hf else hf["wte.weight"]
    hf.check_all_used("the GPT-2 checkpoint")
    return out


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
    a, out = _ATTN, {}
    hf = Used({k: v for k, v in sd.items() if not k.endswith("rotary_emb.inv_freq")})  # old buffers
    # One bias switch in attnlib, two in Llama (attention_bias, mlp_bias): a group that has no biases
    # in the checkpoint (judged by layer 0) gets zero biases when cfg.bias is on, which is exact.
    has_bias = {group: f"model.layers.0.{group}.{proj}.bias" in hf
                for group, proj in (("self_attn", "q_proj"), ("mlp", "up_proj"))}
    out[a["emb"]] = hf["model.embed_tokens.weight"]
    for i in range(cfg.n_layers):
        L, h = a["layer"].format(i=i), f"model.layers.{i}."
        for ours, theirs in (("q", "self_attn.q_proj"), ("k", "self_attn.k_proj"), ("v", "self_attn.v_proj"),
                             ("o", "self_attn.o_proj"), ("fc1", "mlp.up_proj"), ("fc2", "mlp.down_proj"),
                             ("gate", "mlp.gate_proj")):
            w = out[f"{L}.{a[ours]}.weight"] = hf[f"{h}{theirs}.weight"]  # (out, in) on both sides
            if cfg.bias:
                has = has_bias[theirs.split(".")[0]]
                out[f"{L}.{a[ours]}.bias"] = hf[f"{h}{theirs}.bias"] if has else w.new_zeros(w.shape[0])
        out[f"{L}.{a['norm1']}.weight"] = hf[h + "input_layernorm.weight"]  # RMSNorm: weight only
        out[f"{L}.{a['dec_norm2']}.weight"] = hf[h + "post_attention_layernorm.weight"]
    out[f"{a['norm_f']}.weight"] = hf["model.norm.weight"]
    if "lm_head.weight" in hf:
        out[a["head"]] = hf["lm_head.weight"]
    elif cfg.tie_weights:
        out[a["head"]] = hf["model.embed_tokens.weight"]
    else:
        raise ValueError("the Llama checkpoint has no lm_head.weight and the config does not tie embeddings "
                         "(tie_word_embeddings=False)")
    hf.check_all_used("the Llama checkpoint")
    return out


def encoder_parts(model: Any) -> tuple[TransformerConfig, dict[str, Tensor], str]:
    """The config and attnlib state dict of a ``transformers`` ``BertModel`` (``Encoder.from_hf``).

    Args:
        model: a ``BertModel`` (or a ``BertFor...`` model: its ``.bert`` is used; the pooler and task
            heads are not copied). Absolute positions only.

    Returns:
        (config: post-norm, token types, embedding LayerNorm; state dict; the model's class name).
        Raises ``TypeError`` for a non-BERT model, ``ValueError`` for unsupported options.
    """
    base = getattr(model, "bert", model)  # accept BertFor... heads too: use their BertModel
    if getattr(getattr(base, "config", None), "model_type", None) != "bert":
        raise TypeError(f"Encoder.from_hf expects a transformers BertModel, got {type(model).__name__}")
    cfg = bert_config(base.config.to_dict())
    return cfg, _bert_state(base.state_dict(), cfg.n_layers), type(model).__name__


def gpt_parts(model: Any) -> tuple[TransformerConfig, dict[str, Tensor], str]:
    """The config and attnlib state dict of a ``transformers`` ``GPT2LMHeadModel`` or
    ``LlamaForCausalLM`` (``GPT.from_hf``).

    GPT-2's ``Conv1D`` weights are transposed and ``c_attn`` is split into q/k/v: pre-norm, tanh
    GELU, learned positions, tied head. Llama (see :func:`llama_config`, :func:`llama_state`):
    pre-RMSNorm, RoPE, SwiGLU, grouped-query attention, tied or untied head.

    Returns:
        (config, state dict, the model's class name). Raises ``TypeError`` for another model
        class, ``ValueError`` for unsupported options.
    """
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type == "llama" and hasattr(model, "lm_head"):
        cfg = llama_config(model.config.to_dict())
        return cfg, llama_state(model.state_dict(), cfg), type(model).__name__
    if model_type != "gpt2" or not hasattr(model, "lm_head"):
        raise TypeError(f"GPT.from_hf expects a transformers GPT2LMHeadModel or LlamaForCausalLM, got "
                        f"{type(model).__name__}")
    cfg = gpt2_config(model.config.to_dict())
    return cfg, _gpt2_state(model.state_dict(), cfg.n_layers, cfg.d_model), type(model).__name__
