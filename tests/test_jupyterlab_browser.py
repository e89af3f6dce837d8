"""Chapters in JupyterLab, opened as README.md says (issue 47): the figures show, and the setup
cell, the check cells and the exercise solutions are folded; the lesson is open.

`jupyter lab` (this environment's, beside its python) is started from the repository root, as
README.md and book/how_to_use.md say, after `jupyter trust` of the chapters, with a throwaway
Jupyter config, data and runtime folder (the reader's own settings are neither read nor touched:
the chapters are trusted into the throwaway folder, autosave is off there, and the test checks
that the chapters' files are unchanged afterwards) and nothing fetched from the network (no
news, no update check; every request the browser makes is checked to go to the local server).
No cell is run. Headless Chromium (tests/_browser.py) opens each chapter at 1280 x 800.

Screenshots go to artifacts/screenshots/jupyterlab_*.png (git-ignored): the first screen and the
exercises of each chapter. Look at them.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest

pytestmark = pytest.mark.slow

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from _browser import chromium_driver, port_open, require_browser  # noqa: E402

require_browser()

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from embed_figures import embedded  # noqa: E402

SHOTS = ROOT / "artifacts" / "screenshots"
LAB_ROOT = ROOT  # where README.md and book/how_to_use.md start `jupyter lab`
# two chapters with markdown figures (book/figures/*.svg embedded as PNG data URIs by
# scripts/embed_figures.py, so that Colab shows them too), explorers, check cells, exercises
CHAPTERS = ["notebooks/04_scaled_dot_product_attention.ipynb", "notebooks/05_masks.ipynb"]
IMAGE = re.compile(r"!\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)")  # alt text may hold [0.62, 0.47]
# URL schemes that are not network requests (the browser's own pages, inline data)
LOCAL_SCHEMES = {"data", "blob", "about", "chrome", "chrome-extension", "devtools",
                 "chrome-untrusted"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jupyter() -> list[str]:
    """The `jupyter` of this environment (README: `.venv/bin/jupyter`)."""
    beside = Path(sys.executable).parent / "jupyter"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "jupyter"]


def wait_for(predicate, timeout: float):
    """Poll ``predicate`` until it returns something truthy; return it (or the last falsy value)."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(0.2)
        value = predicate()
    return value


def _digest(paths) -> dict[str, str]:
    return {p: hashlib.sha256((ROOT / p).read_bytes()).hexdigest() for p in paths}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab started from the repository root, as README.md says; yields (url, token)."""
    home = tmp_path_factory.mktemp("jupyter-home")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_DATA_DIR": str(home / "data"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "config" / "lab" / "user-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "config" / "lab" / "workspaces"),
           "PYTHONPATH": str(ROOT)}
    # never write into the checkout: JupyterLab saves a notebook it thinks modified
    settings = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    before = _digest(CHAPTERS)
    # README: `jupyter trust notebooks/*.ipynb` (here into the throwaway data folder)
    trust = subprocess.run([*_jupyter(), "trust", *CHAPTERS], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert trust.returncode == 0, f"jupyter trust failed: {trust.stderr}"
    port, token = _free_port(), secrets.token_hex(16)
    # started where README.md says, with what it says (and no browser of its own)
    proc = subprocess.Popen(
        [*_jupyter(), "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={LAB_ROOT}", "--allow-root",
         "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=LAB_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not port_open(port) and time.monotonic() < deadline:
            assert proc.poll() is None, f"jupyter lab exited with {proc.returncode}"
            time.sleep(0.3)
        assert port_open(port), "JupyterLab did not start within 60 s"
        yield f"http://127.0.0.1:{port}", token
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert _digest(CHAPTERS) == before, "opening the chapters in JupyterLab changed their files"


@pytest.fixture(scope="module")
def browser():
    with chromium_driver("1280,800") as drv:
        drv.set_page_load_timeout(90)
        drv.set_script_timeout(30)
        drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
        yield drv


JS_CELLS = """
const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
if (!panel) return null;
return Array.from(panel.querySelectorAll('.jp-Notebook .jp-Cell')).map(cell => {
  const input = cell.querySelector('.jp-Cell-inputWrapper');
  const output = cell.querySelector('.jp-Cell-outputWrapper');
  const holder = input && input.querySelector('.jp-InputPlaceholder');
  return {
    kind: cell.classList.contains('jp-CodeCell') ? 'code'
        : cell.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw',
    inputArea: !!(input && input.querySelector('.jp-InputArea')),
    inputFolded: holder ? holder.textContent.replace(/\\s+/g, ' ').trim() : null,
    outputArea: !!(output && output.querySelector('.jp-OutputArea')),
    outputFolded: !!(output && output.querySelector('.jp-OutputPlaceholder')),
    rendered: !!cell.querySelector('.jp-RenderedMarkdown'),
    imgs: Array.from(cell.querySelectorAll('.jp-RenderedMarkdown img')).map(im => ({
      src: im.getAttribute('src') || '', complete: im.complete, width: im.naturalWidth})),
  };
});
"""
SCROLLER = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer"


def _first_line(cell) -> str:
    return " ".join(cell.source.split("\n", 1)[0].split())


def _expected(cell, i: int) -> str:
    """How the book shows a code cell, so how JupyterLab should open it: 'lesson' (open),
    'source' (the setup cell and the plumbing: source folded, output shown) or 'whole' (check
    cells, solutions, asides: source and output folded)."""
    tags = set(cell.metadata.get("tags", []))
    if tags & {"hide-cell", "remove-cell"}:
        return "whole"
    if i == 0 or tags & {"hide-input", "remove-input"}:
        return "source"
    return "lesson"


def _solutions(nb) -> list[int]:
    """The exercises' solutions: code cells tagged hide-cell between Exercises and Summary."""
    heads = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
             and re.search(r"^##\s+(Exercises|Summary)", c.source, re.M)]
    ex, summary = (heads + [len(nb.cells)] * 2)[:2]
    return [i for i in range(ex, summary) if nb.cells[i].cell_type == "code"
            and "hide-cell" in nb.cells[i].metadata.get("tags", [])]


def _responses(drv) -> list[tuple[str, int]]:
    """(url, status) of every response the page received, and every request's url (status 0)."""
    out = []
    for entry in drv.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.responseReceived":
            out.append((msg["params"]["response"]["url"], msg["params"]["response"]["status"]))
        elif msg["method"] == "Network.requestWillBeSent":
            out.append((msg["params"]["request"]["url"], 0))
        elif msg["method"] == "Network.webSocketCreated":
            out.append((msg["params"]["url"], 0))
    return out


def _cell(k: int) -> str:
    return ("document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook "
            f".jp-Cell')[{int(k)}]")


def _open(drv, url: str, token: str, path: str, n_cells: int) -> list[dict]:
    """Open a chapter; scroll down until JupyterLab has attached every cell; its cells' state."""
    drv.get(f"{url}/lab/tree/{path}?token={token}&reset")
    deadline = time.monotonic() + 60
    cells = None
    while time.monotonic() < deadline:
        cells = drv.execute_script(JS_CELLS)
        if cells and len(cells) >= n_cells:
            break
        drv.execute_script(f"const s = document.querySelector('{SCROLLER}'); "
                           "if (s) s.scrollTop += 800;")
        time.sleep(0.3)
    assert cells and len(cells) == n_cells, \
        f"{path}: JupyterLab shows {len(cells or [])} cells, the file holds {n_cells}"
    return cells


def _scroll_to(drv, k: int, block: str = "start") -> None:
    """Cell k in view: again until it stays (the cells above change height as they are drawn)."""
    for _ in range(8):
        before = drv.execute_script(f"return {_cell(k)}.getBoundingClientRect().top;")
        drv.execute_script(f"{_cell(k)}.scrollIntoView({{block: '{block}'}});")
        time.sleep(0.3)
        if abs(drv.execute_script(f"return {_cell(k)}.getBoundingClientRect().top;") - before) < 2:
            break


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_opens_with_figures_and_folded_audit(lab, browser, name):
    """As README.md says: every markdown figure shows (an embedded one is drawn: its natural
    width is the PNG's, not 0; one by path is served, no 404); the setup cell and the plumbing
    show only their first line and their output, the check cells and the exercise solutions
    only their first line (a solution's says which exercise, not its answer), and one click
    opens a solution; every lesson cell is open; no dialog, no console error, no request that
    leaves the machine."""
    url, token = lab
    nb = nbformat.read(ROOT / name, as_version=4)
    path = (ROOT / name).relative_to(LAB_ROOT).as_posix()
    stem = Path(name).stem
    browser.get_log("browser"), browser.get_log("performance")  # drop what came before
    start = time.monotonic()
    cells = _open(browser, url, token, path, len(nb.cells))
    opened = time.monotonic() - start

    # each cell as the book shows it: open, its source folded, or folded whole
    wrong, counts = [], {"lesson": 0, "source": 0, "whole": 0, "markdown": 0}
    for i, (cell, shown) in enumerate(zip(nb.cells, cells)):
        assert shown["kind"] == cell.cell_type, f"{name}: cell {i} is {shown['kind']} in JupyterLab"
        what = f"cell {i} {_first_line(cell)[:50]!r}"
        if cell.cell_type == "markdown":
            counts["markdown"] += 1
            if not shown["rendered"] or shown["inputFolded"] is not None:
                wrong.append(f"{what}: markdown not rendered")
            continue
        want = _expected(cell, i)
        counts[want] += 1
        if want == "lesson":
            if not shown["inputArea"] or shown["inputFolded"] is not None or shown["outputFolded"]:
                wrong.append(f"{what}: a lesson cell is folded")
            continue
        if shown["inputArea"] or shown["inputFolded"] is None:
            wrong.append(f"{what}: its source is open ({want})")
        elif shown["inputFolded"] != _first_line(cell):
            wrong.append(f"{what}: folded under {shown['inputFolded']!r}, not its first line")
        if want == "whole" and not shown["outputFolded"]:
            wrong.append(f"{what}: its output is open (a check, a solution or an aside)")
        if want == "source" and cell.outputs and (shown["outputFolded"] or not shown["outputArea"]):
            wrong.append(f"{what}: its output (a figure, an explorer) is folded")
    solutions = _solutions(nb)
    for i in solutions:
        if not re.fullmatch(r"# Solution to exercise \d+", cells[i]["inputFolded"] or ""):
            wrong.append(f"cell {i}: a folded solution shows {cells[i]['inputFolded']!r}")
    assert not wrong, f"{name}: {len(wrong)} cells open otherwise than the book shows them:\n" \
        + "\n".join(wrong)
    assert len(solutions) >= 2 and counts["whole"] > len(solutions) and counts["lesson"] >= 5 \
        and counts["source"] >= 2, (name, counts, solutions)

    # every markdown figure of the file: drawn from its data URI, or loaded from the repository
    sources = [src for c in nb.cells if c.cell_type == "markdown"
               for src in IMAGE.findall(c.source)]
    inline = [src for src in sources if src.startswith("data:")]
    imgs = [im for c in cells for im in c["imgs"]]
    assert sources and len(imgs) == len(sources), \
        f"{name}: {len(sources)} markdown figures in the file, {len(imgs)} images in JupyterLab"
    for i, c in enumerate(cells):
        if c["imgs"]:
            _scroll_to(browser, i, "center")
    loaded = wait_for(lambda: all(im["complete"] for c in browser.execute_script(JS_CELLS)
                                  for im in c["imgs"]), 20)
    imgs = [im for c in browser.execute_script(JS_CELLS) for im in c["imgs"]]
    broken = [im["src"].split("?")[0][:60] for im in imgs
              if not (im["complete"] and im["width"] > 0)]
    assert loaded and not broken, f"{name}: markdown figures not shown (broken images): {broken}"
    # an embedded figure is drawn from the notebook's own bytes, at the PNG's width
    drawn = {im["src"]: im["width"] for im in imgs if im["src"].startswith("data:")}
    for src in inline:
        png = base64.b64decode(src.split(",", 1)[1])
        width = struct.unpack(">I", png[16:20])[0]  # IHDR
        assert drawn.get(src) == width, \
            f"{name}: embedded figure {embedded(src)} drawn {drawn.get(src)} px wide, not {width}"
    responses = _responses(browser)
    served = {u.split("?")[0]: s for u, s in responses if s}
    figures = {f"{url}/files/{os.path.normpath(Path(path).parent / src)}" for src in sources
               if src not in inline}
    missing = {u: served.get(u) for u in figures if served.get(u) != 200}
    assert not missing, f"{name}: figures not served (URL: status): {missing}"
    failed = [(u, s) for u, s in responses if s >= 400]
    assert not failed, f"{name}: requests that failed: {failed}"

    # nothing else in the way, nothing from outside
    dialogs = browser.execute_script(
        "return Array.from(document.querySelectorAll('.jp-Dialog')).map(d => d.innerText)")
    assert not dialogs, f"{name}: a dialog opened: {dialogs}"
    outside = sorted({u for u, _ in responses if urlsplit(u).scheme not in LOCAL_SCHEMES
                      and urlsplit(u).hostname != "127.0.0.1"})
    assert not outside, f"{name}: requests that left the machine: {outside}"
    # leaving the chapter before, whose solution this test opened (JupyterLab writes the
    # unfolding into the cell's metadata), asked to confirm: Chromium blocks that and logs it
    severe = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"
              and not ("'beforeunload' confirmation" in e["message"]
                       and e["message"].startswith(f"{url}/lab/tree/")
                       and not e["message"].startswith(f"{url}/lab/tree/{path}"))]
    assert not severe, f"{name}: console errors: {severe}"

    # what a reader sees: the first screen, and the exercises with their folded solutions
    SHOTS.mkdir(parents=True, exist_ok=True)
    _scroll_to(browser, 0)
    browser.save_screenshot(str(SHOTS / f"jupyterlab_{stem}_first_screen.png"))
    exercises = next(i for i, c in enumerate(nb.cells) if c.source.startswith("## Exercises"))
    _scroll_to(browser, exercises)
    browser.save_screenshot(str(SHOTS / f"jupyterlab_{stem}_exercises.png"))

    # a solution is one click away (nothing is saved: autosave is off, see the fixture)
    first = solutions[0]
    _scroll_to(browser, first, "center")
    browser.execute_script(f"{_cell(first)}.querySelector('.jp-InputPlaceholder "
                           ".jp-Placeholder-content').click();")
    shown = wait_for(lambda: browser.execute_script(JS_CELLS)[first]["inputArea"], 10)
    assert shown, f"{name}: clicking the folded solution (cell {first}) did not open it"
    names = sorted([Path(u).name for u in figures] + [embedded(u)[0] for u in inline])
    print(f"\n{name}: all {len(nb.cells)} cells drawn {opened:.1f} s after opening; code cells "
          f"{counts['lesson']} open, {counts['source']} source folded, {counts['whole']} folded "
          f"whole ({len(solutions)} solutions); figures shown: "
          f"{', '.join(names)}")
