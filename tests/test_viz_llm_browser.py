"""SmolLM2-135M in a real headless Chromium (viz.llm_lab), held equal to attnlib's SmolLM2: the
page fetches the GGUF file only when its button is pressed, then its tokens equal GGUFTokenizer's,
its next-token probabilities and one layer's attention weights equal attnlib's, a head switch
equals attnlib.heads_off, the logit lens and greedy generation with the KV cache equal attnlib's,
and the chat's greedy reply equals model.generate; the products run in WebAssembly SIMD, and the
plain-JavaScript path (browsers without it) equals attnlib too. Nothing is requested from another host, and a
missing or wrong file gives a message, not a script error.

The page and a link to the package's GGUF file are served from a temporary folder over HTTP (a
page opened as a file may not fetch). The model is loaded once for the module (the browser's copy
too), and the prompts are short: the module takes about a minute on two quiet cores.
Screenshots go to artifacts/screenshots/llm_*.png (git-ignored).
"""
from __future__ import annotations

import functools
import http.server
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib
from attnlib import viz

pytestmark = pytest.mark.slow

pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
pytest.importorskip("gguf", reason="the gguf package reads the model file")
try:
    GGUF = attnlib.pretrained.smollm2_path()
except (ModuleNotFoundError, FileNotFoundError) as e:
    pytest.skip(f"SmolLM2 is not installed: {e}", allow_module_level=True)
from _axe import JS_CELLTEXT, failures, scan  # noqa: E402
from _axe import load as load_axe  # noqa: E402
from _browser import chromium_driver, require_browser  # noqa: E402
from _viz_pages import EVIL, SHOTS  # noqa: E402

require_browser()
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

torch.set_num_threads(2)
MODEL, TOK = attnlib.load_smollm2()
PROMPTS = ["The capital of France is", "def add(a, b):\n    return", "Café au lait 🍵 costs"]
MIXED = "Naïve café — déjà vu! 🎉👩‍👩‍👧 def f(x): return x**2  # 12345\n\t<|im_start|>ok"
INDUCTION = [(17, 3), (17, 4), (17, 5), (18, 6), (18, 7), (23, 2), (23, 7)]
TOL_P, TOL_ATT = 1e-3, 1e-4


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder served over HTTP: the lab page (book/), a bad-source page, and models/ holding a
    link to the package's GGUF file (as the book's build places a copy)."""
    root = tmp_path_factory.mktemp("llm_site")
    (root / "book").mkdir()
    (root / "models").mkdir()
    (root / "models" / GGUF.name).symlink_to(GGUF)
    (root / "models" / "not_a_model.gguf").write_bytes(b"<html>this is a page, not a model</html>")
    lab = viz.llm_lab(MODEL, TOK, prompt=PROMPTS[0], title=f"SmolLM2 {EVIL}",
                      experiments=[{"sentence": "induction", "text": "blue kettle orbit lemon sparrow. "
                                    "blue kettle orbit lemon", "off": INDUCTION, "show": (18, 6)}])
    lab.save(root / "book" / "lab.html")
    viz.llm_lab(src="../models/missing.gguf", file_bytes=10).save(root / "book" / "missing.html")
    viz.llm_lab(src="../models/not_a_model.gguf", file_bytes=10).save(root / "book" / "wrong.html")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def requests(d) -> list[str]:
    urls = []
    for entry in d.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def wait(d, root, test, timeout=240.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = root.get_attribute("data-state")
        if test(st):
            return st
        time.sleep(0.2)
    raise AssertionError(f"timed out; data-state {root.get_attribute('data-state')!r}")


@pytest.fixture(scope="module")
def lab(site):
    """The lab page, before and after its button: (driver, root, requests before the click)."""
    with chromium_driver("1100,1400") as d:
        d.set_script_timeout(300)
        d.execute_cdp_cmd("Network.enable", {})
        d.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        d.get(f"http://{site}/book/lab.html")
        root = d.find_element(By.CSS_SELECTOR, "div.attnlib-llm")
        time.sleep(1.0)  # a page that fetched by itself would have started by now
        before = requests(d)
        weight = d.execute_script("const n = performance.getEntriesByType('navigation')[0];"
                                  "return n.decodedBodySize + performance.getEntriesByType('resource')"
                                  ".reduce((a, r) => a + r.decodedBodySize, 0)")
        button = root.find_element(By.CSS_SELECTOR, "button.attnlib-llm-load")
        name = button.text
        SHOTS.mkdir(parents=True, exist_ok=True)
        d.save_screenshot(str(SHOTS / "llm_before_load.png"))
        button.click()
        wait(d, root, lambda s: "loaded=1" in s and "busy=0" in s)
        yield d, root, {"before": before, "weight": weight, "button": name}
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]]
        assert errors == [], errors


def call(d, root, fn: str, *args):
    return d.execute_script(f"return arguments[0].attnlibLLM.{fn}(...Array.from(arguments).slice(1))", root, *args)


def test_nothing_is_fetched_before_the_click_and_only_from_the_page(lab, site):
    d, root, info = lab
    assert info["button"] == "Load SmolLM2-135M (98 MB)"
    assert not any(u.endswith(".gguf") for u in info["before"]), info["before"]
    assert info["weight"] < 1_000_000, f"the page weighs {info['weight']} bytes before the click"
    urls = requests(d)
    assert any(u == f"http://{site}/models/{GGUF.name}" for u in urls), urls
    local = (f"http://{site}/", "data:", "blob:", "about:", "chrome:", "chrome-extension:")
    off = [u for u in info["before"] + urls if not u.startswith(local)]
    assert off == [], off
    assert d.execute_script("return window.__pwned === undefined"), "injected script ran"
    mem = call(d, root, "memory")
    assert mem["accel"] == "wasm-simd", "Chromium has WebAssembly SIMD: the products run there"
    # the weights stay as the file stores them: the tab holds about the file's size, no float32 copy
    assert mem["weights"] < GGUF.stat().st_size and mem["file"] == GGUF.stat().st_size
    if mem["heap"] is not None:
        assert mem["heap"] < 300e6, f"JavaScript heap {mem['heap'] / 1e6:.0f} MB"
    d.save_screenshot(str(SHOTS / "llm_loaded.png"))


def test_tokens_equal_gguf_tokenizer(lab):
    d, root, _ = lab
    for text in [MIXED, "  two  spaces\n\nand tabs\t!", "日本語 한국어 ٣٤٥ x²"]:
        assert call(d, root, "encode", text) == TOK.encode(text), text
        assert call(d, root, "decode", TOK.encode(text)) == text
    msgs = [{"role": "user", "content": "Hi! 👋"}]
    assert call(d, root, "chat", msgs) == TOK.chat(msgs)


def test_next_token_probabilities_and_attention_equal_attnlib(lab):
    d, root, _ = lab
    for text in PROMPTS:
        ids = TOK.encode(text)
        got = np.array(call(d, root, "probs", ids))
        with torch.no_grad():
            out = MODEL(torch.tensor([ids]), need_weights=True)
        want = out.logits[0, -1].double().softmax(-1).numpy()
        assert np.abs(got - want).max() <= TOL_P, (text, np.abs(got - want).max())
        assert got.argmax() == want.argmax()
    layer = 18  # the last prompt's: every head of one layer, every query
    att = call(d, root, "attention", ids, layer)
    want = out.attentions[layer][0].numpy()
    T = len(ids)
    got = np.array([[row + [0.0] * (T - len(row)) for row in h] for h in att])
    assert got.shape == want.shape and np.abs(got - want).max() <= TOL_ATT


def test_the_page_shows_the_probabilities_and_a_head_switch_equals_heads_off(lab):
    d, root, _ = lab
    bars = root.find_elements(By.CSS_SELECTOR, ".attnlib-llm-probs .attnlib-bar")
    assert bars[0].text.split() == ["Paris", "0.77"], bars[0].text
    ids = TOK.encode(PROMPTS[0])
    layer = root.find_element(By.CSS_SELECTOR, ".attnlib-llm-att input[type=range][aria-label=layer]")
    for _ in range(18):
        layer.send_keys(Keys.ARROW_RIGHT)
    switch = root.find_element(By.CSS_SELECTOR, "button[aria-label='layer 18, head 6']")
    assert switch.get_attribute("aria-pressed") == "false"
    switch.click()
    st = wait(d, root, lambda s: "off=18.6" in s and "busy=0" in s)
    switch = root.find_element(By.CSS_SELECTOR, "button[aria-label='layer 18, head 6']")
    assert switch.get_attribute("aria-pressed") == "true" and "layer=18" in st
    with torch.no_grad(), attnlib.heads_off(MODEL, [(18, 6)]):
        want = MODEL(torch.tensor([ids])).logits[0, -1].double().softmax(-1).numpy()
    shown = {int(b.get_attribute("data-token")): float(b.get_attribute("data-p"))
             for b in root.find_elements(By.CSS_SELECTOR, ".attnlib-llm-probs .attnlib-bar")}
    assert all(abs(p - want[i]) <= TOL_P for i, p in shown.items()), shown
    off = [[1] * 9 for _ in range(30)]
    for l, h in INDUCTION:
        off[l][h] = 0
    got = np.array(call(d, root, "probs", ids, off))
    with torch.no_grad(), attnlib.heads_off(MODEL, INDUCTION):
        want = MODEL(torch.tensor([ids])).logits[0, -1].double().softmax(-1).numpy()
    assert np.abs(got - want).max() <= TOL_P
    root.find_element(By.CSS_SELECTOR, "button.attnlib-lab-allon").click()
    wait(d, root, lambda s: "off=none" in s and "busy=0" in s)
    d.save_screenshot(str(SHOTS / "llm_head_switch.png"))


def test_logit_lens_and_generation_equal_attnlib(lab):
    d, root, _ = lab
    lens = d.find_element(By.CSS_SELECTOR, ".attnlib-llm-lens")
    wait(d, lens, lambda s: "pos=4" in s and "off=none" in s)
    cells = lens.find_elements(By.CSS_SELECTOR, "td.attnlib-llm-lenscell")
    ids = TOK.encode(PROMPTS[0])
    stream = []
    hooks = [MODEL.embed.register_forward_hook(lambda m, a, o: stream.append(o))]
    hooks += [layer.register_forward_hook(lambda m, a, o: stream.append(o[0])) for layer in MODEL.layers]
    try:
        with torch.no_grad():
            MODEL(torch.tensor([ids]))
            want = [MODEL.lm_head(MODEL.norm_f(x[0, -1])).double().softmax(-1) for x in stream]
    finally:
        for h in hooks:
            h.remove()
    assert len(cells) == 4 * 31
    for k in range(31):  # each row: the three most likely tokens, then the followed one (" Paris")
        for j in range(4):
            c = cells[4 * k + j]
            tok_id, value = int(c.get_attribute("data-token")), float(c.get_attribute("data-value"))
            assert abs(value - float(want[k][tok_id])) <= TOL_P
            if j == 0:
                assert tok_id == int(want[k].argmax())
    # generation, temperature 0 (the page's default): the cached steps give attnlib's greedy tokens
    gen = d.find_element(By.CSS_SELECTOR, ".attnlib-llm-gen")
    gen.find_element(By.CSS_SELECTOR, "button.attnlib-llm-many").click()
    wait(d, gen, lambda s: "generated=8" in s and "busy=0" in s)
    got = [int(x) for x in gen.find_element(By.CSS_SELECTOR, "[data-ids]").get_attribute("data-ids").split(",")]
    assert got == MODEL.generate(torch.tensor([ids]), 8, temperature=0.0)[0, len(ids):].tolist()
    assert "generated=8" in root.get_attribute("data-state")
    d.save_screenshot(str(SHOTS / "llm_generated.png"))


def test_greedy_chat_reply_equals_generate(lab):
    d, root, _ = lab
    chat = d.find_element(By.CSS_SELECTOR, ".attnlib-llm-chat")
    question = chat.find_element(By.CSS_SELECTOR, "textarea")
    question.clear()
    question.send_keys("Name one fruit.")
    chat.find_element(By.CSS_SELECTOR, "button.attnlib-llm-send").click()
    st = wait(d, chat, lambda s: "turns=1" in s and "busy=0" in s)
    got = [int(x) for x in chat.find_element(By.CSS_SELECTOR, "[data-ids]").get_attribute("data-ids").split(",")]
    prompt = TOK.chat([{"role": "user", "content": "Name one fruit."}])
    want = MODEL.generate(torch.tensor([prompt]), len(got) + 1, temperature=0.0)[0, len(prompt):].tolist()
    assert want[-1] == TOK.eos_id and got == want[:-1], (TOK.decode(got), TOK.decode(want))
    assert f"cache={len(prompt) + len(got)}" in st
    shown = chat.find_elements(By.CSS_SELECTOR, ".attnlib-llm-msg-assistant .attnlib-llm-said")[-1].text
    assert shown == TOK.decode(got).strip()
    d.save_screenshot(str(SHOTS / "llm_chat.png"))


def test_the_loaded_lab_passes_axe_light_and_dark(lab):
    """axe's contrast and control rules (tests/_axe.py, as in test_book_a11y_browser, which sees
    the book's lab only before its model loads) over the loaded lab, after the tests above have
    filled its panels: probabilities, attention with a head switched and back, lens, chat."""
    d, root, _ = lab
    load_axe(d)
    found, cells = [], 0
    for theme in ("light", "dark", "light"):
        d.execute_script("document.documentElement.dataset.theme = arguments[0]", theme)
        time.sleep(0.3)
        result = scan(d, "div.attnlib-llm")
        svg = d.execute_script(JS_CELLTEXT, "div.attnlib-llm")
        cells += svg["n"]
        assert result["roots"] == 1
        found += [f"[{theme}] {b['rule']}: {b['target']} :: {b['why']} :: {b['html']}"
                  for b in failures(result) + svg["bad"]]
    print(f"axe over the loaded lab: {len(found)} failures, {cells} SVG cell values measured")
    if found:
        d.save_screenshot(str(SHOTS / "llm_a11y_failure.png"))
    assert not found, f"{len(found)} accessibility failures:\n" + "\n".join(found)


def test_the_plain_javascript_path_equals_attnlib_too(site):
    """Where a browser has no WebAssembly SIMD, the products run in weights.js's JavaScript."""
    with chromium_driver("800,900") as d:
        d.set_script_timeout(300)
        d.get(f"http://{site}/book/lab.html")
        root = d.find_element(By.CSS_SELECTOR, "div.attnlib-llm")
        d.execute_script("window.attnlibNoWasm = true")
        root.find_element(By.CSS_SELECTOR, "button.attnlib-llm-load").click()
        wait(d, root, lambda s: "loaded=1" in s and "busy=0" in s)
        assert call(d, root, "memory")["accel"] == "javascript"
        ids = TOK.encode(PROMPTS[1])
        got = np.array(call(d, root, "probs", ids))
        with torch.no_grad():
            want = MODEL(torch.tensor([ids])).logits[0, -1].double().softmax(-1).numpy()
        assert np.abs(got - want).max() <= TOL_P


@pytest.mark.parametrize("page, says", [("missing", "404"), ("wrong", "not a GGUF file")])
def test_a_missing_or_wrong_file_gives_a_message(site, page, says):
    with chromium_driver("800,900") as d:
        d.get(f"http://{site}/book/{page}.html")
        root = d.find_element(By.CSS_SELECTOR, "div.attnlib-llm")
        root.find_element(By.CSS_SELECTOR, "button.attnlib-llm-load").click()
        wait(d, root, lambda s: "failed" in s, timeout=30)
        text = root.find_element(By.CSS_SELECTOR, ".attnlib-llm-status").text
        assert says in text and "Python cells" in text, text
        assert root.find_element(By.CSS_SELECTOR, "input[type=file]").is_displayed()
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"
                  and "favicon" not in e["message"] and "404" not in e["message"]]
        assert errors == [], errors
