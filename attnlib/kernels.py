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


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, state_dict, hooks and repr) whose forward is :func:`linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
