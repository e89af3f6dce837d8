"""The doors: what each public entry point of a model refuses, checked once before it runs.

``GPT.forward`` calls :func:`check_forward` and ``GPT.generate`` :func:`check_generate`; inside,
the layers trust what they are handed (:class:`attnlib._checks.trusted`). Every message names the
argument and says the fix.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import torch
from torch import Tensor
from torch.fx.node import has_side_effect

from ._checks import as_int, as_real, check_flag, check_generator, checking, eager
from .cache import KVCache
from .config import TransformerConfig


def check_config(cfg: Any) -> None:
    """A model is built from a valid TransformerConfig, fields edited after it was made included."""
    if not isinstance(cfg, TransformerConfig):
        raise TypeError(f"cfg must be an attnlib.TransformerConfig, got {type(cfg).__name__}")
    cfg.validate()


ID_DTYPES = (torch.long, torch.int32, torch.int16, torch.int8, torch.uint8)  # nn.Embedding reads


def check_ids(name: str, ids: Any, vocab_size: int, max_len: int, past: int = 0,
              device: Optional[torch.device] = None) -> None:
    """``ids`` is a (B, T) integer tensor of ids in [0, vocab_size) that fits after ``past`` (and
    lies on the model's ``device``, when given)."""
    usual = isinstance(ids, Tensor) and ids.dtype in ID_DTYPES and ids.dim() == 2 and ids.numel()
    if not usual or past + ids.shape[1] > max_len or (device is not None and ids.device != device):
        _ids_error(name, ids, max_len, past, device)
    (ids_in_range if torch.compiler.is_compiling() else _ids_in_range)(ids, vocab_size, name)


def check_id_values(name: str, ids: Any, vocab_size: int) -> None:
    """``ids`` has an integer dtype and every id lies in [0, vocab_size) (its shape is the
    caller's to check): what a table lookup needs, where no model checked at the door."""
    if not isinstance(ids, Tensor) or ids.dtype not in ID_DTYPES:
        got = f"dtype {ids.dtype}" if isinstance(ids, Tensor) else type(ids).__name__
        raise TypeError(f"{name} must be an integer tensor (torch.long), got {got}")
    (ids_in_range if torch.compiler.is_compiling() else _ids_in_range)(ids, vocab_size, name)


def _ids_in_range(ids: Tensor, vocab_size: int, name: str) -> None:
    """Every id in [0, vocab_size): one read of the values (none for a meta tensor)."""
    if ids.device.type != "meta" and bool(((ids < 0) | (ids.long() >= vocab_size)).any()):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise ValueError(f"{name} contains token id {bad}, outside [0, vocab_size={vocab_size})")


# Under torch.compile the same check is an operator the compiler keeps but cannot look into: it
# reads the values when the compiled graph runs, so a compiled model refuses a bad id with the
# same ValueError, with no graph break (a read of the values in traced code would split the graph).
ids_in_range = torch.library.custom_op("attnlib::ids_in_range", mutates_args=())(_ids_in_range)
ids_in_range.register_fake(lambda ids, vocab_size, name: None)
has_side_effect(torch.ops.attnlib.ids_in_range.default)  # returns nothing, yet must not be dropped


def _ids_error(name: str, ids: Any, max_len: int, past: int, device: Any) -> None:
    """What :func:`check_ids` found wrong with ``ids``, said plainly."""
    if not isinstance(ids, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor (torch.long), got dtype {ids.dtype}")
    if ids.dtype not in ID_DTYPES:  # uint16, uint32, uint64: torch cannot look these up
        raise TypeError(f"{name} has dtype {ids.dtype}, which torch cannot look up; use torch.long "
                        "(int8, uint8, int16, int32 and int64 work)")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (B, T), got {tuple(ids.shape)}")
    if ids.numel() == 0:
        raise ValueError(f"{name} is empty, shape {tuple(ids.shape)}")
    if ids.device.type == "meta":
        raise ValueError(f"{name} is on the meta device (it has no values); move it to a real "
                         f"device")
    if past + ids.shape[1] > max_len:
        held = f" plus {past} cached tokens = {past + ids.shape[1]}" if past else ""
        raise ValueError(f"{name} has T={ids.shape[1]} tokens{held}, more than the model's "
                         f"max_len={max_len}")
    check_device(name, ids, device)



def check_device(name: str, ids: Tensor, device: torch.device) -> None:
    """Token ids on the device of the model's weights."""
    if ids.device != device:
        raise ValueError(f"{name} is on {ids.device} but the model is on {device}; move one of "
                         f"them, e.g. {name}.to({str(device)!r}) or model.to({str(ids.device)!r})")


def check_targets(targets: Any, ids: Tensor, vocab_size: int, ignore_index: int = -100) -> None:
    """Next-token targets: the ids' shape, integer, each in [0, vocab_size) or ``ignore_index``."""
    if not isinstance(targets, Tensor) or targets.shape != ids.shape:
        shape = tuple(targets.shape) if isinstance(targets, Tensor) else type(targets).__name__
        raise ValueError(f"targets must have the shape of the input ids {tuple(ids.shape)}, "
                         f"got {shape}")
    if targets.is_floating_point() or targets.dtype == torch.bool:
        raise TypeError(f"targets must be an integer tensor, got dtype {targets.dtype}")
    if not eager(targets):  # the values: in eager mode only
        return
    real = targets != ignore_index
    if not bool(real.any()):
        raise ValueError(f"every target is {ignore_index} (skipped), so there is no token to "
                         f"compute a loss on; leave at least one real target per batch")
    bad = real & ((targets < 0) | (targets >= vocab_size))
    if bool(bad.any()):
        raise ValueError(f"targets contain token id {int(targets[bad][0])}, outside "
                         f"[0, vocab_size={vocab_size}) (or {ignore_index} to skip)")


def check_keep(logits_to_keep: Any, targets: Any) -> int:
    """``logits_to_keep`` as an int >= 0 (0 = every position; the loss needs every position)."""
    keep = as_int(logits_to_keep)
    if keep is None or keep < 0:
        raise ValueError(f"logits_to_keep must be an int >= 0 (0 = every position), "
                         f"got {logits_to_keep!r}")
    if keep and targets is not None:
        raise ValueError("the loss needs the logits of every position: pass logits_to_keep=0 with "
                         "targets")
    return keep


def check_cache(cache: Any) -> None:
    """A ``cache`` argument is an attnlib.KVCache or None."""
    if cache is not None and not isinstance(cache, KVCache):
        raise TypeError(f"cache must be an attnlib.KVCache or None, got {type(cache).__name__}; "
                        f"make one with attnlib.KVCache()")


def check_forward(model: Any, input_ids: Any, targets: Any, cache: Any, need_weights: Any,
                  logits_to_keep: Any) -> None:
    """Everything GPT.forward is given; the cache records the model and batch it serves."""
    if not checking():
        return
    check_cache(cache)
    cfg, past, w = model.cfg, (cache.seq_len if cache is not None else 0), model.lm_head.weight
    check_ids("input_ids", input_ids, cfg.vocab_size, cfg.max_len, past, w.device)
    keep = logits_to_keep
    if type(need_weights) is not bool or type(keep) is not int or keep < 0 or targets is not None:
        check_flag("need_weights", need_weights)
        check_keep(logits_to_keep, targets)
        if targets is not None:
            check_targets(targets, input_ids, model.cfg.vocab_size)
    if cache is not None:
        cache.check_model(model, input_ids.shape[0])


def check_sampling(temperature: Any, top_k: Any, top_p: Any = None,
                   generator: Any = None) -> tuple[float, Optional[int], Optional[float]]:
    """The sampling settings as plain numbers: temperature >= 0 (0 = greedy), top_k >= 1 or None,
    top_p in (0, 1] or None."""
    t = as_real(temperature)
    if t is None:
        raise TypeError(f"temperature must be a number >= 0 (0 means greedy), got {temperature!r}")
    if not t >= 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature}")
    if top_k is not None and (as_int(top_k) is None or as_int(top_k) < 1):
        raise ValueError(f"top_k must be a positive int or None, got {top_k!r}")
    if top_p is not None and (as_real(top_p) is None or not 0 < as_real(top_p) <= 1):
        raise ValueError(f"top_p must be a number in (0, 1] or None (1 keeps every token), "
                         f"got top_p={top_p!r}")
    check_generator(generator)
    return t, as_int(top_k), None if top_p is None else as_real(top_p)


def check_generate(model: Any, input_ids: Any, max_new_tokens: Any, temperature: Any, top_k: Any,
                   top_p: Any, use_cache: Any,
                   generator: Any) -> tuple[int, float, Optional[int], Optional[float]]:
    """Everything GPT.generate is given. Returns (max_new_tokens, temperature, top_k, top_p)."""
    check_ids("input_ids", input_ids, model.cfg.vocab_size, model.cfg.max_len, 0,
              model.lm_head.weight.device)
    n = check_max_new_tokens(max_new_tokens, input_ids.shape[1], model.cfg.max_len)
    check_flag("use_cache", use_cache)
    return (n, *check_sampling(temperature, top_k, top_p, generator))


def check_max_new_tokens(max_new_tokens: Any, prompt_len: int, max_len: int) -> int:
    """max_new_tokens as an int that fits after the prompt."""
    n = as_int(max_new_tokens)
    if n is None or n < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if prompt_len + n > max_len:
        raise ValueError(f"prompt length {prompt_len} + max_new_tokens {n} = {prompt_len + n} "
                         f"exceeds the model's max_len={max_len}")
    return n


def check_logits_shape(logits: Any) -> None:
    """Next-token logits: V >= 1 real scores along the last dim, (..., V), usually (B, V)."""
    if not isinstance(logits, Tensor):
        raise TypeError(f"logits must be a torch.Tensor of shape (B, V), got "
                        f"{type(logits).__name__}")
    if logits.dim() < 1 or logits.shape[-1] < 1:
        raise ValueError(f"logits must have shape (..., V) with V >= 1 scores, usually (B, V) (the "
                         f"last position's scores, e.g. out.logits[:, -1]), got "
                         f"{tuple(logits.shape)}")
    if logits.dtype == torch.bool or logits.is_complex():
        raise TypeError(f"logits must be real numbers (float, or int scores), got dtype "
                        f"{logits.dtype}")
    if logits.device.type == "meta":
        raise ValueError("logits are on the meta device (they have no values to sample from)")


def check_finite(top: Tensor) -> None:
    """The largest logit of each row (N,), or of each row at each decoding step (B, steps): NaN
    where a row holds a NaN, +inf where it holds +inf, -inf where every token is -inf. One read
    for all of them, after the loop."""
    if bool(torch.isfinite(top).all()):
        return
    where = (~torch.isfinite(top)).nonzero()[0].tolist()  # the first broken (row, step)
    value = float(top[tuple(where)])
    at = f"row {where[0]}" + (f", step {where[1]}" if len(where) > 1 else "")
    if math.isnan(value) or value > 0:
        raise ValueError(f"logits contain {'NaN' if math.isnan(value) else '+inf'} ({at}); the "
                         "model's output is broken (NaN/inf weights or inputs, or an overflow in "
                         "half precision)")
    raise ValueError(f"{at} has no finite logit (every token is -inf): nothing to pick from")


class LogitWatch:
    """The logits of a decoding loop, checked for NaN and inf once, after it (:func:`check_finite`):
    a check at each step would read a value back to the host, which stops a GPU at every token.
    ``add`` only holds a step's logits (B, 1, V); every ``fold`` steps they shrink to each row's
    largest logit on the device, so the watch never holds more than ``fold`` steps of logits (a
    view holds its whole base: hand it a copy of a slice of larger logits)."""

    fold = 64

    def __init__(self) -> None:
        self.held: list[Tensor] = []  # the latest steps' logits, (B, 1, V) each
        self.tops: list[Tensor] = []  # (B, steps): each row's largest logit at each step

    def add(self, logits: Tensor) -> None:
        self.held.append(logits)
        if len(self.held) == self.fold:
            self._shrink()

    def check(self) -> None:
        if self.held:
            self._shrink()
        if self.tops:
            check_finite(torch.cat(self.tops, dim=1))  # (B, steps): one read for the whole loop

    def _shrink(self) -> None:
        self.tops.append(torch.cat(self.held, dim=1).amax(dim=-1))  # (B, steps held)
        self.held = []


def check_attention_mask(attention_mask: Any, ids: Tensor, name: str) -> Optional[Tensor]:
    """A Hugging Face attention_mask (B, T), 1 real / 0 pad, as bool (B, 1, 1, T), True = may
    attend (None stays None)."""
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, Tensor) or attention_mask.shape != ids.shape:
        shape = (tuple(attention_mask.shape) if isinstance(attention_mask, Tensor)
                 else type(attention_mask).__name__)
        raise ValueError(f"{name} must have the shape of the ids {tuple(ids.shape)} (1 real, 0 "
                         f"pad), got {shape}")
    if attention_mask.dtype != torch.bool and eager(attention_mask):  # a 0/1 mask: what else?
        odd = attention_mask[(attention_mask != 0) & (attention_mask != 1)]
        if odd.numel():  # e.g. an additive mask (0 = attend, -inf = hide): read as 0/1 inverted
            raise ValueError(f"{name} holds 1 for a real token and 0 for padding, got the value "
                             f"{odd[0].item()}; for an additive mask (0 = attend, -inf = hide) "
                             f"pass ({name} == 0).long()")
    return (attention_mask != 0)[:, None, None, :].to(ids.device)  # (B, 1, 1, T)


def check_special_ids(vocab_size: int, bos_id: Any, eos_id: Any) -> tuple[int, Optional[int]]:
    """bos_id and eos_id (None: no end token) as token ids of the vocabulary."""
    for name, tok in (("bos_id", bos_id), ("eos_id", eos_id)):
        if tok is None and name == "eos_id":
            continue
        if as_int(tok) is None:  # numpy ints are fine
            raise TypeError(f"{name} must be an int token id, got {type(tok).__name__} {tok!r}")
        if not 0 <= as_int(tok) < vocab_size:
            raise ValueError(f"{name}={as_int(tok)} is outside [0, vocab_size={vocab_size})")
    return as_int(bos_id), None if eos_id is None else as_int(eos_id)
