"""viz.live_model (Python side) and attnlib.tiny_gpt: the payload carries exactly the model's weights,
the HTML is self-contained and escaped, unsupported models are refused clearly, and the committed
checkpoint is chapter 10's model. The JavaScript itself is tested in test_viz_live_browser.py."""
from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest
import torch

import attnlib
from attnlib import viz
from attnlib.tiny_gpt import TINY_GPT_RECIPE, load_tiny_gpt, save_tiny_gpt, train_tiny_gpt

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    return load_tiny_gpt()


def small(vocab: str = "ab<&>\" c\n", **kw) -> tuple[attnlib.GPT, attnlib.CharTokenizer]:
    tok = attnlib.CharTokenizer(vocab)
    cfg = attnlib.TransformerConfig(vocab_size=tok.vocab_size, d_model=8, n_heads=2, n_layers=1, max_len=16, **kw)
    torch.manual_seed(0)
    return attnlib.GPT(cfg).eval(), tok


def unpack(payload: dict) -> dict[str, np.ndarray]:
    """What live_model.js does with the blob, written again in numpy."""
    blob = base64.b64decode(payload["blob"])
    out = {}
    for t in payload["tensors"]:
        n = int(np.prod(t["shape"]))
        dt = {"f32": "<f4", "f16": "<f2"}[t["dtype"]]
        out[t["name"]] = np.frombuffer(blob, dtype=dt, count=n, offset=t["offset"]).astype(np.float32).reshape(t["shape"])
    return out


def test_checkpoint_is_chapter_9s_model(tiny):
    model, tok = tiny
    r = TINY_GPT_RECIPE
    cfg = model.cfg
    assert (cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.max_len) == (r["d_model"], r["n_heads"], r["n_layers"], r["max_len"])
    assert (cfg.positional, cfg.activation, cfg.norm_first, cfg.tie_weights) == ("learned", "gelu", True, True)
    text = attnlib.load_corpus(r["books"], max_chars=r["max_chars"])
    assert tok.itos == attnlib.CharTokenizer.from_text(text).itos
    assert model.lm_head.weight is model.embed.tok_emb.weight          # tied again after loading
    # trained, not fresh: the loss on the corpus is far below ln V (windows of the trained length)
    data = torch.tensor(tok.encode(text[:4000]))
    batch = torch.stack([data[s:s + r["block_size"] + 1] for s in range(0, 3200, 100)])
    with torch.no_grad():
        loss = model(batch[:, :-1], targets=batch[:, 1:]).loss.item()
    assert loss < np.log(tok.vocab_size) - 1.5


def test_checkpoint_writes_genesis_like_text(tiny):
    """Issue 48's bar for the shipped model: <= 1.8 nats per character on held-out Genesis over
    positions 0-63 (measured 1.59; 1.61 at 0-31, 1.58 at 32-63) and >= 70% real words at
    temperature 0.8 (measured 85.5%: 420 of 491 words in 8 seeded samples of 300 characters)."""
    from attnlib.realwords import real_word_share, sample_texts, words_of

    model, tok = tiny
    book = attnlib.load_corpus(("Genesis",))
    held = torch.tensor(tok.encode("".join(c for c in book[100_000:] if c in tok.stoi)))
    by_pos = attnlib.loss_by_position(model, held, 64)  # (64,): never trained on
    assert by_pos.mean() <= 1.8 and by_pos[32:].mean() <= 1.8, by_pos
    real, total = real_word_share(sample_texts(model, tok, "And ", 300, temperature=0.8, seed=0),
                                  words_of(book[:100_000]))
    assert total > 300 and real / total >= 0.70, (real, total)


def test_saving_twice_writes_the_same_bytes(tiny, tmp_path):
    """safetensors writes its metadata in a changing order; save_tiny_gpt sorts it, so the recipe
    rebuilds the committed file byte for byte on the CPU that trained it."""
    model, tok = tiny
    files = [save_tiny_gpt(model, tok, tmp_path / f"{i}.safetensors", extra={"b": "1", "a": "2"})
             for i in range(4)]
    assert len({f.read_bytes() for f in files}) == 1
    back, _ = load_tiny_gpt(files[0])
    assert all(torch.equal(x, y) for x, y in zip(back.state_dict().values(), model.state_dict().values()))


def test_save_load_round_trip(tmp_path):
    model, tok = small(tie_weights=False, positional="sinusoidal")
    path = save_tiny_gpt(model, tok, tmp_path / "m.safetensors", extra={"note": "x"})
    back, tok2 = load_tiny_gpt(path)
    assert tok2.itos == tok.itos and back.cfg == model.cfg
    ids = torch.tensor([tok.encode("ab<&c")])
    torch.testing.assert_close(back(ids).logits, model(ids).logits, rtol=0, atol=0)
    with pytest.raises(TypeError, match="CharTokenizer"):
        save_tiny_gpt(model, attnlib.BPETokenizer(), tmp_path / "x.safetensors")
    from safetensors.torch import save_file
    save_file({"w": torch.zeros(2)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="not a tiny-GPT checkpoint"):
        load_tiny_gpt(tmp_path / "other.safetensors")


def test_recipe_is_deterministic():
    a, tok_a, ha = train_tiny_gpt(steps=3)
    b, tok_b, hb = train_tiny_gpt(steps=3)
    assert ha == hb and tok_a.itos == tok_b.itos
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert abs(ha[0] - np.log(tok_a.vocab_size)) < 0.15   # a fresh GPT-2-style model starts near ln V


@pytest.mark.slow
def test_recipe_rebuilds_the_committed_checkpoint(tiny):
    """Retraining with the recipe gives a model like the committed one: the same config and
    vocabulary, and the same loss on fixed windows within 0.15 (CPUs with other vector units round
    the last bits differently and 1,000 steps amplify that: measured gaps 0.027 under
    ATEN_CPU_CAPABILITY=default and 0.000 under =avx2, the kernels that trained the committed
    file; the weights themselves then differ by up to 1.4, yet both runs pass the shipped model's
    bar: 1.57 and 1.59 nats per character held out, 89.0% and 85.5% real words)."""
    model, tok, history = train_tiny_gpt()
    ref, ref_tok = tiny
    assert model.cfg == ref.cfg and tok.itos == ref_tok.itos
    data = torch.tensor(tok.encode(attnlib.load_corpus(("Genesis",), max_chars=100_000)))
    batch = torch.stack([data[s:s + 65] for s in range(0, 16 * 500, 500)])  # 16 fixed windows
    with torch.no_grad():
        ours = model(batch[:, :-1], targets=batch[:, 1:]).loss.item()
        theirs = ref(batch[:, :-1], targets=batch[:, 1:]).loss.item()
    assert abs(ours - theirs) < 0.15, (ours, theirs)
    assert theirs < 1.5  # the committed run is a trained model (ln V = 4.09 untrained)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_payload_carries_the_weights(tiny, dtype):
    model, tok = tiny
    live = viz.live_model(model, tok, weights=dtype)
    got = unpack(live.payload)
    assert got["tok"].shape == (tok.vocab_size, 64) and "head" not in got        # tied: sent once
    ref = live.reference_model()
    for name, arr in got.items():
        if name == "pos":
            want = model.embed.pos_emb.weight
        elif name == "tok":
            want = ref.embed.tok_emb.weight
        else:
            layer, part, kind = name.split(".") if name.count(".") == 2 else (None, *name.split("."))
            mod = {"nf": ref.norm_f} if layer is None else {
                "n1": ref.layers[int(layer[1:])].norm1, "n3": ref.layers[int(layer[1:])].norm3,
                "q": ref.layers[int(layer[1:])].self_attn.q_proj, "k": ref.layers[int(layer[1:])].self_attn.k_proj,
                "v": ref.layers[int(layer[1:])].self_attn.v_proj, "o": ref.layers[int(layer[1:])].self_attn.out_proj,
                "f1": ref.layers[int(layer[1:])].ffn.fc1, "f2": ref.layers[int(layer[1:])].ffn.fc2}
            want = getattr(mod[part], {"w": "weight", "b": "bias"}[kind])
        np.testing.assert_array_equal(arr, want.detach().numpy(), err_msg=name)
    n_params = sum(p.numel() for p in model.parameters())
    assert sum(a.size for a in got.values()) == n_params  # every parameter once (pos: the table itself)
    orig = dict(model.named_parameters())
    for name, p in ref.named_parameters():
        if dtype == "float32" or p.dim() == 1 or name == "embed.pos_emb.weight":
            assert torch.equal(p, orig[name]), name                     # shipped exactly
        else:
            torch.testing.assert_close(p, orig[name], rtol=1e-3, atol=1e-4)   # float16 rounding only


def test_float16_changes_the_logits_only_slightly(tiny):
    model, tok = tiny
    ref = viz.live_model(model, tok, weights="float16").reference_model()
    ids = torch.tensor([tok.encode("And God said, Let there be light")])
    with torch.no_grad():
        gap = (ref(ids).logits - model(ids).logits).abs().max().item()
    assert 0 < gap < 1e-2


def test_html_is_self_contained_deterministic_and_small(tiny):
    model, tok = tiny
    a, b = viz.live_model(model, tok), viz.live_model(model, tok)
    canon = a._fragment(f"attnlib-live-{a.uid}")
    norm = lambda h: re.sub(r'id="attnlib-live-([0-9a-f]{12})(-\d+)?"', r'id="attnlib-live-\1"', h)  # noqa: E731
    html, again = a.to_html(), b.to_html()
    assert a.uid == b.uid and norm(html) == canon and norm(again) == canon
    assert re.search(rf'id="attnlib-live-{a.uid}-\d+"', again)   # a second copy in one kernel: "-2", "-3", ...
    assert a.to_html(full_page=True) == b.to_html(full_page=True)
    assert re.search(r"https?:|//cdn|require\(|<script[^>]*\bsrc=|<link\b|<img\b", html) is None
    assert html.count("<script") == 2 and 'class="attnlib-explorer attnlib-live"' in html
    assert a.nbytes < 1.5 * 2**20 and a.nbytes < viz.live_model(model, tok, weights="float32").nbytes
    other = viz.live_model(model, tok, prompt="In the beginning")
    assert other.uid != a.uid
    bundle = a._repr_mimebundle_()
    assert bundle["text/plain"].startswith("LiveModel(") and norm(bundle["text/html"]) == canon


def test_static_fallback_shows_the_first_state(tiny):
    model, tok = tiny
    live = viz.live_model(model, tok, prompt="And God")
    fallback = re.search(r'<div class="attnlib-noscript">(.*?)</div><script', live.to_html(), re.S)[1]
    T = len("And God")
    assert fallback.count("<rect") == T * T and "<svg" in fallback and "xmlns" not in fallback
    assert "Scripts do not run here" in fallback
    with torch.no_grad():
        p = torch.softmax(live.reference_model()(torch.tensor([tok.encode("And God")])).logits[0, -1], -1)
    best = tok.itos[int(p.argmax())]
    assert f"\u201c{best if best != ' ' else chr(0x2423)}\u201d {p.max():.2f}" in fallback


def test_token_text_is_escaped():
    model, tok = small()
    live = viz.live_model(model, tok, prompt='a<&>"', title="<b>x</b>")
    html = live.to_html()
    data = re.search(r'<script type="application/json" class="attnlib-live-data">(.*?)</script>', html, re.S)[1]
    assert "<" not in data and ">" not in data and "&" not in data     # cannot close the script tag
    assert json.loads(data)["vocab"] == tok.itos and json.loads(data)["prompt"] == 'a<&>"'
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    fallback = re.search(r'<div class="attnlib-noscript">(.*?)</div><script', html, re.S)[1]
    assert "&lt;" in fallback and "&amp;" in fallback and "<&" not in fallback


def test_unsupported_models_and_arguments_are_refused():
    model, tok = small()
    with pytest.raises(TypeError, match="attnlib.GPT"):
        viz.live_model(torch.nn.Linear(2, 2), tok)
    with pytest.raises(TypeError, match="CharTokenizer"):
        viz.live_model(model, attnlib.BPETokenizer())
    with pytest.raises(ValueError, match="positional='rope'"):
        viz.live_model(*small(positional="rope"))
    with pytest.raises(ValueError, match="swiglu"):
        viz.live_model(*small(activation="swiglu"))
    with pytest.raises(ValueError, match="weights must be one of"):
        viz.live_model(model, tok, prompt="ab", weights="int4")
    with pytest.raises(ValueError, match="top_p"):
        viz.live_model(model, tok, prompt="ab", top_p=0)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        viz.live_model(model, tok, prompt="xyz")
    with pytest.raises(ValueError, match="max_len=16"):
        viz.live_model(model, tok, prompt="a" * 17)
    with pytest.raises(ValueError, match="vocab_size"):
        viz.live_model(model, attnlib.CharTokenizer("ab"), prompt="ab")


@pytest.mark.parametrize("kw", [dict(norm_first=False), dict(activation="gelu_tanh", bias=False),
                                dict(activation="relu", positional="none", tie_weights=False)])
def test_other_supported_configs_export(kw):
    model, tok = small(**kw)
    live = viz.live_model(model, tok, prompt="ab c")
    names = {t["name"] for t in live.payload["tensors"]}
    assert ("nf.w" in names) == model.cfg.norm_first
    assert ("l0.q.b" in names) == model.cfg.bias
    assert ("head" in names) == (not model.cfg.tie_weights)
    assert ("pos" in names) == (model.cfg.positional != "none")
    assert live.payload["config"]["act"] == model.cfg.activation


def test_playground_output_is_current(tiny):
    """book/playground.ipynb stores the live page as executed; a change to its scripts or styles, to
    live.py or to the checkpoint needs `python scripts/execute_notebooks.py book/playground.ipynb`."""
    from pathlib import Path

    import ast

    nb = json.loads((Path(__file__).resolve().parent.parent / "book" / "playground.ipynb").read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    cell = next(c for c in cells if "live_model" in "".join(c["source"]))
    assert "hide-input" in cell["metadata"].get("tags", [])
    # run the playground's code (without its Colab install line) up to the live model's cell
    scope: dict = {}
    for c in cells[: cells.index(cell) + 1]:
        src = "\n".join(line.split("%")[0] + "pass" if line.strip().startswith("%") else line
                        for line in "".join(c["source"]).splitlines())
        body = ast.parse(src).body
        exec(compile(ast.Module(body=body[:-1], type_ignores=[]), "playground", "exec"), scope)
        last = ast.Expression(body[-1].value) if isinstance(body[-1], ast.Expr) else None
        if last is None:
            exec(compile(ast.Module(body=body[-1:], type_ignores=[]), "playground", "exec"), scope)
            continue
        value = eval(compile(last, "playground", "eval"), scope)
    stored = "".join(next(o for o in cell["outputs"] if "text/html" in o.get("data", {}))["data"]["text/html"])
    assert stored == value._fragment(f"attnlib-live-{value.uid}"), \
        "book/playground.ipynb is stale: re-execute it with scripts/execute_notebooks.py"
