"""SmolLM2-135M in the browser: ``python -m benchmarks.smollm2_browser [--rounds 3] [--out FILE]``.

Measures the book's SmolLM2 lab (``attnlib.viz.llm_lab``) in headless Chromium on this machine,
beside attnlib in Python on the same prompts (one thread each: the page computes on one), and
writes ``benchmarks/results/smollm2_browser.json``; ``python -m benchmarks.report`` puts the
numbers on book/benchmarks.md.

- load: from the click on the button to the model ready: fetching the 98 MB GGUF file from a local
  HTTP server, as the book serves it, and parsing its header (the weights stay in the file's
  buffer: nothing else to prepare). Python: ``attnlib.load_smollm2()`` (reads and dequantizes).
- answer: a 6-token prompt typed into the lab's box, from the last keystroke to the next-token
  probabilities on screen (the page waits 120 ms for typing to pause, included). Python: encode,
  forward, softmax.
- prefill: a 32-token prompt through the model on a fresh KV cache, the next token's logits.
- decode: 32 greedy tokens after it, one at a time with the cache; tokens per second.
- memory: the renderer process's resident memory (the tab) before the click and after the
  measurements, the JavaScript heap (``performance.memory``, Chromium's), and what the page holds
  by its own count (the file, the KV cache).

Each browser number is the median over ``--rounds`` (a fresh page each round); the CPU stall over
the run (Linux PSI) says how busy the shared machine was.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

import attnlib
from attnlib import viz

from .harness import Target, cpu_stall_us, environment, Settings

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "smollm2_browser.json"
SCHEMA = "attnlib-smollm2-browser/1"
PROMPTS6 = ["The capital city of France is", "My favourite colour is light blue", "Once upon a time there was"]
TEXT32 = ("The history of the printing press begins in the fifteenth century, when Johannes "
          "Gutenberg combined movable metal type with an oil-based ink and a wooden press that "
          "printed whole pages")


def serve(folder: Path) -> tuple[str, http.server.ThreadingHTTPServer]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"127.0.0.1:{httpd.server_address[1]}", httpd


def wait(root, test, timeout=600.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = root.get_attribute("data-state")
        if test(st):
            return st
        time.sleep(0.05)
    raise TimeoutError(f"the page did not get there: data-state {root.get_attribute('data-state')!r}")


def renderer_rss(driver_pid: int) -> int | None:
    """Resident bytes of the largest renderer process of this browser (the tab's)."""
    try:
        import psutil
    except ImportError:
        return None
    best = None
    for p in psutil.Process(driver_pid).children(recursive=True):
        try:
            if "--type=renderer" in " ".join(p.cmdline()):
                best = max(best or 0, p.memory_info().rss)
        except psutil.Error:
            continue
    return best


def browser_round(driver, host: str, ids32: list[int]) -> dict:
    from selenium.webdriver.common.by import By

    driver.get(f"http://{host}/book/lab.html")
    root = driver.find_element(By.CSS_SELECTOR, "div.attnlib-llm")
    time.sleep(1.0)
    rss0 = renderer_rss(driver.service.process.pid)  # the tab before the click: the page alone
    root.find_element(By.CSS_SELECTOR, "button.attnlib-llm-load").click()
    wait(root, lambda s: "loaded=1" in s and "busy=0" in s)
    timing = driver.execute_script("return arguments[0].attnlibLLM.timing", root)
    out = {"load_s": timing["load"] / 1e3, "fetch_s": timing["fetch"] / 1e3, "parse_s": timing["parse"] / 1e3,
           "answers": []}
    box = root.find_element(By.CSS_SELECTOR, "textarea.attnlib-llm-text")
    for text in PROMPTS6:
        box.clear()
        wait(root, lambda s: "busy=0" in s)
        time.sleep(0.3)  # the empty box's own update, if any, is done
        box.send_keys(text)
        t = driver.execute_script("return arguments[0].attnlibLLM.timing", root)
        deadline = time.monotonic() + 120
        while (t.get("answerTokens") != 6 or "busy=0" not in root.get_attribute("data-state")) and time.monotonic() < deadline:
            time.sleep(0.05)
            t = driver.execute_script("return arguments[0].attnlibLLM.timing", root)
        out["answers"].append(t["answer"] / 1e3)
        driver.execute_script("arguments[0].attnlibLLM.timing.answerTokens = 0", root)
    b = driver.execute_script("return arguments[0].attnlibLLM.bench(arguments[1], 32)", root, ids32)
    out.update(prefill32_s=b["prefill"] / 1e3, decode_tok_s=len(b["steps"]) / (sum(b["steps"]) / 1e3),
               decoded=b["ids"], cache_bytes=b["cacheBytes"])
    mem = driver.execute_script("return arguments[0].attnlibLLM.memory()", root)
    rss = renderer_rss(driver.service.process.pid)
    out.update(js_heap_bytes=mem["heap"], file_bytes=mem["file"], weight_view_bytes=mem["weights"],
               renderer_rss_bytes=rss, renderer_rss_before_bytes=rss0,
               renderer_rss_added_bytes=None if rss is None or rss0 is None else rss - rss0)
    return out


def python_side(model, tok, ids32: list[int], rounds: int) -> dict:
    """attnlib on the same prompts, one thread: what the page's numbers stand beside."""
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    attnlib.load_smollm2()
    load = time.perf_counter() - t0
    answers, prefills, decodes = [], [], []
    with torch.inference_mode():
        for _ in range(rounds):
            for text in PROMPTS6:
                t0 = time.perf_counter()
                model(torch.tensor([tok.encode(text)]), logits_to_keep=1).logits[0, -1].softmax(-1)
                answers.append(time.perf_counter() - t0)
            cache = attnlib.KVCache()
            t0 = time.perf_counter()
            z = model(torch.tensor([ids32]), cache=cache, logits_to_keep=1).logits[:, -1]
            prefills.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for _ in range(32):
                z = model(z.argmax(-1, keepdim=True), cache=cache, logits_to_keep=1).logits[:, -1]
            decodes.append(32 / (time.perf_counter() - t0))
    wbytes = sum(p.numel() * p.element_size() for p in model.parameters())  # float32, tied head once
    return {"threads": 1, "weight_bytes": wbytes, "load_s": load, "answer_s": statistics.median(answers),
            "prefill32_s": statistics.median(prefills), "decode_tok_s": statistics.median(decodes)}


def run(rounds: int) -> dict:
    from selenium.webdriver.common.by import By  # noqa: F401  (selenium is needed)

    sys.path.insert(0, str(ROOT / "tests"))
    from _browser import chromium_driver

    model, tok = attnlib.load_smollm2()
    ids32 = tok.encode(TEXT32)[:32]
    assert len(ids32) == 32 and all(len(tok.encode(p)) == 6 for p in PROMPTS6)
    stall0, t_start = cpu_stall_us(), time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        (site / "book").mkdir()
        (site / "models").mkdir()
        (site / "models" / attnlib.pretrained.smollm2_path().name).symlink_to(attnlib.pretrained.smollm2_path())
        viz.llm_lab().save(site / "book" / "lab.html")
        host, httpd = serve(site)
        try:
            with chromium_driver("1100,1400") as d:
                d.set_script_timeout(600)
                d.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
                version = d.capabilities.get("browserVersion")
                runs = [browser_round(d, host, ids32) for _ in range(rounds)]
        finally:
            httpd.shutdown()
            httpd.server_close()
    elapsed = time.monotonic() - t_start
    stall = None if stall0 is None else (cpu_stall_us() - stall0) / 1e6 / elapsed
    med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
    with torch.inference_mode():
        want = model.generate(torch.tensor([ids32]), 32, temperature=0.0)[0, 32:].tolist()
    browser = {"chromium": version, "rounds": runs, "load_s": med("load_s"), "fetch_s": med("fetch_s"),
               "parse_s": med("parse_s"), "answer_s": statistics.median(a for r in runs for a in r["answers"]),
               "prefill32_s": med("prefill32_s"), "decode_tok_s": med("decode_tok_s"),
               "js_heap_bytes": max(r["js_heap_bytes"] for r in runs),
               "renderer_rss_bytes": max((r["renderer_rss_bytes"] or 0) for r in runs) or None,
               "renderer_rss_added_bytes": max((r["renderer_rss_added_bytes"] or 0) for r in runs) or None,
               "file_bytes": runs[0]["file_bytes"], "cache_bytes_64": runs[0]["cache_bytes"],
               "same_tokens_as_attnlib": all(r["decoded"] == want for r in runs),
               "cpu_stall": stall}
    python = python_side(model, tok, ids32, rounds)
    targets = [Target("browser: load (fetch + parse), s", browser["load_s"], "<=", 10.0),
               Target("browser: answer after typing a 6-token prompt, s", browser["answer_s"], "<=", 1.5),
               Target("browser: 32-token prefill, s", browser["prefill32_s"], "<=", 3.0),
               Target("browser: decode, tokens/s", browser["decode_tok_s"], ">=", 5.0),
               Target("browser: greedy tokens equal attnlib's", float(browser["same_tokens_as_attnlib"]), ">=", 1.0)]
    env = environment(Settings(mode="quick", threads=1))
    env["machine"] = platform.machine()
    return {"schema": SCHEMA, "env": env, "settings": {"rounds": rounds, "prompts6": PROMPTS6, "text32": TEXT32},
            "browser": browser, "python": python, "targets": [t.to_dict() for t in targets]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    doc = run(args.rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    b, p = doc["browser"], doc["python"]
    print(f"browser: load {b['load_s']:.1f} s, answer {b['answer_s']:.2f} s, prefill32 {b['prefill32_s']:.2f} s, "
          f"decode {b['decode_tok_s']:.1f} tok/s, heap {b['js_heap_bytes'] / 1e6:.0f} MB, stall {b['cpu_stall']}")
    print(f"python:  load {p['load_s']:.1f} s, answer {p['answer_s']:.2f} s, prefill32 {p['prefill32_s']:.2f} s, "
          f"decode {p['decode_tok_s']:.1f} tok/s")
    for t in doc["targets"]:
        print(f"  {t['name']}: {t['value']:.3g} {t['op']} {t['limit']:g}: {'met' if t['met'] else 'MISSED'}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
