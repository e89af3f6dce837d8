"""Sampling and the decoding loops: cache or no cache, same tokens; eos handling; one encoder pass."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlib import GPT, EncoderDecoder, ModelOutput, TransformerConfig, sample_next
from attnlib.generation import top_p_filter

generate_encoder_decoder = EncoderDecoder.generate  # the loop, run on a stand-in model below

V = 29


def cfg_(**kw) -> TransformerConfig:
    base = dict(vocab_size=V, d_model=16, n_heads=2, n_layers=2, max_len=20)
    base.update(kw)
    return TransformerConfig(**base)


def sharpen(model: nn.Module) -> None:
    """Larger weights -> peaked next-token distributions, so greedy paths are not near-ties."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)


# ----------------------------------------------------------------------------- sample_next
def test_greedy_is_argmax_and_top_k_one_is_greedy():
    torch.manual_seed(0)
    logits = torch.randn(4, V)
    assert torch.equal(sample_next(logits, temperature=0.0), logits.argmax(-1, keepdim=True))
    g = torch.Generator().manual_seed(1)
    assert torch.equal(sample_next(logits, temperature=1.0, top_k=1, generator=g), logits.argmax(-1, keepdim=True))


def test_top_k_only_draws_from_the_k_best():
    torch.manual_seed(0)
    logits = torch.randn(1, V).expand(3000, V)
    draws = sample_next(logits, temperature=2.0, top_k=3, generator=torch.Generator().manual_seed(0))
    allowed = set(torch.topk(logits[0], 3).indices.tolist())
    assert set(draws.flatten().tolist()) == allowed


def test_sampling_frequencies_follow_softmax_over_temperature():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    for temperature in (0.5, 1.0, 2.0):
        draws = sample_next(logits.expand(20000, 4), temperature=temperature,
                            generator=torch.Generator().manual_seed(0))
        freq = torch.bincount(draws.flatten(), minlength=4).float() / 20000
        torch.testing.assert_close(freq, torch.softmax(logits[0] / temperature, -1), atol=0.015, rtol=0)


def test_sampling_is_reproducible_with_a_generator():
    logits = torch.randn(5, V)
    a = sample_next(logits, generator=torch.Generator().manual_seed(3))
    b = sample_next(logits, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.shape == (5, 1) and a.dtype == torch.long


# ------------------------------------------------------------------------------------- GPT
@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope", "none"])
def test_gpt_greedy_with_and_without_cache_identical(positional):
    torch.manual_seed(0)
    gpt = GPT(cfg_(positional=positional))
    sharpen(gpt)
    prompt = torch.randint(0, V, (3, 4))
    cached = gpt.generate(prompt, 8, temperature=0.0)
    uncached = gpt.generate(prompt, 8, temperature=0.0, use_cache=False)
    assert cached.shape == (3, 12) and torch.equal(cached[:, :4], prompt)
    assert torch.equal(cached, uncached)
    # greedy really is argmax of the model's own next-token logits, step by step
    logits = gpt.eval()(cached[:, :-1]).logits
    assert torch.equal(cached[:, 4:], logits[:, 3:].argmax(-1))
    assert len(set(map(tuple, cached[:, 4:].tolist()))) > 1  # rows differ: not a degenerate model


def test_gpt_sampling_with_and_without_cache_identical_and_seeded():
    torch.manual_seed(0)
    gpt = GPT(cfg_())
    prompt = torch.randint(0, V, (2, 3))
    runs = [gpt.generate(prompt, 10, temperature=1.0, top_k=10, use_cache=c,
                         generator=torch.Generator().manual_seed(7)) for c in (True, False, True)]
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])
    other = gpt.generate(prompt, 10, temperature=1.0, generator=torch.Generator().manual_seed(8))
    assert not torch.equal(other, runs[0])


def test_generate_restores_training_mode_and_builds_no_graph():
    gpt = GPT(cfg_(dropout=0.1))
    gpt.train()
    out = gpt.generate(torch.zeros(1, 2, dtype=torch.long), 3, temperature=0.0)
    assert gpt.training and not out.requires_grad
    gpt.eval()
    gpt.generate(torch.zeros(1, 2, dtype=torch.long), 3, temperature=0.0)
    assert not gpt.training
    assert torch.equal(gpt.generate(out, 0), out)


def test_generate_length_limit_names_sizes():
    gpt = GPT(cfg_(max_len=10))
    gpt.generate(torch.zeros(1, 4, dtype=torch.long), 6, temperature=0.0)  # exactly fits
    with pytest.raises(ValueError, match="prompt length 4 \\+ max_new_tokens 7 = 11 exceeds .*max_len=10"):
        gpt.generate(torch.zeros(1, 4, dtype=torch.long), 7)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        gpt.generate(torch.zeros(1, 4, dtype=torch.long), 1, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k must be a positive int"):
        gpt.generate(torch.zeros(1, 4, dtype=torch.long), 1, top_k=0)


# -------------------------------------------------------------------------- EncoderDecoder
@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope", "none"])
def test_seq2seq_greedy_with_and_without_cache_identical(positional):
    torch.manual_seed(0)
    s2s = EncoderDecoder(cfg_(positional=positional))
    sharpen(s2s)
    src = torch.randint(3, V, (3, 6))
    cached = s2s.generate(src, 7, bos_id=1)
    assert cached.shape == (3, 8) and torch.all(cached[:, 0] == 1)
    assert torch.equal(cached, s2s.generate(src, 7, bos_id=1, use_cache=False))
    logits = s2s.eval()(src, cached[:, :-1]).logits
    assert torch.equal(cached[:, 1:], logits.argmax(-1))


def test_seq2seq_encoder_once_and_cross_kv_once_per_layer():
    torch.manual_seed(0)
    s2s = EncoderDecoder(cfg_(n_layers=3))
    calls = {"encoder": 0, "cross_k": 0, "cross_v": 0, "self_k": 0}

    def counter(name):
        def hook(*_):
            calls[name] += 1
        return hook

    s2s.encoder.register_forward_hook(counter("encoder"))
    for layer in s2s.decoder_layers:
        layer.cross_attn.k_proj.register_forward_hook(counter("cross_k"))
        layer.cross_attn.v_proj.register_forward_hook(counter("cross_v"))
        layer.self_attn.k_proj.register_forward_hook(counter("self_k"))
    s2s.generate(torch.randint(0, V, (2, 5)), 6, bos_id=1)
    assert calls == {"encoder": 1, "cross_k": 3, "cross_v": 3, "self_k": 3 * 6}
    calls.update(encoder=0, cross_k=0, cross_v=0, self_k=0)
    s2s.generate(torch.randint(0, V, (2, 5)), 6, bos_id=1, use_cache=False)
    assert calls["encoder"] == 1 and calls["cross_k"] == 3 * 6  # without a cache: every step


class ScriptedSeq2Seq(nn.Module):
    """A stand-in model whose decoder emits a fixed script of tokens per row (to test eos logic)."""

    def __init__(self, script: list[list[int]]) -> None:
        super().__init__()
        self.cfg = TransformerConfig(vocab_size=10, d_model=4, n_heads=1, n_layers=1, max_len=50)
        self.script = torch.tensor(script)  # (B, steps)

    def encode(self, src_ids, *, src_attention_mask=None):
        return torch.zeros(src_ids.shape[0], 1, 4), None, None

    def decode(self, tgt_ids, memory, *, memory_mask=None, cache=None):
        step = (cache.seq_len if cache is not None and cache.seq_len else 0) + tgt_ids.shape[1] - 1
        logits = torch.nn.functional.one_hot(self.script[:, step], 10).float()[:, None, :]  # (B, 1, V)
        if cache is not None:  # record the step as a 1-layer cache would
            cache.update(0, torch.zeros(tgt_ids.shape[0], 1, tgt_ids.shape[1], 1), torch.zeros(tgt_ids.shape[0], 1, tgt_ids.shape[1], 1))
        return ModelOutput(logits=logits)


def test_seq2seq_stops_when_every_row_has_eos_and_pads_finished_rows():
    script = [[4, 2, 7, 7, 7, 7],  # row 0: eos (2) at step 1, then junk that must be replaced by eos
              [5, 6, 8, 2, 9, 9]]  # row 1: eos at step 3
    for use_cache in (True, False):
        ids = generate_encoder_decoder(ScriptedSeq2Seq(script), torch.zeros(2, 3, dtype=torch.long), 6, bos_id=1,
                                       eos_id=2, temperature=0.0, use_cache=use_cache)
        assert ids.tolist() == [[1, 4, 2, 2, 2], [1, 5, 6, 8, 2]]
    # without eos_id the loop runs the full max_new_tokens
    ids = generate_encoder_decoder(ScriptedSeq2Seq(script), torch.zeros(2, 3, dtype=torch.long), 5, bos_id=1,
                                   eos_id=None, temperature=0.0, use_cache=True)
    assert ids.tolist() == [[1, 4, 2, 7, 7, 7], [1, 5, 6, 8, 2, 9]]


def test_seq2seq_eos_with_a_real_model():
    torch.manual_seed(0)
    s2s = EncoderDecoder(cfg_())
    sharpen(s2s)
    src = torch.randint(3, V, (2, 5))
    free = s2s.generate(src, 8, bos_id=1)
    eos = int(free[0, 3])  # row 0 produces this token at its 3rd step
    ids = s2s.generate(src, 8, bos_id=1, eos_id=eos)
    first = [int((row == eos).nonzero()[0]) if (row == eos).any() else None for row in free[:, 1:]]
    # the output is the free run, cut after the last row's first eos, with eos after each row's first one
    assert ids.shape[1] <= 9
    for r in range(2):
        k = first[r]
        if k is not None and k + 1 < ids.shape[1]:
            assert torch.equal(ids[r, :k + 2], free[r, :k + 2])
            assert torch.all(ids[r, k + 1:] == eos)
        else:
            assert torch.equal(ids[r], free[r, :ids.shape[1]])
    if all(k is not None for k in first):
        assert ids.shape[1] == max(first) + 2


def test_seq2seq_generate_errors_name_sizes():
    s2s = EncoderDecoder(cfg_(max_len=8))
    src = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="prompt length 1 \\+ max_new_tokens 8 = 9 exceeds .*max_len=8"):
        s2s.generate(src, 8, bos_id=1)
    with pytest.raises(ValueError, match="bos_id=29 is outside \\[0, vocab_size=29\\)"):
        s2s.generate(src, 2, bos_id=29)
    with pytest.raises(ValueError, match="eos_id=-1"):
        s2s.generate(src, 2, bos_id=1, eos_id=-1)


# ---- issue 10 -----------------------------------------------------------------------------------

def test_generate_zero_tokens_returns_a_new_tensor():
    model = GPT(cfg_())
    ids = torch.tensor([[1, 2]])
    out = model.generate(ids, 0)
    assert out is not ids and torch.equal(out, ids)
    out[0, 0] = 5
    assert ids[0, 0] == 1  # no aliasing: writing the result leaves the prompt alone


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_sample_next_refuses_nan_logits(temperature):
    logits = torch.tensor([[0.0, 1.0, 2.0], [0.0, float("nan"), 1.0]])
    with pytest.raises(ValueError, match=r"logits contain NaN \(row 1\)"):
        sample_next(logits, temperature=temperature)
    dead = torch.tensor([[0.0, 1.0, 2.0], [float("-inf")] * 3])
    with pytest.raises(ValueError, match=r"row 1 has no finite logit"):
        sample_next(dead, temperature=temperature)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_sample_next_refuses_inf_and_takes_huge_finite_logits(temperature):
    """+inf anywhere is refused (also beside -inf: their sum is NaN); finite logits whose sum
    overflows float32 are still sampled from (the one-pass test only falls back to the full one)."""
    for bad in ([0.0, float("inf"), 1.0], [float("-inf"), float("inf"), 1.0]):
        with pytest.raises(ValueError, match=r"logits contain \+inf \(row 1\)"):
            sample_next(torch.tensor([[0.0, 1.0, 2.0], bad]), temperature=temperature)
    huge = torch.tensor([[3e38, 3e38, 3.1e38, 3e38]] * 2)
    assert not torch.isfinite(huge.sum())
    assert sample_next(huge, temperature=0.0).tolist() == [[2], [2]]
    assert sample_next(huge, temperature=1e-30, generator=torch.Generator().manual_seed(0)).tolist() == [[2], [2]]


def test_greedy_takes_the_first_of_equal_maxima():
    """As argmax does: ties go to the lowest token id (here across a 50,257-token row)."""
    logits = torch.zeros(3, 50257)
    logits[0, [7, 9000, 50000]] = 5.0
    logits[1, [50256, 3]] = 1.0
    assert sample_next(logits, temperature=0.0).tolist() == [[7], [3], [0]]
    assert torch.equal(sample_next(logits, temperature=0.0), logits.argmax(-1, keepdim=True))


def test_temperature_type_and_tiny_temperatures():
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, 1.0, 0.0]])
    with pytest.raises(TypeError, match="temperature must be a number.*None"):
        sample_next(logits, temperature=None)
    gen = torch.Generator().manual_seed(0)
    # 1e-45: logits / temperature overflows to inf (was "probability tensor contains inf/nan")
    for t in (1e-45, 1e-30):
        assert sample_next(logits, temperature=t, generator=gen).tolist() == [[1], [0]]
        assert sample_next(logits, temperature=t, top_k=2, generator=gen).tolist() == [[1], [0]]


def test_temperature_overflow_test_with_masked_logits():
    """-inf logits (masked tokens) stay out at every temperature; below 1 the overflow test
    looks only at the finite logits (their scaled sum is -inf because of the masked ones)."""
    gen = lambda: torch.Generator().manual_seed(0)
    masked = torch.tensor([[float("-inf"), 1e38, 0.0, float("-inf")]])
    # 1e38 / 0.5 = 2e38 is finite: sampled as usual (token 1 has all the probability)
    assert sample_next(masked, temperature=0.5, generator=gen()).tolist() == [[1]]
    # 1e38 / 0.25 overflows: the greedy limit, never a masked token
    assert sample_next(masked, temperature=0.25, generator=gen()).tolist() == [[1]]
    # temperature >= 1 cannot overflow: the same draw as softmax + multinomial by hand
    logits = torch.tensor([[0.5, float("-inf"), 1.5, -2.0]] * 64)
    for t in (1.0, 1.7):
        want = torch.multinomial(torch.softmax(logits / t, -1), 1, generator=gen())
        got = sample_next(logits, temperature=t, generator=gen())
        assert torch.equal(got, want) and not (got == 1).any()


def test_seq2seq_accepts_numpy_integer_bos_and_eos():
    import numpy as np
    model = EncoderDecoder(cfg_())
    src = torch.tensor([[3, 4, 5]])
    a = model.generate(src, 3, bos_id=np.int64(1), eos_id=np.int32(2))
    b = model.generate(src, 3, bos_id=1, eos_id=2)
    assert torch.equal(a, b)
    with pytest.raises(TypeError, match=r"bos_id must be an int.*1.0"):
        model.generate(src, 3, bos_id=1.0)
    with pytest.raises(ValueError, match=r"bos_id=99 is outside \[0, vocab_size="):
        model.generate(src, 3, bos_id=np.int64(99))


# ----------------------------------------------------------------------- top_p (nucleus)
def _nucleus_brute_force(probs: torch.Tensor, p: float) -> set[int]:
    """The smallest set of tokens whose probability sums to >= p, by trying every size."""
    order = sorted(range(len(probs)), key=lambda i: -float(probs[i]))
    for size in range(1, len(order) + 1):
        if float(sum(probs[i] for i in order[:size])) >= p:
            return set(order[:size])
    return set(order)


def _support(logits, n=4000, **kw):
    draws = sample_next(logits.expand(n, -1), generator=torch.Generator().manual_seed(0), **kw)
    return set(draws.flatten().tolist())


def test_top_p_keeps_the_smallest_set_with_enough_mass():
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        logits = 2.0 * torch.randn(3, 12, generator=gen)
        for p in (0.05, 0.3, 0.5, 0.8, 0.95, 0.999):
            kept = torch.isfinite(top_p_filter(logits, p))
            for row in range(3):
                want = _nucleus_brute_force(torch.softmax(logits[row].double(), -1), p)
                assert set(kept[row].nonzero().flatten().tolist()) == want, (p, logits[row])
    # the top token is always kept, even when it alone exceeds p
    logits = torch.tensor([[5.0, 0.0, -1.0]])
    assert _support(logits, top_p=0.1) == {0}
    # probabilities 0.5, 0.3, 0.2: p = 0.49 keeps one token, 0.51 and 0.79 two, 0.81 all three
    logits = torch.tensor([[0.5, 0.3, 0.2]]).log()
    assert [_support(logits, top_p=p) for p in (0.49, 0.51, 0.79, 0.81)] == [{0}, {0, 1}, {0, 1}, {0, 1, 2}]


def test_top_p_sampling_frequencies_are_the_renormalised_nucleus():
    probs = torch.tensor([0.4, 0.3, 0.2, 0.1])
    draws = sample_next(probs.log()[None].expand(20000, 4), top_p=0.75, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(draws.flatten(), minlength=4).float() / 20000
    torch.testing.assert_close(freq, torch.tensor([4 / 9, 3 / 9, 2 / 9, 0.0]), atol=0.015, rtol=0)


def test_top_p_applies_after_temperature_and_top_k():
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1]]).log()
    # temperature first: T = 3 flattens the distribution to ~(0.30, 0.27, 0.24, 0.19), so p = 0.6
    # needs three tokens instead of two; T = 0.25 sharpens it to ~(0.72, 0.23, ...): one token
    assert _support(logits, top_p=0.6) == {0, 1}
    assert _support(logits, temperature=3.0, top_p=0.6) == {0, 1, 2}
    assert _support(logits, temperature=0.25, top_p=0.6) == {0}
    # top_k first, then the nucleus of the renormalised top-k distribution (4/7, 3/7): p = 0.55
    # keeps one token there, two without top_k
    assert _support(logits, top_p=0.55) == {0, 1}
    assert _support(logits, top_k=2) == {0, 1}
    assert _support(logits, top_k=2, top_p=0.55) == {0}
    assert _support(logits, top_k=3, top_p=0.99) == {0, 1, 2}


def test_top_p_with_temperature_zero_stays_greedy_and_is_validated():
    logits = torch.randn(6, V, generator=torch.Generator().manual_seed(0))
    for p in (0.01, 0.5, 1.0):
        assert torch.equal(sample_next(logits, temperature=0.0, top_p=p), logits.argmax(-1, keepdim=True))
    # top_p = 1 keeps everything: the same draws as no filter
    a = sample_next(logits, top_p=1.0, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, sample_next(logits, generator=torch.Generator().manual_seed(4)))
    for bad in (0, 0.0, -0.1, 1.5, True, "0.9"):
        with pytest.raises(ValueError, match="top_p"):
            sample_next(logits, top_p=bad)
    with pytest.raises(ValueError, match="top_p"):
        top_p_filter(logits, 0.0)
    gpt = GPT(cfg_())
    with pytest.raises(ValueError, match="top_p"):
        gpt.generate(torch.zeros(1, 2, dtype=torch.long), 3, top_p=0.0)


def test_gpt_generate_top_p_is_reproducible_and_cache_independent():
    torch.manual_seed(0)
    gpt = GPT(cfg_(positional="rope", n_kv_heads=1, norm="rmsnorm"))
    sharpen(gpt)
    prompt = torch.randint(0, V, (3, 4))

    def run(seed, **kw):
        return gpt.generate(prompt, 10, top_p=0.8, top_k=10, generator=torch.Generator().manual_seed(seed), **kw)

    a = run(7)
    assert a.shape == (3, 14) and torch.equal(a[:, :4], prompt)
    assert torch.equal(a, run(7)) and torch.equal(a, run(7, use_cache=False))
    assert not torch.equal(run(7), run(8))
    greedy = gpt.generate(prompt, 10, temperature=0.0, top_p=0.3)
    assert torch.equal(greedy, gpt.generate(prompt, 10, temperature=0.0))


def test_seq2seq_gqa_rmsnorm_top_p_cached_equals_uncached():
    torch.manual_seed(0)
    s2s = EncoderDecoder(cfg_(positional="rope", n_kv_heads=1, norm="rmsnorm", rope_base=1e5))
    sharpen(s2s)
    src = torch.randint(3, V, (3, 6))
    greedy = s2s.generate(src, 7, bos_id=1)
    assert torch.equal(greedy, s2s.generate(src, 7, bos_id=1, use_cache=False))
    assert torch.equal(greedy[:, 1:], s2s.eval()(src, greedy[:, :-1]).logits.argmax(-1))

    def sampled(**kw):
        return s2s.generate(src, 7, bos_id=1, temperature=1.0, top_p=0.7,
                            generator=torch.Generator().manual_seed(5), **kw)

    assert torch.equal(sampled(), sampled(use_cache=False))
    with pytest.raises(ValueError, match="top_p"):
        s2s.generate(src, 3, bos_id=1, top_p=1.2)


def test_logit_watch_checks_every_step_once_and_holds_at_most_fold_steps():
    """The decoding loops' NaN/inf check: one read after the loop, the right row and step named
    (here step 100, past one shrink at 64), and never more than ``fold`` steps of logits held."""
    from attnlib.checks import LogitWatch
    watch, most = LogitWatch(), 0
    for step in range(130):
        logits = torch.zeros(2, 1, 5)
        if step == 100:
            logits[1, 0, 3] = float("nan")
        watch.add(logits)
        most = max(most, len(watch.held))
    assert most < LogitWatch.fold
    with pytest.raises(ValueError, match=r"logits contain NaN \(row 1, step 100\)"):
        watch.check()
    fine = LogitWatch()
    for _ in range(70):
        fine.add(torch.randn(2, 1, 5))
    fine.check()  # finite logits pass
    LogitWatch().check()  # no step at all: nothing to read


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_generate_refuses_a_model_that_outputs_nan(temperature):
    model = GPT(cfg_())
    with torch.no_grad():
        model.lm_head.weight[3, 0] = float("nan")  # one broken vocabulary row (tied: embedding too)
    with pytest.raises(ValueError, match="logits contain NaN"):
        model.generate(torch.tensor([[1, 2]]), 3, temperature=temperature,
                       generator=torch.Generator().manual_seed(0))


def test_uncached_seq2seq_generation_holds_only_each_steps_last_logits():
    """Without a cache each step computes logits at every position; the NaN watch must not keep
    them all alive through a view of the last one."""
    import attnlib.checks as checks
    s2s = EncoderDecoder(TransformerConfig(vocab_size=11, d_model=16, n_heads=2, n_layers=1,
                                           max_len=16)).eval()
    held_bytes = []
    real_add = checks.LogitWatch.add

    def spy(self, logits):
        held_bytes.append(logits.untyped_storage().nbytes())
        real_add(self, logits)

    checks.LogitWatch.add = spy
    try:
        for use_cache in (True, False):
            held_bytes.clear()
            s2s.generate(torch.tensor([[1, 2, 3]]), 6, bos_id=1, use_cache=use_cache)
            assert held_bytes and max(held_bytes) == 11 * 4, (use_cache, held_bytes)
    finally:
        checks.LogitWatch.add = real_add
