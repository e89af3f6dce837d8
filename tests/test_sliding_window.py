"""Sliding-window attention: the mask, the model that uses it, and the rolling KV cache.

Query i sees keys i-W+1 .. i (W keys, itself included). A cache of such a model holds at most W
positions per layer, counts every position it has seen, and continues exactly as a full
recomputation would: after a prefill longer than the window, in chunks, one token at a time.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import attnlib
from attnlib import GPT, KVCache, MultiHeadAttention, TransformerConfig, causal_mask
from attnlib import sliding_window_mask
from attnlib.layers import DecoderLayer

V = 23


def window_by_definition(q_len: int, k_len: int, window: int) -> torch.Tensor:
    """allowed[i, j]: query i sits at key position p = k_len - q_len + i; p - W < j <= p."""
    out = torch.zeros(q_len, k_len, dtype=torch.bool)
    for i in range(q_len):
        p = k_len - q_len + i
        for j in range(k_len):
            out[i, j] = p - window < j <= p
    return out


def model(seed: int = 0, **kw) -> GPT:
    torch.manual_seed(seed)
    base = dict(vocab_size=V, d_model=16, n_heads=4, n_layers=2, max_len=48, sliding_window=4)
    base.update(kw)
    return GPT(TransformerConfig(**base)).eval()


def sharpen(gpt: GPT, std: float = 0.3) -> GPT:
    """Larger weights: peaked predictions (greedy paths are not near-ties) and outputs that
    clearly depend on every key a query sees."""
    with torch.no_grad():
        for p in gpt.parameters():
            if p.dim() == 2:
                p.normal_(0.0, std)
    return gpt


# ---------------------------------------------------------------------------------- the mask
@pytest.mark.parametrize("q_len, k_len", [(1, 1), (5, 5), (1, 9), (3, 9), (9, 9), (6, 4)])
@pytest.mark.parametrize("window", [1, 2, 3, 5, 20])
def test_mask_is_the_definition_aligned_lower_right(q_len, k_len, window):
    mask = sliding_window_mask(q_len, k_len, window)
    assert mask.dtype == torch.bool and mask.shape == (q_len, k_len)
    assert torch.equal(mask, window_by_definition(q_len, k_len, window))
    assert not (mask & ~causal_mask(q_len, k_len)).any()  # never a later key
    if q_len <= k_len:  # every query sees min(W, keys up to itself) keys, itself included
        seen = mask.sum(-1)
        expected = torch.clamp(torch.arange(k_len - q_len + 1, k_len + 1), max=window)
        assert torch.equal(seen, expected)


def test_mask_without_a_binding_window_is_the_causal_mask():
    assert torch.equal(sliding_window_mask(4, 7, None), causal_mask(4, 7))
    assert torch.equal(sliding_window_mask(4, 7, 7), causal_mask(4, 7))
    assert torch.equal(sliding_window_mask(4, 7, 100), causal_mask(4, 7))
    assert not torch.equal(sliding_window_mask(4, 7, 6), causal_mask(4, 7))
    # W = 1: each query sees itself only (the lower-right diagonal)
    assert torch.equal(sliding_window_mask(3, 5, 1), torch.eye(5, dtype=torch.bool)[2:])


def test_mask_takes_numpy_and_tensor_ints_and_a_device():
    a = sliding_window_mask(np.int64(3), torch.tensor(6), np.int32(2), device="cpu")
    assert torch.equal(a, window_by_definition(3, 6, 2)) and a.device.type == "cpu"
    assert attnlib.sliding_window_mask is sliding_window_mask


@pytest.mark.parametrize("args, error, words", [
    ((4, 4, 0), ValueError, "window must be an int >= 1, got window=0"),
    ((4, 4, -2), ValueError, "window must be an int >= 1"),
    ((4, 4, 2.5), TypeError, "window must be an int, got window=2.5"),
    ((4, 4, "3"), TypeError, "window must be an int"),
    ((4, 4, True), TypeError, "window must be an int"),
    ((0, 4, 2), ValueError, "q_len must be an int >= 1"),
    ((4, 0, 2), ValueError, "k_len must be an int >= 1"),
    ((4.0, 4, 2), TypeError, "q_len must be an int"),
])
def test_mask_refuses_bad_arguments_by_name(args, error, words):
    with pytest.raises(error, match=words):
        sliding_window_mask(*args)


# ------------------------------------------------------------------- attention with a window
@pytest.mark.parametrize("n_kv_heads", [None, 2])
@pytest.mark.parametrize("window", [1, 3, 6])
def test_mha_window_equals_sdpa_with_the_window_mask(n_kv_heads, window):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, n_kv_heads=n_kv_heads, sliding_window=window).eval()
    x = torch.randn(2, 9, 16)
    out, w = mha(x, is_causal=True, need_weights=True)
    q = mha.split_heads(mha.q_proj(x))
    k, v = mha.split_heads(mha.k_proj(x)), mha.split_heads(mha.v_proj(x))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=window_by_definition(9, 9, window),
                                         enable_gqa=n_kv_heads is not None)
    torch.testing.assert_close(out, mha.out_proj(mha.merge_heads(ref)), atol=1e-6, rtol=1e-5)
    assert torch.equal(w != 0, window_by_definition(9, 9, window).expand_as(w))  # weights: window
    fused, _ = mha(x, is_causal=True)  # SDPA's kernel with the explicit mask: the same
    torch.testing.assert_close(fused, out, atol=1e-6, rtol=1e-5)


def test_a_window_is_causal_self_attention_only():
    mha = MultiHeadAttention(8, 2, sliding_window=2)
    x = torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match="sliding_window=2.*is_causal=True and no context"):
        mha(x)
    with pytest.raises(ValueError, match="sliding_window=2.*is_causal=True and no context"):
        mha(x, x, is_causal=True)
    for bad, error in ((0, ValueError), (2.5, TypeError), ("4", TypeError)):
        with pytest.raises(error, match="sliding_window must be an int"):
            MultiHeadAttention(8, 2, sliding_window=bad)
    assert MultiHeadAttention(8, 2, sliding_window=np.int64(3)).sliding_window == 3


def test_decoder_layer_and_gpt_take_the_window_from_the_config():
    cfg = TransformerConfig(vocab_size=V, d_model=8, n_heads=2, n_layers=2, sliding_window=3)
    layer = DecoderLayer.from_config(cfg)
    assert layer.self_attn.sliding_window == 3
    assert all(b.self_attn.sliding_window == 3 for b in GPT(cfg).layers)
    s2s_layer = DecoderLayer.from_config(cfg, cross_attention=True)
    assert s2s_layer.cross_attn.sliding_window is None  # a source has no "earlier" keys
    assert GPT(TransformerConfig(vocab_size=V, d_model=8, n_heads=2, n_layers=1)).layers[0] \
        .self_attn.sliding_window is None
    with pytest.raises(ValueError, match="sliding_window must be a positive int"):
        TransformerConfig(vocab_size=V, d_model=8, n_heads=2, n_layers=1, sliding_window=0)


@pytest.mark.parametrize("cls", [attnlib.Encoder, attnlib.EncoderDecoder])
def test_bidirectional_models_refuse_a_window(cls):
    cfg = TransformerConfig(vocab_size=V, d_model=8, n_heads=2, n_layers=1, sliding_window=3)
    with pytest.raises(ValueError, match="sliding_window=3 .*sliding_window=None"):
        cls(cfg)


def test_the_live_page_refuses_a_window_it_cannot_draw():
    """viz.live_model's JavaScript forward pass attends to every earlier key."""
    from attnlib import viz

    gpt = model(sliding_window=3, vocab_size=5)
    tok = attnlib.CharTokenizer("abcde")
    with pytest.raises(ValueError, match="this model has sliding_window=3"):
        viz.live_model(gpt, tok)


@torch.no_grad()
def test_gpt_window_reaches_back_n_layers_times_w_minus_1_positions():
    """With L layers of window W, position i reads tokens i - L(W - 1) .. i and nothing before:
    changing token 0 changes the logits up to position L(W - 1) and not after it."""
    L, W, T = 2, 4, 20
    gpt = sharpen(model(n_layers=L, sliding_window=W))
    ids = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(0))
    other = ids.clone()
    other[0, 0] = (ids[0, 0] + 1) % V
    changed = (gpt(ids).logits - gpt(other).logits).abs().amax(-1)[0]  # (T,)
    reach = L * (W - 1)
    assert bool((changed[:reach + 1] > 1e-4).all()), changed
    assert bool((changed[reach + 1:] == 0).all()), changed
    full = sharpen(model(n_layers=L, sliding_window=None))  # without the window: all positions
    changed = (full(ids).logits - full(other).logits).abs().amax(-1)[0]
    assert bool((changed > 1e-4).all())


@torch.no_grad()
def test_a_window_longer_than_the_sequence_changes_nothing():
    ids = torch.randint(0, V, (2, 10), generator=torch.Generator().manual_seed(0))
    a, b = model(sliding_window=10), model(sliding_window=None)
    torch.testing.assert_close(a(ids).logits, b(ids).logits)
    c = model(sliding_window=9)
    assert not torch.allclose(c(ids).logits, b(ids).logits)


# --------------------------------------------------------------------------- the rolling cache
SCHEDULES = {
    "prefill longer than the window, then single steps": [11, 1, 1, 1, 1, 1, 1],
    "chunks of several tokens": [3, 4, 2, 5, 3],
    "single steps from the start": [1] * 14,
    "chunks longer than the window": [2, 9, 1, 7],
}


@torch.no_grad()
@pytest.mark.parametrize("schedule", list(SCHEDULES), ids=lambda s: s.split(",")[0])
@pytest.mark.parametrize("positional, n_kv_heads", [("learned", None), ("rope", None),
                                                    ("rope", 2), ("sinusoidal", 1)])
@pytest.mark.parametrize("window, batch", [(1, 1), (3, 2), (4, 3), (6, 1)])
def test_rolling_cache_equals_full_recomputation(schedule, positional, n_kv_heads, window, batch):
    steps = SCHEDULES[schedule]
    gpt = sharpen(model(positional=positional, n_kv_heads=n_kv_heads, sliding_window=window,
                        n_layers=3), 0.2)
    ids = torch.randint(0, V, (batch, sum(steps)), generator=torch.Generator().manual_seed(1))
    full = gpt(ids).logits
    cache, start, G, D = KVCache(), 0, gpt.cfg.n_kv_heads, gpt.cfg.head_dim
    for n in steps:
        out = gpt(ids[:, start:start + n], cache=cache).logits
        torch.testing.assert_close(out, full[:, start:start + n], atol=1e-5, rtol=1e-5)
        start += n
        held = min(start, window)
        assert cache.seq_len == len(cache) == start  # positions seen, not held
        assert [cache.layer_len(i) for i in range(3)] == [held] * 3
        assert all(k.shape == (batch, G, held, D) for k in (*cache.keys, *cache.values))
        assert cache.nbytes == 2 * 3 * batch * held * G * D * 4


@torch.no_grad()
def test_rolling_cache_holds_the_keys_of_the_last_window_positions():
    """What a rolling layer holds is exactly the last W positions' keys and values, as a cache
    large enough to keep everything (extra) has them."""
    gpt = sharpen(model(positional="rope", n_kv_heads=2, sliding_window=4))
    ids = torch.randint(0, V, (2, 15), generator=torch.Generator().manual_seed(2))
    rolling, everything = KVCache(), KVCache(extra=100)
    for start, stop in ((0, 6), (6, 7), (7, 11), (11, 12), (12, 15)):
        gpt(ids[:, start:stop], cache=rolling)
        gpt(ids[:, start:stop], cache=everything)
        assert everything.layer_len(0) == stop  # extra=100: nothing let go yet
        for a, b in zip((*rolling.keys, *rolling.values), (*everything.keys, *everything.values)):
            torch.testing.assert_close(a, b[:, :, -4:], atol=1e-6, rtol=1e-5)


@torch.no_grad()
def test_nbytes_stops_growing_once_the_window_is_full():
    gpt = model(n_kv_heads=2, sliding_window=5, max_len=64)
    cache, sizes = KVCache(), []
    gpt(torch.tensor([[1, 2]]), cache=cache)
    for t in range(40):
        gpt(torch.tensor([[t % V]]), cache=cache)
        sizes.append(cache.nbytes)
    assert sizes[:3] == [2 * 2 * 1 * n * 2 * 4 * 4 for n in (3, 4, 5)]
    assert set(sizes[2:]) == {2 * 2 * 1 * 5 * 2 * 4 * 4}  # 2 x L x B x W x G x D x 4 bytes
    assert cache.seq_len == 42 and "seq_len=42" in repr(cache)
    plain, grown = model(n_kv_heads=2, sliding_window=None, max_len=64), KVCache()
    plain(torch.arange(42)[None] % V, cache=grown)
    assert grown.nbytes == 42 / 5 * sizes[-1]  # without a window: every position


@torch.no_grad()
@pytest.mark.parametrize("extra", [0, 2])
def test_decoding_steps_after_a_full_window_need_no_mask(monkeypatch, extra):
    """A one-token step over a full rolling cache is handed exactly W keys (also when it holds
    more): every one visible, so attention runs without a mask (torch's fast path), as for a
    model without a window."""
    gpt = model(sliding_window=4)
    cache = KVCache(extra=extra)
    gpt(torch.randint(0, V, (1, 9)), cache=cache)
    seen = []
    original = attnlib.mha.attend

    def spy(q, k, v, attn_mask=None, *args, **kwargs):
        seen.append((k.shape[2], attn_mask))
        return original(q, k, v, attn_mask, *args, **kwargs)
    monkeypatch.setattr(attnlib.mha, "attend", spy)
    gpt(torch.tensor([[3]]), cache=cache)
    assert seen == [(4, None), (4, None)]


@torch.no_grad()
@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_generate_with_a_window_equals_recomputation(positional):
    gpt = sharpen(model(positional=positional, n_kv_heads=2, sliding_window=3, max_len=40))
    prompt = torch.randint(0, V, (3, 7), generator=torch.Generator().manual_seed(4))
    cached = gpt.generate(prompt, 20, temperature=0.0)
    assert torch.equal(cached, gpt.generate(prompt, 20, temperature=0.0, use_cache=False))
    logits = gpt(cached[:, :-1]).logits  # greedy: argmax of the model's own full forward
    assert torch.equal(cached[:, 7:], logits[:, 6:].argmax(-1))
    assert len(set(map(tuple, cached[:, 7:].tolist()))) > 1  # rows differ: not degenerate
    g = [torch.Generator().manual_seed(5) for _ in range(2)]
    sampled = [gpt.generate(prompt, 20, temperature=1.0, top_k=5, use_cache=c, generator=gen)
               for c, gen in zip((True, False), g)]
    assert torch.equal(*sampled)


@torch.no_grad()
def test_cached_attention_weights_are_the_visible_part_of_the_full_ones():
    """With a rolling cache a step's weights cover the keys it was handed (the last W - 1 held
    positions and the new ones): the full forward's weights at those columns."""
    gpt = sharpen(model(sliding_window=3))
    ids = torch.randint(0, V, (2, 12), generator=torch.Generator().manual_seed(0))
    full = gpt(ids, need_weights=True).attentions
    cache = KVCache()
    for start, stop in ((0, 5), (5, 6), (6, 9), (9, 12)):
        steps = gpt(ids[:, start:stop], cache=cache, need_weights=True).attentions
        first = max(0, start - 2)  # the oldest key the first new query can see
        for w, ref in zip(steps, full):
            assert w.shape == (2, 4, stop - start, stop - first)
            torch.testing.assert_close(w, ref[:, :, start:stop, first:stop], atol=1e-6, rtol=1e-5)
            assert bool((ref[:, :, start:stop, :first] == 0).all())


def snapshot(cache: KVCache) -> tuple:
    return (cache.seq_len, [cache.layer_len(i) for i in range(cache.n_layers)],
            [t.clone() for t in (*cache.keys, *cache.values)], cache.nbytes)


def same(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and a[1] == b[1] and a[3] == b[3] and all(
        torch.equal(x, y) for x, y in zip(a[2], b[2], strict=True))


@torch.no_grad()
@pytest.mark.parametrize("how", ["layer error", "bad id", "too long"])
def test_a_failed_step_leaves_a_rolling_cache_as_it_was(how):
    gpt = model(sliding_window=3, max_len=12)
    ids = torch.randint(0, V, (2, 10), generator=torch.Generator().manual_seed(0))
    cache = KVCache()
    gpt(ids[:, :8], cache=cache)  # 8 seen, 3 held: positions have been let go
    before = snapshot(cache)
    bad = ids[:, 8:10]
    if how == "layer error":
        def boom(*args, **kwargs):
            raise RuntimeError("boom")
        gpt.layers[1].forward = boom  # layer 0 has rolled by then
    elif how == "bad id":
        bad = torch.tensor([[1, 2], [3, 99]])
    else:
        bad = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises((RuntimeError, ValueError)):
        gpt(bad, cache=cache)
    assert same(snapshot(cache), before)
    if how == "layer error":
        del gpt.layers[1].forward
    step = gpt(ids[:, 8:10], cache=cache).logits  # continues as if the failure never happened
    torch.testing.assert_close(step, gpt(ids).logits[:, 8:10], atol=1e-5, rtol=1e-5)
    assert cache.seq_len == 10


# ------------------------------------------------------------------------ crop on a rolling cache
@torch.no_grad()
def test_crop_before_the_window_is_full_goes_back_anywhere():
    gpt = sharpen(model(sliding_window=6))
    ids = torch.randint(0, V, (1, 9), generator=torch.Generator().manual_seed(0))
    cache = KVCache()
    gpt(ids[:, :5], cache=cache)
    for n in (5, 3, 0):
        cache.crop(n)
        assert cache.seq_len == n == cache.layer_len(0)
    gpt(ids[:, :4], cache=cache)
    torch.testing.assert_close(gpt(ids[:, 4:9], cache=cache).logits, gpt(ids).logits[:, 4:],
                               atol=1e-5, rtol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("extra", [0, 1, 3])
def test_crop_goes_back_as_far_as_the_held_keys_allow(extra):
    """Holding W + extra positions, a full rolling cache can take back extra + 1 tokens (the
    next query still finds its W - 1 predecessors); one more is a clear error that changes
    nothing. crop(0) forgets everything."""
    W = 4
    gpt = sharpen(model(positional="rope", sliding_window=W))
    ids = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(3))
    other = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(4))
    cache = KVCache(extra=extra)
    gpt(ids[:, :15], cache=cache)
    assert cache.layer_len(0) == W + extra and cache.seq_len == 15
    before = snapshot(cache)
    with pytest.raises(ValueError, match=rf"crop\({15 - extra - 2}\): this rolling cache \(sliding "
                                         rf"window 4\) has let go.*n >= {15 - extra - 1}.*extra"):
        cache.crop(15 - extra - 2)
    assert same(snapshot(cache), before)
    cache.crop(15 - extra - 1)  # e.g. speculative decoding's rejected drafts
    assert cache.seq_len == 15 - extra - 1 and cache.layer_len(0) == W - 1
    n = cache.seq_len
    mixed = torch.cat([ids[:, :n], other[:, :20 - n]], dim=1)  # another continuation
    torch.testing.assert_close(gpt(mixed[:, n:], cache=cache).logits, gpt(mixed).logits[:, n:],
                               atol=1e-5, rtol=1e-5)
    cache.crop(0)
    assert cache.seq_len == 0 and cache.nbytes == 0
    torch.testing.assert_close(gpt(other[:, :7], cache=cache).logits, gpt(other[:, :7]).logits,
                               atol=1e-5, rtol=1e-5)


def test_reset_keeps_extra_and_extra_is_checked():
    cache = KVCache(extra=2)
    cache.reset()
    assert cache.extra == 2
    with pytest.raises(ValueError, match="extra must be an int >= 0"):
        KVCache(extra=-1)
    with pytest.raises(TypeError, match="extra must be an int"):
        KVCache(extra=1.5)


def test_update_with_a_window_on_its_own():
    cache = KVCache()
    k = torch.arange(6.0).view(1, 1, 6, 1)
    held, _ = cache.update(0, k, k, window=3)
    assert torch.equal(held, k)  # every new query sees its own window within these
    assert cache.layer_len(0) == 3 and cache.seq_len == 6
    held, _ = cache.update(0, k[:, :, :1] + 6, k[:, :, :1] + 6, window=3)
    assert held.flatten().tolist() == [4.0, 5.0, 6.0]  # the last W - 1 and the new one
    with pytest.raises(ValueError, match="window=3 but this update has window=4"):
        cache.update(0, k[:, :, :1], k[:, :, :1], window=4)
    with pytest.raises(ValueError, match="window=3 but this update has window=None"):
        cache.update(0, k[:, :, :1], k[:, :, :1])
    with pytest.raises(ValueError, match="window must be an int >= 1"):
        cache.update(1, k, k, window=0)


# ---------------------------------------------------------------------- compiled: one graph
@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_a_window_model_compiles_to_one_graph_cached_or_not(positional):
    torch._dynamo.reset()
    gpt = model(positional=positional, n_kv_heads=2, sliding_window=4)
    ids = torch.randint(0, V, (2, 12))
    with torch.no_grad():
        explained = torch._dynamo.explain(gpt)(ids, targets=ids)
        assert explained.graph_break_count == 0 and explained.graph_count == 1
        cache = KVCache()
        gpt(ids, cache=cache)  # 12 seen, 4 held
        step = torch._dynamo.explain(gpt)(ids[:, :1], cache=cache)
        assert step.graph_break_count == 0, step.break_reasons
        compiled = torch.compile(gpt)
        torch.testing.assert_close(compiled(ids).logits, gpt(ids).logits, atol=1e-5, rtol=1e-5)
    torch._dynamo.reset()


# ------------------------------------------------------- property: any model, any schedule
@st.composite
def window_model_and_steps(draw):
    n_heads = draw(st.integers(1, 3))
    kw = dict(vocab_size=draw(st.integers(3, 20)), d_model=n_heads * 4, n_heads=n_heads,
              n_layers=draw(st.integers(1, 3)), max_len=16,
              positional=draw(st.sampled_from(["learned", "sinusoidal", "rope", "none"])),
              norm_first=draw(st.booleans()), sliding_window=draw(st.integers(1, 6)),
              n_kv_heads=draw(st.sampled_from([g for g in (1, 2, 3) if n_heads % g == 0])))
    steps = draw(st.lists(st.integers(1, 5), min_size=1, max_size=8).filter(lambda s: sum(s) <= 16))
    return (TransformerConfig(**kw), steps, draw(st.integers(0, 2**31 - 1)),
            draw(st.integers(1, 2)), draw(st.integers(0, 2)))


@given(window_model_and_steps())
def test_property_rolling_cache_equals_recomputation(case):
    cfg, steps, seed, B, extra = case
    torch.manual_seed(seed)
    gpt = sharpen(GPT(cfg).eval(), 0.2)
    ids = torch.randint(0, cfg.vocab_size, (B, sum(steps)))
    cache, outs, start = KVCache(extra=extra), [], 0
    with torch.no_grad():
        full = gpt(ids).logits
        for n in steps:
            outs.append(gpt(ids[:, start:start + n], cache=cache).logits)
            start += n
            assert cache.seq_len == start
            assert cache.layer_len(cfg.n_layers - 1) == min(start, cfg.sliding_window + extra)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)
