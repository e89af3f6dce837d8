"""Which matmul kernel runs a linear layer on the CPU.

``torch.nn.functional.linear`` on a CPU float32 tensor calls the BLAS PyTorch was built with
(Intel MKL in the pip wheels). PyTorch also ships oneDNN, whose kernels are generated for the
CPU at hand. On the AMD EPYC machines the book is built and tested on, oneDNN computes a
GPT-2-small-sized matmul in about half of MKL's time (measured in ``benchmarks/fastpaths.py``,
reported on the benchmarks page), and reads the weights faster when decoding one token.

:func:`linear` therefore uses oneDNN for large float32 matmuls on the CPU when no gradient is
needed (evaluation, generation), and ``F.linear`` everywhere else: under autograd (oneDNN's
entry point has no backward), on a GPU, in other dtypes, under autocast, inside a dispatch mode
such as ``FlopCounterMode`` (which counts the standard matmul ops only), while ``torch.compile``
traces (it chooses its own kernels), and for small matmuls,
where oneDNN's fixed cost per call (10 to 20 microseconds) is more than it saves. The two agree
to float32 rounding (the order of the additions differs), which the tests check.

Where "small" ends depends on where the weight is. With operands in the CPU caches (a small
model, or a weight reused across many rows) oneDNN overtook MKL from about 2^20 multiply-adds
on the book's machine (``MIN_MACS``). A decode step of a model larger than the last-level cache
reads every weight from memory, and there oneDNN's matrix-vector product was faster from about
2^17 (``MIN_MACS_STREAMED``): :class:`attnlib.decode.FastDecoder` passes that bound for such
models (see ``CACHE_BYTES``).

``USE_ONEDNN`` switches the oneDNN path off for the whole process (the benchmarks compare both).

One row times a weight streamed from memory (a decode step of a model larger than the caches) is
a different problem: every weight is read once and used for one multiply-add, so the time is the
time to read the weight. The kernels above compute each output as a dot product of a weight row
with x (the layout ``nn.Linear`` keeps, W (out, in)). On the book's machine, for GPT-2 small's
768 -> 2304 product on one thread, oneDNN's reads the weight at 0.67 and MKL's at 0.42 of the
rate at which a plain sum reads the same bytes. Stored transposed, W^T (in, out), the product is
a weighted sum of W^T's rows (x_0 times row 0, plus x_1 times row 1, ...), and PyTorch's
embedding-bag kernel (fbgemm's, on x86 builds) computes exactly that: "look up these rows, scale
each by its weight, add them up". fbgemm keeps the running sums in vector registers, so
:class:`RowMatrix` cuts W^T into column blocks that fit there (``ROW_BLOCK`` columns) and stores
each block contiguously: one bag per block then reads its block front to back exactly once, and
threads take whole blocks. A bias is one more row of each block, weighted by 1, so it streams in
with the weight instead of being read by a separate addition. It was the fastest of the three for
every streamed shape measured, on one and two threads (``benchmarks/crossover.py``);
:class:`attnlib.decode.FastDecoder` holds such copies of a large model's weights for one-token
steps (``USE_ROWS`` switches them off).
"""
from __future__ import annotations

import platform
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# x86-64 builds of PyTorch ship oneDNN with this entry point; elsewhere F.linear is used.
_HAS_ONEDNN = (platform.machine().lower() in ("x86_64", "amd64")
               and torch.backends.mkldnn.is_available()
               and hasattr(torch.ops.mkldnn, "_linear_pointwise"))
USE_ONEDNN: bool = True
# rows x in x out multiply-adds from which oneDNN pays off (below: F.linear's lower call cost),
# with the operands in cache, and for a weight streamed from memory by one-token decode steps
MIN_MACS: int = 1 << 20
MIN_MACS_STREAMED: int = 1 << 17
# fbgemm's embedding-bag kernel (x86 builds of PyTorch): one row times a transposed weight
_HAS_ROWS = (platform.machine().lower() in ("x86_64", "amd64")
             and "fbgemm" in torch.backends.quantized.supported_engines)
USE_ROWS: bool = True
# columns per block of a RowMatrix: fbgemm's kernel holds a block's sums in vector registers
# (32 AVX-512 registers of 16 floats, 16 AVX2 registers of 8, a few kept for other values), so
# up to this many columns a block is read front to back in one pass
ROW_BLOCK: int = 384 if getattr(torch.cpu, "_is_avx512_supported", lambda: False)() else 96
# up to this many rows (a batch of one-token steps) go through the embedding bag: each block is
# read from memory once and from the caches for the other rows (GPT-2 small's products on one
# thread: 20.6 ms for 2 rows, against oneDNN's 30.6 ms; even at 4 rows)
MAX_BAG_ROWS: int = 3
# (blocks, rows, input rows, device) -> (indices, offsets of the bags): built once per layout
_ROW_INDEX: dict = {}
# a model whose weights exceed this many bytes is read from memory at each decode step (about
# the size of one last-level cache: 32 MiB on the book's machine, 8 to 36 MiB on laptops)
CACHE_BYTES: int = 32 << 20


def _onednn_ok(x: Tensor, weight: Tensor, bias: Optional[Tensor], min_macs: Optional[int] = None) -> bool:
    if not (USE_ONEDNN and _HAS_ONEDNN) or x.numel() * weight.shape[0] < (MIN_MACS if min_macs is None else min_macs):
        return False  # the cheap tests first: a small model's decode step stops here
    if torch.compiler.is_compiling():
        return False  # torch.compile lowers oneDNN's op only for frozen weights: it picks its own kernels
    if not (x.dtype == torch.float32 and weight.dtype == torch.float32 and x.device.type == "cpu"
            and weight.device.type == "cpu" and x.dim() >= 2):
        return False
    if bias is not None and (bias.dtype != torch.float32 or bias.device.type != "cpu"):
        return False
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                    or (bias is not None and bias.requires_grad)):
        return False  # autograd needs F.linear's backward
    if torch.is_autocast_enabled("cpu"):
        return False  # autocast would cast F.linear's inputs
    # a dispatch or function mode (FlopCounterMode, a profiler's tracer) expects the standard
    # aten ops: FlopCounterMode counts aten.mm/addmm and does not know oneDNN's op
    return torch._C._len_torch_dispatch_stack() == 0 and not torch._C._is_torch_function_mode_enabled()


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
           min_macs: Optional[int] = None) -> Tensor:
    """``F.linear(x, weight, bias)`` = x W^T + b, with oneDNN's kernel where it is faster (see
    the module docstring).

    Shapes:
        x (..., in), weight (out, in), bias (out,) or None -> (..., out).
    ``min_macs``: the size (rows x in x out) from which oneDNN is used; None: ``MIN_MACS``.
    """
    if _onednn_ok(x, weight, bias, min_macs):
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return F.linear(x, weight, bias)


def params_key(params: "list[Optional[Tensor]]") -> Optional[tuple]:
    """What a copy built from ``params`` depends on: each one's version counter (bumped by every
    in-place update: optimizer steps, ``load_state_dict``, ``nn.init``) and storage (``.to()``,
    reassignment, a dtype change all move it). None where a tensor was made under
    ``torch.inference_mode`` (it has no version counter): then nothing may be reused."""
    if any(p is not None and p.is_inference() for p in params):
        return None
    return tuple((p._version, p.data_ptr()) if p is not None else None for p in params)


def rows_available(weight: Tensor) -> bool:
    """Should a one-token decode step use :class:`RowMatrix` copies of this weight (CPU, float32,
    x86 with fbgemm's kernel, ``USE_ROWS``)?"""
    return (USE_ROWS and _HAS_ROWS and weight.dtype == torch.float32 and weight.device.type == "cpu")


def _row_index(blocks: int, rows: int, device: torch.device, m: int = 1) -> tuple[Tensor, Tensor]:
    """The table's row indices for ``m`` input rows (block j's rows 0 .. rows - 1, m times, then
    block j + 1's) and the offsets of the bags (int32), shared by every matrix of that layout
    (GPT-2 small's twelve q/k/v maps share one)."""
    key = (blocks, rows, m, device)
    index = _ROW_INDEX.get(key)
    if index is None:
        base = torch.arange(blocks * rows, dtype=torch.int32, device=device)
        if m > 1:
            base = base.view(blocks, 1, rows).expand(blocks, m, rows).reshape(-1)
        index = _ROW_INDEX[key] = (base, torch.arange(blocks * m, dtype=torch.int32, device=device) * rows)
    return index


class RowMatrix:
    """A linear map's weight W (out, in) and bias b, laid out to multiply one row at a time.

    ``RowMatrix(weight, bias)(x)`` equals ``F.linear(x, weight, bias)`` (to float32 rounding),
    x (..., in) -> (..., out). It is a copy: build a new one after the weight changes.

    Layout: W^T (in, out) is cut into ``blocks`` column blocks of ``block`` columns (at most
    ``ROW_BLOCK``; the last block padded with zero columns), and each block is stored
    contiguously, with the block's part of b as one more row: ``table`` (blocks, in [+ 1],
    block). One row x times the weight is then, per block, a weighted sum of that block's rows
    (x_0 times row 0, plus x_1 times row 1, ..., plus 1 times the bias row), which the
    embedding-bag kernel computes, one bag per block (see the module docstring). Each block is
    read front to back once, its sums held in vector registers; the bias streams in with the
    weight; threads share out whole blocks, so the result does not depend on their number.
    Up to ``MAX_BAG_ROWS`` rows go through the bag too (one bag per block and row); anything else
    (more rows, autograd, a copy in another dtype) multiplies by the blocks as a batched matmul.
    """

    def __init__(self, weight: Tensor, bias: Optional[Tensor] = None, block: Optional[int] = None) -> None:
        if weight.dim() != 2:
            raise ValueError(f"RowMatrix: weight must be 2-D (out, in), got shape {tuple(weight.shape)}")
        n_out, n_in = weight.shape
        if bias is not None and tuple(bias.shape) != (n_out,):
            raise ValueError(f"RowMatrix: bias must have shape ({n_out},) to match weight {tuple(weight.shape)}, "
                             f"got {tuple(bias.shape)}")
        cap = ROW_BLOCK if block is None else block
        if cap < 1:
            raise ValueError(f"RowMatrix: block must be a positive number of columns, got {cap}")
        blocks = -(-n_out // cap)
        width = -(-n_out // blocks)  # as even as possible: the least padding
        if cap % 16 == 0:
            width = -(-width // 16) * 16  # whole vector registers (16 floats, or two of 8)
        rows = n_in + (bias is not None)
        with torch.no_grad():
            padded = weight.new_zeros(rows, blocks * width)  # W^T and the bias row, zero-padded
            padded[:n_in, :n_out] = weight.detach().t()
            if bias is not None:
                padded[n_in, :n_out] = bias.detach()
            self.table = padded.view(rows, blocks, width).transpose(0, 1).contiguous()
        self.n_in, self.n_out, self.blocks, self.block = n_in, n_out, blocks, width
        self.has_bias = bias is not None
        self._flat = self.table.view(blocks * rows, width)
        self._index, self._offsets = _row_index(blocks, rows, weight.device)
        self._ones = weight.new_ones(blocks, 1) if self.has_bias else None  # the bias rows' weight

    @property
    def shape(self) -> tuple[int, int]:
        """(out, in), as the weight's."""
        return (self.n_out, self.n_in)

    @property
    def nbytes(self) -> int:
        return self.table.nbytes

    def unpack(self) -> tuple[Tensor, Optional[Tensor]]:
        """The weight (out, in) and bias (None without one) this copy holds, read back from the
        blocks (new tensors)."""
        rows = self.table.shape[1]
        wt = self.table.transpose(0, 1).reshape(rows, self.blocks * self.block)[:, :self.n_out]  # (in [+ 1], out)
        return wt[:self.n_in].t().contiguous(), (wt[self.n_in].clone() if self.has_bias else None)

    def __repr__(self) -> str:
        return (f"RowMatrix(out={self.n_out}, in={self.n_in}, bias={self.has_bias}, "
                f"blocks={self.blocks}x{self.block}, {self.table.dtype}, {self.table.device})")

    def __call__(self, x: Tensor) -> Tensor:
        if x.shape[-1:] != (self.n_in,):
            raise ValueError(f"RowMatrix: x's last dimension must be in={self.n_in}, got shape {tuple(x.shape)}")
        if x.dtype != self.table.dtype or x.device != self.table.device:
            raise ValueError(f"RowMatrix: x is {x.dtype} on {x.device}, the weight {self.table.dtype} on "
                             f"{self.table.device}; move one of them (or build the RowMatrix from the weight there)")
        if x.numel() <= MAX_BAG_ROWS * self.n_in and one_row_ok(x):
            return self.row(x)
        return self._matmul(x)

    def row(self, x: Tensor) -> Tensor:
        """x W^T + b for a few float32 CPU rows x (..., in), without the checks of a call (the
        caller checked :func:`one_row_ok`): one bag per block and row, the rows of a block
        next to each other, so that a block read from memory for the first row is still in the
        caches for the others."""
        n, blocks = self.n_in, self.blocks
        M, shape = x.numel() // n, x.shape[:-1] + (self.n_out,)
        if M == 1:
            index, offsets = self._index, self._offsets
            if self.has_bias:  # (blocks, in + 1): x once per block, then 1 for the bias row
                weights = torch.cat([x.view(1, n).expand(blocks, n), self._ones], 1).view(-1)
            elif blocks > 1:
                weights = x.view(1, n).expand(blocks, n).reshape(-1)
            else:
                weights = x.reshape(n)
        else:
            index, offsets = _row_index(blocks, self.table.shape[1], self.table.device, M)
            w = x.reshape(1, M, n).expand(blocks, M, n)
            if self.has_bias:
                w = torch.cat([w, x.new_ones(blocks, M, 1)], 2)
            weights = w.reshape(-1)
        # mode 0 = sum: bag (j, r) sums block j's rows weighted by row r -> (blocks * M, block)
        y = torch.embedding_bag(self._flat, index, offsets, False, 0, False, weights)[0]
        if M > 1:
            y = y.view(blocks, M, self.block).transpose(0, 1)  # (M, blocks, block)
        y = y.reshape(M, blocks * self.block)
        if y.shape[1] != self.n_out:
            y = y[:, :self.n_out]  # the padding columns
        return y.view(shape) if M == 1 else y.reshape(shape)

    def _matmul(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.n_in)  # (M, in)
        if self.has_bias:
            x2 = torch.cat([x2, x2.new_ones(x2.shape[0], 1)], 1)
        y = torch.matmul(x2, self.table)  # (blocks, M, block)
        y = y.transpose(0, 1).reshape(x2.shape[0], self.blocks * self.block)[:, :self.n_out]
        return y.reshape(lead + (self.n_out,))


def one_row_ok(x: Tensor) -> bool:
    """May a row go through the embedding-bag kernel (no autograd, not traced, no autocast or
    dispatch mode: those expect the standard matmul ops)?"""
    if x.dtype != torch.float32 or x.device.type != "cpu":
        return False
    if x.requires_grad and torch.is_grad_enabled():
        return False
    if torch.compiler.is_compiling() or torch.is_autocast_enabled("cpu"):
        return False
    return torch._C._len_torch_dispatch_stack() == 0 and not torch._C._is_torch_function_mode_enabled()


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, state_dict, hooks and repr) whose forward is :func:`linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
