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


@pytest.mark.parametrize("use_rope, n_kv_heads", [(False, None), (True, None), (True, 2)])
def test_mha_with_cache_equals_full_causal_attention(use_rope, n_kv_heads):
    """Chunks of 4, 1 and 2 tokens through the cache equal one causal pass (GQA: the cache
    holds only the n_kv_heads key/value heads)."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, n_kv_heads=n_kv_heads).eval()
    rope = RotaryEmbedding(4, base=1e5 if n_kv_heads else 10000.0) if use_rope else None
    x = torch.randn(2, 7, 16)
    angles = (lambda a, b: rope.cos_sin(torch.arange(a, b))) if use_rope else (lambda a, b: None)
    full, full_w = mha(x, is_causal=True, rope=angles(0, 7), need_weights=True)
    cache, outs = KVCache(), []
    for start, stop in ((0, 4), (4, 5), (5, 7)):
        out, w = mha(x[:, start:stop], is_causal=True, cache=cache, rope=angles(start, stop), need_weights=True)
        torch.testing.assert_close(w, full_w[:, :, start:stop, :stop], atol=1e-6, rtol=1e-5)
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.seq_len == 7
    assert cache.keys[0].shape == (2, n_kv_heads or 4, 7, 4)


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


# ---- issue 10: a cache belongs to one model, and a failed step changes nothing -------------------

from attnlib import GPT, EncoderDecoder, TransformerConfig  # noqa: E402


def small_cfg(**kw) -> TransformerConfig:
    base = dict(vocab_size=11, d_model=8, n_heads=2, n_layers=2, max_len=12)
    base.update(kw)
    return TransformerConfig(**base)


def snapshot(cache: KVCache) -> tuple:
    """Everything a step could change: lengths and contents of every layer, and the cross entries."""
    return (cache.seq_len, cache.n_layers, [cache.layer_len(i) for i in range(cache.n_layers)],
            [t.clone() for t in (*cache.keys, *cache.values)],
            {i: tuple(t.clone() for t in kv) for i, kv in cache.cross.items()})


def assert_same(a: tuple, b: tuple) -> None:
    assert a[:3] == b[:3]
    assert len(a[3]) == len(b[3]) and all(torch.equal(x, y) for x, y in zip(a[3], b[3]))
    assert a[4].keys() == b[4].keys()
    assert all(torch.equal(x, y) for i in a[4] for x, y in zip(a[4][i], b[4][i]))


@pytest.mark.parametrize("other,what", [(dict(n_layers=3), "n_layers=2.*n_layers=3"),
                                        (dict(n_layers=1), "n_layers=2.*n_layers=1"),
                                        (dict(n_heads=4), "n_heads=2.*n_heads=4"),
                                        (dict(d_model=16), "d_model=8.*d_model=16")])
def test_cache_refuses_a_model_of_another_shape(other, what):
    torch.manual_seed(0)
    a, b = GPT(small_cfg()).eval(), GPT(small_cfg(**other)).eval()
    cache = KVCache()
    with torch.no_grad():
        a(torch.tensor([[1, 2, 3]]), cache=cache)
        before = snapshot(cache)
        with pytest.raises(ValueError, match=what + ".*(reset|new KVCache)"):
            b(torch.tensor([[4]]), cache=cache)
    assert_same(snapshot(cache), before)  # [4, 4, 1] or [5, 4] layer lengths before the fix
    cache.reset()
    with torch.no_grad():
        b(torch.tensor([[4]]), cache=cache)  # after reset() the cache serves the new model
    assert cache.seq_len == 1


def test_gpt_cache_is_not_an_encoder_decoder_cache():
    torch.manual_seed(0)
    gpt, s2s = GPT(small_cfg()).eval(), EncoderDecoder(small_cfg()).eval()
    cache = KVCache()
    with torch.no_grad():
        gpt(torch.tensor([[1, 2]]), cache=cache)
        memory, _, _ = s2s.encode(torch.tensor([[3, 4, 5]]))
        with pytest.raises(ValueError, match="GPT.*EncoderDecoder"):
            s2s.decode(torch.tensor([[1]]), memory, cache=cache)


def test_encoder_decoder_cache_refuses_another_source():
    torch.manual_seed(0)
    s2s = EncoderDecoder(small_cfg()).eval()
    with torch.no_grad():
        mem_a, _, _ = s2s.encode(torch.tensor([[3, 4, 5]]))
        mem_b, _, _ = s2s.encode(torch.tensor([[6, 7, 8]]))
        cache = KVCache()
        s2s.decode(torch.tensor([[1, 2]]), mem_a, cache=cache)
        s2s.decode(torch.tensor([[3]]), mem_a.clone(), cache=cache)  # the same source, another tensor: fine
        before = snapshot(cache)
        with pytest.raises(ValueError, match="another source.*reset"):
            s2s.decode(torch.tensor([[4]]), mem_b, cache=cache)  # logits 0.03 off before the fix
        with pytest.raises(ValueError, match=r"another source.*\(1, 3, 8\).*\(1, 2, 8\)"):
            s2s.decode(torch.tensor([[4]]), mem_a[:, :2], cache=cache)
        assert_same(snapshot(cache), before)
        cache.reset()
        full = s2s.decode(torch.tensor([[1, 2, 4]]), mem_b).logits
        s2s.decode(torch.tensor([[1, 2]]), mem_b, cache=cache)
        step = s2s.decode(torch.tensor([[4]]), mem_b, cache=cache).logits
    torch.testing.assert_close(step[:, -1], full[:, -1], atol=1e-5, rtol=1e-5)


def fail_in_layer(layers, i: int):
    """Make layer i raise (an error half-way through a step, after earlier layers appended)."""
    def boom(*args, **kwargs):
        raise RuntimeError("boom")
    layers[i].forward = boom


@pytest.mark.parametrize("how", ["bad id", "too long", "batch", "layer error"])
def test_a_failed_gpt_step_leaves_the_cache_as_it_was(how):
    torch.manual_seed(0)
    model = GPT(small_cfg()).eval()
    cache = KVCache()
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3], [4, 5, 6]]), cache=cache)
        before = snapshot(cache)
        ids = torch.tensor([[1], [2]])
        if how == "bad id":
            ids = torch.tensor([[1], [99]])
        elif how == "too long":
            ids = torch.ones(2, 10, dtype=torch.long)
        elif how == "batch":
            ids = torch.tensor([[1]])
        else:
            fail_in_layer(model.layers, 1)
        with pytest.raises((ValueError, RuntimeError)):
            model(ids, cache=cache)
        assert_same(snapshot(cache), before)
        if how == "layer error":
            del model.layers[1].forward  # healed: the cache still continues correctly
        full = model(torch.tensor([[1, 2, 3, 7], [4, 5, 6, 8]])).logits
        step = model(torch.tensor([[7], [8]]), cache=cache).logits
    torch.testing.assert_close(step[:, -1], full[:, -1], atol=1e-5, rtol=1e-5)


def test_a_step_inside_a_checked_call_keeps_no_state(monkeypatch):
    """generate's loop owns a private cache that a failure discards: its steps save nothing (the
    saving is what a direct call pays, and it is a measurable share of a decode step)."""
    from attnlib._checks import trusted
    saved = []
    real = KVCache._state
    monkeypatch.setattr(KVCache, "_state", lambda self: saved.append(1) or real(self))
    model = GPT(small_cfg()).eval()
    cache = KVCache()
    with torch.no_grad():
        model(torch.tensor([[1, 2]]), cache=cache)
        assert len(saved) == 1  # a direct call: its state is kept
        with trusted():
            model(torch.tensor([[3]]), cache=cache)
        model.generate(torch.tensor([[1, 2]]), 5, temperature=0.0)
    assert len(saved) == 1  # neither the trusted step nor generate's 5 steps saved anything


def test_a_failed_first_encoder_decoder_step_leaves_the_cache_empty():
    torch.manual_seed(0)
    s2s = EncoderDecoder(small_cfg()).eval()
    fail_in_layer(s2s.decoder_layers, 1)
    cache = KVCache()
    with torch.no_grad():
        memory, _, _ = s2s.encode(torch.tensor([[3, 4, 5]]))
        with pytest.raises(RuntimeError, match="boom"):
            s2s.decode(torch.tensor([[1]]), memory, cache=cache)
    assert cache.seq_len == 0 and cache.n_layers == 0 and not cache.has_cross(0)
    del s2s.decoder_layers[1].forward
    other, _, _ = s2s.encode(torch.tensor([[6, 7, 8]]))
    with torch.no_grad():
        s2s.decode(torch.tensor([[1]]), other, cache=cache)  # not tied to the source of the failed step
    assert cache.seq_len == 1


# ---- property-based: cached decoding equals recomputation, for random small models and steps ------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

HAS_GQA = "n_kv_heads" in TransformerConfig.__dataclass_fields__


@st.composite
def model_and_steps(draw):
    n_heads = draw(st.integers(1, 3))
    head_dim = draw(st.sampled_from([2, 4]))
    kw = dict(vocab_size=draw(st.integers(3, 20)), d_model=n_heads * head_dim, n_heads=n_heads,
              n_layers=draw(st.integers(1, 3)), max_len=12,
              positional=draw(st.sampled_from(["learned", "sinusoidal", "rope", "none"])),
              activation=draw(st.sampled_from(["relu", "gelu", "gelu_tanh", "swiglu"])),
              norm_first=draw(st.booleans()))
    if HAS_GQA:  # grouped-query attention: the cache holds n_kv_heads heads
        kw["n_kv_heads"] = draw(st.sampled_from([g for g in range(1, n_heads + 1) if n_heads % g == 0]))
    kind = draw(st.sampled_from(["gpt", "seq2seq"]))
    steps = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6).filter(lambda s: sum(s) <= 12))
    return TransformerConfig(**kw), kind, steps, draw(st.integers(0, 2**31 - 1)), draw(st.integers(1, 2))


@given(model_and_steps())
def test_property_cached_steps_equal_recomputation(case):
    cfg, kind, steps, seed, B = case
    torch.manual_seed(seed)
    model = (GPT(cfg) if kind == "gpt" else EncoderDecoder(cfg)).eval()
    ids = torch.randint(0, cfg.vocab_size, (B, sum(steps)))
    cache, outs, start = KVCache(), [], 0
    with torch.no_grad():
        if kind == "gpt":
            full = model(ids).logits
            run = lambda x: model(x, cache=cache).logits  # noqa: E731
        else:
            memory, _, _ = model.encode(torch.randint(0, cfg.vocab_size, (B, 5)))
            full = model.decode(ids, memory).logits
            run = lambda x: model.decode(x, memory, cache=cache).logits  # noqa: E731
        for n in steps:
            outs.append(run(ids[:, start:start + n]))
            start += n
            assert cache.seq_len == start
            assert all(cache.layer_len(i) == start for i in range(cfg.n_layers))
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)
    kv_heads = getattr(cfg, "n_kv_heads", None) or cfg.n_heads
    assert cache.nbytes == 2 * cfg.n_layers * B * start * kv_heads * cfg.head_dim * 4


def test_a_copy_of_a_cache_continues_on_its_own():
    model, cache = GPT(small_cfg()).eval(), KVCache()
    with torch.no_grad():
        model(torch.tensor([[1, 2]]), cache=cache)
    import copy
    twin = copy.deepcopy(cache)  # a copy holds the same tokens and continues on its own
    with torch.no_grad():
        model(torch.tensor([[3]]), cache=twin)
    assert twin.seq_len == 3 and cache.seq_len == 2
    with torch.no_grad():
        full = model(torch.tensor([[1, 2, 4]])).logits[:, -1]
        step = model(torch.tensor([[4]]), cache=cache).logits[:, -1]  # the original was not written through
    torch.testing.assert_close(step, full, atol=1e-5, rtol=1e-5)


def test_cache_refuses_another_model_of_the_same_sizes():
    """Two models with equal shapes hold different keys; a RoPE model's cache continued by a
    learned-position model of the same sizes would give wrong logits with no error."""
    torch.manual_seed(0)
    a, b = GPT(small_cfg()).eval(), GPT(small_cfg()).eval()
    rope = GPT(small_cfg(positional="rope")).eval()
    for other, what in ((b, "another GPT \\(of the same sizes\\)"), (rope, "positional='learned'.*'rope'")):
        cache = KVCache()
        with torch.no_grad():
            a(torch.tensor([[1, 2, 3]]), cache=cache)
            with pytest.raises(ValueError, match=what + ".*reset"):
                other(torch.tensor([[4]]), cache=cache)
        assert cache.seq_len == 3


def test_a_step_never_writes_into_what_the_cache_holds():
    """A step concatenates: keys read before it (which autograd may have saved, or which were
    made under inference mode) are never changed, and nbytes counts what is held."""
    cache = KVCache()
    k = torch.randn(1, 2, 10, 4)
    held, _ = cache.update(0, k, -k)
    before = held.clone()
    for t in range(7):
        row = torch.randn(1, 2, 1, 4)
        now, _ = cache.update(0, row, row)
        torch.testing.assert_close(now[:, :, -1:], row)
    assert torch.equal(held, before) and cache.seq_len == 17
    torch.testing.assert_close(cache.keys[0][:, :, :10], k)
    torch.testing.assert_close(cache.values[0][:, :, :10], -k)
    assert cache.nbytes == 2 * 17 * 2 * 4 * 4


def test_a_cache_filled_in_inference_mode_continues_outside_it():
    torch.manual_seed(0)
    model = GPT(small_cfg()).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    cache = KVCache()
    with torch.inference_mode():
        model(ids[:, :3], cache=cache)
    with torch.no_grad():
        step = model(ids[:, 3:], cache=cache).logits
        full = model(ids).logits
    torch.testing.assert_close(step[:, -1], full[:, -1], atol=1e-5, rtol=1e-5)


def test_backward_through_cached_steps_when_only_the_queries_need_grad():
    """LoRA on q_proj only: the keys and values need no grad, the queries do."""
    torch.manual_seed(0)
    model = GPT(small_cfg())
    for name, p in model.named_parameters():
        p.requires_grad_("q_proj" in name)
    cache = KVCache()
    a = model(torch.tensor([[1, 2, 3]]), cache=cache).logits
    b = model(torch.tensor([[4]]), cache=cache).logits
    (a.sum() + b.sum()).backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "q_proj" in n)


def test_cache_under_autograd_concatenates_and_gradients_flow():
    cache = KVCache()
    k = torch.randn(1, 1, 3, 2, requires_grad=True)
    held, _ = cache.update(0, k, k * 2)
    k2 = torch.randn(1, 1, 1, 2, requires_grad=True)
    held, vals = cache.update(0, k2, k2 * 2)
    (held.sum() + vals.sum()).backward()
    torch.testing.assert_close(k.grad, torch.full_like(k, 3.0))
    torch.testing.assert_close(k2.grad, torch.full_like(k2, 3.0))


def test_keys_and_values_are_read_only_views():
    cache = KVCache()
    cache.update(0, torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2))
    with pytest.raises(AttributeError):
        cache.keys = []
    assert [t.shape for t in cache.keys] == [(1, 1, 2, 2)]


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


def test_gqa_cross_attention_cache_is_computed_once():
    """Cross-attention over a context: the G key/value heads are computed once and reused."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, n_kv_heads=2).eval()
    x, ctx = torch.randn(2, 7, 16), torch.randn(2, 5, 16)
    cache = KVCache()
    a, _ = mha(x[:, :3], ctx, cache=cache)
    assert cache.get_cross(0)[0].shape == (2, 2, 5, 4)
    b, _ = mha(x[:, 3:], ctx, cache=cache)
    torch.testing.assert_close(torch.cat([a, b], 1), mha(x, ctx)[0], atol=1e-5, rtol=1e-5)