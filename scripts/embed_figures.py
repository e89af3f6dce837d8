"""Embed the book's diagrams in the notebooks, so that Colab shows them too (issue 48).

    python scripts/embed_figures.py            # embed what is missing or stale, write notebooks
    python scripts/embed_figures.py --check    # exit 1 naming every image that is not up to date

A chapter is read three ways: the built book, JupyterLab (the repository checked out) and Colab,
which gets the .ipynb file alone, so a markdown image with a path into the repository,
``![alt](../book/figures/NAME.svg)``, is a broken image there. This script turns each such line
of a markdown cell into the same alt text over a data URI, ``![alt](data:image/png;base64,...)``,
with nothing else on the line.

PNG, not SVG: Colab is reported not to show an SVG data URI in markdown
(googlecolab/colabtools#2092, open; we cannot open Colab from here to try), and markdown-it, the
parser of MyST (the book's build) and of other notebook viewers, lets only
``data:image/(gif|png|jpeg|webp)`` through (its ``validateLink``); Colab is also reported to
render no cell attachments (googlecolab/colabtools#3836). The PNG is the SVG file drawn by headless
Chromium (tests/_browser.py's paths) at ``SCALE`` times its size, so that its text stays sharp on
a high-density screen; its colours reduced to 256 (as attnlib's figure export does). Markdown
cannot give an image a width, and JupyterLab and Colab show one at its pixel width, or the cell's
width if less: there a diagram is larger than in the book (a 640 px one filled an 805 px cell in
JupyterLab at 1280 x 800); ``SCALE = 1`` would keep its size and blur its text on such screens.

Each PNG carries two text chunks: ``attnlib-figure``, the file it was drawn from (NAME.svg in
book/figures), and ``attnlib-figure-sha256``, that file's sha256 when it was drawn. So the name
stays recoverable from the notebook alone (``--list`` prints it), nothing about it shows to a
reader, and an image is stale exactly when its file's bytes changed since (a regenerated
figure): it is drawn again; an image that is up to date is left as it is, byte for byte, so a
second run changes nothing. scripts/make_diagrams.py runs this after writing the figures.

The book's build (scripts/book_checks.py, ``EmbeddedDiagrams``) maps each such image back to its
file, so the built pages reference book/figures/NAME.svg exactly as before (and its narrow
layout, the chapter opener and the figure tests keep working).
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import io
import os
import posixpath
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "book" / "figures"
SCALE = 2                       # device pixels per CSS pixel of the drawing
PNG_PREFIX = "data:image/png;base64,"
NAME_KEY, SHA_KEY = "attnlib-figure", "attnlib-figure-sha256"
# a markdown image alone on its line; the alt text may hold [brackets] (e.g. [CLS])
LINE = re.compile(r"^!\[(?P<alt>[^\]]*(?:\[[^\]]*\][^\]]*)*)\]\((?P<uri>[^)\s]+)\)$")


def notebooks(root: Path = ROOT) -> list[Path]:
    """The chapters (notebooks/) and the book's own notebooks (book/)."""
    return sorted((root / "notebooks").glob("*.ipynb")) + sorted((root / "book").glob("*.ipynb"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def png_text(png: bytes) -> dict[str, str]:
    """The tEXt chunks of a PNG, {keyword: text} (read with the standard library only: the
    book's build calls it for every image of a page)."""
    import struct
    import zlib

    if png[:8] != b"\x89PNG\r\n\x1a\n":
        return {}
    out, at = {}, 8
    while at + 8 <= len(png):
        size, kind = struct.unpack(">I4s", png[at:at + 8])
        body = png[at + 8:at + 8 + size]
        if kind == b"tEXt" and b"\0" in body:
            key, text = body.split(b"\0", 1)
            out[key.decode("latin-1")] = text.decode("latin-1")
        elif kind == b"zTXt" and b"\0" in body:
            key, rest = body.split(b"\0", 1)
            out[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        at += 12 + size
    return out


def embedded(uri: str) -> tuple[str, str] | None:
    """(NAME.svg, its sha256 when drawn) of a data URI this script wrote; None for any other URI
    (a path, a web address, an image pasted by hand)."""
    if not uri.startswith(PNG_PREFIX):
        return None
    try:
        text = png_text(base64.b64decode(uri[len(PNG_PREFIX):], validate=True))
    except ValueError:
        return None
    name = text.get(NAME_KEY)
    return (name, text.get(SHA_KEY, "")) if name else None


def figure_path(doc: Path, uri: str, root: Path = ROOT) -> Path | None:
    """The book/figures file that an image of ``doc`` shows, embedded or by path; None if it
    shows no diagram of the book."""
    found = embedded(uri)
    if found:
        return root / "book" / "figures" / found[0]
    if re.match(r"[a-z]+:", uri):
        return None
    target = Path(os.path.normpath(doc.parent / uri))
    figures = root / "book" / "figures"
    return target if target.parent == figures and target.suffix == ".svg" else None


def relative_uri(docname: str, name: str) -> str:
    """``book/figures/NAME`` relative to a Sphinx document's folder (``../book/figures/NAME``
    from notebooks/): the path the chapter had before its figure was embedded."""
    return posixpath.relpath(f"book/figures/{name}", posixpath.dirname(docname) or ".")


def scan(root: Path = ROOT):
    """Every diagram line of every notebook: (notebook, cell index, line index, alt, uri, file,
    state), state one of "path" (not embedded yet), "stale", "ok", "missing" (no such file)."""
    import nbformat

    found = []
    for nb_path in notebooks(root):
        nb = nbformat.read(nb_path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "markdown":
                continue
            for j, line in enumerate(cell.source.split("\n")):
                m = LINE.match(line.strip())
                target = m and figure_path(nb_path, m["uri"], root)
                if not target:
                    continue
                if not target.is_file():
                    state = "missing"
                elif not m["uri"].startswith(PNG_PREFIX):
                    state = "path"
                else:
                    state = "ok" if embedded(m["uri"])[1] == sha256(target) else "stale"
                found.append((nb_path, i, j, m["alt"], m["uri"], target, state))
    return found


def problems(root: Path = ROOT) -> list[str]:
    """What ``--check`` reports: every image not embedded, stale, or of a missing file."""
    why = {"path": "is not embedded (a path: Colab cannot show it)",
           "stale": "is stale (the file changed since it was embedded)",
           "missing": "shows a file that does not exist"}
    return [f"{nb.relative_to(root)} cell {i}: {target.name} {why[state]}"
            for nb, i, _, _, _, target, state in scan(root) if state != "ok"]


def render(svgs: list[Path], scale: int = SCALE) -> dict[Path, bytes]:
    """Each SVG drawn by headless Chromium at ``scale`` device pixels per CSS pixel, as a PNG with
    256 colours and the two text chunks (see the module docstring)."""
    from PIL import Image, PngImagePlugin
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    sys.path.insert(0, str(ROOT / "tests"))
    from _browser import CHROMEDRIVER as chromedriver, CHROMIUM as chromium

    missing = [p for p in (chromium, chromedriver) if not Path(p).exists()]
    if missing:
        raise SystemExit(f"drawing the diagrams needs {' and '.join(missing)} (apt-get "
                         "install chromium chromium-driver, or set ATTNLIB_CHROMIUM and "
                         "ATTNLIB_CHROMEDRIVER)")
    opts = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--disable-background-networking", "--no-first-run",
                 f"--force-device-scale-factor={scale}", "--window-size=1000,1000"):
        opts.add_argument(flag)
    opts.binary_location = chromium
    out = {}
    driver = webdriver.Chrome(service=Service(chromedriver), options=opts)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for svg in svgs:
                data = base64.b64encode(svg.read_bytes()).decode("ascii")
                page = Path(tmp) / "figure.html"
                page.write_text('<!doctype html><body style="margin:0;background:#fff">'
                                f'<img id="f" src="data:image/svg+xml;base64,{data}">',
                                encoding="utf-8")
                driver.get(page.as_uri())
                w, h = driver.execute_script(
                    "const i = document.getElementById('f');"
                    "return [i.naturalWidth, i.naturalHeight];")
                driver.set_window_size(w + 200, h + 300)
                driver.get(page.as_uri())
                shot = driver.find_element("id", "f").screenshot_as_png
                im = Image.open(io.BytesIO(shot)).convert("RGB")
                if im.size != (w * scale, h * scale):
                    raise RuntimeError(f"{svg.name}: drawn {im.size}, not {w * scale}x{h * scale}")
                im = im.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
                info = PngImagePlugin.PngInfo()
                info.add_text(NAME_KEY, svg.name)
                info.add_text(SHA_KEY, sha256(svg))
                buf = io.BytesIO()
                im.save(buf, "PNG", optimize=True, pnginfo=info)
                out[svg] = buf.getvalue()
    finally:
        driver.quit()
    return out


def embed(root: Path = ROOT) -> list[str]:
    """Rewrite every notebook whose diagrams are not embedded or are stale; return what changed.
    Only those image lines change; every other byte of the notebook stays as it was."""
    import nbformat

    todo = [row for row in scan(root) if row[-1] in ("path", "stale")]
    missing = [row for row in scan(root) if row[-1] == "missing"]
    if missing:
        raise SystemExit("\n".join(f"{nb.relative_to(root)} cell {i}: {t.name} does not exist"
                                   for nb, i, _, _, _, t, _ in missing))
    if not todo:
        return []
    pngs = render(sorted({row[5] for row in todo}))
    changed = []
    for nb_path in sorted({row[0] for row in todo}):
        nb = nbformat.read(nb_path, as_version=4)
        for _, i, j, alt, uri, target, state in (r for r in todo if r[0] == nb_path):
            lines = nb.cells[i].source.split("\n")
            line = lines[j]
            lead = line[: len(line) - len(line.lstrip())]
            data = base64.b64encode(pngs[target]).decode("ascii")
            lines[j] = f"{lead}![{alt}]({PNG_PREFIX}{data})"
            nb.cells[i].source = "\n".join(lines)
            changed.append(f"{nb_path.relative_to(root)} cell {i}: {target.name} ({state}, "
                           f"{len(data) // 1024} kB)")
        nbformat.write(nb, nb_path)
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 naming each image not embedded or stale")
    ap.add_argument("--list", action="store_true", help="print each notebook's diagrams")
    args = ap.parse_args(argv)
    if args.list:
        for nb, i, _, _, _, target, state in scan(ROOT):
            print(f"{nb.relative_to(ROOT)} cell {i}: {target.name} ({state})")
        return 0
    if args.check:
        found = problems(ROOT)
        for p in found:
            print(p, file=sys.stderr)
        if found:
            print("run: python scripts/embed_figures.py", file=sys.stderr)
        return 1 if found else 0
    changed = embed(ROOT)
    print("\n".join(changed) if changed else "every diagram is embedded and up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
