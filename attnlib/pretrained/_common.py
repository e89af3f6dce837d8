"""What every loader shares: reading safetensors, and copying a state dict into a model exactly."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor


def read_safetensors(path: str | Path) -> dict[str, Tensor]:
    """All tensors of a ``.safetensors`` file, by name (safetensors' own reader: no pickle)."""
    from safetensors.torch import load_file

    return load_file(str(path))


class Used(dict):
    """A state dict that remembers which names were read, so that leftovers can be reported."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Tensor:
        self.read.add(key)
        return super().__getitem__(key)

    def check_all_used(self, source: str) -> None:
        left = sorted(set(self) - self.read)
        if left:
            raise ValueError(f"{source} has parameters attnlib has no place for: {left[:5]} ({len(left)} in all)")


def load_exact(model: torch.nn.Module, state: dict[str, Tensor], source: str) -> None:
    """Copy ``state`` into ``model``; every parameter must be covered and every shape must agree."""
    own = model.state_dict()
    missing = sorted(k for k in own if k not in state)
    unexpected = sorted(k for k in state if k not in own)
    if missing or unexpected:
        raise ValueError(f"{source} -> {type(model).__name__}: parameters missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    for k, v in state.items():
        if own[k].shape != v.shape:
            raise ValueError(f"{source} -> {type(model).__name__}: {k} has shape {tuple(own[k].shape)} "
                             f"but the source gives {tuple(v.shape)}")
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in state.items()}, strict=True)
