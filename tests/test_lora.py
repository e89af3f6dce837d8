"""attnlib.lora against its definition (W + (alpha / r) B A), against Hugging Face PEFT's LoRA
layer where peft is installed, and on the book's GPT: what trains, what stays, what merges."""
import math

import numpy as np
import pytest
import torch
from torch import nn

import attnlib
from attnlib import LoRALinear, add_lora, merge_lora


def _linear(d_in=12, d_out=8, bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.Linear(d_in, d_out, bias=bias)


def _gpt(**kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=13, d_model=16, n_heads=2, n_layers=2, max_len=16)
    return attnlib.GPT(attnlib.TransformerConfig(**{**cfg, **kw})).eval()


def _randomise_b(layer: LoRALinear, seed=1):
    with torch.no_grad():
        layer.lora_B.copy_(torch.randn(layer.lora_B.shape, generator=torch.Generator().manual_seed(seed)))


def test_starts_equal_to_the_base_and_freezes_it():
    base = _linear()
    x = torch.randn(3, 5, 12)
    lora = LoRALinear(base, 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(lora(x), base(x))                     # B = 0: exactly the base layer
    assert lora.lora_A.shape == (4, 12) and lora.lora_B.shape == (8, 4)
    assert not base.weight.requires_grad and not base.bias.requires_grad
    assert [n for n, p in lora.named_parameters() if p.requires_grad] == ["lora_A", "lora_B"]
    # .weight is the effective weight W + (alpha / r) B A: W itself while B = 0
    assert torch.equal(lora.weight, base.weight)
    assert lora.in_features == 12 and lora.out_features == 8
    # A's scale: std 1 / sqrt(in), so x A^T has the size of x's entries
    big = LoRALinear(_linear(4096, 4), 64, generator=torch.Generator().manual_seed(0))
    assert abs(big.lora_A.std().item() * math.sqrt(4096) - 1) < 0.02


@pytest.mark.parametrize("alpha", [None, 8.0, 1.0])
@pytest.mark.parametrize("bias", [True, False])
def test_is_w_plus_scaled_b_a_and_merges_to_the_same(alpha, bias):
    base = _linear(bias=bias)
    lora = LoRALinear(base, 3, alpha=alpha, generator=torch.Generator().manual_seed(0))
    _randomise_b(lora)
    scaling = (3 if alpha is None else alpha) / 3
    assert lora.scaling == scaling
    x = torch.randn(7, 12)
    W = base.weight + scaling * lora.lora_B @ lora.lora_A            # (out, in)
    expected = x @ W.T + (base.bias if bias else 0)
    torch.testing.assert_close(lora(x), expected)
    torch.testing.assert_close(lora.delta_weight(), scaling * lora.lora_B @ lora.lora_A)
    merged = lora.merged()
    assert type(merged) is nn.Linear and (merged.bias is None) == (not bias)
    torch.testing.assert_close(merged(x), lora(x))
    assert torch.linalg.matrix_rank(lora.delta_weight()).item() <= 3
    # a larger alpha scales the correction, not the base
    double = LoRALinear(base, 3, alpha=2 * scaling * 3)
    with torch.no_grad():
        double.lora_A.copy_(lora.lora_A)
        double.lora_B.copy_(lora.lora_B)
    torch.testing.assert_close(double(x) - base(x), 2 * (lora(x) - base(x)))


def test_equal_to_peft_lora_layer():
    """The same A, B and alpha in Hugging Face PEFT's LoRA Linear give the same outputs."""
    peft = pytest.importorskip("peft")
    base = _linear()
    ours = LoRALinear(base, 4, alpha=8.0, generator=torch.Generator().manual_seed(0))
    _randomise_b(ours)
    model = nn.Sequential()
    model.add_module("proj", _linear())
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["proj"], lora_dropout=0.0)
    theirs = peft.get_peft_model(model, config)
    layer = theirs.base_model.model.proj
    with torch.no_grad():
        layer.lora_A["default"].weight.copy_(ours.lora_A)
        layer.lora_B["default"].weight.copy_(ours.lora_B)
    x = torch.randn(5, 12)
    torch.testing.assert_close(layer(x), ours(x))


def test_add_lora_freezes_the_model_and_counts_r_times_in_plus_out():
    model = _gpt()
    in_blocks = lambda name: name.startswith("layers.")
    adapted = add_lora(model, 2, where=in_blocks, generator=torch.Generator().manual_seed(0))
    picked = [m for n, m in model.named_modules() if isinstance(m, nn.Linear) and in_blocks(n)]
    assert len(picked) == 2 * 6                             # q, k, v, out, fc1, fc2 per layer
    trainable = {n: p.numel() for n, p in adapted.named_parameters() if p.requires_grad}
    assert all(n.endswith(("lora_A", "lora_B")) for n in trainable)
    assert sum(trainable.values()) == sum(2 * (m.in_features + m.out_features) for m in picked)
    assert all(p.requires_grad for p in model.parameters())  # the original is untouched
    assert type(model.layers[0].self_attn.q_proj) is nn.Linear
    ids = torch.randint(0, 13, (2, 9), generator=torch.Generator().manual_seed(1))
    assert torch.equal(adapted(ids).logits, model(ids).logits)   # starts at the base model
    assert adapted.lm_head.weight is adapted.embed.tok_emb.weight  # tied weights stay tied


def test_training_moves_only_the_adapters_and_lowers_the_loss():
    """A base trained to count (next = this + 1) learns a new task (next = this + 2) through
    rank-2 adapters alone; nothing else moves."""
    model = _gpt().train()
    count_by_1 = torch.arange(13).repeat(20)
    attnlib.train(model, count_by_1, steps=60, batch_size=8, block_size=12, lr=2e-2)
    model.eval()
    adapted = add_lora(model, 2, where=lambda n: n.startswith("layers."),
                       generator=torch.Generator().manual_seed(0))
    frozen = {n: p.clone() for n, p in adapted.named_parameters() if not p.requires_grad}
    data = (torch.arange(260) * 2) % 13                     # 0 2 4 ... 12 1 3 ...: the new task
    losses = attnlib.train(adapted, data, steps=40, batch_size=8, block_size=12, lr=2e-2)
    assert losses[0] > 2.0 and sum(losses[-5:]) / 5 < 0.1 * losses[0]   # measured 7.5 -> 0.05
    for n, p in adapted.named_parameters():
        if not p.requires_grad:
            assert torch.equal(p, frozen[n]), n
    ids = data[:10][None]
    merged = merge_lora(adapted)
    assert not any(isinstance(m, LoRALinear) for m in merged.modules())
    torch.testing.assert_close(merged(ids).logits, adapted(ids).logits, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(adapted(ids).logits, model(ids).logits)
    # generation runs the adapted layers through the cache like any other
    with_cache = adapted.generate(ids[:, :3], 6, temperature=0.0)
    assert torch.equal(with_cache, adapted.generate(ids[:, :3], 6, temperature=0.0, use_cache=False))


def test_quantized_base_with_adapters_qlora():
    """QLoRA's layout: a base whose weights went through NF4, frozen, with adapters on top."""
    model = _gpt()
    q_base = attnlib.quant.quantize_linears(model, lambda w: attnlib.quant.round_trip(w, "nf4", block=16),
                                            where=lambda n: n.startswith("layers."))
    adapted = add_lora(q_base, 2, where=lambda n: n.startswith("layers."))
    layer = adapted.layers[0].ffn.fc1
    assert torch.equal(layer.base.weight, q_base.layers[0].ffn.fc1.weight)
    blocks = layer.base.weight.reshape(-1, 16)                  # every weight: a level x absmax
    levels = blocks / blocks.abs().amax(-1, keepdim=True)
    nf4 = torch.tensor(attnlib.quant.NF4_LEVELS)
    assert torch.isclose(levels[..., None], nf4, atol=1e-6).any(-1).all()
    ids = torch.randint(0, 13, (1, 8), generator=torch.Generator().manual_seed(2))
    assert torch.equal(adapted(ids).logits, q_base(ids).logits)


def test_dtype_and_device_follow_the_base():
    base = _linear().to(torch.bfloat16)
    lora = LoRALinear(base, 2, generator=torch.Generator().manual_seed(0))
    assert lora.lora_A.dtype == lora.lora_B.dtype == torch.bfloat16
    assert lora(torch.randn(3, 12, dtype=torch.bfloat16)).dtype == torch.bfloat16
    # near misses that must keep working: a numpy rank, a 0-d tensor alpha
    numpy_rank = LoRALinear(_linear(), np.int64(2), alpha=torch.tensor(4.0))
    assert numpy_rank.r == 2 and numpy_rank.scaling == 2.0
    meta = LoRALinear(nn.Linear(4096, 4096, bias=False, device="meta"), 8)
    assert meta.lora_A.device.type == "meta"
    assert sum(p.numel() for p in meta.parameters() if p.requires_grad) == 8 * (4096 + 4096)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_with_a_cpu_generator():
    base = _linear().cuda()
    lora = LoRALinear(base, 2, generator=torch.Generator().manual_seed(0))
    assert lora.lora_A.device.type == "cuda"
    x = torch.randn(3, 12, device="cuda")
    assert torch.equal(lora(x), base(x))
