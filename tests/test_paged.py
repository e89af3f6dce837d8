"""PagedKVCache: blocks from one pool, a block table per sequence, and attention through it
equal to the contiguous KVCache."""
from __future__ import annotations

import pytest
import torch

from attnlib import (GPT, KVCache, PagedKVCache, TransformerConfig, paged_attention,
                     scaled_dot_product_attention)


def small_gpt(n_kv_heads=None, seed=0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=20, d_model=32, n_heads=4, n_layers=2, max_len=40,
                            n_kv_heads=n_kv_heads)
    return GPT(cfg).eval()


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_interleaved_sequences_equal_their_own_contiguous_caches(n_kv_heads):
    """Three sequences of different lengths decoded in turn (so their blocks interleave in the
    pool) give exactly the logits and keys of a KVCache of their own."""
    model = small_gpt(n_kv_heads)
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 20, (1, n), generator=gen) for n in (3, 9, 5)]
    pool = PagedKVCache.for_model(model, n_blocks=16, block_size=4)
    caches = [KVCache() for _ in prompts]
    with torch.no_grad():
        last = {}
        for i, p in enumerate(prompts):
            a = model(p, cache=pool.sequence(i)).logits
            b = model(p, cache=caches[i]).logits
            torch.testing.assert_close(a, b, rtol=0, atol=0)
            last[i] = a[:, -1:].argmax(-1)
        for step in range(6):
            for i in range(len(prompts)):
                if step > 2 * i + 1:        # sequences stop at different lengths
                    continue
                a = model(last[i], cache=pool.sequence(i)).logits
                b = model(last[i], cache=caches[i]).logits
                torch.testing.assert_close(a, b, rtol=0, atol=0)
                last[i] = a[:, -1:].argmax(-1)
    for i, kv in enumerate(caches):
        view = pool.sequence(i)
        assert view.seq_len == kv.seq_len and view.n_layers == 2
        for layer in range(2):
            assert torch.equal(view.keys[layer], kv.keys[layer])
            assert torch.equal(view.values[layer], kv.values[layer])
        # blocks are taken only as the sequence grows: ceil(T / block_size)
        assert len(pool.block_table[i]) == -(-kv.seq_len // 4)
    held = [b for t in pool.block_table.values() for b in t]
    assert sorted(held) == list(range(len(held)))            # each block held once
    # decoding in turn interleaves them: some sequence's blocks are not one run
    assert any(t != list(range(t[0], t[0] + len(t))) for t in pool.block_table.values())
    assert pool.nbytes == len(held) * pool.block_nbytes
    assert pool.block_nbytes == 2 * 2 * (n_kv_heads or 4) * 4 * 8 * 4


def test_greedy_generation_equals_generate():
    model = small_gpt()
    prompt = torch.tensor([[3, 1, 4, 1, 5]])
    pool = PagedKVCache.for_model(model, n_blocks=8, block_size=3)
    seq = pool.sequence("a")
    ids = prompt
    with torch.no_grad():
        logits = model(prompt, cache=seq).logits
        for _ in range(12):
            nxt = logits[:, -1:].argmax(-1)
            ids = torch.cat([ids, nxt], 1)
            logits = model(nxt, cache=seq).logits
    assert torch.equal(ids, model.generate(prompt, 12, temperature=0.0))


@pytest.mark.parametrize("n_kv_heads, t_new", [(None, 1), (2, 1), (1, 3)])
def test_paged_attention_of_a_ragged_batch(n_kv_heads, t_new):
    """One call over sequences of 2, 13 and 7 positions equals causal attention over each
    sequence's own keys and values."""
    G, H, D = n_kv_heads or 4, 4, 8
    pool = PagedKVCache(1, G, D, n_blocks=12, block_size=4)
    gen = torch.Generator().manual_seed(0)
    lengths = {"a": 2, "b": 13, "c": 7}
    for t in range(max(lengths.values())):          # written in turn: interleaved blocks
        for s, n in lengths.items():
            if t < n:
                pool.write(s, 0, torch.randn(G, 1, D, generator=gen),
                           torch.randn(G, 1, D, generator=gen))
    q = torch.randn(3, H, t_new, D, generator=gen)
    out = paged_attention(q, pool, 0, list(lengths))
    for b, s in enumerate(lengths):
        k, v = pool.read(s, 0)
        ref, _ = scaled_dot_product_attention(q[b:b + 1], k[None], v[None], is_causal=False,
                                              attn_mask=torch.ones(t_new, k.shape[1]).bool()
                                              .tril(k.shape[1] - t_new),
                                              enable_gqa=G != H)
        torch.testing.assert_close(out[b:b + 1], ref)


def test_free_and_reuse_blocks():
    pool = PagedKVCache(1, 1, 2, n_blocks=4, block_size=2)
    pool.write("a", 0, torch.ones(1, 3, 2), torch.ones(1, 3, 2))      # 2 blocks
    pool.write("b", 0, torch.zeros(1, 2, 2), torch.zeros(1, 2, 2))    # 1 block
    assert pool.block_table == {"a": [0, 1], "b": [2]} and pool.blocks_used == 3
    pool.free("a")
    assert pool.free_blocks == [3, 0, 1] and pool.blocks_used == 1
    pool.write("c", 0, 2 * torch.ones(1, 5, 2), 2 * torch.ones(1, 5, 2))
    assert pool.block_table["c"] == [3, 0, 1]
    assert torch.equal(pool.read("c", 0)[0], 2 * torch.ones(1, 5, 2))
    with pytest.raises(RuntimeError, match="all in use"):
        pool.write("b", 0, torch.zeros(1, 1, 2), torch.zeros(1, 1, 2))
    pool.truncate("c", 2)
    assert pool.block_table["c"] == [3] and pool.length("c") == 2 and pool.blocks_used == 2


def test_a_step_that_runs_out_of_blocks_changes_nothing():
    model = small_gpt()
    pool = PagedKVCache.for_model(model, n_blocks=2, block_size=4)
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3, 4, 5, 6]]), cache=pool.sequence(0))
        before = (dict(pool.block_table), list(pool.free_blocks), pool.length(0, 1))
        with pytest.raises(RuntimeError, match="all in use"):
            model(torch.tensor([[1, 2, 3]]), cache=pool.sequence(0))
    assert (dict(pool.block_table), list(pool.free_blocks), pool.length(0, 1)) == before
    assert pool.sequence(0).seq_len == 6


def test_refusals():
    model = small_gpt()
    pool = PagedKVCache.for_model(model, n_blocks=4)
    with pytest.raises(ValueError, match="batch of 2"):
        model(torch.tensor([[1, 2], [3, 4]]), cache=pool.sequence(0))
    with pytest.raises(ValueError, match="does not roll"):
        pool.sequence(1).update(0, torch.randn(1, 4, 1, 8), torch.randn(1, 4, 1, 8), window=3)
    with pytest.raises(ValueError, match=r"\(1, G=4, T_new, D=8\)"):
        pool.sequence(1).update(0, torch.randn(1, 2, 1, 8), torch.randn(1, 2, 1, 8))
    with pytest.raises(ValueError, match="n_blocks"):
        PagedKVCache(1, 1, 2, n_blocks=0)
    for dtype in ("float32", torch.int8):  # a name, or codes with no room for a key's value
        with pytest.raises(TypeError, match="dtype must be a floating-point torch.dtype"):
            PagedKVCache(1, 1, 2, n_blocks=4, dtype=dtype)
    other = small_gpt(seed=1)
    with torch.no_grad():
        model(torch.tensor([[1, 2]]), cache=pool.sequence(2))
        with pytest.raises(ValueError, match="serves the one"):
            other(torch.tensor([[1]]), cache=pool.sequence(2))
    pool.sequence(2).reset()
    assert pool.length(2) == 0 and 2 not in pool.block_table
