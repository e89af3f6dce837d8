"""attnlib.decode.FastDecoder: generate's lean decode step equals the model's own cached forward.

For every layout switch the fast step's logits are compared, step by step, with
``model(ids, cache=cache).logits[:, -1]``: the prompt, single tokens, and a chunk of several
tokens after a filled cache (the lower-right causal mask). The fast path must also step aside
wherever it could differ: hooks, subclasses, training mode, autograd, swapped-in modules.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlib import GPT, KVCache, TransformerConfig
from attnlib import decode, kernels
from attnlib.decode import FastDecoder

LAYOUTS = {
    "gpt2": dict(),
    "post_norm_relu": dict(norm_first=False, activation="relu"),
    "llama": dict(positional="rope", norm="rmsnorm", activation="swiglu", bias=False, n_kv_heads=2),
    "mqa_sinusoidal": dict(positional="sinusoidal", n_kv_heads=1, activation="gelu_tanh"),
    "no_positions_untied": dict(positional="none", tie_weights=False, embedding_norm=True),
}


@pytest.fixture(autouse=True)
def _bags_for_streamed_models(monkeypatch):
    """The tests of streamed models below were written for the embedding bags (RowBlocks), the
    choice off Intel CPUs; the "mm" choice (decode.STREAMED_ROWS on Intel) has tests of its own."""
    monkeypatch.setattr(decode, "STREAMED_ROWS", "bags")


def model_for(layout: str, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=97, d_model=32, n_heads=4, n_layers=2, max_len=64, **LAYOUTS[layout])
    return GPT(cfg).eval()


@pytest.mark.parametrize("batch", [2, 1])
@pytest.mark.parametrize("streamed", [False, True], ids=["in_cache", "streamed"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_fast_steps_equal_the_models_cached_forward(layout, streamed, batch, monkeypatch):
    """Streamed: as for a model larger than the caches, with transposed weights (x86), every
    product of several rows on oneDNN and, for one sequence, one-token products by
    kernels.linear_t's embedding-bag path."""
    if streamed:
        monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
        monkeypatch.setattr(kernels, "MIN_MACS_STREAMED", 1)
    gpt = model_for(layout)
    ids = torch.randint(0, 97, (2, 20), generator=torch.Generator().manual_seed(1))[:batch]
    with torch.no_grad():
        fast = FastDecoder.for_model(gpt)
    assert fast is not None and fast.streamed == streamed
    assert fast.transposed == (streamed and kernels._HAS_ROWS)
    ours, ref = KVCache(), KVCache()
    ours.reserve(4)  # room for the prompt + 4: the last chunk grows the buffers (the checked path)
    with torch.no_grad():
        for a, b in [(0, 9), (9, 10), (10, 11), (11, 12), (12, 17), (17, 18), (18, 20)]:
            got = fast.step(ids[:, a:b], ours)  # (B, vocab)
            want = gpt(ids[:, a:b], cache=ref).logits[:, -1]
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            assert ours.seq_len == ref.seq_len == b
    for k1, k2 in zip(ours.keys + ours.values, ref.keys + ref.values):
        torch.testing.assert_close(k1, k2, atol=1e-5, rtol=1e-5)
    assert ours.nbytes == ref.nbytes
    # the filled cache belongs to this model, as one filled by GPT.forward does
    other = GPT(TransformerConfig(vocab_size=97, d_model=32, n_heads=2, n_layers=2, max_len=64)).eval()
    with pytest.raises(ValueError, match="KVCache"), torch.no_grad():
        other(ids[:, :1], cache=ours)


@pytest.mark.parametrize("layout", ["gpt2", "llama"])
def test_generate_gives_the_same_tokens_with_and_without_the_fast_path(layout, monkeypatch):
    gpt = model_for(layout, seed=3)
    prompt = torch.randint(0, 97, (3, 5), generator=torch.Generator().manual_seed(2))
    fast = gpt.generate(prompt, 30, temperature=0.0)
    sampled = gpt.generate(prompt, 30, temperature=1.0, top_k=20, generator=torch.Generator().manual_seed(4))
    monkeypatch.setattr(FastDecoder, "for_model", classmethod(lambda cls, model: None))
    assert torch.equal(fast, gpt.generate(prompt, 30, temperature=0.0))
    assert torch.equal(fast, gpt.generate(prompt, 30, temperature=0.0, use_cache=False))
    slow = gpt.generate(prompt, 30, temperature=1.0, top_k=20, generator=torch.Generator().manual_seed(4))
    assert torch.equal(sampled, slow)


def test_the_fast_path_steps_aside_where_it_could_differ():
    gpt = model_for("gpt2")
    with torch.no_grad():
        assert FastDecoder.for_model(gpt) is not None
        gpt.train()
        assert FastDecoder.for_model(gpt) is None  # dropout would be skipped
        gpt.eval()
        handle = gpt.layers[1].ffn.fc1.register_forward_hook(lambda m, i, o: None)
        assert FastDecoder.for_model(gpt) is None  # the hook must see the module called
        handle.remove()
        handle = gpt.layers[0].self_attn.register_forward_pre_hook(lambda m, i: None)
        assert FastDecoder.for_model(gpt) is None
        handle.remove()

        calls = []
        gpt.forward = lambda *a, **k: calls.append(1) or GPT.forward(gpt, *a, **k)
        assert FastDecoder.for_model(gpt) is None  # a forward replaced on the instance must run
        gpt.generate(torch.tensor([[1, 2]]), 3, temperature=0.0)
        assert len(calls) == 3
        del gpt.forward

        class Mine(GPT):
            pass

        mine = Mine(gpt.cfg).eval()
        assert FastDecoder.for_model(mine) is None  # a subclass may override forward
        swapped = model_for("gpt2")
        swapped.layers[0].ffn.fc2 = nn.Sequential(swapped.layers[0].ffn.fc2)
        assert FastDecoder.for_model(swapped) is None
        swapped = model_for("gpt2")
        swapped.layers[0].norm1 = nn.Identity()
        assert FastDecoder.for_model(swapped) is None
    assert FastDecoder.for_model(gpt) is None  # autograd on: generate never asks, but be safe


def test_hooks_still_fire_during_generate():
    """With a hook, generate calls the modules, so a reader's hook sees every step."""
    gpt = model_for("gpt2")
    seen = []
    gpt.layers[0].self_attn.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[1]))
    gpt.generate(torch.tensor([[1, 2, 3]]), 4, temperature=0.0)
    assert seen == [3, 1, 1, 1]


_F_GELU = nn.functional.gelu


def _recording_gelu(monkeypatch):
    """Patch F.gelu to record whether oneDNN was enabled at each call; return the record."""
    seen = []

    def recorder(x, approximate="none"):
        seen.append(torch.backends.mkldnn.enabled)
        return _F_GELU(x, approximate=approximate)

    monkeypatch.setattr(nn.functional, "gelu", recorder)
    return seen


@pytest.mark.parametrize("shape", [(1, 64), (1, 3072), (3, 7, 500), (4, 128, 512)])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_equals_f_gelu(shape, approximate):
    """kernels.gelu agrees with F.gelu (small or large, erf or tanh), values and gradients, and
    leaves oneDNN enabled."""
    torch.manual_seed(0)
    x = (3 * torch.randn(shape)).requires_grad_()
    got = kernels.gelu(x, approximate)
    want = nn.functional.gelu(x, approximate=approximate)
    torch.testing.assert_close(got, want, atol=2e-6, rtol=1e-6)
    g = torch.randn(shape)
    (got_grad,), (want_grad,) = (torch.autograd.grad(y, x, g) for y in (got, want))
    torch.testing.assert_close(got_grad, want_grad, atol=2e-6, rtol=1e-6)
    assert torch.backends.mkldnn.enabled


def test_small_exact_gelu_skips_onednn(monkeypatch):
    """Below GELU_ATEN_MAX elements the exact GELU runs with oneDNN off (ATen's kernel), at and
    above it, for "tanh" and with USE_ATEN_GELU off with oneDNN as set; the flag comes back on
    even when the call raises, and stays off if the caller had turned it off."""
    seen = _recording_gelu(monkeypatch)
    n = kernels.GELU_ATEN_MAX
    kernels.gelu(torch.randn(1, n - 1))
    kernels.gelu(torch.randn(1, n))
    kernels.gelu(torch.randn(1, 8), "tanh")
    monkeypatch.setattr(kernels, "USE_ATEN_GELU", False)
    kernels.gelu(torch.randn(1, 8))
    assert seen == [False, True, True, True]
    monkeypatch.setattr(kernels, "USE_ATEN_GELU", True)

    def broken(x, approximate="none"):
        raise RuntimeError("boom")

    monkeypatch.setattr(nn.functional, "gelu", broken)
    with pytest.raises(RuntimeError, match="boom"):
        kernels.gelu(torch.randn(1, 8))
    assert torch.backends.mkldnn.enabled
    seen = _recording_gelu(monkeypatch)
    with torch.backends.mkldnn.flags(enabled=False):
        kernels.gelu(torch.randn(1, 8))
        assert not torch.backends.mkldnn.enabled
    assert seen == [False] and torch.backends.mkldnn.enabled


def test_decode_step_gelu_takes_aten(monkeypatch):
    """A one-token step of a default (exact GELU) model computes its GELU with oneDNN off, and
    the module's forward agrees with F.gelu everywhere (the FFN's GELU goes through kernels.gelu)."""
    gpt = model_for("gpt2")
    prompt = torch.tensor([[5, 6, 7]])
    want = gpt.generate(prompt, 4, temperature=0.0, use_cache=False)
    seen = _recording_gelu(monkeypatch)
    assert torch.equal(gpt.generate(prompt, 4, temperature=0.0), want)
    assert seen and not any(seen)  # 3 x 128 and 1 x 128 hidden rows: all below GELU_ATEN_MAX


def test_row_step_rope_and_norms_equal_the_modules():
    """The one-token step's RoPE (halves swapped times signed sin) equals
    RotaryEmbedding.rotate bit for bit; its RMSNorm of one row (dot, addcmul) equals the
    module's to float32 rounding; LayerNorm rows are the module's."""
    from attnlib import RMSNorm, RotaryEmbedding

    torch.manual_seed(0)
    rope = RotaryEmbedding(16)
    cos, sin = rope.cos_sin(40, torch.device("cpu"), torch.float32)
    x = torch.randn(1, 6, 1, 16)
    with torch.no_grad():
        fast = FastDecoder.for_model(model_for("llama"))
    for p in (0, 7, 39):
        c, s_ = cos[p:p + 1], sin[p:p + 1]
        want = RotaryEmbedding.rotate(x, c, s_)
        assert torch.equal(decode._rotate_rolled(x, c, s_ * fast._rope_sign(s_)), want)
    for C in (8, 576, 1000):
        norm = RMSNorm(C, eps=1e-5)
        with torch.no_grad():
            norm.weight.copy_(torch.randn(C))
        for scale in (1e-3, 1.0, 1e3):
            row = scale * torch.randn(1, C)
            torch.testing.assert_close(decode._Norm(norm).row(row), norm(row), atol=1e-6, rtol=2e-6)
    ln = nn.LayerNorm(32)
    row = torch.randn(1, 32)
    assert torch.equal(decode._Norm(ln).row(row), ln(row))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_generate_under_inference_mode_leaves_nothing_behind(layout):
    """generate's fast loop runs under inference mode: the ids it returns are an ordinary tensor
    (writable in place, usable under autograd), the model trains afterwards (forward and
    backward, the kept copies rebuilt with the new weights), and generate also works inside the
    caller's own inference mode, with the same tokens as recomputation."""
    gpt = model_for(layout)
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    first = gpt.generate(prompt[:1], 5, temperature=0.0)  # the RoPE tables are made in its loop
    if gpt.rope is not None:  # kept on the module, so made as ordinary tensors
        assert gpt.rope._tables and not any(t.is_inference() for pair in gpt.rope._tables.values() for t in pair)
    want = gpt.generate(prompt, 5, temperature=0.0, use_cache=False)
    assert torch.equal(first, want[:1])
    for batch in (prompt, prompt[:1]):
        out = gpt.generate(batch, 5, temperature=0.0)
        assert torch.equal(out, want[:batch.shape[0]]) and not out.is_inference()
        out[0, 0] = 7  # in place outside inference mode: not allowed on an inference tensor
    opt = torch.optim.SGD(gpt.parameters(), lr=0.5)
    gpt.train()
    loss = gpt(out).logits.logsumexp(-1).mean()
    loss.backward()
    opt.step()
    gpt.eval()
    after = gpt.generate(prompt[:1], 5, temperature=0.0)
    assert torch.equal(after, gpt.generate(prompt[:1], 5, temperature=0.0, use_cache=False))
    with torch.inference_mode():
        inside = gpt.generate(prompt[:1], 5, temperature=0.0)
    assert torch.equal(inside, after)


def test_onednn_linear_equals_f_linear(monkeypatch):
    """kernels.linear may pick oneDNN; it must agree with F.linear to float32 rounding, and
    stay out of autograd, other dtypes and small matmuls."""
    torch.manual_seed(0)
    w, b = torch.randn(512, 256), torch.randn(512)
    for x in (torch.randn(3, 40, 256), torch.randn(1, 256), torch.randn(2, 256, 9).transpose(1, 2)):
        with torch.no_grad():
            torch.testing.assert_close(kernels.linear(x, w, b), nn.functional.linear(x, w, b),
                                       atol=1e-4, rtol=1e-5)
            torch.testing.assert_close(kernels.linear(x, w), nn.functional.linear(x, w), atol=1e-4, rtol=1e-5)
    x = torch.randn(4, 300, 256, requires_grad=True)
    assert not kernels._onednn_ok(x, w, b)  # autograd: F.linear
    kernels.linear(x, w, b).sum().backward()
    assert x.grad is not None
    with torch.no_grad():
        assert not kernels._onednn_ok(torch.randn(1, 256), torch.randn(8, 256), None)  # too small
        one = torch.randn(1, 1, 256)  # 131072 multiply-adds: F.linear unless the weight streams
        assert not kernels._onednn_ok(one, w, None)
        assert kernels._onednn_ok(one, w, None, kernels.MIN_MACS_STREAMED) == kernels._HAS_ONEDNN
        assert not kernels._onednn_ok(torch.randn(300, 256).double(), w.double(), None)
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(3, 40, 256)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        kernels.linear(x, w, b)
    assert counter.get_total_flops() == 2 * 3 * 40 * 256 * 512  # counted: F.linear inside the mode
    with torch.no_grad():
        assert kernels._onednn_ok(x, w, b) == kernels._HAS_ONEDNN
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
        assert not kernels._onednn_ok(x, w, b)  # torch.compile cannot lower oneDNN's op here
    lin = kernels.Linear(256, 512)
    assert isinstance(lin, nn.Linear) and repr(lin) == repr(nn.Linear(256, 512))
    assert set(lin.state_dict()) == {"weight", "bias"}


def test_onednn_weights_are_packed_once_and_repacked_after_a_change(monkeypatch):
    """kernels.linear hands oneDNN its blocked copy of the weight (kernels.packed): made at the
    first call, reused while the weight is unchanged, remade after an in-place change (an
    optimizer step, load_state_dict) or a new storage, dropped with the weight; never made for
    a tensor without a version counter (inference mode) or a non-contiguous one, or with
    USE_PACKED off. The results equal F.linear's either way."""
    import gc

    if not kernels._HAS_ONEDNN:
        pytest.skip("no oneDNN in this PyTorch build")
    torch.manual_seed(0)
    made = []
    reorder = kernels._reorder
    monkeypatch.setattr(kernels, "_reorder", lambda w: made.append(tuple(w.shape)) or reorder(w))
    w, b = torch.randn(512, 256), torch.randn(512)
    x = torch.randn(3, 40, 256)
    with torch.no_grad():
        first = kernels.packed(w)
        assert first.is_mkldnn and kernels.packed(w) is first  # made once, then reused
        torch.testing.assert_close(kernels.linear(x, w, b), nn.functional.linear(x, w, b), atol=1e-4, rtol=1e-5)
        w.mul_(2)  # changed in place: the copy is remade, the result follows the new values
        assert kernels.packed(w) is not first
        torch.testing.assert_close(kernels.linear(x, w, b), nn.functional.linear(x, w, b), atol=1e-4, rtol=1e-5)
        assert len(made) == 2 and kernels.packed(w) is kernels.packed(w)
        wt = w.t()  # not contiguous: used as it is
        assert kernels.packed(wt) is wt
        monkeypatch.setattr(kernels, "USE_PACKED", False)
        assert kernels.packed(w) is w
        torch.testing.assert_close(kernels.linear(x, w, b), nn.functional.linear(x, w, b), atol=1e-4, rtol=1e-5)
        monkeypatch.setattr(kernels, "USE_PACKED", True)
    with torch.inference_mode():
        inf = torch.randn(512, 256)
        assert kernels.packed(inf) is inf
    n = len(kernels._PACKED)
    del w, wt, first  # (a view keeps its base alive)
    gc.collect()
    assert len(kernels._PACKED) < n  # dropped with the weight


def test_decode_steps_of_a_large_model_use_the_streamed_bound(monkeypatch):
    """FastDecoder passes MIN_MACS_STREAMED for one-token steps of a model larger than
    CACHE_BYTES, and the default bound for the prompt and for small models (with the transposed
    copies off, the embedding bags and the plain ones, whose one-row products do not go through
    oneDNN: tested below)."""
    monkeypatch.setattr(kernels, "USE_ROWS", False)
    monkeypatch.setattr(decode, "USE_PLAIN_ROWS", False)
    gpt = model_for("gpt2")
    seen = []
    real = kernels._onednn_ok
    monkeypatch.setattr(kernels, "_onednn_ok",
                        lambda x, w, b, m=None: seen.append((x.shape[-2], m)) or real(x, w, b, m))
    ids = torch.tensor([[1, 2, 3, 4]])
    default = kernels.CACHE_BYTES
    for limit, streamed in ((default, False), (0, True)):
        monkeypatch.setattr(kernels, "CACHE_BYTES", limit)
        with torch.no_grad():
            fast = FastDecoder.for_model(gpt)
            cache = KVCache()
            seen.clear()
            fast.step(ids, cache)  # the prompt: 4 rows
            assert seen and all(m is None for _, m in seen)
            seen.clear()
            fast.step(ids[:, :1], cache)  # one token
            want = kernels.MIN_MACS_STREAMED if streamed else None
            assert seen and all(m == want for _, m in seen), seen
        assert fast.streamed == streamed
    small = sum(p.numel() * p.element_size() for p in gpt.parameters())
    assert small < default  # the default: a model this small stays in cache


def test_rope_models_run_under_inference_mode():
    """Inference-mode tensors have no version counter: RoPE must not rely on one there (it did)."""
    gpt = model_for("llama")
    ids = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want = gpt(ids).logits
        cache = KVCache()
        gpt(ids[:, :7], cache=cache)
        want_step = gpt(ids[:, 7:], cache=cache).logits
    with torch.inference_mode():
        torch.testing.assert_close(gpt(ids).logits, want)
        cache = KVCache()
        gpt(ids[:, :7], cache=cache)
        torch.testing.assert_close(gpt(ids[:, 7:], cache=cache).logits, want_step)
        fast = gpt.generate(ids[:, :5], 6, temperature=0.0)
    assert torch.equal(fast, gpt.generate(ids[:, :5], 6, temperature=0.0, use_cache=False))


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["gpt2", "llama"])
def test_fast_steps_on_cuda(layout):
    """On a GPU kernels.linear is F.linear; the fast loop must still equal the forward (bf16)."""
    gpt = model_for(layout).to("cuda", torch.bfloat16)
    ids = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(1)).cuda()
    ours, ref = KVCache(), KVCache()
    with torch.no_grad():
        fast = FastDecoder.for_model(gpt)
        for a, b in [(0, 8), (8, 9), (9, 12)]:
            torch.testing.assert_close(fast.step(ids[:, a:b], ours), gpt(ids[:, a:b], cache=ref).logits[:, -1],
                                       atol=2e-2, rtol=2e-2)


def test_generate_appends_through_kvcache_update(monkeypatch):
    """Every step of every layer goes through KVCache.update (one token per decode step)."""
    gpt = model_for("llama")
    seen = []
    update = KVCache.update
    monkeypatch.setattr(KVCache, "update", lambda self, i, k, v: seen.append((i, k.shape[-2])) or update(self, i, k, v))
    gpt.generate(torch.tensor([[1, 2, 3, 4]]), 3, temperature=0.0)
    assert seen == [(0, 4), (1, 4), (0, 1), (1, 1), (0, 1), (1, 1)]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n_in", [256, 200, 40])
def test_linear_t_equals_f_linear(n_in, threads, monkeypatch):
    """kernels.linear_t(x, W^T, b) = F.linear(x, W, b): one row by the embedding-bag kernel (its
    rows split into one bag per thread, the last bag taking the remainder: 200 rows on 3 threads
    are bags of 66, 66 and 68), anything else by kernels.linear on the transposed view."""
    torch.manual_seed(0)
    w, b = torch.randn(96, n_in), torch.randn(96)
    wt = w.t().contiguous()
    calls = []
    bag = torch.embedding_bag
    monkeypatch.setattr(torch, "embedding_bag", lambda *a: calls.append(a[2].tolist()) or bag(*a))
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            for x in (torch.randn(1, 1, n_in), torch.randn(n_in), torch.randn(3, 1, n_in), torch.randn(2, 5, n_in)):
                for bias in (b, None):
                    torch.testing.assert_close(kernels.linear_t(x, wt, bias), nn.functional.linear(x, w, bias),
                                               atol=1e-4, rtol=1e-5)
            if kernels._HAS_ROWS:  # bag_rows, as FastDecoder's one-row step calls it: the same bag
                x = torch.randn(1, 1, n_in)
                assert kernels.rows_call_ok(x)
                index = kernels.row_index(n_in, x.device)
                assert torch.equal(kernels.bag_rows(x.view(n_in), wt, index), kernels.linear_t(x, wt).view(1, 96))
                wtb = torch.cat([wt, b[None]]).contiguous()
                xb = torch.cat([x.view(n_in), torch.ones(1)])
                assert torch.equal(kernels.bag_rows(xb, wtb, kernels.row_index(n_in + 1, x.device)),
                                   kernels.linear_t(x, wtb, bias_row=True).view(1, 96))
                calls[:] = calls[:4]  # the counts below are of the F.linear comparisons
    finally:
        torch.set_num_threads(old)
    if kernels._HAS_ROWS:  # only the one-row calls: 2 shapes x 2 biases
        bags = max(1, min(threads, n_in // 64))
        assert calls == [[i * (n_in // bags) for i in range(bags)]] * 4
    else:
        assert calls == []
    # outside its case it steps aside: autograd (gradients reach x and the weight), float64
    assert not kernels.rows_call_ok(torch.randn(2, n_in)) and not kernels.rows_call_ok(torch.randn(n_in).double())
    monkeypatch.setattr(kernels, "USE_ROWS", False)  # switched off: no call takes the bag any more
    assert not kernels.rows_call_ok(torch.randn(1, n_in))
    monkeypatch.setattr(kernels, "USE_ROWS", True)
    x = torch.randn(1, n_in, requires_grad=True)
    assert not kernels.rows_call_ok(x)
    wt_grad = wt.clone().requires_grad_()
    kernels.linear_t(x, wt_grad, b).sum().backward()
    assert x.grad is not None and wt_grad.grad is not None
    with torch.no_grad():
        y = kernels.linear_t(torch.randn(1, n_in).double(), wt.double(), b.double())
    assert y.dtype == torch.float64 and len(calls) == (4 if kernels._HAS_ROWS else 0)


def test_transposed_copies_are_kept_rebuilt_and_dropped(monkeypatch):
    """The transposed weights of a streamed model: built once and reused by later generate
    calls, rebuilt after a parameter changes (a stale copy would decode with the old weights),
    dropped by train() and left out of pickles and the state dict."""
    import copy

    monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    if not kernels._HAS_ROWS:
        pytest.skip("no fbgemm embedding-bag kernel in this PyTorch build")
    gpt = model_for("llama")
    prompt, nxt = torch.tensor([[5, 6, 7]]), torch.tensor([[8]])

    def one_token_logits(fast_path: bool) -> torch.Tensor:  # after the prompt: one-row products
        cache = KVCache()
        with torch.no_grad():
            if not fast_path:
                gpt(prompt, cache=cache)
                return gpt(nxt, cache=cache).logits[:, -1]
            fast = FastDecoder.for_model(gpt)
            assert fast.transposed
            fast.step(prompt, cache)
            return fast.step(nxt, cache)

    gpt.generate(prompt, 6, temperature=0.0)
    held = gpt.__dict__["_transposed"][1]
    assert len(held) == 2 * 4 + 1  # per layer qkv, out, fc1 with the gate, fc2; the LM head
    torch.testing.assert_close(held[-1].dense(), gpt.lm_head.weight.t())
    gpt.generate(prompt, 6, temperature=0.0)
    before = one_token_logits(True)
    assert gpt.__dict__["_transposed"][1] is held  # reused while nothing changed
    assert set(gpt.state_dict()) == set(model_for("llama").state_dict())
    assert "_transposed" not in copy.deepcopy(gpt).__dict__
    gpt.load_state_dict(model_for("llama", seed=9).state_dict())
    after = one_token_logits(True)
    assert gpt.__dict__["_transposed"][1] is not held
    torch.testing.assert_close(after, one_token_logits(False), atol=1e-5, rtol=1e-5)  # the new weights
    assert not torch.allclose(after, before, atol=1e-3)
    held = gpt.__dict__["_transposed"][1]
    opt = torch.optim.SGD(gpt.parameters(), lr=0.1)  # an optimizer step in eval mode (no train())
    gpt(prompt, targets=prompt).loss.backward()
    opt.step()
    stepped = one_token_logits(True)
    assert gpt.__dict__["_transposed"][1] is not held
    torch.testing.assert_close(stepped, one_token_logits(False), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(stepped, after, atol=1e-4)
    gpt.train()
    assert "_transposed" not in gpt.__dict__


@pytest.mark.parametrize("streamed", [False, True], ids=["in_cache", "streamed"])
def test_a_model_made_under_inference_mode_runs_and_sees_its_updates(streamed, monkeypatch):
    """Parameters made under torch.inference_mode have no version counter, so the stacked q/k/v
    and the transposed copies cannot tell when they change: they are rebuilt at every call (it
    raised before). A load_state_dict inside inference mode must then show in the next call."""
    if streamed:
        monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    prompt = torch.tensor([[5, 6, 7]])
    with torch.inference_mode():
        torch.manual_seed(0)
        cfg = TransformerConfig(vocab_size=97, d_model=32, n_heads=4, n_layers=2, max_len=64, **LAYOUTS["llama"])
        made = GPT(cfg).eval()
        logits, tokens = made(prompt).logits, made.generate(prompt, 6, temperature=0.0)
        made.load_state_dict(model_for("llama", seed=9).state_dict())
        after = made(prompt).logits
    ref = model_for("llama")
    with torch.no_grad():
        torch.testing.assert_close(logits, ref(prompt).logits)
        torch.testing.assert_close(after, model_for("llama", seed=9)(prompt).logits)
    assert torch.equal(tokens, ref.generate(prompt, 6, temperature=0.0))
    with torch.inference_mode():
        fast = FastDecoder.for_model(made)
        got = fast.step(prompt, KVCache())
    assert fast.transposed == (streamed and kernels._HAS_ROWS)
    torch.testing.assert_close(got, after[:, -1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
def test_linear_t_with_the_bias_as_last_row(threads):
    """bias_row=True: wt is (in + 1, out) with the bias as its last row, weighted by 1 (one
    row: the embedding bag; several rows or float64: kernels.linear on the parts)."""
    torch.manual_seed(0)
    w, b = torch.randn(96, 200), torch.randn(96)
    wtb = torch.cat([w.t(), b[None]]).contiguous()  # (201, 96)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            for x in (torch.randn(1, 1, 200), torch.randn(200), torch.randn(3, 2, 200)):
                torch.testing.assert_close(kernels.linear_t(x, wtb, bias_row=True),
                                           nn.functional.linear(x, w, b), atol=1e-4, rtol=1e-5)
            y = kernels.linear_t(torch.randn(1, 200).double(), wtb.double(), bias_row=True)
    finally:
        torch.set_num_threads(old)
    assert y.shape == (1, 96) and y.dtype == torch.float64
    with pytest.raises(ValueError, match="last row"):
        kernels.linear_t(torch.randn(1, 200), wtb, b, bias_row=True)


def test_transposed_copies_carry_the_biases_as_a_last_row(monkeypatch):
    """In a model with biases each layer's copy is (in + 1, out): W^T, then the bias (zeros for
    a map without one); the LM head has none. A model without biases gets plain W^T. (The
    copies are kernels.RowBlocks; dense() gives them back as W^T.)"""
    monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    if not kernels._HAS_ROWS:
        pytest.skip("no fbgemm embedding-bag kernel in this PyTorch build")
    gpt = model_for("gpt2")
    mha = gpt.layers[0].self_attn
    mha.out_proj.bias = None  # one map without a bias: its row is zeros
    prompt = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        ref = KVCache()
        gpt(prompt[:, :3], cache=ref)
        want = gpt(prompt[:, 3:], cache=ref)
        fast = FastDecoder.for_model(gpt)
        cache = KVCache()
        fast.step(prompt[:, :3], cache)
        got = fast.step(prompt[:, 3:], cache)
    torch.testing.assert_close(got, want.logits[:, -1], atol=1e-5, rtol=1e-5)
    mats = gpt.__dict__["_transposed"][1]
    qkv, out = mats[0].dense(), mats[1].dense()
    assert qkv.shape == (33, 96) and out.shape == (33, 32) and not out[-1].any()
    torch.testing.assert_close(qkv[-1], torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
    torch.testing.assert_close(qkv[:-1], torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]).t())
    assert mats[-1].dense().shape == (32, 97)  # the LM head: bias-free
    plain = model_for("llama")
    with torch.no_grad():
        FastDecoder.for_model(plain).step(prompt, KVCache())
    assert plain.__dict__["_transposed"][1][0].dense().shape == (32, 32 + 2 * 2 * 8)


def test_switching_rows_off_takes_effect_in_a_built_decoder(monkeypatch):
    """kernels.USE_ROWS = False stops the embedding bag at the next step even in a FastDecoder
    built with transposed copies (the benchmarks time the F.linear step that way)."""
    monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    if not kernels._HAS_ROWS:
        pytest.skip("no fbgemm embedding-bag kernel in this PyTorch build")
    gpt = model_for("gpt2")
    calls = []
    bag = torch.embedding_bag
    monkeypatch.setattr(torch, "embedding_bag", lambda *a: calls.append(1) or bag(*a))
    with torch.no_grad():
        fast = FastDecoder.for_model(gpt)
        assert fast.transposed
        cache = KVCache()
        fast.step(torch.tensor([[1, 2, 3]]), cache)
        calls.clear()
        with_rows = fast.step(torch.tensor([[4]]), cache)
        assert len(calls) == 2 * 4 + 1  # per layer qkv, out, fc1, fc2; the LM head
        cache.keys, cache.values = [k[:, :, :3] for k in cache.keys], [v[:, :, :3] for v in cache.values]
        monkeypatch.setattr(kernels, "USE_ROWS", False)
        calls.clear()
        without = fast.step(torch.tensor([[4]]), cache)
    assert calls == []
    torch.testing.assert_close(without, with_rows, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", ["gpt2", "llama", "mqa_sinusoidal", "no_positions_untied"])
def test_one_token_steps_take_the_row_step_whatever_the_thread_count(layout, monkeypatch):
    """With transposed copies a one-token step of one sequence goes through
    FastDecoder._row_step: one embedding bag per product (its RowBlocks' blocks as the bags), no
    mask, q/k/v as views. The blocks are laid out for the thread count the copies were built at;
    switching threads between steps changes neither the bags nor the logits, and a decoder built
    at another thread count rebuilds the copies with blocks for it. The embedding norm of
    "no_positions_untied" takes Embeddings.forward instead of the token row + position row."""
    monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    if not kernels._HAS_ROWS:
        pytest.skip("no fbgemm embedding-bag kernel in this PyTorch build")
    gpt = model_for(layout, seed=5)
    ids = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(6))
    rows, offsets = [], []
    row_step, bag = FastDecoder._row_step, torch.embedding_bag
    monkeypatch.setattr(FastDecoder, "_row_step", lambda self, *a: rows.append(1) or row_step(self, *a))
    monkeypatch.setattr(torch, "embedding_bag", lambda *a: offsets.append(len(a[2])) or bag(*a))
    old = torch.get_num_threads()
    ours, ref = KVCache(), KVCache()
    try:
        torch.set_num_threads(2)
        with torch.no_grad():
            fast = FastDecoder.for_model(gpt)
            assert fast.transposed and fast._plain_embed == (layout != "no_positions_untied")
            blocks = [r.blocks for r in fast.row_products()]
            assert all(n % 2 == 0 for n in blocks)  # shared out evenly between 2 threads
            fast.step(ids[:, :8], ours)
            gpt(ids[:, :8], cache=ref)
            assert rows == []  # the prompt: the general path
            for t, threads in zip(range(8, 12), (1, 3, 3, 2)):
                torch.set_num_threads(threads)
                offsets.clear()
                got = fast.step(ids[:, t:t + 1], ours)
                torch.testing.assert_close(got, gpt(ids[:, t:t + 1], cache=ref).logits[:, -1], atol=1e-5, rtol=1e-5)
                assert offsets == blocks  # one bag per block, in the step's order
            torch.set_num_threads(3)
            held = gpt.__dict__["_transposed"][1]
            again = FastDecoder.for_model(gpt)
            assert gpt.__dict__["_transposed"][1] is not held
            assert all(r.blocks % 3 == 0 for r in again.row_products())
            cache = KVCache()
            again.step(ids[:, :8], cache)
            torch.testing.assert_close(again.step(ids[:, 8:9], cache), gpt(ids[:, :9]).logits[:, -1],
                                       atol=1e-5, rtol=1e-5)
    finally:
        torch.set_num_threads(old)
    assert len(rows) == 5 and ours.seq_len == 12


def count_row_steps(monkeypatch) -> list:
    """A list that gets one entry per call of FastDecoder._row_step (which still runs)."""
    rows = []
    row_step = FastDecoder._row_step
    monkeypatch.setattr(FastDecoder, "_row_step", lambda self, *a: rows.append(1) or row_step(self, *a))
    return rows


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_one_token_steps_of_a_small_model_take_contiguous_transposed_copies(layout, monkeypatch):
    """A model within the caches (float32, CPU): a one-token step of one sequence goes through
    FastDecoder._row_step with each product one addmm (mm without biases) on a contiguous W^T
    copy, q/k/v and fc1 with the gate stacked as the step reads them, biases stacked alike
    (zeros for a map without one). Equal to the model's forward; the prompt, a batch, autocast
    and USE_PLAIN_ROWS = False (read at each step) take the general path; float64 builds none."""
    gpt = model_for(layout, seed=3)
    ids = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(4))
    rows = count_row_steps(monkeypatch)
    with torch.no_grad():
        fast = FastDecoder.for_model(gpt)
        assert fast.plain_rows and not fast.transposed and not fast.streamed
        mats = [r for layer in fast.layers for r in layer.rows] + [fast.head_rows]
        assert all(isinstance(m, decode._RowProduct) and m.wt.is_contiguous() for m in mats)
        for layer, m in zip(gpt.layers, fast.layers):
            mha, ffn = layer.self_attn, layer.ffn
            stacks = [(mha.q_proj, mha.k_proj, mha.v_proj), (mha.out_proj,),
                      tuple(x for x in (ffn.fc1, ffn.gate) if x is not None), (ffn.fc2,)]
            for parts, r in zip(stacks, m.rows):
                torch.testing.assert_close(r.wt, torch.cat([x.weight for x in parts]).t(), rtol=0, atol=0)
                if all(x.bias is None for x in parts):
                    assert r.bias is None
                else:
                    want = torch.cat([x.bias if x.bias is not None else torch.zeros(x.out_features)
                                      for x in parts])
                    torch.testing.assert_close(r.bias, want, rtol=0, atol=0)
        torch.testing.assert_close(fast.head_rows.wt, gpt.lm_head.weight.t(), rtol=0, atol=0)
        assert fast.head_rows.bias is None
        ours, ref = KVCache(), KVCache()
        fast.step(ids[:1, :8], ours)
        gpt(ids[:1, :8], cache=ref)
        assert rows == []  # the prompt: the general path
        for t in range(8, 11):
            got = fast.step(ids[:1, t:t + 1], ours)
            torch.testing.assert_close(got, gpt(ids[:1, t:t + 1], cache=ref).logits[:, -1], atol=1e-5, rtol=1e-5)
        assert len(rows) == 3
        monkeypatch.setattr(decode, "USE_PLAIN_ROWS", False)  # read at the step
        got = fast.step(ids[:1, 11:12], ours)
        torch.testing.assert_close(got, gpt(ids[:1, 11:12], cache=ref).logits[:, -1], atol=1e-5, rtol=1e-5)
        monkeypatch.setattr(decode, "USE_PLAIN_ROWS", True)
        batch, batch_ref = KVCache(), KVCache()
        fast.step(ids[:, :8], batch)
        gpt(ids[:, :8], cache=batch_ref)
        got = fast.step(ids[:, 8:9], batch)  # two sequences: two rows, the general path
        torch.testing.assert_close(got, gpt(ids[:, 8:9], cache=batch_ref).logits[:, -1], atol=1e-5, rtol=1e-5)
        cache = KVCache()
        fast.step(ids[:1, :8], cache)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fast.step(ids[:1, 8:9], cache)
        assert len(rows) == 3
        assert FastDecoder.for_model(gpt.double()).plain_rows is False


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_streamed_models_may_take_contiguous_transposed_copies(layout, monkeypatch):
    """decode.STREAMED_ROWS = "mm": a model over the caches takes the _RowProduct copies for its
    one-token steps instead of the embedding bags, through the same _row_step; prompts and
    chunks keep the general path; every step equals the model's forward. The default follows the CPU's vendor ("mm" on Intel)."""
    monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    monkeypatch.setattr(kernels, "MIN_MACS_STREAMED", 1)
    monkeypatch.setattr(decode, "STREAMED_ROWS", "mm")
    gpt = model_for(layout, seed=7)
    ids = torch.randint(0, 97, (1, 14), generator=torch.Generator().manual_seed(8))
    rows = count_row_steps(monkeypatch)
    with torch.no_grad():
        fast = FastDecoder.for_model(gpt)
        assert fast.streamed and fast.plain_rows and not fast.transposed
        assert isinstance(fast.head_rows, decode._RowProduct) and gpt.__dict__["_transposed"][0][0] == "mm"
        ours, ref = KVCache(), KVCache()
        for a, b in [(0, 6), (6, 7), (7, 8), (8, 12), (12, 13), (13, 14)]:
            got = fast.step(ids[:, a:b], ours)
            torch.testing.assert_close(got, gpt(ids[:, a:b], cache=ref).logits[:, -1], atol=1e-5, rtol=1e-5)
    assert len(rows) == 4  # the one-token steps
    want = "mm" if decode._cpu_vendor() == "GenuineIntel" else "bags"
    monkeypatch.undo()  # the module's own default
    assert decode.STREAMED_ROWS == want


def test_plain_copies_are_kept_rebuilt_and_dropped():
    """The contiguous W^T copies of a small model are kept between generate calls, rebuilt
    after a parameter changes (generate then follows the new weights), dropped by train()."""
    gpt = model_for("gpt2")
    prompt = torch.tensor([[5, 6, 7]])
    gpt.generate(prompt, 4, temperature=0.0)
    key, held = gpt.__dict__["_transposed"]
    assert key[0] == "mm" and len(held) == 4 * 2 + 1
    gpt.generate(prompt, 4, temperature=0.0)
    assert gpt.__dict__["_transposed"][1] is held
    gpt.load_state_dict(model_for("gpt2", seed=9).state_dict())
    out = gpt.generate(prompt, 6, temperature=0.0)
    assert gpt.__dict__["_transposed"][1] is not held
    assert torch.equal(out, gpt.generate(prompt, 6, temperature=0.0, use_cache=False))
    gpt.train()
    assert "_transposed" not in gpt.__dict__


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("bias", [True, False], ids=["bias_row", "no_bias"])
@pytest.mark.parametrize("n_in,outs", [(37, (50, 20, 20)), (200, (1000,)), (64, (97,))])
def test_row_blocks_equal_f_linear(n_in, outs, bias, threads):
    """kernels.RowBlocks: W (the parts stacked, their biases as one more row) cut into column
    blocks of about BLOCK_COLS columns, a multiple of the thread count, zero-padded after the
    last output; one row times it equals F.linear, the buffer reused from call to call."""
    torch.manual_seed(0)
    parts = [(torch.randn(n, n_in), torch.randn(n) if bias else None) for n in outs]
    w = torch.cat([p[0] for p in parts])
    b = torch.cat([p[1] for p in parts]) if bias else None
    n_out = w.shape[0]
    shape = kernels.RowBlocks.shape(n_in, n_out, bias, threads)
    rb = kernels.RowBlocks(torch.full(shape, float("nan")), n_in, n_out, bias, threads)
    rb.fill(parts)
    assert rb.blocks % threads == 0 and rb.blocks * rb.cols >= n_out > (rb.blocks - 1) * rb.cols
    assert rb.cols <= kernels.BLOCK_COLS or rb.blocks == threads
    assert rb.table.shape == (rb.blocks * (n_in + bias), rb.cols)
    assert not rb.table.isnan().any()  # every entry written, the padding with zeros
    want = torch.cat([w.t(), b[None]]) if bias else w.t()
    assert torch.equal(rb.dense(), want)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(1, n_in)
            torch.testing.assert_close(rb(x), nn.functional.linear(x, w, b), atol=1e-4, rtol=1e-5)
    assert rb(x).shape == (1, n_out)
    with pytest.raises(ValueError, match="should be"):
        kernels.RowBlocks(torch.zeros(shape[0] + 1, shape[1]), n_in, n_out, bias, threads)
    with pytest.raises(ValueError, match="outputs"):
        rb.fill(parts[:1] if len(parts) > 1 else [(w[:-1], None)])


def test_the_row_step_says_when_a_position_is_past_the_context(monkeypatch):
    """A one-token step after max_len tokens is a ValueError naming the position and max_len (the
    row step checks the position as an int), as the position module's own check is."""
    monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    if not kernels._HAS_ROWS:
        pytest.skip("no fbgemm embedding-bag kernel in this PyTorch build")
    gpt = model_for("gpt2")
    cache = KVCache()
    with torch.no_grad():
        fast = FastDecoder.for_model(gpt)
        fast.step(torch.zeros(1, 64, dtype=torch.long), cache)  # max_len = 64 tokens
        with pytest.raises(ValueError, match="position 64 is out of range for max_len=64"):
            fast.step(torch.zeros(1, 1, dtype=torch.long), cache)
        with pytest.raises(ValueError, match="position 64 is out of range for max_len=64"):
            gpt.embed.pos_emb(torch.tensor([64]))


def _mapping_of(ptr: int) -> "dict[str, str] | None":
    """The /proc/self/smaps entry (its fields) of the mapping that holds address ``ptr``."""
    with open("/proc/self/smaps") as f:
        text = f.read()
    found, entry = None, None
    for line in text.splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:  # "start-end perms ..." opens an entry
            lo, hi = (int(a, 16) for a in head.split("-"))
            entry = found = {} if lo <= ptr < hi else found
            if not lo <= ptr < hi:
                entry = None
        elif entry is not None:
            key, _, value = line.partition(":")
            entry[key] = value.strip()
    return found


def test_huge_page_empty_lays_tensors_out_in_one_block(monkeypatch):
    """Each tensor has its shape and dtype and its own memory (a write to one changes no other),
    starts on a 4 KiB boundary, and all of them lie in one mapping that starts on a 2 MiB
    boundary and is advised for huge pages; the mapping goes when the tensors go. Below one huge
    page in all, or switched off: plain tensors with storages of their own."""
    import sys

    shapes = [(769, 2304), (3, 5), (768, 100)]
    small = kernels.huge_page_empty([(4, 8), (2,)])
    assert [t.shape for t in small] == [(4, 8), (2,)]
    assert small[0].untyped_storage().data_ptr() != small[1].untyped_storage().data_ptr()
    monkeypatch.setattr(kernels, "USE_HUGE_PAGES", False)
    off = kernels.huge_page_empty(shapes)
    assert len({t.untyped_storage().data_ptr() for t in off}) == 3
    monkeypatch.setattr(kernels, "USE_HUGE_PAGES", True)
    ts = kernels.huge_page_empty(shapes, torch.float64)
    assert [t.shape for t in ts] == shapes and all(t.dtype == torch.float64 and t.is_contiguous() for t in ts)
    for i, t in enumerate(ts):
        t.fill_(i)
    assert [t.unique().tolist() for t in ts] == [[0.0], [1.0], [2.0]]  # no overlap
    assert all(t.data_ptr() % 4096 == 0 for t in ts)
    if not (sys.platform.startswith("linux") and kernels._HAS_HUGE_PAGES):
        return
    assert len({t.untyped_storage().data_ptr() for t in ts}) == 1  # one block
    assert ts[0].data_ptr() % kernels.HUGE_PAGE == 0
    where = ts[0].data_ptr()
    mapping = _mapping_of(where)
    assert mapping is not None and "hg" in mapping["VmFlags"].split()  # hg: advised MADV_HUGEPAGE
    del ts, t
    assert _mapping_of(where) is None  # unmapped with the last tensor


def test_a_large_result_is_written_into_huge_pages_and_equals_f_linear(monkeypatch):
    """kernels.linear writes a result of BIG_OUTPUT bytes or more (a GPT's logits over a long
    prompt) into kernels.result_empty: equal to F.linear, with and without a bias, for 2-D and
    3-D and non-contiguous inputs, and an ordinary tensor afterwards (writable, savable, kept
    alive by its views). Not off CPU float32, under torch.func's transforms or forward-mode AD,
    or switched off."""
    import io
    import sys

    monkeypatch.setattr(kernels, "BIG_OUTPUT", 2 << 20)  # 2 MiB: a small test, the same path
    monkeypatch.setattr(kernels, "_RESULTS", [])
    torch.manual_seed(0)
    w, b = torch.randn(1024, 64), torch.randn(1024)
    xs = (torch.randn(600, 64), torch.randn(2, 300, 64), torch.randn(2, 64, 300).transpose(1, 2))
    with torch.no_grad():
        for x in xs:
            assert kernels._big_output_ok(x, w, b) == kernels._HAS_HUGE_PAGES
            for bias in (b, None):
                torch.testing.assert_close(kernels.linear(x, w, bias), nn.functional.linear(x, w, bias),
                                           atol=1e-4, rtol=1e-5)
        y = kernels.linear(xs[1], w, b)
        if sys.platform.startswith("linux") and kernels._HAS_HUGE_PAGES:
            assert y.data_ptr() % kernels.HUGE_PAGE == 0  # the mapping, not torch's allocator
            mapping = _mapping_of(y.data_ptr())
            assert mapping is not None and "hg" in mapping["VmFlags"].split()
        last = y[:, -1]  # a view keeps the mapping alive
        want = last.clone()
        del y
        torch.testing.assert_close(last, want)
        last.add_(1)  # writable
        buf = io.BytesIO()
        torch.save(last, buf)
        buf.seek(0)
        torch.testing.assert_close(torch.load(buf), want + 1)
        assert not kernels._big_output_ok(torch.randn(3, 64), w, b)  # 12 KiB: the allocator's
        assert not kernels._big_output_ok(torch.randn(600, 64).double(), w.double(), None)
        assert not kernels._big_output_ok(torch.randn(600, 63), w, b)  # F.linear says what is wrong
        with pytest.raises(RuntimeError):
            kernels.linear(torch.randn(600, 63), w, b)
    x = xs[0]
    with torch.no_grad(), torch.autograd.forward_ad.dual_level():  # forward-mode AD: F.linear's
        dual = torch.autograd.forward_ad.make_dual(x, torch.ones_like(x))
        assert not kernels._big_output_ok(dual, w, b)
        tangent = torch.autograd.forward_ad.unpack_dual(kernels.linear(dual, w, b)).tangent
        torch.testing.assert_close(tangent, torch.ones_like(x) @ w.t())
    with torch.no_grad():
        got = torch.func.vmap(lambda r: kernels.linear(r, w, b))(x.view(2, 300, 64))
        torch.testing.assert_close(got, nn.functional.linear(x, w, b).view(2, 300, 1024))
    monkeypatch.setattr(kernels, "USE_HUGE_PAGES", False)
    with torch.no_grad():
        assert not kernels._big_output_ok(xs[0], w, b)


def test_a_large_result_has_f_linears_gradients(monkeypatch):
    """Under autograd a large result goes the same way, with F.linear's first and second
    derivatives for x, weight and bias (each alone or together, with and without a bias, 3-D
    x), and a gradient that flows into a weight shared with an embedding (a GPT's tied head)."""
    monkeypatch.setattr(kernels, "BIG_OUTPUT", 2 << 20)
    monkeypatch.setattr(kernels, "_RESULTS", [])
    torch.manual_seed(0)
    x0, w0, b0 = torch.randn(2, 300, 64), torch.randn(1024, 64) / 8, torch.randn(1024)
    g = torch.randn(2, 300, 1024)
    for need in ((True, True, True), (True, False, False), (False, True, False), (False, False, True),
                 (True, True, None)):
        results = []
        for f in (kernels.linear, nn.functional.linear):
            x, w = x0.clone().requires_grad_(need[0]), w0.clone().requires_grad_(need[1])
            b = None if need[2] is None else b0.clone().requires_grad_(need[2])
            inputs = [t for t in (x, w, b) if t is not None and t.requires_grad]
            y = f(x, w, b)
            if f is kernels.linear:
                assert kernels._big_output_ok(x, w, b) == kernels._HAS_HUGE_PAGES
                if kernels._HAS_HUGE_PAGES:
                    assert type(y.grad_fn).__name__ == "_LinearMappedBackward"
            first = torch.autograd.grad((y * g).sum(), inputs, create_graph=True)
            square = sum((d ** 2).sum() for d in first)  # depends on the inputs where x and w both do
            second = (torch.autograd.grad(square, inputs, allow_unused=True) if square.requires_grad
                      else (None,) * len(inputs))
            results.append((y, first, second))
        (y, first, second), (y_ref, first_ref, second_ref) = results
        torch.testing.assert_close(y, y_ref, atol=1e-4, rtol=1e-5)
        for a, r in zip(first + second, first_ref + second_ref):
            assert (a is None) == (r is None)
            if a is not None:
                torch.testing.assert_close(a, r, atol=1e-3, rtol=1e-4)
    emb = nn.Embedding(1024, 64)  # a tied head: the weight gets both gradients
    ids = torch.randint(0, 1024, (2, 300))
    kernels.linear(emb(ids), emb.weight).sum().backward()
    got = emb.weight.grad.clone()
    emb.weight.grad = None
    nn.functional.linear(emb(ids), emb.weight).sum().backward()
    torch.testing.assert_close(got, emb.weight.grad, atol=1e-3, rtol=1e-4)


def test_a_large_results_memory_is_kept_for_the_next_one(monkeypatch):
    """Once no tensor uses a large result, its mapping serves the next large result that fits
    (the smallest idle one); one still in use is never handed out; at most KEEP_RESULTS are
    kept (the oldest idle one makes room), none with KEEP_RESULTS = 0; release_results unmaps
    the idle ones and reports their bytes, leaving those in use to their tensors."""
    import sys

    if not (sys.platform.startswith("linux") and kernels._HAS_HUGE_PAGES):
        pytest.skip("huge-page mappings are Linux's")
    monkeypatch.setattr(kernels, "_RESULTS", [])
    monkeypatch.setattr(kernels, "KEEP_RESULTS", 2)
    mib = 1 << 20
    a = kernels.result_empty((3 * mib // 4,))  # 3 MiB of float32
    a.fill_(1)
    b = kernels.result_empty((3 * mib // 4,))
    assert b.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()  # a is in use
    b.fill_(2)
    assert a.unique().tolist() == [1.0]
    where_a = a.data_ptr()
    del a
    c = kernels.result_empty((2 * mib // 4,))  # smaller: fits in a's idle mapping
    assert c.data_ptr() == where_a and c.shape == (2 * mib // 4,)
    big = kernels.result_empty((9 * mib // 4,))  # fits nowhere idle, pool full: not kept
    assert len(kernels._RESULTS) == 2
    where_big = big.data_ptr()
    del big
    assert _mapping_of(where_big) is None  # unmapped with its tensor
    del c
    d = kernels.result_empty((9 * mib // 4,))  # the pool's idle one (c's) makes room for it
    assert len(kernels._RESULTS) == 2 and _mapping_of(where_a) is None
    where_d = d.data_ptr()
    del d
    e = kernels.result_empty((mib // 4,))  # 1 MiB: below one huge page, torch's allocator
    assert e.data_ptr() != where_d
    free = kernels.release_results()
    assert free == 12 * mib  # d's mapping: 9 MiB in 2 MiB pages, and one page more to align
    assert len(kernels._RESULTS) == 1 and _mapping_of(where_d) is None  # b is still in use
    assert b.unique().tolist() == [2.0]
    monkeypatch.setattr(kernels, "KEEP_RESULTS", 0)
    monkeypatch.setattr(kernels, "_RESULTS", [])
    f = kernels.result_empty((3 * mib // 4,))
    assert kernels._RESULTS == [] and f.shape == (3 * mib // 4,)


def test_transposed_copies_of_a_large_model_share_one_huge_page_block(monkeypatch):
    """A model whose copies pass one huge page gets them in one block (kernels.huge_page_empty);
    its one-token steps still equal the model's own forward. Where this machine's Linux grants
    huge pages for an advised mapping, the copies are backed by them."""
    import sys

    monkeypatch.setattr(kernels, "CACHE_BYTES", 0)
    if not kernels._HAS_ROWS:
        pytest.skip("no fbgemm embedding-bag kernel in this PyTorch build")
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=4000, d_model=128, n_heads=4, n_layers=2, max_len=64)
    gpt = GPT(cfg).eval()
    prompt = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        ref = KVCache()
        gpt(prompt[:, :3], cache=ref)
        want = gpt(prompt[:, 3:], cache=ref).logits[:, -1]
        fast = FastDecoder.for_model(gpt)
        cache = KVCache()
        fast.step(prompt[:, :3], cache)
        got = fast.step(prompt[:, 3:], cache)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    mats = [m.table for m in gpt.__dict__["_transposed"][1]]
    assert sum(m.nbytes for m in mats) > kernels.HUGE_PAGE
    if not (sys.platform.startswith("linux") and kernels._HAS_HUGE_PAGES):
        return
    assert len({m.untyped_storage().data_ptr() for m in mats}) == 1
    try:
        setting = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return
    if "[never]" not in setting:  # the 2 MiB pages were granted (the LM head alone is 2 MB)
        mapping = _mapping_of(mats[-1].data_ptr())
        assert int(mapping["AnonHugePages"].split()[0]) >= 2048, mapping


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh"])
def test_gelu_inside_the_product_equals_the_two_steps(activation):
    """kernels.linear_gelu and FeedForward's no-grad forward compute the GELU inside oneDNN's
    product (where it runs it): equal to F.gelu(F.linear(...)) with the same approximation, not
    the other one; under autograd, or with a hook on fc1 (which must see its call), the FFN
    takes the two steps and the hook fires."""
    from attnlib.layers import FeedForward

    torch.manual_seed(0)
    approximate = {"gelu": "none", "gelu_tanh": "tanh"}[activation]
    other = {"none": "tanh", "tanh": "none"}[approximate]
    w, b = torch.randn(1536, 384) * 0.05, torch.randn(1536) * 0.1
    x = torch.randn(2, 100, 384)
    with torch.no_grad():
        for bias in (b, None):
            got = kernels.linear_gelu(x, w, bias, approximate)
            want = nn.functional.gelu(nn.functional.linear(x, w, bias), approximate=approximate)
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            wrong = nn.functional.gelu(nn.functional.linear(x, w, bias), approximate=other)
            assert (got - wrong).abs().max() > 1e-4  # the approximation asked for, not the other
    with pytest.raises(ValueError, match="approximate"):
        kernels.linear_gelu(x, w, b, "fast")
    ffn = FeedForward(384, 1536, activation=activation).eval()
    want = ffn.fc2(nn.functional.gelu(ffn.fc1(x), approximate=approximate))
    with torch.no_grad():
        torch.testing.assert_close(ffn(x), want, atol=1e-5, rtol=1e-5)
    xg = x.clone().requires_grad_()
    ffn(xg).sum().backward()  # autograd: F.linear and F.gelu, gradients reach the weights
    assert xg.grad is not None and ffn.fc1.weight.grad is not None
    seen = []
    ffn.fc1.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    with torch.no_grad():
        torch.testing.assert_close(ffn(x), want, atol=1e-5, rtol=1e-5)
    assert seen == [(2, 100, 1536)]
