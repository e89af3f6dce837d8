"""Multi-head latent attention (DeepSeek-V2/V3): the module against a formula written out here,
the cache that holds the latent (its size, and cached decoding equal to recomputation for every
way of cutting a sequence into steps), the absorbed computation equal to the expanded one, and
the GPT and layer wiring."""
from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

import attnlib
from attnlib import GPT, KVCache, MultiHeadLatentAttention, RotaryEmbedding, TransformerConfig
from attnlib.layers import DecoderLayer

SIZES = dict(kv_lora_rank=12, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5)


def mla(q_lora_rank=None, bias=True, **kw) -> MultiHeadLatentAttention:
    torch.manual_seed(0)
    module = MultiHeadLatentAttention(32, 4, **{**SIZES, **kw}, q_lora_rank=q_lora_rank, bias=bias)
    with torch.no_grad():  # weights large enough that a wrong product shows in the output
        for p in module.parameters():
            p.normal_(0.0, 0.4)
    return module.eval()


def mla_gpt(q_lora_rank=None, rope=True, n_layers=2, dtype=torch.float32, **kw) -> GPT:
    torch.manual_seed(0)
    sizes = {**SIZES, "qk_rope_head_dim": SIZES["qk_rope_head_dim"] if rope else 0, **kw}
    cfg = TransformerConfig(vocab_size=29, d_model=32, n_heads=4, n_layers=n_layers, max_len=24,
                            positional="rope" if rope else "learned", norm="rmsnorm",
                            activation="swiglu", attention="mla", q_lora_rank=q_lora_rank,
                            **sizes)
    model = GPT(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model.to(dtype).eval()


def reference(m: MultiHeadLatentAttention, x, cos=None, sin=None, mask=None):
    """DeepSeek-V2's equations, one head at a time, with torch's own rms_norm and softmax."""
    B, T, _ = x.shape
    dn, dr, dv, r = m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.kv_lora_rank

    def rms(t, norm):
        return F.rms_norm(t, (t.shape[-1],), norm.weight, norm.eps)

    def rot(t):  # rotate-half RoPE, written out
        if cos is None:
            return t
        t1, t2 = t[..., : dr // 2], t[..., dr // 2:]
        return t * cos + torch.cat([-t2, t1], -1) * sin

    q = (m.q_proj(x) if m.q_proj is not None
         else m.q_b_proj(rms(m.q_a_proj(x), m.q_a_layernorm)))  # (B, T, H * (dn + dr))
    kv_a = m.kv_a_proj_with_mqa(x)  # (B, T, r + dr)
    c = rms(kv_a[..., :r], m.kv_a_layernorm)  # (B, T, r)
    k_rope = rot(kv_a[..., r:])  # (B, T, dr), one for every head
    W = m.kv_b_proj.weight  # (H * (dn + dv), r)
    heads = []
    for h in range(m.n_heads):
        qh = q[..., h * (dn + dr):(h + 1) * (dn + dr)]
        qh = torch.cat([qh[..., :dn], rot(qh[..., dn:])], -1)  # (B, T, dn + dr)
        w_h = W[h * (dn + dv):(h + 1) * (dn + dv)]
        kh = torch.cat([c @ w_h[:dn].T, k_rope], -1)  # (B, T, dn + dr)
        vh = c @ w_h[dn:].T  # (B, T, dv)
        s = qh @ kh.transpose(1, 2) / math.sqrt(dn + dr)  # (B, T, T)
        allowed = torch.ones(T, T, dtype=torch.bool).tril() if mask is None else mask
        heads.append(torch.softmax(s.masked_fill(~allowed, -math.inf), -1) @ vh)
    return m.o_proj(torch.cat(heads, -1))  # (B, T, C)


# --- The module ----------------------------------------------------------------------------------
@pytest.mark.parametrize("q_lora_rank", [None, 8])
def test_submodules_have_deepseeks_names_and_shapes(q_lora_rank):
    m = MultiHeadLatentAttention(32, 4, **SIZES, q_lora_rank=q_lora_rank, bias=True)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    query = ({"q_proj.weight": (4 * 10, 32)} if q_lora_rank is None else
             {"q_a_proj.weight": (8, 32), "q_a_proj.bias": (8,), "q_a_layernorm.weight": (8,),
              "q_b_proj.weight": (4 * 10, 8)})
    assert shapes == {**query, "kv_a_proj_with_mqa.weight": (12 + 4, 32),
                      "kv_a_proj_with_mqa.bias": (16,), "kv_a_layernorm.weight": (12,),
                      "kv_b_proj.weight": (4 * (6 + 5), 12), "o_proj.weight": (32, 4 * 5),
                      "o_proj.bias": (32,)}
    assert m.scale == pytest.approx(1 / math.sqrt(6 + 4))


@pytest.mark.parametrize("q_lora_rank, use_rope", [(None, True), (8, True), (8, False)])
@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_forward_equals_deepseeks_equations(q_lora_rank, use_rope, backend):
    m = mla(q_lora_rank, qk_rope_head_dim=4 if use_rope else 0)
    x = torch.randn(2, 7, 32)
    cos, sin = RotaryEmbedding(4).cos_sin(torch.arange(7)) if use_rope else (None, None)
    out, w = m(x, is_causal=True, rope=(cos, sin) if use_rope else None, backend=backend)
    torch.testing.assert_close(out, reference(m, x, cos, sin), atol=1e-5, rtol=1e-5)
    assert w is None


def test_weights_are_per_head_causal_and_sum_to_one():
    m = mla()
    x = torch.randn(2, 6, 32)
    out, w = m(x, is_causal=True, need_weights=True)
    assert w.shape == (2, 4, 6, 6)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 6))
    assert torch.all(w.masked_select(~torch.ones(6, 6, dtype=torch.bool).tril()) == 0)
    torch.testing.assert_close(out, m(x, is_causal=True)[0], atol=1e-5, rtol=1e-5)  # fused path


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_a_fully_masked_row_gives_zeros_not_nan(backend):
    m = mla()
    x = torch.randn(1, 4, 32)
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[2] = False
    attn, _ = m.forward(x, attn_mask=mask, backend=backend)  # before o_proj's bias: zeros
    expected = m.o_proj.bias.expand(4, -1)
    assert torch.isfinite(attn).all()
    torch.testing.assert_close(attn[0, 2], expected[2])


def test_an_extra_mask_combines_with_the_causal_one():
    m = mla()
    x = torch.randn(1, 5, 32)
    keep = torch.tensor([True, False, True, True, True])  # key 1 hidden from everyone
    out, w = m(x, attn_mask=keep, is_causal=True, need_weights=True)
    allowed = torch.ones(5, 5, dtype=torch.bool).tril() & keep
    torch.testing.assert_close(out, reference(m, x, mask=allowed), atol=1e-5, rtol=1e-5)
    assert torch.all(w[..., 1] == 0)


# --- The cache holds the latent ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("q_lora_rank, rope", [(None, True), (8, True), (None, False)])
def test_cache_holds_the_latent_and_the_shared_rope_key(dtype, q_lora_rank, rope):
    model = mla_gpt(q_lora_rank, rope, n_layers=3, dtype=dtype)
    ids = torch.randint(0, 29, (2, 7))
    cache = KVCache()
    with torch.no_grad():
        model(ids[:, :5], cache=cache)
        model(ids[:, 5:], cache=cache)
    r, dr = SIZES["kv_lora_rank"], SIZES["qk_rope_head_dim"] if rope else 0
    assert cache.seq_len == 7 and cache.n_layers == 3
    assert [tuple(k.shape) for k in cache.keys] == [(2, 1, 7, r)] * 3  # c_kv, one "head"
    assert [tuple(v.shape) for v in cache.values] == [(2, 1, 7, dr)] * 3  # rotated RoPE key
    size = torch.finfo(dtype).bits // 8
    assert cache.nbytes == 3 * 2 * 7 * (r + dr) * size  # the contract's formula
    # what it holds is the layer's latent of those tokens (after kv_a_layernorm), not keys
    layer = model.layers[0]
    with torch.no_grad():
        x = layer.norm1(model.embed(ids, torch.arange(7)))
        rope_angles = model.rope.cos_sin(torch.arange(7), dtype) if rope else None
        c_kv, k_rope = layer.self_attn.latent(x, rope_angles)
    torch.testing.assert_close(cache.keys[0], c_kv)
    torch.testing.assert_close(cache.values[0], k_rope)


def compositions(n: int):
    """Every way of cutting n tokens into consecutive steps (2^(n-1) of them)."""
    for cuts in itertools.product([False, True], repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        yield list(zip(bounds, bounds[1:]))


@pytest.mark.parametrize("q_lora_rank, rope", [(None, True), (8, True), (8, False)])
def test_cached_decoding_equals_recomputation_for_every_split(q_lora_rank, rope):
    """Prefill, chunks and single steps in every order: 2^5 splits of 6 tokens; logits and
    weights of each step equal the full pass's rows."""
    model = mla_gpt(q_lora_rank, rope)
    ids = torch.randint(0, 29, (2, 6))
    with torch.no_grad():
        full = model(ids, need_weights=True)
        splits = list(compositions(6))
        assert len(splits) == 32
        for split in splits:
            cache = KVCache()
            for a, b in split:
                out = model(ids[:, a:b], cache=cache, need_weights=True)
                torch.testing.assert_close(out.logits, full.logits[:, a:b], atol=2e-5, rtol=2e-5)
                for w, w_full in zip(out.attentions, full.attentions):
                    torch.testing.assert_close(w, w_full[:, :, a:b, :b], atol=1e-5, rtol=1e-5)
            assert cache.seq_len == 6


def test_generate_with_the_latent_cache_equals_recomputation():
    model = mla_gpt(8)
    ids = torch.randint(0, 29, (3, 4))
    cached = model.generate(ids, 12, temperature=0.0)
    assert torch.equal(cached, model.generate(ids, 12, temperature=0.0, use_cache=False))
    seq = ids
    with torch.no_grad():
        for _ in range(12):
            seq = torch.cat([seq, model(seq).logits[:, -1:].argmax(-1)], dim=1)
    assert torch.equal(cached, seq)
    g = torch.Generator().manual_seed(1)
    sampled = model.generate(ids, 8, temperature=1.0, top_k=5, generator=g)
    g = torch.Generator().manual_seed(1)
    assert torch.equal(sampled, model.generate(ids, 8, temperature=1.0, top_k=5, generator=g,
                                               use_cache=False))


def test_a_cropped_latent_cache_continues_as_if_the_tail_was_never_fed():
    model = mla_gpt()
    ids = torch.randint(0, 29, (1, 9))
    cache = KVCache()
    with torch.no_grad():
        model(ids[:, :7], cache=cache)
        cache.crop(4)
        assert cache.seq_len == 4 and cache.nbytes == 2 * 1 * 4 * (12 + 4) * 4
        out = model(ids[:, 4:9], cache=cache).logits
        torch.testing.assert_close(out, model(ids).logits[:, 4:9], atol=2e-5, rtol=2e-5)


# --- The absorbed computation --------------------------------------------------------------------
@pytest.mark.parametrize("q_lora_rank", [None, 8])
@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_absorbed_attention_over_the_latent_equals_the_expanded_keys(q_lora_rank, backend):
    m = mla(q_lora_rank)
    x = torch.randn(2, 7, 32)
    rope = RotaryEmbedding(4).cos_sin(torch.arange(7))
    need = backend == "math"
    out, w = m(x, is_causal=True, rope=rope, need_weights=need, backend=backend)
    out_a, w_a = m.absorbed(x, is_causal=True, rope=rope, need_weights=need, backend=backend)
    torch.testing.assert_close(out_a, out, atol=1e-5, rtol=1e-5)
    if need:
        torch.testing.assert_close(w_a, w, atol=1e-6, rtol=1e-5)
    # the expanded keys are not what the absorbed path attends over: it never builds them
    k, v = m.expand(*m.latent(x, rope))
    assert k.shape == (2, 4, 7, 10) and v.shape == (2, 4, 7, 5)


def test_absorbed_attention_reads_the_same_cache_step_by_step():
    m = mla(8)
    x = torch.randn(2, 7, 32)
    rope = RotaryEmbedding(4)
    full, _ = m(x, is_causal=True, rope=rope.cos_sin(torch.arange(7)))
    expanded, absorbed = KVCache(), KVCache()
    for a, b in ((0, 3), (3, 4), (4, 7)):
        angles = rope.cos_sin(torch.arange(a, b))
        o1, _ = m(x[:, a:b], is_causal=True, cache=expanded, rope=angles)
        o2, _ = m.absorbed(x[:, a:b], is_causal=True, cache=absorbed, rope=angles)
        torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(o2, full[:, a:b], atol=1e-5, rtol=1e-5)
    for held, other in zip(absorbed.keys + absorbed.values, expanded.keys + expanded.values):
        torch.testing.assert_close(held, other)


# --- Wiring: config, layers, GPT -----------------------------------------------------------------
def test_gpt_builds_latent_attention_and_rotates_qk_rope_head_dim_dims():
    model = mla_gpt(8)
    assert all(type(layer.self_attn) is MultiHeadLatentAttention for layer in model.layers)
    assert model.rope.head_dim == SIZES["qk_rope_head_dim"] != model.cfg.head_dim
    assert attnlib.MultiHeadLatentAttention is MultiHeadLatentAttention
    plain = GPT(TransformerConfig(vocab_size=29, d_model=32, n_heads=4, n_layers=1,
                                  positional="rope"))
    assert type(plain.layers[0].self_attn) is attnlib.MultiHeadAttention
    assert plain.rope.head_dim == 8


def test_decoder_layer_takes_a_ready_self_attention_module():
    m = mla()
    layer = DecoderLayer(32, 4, 64, self_attn=m, norm="rmsnorm").eval()
    assert layer.self_attn is m
    x = torch.randn(1, 5, 32)
    y, w, cross = layer(x, need_weights=True)
    assert y.shape == (1, 5, 32) and w.shape == (1, 4, 5, 5) and cross is None
    with pytest.raises(TypeError, match="self_attn must be an nn.Module"):
        DecoderLayer(32, 4, 64, self_attn="mla")


def test_a_fresh_mla_gpt_trains_and_starts_near_uniform():
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, max_len=16,
                            positional="rope", attention="mla", q_lora_rank=8, **SIZES)
    model = GPT(cfg)
    ids = torch.randint(0, 50, (4, 12))
    loss = model(ids[:, :-1], targets=ids[:, 1:]).loss
    assert abs(loss.item() - math.log(50)) < 0.2
    loss.backward()
    attn = model.layers[0].self_attn
    for name, p in attn.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


# --- Bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, error, words", [
    (dict(kv_lora_rank=0), ValueError, "kv_lora_rank must be an int >= 1"),
    (dict(v_head_dim=2.5), TypeError, "v_head_dim must be an int"),
    (dict(qk_rope_head_dim=3), ValueError, "qk_rope_head_dim must be even"),
    (dict(qk_rope_head_dim=-2), ValueError, "qk_rope_head_dim must be an int >= 0"),
    (dict(q_lora_rank=0), ValueError, "q_lora_rank must be an int >= 1"),
    (dict(bias="yes"), TypeError, "bias must be True or False"),
    (dict(dropout=1.5), ValueError, "dropout must be in"),
])
def test_constructor_refuses_bad_sizes(kw, error, words):
    with pytest.raises(error, match=words):
        MultiHeadLatentAttention(32, 4, **{**SIZES, **kw})


@pytest.mark.parametrize("call, error, words", [
    (lambda m, x: m(x, x), ValueError, "self-attention only: context must be None"),
    (lambda m, x: m(x[..., :8]), ValueError, r"x must have shape \(B, T, d_model=32\)"),
    (lambda m, x: m(x.double()), TypeError, "x has dtype torch.float64"),
    (lambda m, x: m(x, attn_mask=torch.ones(3, 4, dtype=torch.bool)), ValueError,
     "does not broadcast"),
    (lambda m, x: m(x, cache={}), TypeError, "cache must be an attnlib.KVCache"),
    (lambda m, x: m(x, need_weights=True, backend="sdpa"), ValueError, "sdpa"),
    (lambda m, x: m.absorbed(x, is_causal="yes"), TypeError, "is_causal must be True or False"),
])
def test_a_call_refuses_bad_arguments(call, error, words):
    with pytest.raises(error, match=words):
        call(mla(), torch.randn(1, 5, 32))


def test_encoders_refuse_latent_attention():
    cfg = TransformerConfig(vocab_size=29, d_model=32, n_heads=4, n_layers=1, positional="rope",
                            attention="mla", **SIZES)
    for cls in (attnlib.Encoder, attnlib.EncoderDecoder):
        with pytest.raises(ValueError, match="attention='mla' is built by attnlib.GPT only"):
            cls(cfg)


def test_heads_off_zeroes_a_heads_block_of_w_o():
    """attnlib.heads_off on an MLA model: head h writes through its v_head_dim columns of o_proj
    (it ended in an AttributeError, head_dim, before)."""
    import copy

    model = mla_gpt()
    ids = torch.randint(0, 29, (2, 7), generator=torch.Generator().manual_seed(1))
    dv = model.layers[0].self_attn.v_head_dim
    with torch.no_grad():
        before = model(ids).logits
        with attnlib.heads_off(model, [(1, 2)]):
            off = model(ids).logits
        by_hand = copy.deepcopy(model)
        by_hand.layers[1].self_attn.o_proj.weight[:, 2 * dv:3 * dv] = 0
        torch.testing.assert_close(off, by_hand(ids).logits)
        assert (off - before).abs().max() > 1e-3
