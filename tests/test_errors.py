"""Every error DESIGN.md lists: the right exception type, and a message that names the sizes."""
from __future__ import annotations

import pytest
import torch

import attnlib
from attnlib import (GPT, Encoder, EncoderDecoder, KVCache, MultiHeadAttention, TransformerConfig,
                     scaled_dot_product_attention)


def cfg_(**kw) -> TransformerConfig:
    base = dict(vocab_size=37, d_model=16, n_heads=4, n_layers=1, max_len=8)
    base.update(kw)
    return TransformerConfig(**base)


def test_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=3"):
        TransformerConfig(vocab_size=5, d_model=10, n_heads=3, n_layers=1)
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=4"):
        MultiHeadAttention(10, 4)


def test_config_names_bad_values():
    with pytest.raises(ValueError, match="unknown positional 'alibi'"):
        cfg_(positional="alibi")
    with pytest.raises(ValueError, match="unknown activation 'tanh'"):
        cfg_(activation="tanh")
    with pytest.raises(ValueError, match="vocab_size must be a positive int, got vocab_size=0"):
        cfg_(vocab_size=0)
    with pytest.raises(ValueError, match="n_layers must be a positive int, got n_layers=-1"):
        cfg_(n_layers=-1)
    with pytest.raises(ValueError, match="d_ff=0"):
        cfg_(d_ff=0)
    with pytest.raises(ValueError, match="head_dim = d_model / n_heads = 12 / 4 = 3"):
        cfg_(d_model=12, positional="rope")
    with pytest.raises(ValueError, match="dropout=1.5"):
        cfg_(dropout=1.5)
    with pytest.raises(ValueError, match="pad_id=37 is outside \\[0, vocab_size=37\\)"):
        cfg_(pad_id=37)
    assert cfg_().d_ff == 64 and cfg_(d_ff=20).d_ff == 20 and cfg_().head_dim == 4


def test_qkv_width_and_length_mismatch():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="d_k=4.*d_k=5"):
        scaled_dot_product_attention(q, torch.randn(2, 6, 5), torch.randn(2, 6, 5))
    with pytest.raises(ValueError, match="Tk=6.*Tk=7"):
        scaled_dot_product_attention(q, torch.randn(2, 6, 4), torch.randn(2, 7, 4))
    with pytest.raises(ValueError, match="d_model=16.*\\(2, 3, 4\\)"):
        MultiHeadAttention(16, 4)(q)


def test_mask_that_does_not_broadcast():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="attn_mask of shape \\(3, 5\\) does not broadcast .*\\(2, 3, 6\\)"):
        scaled_dot_product_attention(q, torch.randn(2, 6, 4), torch.randn(2, 6, 4),
                                     attn_mask=torch.ones(3, 5, dtype=torch.bool))


def test_mask_dtype_is_a_type_error():
    q = torch.randn(3, 4)
    with pytest.raises(TypeError, match="bool .* or floating .*torch.int64"):
        scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(3, 3, dtype=torch.long))


def test_backend_and_causal_rules():
    q = torch.randn(3, 4)
    with pytest.raises(ValueError, match="unknown backend 'flash'"):
        scaled_dot_product_attention(q, q, q, backend="flash")
    with pytest.raises(ValueError, match="backend='sdpa' cannot return weights"):
        scaled_dot_product_attention(q, q, q, backend="sdpa", need_weights=True)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True)
    with pytest.raises(ValueError, match="Tq=1, Tk=3.*causal_mask\\(1, 3\\)"):
        scaled_dot_product_attention(q[:1], q, q, is_causal=True)


@pytest.mark.parametrize("model_cls", [GPT, Encoder])
def test_input_ids_errors(model_cls):
    model = model_cls(cfg_())
    with pytest.raises(TypeError, match="integer tensor .*float32"):
        model(torch.zeros(1, 3))
    with pytest.raises(TypeError, match="integer tensor .*torch.bool"):
        model(torch.zeros(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="shape \\(B, T\\), got \\(3,\\)"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="token id 37, outside \\[0, vocab_size=37\\)"):
        model(torch.tensor([[1, 37, 2]]))
    with pytest.raises(ValueError, match="token id -1, outside \\[0, vocab_size=37\\)"):
        model(torch.tensor([[1, -1]]))
    with pytest.raises(ValueError, match="T=9 tokens, more than the model's max_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_gpt_cache_overflow_and_targets():
    gpt = GPT(cfg_())
    cache = KVCache()
    gpt(torch.zeros(1, 6, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="T=3 tokens plus 6 cached tokens = 9, more than the model's max_len=8"):
        gpt(torch.zeros(1, 3, dtype=torch.long), cache=cache)
    ids = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="targets must have the shape of the input ids \\(2, 4\\), got \\(2, 3\\)"):
        gpt(ids, torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="token id 40, outside \\[0, vocab_size=37\\)"):
        gpt(ids, torch.full((2, 4), 40))
    with pytest.raises(TypeError, match="targets must be an integer tensor"):
        gpt(ids, torch.zeros(2, 4))


def test_attention_mask_shape_errors():
    with pytest.raises(ValueError, match="attention_mask must have the shape of the ids \\(1, 4\\).*\\(1, 3\\)"):
        Encoder(cfg_())(torch.zeros(1, 4, dtype=torch.long), attention_mask=torch.ones(1, 3))
    s2s = EncoderDecoder(cfg_())
    with pytest.raises(ValueError, match="src_attention_mask must have the shape of the ids \\(1, 4\\)"):
        s2s(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long), src_attention_mask=torch.ones(4))


def test_encoder_decoder_errors():
    s2s = EncoderDecoder(cfg_())
    src = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="tgt_ids has T=9 tokens, more than the model's max_len=8"):
        s2s(src, torch.zeros(2, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="tgt_ids contains token id 99, outside \\[0, vocab_size=37\\)"):
        s2s(src, torch.tensor([[1, 99], [1, 2]]))
    with pytest.raises(ValueError, match="tgt_ids has batch 1 but the source has batch 2"):
        s2s(src, torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(TypeError, match="src_ids must be an integer tensor"):
        s2s(src.float(), src)
    with pytest.raises(ValueError, match="src_ids has T=9 tokens, more than the model's max_len=8"):
        s2s(torch.zeros(2, 9, dtype=torch.long), src)


def test_rope_and_positions_errors():
    with pytest.raises(ValueError, match="head_dim must be a positive even int, got 5"):
        attnlib.RotaryEmbedding(5)
    with pytest.raises(ValueError, match="position 8 is out of range for max_len=8"):
        attnlib.LearnedPositionalEmbedding(8, 4)(torch.arange(9))
