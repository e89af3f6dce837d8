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
- memory: the tab's renderer process, its unique memory (USS) before the click and after the
  measurements; the JavaScript heap (``performance.memory``, Chromium's) and the WebAssembly
  memory (the file and the products' scratch space).

Each browser number is the median over ``--rounds`` (a fresh page each round). Beside each time,
the CPU time it took (the renderer process's, read with psutil; ``time.process_time`` in Python):
on a shared machine the wall time grows with the other jobs, the CPU time much less, so it says
what the step costs one core. The CPU stall over the run (Linux PSI) says how busy the machine was.
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


def renderers(driver_pid: int) -> dict:
    """The browser's renderer processes, {pid: psutil.Process} ({} without psutil)."""
    try:
        import psutil
    except ImportError:
        return {}
    out = {}
    for p in psutil.Process(driver_pid).children(recursive=True):
        try:
            if "--type=renderer" in " ".join(p.cmdline()):
                out[p.pid] = p
        except psutil.Error:
            continue
    return out


def cpu_s(driver_pid: int) -> float | None:
    """Seconds of CPU the renderers have used (user + system): what the page's work cost a core,
    however busy the machine was while it ran (idle renderers add nothing)."""
    procs = renderers(driver_pid)
    return sum(sum(p.cpu_times()[:2]) for p in procs.values()) if procs else None


def uss(driver_pid: int) -> dict:
    """{pid: unique bytes} of the renderers: the memory a process holds that no other shares
    (resident memory also counts the libraries every process maps)."""
    return {pid: p.memory_full_info().uss for pid, p in renderers(driver_pid).items()}


def browser_round(driver, host: str, ids32: list[int]) -> dict:
    from selenium.webdriver.common.by import By

    pid = driver.service.process.pid
    driver.get(f"http://{host}/book/lab.html")
    root = driver.find_element(By.CSS_SELECTOR, "div.attnlib-llm")
    time.sleep(1.0)
    uss0, c0 = uss(pid), cpu_s(pid)  # the tab before the click: the page alone
    root.find_element(By.CSS_SELECTOR, "button.attnlib-llm-load").click()
    wait(root, lambda s: "loaded=1" in s and "busy=0" in s)
    timing = driver.execute_script("return arguments[0].attnlibLLM.timing", root)
    out = {"load_s": timing["load"] / 1e3, "fetch_s": timing["fetch"] / 1e3, "parse_s": timing["parse"] / 1e3,
           "load_cpu_s": None if c0 is None else cpu_s(pid) - c0,  # and the first 5-token answer
           "accel": timing["accel"], "answers": [], "answers_cpu": []}
    box = root.find_element(By.CSS_SELECTOR, "textarea.attnlib-llm-text")
    for text in PROMPTS6:
        box.clear()
        wait(root, lambda s: "busy=0" in s)
        time.sleep(0.3)  # the empty box's own update, if any, is done
        c0 = cpu_s(pid)
        box.send_keys(text)
        t = driver.execute_script("return arguments[0].attnlibLLM.timing", root)
        deadline = time.monotonic() + 120
        while (t.get("answerTokens") != 6 or "busy=0" not in root.get_attribute("data-state")) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
            t = driver.execute_script("return arguments[0].attnlibLLM.timing", root)
        out["answers"].append(t["answer"] / 1e3)
        out["answers_cpu"].append(None if c0 is None else cpu_s(pid) - c0)
        driver.execute_script("arguments[0].attnlibLLM.timing.answerTokens = 0", root)
    time.sleep(1.0)  # the logit lens of the last answer is computed after it: let it finish
    bench = "return arguments[0].attnlibLLM.bench(arguments[1], arguments[2])"
    c0 = cpu_s(pid)
    p = driver.execute_script(bench, root, ids32, 0)
    c1 = cpu_s(pid)
    b = driver.execute_script(bench, root, ids32, 32)
    c2 = cpu_s(pid)
    out.update(prefill32_s=p["prefill"] / 1e3, decode_tok_s=len(b["steps"]) / (sum(b["steps"]) / 1e3),
               decoded=b["ids"], cache_bytes=b["cacheBytes"])
    if c0 is not None:  # the second call's prefill is the first call again: take it off
        out.update(prefill32_cpu_s=c1 - c0, decode_cpu_tok_s=len(b["steps"]) / max((c2 - c1) - (c1 - c0), 1e-9))
    mem = driver.execute_script("return arguments[0].attnlibLLM.memory()", root)
    now = uss(pid)
    tab = max(now, key=now.get) if now else None  # the tab holds the model: the largest renderer
    out.update(js_heap_bytes=mem["heap"], file_bytes=mem["file"], weight_view_bytes=mem["weights"],
               wasm_memory_bytes=mem["wasmMemory"], tab_bytes=now.get(tab), tab_before_bytes=uss0.get(tab),
               tab_added_bytes=now[tab] - uss0[tab] if tab in uss0 else None)
    return out


def python_side(model, tok, ids32: list[int], rounds: int) -> dict:
    """attnlib on the same prompts, one thread: what the page's numbers stand beside. Wall time,
    and CPU time (time.process_time) where the machine is shared."""
    torch.set_num_threads(1)
    t0, c0 = time.perf_counter(), time.process_time()
    attnlib.load_smollm2()
    load, load_cpu = time.perf_counter() - t0, time.process_time() - c0
    runs: dict[str, list[float]] = {k: [] for k in ("answer", "answer_cpu", "prefill", "prefill_cpu",
                                                     "decode", "decode_cpu")}

    def timed(name, fn):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        runs[name].append(time.perf_counter() - t0)
        runs[name + "_cpu"].append(time.process_time() - c0)
        return out

    with torch.inference_mode():
        for _ in range(rounds):
            for text in PROMPTS6:
                timed("answer", lambda: model(torch.tensor([tok.encode(text)]), logits_to_keep=1)
                      .logits[0, -1].softmax(-1))
            cache = attnlib.KVCache()
            z = timed("prefill", lambda: model(torch.tensor([ids32]), cache=cache, logits_to_keep=1)
                      .logits[:, -1])

            def decode(z=z):
                for _ in range(32):
                    z = model(z.argmax(-1, keepdim=True), cache=cache, logits_to_keep=1).logits[:, -1]
            timed("decode", decode)
    med = {k: statistics.median(v) for k, v in runs.items()}
    wbytes = sum(p.numel() * p.element_size() for p in model.parameters())  # float32, tied head once
    return {"threads": 1, "weight_bytes": wbytes, "load_s": load, "load_cpu_s": load_cpu,
            "answer_s": med["answer"], "answer_cpu_s": med["answer_cpu"], "prefill32_s": med["prefill"],
            "prefill32_cpu_s": med["prefill_cpu"], "decode_tok_s": 32 / med["decode"],
            "decode_cpu_tok_s": 32 / med["decode_cpu"]}


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
               "prefill32_s": med("prefill32_s"), "decode_tok_s": med("decode_tok_s"), "accel": runs[0]["accel"],
               "answer_cpu_s": statistics.median(a for r in runs for a in r["answers_cpu"] if a is not None)
               if runs[0]["answers_cpu"][0] is not None else None,
               **({k: med(k) for k in ("load_cpu_s", "prefill32_cpu_s", "decode_cpu_tok_s")}
                  if runs[0].get("prefill32_cpu_s") is not None else {}),
               "js_heap_bytes": max(r["js_heap_bytes"] for r in runs),
               "tab_bytes": max((r["tab_bytes"] or 0) for r in runs) or None,
               "tab_added_bytes": max((r["tab_added_bytes"] or 0) for r in runs) or None,
               "wasm_memory_bytes": runs[0]["wasm_memory_bytes"],
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
    b, p = doc["browser"], doc["python"]
    return save(doc, args.out, [
        f"browser: load {b['load_s']:.1f} s, answer {b['answer_s']:.2f} s, prefill32 {b['prefill32_s']:.2f} s, "
        f"decode {b['decode_tok_s']:.1f} tok/s, tab {(b['tab_bytes'] or 0) / 1e6:.0f} MB, stall {b['cpu_stall']}",
        f"python:  load {p['load_s']:.1f} s, answer {p['answer_s']:.2f} s, prefill32 {p['prefill32_s']:.2f} s, "
        f"decode {p['decode_tok_s']:.1f} tok/s"])


def save(doc: dict, out: Path, summary: list[str]) -> int:
    """Write a browser benchmark's record to ``out`` and print its summary and targets."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    for line in summary:
        print(line)
    for t in doc["targets"]:
        print(f"  {t['name']}: {t['value']:.3g} {t['op']} {t['limit']:g}: {'met' if t['met'] else 'MISSED'}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
