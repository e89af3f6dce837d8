"""The bottom of every model: token vectors plus position vectors (and BERT's extras).

A token id picks a row of ``tok_emb``; an additive positional scheme (learned or sinusoidal,
:mod:`attnlib.positional`) adds the row of its position. RoPE adds nothing here: it turns the
queries and keys inside attention instead.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from ._checks import checking
from .checks import check_id_values
from .config import TransformerConfig
from .dropout import dropped
from .norms import make_norm
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


class Embeddings(nn.Module):
    """Token vectors plus (additive) position vectors, optionally token types and a LayerNorm.

    Attributes (weight names that loaders rely on): ``tok_emb`` (vocab, C); ``pos_emb`` a
    LearnedPositionalEmbedding (``.weight`` (max_len, C)), a SinusoidalPositionalEncoding, or
    None for "rope"/"none"; ``type_emb`` (type_vocab_size, C) or None; ``norm`` (the config's
    ``norm`` kind) or None.

    Shapes:
        input_ids (B, T) long, positions (T,) long, token_type_ids (B, T) long -> (B, T, C).
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.positional == "learned":
            self.pos_emb: Optional[nn.Module] = LearnedPositionalEmbedding(cfg.max_len,
                                                                          cfg.d_model)
        elif cfg.positional == "sinusoidal":
            self.pos_emb = SinusoidalPositionalEncoding(cfg.max_len, cfg.d_model)
        else:  # "rope" rotates q/k inside attention; "none" has no positions at all
            self.pos_emb = None
        types, C = cfg.type_vocab_size, cfg.d_model
        self.type_emb = nn.Embedding(types, C) if types > 0 else None  # BERT's segments
        self.norm = make_norm(cfg.norm, C, cfg.layer_norm_eps) if cfg.embedding_norm else None
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, input_ids: Tensor, positions: Tensor,
                token_type_ids: Optional[Tensor] = None) -> Tensor:
        if checking():
            self.check_input(input_ids, positions, token_type_ids)
        if input_ids.dtype not in (torch.long, torch.int32):  # nn.Embedding reads only these
            input_ids = input_ids.long()
        x = self.tok_emb(input_ids)  # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb(positions)  # (T, C) broadcasts over the batch
        if self.type_emb is not None:
            types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
            x = x + self.type_emb(types.long())
        if self.norm is not None:
            x = self.norm(x)
        return dropped(self.drop, x)

    def check_input(self, input_ids: Tensor, positions: Tensor,
                    token_type_ids: Optional[Tensor]) -> None:
        check_id_values("input_ids", input_ids, self.tok_emb.num_embeddings)  # floats: truncated
        if positions.shape != input_ids.shape[-1:]:
            raise ValueError(f"positions must be (T,) = {tuple(input_ids.shape[-1:])}, one per "
                             f"token of input_ids {tuple(input_ids.shape)}; got "
                             f"{tuple(positions.shape)}")
        if token_type_ids is not None and self.type_emb is None:
            raise ValueError("token_type_ids given, but these Embeddings have no token-type table "
                             "(the config's type_vocab_size is 0)")
        if token_type_ids is not None and token_type_ids.shape != input_ids.shape:
            raise ValueError(f"token_type_ids must have input_ids' shape {tuple(input_ids.shape)}, "
                             f"got {tuple(token_type_ids.shape)}")
        if token_type_ids is not None:
            check_id_values("token_type_ids", token_type_ids, self.type_emb.num_embeddings)
