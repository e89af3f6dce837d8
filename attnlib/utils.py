"""Device choice and seeding (the two lines at the top of every notebook), and timing."""
from __future__ import annotations

import os
import random
import sys
from contextlib import contextmanager
from time import perf_counter
from typing import Any, Callable, Iterator, Optional

import numpy as np
import torch


def default_device() -> torch.device:
    """The best available device: cuda, then mps, then cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0, *, threads: Optional[int] = None) -> torch.Generator:
    """Seed Python, NumPy and torch (all devices); optionally fix torch's CPU thread count.

    Returns a ``torch.Generator`` seeded with ``seed`` for code that wants its own stream.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 32:
        raise ValueError(f"seed must be an int in [0, 2**32), got seed={seed!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ValueError(f"threads must be a positive int (or None to leave torch's setting), "
                         f"got threads={threads!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds CUDA too
    if threads is not None:
        torch.set_num_threads(threads)
    return torch.Generator().manual_seed(seed)


def best_time(fn: Callable[[], Any], repeats: int = 3) -> float:
    """Seconds taken by the fastest of ``repeats`` calls of ``fn()`` (no arguments).

    The fastest call is the one least disturbed by whatever else the machine was doing, so it is
    the number to compare between two ways of doing the same thing. On a GPU, have ``fn`` end
    with ``torch.cuda.synchronize()``, or the clock stops before the work does.
    """
    if not callable(fn):
        raise TypeError(f"best_time needs a function of no arguments to call, "
                        f"got {type(fn).__name__}; wrap a call as lambda: f(x)")
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats must be a positive int (calls to time), got {repeats!r}")
    best = float("inf")
    for _ in range(repeats):
        start = perf_counter()
        fn()
        best = min(best, perf_counter() - start)
    return best


def peak_memory(fn: Callable[[], Any]) -> int:
    """Bytes of memory that one call of ``fn()`` needed at its peak, above what was held before.

    On a GPU, the allocator's peak (``torch.cuda.max_memory_allocated``). On the CPU, from the
    allocations and frees that ``torch.profiler`` records with ``profile_memory=True``: the
    largest running sum during the call. ``fn`` is called once first, so that lazy set-up
    (kernels chosen, tables built) is not counted.
    """
    if not callable(fn):
        raise TypeError(f"peak_memory needs a function of no arguments to call, "
                        f"got {type(fn).__name__}; wrap a call as lambda: f(x)")
    fn()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        cuda_peak = torch.cuda.max_memory_allocated() - before
    else:
        cuda_peak = 0
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    running = peak = 0
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    for _, nbytes in events:
        running += nbytes
        peak = max(peak, running)
    return max(int(peak), int(cuda_peak))


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The profiler's C++ side logs a line at start and stop to file descriptor 2, which a
    notebook shows (Jupyter kernels capture it): send it to /dev/null for the duration."""
    sys.stderr.flush()
    saved = os.dup(2)  # the C++ side writes to fd 2 itself, whatever sys.stderr is
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
