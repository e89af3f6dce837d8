"""Shared test setup: one CPU thread (the CI box has two cores shared by many jobs), and
``@pytest.mark.gpu`` tests skipped where CUDA is unavailable."""
from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
