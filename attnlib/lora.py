"""LoRA: a frozen linear layer plus a trainable low-rank correction (Hu et al., 2021).

A pre-trained ``nn.Linear`` with weight W (out, in) is kept frozen; two small matrices are
trained instead, A (r, in) and B (out, r), for a rank r much smaller than in and out:

    y = x W^T + b + (alpha / r) * x A^T B^T        (x: (..., in), y: (..., out))

B starts at zero, so the adapted layer starts equal to the pre-trained one; the correction
(alpha / r) B A has rank at most r and r * (in + out) numbers instead of in * out. After
training it can be folded into W (:meth:`LoRALinear.merged`, :func:`merge_lora`): the merged
layer is a plain ``nn.Linear`` again and costs nothing extra at inference. QLoRA (Dettmers et
al., 2023) is the same adapter on a base whose W is stored in 4 bits (NF4, see ``quant.py``).

Names follow Hugging Face PEFT: ``lora_A``, ``lora_B``, ``r``, ``alpha``, ``scaling``.

``LoRALinear.weight`` is the effective weight W + (alpha / r) B A, so code that reads a linear
layer's ``.weight`` (head norms, export to ``nn.MultiheadAttention`` or to the page) sees the
adapted layer. Adapters stack: :func:`add_lora` on a model that has some wraps each
``LoRALinear`` in another (the ones below are frozen), and :func:`merge_lora` folds them all.
"""
from __future__ import annotations

import copy
import math
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from ._checks import as_real, as_size, check_generator

__all__ = ["LoRALinear", "add_lora", "merge_lora"]


class LoRALinear(nn.Module):
    """``base(x) + (alpha / r) * x A^T B^T`` with ``base`` frozen and A, B trainable.

    Args:
        base: the pre-trained ``nn.Linear`` (kept as ``self.base``; its parameters are frozen),
            or a ``LoRALinear`` to stack a second adapter on the first (frozen too).
        r: the rank of the correction (1 <= r).
        alpha: the correction is scaled by ``alpha / r`` (default: alpha = r, a scale of 1).
        generator: seeds A's initial values (normal, std 1 / sqrt(in)); B starts at zero.

    Shapes:
        x (..., in) -> (..., out); lora_A (r, in), lora_B (out, r).
    """

    def __init__(self, base: nn.Linear, r: int, *, alpha: Optional[float] = None,
                 generator: Optional[torch.Generator] = None):
        super().__init__()
        if not isinstance(base, (nn.Linear, LoRALinear)):
            raise TypeError(f"base must be a torch.nn.Linear (or a LoRALinear, to stack adapters), "
                            f"got {type(base).__name__}")
        r = as_size("r", r)
        scale = float(r) if alpha is None else as_real(alpha)
        if scale is None:
            raise TypeError(f"alpha must be a number (or None for alpha = r), got alpha={alpha!r}")
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"alpha must be a finite number > 0, got alpha={alpha!r}")
        check_generator(generator)
        self.base = base.requires_grad_(False)
        self.r, self.alpha = r, scale
        w = base.weight.detach()  # only its device and dtype are read
        on = w.device if generator is None else generator.device  # a generator draws on its device
        a = torch.randn(r, base.in_features, generator=generator, device=on)
        self.lora_A = nn.Parameter(
            (a / math.sqrt(base.in_features)).to(w.device, w.dtype))            # (r, in)
        self.lora_B = nn.Parameter(
            torch.zeros(base.out_features, r, device=w.device, dtype=w.dtype))  # (out, r)

    @property
    def weight(self) -> Tensor:
        """The effective weight W + (alpha / r) B A, (out, in): what the layer multiplies by.

        A new tensor at each read (the adapters train), so code that reads ``.weight`` sees the
        adapted layer; writing into it changes nothing: the frozen W is ``self.base.weight``."""
        return self.base.weight + self.delta_weight()

    # the base layer's other attributes, so that code reading them (width checks) still works
    @property
    def bias(self) -> Optional[Tensor]:
        return self.base.bias

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    @property
    def scaling(self) -> float:
        return self.alpha / self.r

    def delta_weight(self) -> Tensor:
        """The correction in ``nn.Linear``'s layout: (alpha / r) B A, shape (out, in)."""
        return self.scaling * (self.lora_B @ self.lora_A)

    def forward(self, x: Tensor) -> Tensor:
        # x A^T is (..., r): the (out, in) correction is never formed
        return self.base(x) + self.scaling * ((x @ self.lora_A.T) @ self.lora_B.T)

    def merged(self) -> nn.Linear:
        """A new ``nn.Linear`` whose weight is W + (alpha / r) B A (the same outputs, one matmul);
        stacked adapters are all folded in."""
        with torch.no_grad():
            w = self.weight  # through every stacked adapter
            out = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None,
                            device=w.device, dtype=w.dtype)
            out.weight.copy_(w)
            if self.bias is not None:
                out.bias.copy_(self.bias)
        return out

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha:g}"


def _replace(model: nn.Module, name: str, new: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, new)


def add_lora(model: nn.Module, r: int, *, alpha: Optional[float] = None,
             where: Callable[[str], bool] = lambda name: True,
             generator: Optional[torch.Generator] = None) -> nn.Module:
    """A deep copy of ``model`` with every parameter frozen and every ``nn.Linear`` that
    ``where(name)`` picks wrapped in a :class:`LoRALinear`: only the adapters train.

    A layer that already is a ``LoRALinear`` gets a second adapter on top of it (under the same
    name; the first is frozen with the rest), never one inside it.

    Args:
        r, alpha: as :class:`LoRALinear`.
        where: picks linear layers by module name (e.g. ``lambda n: n.startswith("layers.")``).
        generator: seeds every A, in the order of ``named_modules()``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(where):
        raise TypeError(f"where must be callable as where(module_name), got {type(where).__name__}")
    copy_ = copy.deepcopy(model).requires_grad_(False)
    # the layer inside a LoRALinear is its frozen base: adapt the LoRALinear, not what it wraps
    inner = {id(m.base) for m in copy_.modules() if isinstance(m, LoRALinear)}
    picked = [(n, m) for n, m in copy_.named_modules()
              if isinstance(m, (nn.Linear, LoRALinear)) and id(m) not in inner and where(n)]
    if not picked:
        raise ValueError("where picked no nn.Linear of the model: there is nothing to adapt")
    if picked[0][0] == "":  # the model is one linear layer: there is no parent to put it in
        return LoRALinear(copy_, r, alpha=alpha, generator=generator)
    for name, linear in picked:
        _replace(copy_, name, LoRALinear(linear, r, alpha=alpha, generator=generator))
    return copy_


def merge_lora(model: nn.Module) -> nn.Module:
    """A deep copy of ``model`` with every :class:`LoRALinear` replaced by its merged
    ``nn.Linear`` (:meth:`LoRALinear.merged`, stacked adapters included): the same outputs, no
    adapters left."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    copy_ = copy.deepcopy(model)
    if isinstance(copy_, LoRALinear):
        return copy_.merged()
    merged: dict[int, nn.Linear] = {}  # one merged layer per adapter, also where it is shared
    done: list[str] = []
    for name, module in list(copy_.named_modules(remove_duplicate=False)):
        if not isinstance(module, LoRALinear) or any(name.startswith(d + ".") for d in done):
            continue  # an adapter inside one merged already is folded into it
        if id(module) not in merged:
            merged[id(module)] = module.merged()
        _replace(copy_, name, merged[id(module)])
        done.append(name)
    return copy_
