"""scaled_dot_product_attention and MultiHeadAttention against PyTorch's own implementations."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnlib
from attnlib import MultiHeadAttention, causal_mask, padding_mask, scaled_dot_product_attention

BACKENDS = ["math", "sdpa", "auto"]
SHAPES = [(5, 5, 8, 8), (3, 7, 8, 4)]  # (Tq, Tk, Dk, Dv): self-shaped, and cross with Dv != Dk
BATCH = [(), (2,), (2, 3)]


def make_mask(kind: str, batch: tuple, tq: int, tk: int, gen: torch.Generator):
    if kind == "none":
        return None
    allowed = torch.rand(*batch, tq, tk, generator=gen) > 0.3
    allowed[..., 0] = True  # every row keeps one key (fully masked rows are tested separately)
    if kind == "bool":
        return allowed
    return torch.zeros(*batch, tq, tk).masked_fill(~allowed, float("-inf")) + torch.randn(*batch, tq, tk, generator=gen)


# is_causal needs Tq == Tk (the cross shape with is_causal is an error, tested in test_errors.py)
CASES = [(m, s) for m in ("none", "bool", "float", "causal") for s in SHAPES if m != "causal" or s[0] == s[1]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mask_kind,shape", CASES)
@pytest.mark.parametrize("batch", BATCH)
def test_matches_torch_sdpa(backend, mask_kind, shape, batch):
    tq, tk, dk, dv = shape
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*batch, tq, dk, generator=gen), torch.randn(*batch, tk, dk, generator=gen),
               torch.randn(*batch, tk, dv, generator=gen))
    mask = None if mask_kind == "causal" else make_mask(mask_kind, batch, tq, tk, gen)
    causal = mask_kind == "causal"
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, backend=backend)
    assert w is None
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    if backend != "sdpa":
        out, w = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, backend=backend,
                                              need_weights=True)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        assert w.shape == (*batch, tq, tk)
        torch.testing.assert_close(w.sum(-1), torch.ones(*batch, tq))  # rows sum to 1
        torch.testing.assert_close(w @ v, out, atol=1e-5, rtol=1e-5)
        blocked = ~causal_mask(tq) if causal else (None if mask is None else
                                                   (~mask if mask.dtype == torch.bool else torch.isneginf(mask)))
        if blocked is not None:
            assert torch.all(w[blocked.expand_as(w)] == 0)  # masked weights are exactly 0


def test_scale_argument_and_worked_example():
    q, k = torch.tensor([[2.0, -1.0, 0.5]]), torch.tensor([[1.0, 3.0, 4.0]])
    assert float(q @ k.T) == 1.0  # dot product 2 - 3 + 2
    # one key: weight 1 whatever the score; check the score itself through two keys
    keys = torch.cat([k, torch.zeros(1, 3)])  # the second key scores 0
    _, w = scaled_dot_product_attention(q, keys, torch.eye(2), need_weights=True)
    s = 1 / math.sqrt(3)
    assert s == pytest.approx(0.577, abs=1e-3)
    torch.testing.assert_close(w, torch.softmax(torch.tensor([[s, 0.0]]), -1))
    _, w = scaled_dot_product_attention(q, keys, torch.eye(2), scale=1.0, need_weights=True)
    torch.testing.assert_close(w, torch.softmax(torch.tensor([[1.0, 0.0]]), -1))


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_are_zero_with_finite_gradients(backend, kind):
    torch.manual_seed(0)
    q = torch.randn(2, 4, 8, requires_grad=True)
    k = torch.randn(2, 6, 8, requires_grad=True)
    v = torch.randn(2, 6, 8, requires_grad=True)
    allowed = torch.ones(2, 4, 6, dtype=torch.bool)
    allowed[0, 1] = False  # query row 1 of batch 0 sees nothing
    mask = allowed if kind == "bool" else torch.zeros(2, 4, 6).masked_fill(~allowed, float("-inf"))
    out, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask, backend=backend)
    assert torch.all(out[0, 1] == 0) and torch.isfinite(out).all()
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    torch.testing.assert_close(out[0, 0], ref[0, 0])
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert torch.all(q.grad[0, 1] == 0)


def test_causal_mask_is_lower_right_aligned():
    assert causal_mask(4).tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert causal_mask(1, 5).tolist() == [[True] * 5]  # one decode step sees everything held
    m = causal_mask(2, 5)
    assert m.tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    torch.testing.assert_close(m, causal_mask(5)[-2:])  # the last two rows of the square mask


def test_padding_mask_birds_fly():
    ids = torch.tensor([[5, 6, 0], [7, 8, 9]])  # "Birds fly <pad>", "The cat slept"
    m = padding_mask(ids, 0)
    assert m.shape == (2, 1, 1, 3)
    assert m[:, 0, 0].tolist() == [[True, True, False], [True, True, True]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_mha_matches_nn_multihead_attention(backend):
    torch.manual_seed(0)
    C, H = 16, 4
    ref = nn.MultiheadAttention(C, H, batch_first=True).eval()
    ours = attnlib.mha_from_torch(ref).eval()
    x, ctx = torch.randn(2, 5, C), torch.randn(2, 7, C)
    # self-attention, no mask: outputs and per-head weights
    exp_out, exp_w = ref(x, x, x, average_attn_weights=False)
    out, _ = ours(x, backend=backend)
    torch.testing.assert_close(out, exp_out, atol=1e-5, rtol=1e-5)
    out, w = ours(x, need_weights=True, backend="math" if backend == "sdpa" else backend)
    torch.testing.assert_close(w, exp_w, atol=1e-6, rtol=1e-5)
    # cross-attention with a key padding mask. torch: True = BLOCKED; ours: True = may attend
    blocked = torch.zeros(2, 7, dtype=torch.bool)
    blocked[1, 5:] = True
    exp_out, exp_w = ref(x, ctx, ctx, key_padding_mask=blocked, average_attn_weights=False)
    out, w = ours(x, ctx, attn_mask=~blocked[:, None, None, :], need_weights=True)
    torch.testing.assert_close(out, exp_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, exp_w, atol=1e-6, rtol=1e-5)
    assert w.shape == (2, H, 5, 7) and torch.all(w[1, ..., 5:] == 0)
    # a bool attn_mask (Tq, Tk), polarity flipped; passing it unflipped gives a different answer
    torch_mask = torch.rand(5, 7) > 0.6
    torch_mask[:, 0] = False
    exp_out, _ = ref(x, ctx, ctx, attn_mask=torch_mask)
    torch.testing.assert_close(ours(x, ctx, attn_mask=~torch_mask, backend=backend)[0], exp_out, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(ours(x, ctx, attn_mask=torch_mask | ~torch_mask.any(-1, keepdim=True))[0], exp_out, atol=1e-3)


def test_mha_causal_and_heads_are_split_not_scrambled():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 4, 8)
    out, w = mha(x, is_causal=True, need_weights=True)
    assert torch.all(w.triu(1) == 0)
    # head h uses dims h*D:(h+1)*D of the projections: recompute head 1 by hand
    D = 4
    q = (x @ mha.q_proj.weight.T + mha.q_proj.bias)[..., D:]
    k = (x @ mha.k_proj.weight.T + mha.k_proj.bias)[..., D:]
    scores = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(~causal_mask(4), float("-inf"))
    torch.testing.assert_close(w[:, 1], torch.softmax(scores, -1))


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_attention_runs_in_bfloat16(backend):
    torch.manual_seed(0)
    q = torch.randn(2, 3, 5, 8)
    out32, _ = scaled_dot_product_attention(q, q, q, is_causal=True, backend=backend)
    out16, _ = scaled_dot_product_attention(q.bfloat16(), q.bfloat16(), q.bfloat16(), is_causal=True, backend=backend)
    assert out16.dtype == torch.bfloat16
    torch.testing.assert_close(out16.float(), out32, atol=3e-2, rtol=3e-2)
    mha = MultiHeadAttention(8, 2).to(torch.bfloat16)
    assert mha(q[0].bfloat16(), need_weights=True)[1].dtype == torch.bfloat16


def test_shapes_from_the_reference():
    """T=3, d_model=12, d_k=7, d_v=5: QK^T is (3, 3), AV is (3, 5); cross with 4 encoder tokens: (3, 4)."""
    torch.manual_seed(0)
    X, Z = torch.randn(3, 12), torch.randn(4, 12)
    W_Q, W_K, W_V = torch.randn(12, 7), torch.randn(12, 7), torch.randn(12, 5)
    out, w = scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V, need_weights=True)
    assert w.shape == (3, 3) and out.shape == (3, 5)
    out, w = scaled_dot_product_attention(X @ W_Q, Z @ W_K, Z @ W_V, need_weights=True)
    assert w.shape == (3, 4) and out.shape == (3, 5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_half_precision_parity_between_backends(dtype):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 32, device="cuda", dtype=dtype) for _ in range(3))
    ref, _ = scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, backend="math")
    for backend in ("math", "sdpa"):
        out, _ = scaled_dot_product_attention(q, k, v, is_causal=True, backend=backend)
        assert out.dtype == dtype
        torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_gpu_sdpa_backend_uses_a_fused_kernel():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 32, device="cuda", dtype=torch.float16) for _ in range(3))
    # Only fused kernels allowed: if our sdpa path fell back to the math kernel this would raise.
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        out, _ = scaled_dot_product_attention(q, k, v, is_causal=True, backend="sdpa")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        scaled_dot_product_attention(q, k, v, is_causal=True, backend="sdpa")
        torch.cuda.synchronize()
    names = " ".join(e.name.lower() for e in prof.events())
    assert "flash" in names or "efficient" in names or "fmha" in names, names[:500]
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize("bias", [True, False])
def test_mha_weights_round_trip_through_nn_multihead_attention(bias):
    """mha_to_torch / mha_from_torch: the packed (3C, C) in_proj_weight is W_Q; W_K; W_V in order."""
    torch.manual_seed(0)
    ours = MultiHeadAttention(16, 4, bias=bias).eval()
    ref = attnlib.mha_to_torch(ours)
    assert ref.batch_first and not ref.training
    torch.testing.assert_close(ref.in_proj_weight[16:32], ours.k_proj.weight, rtol=0, atol=0)
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(ours(x)[0], ref(x, x, x)[0], atol=1e-6, rtol=1e-5)
    back = attnlib.mha_from_torch(ref)
    for name, t in ours.state_dict().items():
        torch.testing.assert_close(back.state_dict()[name], t, rtol=0, atol=0)
    with pytest.raises(ValueError, match="kdim=8"):
        attnlib.mha_from_torch(nn.MultiheadAttention(16, 4, kdim=8, vdim=8))


# ---------------------------------------------------------------------------------------------
# Grouped-query (G key/value heads, G | H) and multi-query (G = 1) attention
# ---------------------------------------------------------------------------------------------
def _gqa_reference(mha: MultiHeadAttention, x, context=None, **kw):
    """torch's own GQA on our projections: F.scaled_dot_product_attention(..., enable_gqa=True)."""
    B, Tq, C = x.shape
    src = x if context is None else context
    H, G, D = mha.n_heads, mha.n_kv_heads, mha.head_dim
    q = mha.q_proj(x).view(B, Tq, H, D).transpose(1, 2)  # (B, H, Tq, D)
    k = mha.k_proj(src).view(B, src.shape[1], G, D).transpose(1, 2)  # (B, G, Tk, D)
    v = mha.v_proj(src).view(B, src.shape[1], G, D).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)  # (B, H, Tq, D)
    return mha.out_proj(out.transpose(1, 2).reshape(B, Tq, C)), (q, k, v)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_gqa_mha_matches_torch_sdpa_enable_gqa(backend, n_kv_heads):
    torch.manual_seed(0)
    C, H = 32, 4
    mha = MultiHeadAttention(C, H, n_kv_heads=n_kv_heads).eval()
    assert mha.k_proj.out_features == mha.v_proj.out_features == n_kv_heads * 8
    assert mha.q_proj.out_features == mha.out_proj.in_features == C
    x, ctx = torch.randn(2, 6, C), torch.randn(2, 9, C)
    with torch.no_grad():
        for kw in ({}, {"is_causal": True}):  # self-attention, plain and causal
            expected, (q, k, _) = _gqa_reference(mha, x, **kw)
            out, w = mha(x, backend=backend, **kw)
            assert w is None
            torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
            if backend == "sdpa":
                continue
            out, w = mha(x, need_weights=True, backend=backend, **kw)
            torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
            assert w.shape == (2, H, 6, 6)  # one map per QUERY head
            for h in range(H):  # query head h scores against key/value head h // (H / G)
                scores = q[:, h] @ k[:, h // (H // n_kv_heads)].transpose(-1, -2) / math.sqrt(8)
                if kw:
                    scores = scores.masked_fill(~causal_mask(6), float("-inf"))
                torch.testing.assert_close(w[:, h], torch.softmax(scores, -1), atol=1e-6, rtol=1e-5)
        # cross-attention with a padding mask over the context
        keep = torch.ones(2, 1, 1, 9, dtype=torch.bool)
        keep[1, ..., 6:] = False
        expected, _ = _gqa_reference(mha, x, ctx, attn_mask=keep)
        out, w = mha(x, ctx, attn_mask=keep, need_weights=backend != "sdpa", backend=backend)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        if w is not None:
            assert w.shape == (2, H, 6, 9) and torch.all(w[1, ..., 6:] == 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sdpa_function_enable_gqa_matches_torch(backend):
    gen = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, 6, 5, 8, generator=gen), torch.randn(2, 3, 7, 8, generator=gen), torch.randn(
        2, 3, 7, 4, generator=gen)
    mask = make_mask("float", (2, 1), 5, 7, gen)  # (B, 1, Tq, Tk) broadcasts over the 6 query heads
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    out, _ = scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, backend=backend)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="Hq=6.*key heads 4"):
        scaled_dot_product_attention(q, torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 4), enable_gqa=True)
    with pytest.raises(ValueError):  # without enable_gqa, 6 and 3 heads do not broadcast
        scaled_dot_product_attention(q, k, v)


def test_gqa_sdpa_path_does_not_repeat_keys_and_values(monkeypatch):
    """The fused path hands G heads to torch (enable_gqa); only the math path repeats K/V."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, n_kv_heads=2).eval()
    x = torch.randn(1, 5, 32)
    calls = []
    real = torch.Tensor.repeat_interleave
    monkeypatch.setattr(torch.Tensor, "repeat_interleave", lambda *a, **k: calls.append(1) or real(*a, **k))
    with torch.no_grad():
        mha(x, is_causal=True, backend="sdpa")
        assert calls == []
        mha(x, is_causal=True, need_weights=True)
        assert calls  # the math path expands K/V per query head to return per-head weights


def test_n_kv_heads_must_divide_n_heads():
    with pytest.raises(ValueError, match=r"n_heads=4.*n_kv_heads=3"):
        MultiHeadAttention(32, 4, n_kv_heads=3)
    with pytest.raises(ValueError, match=r"n_heads=4.*n_kv_heads=0"):
        MultiHeadAttention(32, 4, n_kv_heads=0)
    with pytest.raises(ValueError, match=r"n_heads=6.*n_kv_heads=4"):
        attnlib.TransformerConfig(vocab_size=10, d_model=24, n_heads=6, n_layers=1, n_kv_heads=4)
    assert attnlib.TransformerConfig(vocab_size=10, d_model=24, n_heads=6, n_layers=1).n_kv_heads == 6
    assert MultiHeadAttention(32, 4).n_kv_heads == 4
    with pytest.raises(ValueError, match="n_kv_heads=2 < n_heads=4"):
        attnlib.mha_to_torch(MultiHeadAttention(32, 4, n_kv_heads=2))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gpu_gqa_half_precision_parity_between_backends(dtype):
    torch.manual_seed(0)
    mha = MultiHeadAttention(128, 8, n_kv_heads=2).to("cuda", dtype).eval()
    x = torch.randn(2, 64, 128, device="cuda", dtype=dtype)
    with torch.no_grad():
        ref, _ = mha.float()(x.float(), is_causal=True, backend="math")
        mha.to(dtype)
        for backend in ("math", "sdpa"):
            out, _ = mha(x, is_causal=True, backend=backend)
            assert out.dtype == dtype
            torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)
