"""attnlib.utils: seeding and best_time."""
import pytest
import torch

import attnlib


def test_best_time_is_the_fastest_call_and_calls_fn_repeats_times(monkeypatch):
    # a fake clock that each call of fn moves on by its own duration: no real timing involved
    now = [100.0]
    durations = [0.5, 0.125, 0.25]
    calls = []

    def fn():
        now[0] += durations[len(calls)]
        calls.append(1)

    monkeypatch.setattr(attnlib.utils, "perf_counter", lambda: now[0])
    assert attnlib.best_time(fn, repeats=3) == 0.125  # the fastest, not the first or the mean
    assert len(calls) == 3


def test_best_time_default_repeats_and_return_type():
    calls = []
    best = attnlib.best_time(lambda: calls.append(1))
    assert len(calls) == 3 and isinstance(best, float) and best >= 0.0


@pytest.mark.parametrize("repeats", [0, -1, 2.0, True, None])
def test_best_time_refuses_bad_repeats(repeats):
    with pytest.raises(ValueError, match="repeats must be a positive int"):
        attnlib.best_time(lambda: None, repeats=repeats)


def test_best_time_refuses_a_value_instead_of_a_function():
    with pytest.raises(TypeError, match="lambda"):
        attnlib.best_time(torch.zeros(2))


def test_seed_everything_repeats_torch_draws_and_sets_threads():
    before = torch.get_num_threads()
    try:
        g = attnlib.seed_everything(3, threads=1)
        a = torch.randn(4)
        assert torch.get_num_threads() == 1
        attnlib.seed_everything(3)
        assert torch.equal(a, torch.randn(4))
        assert torch.equal(torch.randn(2, generator=g), torch.randn(2, generator=torch.Generator().manual_seed(3)))
    finally:
        torch.set_num_threads(before)


def test_peak_memory_sees_the_score_matrix_of_the_math_path_only():
    q = torch.randn(1, 2, 256, 16)
    tt = 2 * 256 * 256 * 4  # one (B, H, T, T) float32 tensor
    math_peak = attnlib.peak_memory(lambda: attnlib.scaled_dot_product_attention(q, q, q, backend="math"))
    sdpa_peak = attnlib.peak_memory(lambda: attnlib.scaled_dot_product_attention(q, q, q, backend="sdpa"))
    assert math_peak >= 2 * tt > tt > sdpa_peak  # scores and weights at once; the fused kernel neither
    assert attnlib.peak_memory(lambda: torch.empty(3_000_000, dtype=torch.uint8).fill_(1)) >= 3_000_000
    with pytest.raises(TypeError, match="function of no arguments"):
        attnlib.peak_memory(q)
