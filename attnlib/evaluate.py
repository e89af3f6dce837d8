"""Held-out loss of a next-token model by position (``loss_by_position``), what each key
writes through each attention head (``head_output_norms``), heads switched off
(``heads_off``: the ablation that tests what a head is for), and what a decoder would predict
after each of its layers (``logit_lens``).

Chapter 11 compares position schemes on the same held-out text, and asks what happens to a model
past the context length it was trained on; both need the mean cross-entropy at each position
``t`` of a window (the prediction of token ``t + 1`` from tokens ``0..t``). Evaluation only: no
gradients, the model's train/eval mode is restored.
"""
from __future__ import annotations

import contextlib
from typing import Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import as_int
from .mha import MultiHeadAttention
from .mla import MultiHeadLatentAttention
from .models import GPT


def loss_by_position(model: nn.Module, ids: Tensor, block_size: int, *,
                     batch_size: int = 64) -> Tensor:
    """Mean next-token cross-entropy at each position of non-overlapping windows of ``ids``.

    The 1-D corpus ``ids`` is cut into ``n = (len(ids) - 1) // block_size`` windows of
    ``block_size + 1`` tokens that share one token at each boundary (window ``w`` starts at
    ``w * block_size``); the model reads ``block_size`` tokens of each and predicts the next
    ``block_size``. Every window starts from position 0 (no cache, no carried state).

    Args:
        model: maps input ids (B, T) to logits (B, T, V), directly or as ``.logits``
            (e.g. :class:`attnlib.GPT`).
        ids: a 1-D tensor of token ids with at least ``block_size + 1`` of them.
        block_size: T, the window length the model reads (a GPT's ``max_len`` must allow it).
        batch_size: windows per forward pass (memory only; the result does not depend on it).

    Shapes:
        ids (N,) -> result (block_size,)

    Returns:
        A float32 tensor: entry ``t`` is the cross-entropy (nats) of predicting token ``t + 1``,
        averaged over the ``n`` windows. Its mean is the held-out loss over all positions.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (e.g. attnlib.GPT), "
                        f"got {type(model).__name__}")
    if not isinstance(ids, Tensor):
        raise TypeError(f"ids must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise TypeError(f"ids must be an integer tensor, got dtype {ids.dtype}")
    if ids.dim() != 1:
        raise ValueError(f"ids must be a 1-D corpus of token ids, got shape {tuple(ids.shape)}")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    if ids.numel() < block_size + 1:
        raise ValueError(f"ids has {ids.numel()} tokens, fewer than block_size + 1 = "
                         f"{block_size + 1}; pass more text or a smaller block_size")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    n = (ids.numel() - 1) // block_size
    starts = torch.arange(n) * block_size                                  # (n,)
    index = starts[:, None] + torch.arange(block_size + 1)[None, :]        # (n, T + 1)
    params = list(model.parameters())
    windows = ids[index].to(params[0].device if params else ids.device)   # (n, T + 1)
    total = torch.zeros(block_size, dtype=torch.float64)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for chunk in windows.split(batch_size):                        # (b, T + 1)
                out = model(chunk[:, :-1])
                logits = out.logits if hasattr(out, "logits") else out     # (b, T, V)
                loss = F.cross_entropy(logits.float().transpose(1, 2), chunk[:, 1:],
                                       reduction="none")                   # (b, T)
                total += loss.sum(0).double().cpu()
    finally:
        model.train(was_training)
    return (total / n).float()


def head_output_norms(attn: nn.Module, x: Tensor) -> Tensor:
    """How much each key can write through each head: ``||W_O,h v_j||`` (Kobayashi et al., 2020).

    An attention layer's output is ``sum_h sum_j alpha_hij W_O,h v_hj`` plus the output bias, where
    ``v_hj`` is key j's value in head h (with grouped-query attention, the value head that query
    head h reads) and ``W_O,h`` the (C, D) columns of the output projection that belong to head h.
    The weight ``alpha_hij`` says how much of that vector is taken; this returns its length, so
    ``alpha_hij * norms[b, h, j]`` is how much key j actually adds to query i's output.

    Args:
        attn: an :class:`attnlib.MultiHeadAttention` (self-attention; for cross-attention pass
            the memory the keys and values come from).
        x: the input its values are computed from, (B, T, C): for a pre-norm layer the
            normalised stream (a forward pre-hook on the attention module sees it).

    Shapes:
        x (B, T, C) -> (B, H, T): one length per head and key.
    """
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"attn must be an attnlib.MultiHeadAttention, got {type(attn).__name__}")
    attn.check_input("x", x)
    H, G, D = attn.n_heads, attn.n_kv_heads, attn.head_dim
    with torch.no_grad():
        v = attn.split_heads(attn.v_proj(x))                         # (B, G, T, D)
        v = v.repeat_interleave(H // G, dim=1)  # (B, H, T, D): head h reads h // (H / G)
        w_o = attn.out_proj.weight.view(-1, H, D)                    # (C, H, D): W_O,h = w_o[:, h]
        written = torch.einsum("bhtd,chd->bhtc", v, w_o)             # (B, H, T, C)
        return written.norm(dim=-1)                                  # (B, H, T)


@contextlib.contextmanager
def heads_off(model: nn.Module, heads: Iterable[tuple[int, int]]) -> Iterator[nn.Module]:
    """Switch attention heads off inside a ``with`` block: head h of layer l writes nothing.

    A forward pre-hook on ``model.layers[l].self_attn.out_proj`` (MLA's ``o_proj``, D its
    ``v_head_dim``) zeroes the D columns of head h in its input (the merged heads, (B, T, H * D)),
    which is the same as zeroing the D columns of ``W_O`` that belong to head h; the weights
    themselves are not touched. The hooks are removed when the block ends, also after an error.

    Args:
        model: a model whose ``layers[l].self_attn`` are :class:`attnlib.MultiHeadAttention` or
            :class:`attnlib.MultiHeadLatentAttention` (:class:`attnlib.GPT`,
            :class:`attnlib.Encoder`).
        heads: (layer, query head) pairs, counted from 0; may be empty.

    Yields:
        ``model`` itself.
    """
    layers = getattr(model, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(f"model must have .layers (an nn.ModuleList), got {type(model).__name__}")
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Iterable):
        raise TypeError(f"heads must be a list of (layer, head) pairs of ints, got {heads!r}")
    pairs = []
    for pair in heads:
        ints = tuple(as_int(i) for i in pair) if isinstance(pair, (tuple, list)) else ()
        if len(ints) != 2 or None in ints:  # numpy ints are fine, bools and floats are not
            raise TypeError(f"heads must be (layer, head) pairs of ints, got {pair!r}")
        layer, head = ints
        pairs.append(ints)
        attn = layers[layer].self_attn if 0 <= layer < len(layers) else None
        if attn is None or not 0 <= head < attn.n_heads:
            n_heads = layers[0].self_attn.n_heads
            raise ValueError(f"head {pair} is not in this model: layers 0..{len(layers) - 1}, "
                             f"heads 0..{n_heads - 1}")
    hooks = []
    try:
        for layer, head in pairs:
            attn = layers[layer].self_attn
            # the output projection W_O and the width of each head's block in its input
            mla = isinstance(attn, MultiHeadLatentAttention)
            w_o, width = (attn.o_proj, attn.v_head_dim) if mla else (attn.out_proj, attn.head_dim)
            cols = torch.arange(head * width, (head + 1) * width)
            hooks.append(w_o.register_forward_pre_hook(
                lambda mod, args, cols=cols: (args[0].index_fill(-1, cols.to(args[0].device), 0),)))
        yield model
    finally:
        for hook in hooks:
            hook.remove()


def logit_lens(model: GPT, input_ids: Tensor, *, logits_to_keep: int = 0) -> Tensor:
    """The logit lens (nostalgebraist, 2020): what a decoder would predict after each layer.

    The model's final norm and LM head are applied to the residual stream after the embedding
    and after each layer, as if the layers above it were not there. Forward hooks on
    ``model.embed`` and on each of ``model.layers`` read the stream during one ordinary forward
    of the model (heads switched off by ``heads_off`` stay off); they are removed afterwards,
    also after an error. Evaluation only: no gradients, the train/eval mode is restored.

    Args:
        model: an :class:`attnlib.GPT` (pre-norm: ``norm_f`` then ``lm_head``; post-norm: the
            stream is already normalised, ``lm_head`` alone).
        input_ids: (B, T) token ids, as for the model's forward.
        logits_to_keep: the lens at the last this many positions only (0 = all), as in
            ``GPT.forward``: with a large vocabulary, L + 1 rows of logits add up.

    Shapes:
        input_ids (B, T) -> (L + 1, B, T or logits_to_keep, vocab)

    Returns:
        Logits: row 0 after the embedding, row ``l + 1`` after layer ``l``; the last row is the
        model's own output.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model must be an attnlib.GPT, got {type(model).__name__}")
    keep = as_int(logits_to_keep)
    if keep is None:
        raise TypeError(f"logits_to_keep must be an int (0 = all), got {logits_to_keep!r}")
    if keep < 0:
        raise ValueError(f"logits_to_keep must be >= 0 (0 = all), got {keep}")
    stream: list[Tensor] = []  # (B, T, C) after the embedding, then after each layer
    hooks = [model.embed.register_forward_hook(lambda mod, args, out: stream.append(out))]
    hooks += [layer.register_forward_hook(lambda mod, args, out: stream.append(out[0]))
              for layer in model.layers]  # a layer returns (x, weights, ...)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(input_ids, logits_to_keep=1)  # checks input_ids; the stream is what we keep
            norm = model.norm_f if model.norm_f is not None else nn.Identity()
            last = slice(-keep, None) if keep else slice(None)
            return torch.stack([model.lm_head(norm(x[:, last])) for x in stream])
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
