"""The book's tiny GPT (chapter 10): one recipe, and one small committed checkpoint of it.

Chapter 10 trains a character-level GPT on the first 100,000 characters of Genesis in a
few seconds. ``train_tiny_gpt`` is that recipe as a function (same corpus slice, config,
seed and training settings). ``save_tiny_gpt`` writes a model and its tokenizer to one
``.safetensors`` file (the config and the vocabulary travel in the file's metadata);
``load_tiny_gpt`` reads it back. The weights of one run ship with attnlib
(``attnlib/weights/tiny_gpt_genesis.safetensors``), so the live page, its tests and the
chapter use the same numbers on every CPU (training on another CPU changes the last
bits).

Regenerate the committed file (only when the recipe changes)::

    python -m attnlib.tiny_gpt
"""
from __future__ import annotations

import json
from dataclasses import asdict, replace
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Union

import torch

from .config import TransformerConfig
from .lora import LoRALinear, merge_lora
from .models import GPT
from .tokenizers import CharTokenizer
from .pretrained._common import MissingEntry, load_exact

__all__ = ["TINY_GPT_RECIPE", "train_tiny_gpt", "save_tiny_gpt", "load_tiny_gpt",
           "TINY_GPT_FILE"]

# Chapter 10's settings, in one place (the chapter can read them from here).
TINY_GPT_RECIPE: dict[str, Any] = {
    # the corpus slice
    "books": ("Genesis",), "max_chars": 100_000,
    # the model (other fields: defaults)
    "d_model": 64, "n_heads": 4, "n_layers": 2, "max_len": 64,
    # seed_everything(seed) before GPT(cfg)
    "seed": 0,
    # attnlib.train
    "steps": 1000, "batch_size": 32, "block_size": 64, "lr": 6e-3, "data_seed": 0,
}
TINY_GPT_FILE = "tiny_gpt_genesis.safetensors"
_FORMAT = "attnlib.tiny_gpt/1"
PathLike = Union[str, Path]


def train_tiny_gpt(steps: Optional[int] = None, *,
                   threads: int = 1) -> tuple[GPT, CharTokenizer, list[float]]:
    """Rebuild chapter 10's model: the Genesis slice, a CharTokenizer, GPT(cfg) seeded,
    attnlib.train.

    Args:
        steps: training steps (default: the recipe's, 1000).
        threads: torch CPU threads while training (the chapter trains on 1).

    Returns:
        (model in eval mode, tokenizer, the loss of every step).
    """
    from .data import load_corpus
    from .train import train
    from .utils import seed_everything

    r = TINY_GPT_RECIPE
    text = load_corpus(r["books"], max_chars=r["max_chars"])
    tok = CharTokenizer.from_text(text)
    data = torch.tensor(tok.encode(text))  # (N,) the whole slice as one id sequence
    seed_everything(r["seed"])
    cfg = TransformerConfig(vocab_size=tok.vocab_size, d_model=r["d_model"],
                            n_heads=r["n_heads"], n_layers=r["n_layers"], max_len=r["max_len"])
    model = GPT(cfg)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        history = train(model, data, steps=r["steps"] if steps is None else steps,
                        batch_size=r["batch_size"], block_size=r["block_size"], lr=r["lr"],
                        generator=torch.Generator().manual_seed(r["data_seed"]))
    finally:
        torch.set_num_threads(before)
    return model.eval(), tok, history


def save_tiny_gpt(model: GPT, tokenizer: CharTokenizer, path: PathLike, *,
                  extra: Optional[dict[str, str]] = None) -> Path:
    """Write ``model``'s weights (float32), its config and the tokenizer's vocabulary to ``path``.

    Args:
        model: an attnlib.GPT; tokenizer: the CharTokenizer it was trained with.
        path: the ``.safetensors`` file to write; extra: more metadata strings (e.g. the
            final loss).
    Returns:
        The path written.
    """
    from safetensors.torch import save_file

    if not isinstance(model, GPT):
        raise TypeError(f"model must be an attnlib.GPT, got {type(model).__name__}")
    if not isinstance(tokenizer, CharTokenizer):
        raise TypeError(f"tokenizer must be an attnlib.CharTokenizer, "
                        f"got {type(tokenizer).__name__}")
    if tokenizer.vocab_size != model.cfg.vocab_size:
        raise ValueError(f"tokenizer has {tokenizer.vocab_size} entries but the model's "
                         f"vocab_size is {model.cfg.vocab_size}")
    for i, c in enumerate(tokenizer.itos):
        _check_utf8("tokenizer", c, f"its vocabulary (id {i})")
    if any(isinstance(m, LoRALinear) for m in model.modules()):
        model = merge_lora(model)  # the file holds plain GPT weights: the adapters folded in
    # a head tied in the config but not in fact (an adapter merged into it) is stored on its own
    tied = model.cfg.tie_weights and model.lm_head.weight is model.embed.tok_emb.weight
    cfg = replace(model.cfg, tie_weights=tied) if tied != model.cfg.tie_weights else model.cfg
    # tied weights are one tensor: store it once (lm_head.weight is rebuilt by GPT(cfg))
    state = {k: v.detach().to("cpu", torch.float32).contiguous()
             for k, v in model.state_dict().items()
             if not (tied and k == "lm_head.weight")}
    extra = {} if extra is None else extra
    if not isinstance(extra, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in extra.items()):
        raise TypeError(f"extra must be a dict of str to str (safetensors metadata), "
                        f"got {extra!r}")
    clash = sorted({"format", "config", "vocab"} & set(extra))
    if clash:
        raise ValueError(f"extra may not set {clash}: the file's own metadata "
                         f"(the model and its vocabulary)")
    for k, v in extra.items():
        _check_utf8("extra", k + v, f"the entry {k!r}: {v!r}")
    meta = {"format": _FORMAT, "config": json.dumps(asdict(cfg), sort_keys=True),
            "vocab": json.dumps(tokenizer.itos, ensure_ascii=False), **extra}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path), metadata=meta)
    _sort_metadata(path)  # the same model and tokenizer: the same bytes
    return path


def _check_utf8(name: str, text: str, where: str) -> None:
    """The file's metadata is UTF-8: a lone surrogate (half of a UTF-16 pair) has no UTF-8 form."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name}: {where} holds a lone surrogate {text[e.start]!r}, which is not "
                         f"a character and cannot be stored in the file's UTF-8 metadata; build "
                         f"{name} from text without it, e.g. text.encode('utf-8', 'replace')"
                         f".decode('utf-8')") from None


def load_tiny_gpt(path: Optional[PathLike] = None) -> tuple[GPT, CharTokenizer]:
    """Read a file written by ``save_tiny_gpt`` (default: the checkpoint shipped with attnlib).

    Returns:
        (model in eval mode, float32 on the CPU; its CharTokenizer).
    """
    from safetensors import safe_open
    from safetensors.torch import load_file

    if path is None:
        path = resources.files(__package__).joinpath("weights", TINY_GPT_FILE)
    path = Path(str(path))
    if not path.is_file():
        raise FileNotFoundError(f"no tiny-GPT checkpoint at {path}; write one with save_tiny_gpt")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        state = load_file(str(path))
    except Exception as e:
        # safetensors' own SafetensorError: the header or the data do not add up
        raise ValueError(f"{path} is truncated or damaged: safetensors could not read it "
                         f"({e})") from None
    if meta.get("format") != _FORMAT:
        raise ValueError(f"{path} is not a tiny-GPT checkpoint (format {meta.get('format')!r}, "
                         f"expected {_FORMAT!r})")
    for key in ("config", "vocab"):
        if key not in meta:
            raise MissingEntry(f"{path} has no {key!r} entry in its metadata; "
                               f"write it with save_tiny_gpt")
    try:
        cfg = TransformerConfig(**json.loads(meta["config"]))
        vocab = json.loads(meta["vocab"])
    except (TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: the metadata's config or vocabulary cannot be read "
                         f"({e})") from None
    if not (isinstance(vocab, list) and all(isinstance(c, str) for c in vocab)
            and len(set(vocab)) == len(vocab)):  # a repeated character would have two ids
        raise ValueError(f"{path}: the vocabulary must be a list of distinct characters, "
                         f"got {vocab!r:.200}")
    tok = CharTokenizer(vocab)  # checks that the entries are single characters
    # id i is the character it was trained as: keep the file's order (CharTokenizer sorts)
    tok.itos, tok.stoi = list(vocab), {c: i for i, c in enumerate(vocab)}
    if tok.vocab_size != cfg.vocab_size:
        raise ValueError(f"{path}: the vocabulary has {tok.vocab_size} characters but the "
                         f"model's config has vocab_size={cfg.vocab_size}")
    model = GPT(cfg)
    if cfg.tie_weights and "embed.tok_emb.weight" in state:
        state["lm_head.weight"] = state["embed.tok_emb.weight"]
    load_exact(model, state, str(path))
    return model.eval(), tok


def _sort_metadata(path: Path) -> None:
    """Rewrite the file's header with its metadata in sorted order (safetensors writes its
    metadata, a hash map, in an order that changes from run to run): one model, one file, byte
    for byte."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")  # the header's length, then the JSON header
    header = json.loads(raw[8:8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(text) > n:  # the same keys and values: never longer
        raise RuntimeError(f"{path}: the sorted header is longer than "
                           f"safetensors' ({len(text)} > {n})")
    path.write_bytes(raw[:8] + text + b" " * (n - len(text)) + raw[8 + n:])


def main() -> None:
    """Train with the recipe and rewrite the committed checkpoint
    (``python -m attnlib.tiny_gpt``)."""
    model, tok, history = train_tiny_gpt()
    final = sum(history[-20:]) / 20
    out = Path(__file__).with_name("weights") / TINY_GPT_FILE
    save_tiny_gpt(model, tok, out, extra={"final_loss_mean_last_20": f"{final:.4f}",
                                          "torch": torch.__version__})
    print(f"wrote {out} ({out.stat().st_size} bytes); mean loss of the last 20 steps {final:.4f}")


if __name__ == "__main__":
    main()
