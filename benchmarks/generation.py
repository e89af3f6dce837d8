"""Generation: greedy decoding without a cache, with ``attnlib.KVCache``, and with HF ``generate``.

Per model shape: a 32-token prompt, then ``new`` greedy tokens (temperature 0), batch 1.

* cache speedup: time without a cache / time with it (no cache re-runs the whole prefix for every
  new token: quadratic work; the cache makes each step one token's worth);
* per-token cost: one decode step with the cache holding as many tokens as in the middle of the
  first window of new tokens, against one with the cache as long as in the middle of the last
  window, timed in interleaved rounds (paired ratio; should be about 1: the cache grows, but
  reading the weights dominates). A hand loop also times every step of a real decode for the plot;
* attnlib tokens/s over HF ``generate`` tokens/s (cached both);
* bandwidth: each decode step reads every weight once (the LM head reads the whole embedding
  matrix; the position table only one row), so weight bytes / step time is the bandwidth that
  decoding achieves. It is compared, round by round, with the fastest of the
  :func:`~benchmarks.harness.bandwidth_probes` (a copy and a sum, over ordinary and 2 MiB pages) of a tensor as large
  as the calibration's (:func:`probe_bytes`, far larger than the last-level cache) timed in the
  same rounds, and with the step's matrix-vector
  products alone (:func:`products_only`), the floor that the matmul kernels set;
* ``KVCache.nbytes`` is checked against 2 x n_layers x B x seq_len x d_model x element size.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

import attnlib
from attnlib import kernels
from attnlib.decode import FastDecoder

from .harness import Settings, Target, bandwidth_probes, compare, cpu_stall_us, fmt_table, synchronize
from .models import build_pair, top_ops

RUNS = {
    "smoke": [("smoke", 8, 8)],
    "quick": [("tiny", 32, 64), ("gpt2-small", 32, 32)],
    "full": [("tiny", 32, 256), ("gpt2-small", 32, 256)],
}


def decode_steps(gpt: torch.nn.Module, prompt: torch.Tensor, new: int, device: str
                 ) -> tuple[float, list[float], torch.Tensor, attnlib.KVCache]:
    """Greedy decoding by hand with a KVCache, timing each step.

    Returns (prefill seconds, seconds of each of the ``new`` one-token forwards, ids, cache). The
    last new token is fed too (``generate`` stops before that forward), so every step is timed
    alike and the cache ends up holding prompt + new tokens."""
    cache = attnlib.KVCache()
    cache.reserve(new)
    forward = decode_step(gpt)
    synchronize(device)
    t0 = time.perf_counter()
    logits = forward(prompt, cache)                   # prefill: (B, vocab)
    synchronize(device)
    prefill = time.perf_counter() - t0
    ids, times = prompt, []
    for _ in range(new):
        t0 = time.perf_counter()
        nxt = logits.argmax(dim=-1, keepdim=True)     # (B, 1) greedy
        ids = torch.cat([ids, nxt], dim=1)
        logits = forward(nxt, cache)                  # one token in, its keys/values appended
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return prefill, times, ids, cache


def decode_step(gpt: torch.nn.Module) -> Callable[[torch.Tensor, attnlib.KVCache], torch.Tensor]:
    """What ``gpt.generate`` runs per step: ``FastDecoder.step`` for a plain attnlib GPT (call under
    inference mode), else the model's forward. (ids (B, T), cache) -> next-token logits (B, vocab)."""
    fast = FastDecoder.for_model(gpt)
    if fast is not None:
        return fast.step
    return lambda ids, cache: gpt(ids, cache=cache).logits[:, -1]


def products_only(gpt: torch.nn.Module, device: str) -> Callable[[], object]:
    """The matrix-vector products of one decode step and nothing else: every weight matrix (q/k/v
    stacked, as decoding uses them, and the LM head) times one token's vector, with the kernels
    and the calls a one-token step makes (with transposed copies: those of
    ``FastDecoder._row_step``, each one embedding bag or one addmm). The floor of a decode step with these
    kernels: weight bytes / its time is the bandwidth the kernels themselves reach."""
    fast = FastDecoder.for_model(gpt)
    if fast is None:
        raise AssertionError("generate would not use the fast decode loop for this model")
    if fast.head_rows is not None:  # the copies of the one-row step (RowBlocks or _RowProduct)
        rows = fast.row_products()
        xs = {r.n_in: torch.randn(1, r.n_in, device=device) for r in rows}
        return lambda: [r(xs[r.n_in]) for r in rows]
    calls = [(layer.linear, w, b) for layer, w, b in fast.matrices()] + [(fast.linear, fast.head, None)]
    xs = {w.shape[1]: torch.randn(1, 1, w.shape[1], device=device) for _, w, _ in calls}  # W (out, in)
    m = fast.token_min_macs  # as FastDecoder.step chooses
    return lambda: [lin(xs[w.shape[1]], w, b, m) for lin, w, b in calls]


def step_at(gpt: torch.nn.Module, length: int, vocab_size: int, device: str, seed: int) -> Callable[[], torch.Tensor]:
    """A function that runs one cached decode step with ``length`` tokens already in the cache.

    The step appends one token's keys/values; the function then puts back each layer's view of
    the first ``length`` positions (no copy), so every call sees the same cache length and the
    next append writes in place into the same buffers, as a real decode step does. It runs what
    ``generate`` runs per step (:func:`decode_step`)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (1, length + 1), generator=g).to(device)
    cache = attnlib.KVCache()
    cache.reserve(1)
    forward = decode_step(gpt)
    forward(ids[:, :length], cache)    # fill the cache
    tok = ids[:, length:]              # (1, 1)
    held = list(cache.keys), list(cache.values)  # (B, G, length, D): views of the cache's buffers

    def step() -> torch.Tensor:
        out = forward(tok, cache).argmax(dim=-1)
        # back to `length` tokens: the same views as before the step (making new ones would add
        # two dozen slicing ops to what is timed as one decode step)
        cache.keys, cache.values = list(held[0]), list(held[1])
        return out

    return step


def probe_bytes(settings: Settings, calibration: dict | None) -> int:
    """Size of the in-run bandwidth probes: the calibration's tensor (512 MiB in --full, 16x this
    machine's 32 MiB last-level cache; STREAM's rule asks for at least 4x), so that no part of it
    is served from a cache, as no part of GPT-2 small's 495 MB of weights is."""
    if calibration is not None:
        return int(calibration["bandwidth"]["bytes"])
    return {"smoke": 16, "quick": 256, "full": 512}[settings.mode] * 2**20


def weight_bytes_per_token(gpt: torch.nn.Module, cfg) -> int:
    """Bytes of weights a decode step reads: every parameter once (tied ones once), but only one row
    of a learned position table."""
    total = 0
    for name, p in dict(gpt.named_parameters()).items():  # named_parameters() lists a tied weight once
        is_pos_table = "pos" in name and tuple(p.shape) == (cfg.max_len, cfg.d_model)
        total += (p[0] if is_pos_table else p).numel() * p.element_size()
    return total


def run(settings: Settings, *, calibration: dict | None = None, log=print) -> dict:
    """Time generation; return JSON-ready results and targets."""
    rows = []
    for shape, prompt_len, new in RUNS[settings.mode]:
        gpt, hf, cfg = build_pair(shape, settings)
        g = torch.Generator().manual_seed(settings.seed)
        prompt = torch.randint(0, cfg.vocab_size, (1, prompt_len), generator=g).to(settings.device)
        gen_cfg = hf.generation_config
        gen_cfg.eos_token_id, gen_cfg.pad_token_id, gen_cfg.do_sample = None, 0, False
        with torch.inference_mode():
            # same model: the first greedy step's logits agree on all three paths
            cache = attnlib.KVCache()
            first = gpt(prompt, cache=cache).logits[:, -1]
            tol = dict(atol=1e-3, rtol=1e-3) if settings.dtype == "float32" else dict(atol=0.1, rtol=0.05)
            torch.testing.assert_close(first, gpt(prompt).logits[:, -1], **tol)
            torch.testing.assert_close(first, hf(prompt).logits[:, -1], **tol)
            outs = {
                "attnlib_cache": gpt.generate(prompt, new, temperature=0.0, use_cache=True),
                "attnlib_no_cache": gpt.generate(prompt, new, temperature=0.0, use_cache=False),
                "hf_cache": hf.generate(prompt, max_new_tokens=new, do_sample=False, use_cache=True),
            }
            for name, ids in outs.items():
                if tuple(ids.shape) != (1, prompt_len + new):
                    raise AssertionError(f"{name} returned shape {tuple(ids.shape)}, expected (1, {prompt_len + new})")
            agree = {n: float((ids[0, prompt_len:] == outs["attnlib_cache"][0, prompt_len:]).float().mean())
                     for n, ids in outs.items()}
            variants = {
                "attnlib_cache": lambda: gpt.generate(prompt, new, temperature=0.0, use_cache=True),
                "attnlib_no_cache": lambda: gpt.generate(prompt, new, temperature=0.0, use_cache=False),
                "hf_cache": lambda: hf.generate(prompt, max_new_tokens=new, do_sample=False, use_cache=True),
            }
            res = compare(variants, settings, baseline="attnlib_cache")
            profile = None if settings.is_cuda else {
                "attnlib_cache": top_ops(variants["attnlib_cache"]), "hf_cache": top_ops(variants["hf_cache"])}
            # Flatness and bandwidth as paired ratios: a decode step with a short cache (middle of the
            # first window), one with a long cache (middle of the last window), and the copy/sum
            # bandwidth probes, interleaved in the same rounds so a change of load hits all alike.
            window = max(2, new // 8)
            probes = bandwidth_probes(probe_bytes(settings, calibration), settings.device)
            paired = compare({
                "step_first": step_at(gpt, prompt_len + window // 2, cfg.vocab_size, settings.device, settings.seed),
                "step_last": step_at(gpt, prompt_len + new - window // 2, cfg.vocab_size, settings.device, settings.seed),
                **{name: fn for name, (fn, _) in probes.items()},
                "products": products_only(gpt, settings.device),
            }, settings, baseline="step_first")
            step_runs, run_stalls = [], []
            for _ in range(max(3, settings.rounds // 2)):  # same stall filter as compare()
                s0, t0 = cpu_stall_us(), time.perf_counter()
                step_runs.append(decode_steps(gpt, prompt, new, settings.device))
                s1, wall = cpu_stall_us(), time.perf_counter() - t0
                run_stalls.append(None if s0 is None or s1 is None else (s1 - s0) / 1e6 / wall)
        order = sorted(range(len(step_runs)), key=lambda i: run_stalls[i] or 0.0)
        kept = [i for i in order if run_stalls[i] is None or run_stalls[i] <= settings.max_stall]
        if len(kept) < min(settings.min_clean, len(order)):
            kept = order[: min(settings.min_clean, len(order))]
        flat = paired["ratio"]["step_last"]
        wbytes = weight_bytes_per_token(gpt, cfg)
        # decode GB/s over each probe's GB/s, per round: (wbytes / t_step) / (bytes / t_probe);
        # the reference is the fastest probe, so the fraction is the smallest of these
        fracs = {name: wbytes * paired["ratio"][name] / moved for name, (_, moved) in probes.items()}
        rates = {name: moved / paired["median_s"][name] / 1e9 for name, (_, moved) in probes.items()}
        frac = min(fracs.values())
        bw = max(rates.values())
        r_prod = paired["ratio"]["products"]  # bare products' time / decode step's time
        products_frac = frac / r_prod  # the same weight bytes in the products' time
        steps = [statistics.median(col) for col in zip(*(step_runs[i][1] for i in kept))]  # per-step median
        prefill_s = statistics.median(step_runs[i][0] for i in kept)
        _, _, ids, cache = step_runs[-1]
        if not torch.equal(ids, outs["attnlib_cache"]):
            raise AssertionError("the hand decode loop and gpt.generate(use_cache=True) chose different tokens")
        elem = torch.empty((), dtype=settings.torch_dtype).element_size()
        expect_nbytes = 2 * cfg.n_layers * 1 * cache.seq_len * cfg.d_model * elem
        assert cache.seq_len == prompt_len + new, (cache.seq_len, prompt_len, new)
        assert cache.nbytes == expect_nbytes, f"KVCache.nbytes={cache.nbytes} != formula {expect_nbytes}"
        tok_s = {n: new / t for n, t in res["median_s"].items()}
        decode_tok_s = 1.0 / paired["median_s"]["step_first"]
        rows.append({
            "shape": shape, "prompt": prompt_len, "new": new, "config": {k: getattr(cfg, k) for k in
                                                                            ("vocab_size", "d_model", "n_heads", "n_layers")},
            "timing": res, "tokens_per_s": tok_s, "agreement_with_attnlib_cache": agree,
            "cache_speedup": res["ratio"]["attnlib_no_cache"],
            "attnlib_over_hf_tok_s": res["ratio"]["hf_cache"],
            "prefill_s": prefill_s, "step_s": steps, "window": window,
            "step_run_stalls": run_stalls, "step_runs_kept": len(kept), "paired_steps": paired,
            "last_over_first_window": flat,
            "kv_cache": {"seq_len": cache.seq_len, "nbytes": cache.nbytes, "formula": expect_nbytes},
            "profile": profile, "weight_bytes_per_token": wbytes, "decode_tok_s": decode_tok_s,
            "decode_gbs": wbytes * decode_tok_s / 1e9,
            "bandwidth_gbs": bw, "probe_gbs": rates, "fraction_of_bandwidth": frac,
            "products_over_step": r_prod, "products_fraction_of_bandwidth": products_frac,
        })
        log(f"  generate {shape} +{new}: cache speedup {rows[-1]['cache_speedup']:.2f}x, attnlib/HF tok/s "
            f"{rows[-1]['attnlib_over_hf_tok_s']:.2f}x, last/first window {flat:.2f}, decode "
            f"{rows[-1]['decode_gbs']:.1f} GB/s{' (noisy)' if res['noisy'] else ''}")
        del gpt, hf
    targets = []
    for r in rows:
        tag = f"generate {r['shape']} +{r['new']}"
        if r["shape"] in ("tiny", "gpt2-small"):
            targets.append(Target(f"{tag}: cache speedup", r["cache_speedup"], ">=", 12.0,
                                  "target stated for 256 new tokens (--full)" if r["new"] < 256 else ""))
        if r["shape"] in ("tiny", "smoke"):
            targets.append(Target(f"{tag}: attnlib tok/s / HF tok/s", r["attnlib_over_hf_tok_s"], ">=", 2.0,
                                  "Python overhead per step dominates a tiny model"))
        targets.append(Target(f"{tag}: per-token cost last/first window", r["last_over_first_window"], "<=", 1.2))
        if r["shape"] == "gpt2-small":  # tiny weights sit in the CPU caches: not a bandwidth test
            targets.append(Target(f"{tag}: decode weight reads / in-run bandwidth", r["fraction_of_bandwidth"], ">=",
                                  0.85, "weights read once per token vs the fastest probe"))
    return {"runs": rows, "targets": [t.to_dict() for t in targets]}


def table(result: dict) -> str:
    """Medians and ratios as plain text."""
    rows = []
    for r in result["runs"]:
        t = r["tokens_per_s"]
        rows.append([r["shape"], f"{r['prompt']}+{r['new']}", t["attnlib_no_cache"], t["attnlib_cache"], t["hf_cache"],
                     r["cache_speedup"], r["attnlib_over_hf_tok_s"], r["last_over_first_window"], r["decode_gbs"],
                     r["fraction_of_bandwidth"], r["kv_cache"]["nbytes"]])
    return fmt_table(["shape", "prompt+new", "no-cache tok/s", "cache tok/s", "HF tok/s", "cache speedup",
                      "attnlib/HF", "last/first", "decode GB/s", "of bandwidth", "KV bytes"], rows)
