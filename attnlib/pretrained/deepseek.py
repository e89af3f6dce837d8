"""DeepSeek-V3 decoders with dense layers only, in two plain steps: a config dict and a state
dict with Hugging Face names in (``DeepseekV3ForCausalLM``), attnlib's out.

A DeepSeek-V3 layer is a Llama layer (pre-RMSNorm, SwiGLU) whose attention is multi-head latent
attention (:class:`attnlib.MultiHeadLatentAttention`, same submodule names, so its tensors copy
one to one). Two things need care:

* Mixture-of-experts layers (every layer from ``first_k_dense_replace`` on) have no place in
  attnlib: a checkpoint with any is refused, and so is RoPE scaling (YaRN and its mscale).
* ``rope_interleave`` (True in DeepSeek's checkpoints): Hugging Face rotates interleaved pairs
  (x0, x1), (x2, x3), ... of the RoPE dims, attnlib rotates halves (x_i, x_{i + dr/2}). Putting
  the rows that make the RoPE dims of the queries and of the shared key in the order
  0, 2, 4, ..., 1, 3, 5, ... turns one into the other; the same permutation on both sides leaves
  every query-key dot product as it was, so no second RoPE is needed.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..config import TransformerConfig
from ._common import Settings, Used, final_norm_and_head
from .names import NAMES

# attnlib's name -> Hugging Face's, in each layer (the attention's names are the same on both sides)
_FFN = (("fc1", "mlp.up_proj"), ("fc2", "mlp.down_proj"), ("gate", "mlp.gate_proj"))
_KV = ("kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj")


def _rope_theta(hf: dict[str, Any]) -> float:
    """RoPE base of a DeepSeek config; refuses RoPE scaling (DeepSeek-V3 ships with YaRN).

    transformers 5 nests theta in ``rope_parameters`` (rope_type "default" when there is no
    scaling); older configs put ``rope_theta`` and ``rope_scaling`` at the top level."""
    params = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling")
    if scaling is not None or params.get("rope_type", "default") != "default":
        raise ValueError(f"RoPE scaling (YaRN, its mscale) is not supported by attnlib (plain "
                         f"RoPE only): got rope_scaling={scaling!r}, rope_parameters={params!r}; "
                         f"use a config with rope_parameters={{'rope_type': 'default', "
                         f"'rope_theta': ...}}")
    theta = hf.get("rope_theta", params.get("rope_theta"))
    if theta is None:
        raise ValueError("the DeepSeek-V3 config has no rope_theta (neither at the top level nor "
                         "in rope_parameters)")
    return float(theta)


def deepseek_config(hf_config: dict[str, Any]) -> TransformerConfig:
    """TransformerConfig of a dense DeepSeek-V3 decoder (``DeepseekV3Config.to_dict()``).

    Pre-norm with RMSNorm (eps ``rms_norm_eps``), SwiGLU FFN of width ``intermediate_size``, RoPE
    with base ``rope_theta`` on ``qk_rope_head_dim`` dims, ``attention="mla"`` with DeepSeek's
    sizes (kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim).

    Returns:
        TransformerConfig; ``bias`` is ``attention_bias`` (:func:`deepseek_state` gives the
        bias-free FFN zero biases then, which is exact). Raises ValueError for what attnlib cannot
        reproduce: mixture-of-experts layers (first_k_dense_replace < num_hidden_layers), RoPE
        scaling, an activation other than silu.
    """
    hf = Settings(hf_config, "DeepSeek-V3 config")
    layers, dense = hf["num_hidden_layers"], hf["first_k_dense_replace"]
    if dense is None or dense < layers:
        first = 0 if dense is None else dense
        raise ValueError(f"this DeepSeek-V3 model has mixture-of-experts layers (layers {first} to "
                         f"{layers - 1}: first_k_dense_replace={dense}, num_hidden_layers="
                         f"{layers}); attnlib loads dense layers only: first_k_dense_replace >= "
                         f"num_hidden_layers")
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"DeepSeek-V3 with hidden_act={hf['hidden_act']!r} is not supported; "
                         f"attnlib's SwiGLU uses silu")
    return TransformerConfig(
        vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_heads=hf["num_attention_heads"],
        n_layers=layers, d_ff=hf["intermediate_size"], max_len=hf["max_position_embeddings"],
        positional="rope", activation="swiglu", norm_first=True, dropout=0.0,
        bias=bool(hf.get("attention_bias", False)),
        tie_weights=bool(hf.get("tie_word_embeddings", False)), layer_norm_eps=hf["rms_norm_eps"],
        norm="rmsnorm", rope_base=_rope_theta(hf), attention="mla",
        kv_lora_rank=hf["kv_lora_rank"], q_lora_rank=hf.get("q_lora_rank"),
        qk_nope_head_dim=hf["qk_nope_head_dim"], qk_rope_head_dim=hf["qk_rope_head_dim"],
        v_head_dim=hf["v_head_dim"],
    )


def halves_from_pairs(rows: int) -> Tensor:
    """The order of ``rows`` RoPE rows that turns interleaved pairs into halves: 0, 2, 4, ...,
    1, 3, 5, ... (row i of the result is row order[i] of the source)."""
    return torch.cat([torch.arange(0, rows, 2), torch.arange(1, rows, 2)])


def _rope_rows_to_halves(w: Tensor, width: int, dr: int) -> Tensor:
    """w (n * width, ...): n blocks of ``width`` rows whose last ``dr`` rows make RoPE dims
    (each query head, or the one latent-and-key block); those rows from pairs to halves."""
    blocks = w.reshape(-1, width, *w.shape[1:])  # (n, width, ...)
    order = torch.cat([torch.arange(width - dr), width - dr + halves_from_pairs(dr)])
    return blocks[:, order].reshape(w.shape)  # (n * width, ...)


def deepseek_state(sd: dict[str, Tensor], cfg: TransformerConfig, *,
                   rope_interleave: bool = True) -> dict[str, Tensor]:
    """attnlib GPT state dict from a dense DeepseekV3ForCausalLM state dict.

    Args:
        sd: tensors by Hugging Face name, with the ``model.`` prefix (``model.embed_tokens.weight``,
            ``model.layers.{i}.self_attn.kv_b_proj.weight``, ..., ``model.norm.weight``,
            ``lm_head.weight``); ``lm_head.weight`` may be left out when ``cfg.tie_weights``.
        cfg: the model's TransformerConfig (from :func:`deepseek_config`).
        rope_interleave: the config's ``rope_interleave``: the RoPE rows of q_proj / q_b_proj
            and kv_a_proj_with_mqa are put from interleaved pairs into halves (module docstring).

    Returns:
        dict for ``attnlib.GPT(cfg).load_state_dict``. Raises ValueError for a missing or a
        leftover parameter (an expert's, for one).
    """
    a, out = NAMES, {}
    hf = Used(sd)
    dq, dr = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim, cfg.qk_rope_head_dim
    rope_rows = {"q_proj": dq, "q_b_proj": dq, "kv_a_proj_with_mqa": cfg.kv_lora_rank + dr}
    # queries: from q_proj, or through the query latent
    queries = ("q_proj",) if cfg.q_lora_rank is None else ("q_a_proj", "q_a_layernorm", "q_b_proj")
    out[a["emb"]] = hf["model.embed_tokens.weight"]
    for i in range(cfg.n_layers):
        L, h = a["layer"].format(i=i), f"model.layers.{i}."
        for name in (*queries, *_KV):
            biased = cfg.bias and name in ("q_a_proj", "kv_a_proj_with_mqa", "o_proj")
            for p in ("weight", "bias") if biased else ("weight",):
                t = hf[f"{h}self_attn.{name}.{p}"]
                if rope_interleave and name in rope_rows and dr:
                    t = _rope_rows_to_halves(t, rope_rows[name], dr)
                out[f"{L}.self_attn.{name}.{p}"] = t
        for ours, theirs in _FFN:  # (out, in) on both sides
            w = out[f"{L}.{a[ours]}.weight"] = hf[f"{h}{theirs}.weight"]
            if cfg.bias:  # attnlib's one bias switch is on for attention_bias: the FFN has none
                out[f"{L}.{a[ours]}.bias"] = w.new_zeros(w.shape[0])
        out[f"{L}.{a['norm1']}.weight"] = hf[h + "input_layernorm.weight"]
        out[f"{L}.{a['dec_norm2']}.weight"] = hf[h + "post_attention_layernorm.weight"]
    final_norm_and_head(out, hf, a, cfg.tie_weights, "DeepSeek-V3")
    hf.check_all_used("the DeepSeek-V3 checkpoint")
    return out
