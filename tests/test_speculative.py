"""Speculative decoding: the target's own tokens, fewer target calls.

Greedy: exactly ``target.generate(..., temperature=0.0)`` for several model pairs, prompts and k
(sliding-window models included: their rolling caches are cropped too). Sampling: every token is
distributed as the target's, checked statistically against the exact distribution of the first
two tokens over many seeded runs (and shown to differ from the draft's).
"""
from __future__ import annotations

import math

import pytest
import torch

import attnlib
from attnlib import GPT, SpeculativeStats, TransformerConfig, speculative_generate
from attnlib.generation import distribution

V = 19


def gpt(seed: int, std: float = 0.3, **kw) -> GPT:
    """A small random GPT with larger weights than at initialisation: peaked predictions, so
    greedy paths are not near-ties and the draft and the target really disagree."""
    torch.manual_seed(seed)
    base = dict(vocab_size=V, d_model=16, n_heads=4, n_layers=2, max_len=48)
    base.update(kw)
    model = GPT(TransformerConfig(**base)).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, std)
    return model


def noisy_copy(model: GPT, scale: float, seed: int) -> GPT:
    """The target's weights plus noise: a draft that agrees with it often, not always."""
    twin = GPT(model.cfg).eval()
    twin.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in twin.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))
    return twin


TARGETS = {
    "learned": lambda: gpt(0),
    "rope gqa": lambda: gpt(1, positional="rope", n_kv_heads=2, n_layers=3, norm="rmsnorm",
                            activation="swiglu"),
    "sliding window": lambda: gpt(2, positional="rope", n_kv_heads=2, sliding_window=3),
}
DRAFTS = {
    "itself": lambda t: t,
    "noisy copy": lambda t: noisy_copy(t, 0.1, 5),
    "unrelated": lambda t: gpt(7, d_model=8, n_heads=2, n_layers=1),
    "windowed": lambda t: gpt(8, d_model=8, n_heads=2, n_layers=1, sliding_window=2),
}


@pytest.mark.parametrize("draft_name", list(DRAFTS))
@pytest.mark.parametrize("target_name", list(TARGETS))
def test_greedy_equals_the_targets_own_greedy_generate(target_name, draft_name):
    target = TARGETS[target_name]()
    draft = DRAFTS[draft_name](target)
    for prompt_len, k, n in ((1, 1, 12), (5, 2, 20), (12, 4, 25), (3, 7, 30), (4, 3, 1)):
        prompt = torch.randint(0, V, (1, prompt_len), generator=torch.Generator().manual_seed(k))
        ids, stats = speculative_generate(target, draft, prompt, n, k=k)
        assert torch.equal(ids, target.generate(prompt, n, temperature=0.0)), (prompt_len, k)
        assert isinstance(stats, SpeculativeStats)
        assert all(type(v) is int for v in vars(stats).values())
        assert 0 <= stats.accepted <= stats.proposed <= k * stats.target_calls
        assert stats.draft_calls == stats.proposed
        assert stats.accepted + stats.target_calls == n  # each round: the kept drafts + one
        if draft is target:  # every draft passes: one target call per k + 1 tokens
            assert stats.accepted == stats.proposed
            assert stats.target_calls == math.ceil(n / (k + 1))


def test_a_good_draft_saves_target_calls_and_a_bad_one_costs_none():
    target = TARGETS["rope gqa"]()
    prompt = torch.tensor([[1, 2, 3]])
    _, good = speculative_generate(target, noisy_copy(target, 0.003, 1), prompt, 30, k=4)
    _, bad = speculative_generate(target, gpt(9, n_layers=1), prompt, 30, k=4)
    assert good.accepted / good.proposed > 0.8 and good.target_calls < 10, good  # 7 of 30
    assert bad.accepted / bad.proposed < 0.2 and bad.target_calls <= 30, bad  # never above one


def test_calls_are_counted_as_they_happen():
    target, draft = gpt(0), gpt(3, n_layers=1)
    calls = {id(target): 0, id(draft): 0}
    for m in (target, draft):
        m.register_forward_pre_hook(lambda mod, args: calls.__setitem__(id(mod), calls[id(mod)] + 1))
    _, stats = speculative_generate(target, draft, torch.tensor([[4, 5]]), 15, k=3)
    assert calls == {id(target): stats.target_calls, id(draft): stats.draft_calls}


def count_reads(monkeypatch) -> list:
    """Every read of a tensor's value to the host (each one a GPU sync)."""
    reads = []
    for name in ("__bool__", "__int__", "__float__", "item", "tolist"):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, _name=name):
            reads.append(_name)
            return _original(self, *args)
        monkeypatch.setattr(torch.Tensor, name, counted)
    return reads


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_one_read_to_the_host_per_round(monkeypatch, temperature):
    """Greedy and sampled rounds read one number each (how many drafts passed); the rest is the
    door's check of the ids and one check of all logits at the end, for each model."""
    target, draft = gpt(0), gpt(3, n_layers=1)
    prompt = torch.tensor([[4, 5, 6]])
    reads = count_reads(monkeypatch)
    _, stats = speculative_generate(target, draft, prompt, 20, k=3, temperature=temperature,
                                    generator=torch.Generator().manual_seed(0))
    assert reads.count("__int__") <= stats.target_calls  # none in a round without drafts
    assert len(reads) - reads.count("__int__") == 3, reads


def test_output_is_an_ordinary_tensor_and_the_prompt_comes_first():
    target, draft = gpt(0), gpt(3, n_layers=1)
    prompt = torch.tensor([[4, 5, 6]])
    ids, stats = speculative_generate(target, draft, prompt, 0)
    assert torch.equal(ids, prompt) and ids is not prompt and stats == SpeculativeStats()
    ids, _ = speculative_generate(target, draft, prompt, 6, temperature=0.8,
                                  generator=torch.Generator().manual_seed(1))
    assert ids.shape == (1, 9) and torch.equal(ids[:, :3], prompt) and not ids.is_inference()
    again, _ = speculative_generate(target, draft, prompt, 6, temperature=0.8,
                                    generator=torch.Generator().manual_seed(1))
    assert torch.equal(ids, again)  # seeded: reproducible


def test_no_dropout_while_decoding_and_the_mode_is_kept():
    target, draft = gpt(0, dropout=0.5).train(), gpt(3, n_layers=1, dropout=0.5).train()
    prompt = torch.tensor([[1, 2]])
    ids, _ = speculative_generate(target, draft, prompt, 10, k=2)
    assert target.training and draft.training
    assert torch.equal(ids, target.eval().generate(prompt, 10, temperature=0.0))


# --------------------------------------------------------------- sampling: the target's law
SMALL_V = 5


def exact_first_two(model: GPT, prompt: torch.Tensor, settings: tuple) -> torch.Tensor:
    """P(x1, x2) (V, V) when ``model`` samples two tokens after ``prompt`` with ``settings``
    (temperature, top_k, top_p): its own distribution at each step, as generate draws it."""
    with torch.no_grad():
        p1, _ = distribution(model(prompt).logits[0, -1], *settings)  # (V,)
        both = torch.cat([prompt.expand(SMALL_V, -1), torch.arange(SMALL_V)[:, None]], dim=1)
        p2, _ = distribution(model(both).logits[:, -1], *settings)  # (V, V): row x1
    return p1[:, None] * p2


def chi_square_bound(df: int, z: float) -> float:
    """The chi-square quantile with df degrees of freedom at the normal quantile z
    (Wilson-Hilferty; z = 3.72 is p = 1e-4, z = 7.0 about 1e-12)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> tuple[float, int]:
    """Pearson's statistic over the cells the law gives mass (empty cells must stay empty)."""
    live = probs > 0
    assert int(counts[~live].sum()) == 0, "a token the law never draws was drawn"
    expected = probs[live] * counts.sum()
    return float(((counts[live] - expected) ** 2 / expected).sum()), int(live.sum()) - 1


@pytest.mark.parametrize("k, n, settings", [
    (2, 3, (1.0, None, None)),   # two drafts: accepted, rejected (resampled), the next round
    (1, 2, (0.7, 3, None)),      # one draft; the second token is the bonus when it passes
    (3, 2, (1.3, None, 0.8)),    # the nucleus: tokens the draft may propose and p never draws
])
def test_sampled_tokens_are_distributed_as_the_targets(k, n, settings):
    """1000 seeded runs: the empirical law of the first two tokens passes a chi-square test
    against the target's exact law (p > 1e-4, a fixed set of seeds: it cannot flake) and fails
    one against the draft's (p < 1e-12), though many tokens were the draft's proposals."""
    target = gpt(11, std=0.6, vocab_size=SMALL_V, d_model=8, n_heads=2)
    draft = gpt(12, std=0.6, vocab_size=SMALL_V, d_model=8, n_heads=2, n_layers=1)
    prompt = torch.tensor([[1, 3]])
    p, q = exact_first_two(target, prompt, settings), exact_first_two(draft, prompt, settings)
    runs, counts, accepted, proposed = 1000, torch.zeros(SMALL_V, SMALL_V), 0, 0
    for seed in range(runs):
        ids, stats = speculative_generate(target, draft, prompt, n, k=k, temperature=settings[0],
                                          top_k=settings[1], top_p=settings[2],
                                          generator=torch.Generator().manual_seed(seed))
        counts[ids[0, 2], ids[0, 3]] += 1
        accepted, proposed = accepted + stats.accepted, proposed + stats.proposed
    stat, df = chi_square(counts, p)
    assert stat < chi_square_bound(df, 3.72), (stat, df, counts / runs, p)
    tv = 0.5 * float((counts / runs - p).abs().sum())
    # sampling noise alone gives a total variation of about 0.03-0.05 for 1000 runs over 9-25
    # cells (measured: 0.042, 0.024, 0.046, and chi-square 15.5, 4.2, 16.1 against bounds 59,
    # 32, 38); the two laws are 0.68-0.79 apart
    assert tv < 0.08, tv
    assert 0.5 * float((p - q).abs().sum()) > 0.3
    # against the draft's law (cells it never draws get a tiny mass): refused, p < 1e-12
    assert chi_square(counts, q + 1e-9 * (p > 0))[0] > chi_square_bound(df, 7.0)
    assert runs // 4 < accepted < proposed - runs // 4  # both branches, often


def test_distribution_is_the_softmax_over_temperature_with_top_k_and_top_p():
    """The law the statistical test compares with, by hand: softmax(logits / T), the top_k best,
    then the smallest set whose mass reaches top_p, renormalised."""
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    p, _ = distribution(logits, 0.7, None, None)
    torch.testing.assert_close(p, torch.softmax(logits / 0.7, -1))
    p, _ = distribution(logits, 0.7, 3, None)
    torch.testing.assert_close(p, torch.cat([torch.softmax(logits[:3] / 0.7, -1), torch.zeros(2)]))
    full = torch.softmax(logits / 1.3, -1)  # 0.48, 0.22, 0.15, 0.10, 0.05: 0.8 needs three
    p, _ = distribution(logits, 1.3, None, 0.8)
    torch.testing.assert_close(p, torch.cat([full[:3] / full[:3].sum(), torch.zeros(2)]))


# --------------------------------------------------------------------------------- bad input
def _args(**kw):
    base = dict(target=gpt(0), draft=gpt(3, n_layers=1), input_ids=torch.tensor([[1, 2]]),
                max_new_tokens=4)
    base.update(kw)
    return base


@pytest.mark.parametrize("kw, error, words", [
    (dict(draft=gpt(3, vocab_size=V + 1)), ValueError, rf"vocab_size={V + 1}.*vocab_size={V}"),
    (dict(input_ids=torch.tensor([[1, 2], [3, 4]])), ValueError, r"one sequence.*batch of 2"),
    (dict(k=0), ValueError, "k must be an int >= 1, got k=0"),
    (dict(k=2.5), TypeError, "k must be an int"),
    (dict(target="gpt"), TypeError, "target must be an attnlib.GPT"),
    (dict(draft=torch.nn.Linear(2, 2)), TypeError, "draft must be an attnlib.GPT, got Linear"),
    (dict(temperature=-1.0), ValueError, "temperature must be >= 0"),
    (dict(temperature="hot"), TypeError, "temperature must be a number"),
    (dict(top_k=0, temperature=1.0), ValueError, "top_k must be a positive int"),
    (dict(top_p=1.5, temperature=1.0), ValueError, "top_p must be a number in \\(0, 1\\]"),
    (dict(generator=0), TypeError, "generator must be a torch.Generator"),
    (dict(max_new_tokens=-1), ValueError, "max_new_tokens must be an int >= 0"),
    (dict(max_new_tokens=47), ValueError, "2 \\+ max_new_tokens 47 = 49 exceeds the model's max_len=48"),
    (dict(draft=gpt(3, n_layers=1, max_len=8), max_new_tokens=9), ValueError,
     "draft to read 10 tokens, more than its max_len=8"),
    (dict(input_ids=torch.tensor([[1.0, 2.0]])), TypeError, "input_ids must be an integer tensor"),
    (dict(input_ids=torch.tensor([[1, V]])), ValueError, f"token id {V}, outside"),
])
def test_bad_arguments_are_refused_at_the_door(kw, error, words):
    with pytest.raises(error, match=words):
        speculative_generate(**_args(**kw))


def test_near_misses_are_accepted():
    import numpy as np

    ids, stats = speculative_generate(**_args(k=np.int64(2), max_new_tokens=np.int32(3),
                                              temperature=np.float64(0.0)))
    assert ids.shape == (1, 5) and stats.proposed <= 4
    draft = gpt(3, n_layers=1, max_len=5)  # reads prompt + 4 - 1 = 5 tokens: enough
    assert speculative_generate(**_args(draft=draft))[0].shape == (1, 6)
