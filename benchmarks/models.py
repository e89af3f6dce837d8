"""Model forward: attnlib ``GPT`` against Hugging Face ``GPT2LMHeadModel`` with the same weights.

Both models are built from a config (no download) and share one set of weights: the HF model is
initialised at random, then attnlib's GPT is loaded from it (``GPT.from_hf``), and their logits
are checked equal before anything is timed. HF runs with ``attn_implementation="sdpa"`` (the
baseline) and ``"eager"`` (its explicit softmax path).

Throughput is reported as GFLOP/s. FLOPs of one
forward of B x T tokens: 2 x (matmul weights) x B x T for the linear layers and the LM head, plus
4 x L x B x T^2 x C for QK^T and AV (dense count: a causal kernel may skip the upper half).

On CUDA a GPT-2-small training step (forward + backward + AdamW, bf16 autocast) is timed with and
without ``torch.compile``; its TFLOP/s (3x forward FLOPs) and MFU against the GPU's nominal dense
bf16 peak are reported.
"""
from __future__ import annotations

import copy

import torch

import attnlib

from .harness import Settings, Target, compare, fmt_table

SHAPES = {  # GPT-2 layouts (pre-norm, tanh GELU, learned positions, tied head) of four sizes
    "smoke": dict(vocab_size=128, d_model=32, n_heads=2, n_layers=2, max_len=64),
    "tiny": dict(vocab_size=8192, d_model=256, n_heads=4, n_layers=4, max_len=1024),
    "6x384": dict(vocab_size=50257, d_model=384, n_heads=6, n_layers=6, max_len=1024),
    "gpt2-small": dict(vocab_size=50257, d_model=768, n_heads=12, n_layers=12, max_len=1024),
}
RUNS = {
    "smoke": [("smoke", 16)],
    "quick": [("6x384", 512)],
    "full": [("tiny", 512), ("6x384", 512), ("gpt2-small", 512)],
}
# Nominal dense bf16 tensor-core peaks (TFLOP/s) for MFU.
GPU_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10": 125.0, "T4": 65.0}


def build_pair(shape: str, settings: Settings) -> tuple[torch.nn.Module, torch.nn.Module, attnlib.TransformerConfig]:
    """An HF GPT2LMHeadModel (random init) and an attnlib GPT holding the same weights."""
    from transformers import GPT2Config, GPT2LMHeadModel

    s = SHAPES[shape]
    hf_cfg = GPT2Config(vocab_size=s["vocab_size"], n_positions=s["max_len"], n_embd=s["d_model"],
                        n_layer=s["n_layers"], n_head=s["n_heads"], activation_function="gelu_new",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
                        bos_token_id=s["vocab_size"] - 1, eos_token_id=s["vocab_size"] - 1)
    torch.manual_seed(settings.seed)
    hf = GPT2LMHeadModel._from_config(hf_cfg, attn_implementation="sdpa").eval()
    gpt = attnlib.GPT.from_hf(hf).eval()
    cfg = gpt.cfg
    dev, dt = settings.device, settings.torch_dtype
    return gpt.to(dev, dt), hf.to(dev, dt), cfg


def eager_copy(hf: torch.nn.Module) -> torch.nn.Module:
    """The same HF model with its explicit-softmax attention."""
    eager = copy.deepcopy(hf)
    eager.set_attn_implementation("eager")
    return eager


def matmul_params(cfg) -> int:
    """Weights that take part in a matmul per token: attention and FFN projections and the LM head."""
    C, L, V = cfg.d_model, cfg.n_layers, cfg.vocab_size
    return L * (4 * C * C + 2 * C * cfg.d_ff) + C * V


def forward_flops(cfg, B: int, T: int) -> int:
    """FLOPs of one forward over B x T tokens (dense attention count)."""
    return 2 * matmul_params(cfg) * B * T + 4 * cfg.n_layers * B * T * T * cfg.d_model


def top_ops(fn, n: int = 8) -> dict:
    """Where the time goes in one call: the ``n`` aten ops with the most self CPU time, and the
    total number of aten op calls (a count that, unlike time, does not depend on the load)."""
    from torch.profiler import ProfilerActivity, profile

    from attnlib.utils import _quiet_stderr  # the profiler's C++ start/stop lines

    fn()
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    avgs = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in avgs) or 1
    top = [{"op": e.key, "self_ms": e.self_cpu_time_total / 1e3, "share": e.self_cpu_time_total / total,
            "calls": e.count} for e in avgs[:n]]
    return {"top": top, "aten_calls": sum(e.count for e in avgs if e.key.startswith("aten::"))}


def run(settings: Settings, *, log=print) -> dict:
    """Time forward passes; return JSON-ready results and targets."""
    rows = []
    for shape, T in RUNS[settings.mode]:
        gpt, hf, cfg = build_pair(shape, settings)
        hf_eager = eager_copy(hf)
        g = torch.Generator().manual_seed(settings.seed)
        ids = torch.randint(0, cfg.vocab_size, (1, T), generator=g).to(settings.device)
        with torch.inference_mode():
            ref = hf(ids).logits
            tol = dict(atol=1e-3, rtol=1e-3) if settings.dtype == "float32" else dict(atol=0.1, rtol=0.05)
            torch.testing.assert_close(gpt(ids).logits, ref, **tol)
            torch.testing.assert_close(hf_eager(ids).logits, ref, **tol)
        variants = {
            "hf_sdpa": lambda: hf(ids).logits,
            "attnlib": lambda: gpt(ids).logits,
            "hf_eager": lambda: hf_eager(ids).logits,
        }
        with torch.inference_mode():
            res = compare(variants, settings, baseline="hf_sdpa")
            profile = {"attnlib": top_ops(variants["attnlib"]), "hf_sdpa": top_ops(variants["hf_sdpa"])} \
                if not settings.is_cuda else None
        flops = forward_flops(cfg, 1, T)
        gflops = {n: flops / t / 1e9 for n, t in res["median_s"].items()}
        rows.append({
            "shape": shape, "T": T, "B": 1, "config": SHAPES[shape], "flops": flops, "timing": res,
            "attnlib_over_hf": res["ratio"]["attnlib"], "eager_over_sdpa": res["ratio"]["hf_eager"],
            "gflops": gflops,
            "profile": profile,
        })
        log(f"  forward {shape} T={T}: attnlib/HF-sdpa {res['ratio']['attnlib']:.3f}x, HF eager/sdpa "
            f"{res['ratio']['hf_eager']:.3f}x, attnlib {gflops['attnlib']:.1f} GFLOP/s{' (noisy)' if res['noisy'] else ''}")
        del gpt, hf, hf_eager
    targets = [Target(f"forward {r['shape']} T={r['T']}: attnlib time / HF time", r["attnlib_over_hf"], "<=", 1.0,
                      "same weights, both on torch's SDPA") for r in rows if r["shape"] in ("6x384", "smoke")]
    out = {"runs": rows, "targets": [t.to_dict() for t in targets]}
    if settings.is_cuda:  # pragma: no cover - needs a GPU
        out["train_step"] = train_step(settings, log=log)
    return out


def train_step(settings: Settings, *, log=print, compile_too: bool = True) -> dict:
    """GPT-2-small training step in bf16 autocast, eager and compiled: TFLOP/s and MFU.

    Meant for CUDA; on the CPU (``benchmarks.gpu --dry-run``, smoke size, ``compile_too=False``)
    it only exercises the code path."""
    cuda = settings.is_cuda
    name = torch.cuda.get_device_name() if cuda else "cpu"
    nominal = next((v for k, v in GPU_PEAK_TFLOPS.items() if k in name), None)
    B, T = (8, 1024) if settings.mode != "smoke" else (2, 64)
    shape = "gpt2-small" if settings.mode != "smoke" else "smoke"
    out = {"B": B, "T": T, "device_name": name, "nominal_peak_tflops": nominal}
    for compiled in (False, True) if compile_too else (False,):
        gpt, _, cfg = build_pair(shape, Settings(**{**settings.to_dict(), "dtype": "float32"}))
        gpt.train()
        opt = torch.optim.AdamW(gpt.parameters(), lr=1e-4, fused=cuda)
        model = torch.compile(gpt) if compiled else gpt
        ids = torch.randint(0, cfg.vocab_size, (B, T + 1), device=settings.device)

        def step() -> None:
            with torch.autocast(torch.device(settings.device).type, dtype=torch.bfloat16):
                loss = model(ids[:, :-1], targets=ids[:, 1:].contiguous()).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        res = compare({"step": step}, settings)
        tflops = 3 * forward_flops(cfg, B, T) / res["median_s"]["step"] / 1e12
        key = "compiled" if compiled else "eager"
        out[key] = {"step_s": res["median_s"]["step"], "tflops": tflops,
                    "mfu": tflops / nominal if nominal else None, "timing": res}
        log(f"  train step ({key}): {tflops:.1f} TFLOP/s" + (f", MFU {tflops / nominal:.1%}" if nominal else ""))
        del gpt, model, opt
    return out


def table(result: dict) -> str:
    """Medians and ratios as plain text."""
    rows = []
    for r in result["runs"]:
        m = r["timing"]["median_s"]
        rows.append([r["shape"], r["T"], m["hf_sdpa"] * 1e3, m["attnlib"] * 1e3, m["hf_eager"] * 1e3,
                     r["attnlib_over_hf"], r["eager_over_sdpa"], r["gflops"]["attnlib"]])
    text = fmt_table(["shape", "T", "HF sdpa ms", "attnlib ms", "HF eager ms", "attnlib/HF", "eager/sdpa",
                      "attnlib GFLOP/s"], rows)
    if "train_step" in result:
        ts = result["train_step"]
        text += "\n\n" + fmt_table(["train step", "s", "TFLOP/s", "MFU"],
                                   [[k, ts[k]["step_s"], ts[k]["tflops"], ts[k]["mfu"]] for k in ("eager", "compiled")
                                    if k in ts])
    return text
