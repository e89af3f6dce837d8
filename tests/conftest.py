"""Shared test setup: one CPU thread (the CI box has two cores shared by many jobs),
``@pytest.mark.gpu`` tests skipped where CUDA is unavailable, and the hypothesis profiles of the
property-based tests."""
from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(1)

# Property-based tests (hypothesis): "ci", the default, is a bounded number of examples (the five
# property tests take ~7 s in all on one core), derandomized (the same examples every run, so CI
# cannot flake), no deadline (a loaded machine is slow, not wrong), and no example database
# written into the checkout. HYPOTHESIS_PROFILE=thorough searches 5x wider, with fresh examples.
settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True, database=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
