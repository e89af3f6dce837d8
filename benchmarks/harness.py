"""The measuring method shared by every benchmark.

Timings on a shared machine are noisy, so no single absolute time is trusted. Each comparison:

1. fixes the thread count (``torch.set_num_threads``) and runs every variant up to ``warmup`` times
   (fewer when one call already takes longer than two blocks) to warm up allocator, lazy init, caches;
2. calibrates how many calls of each variant make about ``block_s`` seconds;
3. runs ``rounds`` rounds. In a round the variants' calls are interleaved one by one
   (A B C A B C ...), starting from a variant that rotates from round to round, so a change of
   machine load hits all variants alike; each variant's time in the round is the median of its
   calls;
4. reads the Linux pressure-stall counter ``/proc/pressure/cpu`` ("some" total, microseconds in
   which at least one runnable task waited for a CPU) around every round. A round in which that
   counter rose by more than ``max_stall`` of the round's wall time means another process took
   the CPU: the round is discarded. If fewer than ``min_clean`` rounds survive, the least-stalled
   rounds are kept and the comparison is flagged ``noisy``;
5. reports the median time per call of each variant and, for each variant, the median over rounds of
   the paired ratio (variant time / baseline time in the same round): a ratio from one round is
   immune to load that changes between rounds.

Peak memory on CPU is read from the allocator events that ``torch.profiler`` records with
``profile_memory=True``: every allocation and free inside the profiled call, in time order; the
running sum's maximum is the peak above what was live before the call. On CUDA it is
``torch.cuda.max_memory_allocated`` after a reset.
"""
from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch

PSI_PATH = "/proc/pressure/cpu"


@dataclass
class Settings:
    """How hard to measure. ``quick`` and ``full`` differ only in sizes and round counts."""

    mode: str = "quick"            # "smoke" (tests) | "quick" | "full"
    device: str = "cpu"
    dtype: str = "float32"          # "bfloat16" on CUDA
    threads: int = 1                # fixed CPU thread count
    warmup: int = 2                 # calls per variant before timing
    rounds: int = 5                 # interleaved A/B rounds
    block_s: float = 0.2            # target seconds of calls per variant per round
    max_stall: float = 0.10         # discard a round whose CPU stall fraction exceeds this
    min_clean: int = 3              # fewer clean rounds than this -> keep the least stalled, flag noisy
    seed: int = 0

    def __post_init__(self) -> None:
        if self.mode not in ("smoke", "quick", "full"):
            raise ValueError(f"mode must be 'smoke', 'quick' or 'full', got {self.mode!r}")
        if self.rounds < 1 or self.warmup < 0 or self.threads < 1:
            raise ValueError(
                f"need rounds >= 1, warmup >= 0, threads >= 1; got rounds={self.rounds}, "
                f"warmup={self.warmup}, threads={self.threads}"
            )
        if not 0.0 < self.max_stall <= 1.0:
            raise ValueError(f"max_stall is a fraction of wall time in (0, 1], got {self.max_stall}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def is_cuda(self) -> bool:
        return torch.device(self.device).type == "cuda"

    def to_dict(self) -> dict:
        return asdict(self)


def cpu_stall_us() -> Optional[int]:
    """Cumulative microseconds with some task waiting for a CPU (None where PSI is unavailable)."""
    try:
        with open(PSI_PATH) as f:
            for line in f:
                if line.startswith("some"):
                    return int(line.split("total=")[1])
    except (OSError, IndexError, ValueError):
        return None
    return None


def cpu_pressure_avg10() -> Optional[float]:
    """The kernel's 10-second average of the CPU "some" pressure, in percent."""
    try:
        with open(PSI_PATH) as f:
            return float(f.readline().split("avg10=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        return None


def synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _time_call(fn: Callable[[], object], device: str) -> float:
    """Seconds for one call of ``fn`` (synchronising the GPU on both sides)."""
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


def _round(variants: dict[str, Callable[[], object]], order: list[str], calls: dict[str, int],
           device: str) -> tuple[dict[str, float], Optional[float]]:
    """One round: the variants' calls interleaved one by one (A B C A B C ...), so that A's and B's
    calls are milliseconds apart, not a block apart. Returns each variant's median seconds per
    call and the CPU stall fraction over the round's wall time."""
    per_call: dict[str, list[float]] = {n: [] for n in order}
    s0, t0 = cpu_stall_us(), time.perf_counter()
    for i in range(max(calls[n] for n in order)):
        for n in order:
            if i < calls[n]:
                per_call[n].append(_time_call(variants[n], device))
    wall = time.perf_counter() - t0
    s1 = cpu_stall_us()
    stall = None if s0 is None or s1 is None else (s1 - s0) / 1e6 / wall
    return {n: statistics.median(ts) for n, ts in per_call.items()}, stall


def compare(variants: dict[str, Callable[[], object]], settings: Settings, *, baseline: Optional[str] = None) -> dict:
    """Time ``variants`` against each other with warm-up, interleaved rounds and stall filtering.

    Returns a dict: ``median_s`` per variant (seconds per call over kept rounds), ``ratio`` per
    variant (median of per-round variant / baseline times), the raw ``rounds`` with their stall
    fractions and whether each was kept, and ``noisy``.
    """
    if not variants:
        raise ValueError("compare() needs at least one variant")
    names = list(variants)
    baseline = names[0] if baseline is None else baseline
    if baseline not in variants:
        raise ValueError(f"baseline {baseline!r} is not one of the variants {names}")
    torch.set_num_threads(settings.threads)
    calls: dict[str, int] = {}
    for name, fn in variants.items():
        t0 = time.perf_counter()
        for _ in range(settings.warmup):  # an expensive call warms up in one go: stop after ~2 blocks
            fn()
            if time.perf_counter() - t0 > 2 * settings.block_s:
                break
        one = _time_call(fn, settings.device)
        calls[name] = max(1, min(1000, int(settings.block_s / max(one, 1e-9))))
    rounds = []
    for r in range(settings.rounds):
        order = names[r % len(names):] + names[: r % len(names)]  # rotate A B C -> B C A -> ...
        times, stall = _round(variants, order, calls, settings.device)
        rounds.append({"times_s": times, "stall": stall})
    for rd in rounds:
        rd["kept"] = rd["stall"] is None or rd["stall"] <= settings.max_stall
    kept = [rd for rd in rounds if rd["kept"]]
    noisy = len(kept) < min(settings.min_clean, len(rounds))
    if noisy:  # keep the least-stalled rounds rather than nothing, and say so
        by_stall = sorted(range(len(rounds)), key=lambda i: rounds[i]["stall"] or 0.0)
        keep = set(by_stall[: min(settings.min_clean, len(rounds))])
        for i, rd in enumerate(rounds):
            rd["kept"] = i in keep
        kept = [rd for rd in rounds if rd["kept"]]
    median_s = {n: statistics.median(rd["times_s"][n] for rd in kept) for n in names}
    ratio = {n: statistics.median(rd["times_s"][n] / rd["times_s"][baseline] for rd in kept) for n in names}
    return {
        "baseline": baseline,
        "median_s": median_s,
        "ratio": ratio,
        "calls_per_block": calls,
        "rounds": rounds,
        "kept_rounds": len(kept),
        "noisy": noisy,
    }


def profile_calls(fns: dict[str, Callable[[], object]], device: str) -> dict[str, dict]:
    """Per function: peak memory of one call (bytes above what was live before it) and the SDPA
    kernels it ran. One profiler session for all (starting one costs seconds); each call runs
    inside its own ``record_function`` range, and events are attributed by time window."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from attnlib.utils import _quiet_stderr  # the profiler's C++ start/stop lines, not ours

    cuda = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    cuda_peak = {}
    for name, fn in fns.items():
        fn()  # warm: lazy allocations should not count
        synchronize(device)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            fn()
            synchronize(device)
            cuda_peak[name] = torch.cuda.max_memory_allocated() - before
    tags = {name: f"bench::{i}" for i, name in enumerate(fns)}
    with _quiet_stderr(), profile(activities=activities, profile_memory=True) as prof:
        for name, fn in fns.items():
            with record_function(tags[name]):
                fn()
                synchronize(device)
    events = list(prof.profiler.kineto_results.events())
    out = {}
    for name in fns:
        win = next(e for e in events if e.name() == tags[name])
        t0, t1 = win.start_ns(), win.start_ns() + win.duration_ns()
        inside = [e for e in events if t0 <= e.start_ns() <= t1]
        ops = sorted({e.name() for e in inside if e.name().startswith("aten::")})
        if cuda:
            peak = cuda_peak[name]
        else:
            running = peak = 0
            for _, nbytes in sorted((e.start_ns(), e.nbytes()) for e in inside if e.name() == "[memory]"):
                running += nbytes
                peak = max(peak, running)
        kernels = [op for op in ops if "scaled_dot_product" in op and op != "aten::scaled_dot_product_attention"]
        kernels += sorted({e.name() for e in inside if cuda and ("flash" in e.name() or "fmha" in e.name()
                                                                  or "cudnn" in e.name())})[:3]
        out[name] = {"peak_bytes": int(peak), "sdpa_kernels": kernels, "n_ops": len(ops)}
    return out


@dataclass
class Target:
    """A stated goal, checked against a measured value (``value op limit``)."""

    name: str
    value: Optional[float]
    op: str
    limit: float
    note: str = ""
    met: Optional[bool] = field(default=None)

    def __post_init__(self) -> None:
        if self.op not in ("<=", ">="):
            raise ValueError(f"op must be '<=' or '>=', got {self.op!r}")
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            self.met = None
        else:
            self.met = self.value <= self.limit if self.op == "<=" else self.value >= self.limit

    def to_dict(self) -> dict:
        return asdict(self)


def fmt_table(headers: list[str], rows: list[list[object]]) -> str:
    """A plain-text table (numbers formatted to 3 significant digits)."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        if v is None:
            return "-"
        return str(v)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(out)


def code_commit() -> Optional[str]:
    """The checkout's commit (short hash), with "+changes" when attnlib/ or benchmarks/ differ
    from it (results aside); None outside a git checkout."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "attnlib", "benchmarks",
                                ":(exclude)benchmarks/results"], cwd=root, check=True,
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if dirty else "")


def environment(settings: Settings) -> dict:
    """What produced the numbers: versions, device, CPU model, threads, load."""
    import platform

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    env = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": settings.device,
        "device_name": torch.cuda.get_device_name() if settings.is_cuda else cpu,
        "cpu_count": os.cpu_count(),
        "threads": settings.threads,
        "dtype": settings.dtype,
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "psi_available": cpu_stall_us() is not None,
        "cpu_pressure_avg10_start": cpu_pressure_avg10(),
        "commit": code_commit(),
    }
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:
        env["transformers"] = None
    return env
