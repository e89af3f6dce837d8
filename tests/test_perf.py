"""The fast paths: the fused q/k/v matmul and the preallocated KV cache.

Each fast path is compared with the plain one it replaces (three nn.Linear modules; concatenating
the cache at every step), and each test names how it would fail: a stale fused weight, a
reallocation inside the decode loop, bytes counted that are only reserved.
"""
from __future__ import annotations

import pytest
import torch

from attnlib import GPT, KVCache, MultiHeadAttention, TransformerConfig


def unfused(mha: MultiHeadAttention, x: torch.Tensor, context: torch.Tensor | None = None,
            is_causal: bool = False) -> torch.Tensor:
    """The reference: the module's output with autograd on (the three nn.Linear path)."""
    with torch.enable_grad():
        return mha(x, context, is_causal=is_causal)[0].detach()


@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_fused_projection_equals_the_three_linears(n_kv_heads):
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads).eval()
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        q, k, v = mha.project_qkv(x)
        fast = mha(x, is_causal=True)[0]
    G = n_kv_heads or 4
    assert q.shape == (2, 4, 7, 8) and k.shape == v.shape == (2, G, 7, 8)
    torch.testing.assert_close(q, mha.split_heads(mha.q_proj(x)).detach())
    torch.testing.assert_close(k, mha.split_heads(mha.k_proj(x)).detach())
    torch.testing.assert_close(v, mha.split_heads(mha.v_proj(x)).detach())
    torch.testing.assert_close(fast, unfused(mha, x, is_causal=True))
    assert mha.fused_qkv()[0].shape == (32 + 2 * G * 8, 32)


def test_fused_weight_is_built_once_and_not_in_the_state_dict():
    mha = MultiHeadAttention(16, 2).eval()
    with torch.no_grad():
        mha(torch.randn(1, 3, 16))
        w = mha.fused_qkv()[0]
        mha(torch.randn(1, 3, 16))
    assert mha.fused_qkv()[0] is w  # reused while nothing changed
    assert set(mha.state_dict()) == {f"{p}_proj.{t}" for p in ("q", "k", "v", "out") for t in ("weight", "bias")}


@pytest.mark.parametrize("change", ["optimizer", "load_state_dict", "to_double", "init"])
def test_fused_weight_is_rebuilt_when_a_parameter_changes(change):
    """A stale stacked weight would give the old projection after the parameters moved."""
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 4, n_kv_heads=2)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        before = mha(x)[0]  # builds the stacked weight
    if change == "optimizer":
        opt = torch.optim.SGD(mha.parameters(), lr=0.5)
        mha(x)[0].square().sum().backward()
        opt.step()
    elif change == "load_state_dict":
        mha.load_state_dict(MultiHeadAttention(16, 4, n_kv_heads=2).state_dict())
    elif change == "to_double":
        mha.double()
        x = x.double()
    else:
        torch.nn.init.normal_(mha.v_proj.bias)  # one bias alone changes
    with torch.no_grad():
        after = mha(x)[0]
    if change == "to_double":  # same values, new storage and dtype: a stale stack would be float32
        assert after.dtype == mha.fused_qkv()[0].dtype == torch.float64
    else:
        assert not torch.allclose(after, before)
    torch.testing.assert_close(after, unfused(mha, x))


def test_training_uses_the_linears_and_gradients_reach_them():
    torch.manual_seed(2)
    mha = MultiHeadAttention(16, 4, n_kv_heads=2)
    x = torch.randn(2, 5, 16)
    mha(x, is_causal=True)[0].sum().backward()
    for name in ("q_proj", "k_proj", "v_proj"):
        assert getattr(mha, name).weight.grad is not None and getattr(mha, name).weight.grad.abs().sum() > 0
    assert mha._fused is None  # never built for training
    with torch.no_grad():
        mha(x)
    mha.train()
    assert mha._fused is None  # train() drops it


def test_cross_attention_is_not_fused():
    torch.manual_seed(3)
    mha = MultiHeadAttention(16, 4, n_kv_heads=2).eval()
    x, ctx = torch.randn(2, 3, 16), torch.randn(2, 6, 16)
    with torch.no_grad():
        out = mha(x, ctx)[0]
    torch.testing.assert_close(out, unfused(mha, x, ctx))
    assert mha._fused is None


def test_hooks_on_the_projections_still_fire():
    mha = MultiHeadAttention(16, 2).eval()
    seen = []
    mha.k_proj.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    with torch.no_grad():
        mha(torch.randn(1, 3, 16))
    assert seen == [(1, 3, 16)]


def test_cache_writes_in_place_after_reserve():
    """With room reserved, every decode step writes into the same buffers (no reallocation)."""
    cache = KVCache()
    cache.reserve(10)
    cache.update(0, torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8))
    ptr, cap = cache.keys[0].data_ptr(), cache.capacity(0)
    assert cap >= 14
    for t in range(10):
        k = torch.randn(1, 2, 1, 8)
        held_k, _ = cache.update(0, k, k)
        assert held_k.data_ptr() == ptr and torch.equal(held_k[:, :, -1:], k)
    assert cache.seq_len == 14 and cache.capacity(0) == cap
    assert cache.nbytes == 2 * 1 * 1 * 14 * 2 * 8 * 4  # used, not reserved
    assert set(vars(cache)) == {"keys", "values", "_cross"}


def test_cache_grows_geometrically_and_keeps_what_it_held():
    cache = KVCache()
    ks, ptrs = [], set()
    for _ in range(100):
        k = torch.randn(2, 1, 1, 4)
        ks.append(k)
        cache.update(0, k, -k)
        ptrs.add(cache.keys[0].data_ptr())
    assert len(ptrs) <= 8  # about log2(100) reallocations, not one per token
    torch.testing.assert_close(cache.keys[0], torch.cat(ks, dim=-2), rtol=0, atol=0)
    torch.testing.assert_close(cache.values[0], -torch.cat(ks, dim=-2), rtol=0, atol=0)
    assert cache.nbytes == 2 * 2 * 100 * 4 * 4
    cache.reset()
    assert cache.capacity(0) == 0 and cache.nbytes == 0


def test_cache_reassigned_by_hand_is_not_written_through():
    """keys set to other tensors (a copy, a cut) are respected: no write into a stale buffer."""
    cache = KVCache()
    cache.update(0, torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2))
    cache.keys = [k.clone() for k in cache.keys]
    cache.update(0, torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    assert cache.keys[0][0, 0, :, 0].tolist() == [1, 1, 1, 0]


def test_cache_under_autograd_concatenates_and_gradients_flow():
    k = torch.randn(1, 2, 3, 4, requires_grad=True)
    cache = KVCache()
    cache.update(0, k, k)
    held, _ = cache.update(0, k * 2, k * 2)
    held.sum().backward()
    torch.testing.assert_close(k.grad, torch.full_like(k, 3.0))


@pytest.mark.parametrize("n_kv_heads", [None, 2])
@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_cached_decoding_equals_recomputation(n_kv_heads, positional):
    torch.manual_seed(4)
    cfg = TransformerConfig(vocab_size=31, d_model=32, n_heads=4, n_layers=2, max_len=40,
                            positional=positional, n_kv_heads=n_kv_heads)
    gpt = GPT(cfg).eval()
    prompt = torch.randint(0, 31, (2, 5))
    ids = gpt.generate(prompt, 12, temperature=0.0)
    assert torch.equal(ids, gpt.generate(prompt, 12, temperature=0.0, use_cache=False))
    cache = KVCache()
    cache.reserve(12)
    with torch.no_grad():
        gpt(ids[:, :5], cache=cache)
        ptr = cache.keys[1].data_ptr()
        step = [gpt(ids[:, t:t + 1], cache=cache).logits[:, -1] for t in range(5, 17)]
        full = gpt(ids).logits[:, 5:]
    assert cache.keys[1].data_ptr() == ptr  # decoded without reallocating
    torch.testing.assert_close(torch.stack(step, 1), full, atol=1e-5, rtol=1e-4)
    G = n_kv_heads or 4
    assert cache.nbytes == 2 * 2 * 2 * 17 * G * 8 * 4
