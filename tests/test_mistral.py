"""GPT.from_hf for Mistral: a Llama with a sliding window, checked against transformers.

Small random MistralForCausalLM models (no download) with windows of 4-8 tokens and sequences of
20-40, so that the window matters: same logits and attention weights as transformers, cached
greedy generation equal to transformers' greedy generate, and the options attnlib cannot
reproduce refused by name.
"""
from __future__ import annotations

import pytest
import torch

import attnlib
from attnlib import pretrained
from attnlib.pretrained.hf import DECODERS

transformers = pytest.importorskip("transformers")
TOL = dict(atol=1e-4, rtol=0)


def small_mistral(window=4, layers=2, tie=False, attn="sdpa", **kw):
    cfg = transformers.MistralConfig(
        vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        sliding_window=window, rms_norm_eps=1e-6, tie_word_embeddings=tie, initializer_range=0.2,
        bos_token_id=None, eos_token_id=None, pad_token_id=None, **kw)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    model = transformers.MistralForCausalLM(cfg).eval()
    with torch.no_grad():  # RMSNorm gains away from 1, so a misplaced norm would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    return model


def ids_(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 61, (batch, length), generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
@pytest.mark.parametrize("window, layers, tie, length", [(4, 2, False, 20), (5, 3, True, 33),
                                                        (8, 4, False, 40), (6, 2, False, 27)])
def test_gpt_from_hf_matches_mistral(window, layers, tie, length):
    hf = small_mistral(window, layers, tie)
    gpt = attnlib.GPT.from_hf(hf)
    cfg = gpt.cfg
    assert (cfg.sliding_window, cfg.n_kv_heads, cfg.norm, cfg.positional, cfg.activation) == \
        (window, 2, "rmsnorm", "rope", "swiglu")
    assert all(layer.self_attn.sliding_window == window for layer in gpt.layers)
    ids = ids_(2, length)
    torch.testing.assert_close(gpt(ids).logits, hf(ids).logits, **TOL)


@torch.no_grad()
def test_attention_weights_match_transformers_window_convention():
    """transformers' eager attention: query i sees keys i-W+1 .. i, as attnlib does."""
    hf = small_mistral(window=5, layers=2, attn="eager")
    gpt = attnlib.GPT.from_hf(hf)
    ids = ids_(2, 21)
    ours, ref = gpt(ids, need_weights=True), hf(ids, output_attentions=True)
    torch.testing.assert_close(ours.logits, ref.logits, **TOL)
    allowed = attnlib.sliding_window_mask(21, 21, 5)
    for a, b in zip(ours.attentions, ref.attentions, strict=True):  # (B, 4, T, T) each
        torch.testing.assert_close(a, b, **TOL)
        assert torch.equal(b != 0, allowed.expand_as(b))  # exactly W keys a row, once full


@torch.no_grad()
def test_the_window_matters_and_its_size_is_read_exactly():
    """Without the window, or with W off by one, the logits differ from transformers': the
    test above would fail if the window were ignored or mis-sized."""
    hf = small_mistral(window=4, layers=2)
    ids = ids_(2, 24)
    ref = hf(ids).logits
    for other in (None, 3, 5):
        cfg, state, name = pretrained.gpt_parts(hf)
        cfg.sliding_window = other
        gpt = attnlib.GPT(cfg)
        pretrained.load_exact(gpt, state, name)
        assert not torch.allclose(gpt.eval()(ids).logits, ref, atol=1e-3), other


@torch.no_grad()
@pytest.mark.parametrize("window, prompt_len", [(4, 3), (4, 10), (7, 12)])
def test_cached_greedy_generation_equals_transformers(window, prompt_len):
    """A prompt shorter and longer than the window, then 24 tokens: the rolling cache of attnlib
    and transformers' own sliding-window cache give the same tokens."""
    hf = small_mistral(window, layers=3)
    gpt = attnlib.GPT.from_hf(hf)
    prompt = ids_(2, prompt_len, seed=3)
    ref = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=24,
                      do_sample=False, min_new_tokens=24)
    cached = gpt.generate(prompt, 24, temperature=0.0)
    assert torch.equal(cached, ref)
    assert torch.equal(cached, gpt.generate(prompt, 24, temperature=0.0, use_cache=False))
    cache = attnlib.KVCache()  # step by step: the rolling cache equals transformers' logits
    steps = [gpt(cached[:, :prompt_len], cache=cache).logits]
    for t in range(prompt_len, cached.shape[1]):
        steps.append(gpt(cached[:, t:t + 1], cache=cache).logits)
    torch.testing.assert_close(torch.cat(steps, 1), hf(cached).logits, **TOL)
    assert cache.layer_len(0) == window and cache.seq_len == cached.shape[1]
    assert cache.nbytes == 2 * 3 * 2 * window * 2 * 8 * 4  # 2 x L x B x W x G x D x 4 bytes


@torch.no_grad()
def test_mistral_without_a_window_is_llama():
    hf = small_mistral(window=None)
    gpt = attnlib.GPT.from_hf(hf)
    assert gpt.cfg.sliding_window is None
    ids = ids_(1, 30)
    torch.testing.assert_close(gpt(ids).logits, hf(ids).logits, **TOL)


def test_mistral_is_a_decoder_of_gpt_from_hf():
    assert DECODERS["mistral"] == (pretrained.mistral_config, pretrained.llama_state)
    flat = small_mistral().config.to_dict()
    assert pretrained.mistral_config(flat).sliding_window == 4
    assert pretrained.llama_config(flat).sliding_window is None  # Llama reads no window


def test_mistral_config_refuses_what_attnlib_cannot_reproduce():
    base = small_mistral().config.to_dict()
    with pytest.raises(ValueError, match="layer_types=.*same window"):
        pretrained.mistral_config({**base, "layer_types": ["sliding_attention", "full_attention"]})
    with pytest.raises(ValueError, match="layer_types=.*same window"):
        pretrained.mistral_config({**base, "sliding_window": None,
                                   "layer_types": ["sliding_attention"] * 2})
    assert pretrained.mistral_config({**base, "layer_types": ["sliding_attention"] * 2}) \
        .sliding_window == 4
    with pytest.raises(ValueError, match="sliding_window must be a positive int"):
        pretrained.mistral_config({**base, "sliding_window": 0})
    with pytest.raises(ValueError, match="RoPE scaling is not supported"):
        pretrained.mistral_config({**base, "rope_parameters": {"rope_type": "linear",
                                                                "rope_theta": 1e4, "factor": 2.0}})
    with pytest.raises(ValueError, match="hidden_act='gelu' is not supported"):
        pretrained.mistral_config({**base, "hidden_act": "gelu"})
    with pytest.raises(ValueError, match="Mistral config has no 'hidden_size'"):
        pretrained.mistral_config({k: v for k, v in base.items() if k != "hidden_size"})
    with pytest.raises(TypeError, match="MistralForCausalLM"):
        attnlib.GPT.from_hf(small_mistral().model)  # the bare MistralModel has no LM head
