"""Int8KVCache: keys and values kept as int8 codes, one scale per head and token."""
from __future__ import annotations

import pytest
import torch

from attnlib import GPT, Int8KVCache, KVCache, TransformerConfig, quantize_rows


def small_gpt(n_kv_heads=None, seed=0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_len=32,
                            n_kv_heads=n_kv_heads)
    return GPT(cfg).eval()


def test_rows_are_the_per_row_int8_round_trip():
    cache = Int8KVCache()
    k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8) * 10
    held_k, held_v = cache.update(0, k, v)
    for x, held in ((k, held_k), (v, held_v)):
        q, s = quantize_rows(x)                                  # one scale per (b, g, t)
        assert s.shape == (2, 3, 5, 1)
        torch.testing.assert_close(held, q.float() * s, rtol=0, atol=0)
        assert bool(((held - x).abs() <= s / 2 + 1e-7).all())   # at most half a step
        assert not torch.equal(held, x)                          # it is not the float cache
    assert cache._k[0].dtype == torch.int8 and cache.seq_len == 5
    # bytes: codes (1 byte) plus a float32 scale per row of D = 8
    assert cache.nbytes == 2 * 2 * 3 * 5 * (8 + 4)


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_decoding_in_chunks_equals_one_prefill(n_kv_heads):
    """Each row is quantized on its own, so chunks and single steps read the same rows as one
    prefill of the whole sequence; a GQA cache holds G heads."""
    model = small_gpt(n_kv_heads)
    ids = torch.randint(0, 20, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = model(ids, cache=Int8KVCache()).logits
        cache = Int8KVCache()
        steps = [model(ids[:, :5], cache=cache).logits]
        steps += [model(ids[:, t:t + 1], cache=cache).logits for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, 1), whole, rtol=1e-5, atol=1e-5)
    G = n_kv_heads or 4
    assert cache.keys[0].shape == (2, G, 12, 8) and cache.keys[0].dtype == torch.float32
    assert cache.nbytes == 2 * 2 * 2 * 12 * G * (8 + 4)


def test_close_to_the_float_cache_but_not_equal():
    model = small_gpt()
    ids = torch.randint(0, 20, (1, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        exact = model(ids, cache=KVCache()).logits
        int8 = model(ids, cache=Int8KVCache()).logits
    gap = (int8 - exact).abs().max().item()
    assert 0 < gap < 0.05 * exact.abs().max().item()


def test_bf16_model_reads_bf16_rows():
    model = small_gpt().to(torch.bfloat16)
    cache = Int8KVCache()
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]), cache=cache)
    assert cache.keys[1].dtype == torch.bfloat16 and cache._k[1].dtype == torch.int8


def test_crop_reset_and_state():
    cache = Int8KVCache()
    for i in range(2):
        cache.update(i, torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4))
    saved = cache._state()
    before = [k.clone() for k in cache.keys]
    cache.update(0, torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))
    cache._set_state(saved)                                  # what all_or_nothing does
    assert cache.layer_len(0) == 6 and all(torch.equal(a, b) for a, b in zip(cache.keys, before))
    cache.crop(4)
    assert cache.seq_len == 4 and cache._k_scale[1].shape[2] == 4
    torch.testing.assert_close(cache.keys[0], before[0][:, :, :4], rtol=0, atol=0)
    cache.reset()
    assert cache.seq_len == 0 and cache.nbytes == 0


def test_a_failed_model_step_leaves_it_unchanged():
    model = small_gpt()
    cache = Int8KVCache()
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]), cache=cache)
        with pytest.raises(ValueError):
            model(torch.tensor([[1, 2]]), cache=cache, targets=torch.tensor([[1]]))
    assert cache.seq_len == 3 and cache.nbytes == 2 * 2 * 1 * 3 * 4 * (8 + 4)


def test_refuses_a_sliding_window_and_bad_rows():
    cache = Int8KVCache()
    with pytest.raises(ValueError, match="does not roll"):
        cache.update(0, torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4), window=4)
    with pytest.raises(TypeError):
        cache.update(0, torch.ones(1, 1, 2, 4, dtype=torch.long),
                     torch.ones(1, 1, 2, 4, dtype=torch.long))
