"""The book builds with warnings as errors, every page of _toc.yml comes out, nothing is loaded from
a CDN, and a chapter committed with an error output fails the build.

The real build goes to _build/html (scripts/build_book.py; reused by tests/test_book_browser.py).
The failure check builds a one-notebook book in a temporary folder, twice: with an error output
(must fail, for that reason) and without (must pass), so the failure is not an accident of setup.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_book  # noqa: E402

pytestmark = pytest.mark.slow
TOC = Path(os.environ.get("ATTNLIB_BOOK_TOC", ROOT / "_toc.yml"))
ASSET = re.compile(r'<(?:script|link|img|iframe)\b[^>]*?\b(?:src|href)="([^"]+)"', re.IGNORECASE)


@pytest.fixture(scope="module")
def html_dir() -> Path:
    rc = build_book.build(TOC)
    assert rc == 0, f"`jupyter-book build -W` failed (exit {rc}); the log is above"
    return build_book.HTML


def test_every_toc_page_is_built(html_dir):
    missing = [d for d in build_book.toc_docnames(TOC) if not (html_dir / f"{d}.html").is_file()]
    assert missing == [], f"pages in the toc with no HTML: {missing}"


def test_assets_are_local(html_dir):
    """No <script>/<link>/<img> on any page points off the book's own host."""
    pages = sorted(html_dir.rglob("*.html"))
    assert pages
    remote = {}
    for page in pages:
        text = page.read_text(encoding="utf-8", errors="replace")
        for url in ASSET.findall(text):
            if re.match(r"(https?:)?//", url):
                remote.setdefault(page.relative_to(html_dir).as_posix(), []).append(url)
    assert remote == {}, f"pages loading from other hosts: {dict(list(remote.items())[:5])}"


def test_local_copies_of_mathjax_and_html_manager(html_dir):
    for path in ("_static/mathjax/tex-chtml.js", "_static/html-manager/embed.js", "_static/widgets-shim.js"):
        assert (html_dir / path).is_file(), f"{path} missing from the build"
    assert not (ROOT / "_static").exists(), "never a root _static/: its files go into every page"
    pages_with_widgets = [p for p in html_dir.rglob("*.html")
                          if "application/vnd.jupyter.widget-state+json" in p.read_text(encoding="utf-8")]
    for page in pages_with_widgets:
        text = page.read_text(encoding="utf-8")
        assert text.find("widgets-shim.js") < text.find("html-manager/embed.js"), \
            f"{page.name}: the shim must load before embed.js"


def _tiny_book(tmp_path: Path, outputs: list[dict]) -> Path:
    book = tmp_path / "book_src"
    (book / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", book / "_config.yml")
    for script in ("book_checks.py", "embed_figures.py"):  # the extension and what it imports
        shutil.copy(ROOT / "scripts" / script, book / "scripts" / script)
    shutil.copytree(ROOT / "book" / "_static", book / "book" / "_static")
    (book / "_build").mkdir()
    assets = ROOT / "_build" / "assets"
    if not assets.is_dir():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "vendor_assets.py")], check=True)
    (book / "_build" / "assets").symlink_to(assets, target_is_directory=True)
    (book / "intro.md").write_text("# Intro\n\nA page.\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapter\n")
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("1 / 0", execution_count=1)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    nb.cells = [nbformat.v4.new_markdown_cell("# Chapter"), cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, book / "chapter.ipynb")
    return book


def _build(book: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*build_book.JUPYTER_BOOK, "build", str(book), "--all", "-W", "--keep-going"],
                          cwd=book, capture_output=True, text=True, timeout=600)


def test_a_stored_error_output_fails_the_build(tmp_path):
    error = {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
             "traceback": ["ZeroDivisionError: division by zero"]}
    bad = _build(_tiny_book(tmp_path / "bad", [error]))
    log = bad.stdout + bad.stderr
    assert bad.returncode != 0, "a notebook with an error output built without error"
    assert "stored error output in cell 1: ZeroDivisionError" in log, log[-3000:]

    fine = {"output_type": "stream", "name": "stdout", "text": "ok\n"}
    good = _build(_tiny_book(tmp_path / "good", [fine]))
    assert good.returncode == 0, (good.stdout + good.stderr)[-3000:]


def test_a_chapter_links_glossary_entries_by_their_anchors(tmp_path):
    """A chapter's markdown link to a glossary term's id (`glossary.md#term-Good-term`, the form
    JupyterLab follows) resolves in the book, through book_checks.register_glossary_anchors;
    a link to an id that no term has still fails the build, naming that id only."""
    fine = {"output_type": "stream", "name": "stdout", "text": "ok\n"}
    book = _tiny_book(tmp_path, [fine])
    (book / "glossary.md").write_text("# Glossary\n\n```{glossary}\nGood term\n  Defined.\n```\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapter\n"
                                   "  - file: glossary\n")
    nb = nbformat.read(book / "chapter.ipynb", as_version=4)
    nb.cells[0].source = "# Chapter\n\nA [good term](glossary.md#term-Good-term)."
    nbformat.write(nb, book / "chapter.ipynb")
    good = _build(book)
    assert good.returncode == 0, (good.stdout + good.stderr)[-3000:]
    html = (book / "_build" / "html" / "chapter.html").read_text(encoding="utf-8")
    assert 'href="glossary.html#term-Good-term"' in html
    assert 'id="term-Good-term"' in (book / "_build" / "html" / "glossary.html").read_text()

    nb.cells[0].source += " A [typo](glossary.md#term-Good-trem)."
    nbformat.write(nb, book / "chapter.ipynb")
    bad = _build(book)
    log = bad.stdout + bad.stderr
    assert bad.returncode != 0, "a link to a glossary id that no term has built without error"
    assert "local id not found" in log and "'term-Good-trem'" in log, log[-3000:]
    assert "'term-Good-term'" not in log, log[-3000:]


def test_an_embedded_diagram_shows_its_file_and_a_stale_one_fails(tmp_path):
    """A chapter's diagram embedded for Colab (a PNG naming book/figures/NAME.svg) is, on the
    book's page, that SVG file by its relative path, not the PNG inlined (book_checks.
    EmbeddedDiagrams); a PNG drawn from an older version of the file fails the build (-W)."""
    import embed_figures

    fine = {"output_type": "stream", "name": "stdout", "text": "ok\n"}
    book = _tiny_book(tmp_path, [fine])
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20" viewBox="0 0 40 20">'
           '<title>t</title><text x="2" y="12">Q</text></svg>')
    (book / "book" / "figures").mkdir(parents=True)
    (book / "book" / "figures" / "d.svg").write_text(svg)
    (book / "notebooks").mkdir()
    shutil.move(book / "chapter.ipynb", book / "notebooks" / "chapter.ipynb")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n"
                                   "  - file: notebooks/chapter\n")

    def chapter(sha: str) -> str:
        from PIL import Image, PngImagePlugin
        import base64
        import io

        info = PngImagePlugin.PngInfo()
        info.add_text(embed_figures.NAME_KEY, "d.svg")
        info.add_text(embed_figures.SHA_KEY, sha)
        buf = io.BytesIO()
        Image.new("RGB", (80, 40), "white").save(buf, "PNG", pnginfo=info)
        uri = embed_figures.PNG_PREFIX + base64.b64encode(buf.getvalue()).decode()
        nb = nbformat.read(book / "notebooks" / "chapter.ipynb", as_version=4)
        nb.cells[0].source = f"# Chapter\n\nText.\n\n![A query drawn as a box]({uri})\n"
        nbformat.write(nb, book / "notebooks" / "chapter.ipynb")
        return uri

    uri = chapter(embed_figures.sha256(book / "book" / "figures" / "d.svg"))
    good = _build(book)
    assert good.returncode == 0, (good.stdout + good.stderr)[-3000:]
    html = (book / "_build" / "html" / "notebooks" / "chapter.html").read_text(encoding="utf-8")
    assert re.search(r'<img alt="A query drawn as a box" src="\.\./_images/d\.svg"', html), \
        re.findall(r"<img[^>]*>", html)
    assert uri[len(embed_figures.PNG_PREFIX):][:40] not in html
    assert (book / "_build" / "html" / "_images" / "d.svg").read_text() == svg

    chapter("0" * 64)
    bad = _build(book)
    log = bad.stdout + bad.stderr
    assert bad.returncode != 0, "a stale embedded diagram built without error"
    assert "embedded copy of book/figures/d.svg is stale" in log, log[-3000:]


def test_embedded_diagrams_are_their_svg_files_on_the_built_pages(html_dir):
    """Every diagram a chapter embeds for Colab is, on its built page, the SVG file of
    book/figures (copied to _images), never the embedded PNG."""
    import embed_figures

    rows = embed_figures.scan(ROOT)
    assert rows
    for nb, _, _, _, uri, target, _ in rows:
        page = html_dir / nb.relative_to(ROOT).with_suffix(".html")
        if not page.is_file():
            continue  # not in this table of contents
        html = page.read_text(encoding="utf-8")
        assert f'src="../_images/{target.name}"' in html, f"{page.name}: no {target.name}"
        if uri.startswith("data:"):
            assert uri.split(",", 1)[1][:200] not in html, f"{page.name}: PNG of {target.name}"


def test_links_to_glossary_entries_resolve_in_the_built_book(html_dir):
    """Every link of every built page to glossary.html#id names an id of the built glossary
    ({term} roles on book pages, markdown links in chapters)."""
    glossary = html_dir / "book" / "glossary.html"
    ids = set(re.findall(r'\bid="([^"]+)"', glossary.read_text(encoding="utf-8")))
    links, broken = 0, []
    for page in sorted(html_dir.rglob("*.html")):
        for target, anchor in re.findall(r'href="([^"#]*glossary\.html)#([^"]*)"',
                                         page.read_text(encoding="utf-8")):
            links += 1
            if (page.parent / target).resolve() != glossary.resolve() or anchor not in ids:
                broken.append(f"{page.relative_to(html_dir)}: {target}#{anchor}")
    print(f"{links} links to glossary entries, {len(broken)} broken")
    assert links >= 20 and broken == [], broken


def test_launch_buttons_use_the_one_repository_url(html_dir):
    """The Colab button of every chapter points at _config.yml's repository and branch; there is no
    Binder button (the book has no Binder setup, and its first cell installs only on Colab)."""
    import yaml

    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    slug = repo["url"].removeprefix("https://github.com/")
    chapters = [d for d in build_book.toc_docnames(TOC) if d.startswith("notebooks/")]
    assert chapters
    for doc in chapters:
        text = (html_dir / f"{doc}.html").read_text(encoding="utf-8")
        colab = f"https://colab.research.google.com/github/{slug}/blob/{repo['branch']}/{doc}.ipynb"
        assert colab in text, f"{doc}: no Colab button for {colab}"
        assert "mybinder.org" not in text, f"{doc}: a Binder button, but the book has no Binder setup"
        assert f"_sources/{doc}.ipynb" in text, f"{doc}: no .ipynb download button"


def test_chapter_numbers_match_the_notebook_files(html_dir):
    """Chapter N of the navigation is notebooks/NN_*.ipynb (the prose says "chapter 5" for masks)."""
    intro = (html_dir / "book" / "intro.html").read_text(encoding="utf-8")
    nav = re.findall(r'class="reference internal" href="\.\./(notebooks/[^"#]+)\.html">([^<]+)<', intro)
    labels = {doc: text for doc, text in reversed(nav)}  # the sidebar's entry (first on the page)
    chapters = [d for d in build_book.toc_docnames(TOC) if d.startswith("notebooks/")]
    for doc in chapters:
        number = int(re.match(r"notebooks/(\d+)_", doc)[1])
        assert doc in labels, f"{doc} missing from the navigation"
        assert labels[doc].startswith(f"{number}. "), f"{doc} is numbered {labels[doc]!r}"


def test_pages_carry_each_shared_output_asset_once(html_dir):
    """Chapter 4 shows two vector explorers: the page holds one copy of the attention engine, the
    kit, the explorer's script and the stylesheets (scripts/book_checks.py), and both explorers'
    own start-up scripts and payloads."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import book_checks

    text = (html_dir / "notebooks" / "04_scaled_dot_product_attention.html").read_text(encoding="utf-8")
    # the book recognises the shared files by their current text: outputs stored before a file
    # changed keep their own copies of its older text until the chapter is re-executed
    nb = nbformat.read(ROOT / "notebooks" / "04_scaled_dot_product_attention.ipynb", as_version=4)
    stored = "".join("".join(o.get("data", {}).get("text/html", ""))
                     for c in nb.cells for o in c.get("outputs", []))
    older = [n for n in ("engine.js", "kit.js", "vectors.js", "explorer.css", "kit.css", "vectors.css")
             if (book_checks.VIZ / n).read_text(encoding="utf-8") not in stored]
    if older:
        pytest.xfail(f"chapter 4's stored outputs predate the current {', '.join(older)}: re-execute it")
    assert text.count('class="attnlib-explorer attnlib-kit attnlib-vectors"') == 2
    boot = (book_checks.VIZ / "vectors_boot.js").read_text(encoding="utf-8")
    assert text.count(boot) == 2  # vectors_boot.js, once for each explorer
    for name in ("engine.js", "kit.js", "vectors.js", "explorer.css", "kit.css", "vectors.css"):
        body = (book_checks.VIZ / name).read_text(encoding="utf-8")
        assert text.count(body) == 1, f"{name}: {text.count(body)} copies on the page"
    # its two sliders are the book's own HTML now (test_precomputed_sliders_load_no_widget_manager):
    # the page carries no widget state (the compaction of a live widget's state is unit-tested in
    # tests/test_book_assets.py)
    assert text.count('class="attnlib-pslider"') == 2
    assert "application/vnd.jupyter.widget-state+json" not in text


VIEW = "application/vnd.jupyter.widget-view+json"
MANAGER = ("html-manager/embed.js", "widgets-shim.js", "application/vnd.jupyter.widget-state+json")


def _widget_views(nb: dict) -> list[str]:
    return [o["data"][VIEW]["model_id"] for c in nb.get("cells", [])
            for o in c.get("outputs", []) or [] if VIEW in (o.get("data") or {})]


def test_precomputed_sliders_load_no_widget_manager(html_dir):
    """A precomputed slider (attnlib.viz.precomputed_slider) is drawn on the book's page as the
    book's own HTML (scripts/book_checks.py, PrecomputedSliders): a page whose widgets are all
    such sliders carries no widget view, no widget state, and neither the widget manager
    (html-manager/embed.js, 1.9 MB) nor its shim; a page with any other widget keeps them."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import json

    import book_checks

    checked = 0
    for doc in build_book.toc_docnames(TOC):
        source = build_book.source_of(doc)
        if source is None or source.suffix != ".ipynb":
            continue
        nb = json.loads(source.read_text(encoding="utf-8"))
        views = _widget_views(nb)
        if not views:
            continue
        state = nb["metadata"]["widgets"][book_checks.WIDGET_STATE]["state"]
        sliders = [v for v in views if book_checks.precomputed_slider_parts(state, v)]
        text = (html_dir / f"{doc}.html").read_text(encoding="utf-8")
        drawn = text.count('class="attnlib-pslider"')
        assert drawn == len(sliders), f"{doc}: {len(sliders)} precomputed sliders, {drawn} drawn"
        if len(sliders) == len(views):
            loaded = [m for m in MANAGER if m in text]
            assert not loaded, f"{doc}: only precomputed sliders, yet the page carries {loaded}"
            assert VIEW not in text, f"{doc}: a widget view is left on the page"
            checked += 1
        else:
            assert all(m in text for m in MANAGER), f"{doc}: a live widget without the manager"
    print(f"{checked} pages with precomputed sliders only, none loads the widget manager")
    assert checked >= 1
