"""Generation: greedy decoding with ``attnlib.KVCache``, without it, and with HF ``generate``.

Per model shape: a 32-token prompt, then ``new`` greedy tokens (temperature 0), batch 1. All
three runs go through one forward: ``gpt.generate`` calls ``gpt(ids, cache=cache)`` at every
step (with the cache: only the newest token; without it: the whole sequence again).

* cache speedup: time without the cache / time with it;
* attnlib tokens/s over HF ``generate`` tokens/s (both cached, same weights, same tokens);
* per-token cost: one decode step with the cache as long as in the middle of the first window of
  new tokens, against one as long as in the middle of the last window, timed in interleaved
  rounds (a paired ratio; about 1 means a flat cost per token: the cache grows, but reading the
  weights dominates). A hand loop also times every step of a real decode, for the plot;
* why decode is memory-bound: a decode step reads every weight once for one token, so it does
  2 FLOPs per 4-byte weight (arithmetic intensity 0.5 FLOP/byte), while a prefill of P tokens
  does 2 P FLOPs per weight read. Weight bytes / step time is compared with the machine's read
  rate (a sum over 256 MiB, timed in the same rounds), and the LM head's share of the step is
  timed alone (one row through the tied embedding matrix);
* the order of a weight's bytes: ``nn.Linear`` stores a weight (out, in); Hugging Face's GPT-2
  stores its projections (in, out) (its ``Conv1D``). ``attnlib_in_out`` is the same attnlib
  model with each projection's weight held (in, out) in memory and read through a transposed
  view (``F.linear`` then multiplies by the (in, out) matrix as it is stored): the same
  modules, arithmetic and bytes, only the order in which a one-row product reads them.
"""
from __future__ import annotations

import copy
import statistics
import time

import torch
import torch.nn.functional as F

import attnlib

from .harness import Settings, Target, compare, fmt_table, synchronize
from .models import build_pair, forward_flops
from .reference import NanoGPT, functional_generate

STEP_RUNS = 3  # hand-timed decode loops per model; the plot shows each step's median over them
REFERENCES = ("smoke", "tiny")  # shapes also decoded by benchmarks.reference's two loops
RUNS = {
    "smoke": [("smoke", 8, 8)],
    "quick": [("tiny", 32, 64), ("gpt2-small", 32, 32)],
    "full": [("tiny", 32, 256), ("gpt2-small", 32, 128)],
}


def decode_steps(gpt: torch.nn.Module, prompt: torch.Tensor, new: int, device: str) -> tuple[list[float], torch.Tensor]:
    """Greedy decoding by hand with the model's own cached forward, timing each step.

    Returns (seconds of each of the ``new`` one-token forwards, ids). The last new token is fed
    too (``generate`` stops before that forward), so every step is timed alike."""
    cache = attnlib.KVCache()
    logits = gpt(prompt, cache=cache, logits_to_keep=1).logits[:, -1]  # prefill: (B, vocab)
    ids, times = prompt, []
    for _ in range(new):
        synchronize(device)
        t0 = time.perf_counter()
        nxt = logits.argmax(dim=-1, keepdim=True)  # (B, 1) greedy
        ids = torch.cat([ids, nxt], dim=1)
        logits = gpt(nxt, cache=cache, logits_to_keep=1).logits[:, -1]  # one token in
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return times, ids


def step_at(gpt: torch.nn.Module, length: int, vocab_size: int, device: str, seed: int):
    """A function that runs one cached decode step with ``length`` tokens in the cache, then puts
    the cache back to ``length`` tokens (KVCache.crop), so every call sees the same length."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (1, length + 1), generator=g).to(device)
    cache = attnlib.KVCache()
    gpt(ids[:, :length], cache=cache)  # fill the cache
    tok = ids[:, length:]

    def step() -> torch.Tensor:
        out = gpt(tok, cache=cache, logits_to_keep=1).logits
        cache.crop(length)
        return out

    return step


def weight_bytes_per_token(gpt: torch.nn.Module) -> int:
    """Bytes of weights a decode step reads: every parameter once (a tied matrix once), but only
    one row of the learned position table."""
    total = 0
    for name, p in gpt.named_parameters():  # named_parameters() lists a tied weight once
        total += (p[0] if name == "embed.pos_emb.weight" else p).numel() * p.element_size()
    return total


def stored_in_out(gpt: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``gpt`` whose projections keep their weights (in, out) in memory, as GPT-2's
    Conv1D does: each ``weight`` is the transposed view of an (in, out) tensor, so it still has
    nn.Linear's (out, in) shape and every product gives the same numbers."""
    other = copy.deepcopy(gpt)
    for m in other.layers.modules():
        if isinstance(m, torch.nn.Linear):
            m.weight = torch.nn.Parameter(m.weight.detach().t().contiguous().t(), requires_grad=False)
    return other


def run(settings: Settings, *, log=print) -> dict:
    """Time generation; return JSON-ready results and targets."""
    rows = []
    for shape, prompt_len, new in RUNS[settings.mode]:
        gpt, hf, cfg = build_pair(shape, settings)
        g = torch.Generator().manual_seed(settings.seed)
        prompt = torch.randint(0, cfg.vocab_size, (1, prompt_len), generator=g).to(settings.device)
        gen_cfg = hf.generation_config
        gen_cfg.eos_token_id, gen_cfg.pad_token_id, gen_cfg.do_sample = None, 0, False
        gpt_in_out = stored_in_out(gpt)
        with torch.inference_mode():
            outs = {
                "attnlib_cache": gpt.generate(prompt, new, temperature=0.0, use_cache=True),
                "attnlib_no_cache": gpt.generate(prompt, new, temperature=0.0, use_cache=False),
                "hf_cache": hf.generate(prompt, max_new_tokens=new, do_sample=False, use_cache=True),
                "attnlib_in_out": gpt_in_out.generate(prompt, new, temperature=0.0, use_cache=True),
            }
            variants = {
                "attnlib_cache": lambda: gpt.generate(prompt, new, temperature=0.0, use_cache=True),
                "attnlib_no_cache": lambda: gpt.generate(prompt, new, temperature=0.0, use_cache=False),
                "hf_cache": lambda: hf.generate(prompt, max_new_tokens=new, do_sample=False, use_cache=True),
                "attnlib_in_out": lambda: gpt_in_out.generate(prompt, new, temperature=0.0, use_cache=True),
            }
            if shape in REFERENCES:  # what 'plain' code buys: modules without checks, then no modules
                nano = NanoGPT(gpt).eval()
                variants["nanogpt_modules"] = lambda: nano.generate(prompt, new)
                variants["functional"] = lambda: functional_generate(gpt, prompt, new)
                outs.update(nanogpt_modules=nano.generate(prompt, new), functional=functional_generate(gpt, prompt, new))
            agree = {n: float((ids[0, prompt_len:] == outs["attnlib_cache"][0, prompt_len:]).float().mean())
                     for n, ids in outs.items()}
            res = compare(variants, settings, baseline="attnlib_cache")
            # Flatness, bandwidth and the LM head as paired ratios in the same rounds.
            window = max(2, new // 8)
            x = torch.randn(256 * 2**20 // 4 if settings.mode != "smoke" else 2**20, device=settings.device)
            row = torch.randn(1, cfg.d_model, device=settings.device, dtype=settings.torch_dtype)
            head = gpt.lm_head.weight
            prefill_ids = torch.randint(0, cfg.vocab_size, (1, prompt_len), generator=g).to(settings.device)
            paired = compare({
                "step_first": step_at(gpt, prompt_len + window // 2, cfg.vocab_size, settings.device, settings.seed),
                "step_last": step_at(gpt, prompt_len + new - window // 2, cfg.vocab_size, settings.device,
                                     settings.seed),
                "read": lambda: x.sum(),
                "lm_head": lambda: F.linear(row, head),
                "prefill": lambda: gpt(prefill_ids, cache=attnlib.KVCache(), logits_to_keep=1).logits,
            }, settings, baseline="step_first")
            step_runs = [decode_steps(gpt, prompt, new, settings.device) for _ in range(STEP_RUNS)]
        if not all(torch.equal(ids, outs["attnlib_cache"]) for _, ids in step_runs):
            raise AssertionError("the hand decode loop and gpt.generate(use_cache=True) chose different tokens")
        step_s = paired["median_s"]["step_first"]
        wbytes = weight_bytes_per_token(gpt)
        read_gbs = x.nbytes / paired["median_s"]["read"] / 1e9
        decode_gbs = wbytes / step_s / 1e9
        prefill_flops = forward_flops(cfg, 1, prompt_len) - 2 * cfg.d_model * cfg.vocab_size * (prompt_len - 1)
        step_flops = forward_flops(cfg, 1, 1) + 4 * cfg.n_layers * (prompt_len + window // 2 - 1) * cfg.d_model
        rows.append({
            "shape": shape, "prompt": prompt_len, "new": new,
            "config": {k: getattr(cfg, k) for k in ("vocab_size", "d_model", "n_heads", "n_layers")},
            "timing": res, "tokens_per_s": {n: new / t for n, t in res["median_s"].items()},
            "agreement_with_attnlib_cache": agree,
            "cache_speedup": res["ratio"]["attnlib_no_cache"],
            "attnlib_over_hf_tok_s": res["ratio"]["hf_cache"],
            "in_out_over_hf_tok_s": res["ratio"]["hf_cache"] / res["ratio"]["attnlib_in_out"],
            "in_out_over_attnlib_tok_s": 1 / res["ratio"]["attnlib_in_out"],
            **({"attnlib_over_nanogpt_tok_s": res["ratio"]["nanogpt_modules"],
                "nanogpt_over_hf_tok_s": res["ratio"]["hf_cache"] / res["ratio"]["nanogpt_modules"],
                "functional_over_hf_tok_s": res["ratio"]["hf_cache"] / res["ratio"]["functional"]}
               if shape in REFERENCES else {}),
            "paired_steps": paired, "window": window,
            "last_over_first_window": paired["ratio"]["step_last"],
            "step_s": [statistics.median(col) for col in zip(*(t for t, _ in step_runs))],
            "weight_bytes_per_token": wbytes, "decode_gbs": decode_gbs, "read_gbs": read_gbs,
            "fraction_of_read_rate": decode_gbs / read_gbs,
            "lm_head_share": paired["ratio"]["lm_head"],
            "decode_gflops": step_flops / step_s / 1e9,
            "prefill_gflops": prefill_flops / paired["median_s"]["prefill"] / 1e9,
            "decode_flop_per_byte": step_flops / wbytes,
            "prefill_flop_per_byte": prefill_flops / wbytes,
        })
        r = rows[-1]
        log(f"  generate {shape} +{new}: cache speedup {r['cache_speedup']:.2f}x, attnlib/HF tok/s "
            f"{r['attnlib_over_hf_tok_s']:.2f}x, last/first window {r['last_over_first_window']:.2f}, decode "
            f"{decode_gbs:.1f} GB/s of {read_gbs:.1f}{' (noisy)' if res['noisy'] else ''}")
        del gpt, hf, gpt_in_out
    targets = []
    for r in rows:
        tag = f"generate {r['shape']} +{r['new']}"
        if r["shape"] in ("tiny", "smoke"):
            # against HF: reported, not a target (DESIGN.md, 2026-12-03: HF's pace moves with
            # the CPU; benchmarks.structure holds generate to a plain loop instead)
            targets += [Target(f"{tag}: attnlib tok/s / nanoGPT-style modules tok/s",
                               r["attnlib_over_nanogpt_tok_s"], ">=", 0.95,
                               "the same modules without checks: what readable modules cost"),
                        Target(f"{tag}: cache speedup", r["cache_speedup"], ">=", 10.0,
                               "stated for 256 new tokens (--full)" if r["new"] < 256 else ""),
                        Target(f"{tag}: per-token cost, last / first window", r["last_over_first_window"],
                               "<=", 1.2, "a flat cost per token")]
    return {"runs": rows, "targets": [t.to_dict() for t in targets]}


def table(result: dict) -> str:
    """Medians and ratios as plain text."""
    rows = []
    for r in result["runs"]:
        t = r["tokens_per_s"]
        rows.append([r["shape"], f"{r['prompt']}+{r['new']}", t["attnlib_no_cache"], t["attnlib_cache"], t["hf_cache"],
                     r["cache_speedup"], r["attnlib_over_hf_tok_s"], r["last_over_first_window"], r["decode_gbs"],
                     r["fraction_of_read_rate"], r["lm_head_share"]])
    return fmt_table(["shape", "prompt+new", "no-cache tok/s", "cache tok/s", "HF tok/s", "cache speedup",
                      "attnlib/HF", "last/first", "decode GB/s", "of read rate", "LM head share"], rows)
