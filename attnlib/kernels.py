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

These bounds are the AMD machines'. On an Intel Xeon (AVX-512) MKL's small and matrix-vector
products are fast: there oneDNN was slower than ``F.linear`` up to about 2^22 multiply-adds in
cache and on every streamed one-row product, and level only for large products
(``python -m benchmarks --full --only crossover``). Bounds per CPU family are not built yet;
there the fast-paths benchmark compares whole forwards with oneDNN on and off.

``USE_ONEDNN`` switches the oneDNN path off for the whole process (the benchmarks compare both).

A large result costs more than its multiply-adds. The C library hands out every allocation
above 32 MiB (glibc's largest ``mmap`` threshold) as a fresh mapping from the kernel and
returns it at ``free``, so each call's result is new memory whose 4 KiB pages are each faulted
in and zeroed on first write: a GPT's logits over 512 tokens of GPT-2's vocabulary are 103 MB,
about 25,000 page faults. On a virtual machine that hands freed memory back to its host (free
page reporting, as on the Firecracker VMs the book is tested on) each of those pages may also
be faulted back in from the host. :func:`linear` writes a result of ``BIG_OUTPUT`` bytes or
more with BLAS's kernel into :func:`result_empty`: memory advised for 2 MiB pages (50 faults
instead of 25,000), kept once the result is gone and handed to the next large result, as
PyTorch's CUDA caching allocator does (``KEEP_RESULTS`` mappings at most;
:func:`release_results` returns them). Under autograd it takes the same path with
``F.linear``'s gradients. On an Intel Xeon VM (one thread, ad hoc, paired) that product of
512 x 384 by 384 x 50257 took 165 ms in fresh huge pages and 148 ms in reused memory, against
176 to 226 ms for ``F.linear``; a 6-layer, 384-wide GPT with GPT-2's vocabulary ran a
512-token forward at 0.69 of Hugging Face's time (0.72 with gradients on), against 0.93 with
``F.linear``'s fresh memory. With 4 sequences (412 MB of logits) fresh huge pages alternated
between 0.7 and 1.5 s per forward, as the host took the freed memory back or not; reused, 0.67 s.

oneDNN computes with the weight in a blocked layout of its own; handed a plain (out, in) weight,
it rearranges the whole weight at every call. :func:`packed` makes that copy once per weight and
keeps it while the weight is unchanged (``USE_PACKED`` switches it off), at the cost of the
weights' size in memory once more. On an Intel Xeon (one thread, ad hoc) the packed call took
0.70 of the plain one's time for 16 rows times GPT-2's 768 -> 2304 weight, 0.90 for 128 rows
and 0.96 for 1024, and a GPT-2-small forward of 1024 tokens about 0.98.

One row times a weight streamed from memory (a decode step of a model larger than the caches) is
a different problem: every weight is read once and used for one multiply-add, so the time is the
time to read the weight. The kernels above compute each output as a dot product of a weight row
with x (the layout ``nn.Linear`` keeps, W (out, in)). On the book's machine, for GPT-2 small's
768 -> 2304 product on one thread, oneDNN's reads the weight at 0.67 and MKL's at 0.42 of the
rate at which a plain sum reads the same bytes. Stored transposed, W^T (in, out), the product is
a weighted sum of W^T's rows (x_0 times row 0, plus x_1 times row 1, ...), and PyTorch's
embedding-bag kernel (fbgemm's, on x86 builds) computes exactly that: "look up these rows, scale
each by its weight, add them up". It reads the same weight at 0.86 of that rate, and was the
fastest of the three for every streamed shape measured, on one and two threads
(``benchmarks/crossover.py``). :func:`linear_t` takes the transposed weight and uses
it for one float32 row on the CPU (``USE_ROWS`` switches it off). (On a later Intel Xeon VM,
MKL's own product on the same contiguous W^T, ``torch.mm(x, wt)``, read GPT-2 small's weights
faster still, ~12% above the embedding bag; ``attnlib.decode.STREAMED_ROWS`` chooses it on
Intel CPUs.)

How W^T is laid out matters too. fbgemm's kernel reads one table row per input, prefetching a
fixed number of rows ahead; with GPT-2's rows of 2304 to 50257 floats that runs ahead too little.
:class:`RowBlocks` cuts W^T into column blocks of about ``BLOCK_COLS`` columns stacked one under
the other, and sums each block in a bag of its own: rows of ~1 KiB, and bags that the threads
share out with nothing to add up afterwards. :class:`attnlib.decode.FastDecoder` holds a large
model's weights that way. On an Intel Xeon (AVX-512, 2 cores) a GPT-2-small decode step took
0.80 of its time with W^T split by rows on one thread and 0.98 on two (ad hoc, separate runs;
``benchmarks/crossover.py`` times the layouts side by side).

Those copies are read from memory at every step, through the page tables: with 4 KiB pages a
GPT-2-small step crosses ~120,000 pages. :func:`huge_page_empty` lays them out in one block that
Linux may back with 2 MiB pages (transparent huge pages, asked for with ``madvise``; most
distributions leave that to each program). On the book's machine, in two ad hoc paired runs
(not a stored benchmark), a GPT-2-small decode step on one thread took 0.96 and 0.98 of its time
with the same copies in two ordinary allocations; on two threads 0.98. ``USE_HUGE_PAGES``
switches it off.
"""
from __future__ import annotations

import math
import mmap
import platform
import threading
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
import torch.utils.weak
from torch import Tensor, nn
from torch.multiprocessing.reductions import StorageWeakRef as _StorageRef

# x86-64 builds of PyTorch ship oneDNN with this entry point; elsewhere F.linear is used.
_HAS_ONEDNN = (platform.machine().lower() in ("x86_64", "amd64")
               and torch.backends.mkldnn.is_available()
               and hasattr(torch.ops.mkldnn, "_linear_pointwise"))
USE_ONEDNN: bool = True
# oneDNN's blocked copy of each weight it multiplies by (see packed), kept while the weight lives;
# PACK_ROWS: the rows per call the layout is chosen for (it serves any number)
USE_PACKED: bool = True
PACK_ROWS: int = 1024
_PACKED = torch.utils.weak.WeakIdKeyDictionary()  # weight -> (its key, the blocked copy)
# rows x in x out multiply-adds from which oneDNN pays off (below: F.linear's lower call cost),
# with the operands in cache, and for a weight streamed from memory by one-token decode steps
MIN_MACS: int = 1 << 20
MIN_MACS_STREAMED: int = 1 << 17
# fbgemm's embedding-bag kernel (x86 builds of PyTorch): one row times a transposed weight
_HAS_ROWS = (platform.machine().lower() in ("x86_64", "amd64")
             and "fbgemm" in torch.backends.quantized.supported_engines)
USE_ROWS: bool = True
# (in, bags, device) -> (indices 0..in-1, offsets of the bags): built once per shape
_ROW_INDEX: dict = {}
# a model whose weights exceed this many bytes is read from memory at each decode step (about
# the size of one last-level cache: 32 MiB on the book's machine, 8 to 36 MiB on laptops)
CACHE_BYTES: int = 32 << 20
# huge_page_empty: ask Linux for 2 MiB pages (MADV_HUGEPAGE exists on Linux only)
USE_HUGE_PAGES: bool = True
HUGE_PAGE: int = 2 << 20
# a result this large (bytes) is a fresh mapping from the C library at every call (glibc's largest
# mmap threshold): linear writes it into result_empty instead (see the module docstring)
BIG_OUTPUT: int = 32 << 20
# the mappings of such results, kept once no tensor uses them and handed to the next one that fits
# (KEEP_RESULTS of them at most; release_results() unmaps the idle ones): [mapping, weak ref]
KEEP_RESULTS: int = 2
_RESULTS: list = []
_RESULTS_LOCK = threading.Lock()
_HAS_HUGE_PAGES = hasattr(mmap, "MADV_HUGEPAGE") and hasattr(mmap, "MAP_ANONYMOUS")
# gelu: below this many elements the exact (erf) GELU on the CPU takes ATen's own kernel instead
# of oneDNN's eltwise primitive (see gelu); USE_ATEN_GELU = False leaves every call to F.gelu
GELU_ATEN_MAX: int = 1 << 14
USE_ATEN_GELU: bool = True
_MKLDNN_FLAG = (getattr(torch._C, "_get_mkldnn_enabled", None),  # what torch.backends.mkldnn.enabled
                getattr(torch._C, "_set_mkldnn_enabled", None))  # reads and sets, without its Python


def _onednn_ok(x: Tensor, weight: Tensor, bias: Optional[Tensor], min_macs: Optional[int] = None) -> bool:
    if not (USE_ONEDNN and _HAS_ONEDNN) or x.numel() * weight.shape[0] < (MIN_MACS if min_macs is None else min_macs):
        return False  # the cheap tests first: a small model's decode step stops here
    return _cpu_inference_ok(x, weight, bias)


def _big_output_ok(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> bool:
    """The product's result is at least ``BIG_OUTPUT`` bytes and may go to :func:`result_empty`
    (with or without a gradient: :class:`_LinearMapped` gives F.linear's)."""
    if not (USE_HUGE_PAGES and _HAS_HUGE_PAGES) or weight.dim() != 2 or x.shape[-1] != weight.shape[1]:
        return False
    if x.numel() // max(x.shape[-1], 1) * weight.shape[0] * x.element_size() < BIG_OUTPUT:
        return False
    return _cpu_float32_ok(x, weight, bias)


def _cpu_inference_ok(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> bool:
    """float32 on the CPU, no gradient, no autocast, no compiler or dispatch mode watching."""
    return not _needs_grad(x, weight, bias) and _cpu_float32_ok(x, weight, bias)


def _needs_grad(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> bool:
    return torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                        or (bias is not None and bias.requires_grad))


def _cpu_float32_ok(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> bool:
    """float32 on the CPU, no autocast, no compiler, transform or dispatch mode watching."""
    if torch.compiler.is_compiling():
        return False  # torch.compile lowers oneDNN's op only for frozen weights: it picks its own kernels
    if not (x.dtype == torch.float32 and weight.dtype == torch.float32 and x.device.type == "cpu"
            and weight.device.type == "cpu" and x.dim() >= 2):
        return False
    if bias is not None and (bias.dtype != torch.float32 or bias.device.type != "cpu"):
        return False
    if torch.is_autocast_enabled("cpu"):
        return False  # autocast would cast F.linear's inputs
    if torch.autograd.forward_ad._current_level >= 0 or torch._C._functorch.peek_interpreter_stack() is not None:
        return False  # forward-mode AD and torch.func's transforms (vmap, grad) know the standard ops
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
    macs = x.numel() * weight.shape[0]  # rows x in x out
    # below both bounds F.linear at once (a result of BIG_OUTPUT bytes has >= BIG_OUTPUT / 8 macs)
    if macs < (MIN_MACS if min_macs is None else min_macs) and macs < BIG_OUTPUT // 8:
        return F.linear(x, weight, bias)
    if _big_output_ok(x, weight, bias):
        if _needs_grad(x, weight, bias):
            return _LinearMapped.apply(x, weight, bias)
        return _linear_mapped(x, weight, bias)
    if _onednn_ok(x, weight, bias, min_macs):
        return torch.ops.mkldnn._linear_pointwise(x, packed(weight), bias, "none", [], "")
    return F.linear(x, weight, bias)


def _linear_mapped(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """x W^T + b written into a :func:`result_empty` tensor (BLAS's kernel, as ``F.linear``)."""
    x2 = x.reshape(-1, x.shape[-1])
    out = result_empty((x2.shape[0], weight.shape[0]), x.dtype)
    if bias is None:
        torch.mm(x2, weight.t(), out=out)
    else:
        torch.addmm(bias, x2, weight.t(), out=out)
    return out.view(*x.shape[:-1], weight.shape[0])


class _LinearMapped(torch.autograd.Function):
    """:func:`_linear_mapped` with ``F.linear``'s gradients (written with differentiable ops,
    so a second derivative works too)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        ctx.save_for_backward(x, weight)
        return _linear_mapped(x, weight, bias)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        g2 = grad.reshape(-1, grad.shape[-1])  # (rows, out)
        gx = grad.matmul(weight) if ctx.needs_input_grad[0] else None
        gw = g2.t().mm(x.reshape(-1, x.shape[-1])) if ctx.needs_input_grad[1] else None
        gb = g2.sum(0) if ctx.needs_input_grad[2] else None
        return gx, gw, gb


def result_empty(shape: Sequence[int], dtype: torch.dtype = torch.float32) -> Tensor:
    """An uninitialised CPU tensor for a large result, in memory advised for 2 MiB pages (as
    :func:`huge_page_empty`) that is kept for the next large result once no tensor uses it.

    A fresh mapping is new memory to the kernel, faulted in and zeroed page by page at its first
    write; a virtual machine's host may also have taken back the memory a process freed, and
    hands it back only at such faults. Reusing the last result's pages skips both: like
    PyTorch's CUDA caching allocator, it holds up to ``KEEP_RESULTS`` mappings (e.g. one
    forward's logits) while they are idle; :func:`release_results` returns them. A plain
    ``torch.empty`` tensor where huge pages do not apply (see :func:`huge_page_empty`)."""
    shape = tuple(int(n) for n in shape)
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if not (USE_HUGE_PAGES and _HAS_HUGE_PAGES) or nbytes < HUGE_PAGE:
        return torch.empty(shape, dtype=dtype)
    need = -(-nbytes // HUGE_PAGE) * HUGE_PAGE + HUGE_PAGE  # one page more to align the start
    with _RESULTS_LOCK:
        idle = [e for e in _RESULTS if e[1].expired()]
        fits = [e for e in idle if len(e[0]) >= need]
        if fits:  # the smallest idle mapping that holds it
            entry = min(fits, key=lambda e: len(e[0]))
            raw = torch.frombuffer(entry[0], dtype=torch.uint8)
            entry[1] = _StorageRef(raw.untyped_storage())
        else:
            try:
                block = mmap.mmap(-1, need, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
                block.madvise(mmap.MADV_HUGEPAGE)
            except (OSError, ValueError):
                return torch.empty(shape, dtype=dtype)
            raw = torch.frombuffer(block, dtype=torch.uint8)
            if len(_RESULTS) >= KEEP_RESULTS and idle:
                _RESULTS.remove(idle[0])  # the oldest idle one makes room (unmapped now)
            if len(_RESULTS) < KEEP_RESULTS:
                _RESULTS.append([block, _StorageRef(raw.untyped_storage())])
    base = -raw.data_ptr() % HUGE_PAGE
    return raw[base: base + nbytes].view(dtype).view(shape)


def release_results() -> int:
    """Unmap the kept result mappings no tensor uses (see :func:`result_empty`); returns the
    bytes released. Tensors still in use keep theirs (freed with the last of them)."""
    with _RESULTS_LOCK:
        idle = [e for e in _RESULTS if e[1].expired()]
        for e in idle:
            _RESULTS.remove(e)
        return sum(len(e[0]) for e in idle)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """``F.gelu(x, approximate=approximate)``, with a small exact GELU computed by ATen's own
    kernel.

    On a CPU tensor with oneDNN enabled, ``F.gelu`` (erf, not "tanh") runs oneDNN's eltwise
    primitive, whose fixed cost is ~6 us per call: 6.2 to 8.5 us for one row of 64 to 3072
    floats on the book's Intel VM, against 0.8 to 2.5 us for ATen's vectorised kernel (one
    thread; oneDNN is faster from ~32k elements: 28 against 35 us at 64k). A decode step calls
    it once per layer on one row. Below ``GELU_ATEN_MAX`` elements this turns oneDNN off for that one call
    (the process-wide flag ``torch.backends.mkldnn.enabled``, restored at once, also if the call
    raises); the two kernels agree to ~1e-6 (tested). Not while ``torch.compile`` traces, nor
    with ``USE_ATEN_GELU`` off."""
    get, set_ = _MKLDNN_FLAG
    if (approximate == "none" and USE_ATEN_GELU and set_ is not None and x.device.type == "cpu"
            and x.numel() < GELU_ATEN_MAX and not torch.compiler.is_compiling() and get()):
        set_(False)
        try:
            return F.gelu(x)
        finally:
            set_(True)
    return F.gelu(x, approximate=approximate)


def linear_gelu(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, approximate: str = "none",
                min_macs: Optional[int] = None) -> Tensor:
    """``F.gelu(F.linear(x, weight, bias), approximate=approximate)``, with the GELU computed
    inside oneDNN's product where :func:`linear` would use oneDNN (a post-op on each block of the
    result while it is in cache, instead of one more pass over the whole hidden layer), and the
    two calls otherwise. ``approximate``: "none" (erf) or "tanh", as in ``F.gelu``."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    if _onednn_ok(x, weight, bias, min_macs):
        return torch.ops.mkldnn._linear_pointwise(x, packed(weight), bias, "gelu", [], approximate)
    return gelu(F.linear(x, weight, bias), approximate)


def packed(weight: Tensor) -> Tensor:
    """``weight`` (out, in) in the blocked layout oneDNN's kernel computes with, made once and
    kept while the weight lives, keeps its storage and is not changed in place (its version
    counter); ``weight`` itself where that cannot be told (made under ``torch.inference_mode``,
    not contiguous) or with ``USE_PACKED`` off. Given a plain weight, oneDNN rearranges it into
    that layout at every call (reading and writing the whole weight); see the module docstring."""
    if not USE_PACKED or weight.is_inference() or not weight.is_contiguous():
        return weight
    key = (weight._version, weight.data_ptr(), weight.shape)
    held = _PACKED.get(weight)
    if held is None or held[0] != key:
        with torch.no_grad():
            held = _PACKED[weight] = (key, _reorder(weight))
    return held[1]


def _reorder(weight: Tensor) -> Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS)


def params_key(params: "list[Optional[Tensor]]") -> Optional[tuple]:
    """What a copy built from ``params`` depends on: each one's version counter (bumped by every
    in-place update: optimizer steps, ``load_state_dict``, ``nn.init``) and storage (``.to()``,
    reassignment, a dtype change all move it). None where a tensor was made under
    ``torch.inference_mode`` (it has no version counter): then nothing may be reused."""
    if any(p is not None and p.is_inference() for p in params):
        return None
    return tuple((p._version, p.data_ptr()) if p is not None else None for p in params)


def rows_available(weight: Tensor) -> bool:
    """Can :func:`linear_t` use the embedding-bag kernel for this weight (CPU, float32, x86)?"""
    return (USE_ROWS and _HAS_ROWS and weight.dtype == torch.float32 and weight.device.type == "cpu")


def _rows_ok(x: Tensor, wt: Tensor, bias: Optional[Tensor]) -> bool:
    if not (rows_available(wt) and x.numel() == x.shape[-1] and wt.is_contiguous()):
        return False  # one row only: more rows would read the weight once per row
    if bias is not None and (bias.dtype != torch.float32 or bias.device.type != "cpu"):
        return False
    if torch.is_grad_enabled() and (wt.requires_grad or (bias is not None and bias.requires_grad)):
        return False
    return rows_call_ok(x)


def rows_call_ok(x: Tensor) -> bool:
    """May :func:`linear_t` send this row x to the embedding bag (one float32 CPU row, no
    autograd, not traced by ``torch.compile``, no autocast or dispatch mode: those expect the
    standard matmul ops)? ``USE_ROWS`` is read here too, so switching it off takes effect at the
    next call. The weight's side is :func:`rows_available`."""
    if not (USE_ROWS and _HAS_ROWS and x.numel() == x.shape[-1] and x.dtype == torch.float32
            and x.device.type == "cpu"):
        return False
    if x.requires_grad and torch.is_grad_enabled():
        return False
    if torch.compiler.is_compiling() or torch.is_autocast_enabled("cpu"):
        return False
    return torch._C._len_torch_dispatch_stack() == 0 and not torch._C._is_torch_function_mode_enabled()


def linear_t(x: Tensor, wt: Tensor, bias: Optional[Tensor] = None,
             min_macs: Optional[int] = None, *, bias_row: bool = False) -> Tensor:
    """x W^T + b from the transposed weight ``wt`` = W^T, as ``linear(x, wt.t(), bias)``.

    Shapes:
        x (..., in), wt (in, out) contiguous, bias (out,) or None -> (..., out).
        With ``bias_row``: wt (in + 1, out), W^T with the bias as its last row (``bias`` None).
    One float32 row on the CPU (x86): the weighted sum of wt's rows, by the embedding-bag kernel
    (see the module docstring); a bias row is weighted by 1, so it streams in with the weight
    instead of being read by a separate addition. The rows are split into one bag per thread,
    whose sums are added (:func:`bag_rows`). Anything else: :func:`linear` on the view
    ``wt.t()`` (``min_macs`` as there).
    """
    lead = x.shape[:-1]
    if bias_row:
        if bias is not None:
            raise ValueError("linear_t: with bias_row=True the bias is wt's last row; pass bias=None")
        if not _rows_ok(x, wt, None):
            return linear(x, wt[:-1].t(), wt[-1], min_macs)
        x = torch.cat([x.reshape(-1), x.new_ones(1)])  # (in + 1,): the bias row weighted by 1
    elif not _rows_ok(x, wt, bias):
        return linear(x, wt.t(), bias, min_macs)
    n_in, n_out = wt.shape
    y = bag_rows(x.reshape(n_in), wt, row_index(n_in, wt.device))  # (1, out)
    if bias is not None:
        y = y.add_(bias)
    return y.view(*lead, n_out)


def row_index(n_in: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """What :func:`bag_rows` needs to sum ``n_in`` rows: the indices 0..n_in-1 and the offsets
    of the bags, one bag per thread (at most one per 64 rows), each summing its share of the
    rows. Built once per (n_in, thread count, device); read the thread count at each call."""
    bags = max(1, min(torch.get_num_threads(), n_in // 64))
    key = (n_in, bags, device)
    index = _ROW_INDEX.get(key)
    if index is None:
        index = _ROW_INDEX[key] = (torch.arange(n_in, device=device),
                                   torch.arange(bags, device=device) * (n_in // bags))
    return index


def bag_rows(x: Tensor, wt: Tensor, index: tuple[Tensor, Tensor]) -> Tensor:
    """x (in,) times wt (in, out) -> (1, out) by the embedding bag, with no checks (the callers'
    job: :func:`linear_t` and ``FastDecoder``'s one-row step). ``index``: :func:`row_index`."""
    # mode 0 = sum: y[j] = sum over rows i of x[i] * wt[i, j], one sum per bag
    y = torch.embedding_bag(wt, index[0], index[1], False, 0, False, x)[0]  # (bags, out)
    return y.sum(0, keepdim=True) if y.shape[0] > 1 else y


# RowBlocks: columns per block (1 KiB of float32 per row), the width at which fbgemm's bag read
# GPT-2 small's weights fastest on the book's machines (benchmarks/crossover.py)
BLOCK_COLS: int = 256


class RowBlocks:
    """One float32 row x (1, n) times a weight W (out, n) [+ bias] by one embedding-bag call,
    with W^T cut into column blocks: what a decode step of a model larger than the caches does.

    The bag sums rows of a table, each scaled by its weight (see the module docstring). Here the
    table is W^T (n [+ 1 bias row], out) cut into ``blocks`` blocks of ``cols`` columns stacked
    one under the other, (blocks * rows, cols), with zero columns after the last output; bag b
    sums block b's rows, each weighted by x (the bias row by 1), and writes outputs
    b * cols .. (b + 1) * cols - 1. So the bags are independent (the threads share them out with
    no sum of partial results afterwards) and each row read is ``cols`` floats: on the book's
    machines fbgemm's kernel read the weight fastest with rows of ~1 KiB (``BLOCK_COLS``), its
    prefetch running a fixed number of rows ahead. ``blocks`` is a multiple of ``threads``.

    :meth:`shape` gives the table's shape, :meth:`fill` writes W into ``table`` (a tensor of
    that shape, e.g. from :func:`huge_page_empty`), calling the object computes ``x W^T + b``
    with no checks (a float32 CPU row, no autograd: see :func:`rows_call_ok`). Each object holds
    the input buffer (blocks, rows) it repeats x into, so it serves one call at a time.
    """

    def __init__(self, table: Tensor, n_in: int, n_out: int, bias_row: bool, threads: int) -> None:
        self.n_in, self.n_out, self.bias_row, self.rows = n_in, n_out, bias_row, n_in + bias_row
        self.blocks, self.cols = self.layout(n_in + bias_row, n_out, threads)
        if tuple(table.shape) != (self.blocks * self.rows, self.cols):
            raise ValueError(f"RowBlocks: table {tuple(table.shape)} should be "
                             f"{(self.blocks * self.rows, self.cols)} (RowBlocks.shape)")
        self.table = table
        dev = table.device  # int32 indices: half the bytes of int64 to read at each call
        self.index = torch.arange(self.blocks * self.rows, device=dev, dtype=torch.int32)
        self.offsets = torch.arange(self.blocks, device=dev, dtype=torch.int32) * self.rows
        self.buf = table.new_ones(self.blocks, self.rows)  # x in every block, then 1 (bias row)
        self._x = self.buf[:, :n_in]
        self._flat = self.buf.view(-1)

    @staticmethod
    def layout(rows: int, n_out: int, threads: int) -> tuple[int, int]:
        """(blocks, cols): about ``BLOCK_COLS`` columns per block, blocks a multiple of threads."""
        threads = max(1, threads)
        blocks = -(-max(1, -(-n_out // BLOCK_COLS)) // threads) * threads
        return blocks, -(-n_out // blocks)

    @classmethod
    def shape(cls, n_in: int, n_out: int, bias_row: bool, threads: int) -> tuple[int, int]:
        """The table's shape for W (n_out, n_in) [+ a bias row] at this thread count."""
        blocks, cols = cls.layout(n_in + bias_row, n_out, threads)
        return blocks * (n_in + bias_row), cols

    def fill(self, parts: Sequence[tuple[Tensor, Optional[Tensor]]]) -> None:
        """Write W = the ``parts`` (weight (out_i, n), bias (out_i,) or None) stacked along the
        outputs (q, k and v side by side, say) into the table; a missing bias is zeros."""
        rows, cols = self.rows, self.cols
        full = self.table.new_zeros(rows, self.blocks * cols)  # W^T (rows, out), zero-padded
        col = 0
        for w, b in parts:
            n = w.shape[0]
            full[:w.shape[1], col:col + n] = w.t()
            if self.bias_row and b is not None:
                full[-1, col:col + n] = b
            col += n
        if col != self.n_out:
            raise ValueError(f"RowBlocks.fill: the parts have {col} outputs, the table {self.n_out}")
        self.table.view(self.blocks, rows, cols).copy_(full.view(rows, self.blocks, cols).transpose(0, 1))

    def dense(self) -> Tensor:
        """The table as W^T (rows, out) again (a copy; for tests and inspection)."""
        t = self.table.view(self.blocks, self.rows, self.cols).transpose(0, 1)
        return t.reshape(self.rows, self.blocks * self.cols)[:, :self.n_out]

    def __call__(self, x: Tensor) -> Tensor:
        """x (1, n) -> x W^T + b (1, out)."""
        self._x.copy_(x)  # x into every block's weights (one broadcast copy)
        y = torch.embedding_bag(self.table, self.index, self.offsets, False, 0, False, self._flat)[0]
        y = y.view(1, -1)  # (1, blocks * cols): block b's outputs after block b - 1's
        return y if y.shape[1] == self.n_out else y[:, :self.n_out]


def huge_page_empty(shapes: Sequence[Sequence[int]], dtype: torch.dtype = torch.float32) -> list[Tensor]:
    """Uninitialised CPU tensors of these shapes, one after another (each starting on a 4 KiB
    boundary) in one anonymous memory mapping aligned to 2 MiB and advised ``MADV_HUGEPAGE``,
    so that Linux may back it with 2 MiB pages (transparent huge pages) if its setting allows
    (``/sys/kernel/mm/transparent_hugepage/enabled``: ``always`` or ``madvise``). The tensors
    are views of one storage, which frees the mapping when the last of them is gone.

    Plain ``torch.empty`` tensors instead where that cannot apply or help: off Linux, with
    ``USE_HUGE_PAGES`` False, below one huge page in all, or if the mapping fails. Either way
    the tensors behave alike; only the speed of reading them differs (see the module docstring).
    """
    shapes = [tuple(int(n) for n in s) for s in shapes]
    item = torch.empty((), dtype=dtype).element_size()
    sizes = [math.prod(s) * item for s in shapes]
    starts, total = [], 0
    for n in sizes:
        starts.append(total)
        total += -(-n // 4096) * 4096  # the next one starts on a 4 KiB boundary
    if not (USE_HUGE_PAGES and _HAS_HUGE_PAGES) or total < HUGE_PAGE:
        return [torch.empty(s, dtype=dtype) for s in shapes]
    try:  # one huge page more, to start on a 2 MiB boundary wherever the mapping lands
        block = mmap.mmap(-1, total + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        block.madvise(mmap.MADV_HUGEPAGE)
    except (OSError, ValueError):
        return [torch.empty(s, dtype=dtype) for s in shapes]
    raw = torch.frombuffer(block, dtype=torch.uint8)  # holds the mapping; untouched pages cost nothing
    base = -raw.data_ptr() % HUGE_PAGE
    return [raw[base + a: base + a + n].view(dtype).view(s) for a, n, s in zip(starts, sizes, shapes)]


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, state_dict, hooks and repr) whose forward is :func:`linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
