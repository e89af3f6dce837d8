"""Device choice and seeding: the two lines at the top of every notebook."""
from __future__ import annotations

import random
from typing import Optional

import numpy as np
import torch


def default_device() -> torch.device:
    """The best available device: cuda, then mps, then cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0, *, threads: Optional[int] = None) -> torch.Generator:
    """Seed Python, NumPy and torch (all devices); optionally fix torch's CPU thread count.

    Returns a ``torch.Generator`` seeded with ``seed`` for code that wants its own stream.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds CUDA too
    if threads is not None:
        torch.set_num_threads(threads)
    return torch.Generator().manual_seed(seed)
