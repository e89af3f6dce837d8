"""KVCache: what it stores, how big it is, and that attention over it equals full recomputation."""
from __future__ import annotations

import pytest
import torch

from attnlib import KVCache, MultiHeadAttention, RotaryEmbedding


def test_update_appends_along_time_and_counts_bytes():
    cache = KVCache()
    assert cache.seq_len == 0 and cache.nbytes == 0 and len(cache) == 0
    B, H, D, L = 2, 3, 4, 2
    ks = [torch.randn(B, H, 5, D) for _ in range(L)]
    for i in range(L):
        k, v = cache.update(i, ks[i], ks[i] * 2)
        assert k.shape == (B, H, 5, D)
    new = torch.randn(B, H, 1, D)
    k, v = cache.update(0, new, new * 2)
    torch.testing.assert_close(k, torch.cat([ks[0], new], dim=-2))
    torch.testing.assert_close(v, 2 * k)
    assert cache.layer_len(0) == 6 and cache.layer_len(1) == 5 and cache.layer_len(7) == 0
    cache.update(1, new, new)
    assert cache.seq_len == 6 and cache.n_layers == L
    # 2 (keys and values) x layers x B x T x (H * D = d_model) x bytes per element
    assert cache.nbytes == 2 * L * B * 6 * (H * D) * 4
    assert "seq_len=6" in repr(cache)
    cache.reset()
    assert cache.seq_len == 0 and cache.nbytes == 0 and not cache.has_cross(0)


def test_cross_entries_are_separate_and_not_counted():
    cache = KVCache()
    k = torch.randn(1, 2, 7, 4)
    cache.set_cross(0, k, k)
    assert cache.has_cross(0) and not cache.has_cross(1)
    assert cache.get_cross(0)[0] is k
    assert cache.nbytes == 0 and cache.seq_len == 0


def test_update_errors():
    cache = KVCache()
    cache.update(0, torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4))
    with pytest.raises(ValueError, match="holds keys of shape \\(2, 2, 3, 4\\) but got new keys \\(1, 2, 1, 4\\)"):
        cache.update(0, torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))
    with pytest.raises(ValueError, match="got layer 2, cache has 1"):
        cache.update(2, torch.randn(2, 2, 1, 4), torch.randn(2, 2, 1, 4))


@pytest.mark.parametrize("use_rope", [False, True])
def test_mha_with_cache_equals_full_causal_attention(use_rope):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    rope = RotaryEmbedding(4) if use_rope else None
    x = torch.randn(2, 7, 16)
    full, full_w = mha(x, is_causal=True, rope=rope, need_weights=True)
    cache, outs = KVCache(), []
    for start, stop in ((0, 4), (4, 5), (5, 7)):
        out, w = mha(x[:, start:stop], is_causal=True, cache=cache, rope=rope, need_weights=True)
        torch.testing.assert_close(w, full_w[:, :, start:stop, :stop], atol=1e-6, rtol=1e-5)
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.seq_len == 7


def test_cross_attention_keys_computed_once():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    ctx = torch.randn(1, 5, 8)
    calls = []
    mha.k_proj.register_forward_hook(lambda *_: calls.append(1))
    cache = KVCache()
    a, _ = mha(torch.randn(1, 1, 8), ctx, cache=cache)
    b, _ = mha(torch.randn(1, 1, 8), ctx, cache=cache)
    assert len(calls) == 1 and cache.has_cross(0)
    q = torch.randn(1, 2, 8)
    torch.testing.assert_close(mha(q, ctx, cache=cache)[0], mha(q, ctx)[0])


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_gqa_cache_holds_only_the_key_value_heads(n_kv_heads):
    """KVCache.nbytes = 2 x n_layers x B x seq_len x n_kv_heads x head_dim x element size."""
    from attnlib import GPT, TransformerConfig

    torch.manual_seed(0)
    L, B, C, H = 3, 2, 32, 4
    cfg = TransformerConfig(vocab_size=23, d_model=C, n_heads=H, n_layers=L, max_len=16, positional="rope",
                            n_kv_heads=n_kv_heads, norm="rmsnorm", activation="swiglu")
    gpt = GPT(cfg).eval()
    ids = torch.randint(0, 23, (B, 9))
    cache = KVCache()
    with torch.no_grad():
        first = gpt(ids[:, :6], cache=cache).logits
        rest = gpt(ids[:, 6:], cache=cache).logits
        full = gpt(ids).logits
    torch.testing.assert_close(torch.cat([first, rest], 1), full, atol=1e-5, rtol=1e-5)
    assert cache.keys[0].shape == (B, n_kv_heads, 9, C // H)
    assert cache.nbytes == 2 * L * B * 9 * n_kv_heads * (C // H) * 4
    assert cache.nbytes * H == 2 * L * B * 9 * C * 4 * n_kv_heads  # H / G times smaller than multi-head


def test_gqa_mha_with_cache_equals_full_causal_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, n_kv_heads=2).eval()
    rope = RotaryEmbedding(4, base=1e5)
    x = torch.randn(2, 7, 16)
    full, full_w = mha(x, is_causal=True, rope=rope, need_weights=True)
    cache, outs = KVCache(), []
    for start, stop in ((0, 4), (4, 5), (5, 7)):
        out, w = mha(x[:, start:stop], is_causal=True, cache=cache, rope=rope, need_weights=True)
        torch.testing.assert_close(w, full_w[:, :, start:stop, :stop], atol=1e-6, rtol=1e-5)
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.keys[0].shape == (2, 2, 7, 4)
    # cross-attention over a context: the G key/value heads are computed once and reused
    ctx = torch.randn(2, 5, 16)
    cache = KVCache()
    a, _ = mha(x[:, :3], ctx, cache=cache)
    assert cache.get_cross(0)[0].shape == (2, 2, 5, 4)
    b, _ = mha(x[:, 3:], ctx, cache=cache)
    torch.testing.assert_close(torch.cat([a, b], 1), mha(x, ctx)[0], atol=1e-5, rtol=1e-5)
