"""Shared test setup: one CPU thread (the CI box has two cores shared by many jobs),
``@pytest.mark.gpu`` tests skipped where CUDA is unavailable, and the hypothesis profiles of the
property-based tests."""
from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(1)

# Property-based tests (hypothesis): "ci", the default, keeps the whole property suite to well
# under a minute on 2 cores: a bounded number of examples, derandomized (the same examples every
# run, so CI cannot flake), no deadline (a loaded machine is slow, not wrong), and no example
# database written into the checkout. HYPOTHESIS_PROFILE=thorough searches 20x wider, randomly.
settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True, database=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=600, deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
