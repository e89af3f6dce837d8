"""What every loader shares: reading safetensors, and copying a state dict into a model
exactly."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor


def read_safetensors(path: str | Path) -> dict[str, Tensor]:
    """All tensors of a ``.safetensors`` file, by name (safetensors' own reader: no pickle)."""
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except FileNotFoundError:
        raise
    except Exception as e:  # safetensors' SafetensorError: the header or the data do not add up
        raise ValueError(f"{path} is truncated or damaged: safetensors could not read it "
                         f"({e})") from None


class MissingEntry(KeyError, ValueError):
    """A tensor or a setting a conversion needs is not there. A ValueError (bad input) that is
    also a KeyError (a lookup that failed), printed as its message, not as a quoted key."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Settings(dict):
    """A model config read as a dict: a missing key is a ValueError that names it."""

    def __init__(self, config: Any, what: str) -> None:
        if not isinstance(config, dict):
            raise TypeError(f"the {what} must be a dict (e.g. config.to_dict()), "
                            f"got {type(config).__name__}")
        super().__init__(config)
        self.what = what

    def __getitem__(self, key: str) -> Any:
        if key not in self:
            raise MissingEntry(f"the {self.what} has no {key!r}; it needs it to build the model")
        return super().__getitem__(key)


class Used(dict):
    """A state dict that remembers which names were read, so that leftovers can be reported."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Tensor:
        self.read.add(key)
        if key not in self:  # a ValueError that names the tensor, not a bare KeyError
            raise MissingEntry(f"the checkpoint has no tensor {key!r}: it is incomplete, or of "
                               f"another architecture or naming ({len(self)} tensors, "
                               f"e.g. {sorted(self)[:3]})")
        return super().__getitem__(key)

    def check_all_used(self, source: str) -> None:
        left = sorted(set(self) - self.read)
        if left:
            raise ValueError(f"{source} has parameters attnlib has no place for: {left[:5]} "
                             f"({len(left)} in all)")


def load_exact(model: torch.nn.Module, state: dict[str, Tensor], source: str, *,
               assign: bool = False) -> None:
    """Copy ``state`` into ``model``; every parameter must be covered and every shape must
    agree.

    With ``assign=True`` the model takes the given tensors instead of copying them (no
    second copy in memory; ``model`` may live on the meta device), and parameters the model
    shares, such as a tied LM head, are shared again afterwards."""
    own = model.state_dict()
    wrong = sorted(k for k, v in state.items() if not isinstance(v, Tensor))
    if wrong:
        raise TypeError(f"{source} -> {type(model).__name__}: {wrong[:5]} are not tensors "
                        f"(got {type(state[wrong[0]]).__name__})")
    missing = sorted(k for k in own if k not in state)
    unexpected = sorted(k for k in state if k not in own)
    if missing or unexpected:
        raise ValueError(f"{source} -> {type(model).__name__}: parameters missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    for k, v in state.items():
        if own[k].shape != v.shape:
            raise ValueError(f"{source} -> {type(model).__name__}: {k} has shape "
                             f"{tuple(own[k].shape)} but the source gives {tuple(v.shape)}")
        if own[k].is_floating_point() and not v.is_floating_point():
            raise TypeError(f"{source} -> {type(model).__name__}: {k} is a weight, but the "
                            f"source gives a {v.dtype} tensor; is the checkpoint read correctly?")
    if not assign:
        model.load_state_dict({k: v.to(own[k].dtype) for k, v in state.items()}, strict=True)
        return
    shared = _shared_names(model)
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in state.items()}, strict=True,
                          assign=True)
    for name, first in shared:  # assign gives each name its own Parameter: tie them again
        owner, _, attr = name.rpartition(".")
        setattr(model.get_submodule(owner), attr, model.get_parameter(first))


def _shared_names(model: torch.nn.Module) -> list[tuple[str, str]]:
    """(name, first name) for each parameter that is the same object as an earlier-named one."""
    first: dict[int, str] = {}
    pairs = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            pairs.append((name, first[id(p)]))
        else:
            first[id(p)] = name
    return pairs


def final_norm_and_head(out: dict[str, Tensor], hf: Any, a: dict[str, str], tied: bool,
                        what: str) -> None:
    """A Llama-family decoder's last two pieces into ``out``: the final RMSNorm and the LM head
    (``lm_head.weight``, or the embedding when the config ties them; neither is refused)."""
    out[f"{a['norm_f']}.weight"] = hf["model.norm.weight"]
    if "lm_head.weight" in hf:
        out[a["head"]] = hf["lm_head.weight"]
    elif tied:
        out[a["head"]] = hf["model.embed_tokens.weight"]
    else:
        raise ValueError(f"the {what} checkpoint has no lm_head.weight and the config does not "
                         "tie embeddings (tie_word_embeddings=False)")
