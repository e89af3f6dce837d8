"""GPT.from_hf for DeepSeek-V3 with dense layers only: the same logits, greedy tokens and cache
contents as transformers' DeepseekV3ForCausalLM, built from small random configs in float32;
mixture-of-experts layers and RoPE scaling refused."""
from __future__ import annotations

import pytest
import torch

import attnlib
from attnlib import GPT, KVCache, MultiHeadLatentAttention
from attnlib.pretrained import deepseek

transformers = pytest.importorskip("transformers")
DeepseekV3Config, DeepseekV3ForCausalLM = (transformers.DeepseekV3Config,
                                           transformers.DeepseekV3ForCausalLM)

# hidden 64, 4 heads; q_lora_rank None and set; v_head_dim unlike the query/key widths
SMALL = dict(vocab_size=61, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=None,
             qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=12, first_k_dense_replace=2,
             max_position_embeddings=48, rms_norm_eps=1e-6, eos_token_id=None, pad_token_id=0)
CASES = {
    "plain": {},
    "q_latent": dict(q_lora_rank=24, num_hidden_layers=3, first_k_dense_replace=3),
    "wide": dict(kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=6,
                 q_lora_rank=20, rope_parameters={"rope_type": "default", "rope_theta": 500.0}),
    "halves": dict(rope_interleave=False, q_lora_rank=24),
    "bias_tied": dict(attention_bias=True, tie_word_embeddings=True, q_lora_rank=24,
                      rms_norm_eps=1e-5),
}


def hf_model(**kw):
    torch.manual_seed(0)
    model = DeepseekV3ForCausalLM(DeepseekV3Config(**{**SMALL, **kw})).eval()
    with torch.no_grad():  # large enough that a wrong rotation or scale shows in the logits
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


@pytest.mark.parametrize("case", CASES)
def test_logits_equal_transformers(case):
    hf = hf_model(**CASES[case])
    model = GPT.from_hf(hf)
    assert type(model.layers[0].self_attn) is MultiHeadLatentAttention
    ids = torch.randint(0, 61, (2, 17))
    with torch.no_grad():
        expected = hf(ids).logits
        got = model(ids).logits
    assert expected.abs().max() > 1.0  # logits that a wrong weight would visibly change
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("case", ["plain", "q_latent", "halves"])
def test_cached_greedy_generate_equals_transformers(case):
    hf = hf_model(**CASES[case])
    model = GPT.from_hf(hf)
    ids = torch.randint(1, 61, (2, 5))
    ours = model.generate(ids, 20, temperature=0.0)
    theirs = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20,
                         do_sample=False)
    assert torch.equal(ours, theirs)


def test_the_cache_holds_what_deepseeks_cache_holds():
    """Both cache the normalised latent and the rotated RoPE key, (B, 1, T, r) and (B, 1, T, dr);
    after the row permutation the RoPE keys agree too (HF's interleaved rotation returns halves)."""
    hf = hf_model(**CASES["q_latent"])
    model = GPT.from_hf(hf)
    ids = torch.randint(0, 61, (2, 9))
    ours = KVCache()
    with torch.no_grad():
        theirs = hf(ids, use_cache=True).past_key_values
        model(ids, cache=ours)
    assert len(theirs.layers) == ours.n_layers == 3
    for i, layer in enumerate(theirs.layers):
        torch.testing.assert_close(ours.keys[i], layer.keys, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ours.values[i], layer.values, atol=1e-5, rtol=1e-5)
    assert ours.nbytes == 3 * 2 * 9 * (16 + 4) * 4


def test_without_the_row_permutation_interleaved_rope_would_not_match():
    hf = hf_model()  # rope_interleave=True, DeepSeek's default
    cfg = deepseek.deepseek_config(hf.config.to_dict())
    wrong = GPT(cfg)
    wrong.load_state_dict(deepseek.deepseek_state(hf.state_dict(), cfg, rope_interleave=False))
    ids = torch.randint(0, 61, (1, 12))
    with torch.no_grad():
        assert (wrong.eval()(ids).logits - hf(ids).logits).abs().max() > 1e-2
    assert deepseek.halves_from_pairs(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


def test_config_maps_deepseeks_sizes():
    cfg = deepseek.deepseek_config(DeepseekV3Config(**{**SMALL, **CASES["wide"]}).to_dict())
    assert (cfg.attention, cfg.kv_lora_rank, cfg.q_lora_rank, cfg.qk_nope_head_dim,
            cfg.qk_rope_head_dim, cfg.v_head_dim) == ("mla", 32, 20, 16, 8, 6)
    assert (cfg.positional, cfg.norm, cfg.activation, cfg.rope_base, cfg.bias) == (
        "rope", "rmsnorm", "swiglu", 500.0, False)


def test_mixture_of_experts_layers_are_refused():
    moe = dict(first_k_dense_replace=1, n_routed_experts=4, moe_intermediate_size=8, n_group=1,
               topk_group=1, num_experts_per_tok=2)
    hf = hf_model(**moe)
    with pytest.raises(ValueError, match=r"mixture-of-experts layers \(layers 1 to 1: "
                                         r"first_k_dense_replace=1, num_hidden_layers=2\)"):
        GPT.from_hf(hf)


@pytest.mark.parametrize("kw, words", [
    (dict(rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
                           "original_max_position_embeddings": 12, "mscale": 1.0,
                           "mscale_all_dim": 1.0}), "RoPE scaling"),
    (dict(hidden_act="gelu"), "hidden_act='gelu' is not supported"),
])
def test_what_attnlib_cannot_reproduce_is_refused(kw, words):
    with pytest.raises(ValueError, match=words):
        deepseek.deepseek_config(DeepseekV3Config(**{**SMALL, **kw}).to_dict())


def test_a_leftover_or_missing_tensor_is_named():
    hf = hf_model()
    cfg = deepseek.deepseek_config(hf.config.to_dict())
    sd = hf.state_dict()
    with pytest.raises(ValueError, match="no place for"):
        deepseek.deepseek_state({**sd, "model.layers.0.mlp.experts.down_proj": torch.zeros(1)}, cfg)
    short = {k: v for k, v in sd.items() if "kv_b_proj" not in k}
    with pytest.raises(ValueError, match="kv_b_proj"):
        deepseek.deepseek_state(short, cfg)
    assert attnlib.pretrained.hf.DECODERS["deepseek_v3"] == (deepseek.deepseek_config,
                                                             deepseek.deepseek_state)
