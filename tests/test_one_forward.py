"""The model the book teaches is the model that runs: generate calls the model's own forward.

No second decoder exists: every generated token passes through ``GPT.forward``,
``DecoderLayer.forward`` and ``MultiHeadAttention.forward``; the forward compiles to one graph;
and generation leaves nothing behind (no weight copies, no changed mode, no inference tensors).
"""
from __future__ import annotations

import threading

import pytest
import torch

import attnlib
from attnlib import GPT, KVCache, MultiHeadAttention, TransformerConfig
from attnlib.layers import DecoderLayer


def tiny(**kw) -> GPT:
    torch.manual_seed(0)
    base = dict(vocab_size=23, d_model=16, n_heads=4, n_layers=2, max_len=32)
    base.update(kw)
    return GPT(TransformerConfig(**base)).eval()


def test_generate_runs_the_modules_the_chapters_teach(monkeypatch):
    """Count calls of the teaching modules' forward during generate: one per layer per step."""
    model = tiny()
    calls = {"gpt": 0, "layer": 0, "mha": 0}
    for cls, name in ((GPT, "gpt"), (DecoderLayer, "layer"), (MultiHeadAttention, "mha")):
        original = cls.forward

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(cls, "forward", counted)
    ids = torch.tensor([[1, 2, 3]])
    out = model.generate(ids, 5, temperature=0.0)
    assert out.shape == (1, 8)
    assert calls == {"gpt": 5, "layer": 5 * 2, "mha": 5 * 2}  # the prefill and 4 one-token steps


def test_generate_equals_argmax_of_the_models_own_forward():
    model = tiny(positional="rope", n_kv_heads=2, norm="rmsnorm", activation="swiglu")
    ids = torch.tensor([[4, 5, 6, 7]])
    out = model.generate(ids, 6, temperature=0.0)
    seq = ids
    with torch.no_grad():
        for _ in range(6):
            seq = torch.cat([seq, model(seq).logits[:, -1:].argmax(-1)], dim=1)
    assert torch.equal(out, seq)


def test_logits_to_keep_gives_the_last_positions_only():
    model = tiny()
    ids = torch.randint(0, 23, (2, 9))
    with torch.no_grad():
        full = model(ids).logits
        last = model(ids, logits_to_keep=1).logits
        three = model(ids, logits_to_keep=3).logits
    assert last.shape == (2, 1, 23) and three.shape == (2, 3, 23)
    torch.testing.assert_close(last, full[:, -1:])
    torch.testing.assert_close(three, full[:, -3:])
    with pytest.raises(ValueError, match="logits_to_keep=0 with targets"):
        model(ids, targets=ids, logits_to_keep=1)
    with pytest.raises(ValueError, match="logits_to_keep must be an int >= 0"):
        model(ids, logits_to_keep=-1)


def test_generation_keeps_no_weight_copies_and_returns_an_ordinary_tensor():
    model = tiny()
    before = {k: (v.data_ptr(), v.clone()) for k, v in model.state_dict().items()}
    n_tensors = len(vars(model))
    out = model.generate(torch.tensor([[1, 2]]), 4, temperature=0.0)
    assert not out.is_inference()  # a caller may write into it or use it under autograd
    out[0, 0] = 3
    assert len(vars(model)) == n_tensors  # nothing stashed on the model
    for k, v in model.state_dict().items():
        assert v.data_ptr() == before[k][0] and torch.equal(v, before[k][1])
    model.train()
    loss = model(out[:, :-1], targets=out[:, 1:]).loss
    loss.backward()  # trains after generate: no inference tensor left on the model
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("mode", [True, False])
def test_generate_leaves_the_callers_mode_also_from_two_threads(mode):
    model = tiny(dropout=0.1).train(mode)
    errors = []

    def work():
        try:
            for _ in range(5):
                model.generate(torch.tensor([[1, 2]]), 6, temperature=0.0)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and model.training is mode
    assert all(m.training is mode for m in model.modules())


def test_generate_is_greedy_identical_with_dropout_in_train_mode():
    """generate runs in eval mode whatever the caller's mode: no dropout while decoding."""
    model = tiny(dropout=0.5)
    ids = torch.tensor([[1, 2, 3]])
    a = model.generate(ids, 8, temperature=0.0)
    model.train()
    b = model.generate(ids, 8, temperature=0.0)
    assert torch.equal(a, b) and model.training


MLA = dict(positional="rope", norm="rmsnorm", activation="swiglu", attention="mla",
           kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=6)


@pytest.mark.parametrize("kw", [{}, dict(positional="rope", n_kv_heads=2, norm="rmsnorm", activation="swiglu"),
                                MLA, dict(MLA, q_lora_rank=8)])
def test_forward_compiles_to_one_graph_and_equals_eager(kw):
    torch._dynamo.reset()
    model = tiny(**kw)
    ids = torch.randint(0, 23, (2, 12))
    with torch.no_grad():
        explained = torch._dynamo.explain(model)(ids, targets=ids)
        assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
        cache = KVCache()
        step = torch._dynamo.explain(model)(ids, cache=cache)  # a cached prefill, too
        assert step.graph_break_count == 0, step.break_reasons
        compiled = torch.compile(model)
        torch.testing.assert_close(compiled(ids).logits, model(ids).logits, atol=1e-5, rtol=1e-5)
        # the compiled model refuses an id outside the vocabulary at its door, as eager does (the
        # check runs when the graph runs: not inductor's index error from inside a kernel)
        for bad in (23, -1):
            wrong = ids.clone()
            wrong[1, 7] = bad
            with pytest.raises(ValueError, match=f"input_ids contains token id {bad}, outside"):
                compiled(wrong)
    torch._dynamo.reset()


@pytest.mark.parametrize("kw", [MLA, dict(MLA, q_lora_rank=8)])
def test_a_cached_decode_step_compiles_to_one_graph(kw):
    """A one-token step over a filled cache of latents has no graph break, and compiled steps
    equal eager ones."""
    torch._dynamo.reset()
    model = tiny(**kw)
    ids = torch.randint(0, 23, (2, 6))
    with torch.no_grad():
        cache = KVCache()
        model(ids[:, :5], cache=cache)
        step = torch._dynamo.explain(model)(ids[:, 5:], cache=cache, logits_to_keep=1)
        assert step.graph_break_count == 0 and step.graph_count == 1, step.break_reasons
        compiled, eager = torch.compile(model), KVCache()
        cache = KVCache()
        for a, b in ((0, 5), (5, 6)):
            got = compiled(ids[:, a:b], cache=cache, logits_to_keep=1).logits
            want = model(ids[:, a:b], cache=eager, logits_to_keep=1).logits
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch._dynamo.reset()


def test_generate_runs_latent_attention_once_per_layer_per_step(monkeypatch):
    model = tiny(**MLA)
    calls = []
    original = attnlib.MultiHeadLatentAttention.forward

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(attnlib.MultiHeadLatentAttention, "forward", counted)
    out = model.generate(torch.tensor([[1, 2, 3]]), 5, temperature=0.0)
    assert out.shape == (1, 8) and len(calls) == 5 * 2


def test_eager_checks_still_refuse_bad_ids():
    model = tiny()
    with pytest.raises(ValueError, match="token id 99, outside \\[0, vocab_size=23\\)"):
        model(torch.tensor([[1, 99]]))


def test_the_package_holds_no_second_decoder():
    import importlib.util

    for gone in ("attnlib.kernels", "attnlib.decode"):
        assert importlib.util.find_spec(gone) is None, gone
    layers = [m for m in tiny().modules() if isinstance(m, torch.nn.Linear)]
    assert all(type(m) is torch.nn.Linear for m in layers)  # plain nn.Linear, nothing swapped in


def _lines_run(fn, record=lambda: True) -> set:
    """The (file, line) pairs of attnlib's own code that fn executes while ``record()`` holds."""
    import os
    import sys

    root = os.path.dirname(attnlib.__file__)
    seen = set()

    def tracer(frame, event, arg):
        if not frame.f_code.co_filename.startswith(root):
            return None  # not attnlib: do not trace inside it
        if event == "line" and record():
            seen.add((frame.f_code.co_filename, frame.f_lineno))
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return seen


def test_a_cached_decode_step_runs_at_most_100_lines_of_attnlib():
    """The model is what a decode step runs: its checks at the door, then the layers' arithmetic
    (issue 43: 143 distinct lines before, in 9 files). Called directly, and inside generate."""
    model, tok = attnlib.load_tiny_gpt()
    ids = torch.tensor([tok.encode("In the beginning God")])
    cache = KVCache()
    with torch.inference_mode():
        model(ids, cache=cache)
        model(ids[:, -1:], cache=cache, logits_to_keep=1)  # a first step
        lines = _lines_run(lambda: model(ids[:, -1:], cache=cache, logits_to_keep=1))
    files = {f for f, _ in lines}
    print(f"a cached decode step: {len(lines)} distinct attnlib lines in {len(files)} files")
    assert len(lines) <= 100, sorted(lines)
    # inside generate: one step, from the third forward call (after the prefill and a first
    # step) up to the fourth: the forward, the token's choice and the loop's own lines (the
    # NaN check after the loop runs once per call, not per step)
    calls = []
    hook = model.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        step = _lines_run(lambda: model.generate(ids, 4, temperature=0.0), lambda: len(calls) == 3)
    finally:
        hook.remove()
    print(f"a decode step inside generate: {len(step)} distinct attnlib lines")
    assert len(step) <= 100, sorted(step)


def test_greedy_generation_reads_nothing_back_per_token(monkeypatch):
    """No host read-back per token in greedy decoding: NaN/inf is checked once per call."""
    model = tiny()
    reads = []
    for name in ("item", "__bool__", "__float__", "__int__", "tolist"):
        original = getattr(torch.Tensor, name)

        def counted(self, *a, _original=original, **kw):
            reads.append(name)
            return _original(self, *a, **kw)
        monkeypatch.setattr(torch.Tensor, name, counted)
    ids = torch.tensor([[1, 2, 3]])
    model.generate(ids, 2, temperature=0.0)
    few = len(reads)
    reads.clear()
    model.generate(ids, 12, temperature=0.0)
    assert len(reads) == few, f"{len(reads)} reads for 12 tokens against {few} for 2"
