"""Dropout's one rule: it acts while training, and never under torch.inference_mode().

``generate`` decodes under inference mode whatever the model's mode, so a model in training mode
generates without dropout and nothing has to switch its mode and put it back.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


def dropping(module: nn.Module) -> bool:
    """Does dropout act in ``module``? In training mode, outside torch.inference_mode() (which
    torch.compile cannot read: a compiled training step drops)."""
    inference = not torch.compiler.is_compiling() and torch.is_inference_mode_enabled()
    return module.training and not inference


def dropped(drop: nn.Dropout, x: Tensor) -> Tensor:
    """``drop(x)`` where dropout acts, else x itself without the call: decoding passes here for
    every token of every layer."""
    return drop(x) if drop.training and dropping(drop) else x
