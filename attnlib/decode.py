"""A GPT's cached forward pass with the per-call Python taken out, for ``GPT.generate``.

``GPT.forward`` checks its inputs, ties the cache to the model, makes each step undoable and goes
through ``nn.Module.__call__`` about twenty times per layer. For a big model that is nothing next
to reading the weights; for a small one it is most of the time of a decode step. ``generate``
validates its inputs once, owns its cache and samples ids that are in range by construction, so
for a plain :class:`attnlib.GPT` it runs each step through :class:`FastDecoder`: the same weights
and the same arithmetic without the module calls, with the fused q/k/v matmul, the RoPE rows
(looked up once per step), ``KVCache.update`` and ``F.scaled_dot_product_attention`` spelled
out. It returns the logits of the last position only (the only ones sampling reads), so the
prompt's pass does not multiply every prompt token by the LM head. For a model larger than a
last-level cache (``kernels.CACHE_BYTES``), whose one-token steps read every weight from memory,
it lets oneDNN take smaller products than elsewhere (``kernels.MIN_MACS_STREAMED``), and on x86
CPUs its one-token steps multiply by transposed copies of the weights, W^T (in, out), with which
one token's products read the weights at close to the memory's rate: cut into column blocks for
the embedding bag (``kernels.RowBlocks``), or on Intel CPUs whole and contiguous, multiplied by
MKL (:class:`_RowProduct`; ``STREAMED_ROWS`` says which). Those copies cost the model's size in
memory once more; they are built at the first decode and kept on the model while it stays in
eval mode, its parameters do not change and the thread count stays the same (``model.train()``
drops them; ``kernels.USE_ROWS = False`` stops the use of the bags, ``USE_PLAIN_ROWS = False``
that of the contiguous copies). Prompts and batches use the module's own weights.

A model within the caches gets plain copies instead: each matrix of a one-token step transposed
and contiguous, W^T (in, out), with its biases stacked alongside (:class:`_RowProduct`, float32
on the CPU), each product one ``addmm``. For one row MKL reads W^T faster than W (3.0 against
4.4 us for 128 x 384 on the book's Intel VM, and ``F.linear`` adds another 0.5 us); with the
lean step below, a tiny model's (4 layers, d = 128) one-token step went from 570 to 443 us (ad
hoc). These copies also cost the model's size once more (at most ``kernels.CACHE_BYTES``), and
are kept and dropped like the others (``USE_PLAIN_ROWS = False`` stops their use).

With either copies, a step of one token for one sequence (every step after the prompt) takes
``FastDecoder._row_step``: each product is one embedding-bag call (``kernels.RowBlocks``) whose
bias streams in with the weight as one more row weighted by 1 (or one ``addmm``), q, k and v
are views of one product's output, and there is no mask and no positions tensor. In a large
model those ops run right after a product has streamed megabytes of weights through the CPU
caches, which evicts the code and data they need: on GPT-2 small the ~0.5 ms they take warm
cost ~1.4 ms in a real step (``python -m benchmarks --only coldops``), so each op saved counts
several times (in a paired A/B the row step took 0.96 of the general step's time on one
thread, 0.93 on two; see the notes on the benchmarks page).

It is used only where it cannot differ from ``model(ids, cache=cache)``: exactly an
``attnlib.GPT`` (not a subclass) built from attnlib's own layers, in eval mode, with no forward
hooks anywhere and no ``forward`` replaced on an instance. Otherwise ``generate`` keeps calling
the model. The tests compare the two paths for every layout switch (pre/post-norm,
LayerNorm/RMSNorm, GELU/SwiGLU, learned/sinusoidal/RoPE positions, GQA, biases).
"""
from __future__ import annotations

import math
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import causal_mask
from .cache import KVCache, cache_spec
from . import kernels
from .kernels import Linear, linear
from .layers import _GELU, DecoderLayer, Embeddings, FeedForward, activate
from .mha import MultiHeadAttention
from .norms import RMSNorm
from .positional import LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding

_NORMS = (nn.LayerNorm, RMSNorm)
_POS = (type(None), LearnedPositionalEmbedding, SinusoidalPositionalEncoding)
# one-token steps of a model within the caches through contiguous W^T copies (_RowProduct)
USE_PLAIN_ROWS: bool = True


def _cpu_vendor() -> str:
    """The CPU's vendor string from /proc/cpuinfo ("GenuineIntel", "AuthenticAMD"; "" elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


# The one-token products of a model larger than the caches: "bags" (kernels.RowBlocks, the
# embedding bag) or "mm" (_RowProduct: MKL's product on contiguous W^T). On an Intel Xeon VM
# (480 MiB L3) "mm" read the weights ~12% faster and made a GPT-2-small step 0.91 of the bags'
# time (one and two threads, ad hoc); on the AMD machines of earlier rounds the bags were the
# fastest of the kernels timed there (oneDNN and F.linear; "mm" was not timed), so they stay
# the choice elsewhere. ``python -m benchmarks --only fastpaths`` times both.
STREAMED_ROWS: str = "mm" if _cpu_vendor() == "GenuineIntel" else "bags"


def _hooked(model: nn.Module) -> bool:
    """Does anything expect to see the modules called: a forward hook (global or on a submodule)
    or a ``forward`` replaced on an instance (``module.forward = ...``)?"""
    g = nn.modules.module
    if g._global_forward_hooks or g._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks or "forward" in m.__dict__ for m in model.modules())


def _plain_layer(layer: Any) -> bool:
    """A GPT block exactly as attnlib.layers builds it (nothing swapped in)."""
    if not (type(layer) is DecoderLayer and layer.cross_attn is None
            and type(layer.self_attn) is MultiHeadAttention and type(layer.ffn) is FeedForward
            and type(layer.norm1) in _NORMS and type(layer.norm3) in _NORMS):
        return False
    mha, ffn = layer.self_attn, layer.ffn
    linears = (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj, ffn.fc1, ffn.fc2, ffn.gate)
    if (ffn.gate is None) != (ffn.activation != "swiglu"):
        return False
    return all(type(m) is Linear for m in linears if m is not None)


class _Norm:
    """A LayerNorm or RMSNorm with its parameters fetched once (``nn.Module`` attribute lookups
    cost about a microsecond each)."""

    def __init__(self, norm: nn.Module) -> None:
        self.rms = type(norm) is RMSNorm
        self.forward = norm.forward if self.rms else None
        if self.rms:
            self.args = ((norm.dim,), norm.weight, norm.eps)
            self.zero = torch.zeros(())  # for row(): float32 CPU rows only
        else:
            self.args = (norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def __call__(self, x: Tensor) -> Tensor:
        if self.rms:
            return self.forward(x)
        shape, w, b, eps = self.args
        return torch.layer_norm(x, shape, w, b, eps)  # F.layer_norm without its Python wrapper

    def row(self, x: Tensor) -> Tensor:
        """The norm of one float32 CPU row x (1, C), for :meth:`FastDecoder._row_step`. RMSNorm
        in three ops instead of ``torch.rms_norm``'s eight (pow, mean, add, rsqrt, ...): the sum
        of squares as one dot product, read as a Python float (no sync on the CPU), the scale
        1 / sqrt(mean + eps) in double precision, and x * w * scale as one ``addcmul``. Equal to
        the module's to float32 rounding (tested); on SmolLM2's 61 norms per step, ~1 ms less
        (ad hoc, one thread; 3.7 against 8.3 us warm for a row of 576). LayerNorm is one op
        already."""
        if not self.rms:
            return self(x)
        shape, w, eps = self.args
        v = x.view(-1)
        scale = 1.0 / math.sqrt(float(torch.dot(v, v)) / v.shape[0] + eps)
        return torch.addcmul(self.zero, x, w, value=scale)  # 0 + scale * x * w


def _has_biases(model: Any) -> bool:
    """Does any of the layers' linear maps have a bias (GPT-2: all; Llama: none)?"""
    return any(m is not None and m.bias is not None for layer in model.layers
               for m in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                         layer.self_attn.out_proj, layer.ffn.fc1, layer.ffn.gate, layer.ffn.fc2))


def _step_groups(model: Any) -> list[list[tuple[Tensor, Optional[Tensor]]]]:
    """Per matrix of a one-token step, in its order, the maps it stacks as (weight (out, in),
    bias or None): per layer q/k/v, out, fc1 with the gate (if any) under it, fc2; then the LM
    head."""
    groups = []
    for layer in model.layers:
        mha, ffn = layer.self_attn, layer.ffn
        groups.append([(m.weight, m.bias) for m in (mha.q_proj, mha.k_proj, mha.v_proj)])
        groups.append([(mha.out_proj.weight, mha.out_proj.bias)])
        groups.append([(m.weight, m.bias) for m in (ffn.fc1, ffn.gate) if m is not None])
        groups.append([(ffn.fc2.weight, ffn.fc2.bias)])
    groups.append([(model.lm_head.weight, None)])  # (vocab, C), bias-free
    return groups


def _held_copies(model: Any, kind: str, build: Any) -> list:
    """The copies ``build(model)`` makes, kept on the model (``model.__dict__["_transposed"]``,
    not a parameter nor in the state dict) while every parameter keeps its version counter and
    storage (as ``MultiHeadAttention.fused_qkv`` does), the thread count stays the same and
    ``kind`` is the same; ``GPT.train()`` drops them."""
    params = kernels.params_key(list(model.parameters()))  # None: made under inference_mode
    key = None if params is None else (kind, params, torch.get_num_threads())
    held = model.__dict__.get("_transposed")
    if held is None or key is None or held[0] != key:
        model.__dict__["_transposed"] = None  # free the stale copies before building new ones
        with torch.no_grad():
            held = model.__dict__["_transposed"] = (key, build(model))
    return held[1]


def _transposed_weights(model: Any) -> list[kernels.RowBlocks]:
    """W^T of every matrix a one-token step multiplies by (:func:`_step_groups`), as
    :class:`kernels.RowBlocks` (column blocks for the embedding bag): per layer q/k/v stacked
    as one (C -> C + 2 G D), out, fc1 (with a gate, SwiGLU's, stacked under it as one, C -> 2 F:
    both read the same input), fc2; then the LM head (C -> vocab). In a model
    with biases each layer's matrix carries its bias as one more row (zeros where a map has none),
    which streams in with the weight. All of them lie in one block of memory that Linux may back
    with 2 MiB pages (``kernels.huge_page_empty``). Kept as :func:`_held_copies` says (the
    blocks are shared out among the threads)."""
    return _held_copies(model, "bags", _build_row_blocks)


def _build_row_blocks(model: Any) -> list[kernels.RowBlocks]:
    rows = _has_biases(model)
    groups = _step_groups(model)
    threads = torch.get_num_threads()
    dims = [(g[0][0].shape[1], sum(w.shape[0] for w, _ in g), rows and i < len(groups) - 1)
            for i, g in enumerate(groups)]  # (in, out, bias row)
    # one block of memory that Linux may back with 2 MiB pages: read faster at every step
    tables = kernels.huge_page_empty([kernels.RowBlocks.shape(*d, threads) for d in dims],
                                     model.lm_head.weight.dtype)
    mats = [kernels.RowBlocks(t, *d, threads) for t, d in zip(tables, dims)]
    for m, g in zip(mats, groups):
        m.fill(g)
    return mats


def _plain_rows_ok(x: Tensor) -> bool:
    """May a one-token step send the row x through :class:`_RowProduct` (float32 on the CPU, as
    the copies; ``USE_PLAIN_ROWS`` read at each call; not under autocast, nor while torch.compile
    traces)?"""
    return (USE_PLAIN_ROWS and x.dtype == torch.float32 and x.device.type == "cpu"
            and not torch.compiler.is_compiling() and not torch.is_autocast_enabled("cpu"))


class _RowProduct:
    """One row x (1, in) times a weight held transposed and contiguous, W^T (in, out), plus the
    bias: one ``addmm`` (``mm`` without a bias). For one row MKL's product reads W^T's rows in
    order; with the module's W (out, in) it takes its transposed-operand path, ~1.4 us slower
    per call for 128 x 384 on the book's Intel VM, and ``F.linear`` adds ~0.5 us of its own."""

    __slots__ = ("wt", "bias", "n_in", "n_out")

    def __init__(self, group: list[tuple[Tensor, Optional[Tensor]]], table: Optional[Tensor] = None) -> None:
        wt = torch.cat([w for w, _ in group]).t()  # (in, out)
        self.wt = wt.contiguous() if table is None else table.copy_(wt)
        self.n_in, self.n_out = self.wt.shape
        self.bias = None
        if any(b is not None for _, b in group):  # zeros where a stacked map has none
            self.bias = torch.cat([w.new_zeros(w.shape[0]) if b is None else b for w, b in group])

    def __call__(self, x: Tensor) -> Tensor:
        if self.bias is None:
            return torch.mm(x, self.wt)
        return torch.addmm(self.bias, x, self.wt)


def _transposed_plain(model: Any) -> list[_RowProduct]:
    """The matrices of :func:`_step_groups` as :class:`_RowProduct`: contiguous W^T with the
    stacked bias, for the one-token steps of a model that fits in the caches. Kept as
    :func:`_held_copies` says."""
    return _held_copies(model, "mm", _build_plain)


def _build_plain(model: Any) -> list[_RowProduct]:
    groups = _step_groups(model)
    shapes = [(g[0][0].shape[1], sum(w.shape[0] for w, _ in g)) for g in groups]  # (in, out)
    # one block of memory that Linux may back with 2 MiB pages (plain tensors below one page)
    tables = kernels.huge_page_empty(shapes, model.lm_head.weight.dtype)
    return [_RowProduct(g, t) for g, t in zip(groups, tables)]


def _rotate_rolled(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """``RotaryEmbedding.rotate(x, cos, sin)`` bit for bit, in four ops instead of seven:
    rotate_half(x) = (-x2, x1) is the halves swapped, (x2, x1), times (-1, +1), so with
    ``signed_sin`` = (-sin, +sin) on the two halves (exact) the products are the same numbers.
    x (..., D); cos, signed_sin (..., D), broadcast."""
    return x * cos + x.roll(x.shape[-1] // 2, -1) * signed_sin


class _Layer:
    """One GPT block's weights for the decode loop: the module's own (with the q/k/v stack
    ``fused_qkv`` keeps), multiplied by ``kernels.linear``, and for a model whose one-token
    steps take transposed copies, ``rows``: its :class:`kernels.RowBlocks` or
    :class:`_RowProduct` (q/k/v, out, fc1 with the gate stacked under it where there is one,
    fc2), from an iterator over :func:`_transposed_weights` or :func:`_transposed_plain`."""

    def __init__(self, layer: DecoderLayer, transposed: Optional[Any] = None) -> None:
        mha, ffn = layer.self_attn, layer.ffn
        self.norm_first = layer.norm_first
        self.norm1, self.norm3 = _Norm(layer.norm1), _Norm(layer.norm3)
        self.heads, self.kv_heads, self.head_dim = mha.n_heads, mha.n_kv_heads, mha.head_dim
        self.activation = ffn.activation
        self.linear = linear
        self.qkv = mha.fused_qkv()  # (C + 2 G D, C) and its bias, as the module keeps them
        self.out = (mha.out_proj.weight, mha.out_proj.bias)
        self.fc1, self.fc2 = (ffn.fc1.weight, ffn.fc1.bias), (ffn.fc2.weight, ffn.fc2.bias)
        self.gate = None if ffn.gate is None else (ffn.gate.weight, ffn.gate.bias)
        self.rows = None
        if transposed is not None:
            self.rows = (next(transposed), next(transposed), next(transposed), next(transposed))

    def ffn(self, x: Tensor, m: Optional[int]) -> Tensor:
        lin = self.linear
        approximate = _GELU.get(self.activation)
        if approximate is not None:  # the GELU inside oneDNN's product where oneDNN runs it
            return lin(kernels.linear_gelu(x, *self.fc1, approximate, m), *self.fc2, m)
        gate = None if self.gate is None else lin(x, *self.gate, m)
        return lin(activate(self.activation, lin(x, *self.fc1, m), gate), *self.fc2, m)


class FastDecoder:
    """Cached decoding steps of one GPT (see the module docstring).

    Build it with :meth:`for_model`, which returns None where the fast path could differ from the
    model's own forward. :meth:`step` runs ``ids`` (B, T) after the ``cache.seq_len`` tokens the
    cache holds, appends their keys and values, and returns the next-token logits (B, vocab) of
    the last position. The weights are fetched when it is built: build a new one after changing
    the model (``generate`` builds one per call). ``transposed``: whether its one-token steps
    multiply by transposed copies cut for the embedding bag (a model larger than the caches,
    float32 on an x86 CPU, ``STREAMED_ROWS`` "bags"); ``plain_rows``: whether they multiply by
    contiguous W^T copies instead (float32 on the CPU, a model within the caches or
    ``STREAMED_ROWS`` "mm"); ``bias_rows``: whether the bag copies hold the biases as a last row.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        # a model larger than a last-level cache streams its weights from memory at every step,
        # where oneDNN pays off for smaller products and transposed weights stream faster
        # (see attnlib.kernels)
        self.streamed = sum(p.numel() * p.element_size() for p in model.parameters()) > kernels.CACHE_BYTES
        self.transposed = (self.streamed and STREAMED_ROWS == "bags"
                           and all(kernels.rows_available(p) for p in model.parameters()))
        # otherwise (a model within the caches, or STREAMED_ROWS "mm"): one-token steps multiply
        # by contiguous W^T copies, one addmm each (_RowProduct), through the same lean step
        self.plain_rows = ((not self.streamed or STREAMED_ROWS == "mm") and USE_PLAIN_ROWS
                           and all(p.dtype == torch.float32 and p.device.type == "cpu" for p in model.parameters()))
        mats = (iter(_transposed_weights(model)) if self.transposed
                else iter(_transposed_plain(model)) if self.plain_rows else None)
        # the layers' copies carry their biases as a last row (GPT-2; not Llama, which has none)
        self.bias_rows = self.transposed and _has_biases(model)
        self.layers = [_Layer(layer, mats) for layer in model.layers]
        self.norm_f = None if model.norm_f is None else _Norm(model.norm_f)
        self.head = model.lm_head.weight  # (vocab, C), bias-free
        # one-token steps (see _row_step): the LM head's copy
        self.head_rows = next(mats) if mats is not None else None
        self.linear = linear
        self.spec = cache_spec(model)
        self._signs: dict = {}  # RoPE's sign rows for _row_step, per (device, dtype)
        embed = model.embed  # Embeddings.forward is token row + position row (see _embed_one)
        self._plain_embed = (embed.norm is None and embed.tok_emb.max_norm is None and not embed.training
                             and type(embed.pos_emb) in _POS)

    def matrices(self) -> list[tuple[_Layer, Tensor, Optional[Tensor]]]:
        """(layer, weight, bias) of every layer product a step makes, in its order (q/k/v stacked,
        out, fc1, the gate, fc2), the LM head (``self.head``) not included."""
        return [(layer, w, b) for layer in self.layers
                for w, b in (p for p in (layer.qkv, layer.out, layer.fc1, layer.gate, layer.fc2) if p)]

    def row_products(self) -> list:
        """The products a one-token step calls (:class:`kernels.RowBlocks` or
        :class:`_RowProduct`), in its order, the LM head's last
        (empty where the step keeps the general path)."""
        if self.head_rows is None:
            return []
        return [r for layer in self.layers for r in layer.rows if r is not None] + [self.head_rows]

    @property
    def token_min_macs(self) -> Optional[int]:
        """The oneDNN bound of a one-token step's products (None: ``kernels.MIN_MACS``)."""
        return kernels.MIN_MACS_STREAMED if self.streamed else None

    @classmethod
    def for_model(cls, model: Any) -> Optional["FastDecoder"]:
        from .models import GPT  # models imports generation, which imports this module

        if type(model) is not GPT or model.training or _hooked(model) or torch.is_grad_enabled():
            return None
        embed = model.embed
        if type(embed) is not Embeddings or type(embed.pos_emb) not in _POS or embed.type_emb is not None:
            return None
        for norm in (embed.norm, model.norm_f):
            if norm is not None and type(norm) not in _NORMS:
                return None
        if model.rope is not None and type(model.rope) is not RotaryEmbedding:
            return None
        if type(model.lm_head) is not Linear or model.lm_head.bias is not None:
            return None
        if not all(_plain_layer(layer) for layer in model.layers):
            return None
        return cls(model)

    def _attend(self, layer: _Layer, h: Tensor, cache: KVCache, i: int, past: int,
                rope: Optional[tuple[Tensor, Tensor]], m: Optional[int]) -> Tensor:
        """Self-attention of h (B, T, C) over the held tokens and itself -> (B, T, C)."""
        B, T, C = h.shape
        G, D = layer.kv_heads, layer.head_dim
        lin = layer.linear
        q, k, v = lin(h, *layer.qkv, m).split([C, G * D, G * D], dim=-1)  # one matmul
        q = q.view(B, T, -1, D).transpose(1, 2)  # (B, H, T, D)
        k = k.view(B, T, G, D).transpose(1, 2)  # (B, G, T, D)
        v = v.view(B, T, G, D).transpose(1, 2)
        if rope is not None:  # the cos/sin rows of this step's positions, looked up once per step
            cos, sin = rope
            q, k = RotaryEmbedding.rotate(q, cos, sin), RotaryEmbedding.rotate(k, cos, sin)
        k, v = cache.update(i, k, v)  # (B, G, past + T, D): written in place into reserved room
        if past == 0 or T == 1:  # the prompt (lower triangle), or one new token (sees everything)
            mask, causal = None, T > 1
        else:  # T new tokens after `past` held ones: lower-right aligned triangle
            mask, causal = causal_mask(T, past + T, device=h.device), False
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                             enable_gqa=G != layer.heads)  # (B, H, T, D)
        return lin(out.transpose(1, 2).reshape(B, T, C), *layer.out, m)

    def _embed_one(self, ids: Tensor, past: int) -> Tensor:
        """The embedding (1, C) of one token ids (1, 1) at position ``past``: what
        ``Embeddings.forward`` computes (token row + position row; dropout is off in eval mode),
        with the position checked as an int instead of as a tensor (no reductions, no syncs)."""
        embed = self.model.embed
        if not self._plain_embed:
            return embed.forward(ids, torch.arange(past, past + 1, device=ids.device)).view(1, -1)
        x = F.embedding(ids.view(1), embed.tok_emb.weight)  # (1, C)
        pos = embed.pos_emb
        if pos is None:
            return x
        if past >= pos.max_len:  # as the position modules word it
            raise ValueError(f"position {past} is out of range for max_len={pos.max_len}")
        table = pos.weight if type(pos) is LearnedPositionalEmbedding else pos.pe
        return x + table[past].to(x.dtype)

    def _rope_sign(self, like: Tensor) -> Tensor:
        """(1, D): -1 on the first half, +1 on the second (kept per device and dtype)."""
        held = self._signs.get((like.device, like.dtype))
        if held is None:
            D = like.shape[-1]
            held = torch.ones(1, D, device=like.device, dtype=like.dtype)
            held[:, :D // 2] = -1
            self._signs[(like.device, like.dtype)] = held
        return held

    def _row_step(self, x: Tensor, cache: KVCache, past: int) -> Tensor:
        """The logits (1, vocab) after one token x (1, C) at position ``past`` (B = T = 1, a
        float32 CPU row with the RowBlocks or _RowProduct copies; ``step`` checked that every
        product may take them). The same arithmetic as the general path in fewer ops, each of
        which costs several times its warm time here, right after a product has streamed
        megabytes of weights through the caches: no mask (one new token sees every held one),
        q/k/v as views of the one product, each product one call (the bias streamed in or
        added by addmm), q and k rotated together (:func:`_rotate_rolled`), RMSNorm in three ops
        (:meth:`_Norm.row`), and with GQA each key/value head's query heads attending as its
        queries. On SmolLM2 (30 layers, RMSNorm, RoPE, 9 / 3 heads) these three took the ops
        around the products from ~8.6 to ~5.7 ms per step (ad hoc, one thread)."""
        rope = self.model.rope
        if rope is not None:  # the cos/sin rows (1, D) of this position
            cos, sin = rope.cos_sin(past + 1, x.device, x.dtype)
            cos, sin = cos[past:past + 1], sin[past:past + 1]
            sin = sin * self._rope_sign(sin)  # (-sin, +sin) on the two halves: _rotate_rolled
        C = x.shape[-1]
        for i, layer in enumerate(self.layers):
            H, G, D = layer.heads, layer.kv_heads, layer.head_dim
            qkv, out, fc1, fc2 = layer.rows  # fc1: with the gate stacked under it, if any
            h = layer.norm1.row(x) if layer.norm_first else x
            y = qkv(h)  # (1, C + 2 G D): one token's q, k, v
            if rope is not None:  # q and k rotated in one go, as H + G heads side by side in y
                qk = _rotate_rolled(y[:, :C + G * D].view(1, H + G, 1, D), cos, sin)
                q, k = qk[:, :H], qk[:, H:]
                v = y[:, C + G * D:].view(1, G, 1, D)
            elif G == H:  # (1, H, 1, D) each: for one token, views of y
                q, k, v = y.view(3, 1, H, 1, D)
            else:
                q, k, v = y.split([C, G * D, G * D], dim=-1)
                q, k, v = q.view(1, H, 1, D), k.view(1, G, 1, D), v.view(1, G, 1, D)
            k, v = cache.update(i, k, v)  # (1, G, past + 1, D)
            if G == H:
                a = F.scaled_dot_product_attention(q, k, v)  # (1, H, 1, D)
            else:  # each key/value head's H / G query heads as its H / G queries, in head order
                # (h = g H/G + j): one pass over each head's keys and values instead of H / G
                # (17.9 -> 13.8 us for SmolLM2's 9 / 3 heads over 170 tokens, one thread)
                a = F.scaled_dot_product_attention(q.reshape(1, G, H // G, D), k, v)  # (1, G, H/G, D)
            a = out(a.reshape(1, C))  # (1, C)
            x = x + a if layer.norm_first else layer.norm1.row(x + a)
            h = layer.norm3.row(x) if layer.norm_first else x
            u = fc1(h)  # (1, F), or (1, 2 F): fc1's outputs, then the gate's
            if layer.gate is None:
                f = fc2(activate(layer.activation, u, None))
            else:
                F2 = u.shape[-1] // 2
                f = fc2(activate(layer.activation, u[:, :F2], u[:, F2:]))
            x = x + f if layer.norm_first else layer.norm3.row(x + f)
        if self.norm_f is not None:
            x = self.norm_f.row(x)
        return self.head_rows(x)  # (1, vocab)

    @torch.no_grad()
    def step(self, ids: Tensor, cache: KVCache) -> Tensor:
        """Logits (B, vocab) of the last of ``ids`` (B, T), run after the cached tokens."""
        if cache.seq_len == 0:
            cache.bind(self.spec)  # as GPT.forward does: the cache now belongs to this model
        past = cache.seq_len
        B, T = ids.shape
        x = None
        if self.head_rows is not None and B * T == 1:  # one token: one row through the copies
            x = self._embed_one(ids, past)  # (1, C)
            # every product takes the embedding bag (or addmm): checked once here, not in each
            if kernels.rows_call_ok(x) if self.transposed else _plain_rows_ok(x):
                return self._row_step(x, cache, past)
            x = x.view(1, 1, -1)
        positions = torch.arange(past, past + T, device=ids.device)
        if x is None:
            x = self.model.embed.forward(ids, positions)  # (B, T, C)
        # oneDNN from this many multiply-adds (None: kernels.MIN_MACS)
        m = self.token_min_macs if T == 1 else None
        rope = self.model.rope
        if rope is not None:  # (T, D) each
            rope = rope.rows(positions, T, x.device, x.dtype)
        for i, layer in enumerate(self.layers):
            if layer.norm_first:  # x + f(norm(x))
                x = x + self._attend(layer, layer.norm1(x), cache, i, past, rope, m)
                x = x + layer.ffn(layer.norm3(x), m)
            else:  # norm(x + f(x))
                x = layer.norm1(x + self._attend(layer, x, cache, i, past, rope, m))
                x = layer.norm3(x + layer.ffn(x, m))
        x = x[:, -1]  # (B, C): only the last position's logits are sampled from
        if self.norm_f is not None:
            x = self.norm_f(x)
        return self.linear(x, self.head, None, m)  # (B, vocab)
