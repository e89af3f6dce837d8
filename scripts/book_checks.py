"""Sphinx extension (loaded from _config.yml): fixes Jupyter Book and its themes do not make.

1. With execution off, myst-nb renders a stored error output like any other output, so a chapter
   committed with a traceback would build "successfully". Here every notebook page with an error
   output emits a warning, which `jupyter-book build -W` turns into a failed build.
2. Jupyter Book always loads sphinx-thebe, even with `launch_buttons.thebe: false`. Its inline
   script points at a CDN and (sphinx-thebe 0.3.1 under Sphinx 7) is added twice to every page,
   which is a JavaScript SyntaxError ("THEBE_JS_URL has already been declared"). We drop its
   assets from every page; the book has no "live code" button, so nothing uses them. Pages that
   use no sphinx-design component drop its stylesheet and script too (60 kB).
3. ``attnlib_without_fontawesome``, a template filter (book/_templates/layout.html): the page
   head without pydata-sphinx-theme's fontawesome.js (1.5 MB of JavaScript on every page that
   turns ~20 ``<i class="fa-...">`` icons into SVG). Instead, when the build has finished,
   ``_static/attnlib-icons.css`` is written with exactly the icons the pages use, each a CSS mask
   of the same Font Awesome path (read from that script): a few kB, and no icon font is fetched
   for them (the theme's webfonts, and the widget manager's Font Awesome 5 that claims the same
   class names, cost 0.1-0.3 MB a page). The admonitions' icons (a ::after glyph of the solid
   webfont, 150 kB for one bell) become masks the same way. ``attnlib_without_search_index``:
   the theme loads Sphinx's search index and tools on every page for its search-as-you-type
   dialog; with that option off (the default, and ours) the dialog opens the search page, which
   loads them itself, so the other pages drop them (150 kB).
4. ``SetupCellAfterIntro``: a chapter's first cell (the setup cell: Colab install, imports, seed;
   folded by its ``hide-input`` tag) stays first in the notebook, where Colab and JupyterLab need
   it, but on the book's page it moves from above the title to the end of the chapter's
   introduction (before its first section), so that a chapter opens with its title.
5. ``EmbeddedDiagrams``: a chapter holds its diagrams as PNG data URIs (scripts/embed_figures.py,
   so that Colab, which gets the .ipynb file alone, shows them); each one names the file it was
   drawn from (book/figures/NAME.svg). On the book's page the image shows that file again, by the
   relative path the chapter had before (``../book/figures/NAME.svg``), so the page references
   the SVG (sharp, and with its narrow layout, 6.) instead of inlining the PNG; an image drawn from
   an older version of its file emits a warning (run scripts/embed_figures.py).
   Then ``ChapterOpener``: a chapter opens with a picture. When its first diagram (book/figures/*.svg)
   comes only in a later section, the diagram is also shown under the chapter's first paragraph,
   at the size of the first screen, with a link to the section that explains it. A chapter that
   already places a diagram in its introduction is left as it is.
6. ``NarrowDiagrams`` / ``DiagramPictures``: a diagram with a narrow layout (book/figures/
   X.narrow.svg, written by scripts/make_diagrams.py) is shown as ``<picture>``: the narrow file
   on screens under 600 px, the wide one elsewhere; the browser fetches only the one it shows.
7. ``SharedOutputAssets``: every attnlib output carries its own copy of the scripts and styles it
   needs (an output must work alone in JupyterLab and Colab), so a page with two explorers held
   two copies of the attention engine and the drawing kit. On the book's page only the first copy
   of each shared file stays: the libraries (``LIBRARY_JS``: files that only define a global, e.g.
   ``window.attnlibEngine``) and the stylesheets; scripts run in page order, so a later output finds
   them defined. An output's own start-up script stays with it. A precomputed slider's states,
   drawn as the page's HTML (10. below), share them too; outputs inside the state of a live
   widget are not touched: they keep their copies.
8. ``compact_widget_state``: the stored widget state, as the page carries it, without the entries
   the widget manager fills in itself (a Layout's unset CSS properties, a widget's null
   ``tooltip``/``tabbable``/``_view_count`` and empty ``_dom_classes``), written without spaces.
   The notebook keeps its full state.
9. ``OutputFiguresFillTheColumn``: a matplotlib figure in an output grows from half its pixels
   (IPython's retina size) towards the column's width (half of it for figures side by side, two
   to a row), up to 1.6x that size (GROWTH).
10. ``PrecomputedSliders`` / ``drop_unused_widget_manager``: a precomputed slider
   (``attnlib.viz.precomputed_slider``: a VBox of a SelectionSlider ``jslink``ed to a Stack of
   Output widgets) only picks among states stored in the notebook, so on the book's page it is
   drawn as plain HTML from that stored state: a labelled ``<input type=range>`` with its value
   beside it (the explorers' look, book/_static/book.css) over the states, one shown (the others
   inert in a <template> until first picked), and a few lines of script
   (scripts/precomputed_slider.js) that show the state of the slider's value. The
   notebook keeps its widget for JupyterLab and Colab. A page left with no widget view drops the
   widget state and the widget manager (html-manager/embed.js, 1.9 MB, and its shim); a page
   with a live widget keeps them.
11. ``register_glossary_anchors``: a chapter cannot use the ``{term}`` role (JupyterLab and Colab
   show it as raw text), so it links a glossary entry with a plain markdown link,
   ``[KV cache](../book/glossary.md#term-KV-cache)``, which JupyterLab opens as a relative link.
   MyST resolves the ``#fragment`` of such a link only among the target page's heading slugs and
   fails the build (-W) on any other id ("local id not found"). When a page with a
   ``{glossary}`` directive is read, each term's id (``term-KV-cache``, as Sphinx makes it) is
   registered beside those slugs, so the link resolves to ``glossary.html#term-KV-cache``; a
   fragment that names no term still fails the build.
"""
from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.osutil import relative_uri
from sphinx.util import logging

logger = logging.getLogger(__name__)


def error_outputs(nb: dict) -> list[tuple[int, str]]:
    """(cell index, "EName: message") for each stored error output of a notebook dict."""
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []) or []:
            if out.get("output_type") == "error":
                found.append((i, f"{out.get('ename', '?')}: {out.get('evalue', '')}"))
    return found


def check_notebook(app, docname: str, source: list) -> None:
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    nb = json.loads(path.read_text(encoding="utf-8"))
    for index, err in error_outputs(nb):
        logger.warning("notebook has a stored error output in cell %d: %s", index, err,
                       location=docname, type="attnlib", subtype="error_output")


def register_glossary_anchors(app, doctree) -> None:
    """Register the ids of a page's glossary terms as MyST link targets (11. above).

    MyST keeps a page's heading slugs in ``env.metadata[docname]["myst_slugs"]``, slug ->
    (line, id, title), and resolves ``page.md#slug`` only among them; a term's id is added with
    the term as its title. Runs at doctree-read, in the process that read the page, before the
    environment is merged, so it is parallel-safe."""
    terms = [t for g in doctree.findall(addnodes.glossary) for t in g.findall(nodes.term)]
    if not terms:
        return
    slugs = app.env.metadata[app.env.docname].setdefault("myst_slugs", {})
    for term in terms:
        for node_id in term["ids"]:
            slugs.setdefault(node_id, (term.line, node_id, term.astext()))


def _is_thebe(asset) -> bool:
    name = getattr(asset, "filename", None) or str(asset)
    body = (getattr(asset, "attributes", None) or {}).get("body", "") or ""
    return "sphinx-thebe" in (name or "") or "THEBE_JS_URL" in body


def _is_design(asset) -> bool:
    name = getattr(asset, "filename", None) or str(asset)
    return "sphinx-design" in name or "design-tabs.js" in name


def drop_thebe_assets(app, pagename, templatename, context, doctree) -> None:
    """Drop sphinx-thebe's assets everywhere, and sphinx-design's (60 kB, loaded by Jupyter Book
    on every page) from pages that use none of its components (class names "sd-...")."""
    unused_design = 'class="sd-' not in context.get("body", "") and 'class="sd ' not in context.get("body", "")
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [a for a in context[key]
                            if not _is_thebe(a) and not (unused_design and _is_design(a))]


FONTAWESOME_JS = re.compile(r'\s*<script[^>]*\bsrc="[^"]*/fontawesome\.js[^"]*"[^>]*>\s*</script>')


def without_fontawesome(html: str) -> str:
    """The page head without the theme's fontawesome.js script tag (the icons' CSS stays)."""
    from markupsafe import Markup

    return Markup(FONTAWESOME_JS.sub("", str(html)))


SEARCH_SCRIPTS = re.compile(r'\s*<script[^>]*\bsrc="[^"]*(?:searchtools|language_data|searchindex)'
                            r'\.js[^"]*"[^>]*>\s*</script>')


def without_search_index(html: str, search_as_you_type) -> str:
    """The page head without Sphinx's search scripts, unless the theme searches as you type."""
    from markupsafe import Markup

    if str(search_as_you_type).lower() == "true":
        return html
    return Markup(SEARCH_SCRIPTS.sub("", str(html)))


def add_template_filters(app) -> None:
    templates = getattr(app.builder, "templates", None)
    if templates is not None and hasattr(templates, "environment"):
        templates.environment.filters["attnlib_without_fontawesome"] = without_fontawesome
        templates.environment.filters["attnlib_without_search_index"] = without_search_index


ICONS_CSS = "attnlib-icons.css"
PACKS = {"fa-solid": "fas", "fas": "fas", "fa-brands": "fab", "fab": "fab",
         "fa-regular": "far", "far": "far"}
NOT_ICONS = {"fa-lg", "fa-xs", "fa-sm", "fa-xl", "fa-2xs", "fa-2xl", "fa-fw", "fa-spin",
             "fa-pulse", "fa-border", "fa-inverse", "fa-1x", "fa-2x", "fa-3x"}
_ICON_DEF = re.compile(r'[{,]"?([a-z0-9-]+)"?:\[(\d+),(\d+),\[[^\]]*\],"[0-9a-f]+",'
                       r'("[^"]*"|\[[^\]]*\])\]')


def fontawesome_js() -> Path | None:
    try:
        import pydata_sphinx_theme
    except ImportError:
        return None
    path = (Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static"
            / "scripts" / "fontawesome.js")
    return path if path.is_file() else None


def fontawesome_icons(js: str) -> dict[tuple[str, str], tuple[int, int, str]]:
    """{(pack, name): (width, height, path)} from Font Awesome's SVG+JS bundle, whose packs are
    registered in order by ``("fab",p)``, ``("far",p)`` and ``("fas",p)`` calls."""
    icons: dict[tuple[str, str], tuple[int, int, str]] = {}
    start = 0
    for m in re.finditer(r'\("(fab|far|fas)",\w\)', js):
        pack = m.group(1)
        for d in _ICON_DEF.finditer(js, start, m.start()):
            path = json.loads(d.group(4))
            if isinstance(path, list):  # duotone: [secondary, primary]
                path = " ".join(path)
            icons.setdefault((pack, d.group(1)), (int(d.group(2)), int(d.group(3)), path))
        start = m.end()
    return icons


# pydata-sphinx-theme 0.17's admonition icons (--pst-icon-admonition-*), by their Font Awesome 6 names
ADMONITION_ICONS = {"": "bell", "attention": "circle-exclamation", "caution": "triangle-exclamation",
                    "warning": "triangle-exclamation", "danger": "triangle-exclamation",
                    "error": "circle-xmark", "hint": "lightbulb", "tip": "lightbulb",
                    "important": "circle-exclamation", "note": "circle-info", "seealso": "share",
                    "todo": "pencil"}


def used_admonitions(html_files) -> set[str]:
    """The admonition kinds ("" for a plain one) whose title the pages show."""
    kinds = set()
    for path in html_files:
        text = path.read_text("utf-8")
        for classes in re.findall(r'<div class="([^"]*\badmonition\b[^"]*)">\s*'
                                  r'<p class="admonition-title"', text):
            named = [c for c in classes.split() if c in ADMONITION_ICONS]
            kinds.add(named[0] if named else "")
    return kinds


def used_icons(html_files) -> set[tuple[str, str]]:
    """(pack, icon) for every element whose classes name a Font Awesome pack and an icon."""
    used = set()
    for path in html_files:
        for classes in re.findall(r'class="([^"]*\bfa-?[a-z]*\b[^"]*)"', path.read_text("utf-8")):
            tokens = classes.split()
            packs = {PACKS[t] for t in tokens if t in PACKS}
            names = [t[3:] for t in tokens if t.startswith("fa-") and t not in PACKS
                     and t not in NOT_ICONS]
            used.update((pack, name) for pack in packs for name in names)
    return used


def _mask_url(icon: tuple[int, int, str]) -> str:
    from urllib.parse import quote

    w, h, path = icon
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}"><path d="{path}"/></svg>'
    return f'url("data:image/svg+xml,{quote(svg, safe=" /=:,.-")}")'


def icons_css(icons, used, admonitions=()) -> tuple[str, list[tuple[str, str]]]:
    """The stylesheet for the used icons (and admonition kinds), and the icons it could not find."""
    rules = ["/* Generated by scripts/book_checks.py: the theme's Font Awesome icons as CSS masks "
             "(Font Awesome Free, https://fontawesome.com, icons CC BY 4.0). */"]
    missing = []
    for pack, name in sorted(used):
        if (pack, name) not in icons:
            missing.append((pack, name))
            continue
        w, h, _ = icons[pack, name]
        selector = ",".join(f".{cls}.fa-{name}::before" for cls, p in PACKS.items() if p == pack)
        rules.append(f"{selector}{{--attnlib-icon:{_mask_url(icons[pack, name])};width:{w / h:.4g}em}}")
    for kind in sorted(admonitions):
        name = ADMONITION_ICONS[kind]
        if ("fas", name) not in icons:
            missing.append(("fas", name))
            continue
        cls = f".{kind}" if kind else ""
        rules.append(f"div.admonition{cls}>.admonition-title::after{{content:''!important;"
                     "font-family:inherit!important;"
                     f"background-color:currentColor;-webkit-mask:{_mask_url(icons['fas', name])} "
                     f"center/contain no-repeat;mask:{_mask_url(icons['fas', name])} center/contain "
                     "no-repeat}")
    packs = ",".join(f".{cls}[class*=' fa-']::before" for cls in PACKS)
    rules.append(f"{packs}{{content:''!important;display:inline-block;height:1em;"
                 "vertical-align:-0.125em;background-color:currentColor;"
                 "-webkit-mask:var(--attnlib-icon) center/contain no-repeat;"
                 "mask:var(--attnlib-icon) center/contain no-repeat}")
    # an icon's own box still named the icon font, and the browser fetched the font (150 kB each,
    # twice more where the widget manager's Font Awesome 5 claims the same class names) to size
    # an empty line: the icon takes the font of its text instead
    elements = ",".join(f".{cls}[class*=' fa-']" for cls in PACKS)
    rules.append(f"{elements}{{font-family:inherit!important;font-weight:inherit!important}}")
    return "\n".join(rules) + "\n", missing


def write_icons_css(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    js = fontawesome_js()
    if js is None:
        logger.warning("pydata-sphinx-theme's fontawesome.js not found: the book's icons are "
                       "missing", type="attnlib", subtype="icons")
        return
    pages = sorted(out.rglob("*.html"))
    css, missing = icons_css(fontawesome_icons(js.read_text("utf-8")), used_icons(pages),
                             used_admonitions(pages))
    for pack, name in missing:
        logger.warning("icon %s fa-%s is used but not in fontawesome.js", pack, name,
                       type="attnlib", subtype="icons")
    (out / "_static").mkdir(exist_ok=True)
    (out / "_static" / ICONS_CSS).write_text(css, encoding="utf-8")


class SetupCellAfterIntro(SphinxTransform):
    """Move a notebook page's leading setup cell below its title and introduction."""

    default_priority = 500

    def apply(self, **kwargs) -> None:
        doc = self.document
        sections = [c for c in doc.children if isinstance(c, nodes.section)]
        if not sections:
            return
        chapter = sections[0]
        leading = doc.children[: doc.children.index(chapter)]
        cells = [c for c in leading if isinstance(c, nodes.container)
                 and c.get("nb_element") == "cell_code" and c.get("cell_index") == 0]
        if not cells:
            return
        cell = cells[0]
        doc.remove(cell)
        first_section = next((i for i, c in enumerate(chapter.children)
                              if isinstance(c, nodes.section)), len(chapter.children))
        chapter.insert(first_section, cell)
        cell["classes"].append("attnlib-setup-cell")


class EmbeddedDiagrams(SphinxTransform):
    """Show an embedded diagram's file again on the book's page (see the module docstring)."""

    default_priority = 505  # before ChapterOpener and NarrowDiagrams, which read the path

    def apply(self, **kwargs) -> None:
        from embed_figures import embedded, relative_uri, sha256

        figures = Path(self.app.srcdir) / "book" / "figures"
        for img in self.document.findall(nodes.image):
            found = embedded(img.get("uri", ""))
            if not found:
                continue
            name, drawn = found
            path = figures / name
            if not path.is_file():
                logger.warning("an embedded diagram names book/figures/%s, which does not exist",
                               name, location=img, type="attnlib", subtype="embedded_figure")
                continue
            if drawn != sha256(path):
                logger.warning("the embedded copy of book/figures/%s is stale: run "
                               "python scripts/embed_figures.py", name, location=img,
                               type="attnlib", subtype="embedded_figure")
            img["uri"] = relative_uri(self.env.docname, name)


class ChapterOpener(SphinxTransform):
    """Preview a chapter's first diagram under its first paragraph (see the module docstring)."""

    default_priority = 510

    def apply(self, **kwargs) -> None:
        if not self.env.docname.startswith("notebooks/"):
            return
        sections = [c for c in self.document.children if isinstance(c, nodes.section)]
        if not sections:
            return
        chapter = sections[0]
        diagrams = [img for img in chapter.findall(nodes.image)
                    if "book/figures/" in img.get("uri", "")]
        if not diagrams:
            return
        first = diagrams[0]
        home = first.parent
        while home is not None and not isinstance(home, nodes.section):
            home = home.parent
        if home is chapter or home is None:
            return  # already in the introduction
        intro = next((i for i, c in enumerate(chapter.children) if isinstance(c, nodes.paragraph)),
                     None)
        if intro is None or not home.get("ids"):
            return
        image = first.deepcopy()
        image["classes"] = [*image.get("classes", []), "attnlib-opener-image"]
        note = nodes.paragraph(classes=["attnlib-opener-note"])
        ref = nodes.reference("", "", internal=True, refid=home["ids"][0])
        ref += nodes.Text(home[0].astext() if len(home) and isinstance(home[0], nodes.title) else "")
        note += [nodes.Text("The chapter in one picture; it is explained in "), ref, nodes.Text(".")]
        box = nodes.container(classes=["attnlib-opener"])
        box += [nodes.paragraph("", "", image), note]
        chapter.insert(intro + 1, box)


NARROW_MEDIA = "(max-width: 599px)"


class NarrowDiagrams(SphinxTransform):
    """Mark each diagram that has a narrow layout, and make Sphinx copy that file too."""

    default_priority = 520  # after ChapterOpener, whose copies are marked as well

    def apply(self, **kwargs) -> None:
        here = posixpath.dirname(self.env.docname)
        for img in self.document.findall(nodes.image):
            uri = posixpath.normpath(posixpath.join(here, img.get("uri", "")))
            if not (uri.startswith("book/figures/") and uri.endswith(".svg")) or \
                    uri.endswith(".narrow.svg"):
                continue
            narrow = uri[:-4] + ".narrow.svg"
            if not (Path(self.app.srcdir) / narrow).is_file():
                continue
            self.env.images.add_file(self.env.docname, narrow)
            self.env.note_dependency(narrow)
            img["attnlib_narrow"] = narrow


class DiagramPictures(SphinxPostTransform):
    """Wrap each marked diagram in <picture> with a <source> for narrow screens."""

    default_priority = 200
    formats = ("html",)

    def run(self, **kwargs) -> None:
        builder = self.app.builder
        images = getattr(builder, "images", None)
        if images is None:
            return
        for img in list(self.document.findall(nodes.image)):
            narrow = img.get("attnlib_narrow")
            if not narrow or narrow not in self.env.images:
                continue
            images[narrow] = self.env.images[narrow][1]  # copied to _images with the others
            url = relative_uri(builder.get_target_uri(self.env.docname),
                               f"{builder.imagedir}/{images[narrow]}")
            parent = img.parent
            at = parent.index(img)
            parent.insert(at, nodes.raw("", f'<picture class="attnlib-diagram-picture"><source '
                                            f'media="{NARROW_MEDIA}" srcset="{url}">', format="html"))
            parent.insert(at + 2, nodes.raw("", "</picture>", format="html"))
            img["classes"] = [*img.get("classes", []), "attnlib-diagram"]


# ----------------------------------------------------------------- shared assets, widget state
VIZ = Path(__file__).resolve().parent.parent / "attnlib" / "viz"
# scripts of attnlib/viz that only define globals (guarded or idempotent), so one copy per page
# serves every output; the others (explorer.js, mask.js, ...) also start their own output
LIBRARY_JS = ("engine.js", "kit.js", "heatmap_keys.js", "sampling.js", "weights.js", "live_model.js", "live_lab.js",
              "vectors.js", "wasm.js", "gguf.js", "bpe.js", "llm_panels.js")


def shared_assets() -> list[str]:
    """The texts of attnlib's shared files, longest first (one never hides inside another)."""
    files = [VIZ / n for n in LIBRARY_JS] + sorted(VIZ.glob("*.css"))
    return sorted({f.read_text(encoding="utf-8") for f in files if f.is_file()}, key=len, reverse=True)


def dedupe_assets(htmls: list[str], assets: list[str]) -> list[str]:
    """``htmls`` (a page's raw HTML blocks, in page order) with every shared file after its first
    copy removed."""
    seen: set[str] = set()
    out = []
    for html in htmls:
        for asset in assets:
            if asset not in html:
                continue
            if asset in seen:
                html = html.replace(asset, "")
            else:
                first = html.index(asset) + len(asset)
                html = html[:first] + html[first:].replace(asset, "")
                seen.add(asset)
        out.append(html)
    return out


class SharedOutputAssets(SphinxPostTransform):
    """One copy per page of each shared attnlib script and stylesheet (see the module docstring)."""

    default_priority = 210
    formats = ("html",)

    def run(self, **kwargs) -> None:
        raws = [r for r in self.document.findall(nodes.raw)
                if "html" in r.get("format", "").split() and "attnlib" in r.astext()]
        if len(raws) < 2:
            return
        texts = dedupe_assets([r.astext() for r in raws], shared_assets())
        for raw, text in zip(raws, texts):
            if text != raw.astext():
                raw.children = [nodes.Text(text)]


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_NULL_BY_DEFAULT = ("_view_count", "tabbable", "tooltip")


def compact_widget_state(state: dict) -> dict:
    """The widget state without what the widget manager's defaults restore (see the docstring)."""
    models = {}
    for key, model in state.get("state", {}).items():
        st = model.get("state", {})
        if model.get("model_name") == "LayoutModel":  # every CSS property defaults to null
            st = {k: v for k, v in st.items() if v is not None or k.startswith("_")}
        st = {k: v for k, v in st.items()
              if not (k in _NULL_BY_DEFAULT and v is None) and not (k == "_dom_classes" and v == [])}
        models[key] = {**model, "state": st}
    return {**state, "state": models}


def compact_widget_assets(app, pagename, templatename, context, doctree) -> None:
    """Rewrite the page's widget-state script (myst-nb's, from the notebook) compactly."""
    from sphinx.builders.html._assets import _JavaScript

    files = context.get("script_files") or []
    for i, asset in enumerate(files):
        attrs = getattr(asset, "attributes", None) or {}
        if attrs.get("type") != WIDGET_STATE or not attrs.get("body"):
            continue
        state = compact_widget_state(json.loads(attrs["body"]))
        body = json.dumps(state, separators=(",", ":"), ensure_ascii=False)
        body = body.replace("</", "<\\/")  # JSON's escaped "/": nothing closes the script element
        files[i] = _JavaScript(asset.filename, priority=asset.priority, **{**attrs, "body": body})


# How far an output figure may grow beyond IPython's retina size: 1.6x puts a 5-inch figure's
# 10-point ticks at ~16 px, the body text's size (at 2x, the PNG's own pixels, they were ~20 px,
# larger than the text they illustrate); a 7-inch figure then fills the 740 px column.
GROWTH = 1.6


class OutputFiguresFillTheColumn(SphinxPostTransform):
    """A matplotlib figure in a cell's output is stored at twice its CSS size (IPython's retina
    PNG, whose metadata width is half the pixels) and shown at that width: a 5-inch figure took
    332 px of a 740 px column, its ticks ~10 px. Here it may grow to the column's width (half of
    it for figures side by side, two to a row), up to GROWTH times that size, so that its ticks
    read like the text (and it is never blurred beyond its own pixels); the height follows the
    aspect ratio."""

    default_priority = 200

    def run(self, **kwargs) -> None:
        for out in self.document.findall(nodes.container):
            if "cell_output" not in out.get("classes", []):
                continue
            images = [img for img in out.findall(nodes.image)
                      if img.get("uri", "").endswith(".png")
                      and re.fullmatch(r"[0-9.]+(px)?", str(img.get("width", "")))]
            # two to a row at most, on a laptop; one on a phone (book.css sets --attnlib-pair)
            share = "var(--attnlib-pair, 100%)" if len(images) > 1 else "100%"
            for img in images:
                stored = float(str(img["width"]).removesuffix("px"))  # half the PNG's pixels
                img["width"] = f"min({share}, {GROWTH * stored:.0f}px)"
                img.attributes.pop("height", None)


# ----------------------------------------------------------------- precomputed sliders as HTML
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_VIEW_SCRIPT = re.compile(r'<script type="application/vnd\.jupyter\.widget-view\+json">(.*?)'
                          r'</script>', re.S)
PSLIDER_JS = Path(__file__).resolve().parent / "precomputed_slider.js"


def _ref(value) -> str | None:
    return value[len("IPY_MODEL_"):] if isinstance(value, str) and value.startswith("IPY_MODEL_") \
        else None


def precomputed_slider_parts(state: dict, model_id: str) -> dict | None:
    """What the page needs to draw the stored widget ``model_id`` without the widget manager,
    when it is a precomputed slider: a VBox of a SelectionSlider and a Stack of Output widgets,
    the slider's index ``jslink``ed to the Stack's selected_index, one output per option.
    Returns {description, labels, index, states: [[output, ...] per label]}, or None for any
    other widget (which keeps the widget manager)."""
    models = state.get("state", state) if "state" in state else state
    box = models.get(model_id)
    if not box or box.get("model_name") != "VBoxModel":
        return None
    kids = [_ref(c) for c in box.get("state", {}).get("children", [])]
    if len(kids) != 2 or None in kids:
        return None
    slider, stack = models.get(kids[0]), models.get(kids[1])
    if not slider or not stack or slider.get("model_name") != "SelectionSliderModel" \
            or stack.get("model_name") != "StackModel":
        return None
    ends = {(kids[0], "index"), (kids[1], "selected_index")}
    linked = any(m.get("model_name") == "LinkModel" and
                 {(_ref(e[0]), e[1]) for e in (m["state"].get("source"), m["state"].get("target"))
                  if isinstance(e, list) and len(e) == 2} == ends for m in models.values())
    if not linked:
        return None
    s = slider.get("state", {})
    labels = [str(x) for x in s.get("_options_labels", [])]
    outs = [models.get(_ref(c) or "") for c in stack.get("state", {}).get("children", [])]
    if not labels or len(outs) != len(labels) or \
            any(not o or o.get("model_name") != "OutputModel" for o in outs):
        return None
    index = s.get("index")
    index = index if isinstance(index, int) and 0 <= index < len(labels) else 0
    return {"description": str(s.get("description") or "value"), "labels": labels, "index": index,
            "states": [list(o.get("state", {}).get("outputs", []) or []) for o in outs]}


def _joined(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _state_html(outputs: list[dict], alt: str) -> str:
    """One state's outputs as HTML: a figure as an <img> (its stored PNG, at its stored size, no
    wider than the column), HTML as it is, text in a <pre>."""
    import html as _html

    parts = []
    for out in outputs:
        data, meta = out.get("data", {}) or {}, out.get("metadata", {}) or {}
        if out.get("output_type") == "stream":
            parts.append(f'<pre class="attnlib-pslider-text">{_html.escape(_joined(out.get("text", "")))}</pre>')
        elif "image/png" in data:
            size = meta.get("image/png", {}) or {}
            dims = "".join(f' {k}="{int(size[k])}"' for k in ("width", "height")
                           if isinstance(size.get(k), (int, float)))
            png = _joined(data["image/png"]).replace("\n", "")
            parts.append(f'<img src="data:image/png;base64,{png}"{dims} '
                         f'alt="{_html.escape(alt, quote=True)}">')
        elif "text/html" in data:
            # the classes of a cell's HTML output: the theme's dark-mode card (dark text on a
            # light card) for plain HTML, none for an attnlib output (explorer.css)
            parts.append(f'<div class="output text_html attnlib-pslider-html">'
                         f'{_joined(data["text/html"])}</div>')
        elif "text/plain" in data:
            parts.append(f'<pre class="attnlib-pslider-text">{_html.escape(_joined(data["text/plain"]))}</pre>')
    return "".join(parts)


def precomputed_slider_html(parts: dict, uid: str, alt: str = "", script: bool = True) -> str:
    """The slider of ``parts`` (precomputed_slider_parts) as the book's own HTML: a labelled
    range input (keyboard: arrows, Home/End) whose value is said beside it and in its
    aria-valuetext, over one block per state, all but the chosen one hidden. A hidden state's
    HTML sits in a <template>: inert (not in the page's DOM, its images not decoded) until the
    slider first picks it (scripts/precomputed_slider.js clones it in)."""
    import html as _html

    esc = lambda t: _html.escape(str(t), quote=True)  # noqa: E731
    name, labels, index = parts["description"], parts["labels"], parts["index"]
    states = []
    for k, (label, outputs) in enumerate(zip(labels, parts["states"])):
        state_alt = f"{alt} (shown: {name} {label})" if alt else f"{name} {label}"
        body = _state_html(outputs, state_alt)
        states.append(f'<div class="attnlib-pslider-state" data-label="{esc(label)}">{body}</div>'
                      if k == index else
                      f'<div class="attnlib-pslider-state" data-label="{esc(label)}" hidden>'
                      f'<template>{body}</template></div>')
    js = f"<script>{PSLIDER_JS.read_text(encoding='utf-8')}</script>" if script else ""
    return (f'<div class="attnlib-pslider" id="{esc(uid)}" data-state="{esc(labels[index])}">'
            f'<div class="attnlib-controls"><label class="attnlib-control"><span>{esc(name)}</span>'
            f'<input type="range" class="attnlib-pslider-range" min="0" max="{len(labels) - 1}" '
            f'step="1" value="{index}" aria-label="{esc(name)}" '
            f'aria-valuetext="{esc(f"{name} {labels[index]}")}">'
            f'<output class="attnlib-pslider-value">{esc(labels[index])}</output></label></div>'
            f'<div class="attnlib-pslider-states">{"".join(states)}</div></div>{js}')


_STATE_CACHE: dict[str, tuple[float, dict, list]] = {}


def _notebook(path: Path) -> tuple[dict, list]:
    """(stored widget state, cells) of a notebook, read once per change."""
    key, mtime = str(path), path.stat().st_mtime
    if key not in _STATE_CACHE or _STATE_CACHE[key][0] != mtime:
        nb = json.loads(path.read_text(encoding="utf-8"))
        state = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
        _STATE_CACHE[key] = (mtime, state, nb.get("cells", []))
    return _STATE_CACHE[key][1], _STATE_CACHE[key][2]


class PrecomputedSliders(SphinxPostTransform):
    """Each precomputed slider's widget view becomes the book's own HTML (see the docstring)."""

    default_priority = 205  # before SharedOutputAssets: the states' shared files, once a page
    formats = ("html",)

    def run(self, **kwargs) -> None:
        path = Path(self.env.doc2path(self.env.docname))
        if path.suffix != ".ipynb":
            return
        raws = [r for r in self.document.findall(nodes.raw) if WIDGET_VIEW in r.astext()]
        if not raws:
            return
        state, cells = _notebook(path)
        script = True
        for n, raw in enumerate(raws):
            m = _VIEW_SCRIPT.fullmatch(raw.astext().strip())
            if not m:
                continue
            parts = precomputed_slider_parts(state, json.loads(m.group(1)).get("model_id", ""))
            if parts is None:
                continue
            cell = raw.parent
            while cell is not None and cell.get("nb_element") != "cell_code":
                cell = cell.parent
            meta = (cell.get("cell_metadata") or {}) if cell is not None else {}
            alt = ((meta.get("mystnb") or {}).get("image") or {}).get("alt", "")
            uid = f"attnlib-pslider-{n}"
            raw.replace_self(nodes.raw("", precomputed_slider_html(parts, uid, alt, script),
                                       format="html"))
            script = False  # one copy of the script a page


def drop_unused_widget_manager(app, pagename, templatename, context, doctree) -> None:
    """A page whose widget views are all gone (drawn by PrecomputedSliders) loads neither the
    widget state nor the widget manager and its shim."""
    if WIDGET_VIEW in context.get("body", ""):
        return
    manager = set(app.config.nb_ipywidgets_js or {})
    files = context.get("script_files") or []
    keep = []
    for asset in files:
        attrs = getattr(asset, "attributes", None) or {}
        name = str(getattr(asset, "filename", None) or "").removeprefix("_static/")
        if attrs.get("type") == WIDGET_STATE or (name and name in manager):
            continue
        keep.append(asset)
    files[:] = keep


def setup(app):
    app.add_transform(SetupCellAfterIntro)
    app.add_transform(EmbeddedDiagrams)
    app.add_transform(ChapterOpener)
    app.add_transform(NarrowDiagrams)
    app.add_post_transform(DiagramPictures)
    app.add_post_transform(PrecomputedSliders)
    app.add_post_transform(SharedOutputAssets)
    app.add_post_transform(OutputFiguresFillTheColumn)
    app.add_css_file(ICONS_CSS)
    app.connect("build-finished", write_icons_css)
    app.connect("builder-inited", add_template_filters)
    app.connect("source-read", check_notebook)
    app.connect("doctree-read", register_glossary_anchors)
    app.connect("html-page-context", drop_thebe_assets, priority=900)
    app.connect("html-page-context", compact_widget_assets, priority=900)
    app.connect("html-page-context", drop_unused_widget_manager, priority=901)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
