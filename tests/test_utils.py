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
