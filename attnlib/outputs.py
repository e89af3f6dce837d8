"""What the models return: :class:`ModelOutput`, and the language-model loss."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch.nn.functional as F
from torch import Tensor

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


def lm_loss(logits: Tensor, targets: Optional[Tensor]) -> Optional[Tensor]:
    """Mean cross-entropy of next-token ``logits`` (B, T, V) against ``targets`` (B, T), in float32;
    targets equal to IGNORE_INDEX (-100) are skipped. None without targets."""
    if targets is None:
        return None
    return F.cross_entropy(logits.float().flatten(0, -2), targets.long().flatten(),
                           ignore_index=IGNORE_INDEX)
