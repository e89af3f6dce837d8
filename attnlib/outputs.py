"""What the models return and the checks they share: ModelOutput, token-id validation, GPT-2
style initialisation, and the language-model loss (split from :mod:`attnlib.models`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import as_int, eager
from .norms import RMSNorm

IGNORE_INDEX = -100  # targets equal to this are left out of the loss (PyTorch's default)


@dataclass
class ModelOutput:
    """What a model returns. Fields a model does not compute are None.

    logits (B, T, vocab); loss: mean cross-entropy (scalar) when targets were given; attentions:
    list per layer of (B, H, T, T_total) when need_weights (decoder self-attention for
    EncoderDecoder); cross_attentions: list per layer of (B, H, T_tgt, T_src); hidden_states:
    the final hidden states (B, T, C); encoder_attentions: EncoderDecoder's encoder self-attention.
    """

    logits: Optional[Tensor] = None
    loss: Optional[Tensor] = None
    attentions: Optional[list[Tensor]] = None
    cross_attentions: Optional[list[Tensor]] = None
    hidden_states: Optional[Tensor] = None
    encoder_attentions: Optional[list[Tensor]] = None


def check_ids(name: str, ids: Any, vocab_size: int, max_len: int, past: int = 0) -> None:
    """Raise a clear error unless ``ids`` is a (B, T) integer tensor of valid ids that fits.

    The values (ids in range) are read in eager mode only: under torch.compile reading them
    would split the graph."""
    if not isinstance(ids, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor (torch.long), got dtype {ids.dtype}")
    if ids.dtype in (torch.uint16, torch.uint32, torch.uint64):  # torch has no min/max or lookup for these
        raise TypeError(f"{name} has dtype {ids.dtype}, which torch cannot look up; use torch.long "
                        "(int8, uint8, int16, int32 and int64 work)")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (B, T), got {tuple(ids.shape)}")
    if ids.numel() == 0:
        raise ValueError(f"{name} is empty, shape {tuple(ids.shape)}")
    if ids.device.type == "meta":
        raise ValueError(f"{name} is on the meta device (it has no values); move it to a real device")
    T = ids.shape[1]
    if past + T > max_len:
        held = f" plus {past} cached tokens = {past + T}" if past else ""
        raise ValueError(f"{name} has T={T} tokens{held}, more than the model's max_len={max_len}")
    if not eager():
        return
    wide = ids if ids.dtype == torch.long else ids.long()  # a scalar outside int16's range would wrap
    if bool(((wide < 0) | (wide >= vocab_size)).any()):  # one sync; the details only on failure
        lo, hi = int(ids.min()), int(ids.max())
        bad = lo if lo < 0 else hi
        raise ValueError(f"{name} contains token id {bad}, outside [0, vocab_size={vocab_size})")


def check_device(name: str, ids: Tensor, weight: Tensor) -> None:
    """Token ids on the device of the model's weights."""
    if ids.device != weight.device:
        raise ValueError(f"{name} is on {ids.device} but the model is on {weight.device}; move one of them, "
                         f"e.g. {name}.to({str(weight.device)!r}) or model.to({str(ids.device)!r})")


def check_keep(logits_to_keep: Any, targets: Optional[Tensor]) -> int:
    """``logits_to_keep`` as an int >= 0 (0 = every position; the loss needs every position)."""
    keep = as_int(logits_to_keep)
    if keep is None or keep < 0:
        raise ValueError(f"logits_to_keep must be an int >= 0 (0 = every position), got {logits_to_keep!r}")
    if keep and targets is not None:
        raise ValueError("the loss needs the logits of every position: pass logits_to_keep=0 with targets")
    return keep


def key_mask(attention_mask: Optional[Tensor], ids: Tensor, name: str) -> Optional[Tensor]:
    """HF attention_mask (B, T), 1 real / 0 pad -> bool (B, 1, 1, T), True = may attend."""
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, Tensor) or attention_mask.shape != ids.shape:
        shape = tuple(attention_mask.shape) if isinstance(attention_mask, Tensor) else type(attention_mask).__name__
        raise ValueError(f"{name} must have the shape of the ids {tuple(ids.shape)} (1 real, 0 pad), got {shape}")
    return (attention_mask != 0)[:, None, None, :].to(ids.device)  # (B, 1, 1, T)


def init_weights(module: nn.Module) -> None:
    """GPT-2 style: Linear and Embedding weights ~ N(0, 0.02), biases 0, LayerNorm 1 and 0.

    Small random logits at the start mean a near-uniform prediction: loss ~ ln(vocab_size)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
    elif isinstance(module, RMSNorm):
        nn.init.ones_(module.weight)


def lm_loss(logits: Tensor, targets: Optional[Tensor], vocab_size: int) -> Optional[Tensor]:
    """Mean cross-entropy over all target positions (targets == -100 are skipped), in float32."""
    if targets is None:
        return None
    if not isinstance(targets, Tensor) or targets.shape != logits.shape[:-1]:
        shape = tuple(targets.shape) if isinstance(targets, Tensor) else type(targets).__name__
        raise ValueError(f"targets must have the shape of the input ids {tuple(logits.shape[:-1])}, got {shape}")
    if targets.is_floating_point() or targets.dtype == torch.bool:
        raise TypeError(f"targets must be an integer tensor, got dtype {targets.dtype}")
    if eager(targets):  # the values, in eager mode (under torch.compile they would split the graph)
        real = targets != IGNORE_INDEX
        if not bool(real.any()):
            raise ValueError(f"every target is {IGNORE_INDEX} (skipped), so there is no token to compute a loss "
                             f"on (targets shape {tuple(targets.shape)}); leave at least one real target per batch")
        if bool((real & ((targets < 0) | (targets >= vocab_size))).any()):
            bad = targets[real & ((targets < 0) | (targets >= vocab_size))][0]
            raise ValueError(f"targets contain token id {int(bad)}, outside [0, vocab_size={vocab_size}) "
                             f"(or -100 to skip)")
    return F.cross_entropy(logits.float().flatten(0, -2), targets.long().flatten(), ignore_index=IGNORE_INDEX)
