"""Two references for greedy decoding, over the very weights of an attnlib GPT-2-style model.

Issue 32 quoted a "plain" decode loop at 1.9x Hugging Face. These two tell apart what "plain"
buys:

* :class:`NanoGPT`: the same model written the way nanoGPT writes it, ``nn.Module`` blocks
  (``ln_1``, ``attn``, ``ln_2``, ``mlp``) with ``nn.Linear`` layers and no argument checks, and a
  ``torch.cat`` cache. It pays what attnlib pays for calling modules, and nothing for checks;
* :func:`functional_generate`: the same arithmetic as one function of ``F.linear``,
  ``F.layer_norm`` and ``F.scaled_dot_product_attention`` calls, with no modules at all.

Both pick the same tokens as ``GPT.generate`` (the benchmark checks it). They serve only as
measuring sticks: neither is part of attnlib. Pre-norm GPT-2 layout only (learned positions,
LayerNorm, a GELU FFN, tied head), as ``benchmarks.models.build_pair`` builds.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class _Attention(nn.Module):
    def __init__(self, C: int, H: int) -> None:
        super().__init__()
        self.H = H
        self.q, self.k, self.v, self.o = (nn.Linear(C, C) for _ in range(4))

    def forward(self, x: Tensor, past: tuple[Tensor, Tensor] | None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        B, T, C = x.shape
        q, k, v = (lin(x).view(B, T, self.H, C // self.H).transpose(1, 2) for lin in (self.q, self.k, self.v))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)  # a prompt, or one new token
        return self.o(y.transpose(1, 2).reshape(B, T, C)), (k, v)


class _MLP(nn.Module):
    def __init__(self, C: int, d_ff: int, approximate: str) -> None:
        super().__init__()
        self.fc, self.proj, self.approximate = nn.Linear(C, d_ff), nn.Linear(d_ff, C), approximate

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(F.gelu(self.fc(x), approximate=self.approximate))


class _Block(nn.Module):
    def __init__(self, C: int, H: int, d_ff: int, eps: float, approximate: str) -> None:
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(C, eps=eps), _Attention(C, H)
        self.ln_2, self.mlp = nn.LayerNorm(C, eps=eps), _MLP(C, d_ff, approximate)

    def forward(self, x: Tensor, past):
        a, kv = self.attn(self.ln_1(x), past)
        x = x + a
        return x + self.mlp(self.ln_2(x)), kv


def _approximate(gpt: nn.Module) -> str:
    return "tanh" if gpt.cfg.activation == "gelu_tanh" else "none"


class NanoGPT(nn.Module):
    """nanoGPT's layout, holding copies of ``gpt``'s weights (see the module docstring)."""

    def __init__(self, gpt: nn.Module) -> None:
        super().__init__()
        cfg = gpt.cfg
        if not (cfg.positional == "learned" and cfg.norm == "layernorm" and cfg.norm_first
                and cfg.activation in ("gelu", "gelu_tanh") and cfg.tie_weights):
            raise ValueError("NanoGPT mirrors a pre-norm GPT-2 layout only (learned positions, LayerNorm, GELU)")
        C, eps = cfg.d_model, cfg.layer_norm_eps
        self.wte, self.wpe = nn.Embedding(cfg.vocab_size, C), nn.Embedding(cfg.max_len, C)
        self.blocks = nn.ModuleList(_Block(C, cfg.n_heads, cfg.d_ff, eps, _approximate(gpt))
                                    for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(C, eps=eps)
        with torch.no_grad():
            self.wte.weight.copy_(gpt.embed.tok_emb.weight)
            self.wpe.weight.copy_(gpt.embed.pos_emb.weight)
            for block, layer in zip(self.blocks, gpt.layers):
                a = layer.self_attn
                pairs = ((block.ln_1, layer.norm1), (block.ln_2, layer.norm3), (block.attn.q, a.q_proj),
                         (block.attn.k, a.k_proj), (block.attn.v, a.v_proj), (block.attn.o, a.out_proj),
                         (block.mlp.fc, layer.ffn.fc1), (block.mlp.proj, layer.ffn.fc2))
                for mine, theirs in pairs:
                    mine.weight.copy_(theirs.weight)
                    mine.bias.copy_(theirs.bias)
            self.ln_f.weight.copy_(gpt.norm_f.weight)
            self.ln_f.bias.copy_(gpt.norm_f.bias)
        self.to(gpt.lm_head.weight.device, gpt.lm_head.weight.dtype)

    def forward(self, ids: Tensor, start: int, cache: list) -> tuple[Tensor, list]:
        """ids (B, T) at positions start.. -> last position's logits (B, V) and the new cache."""
        x = self.wte(ids) + self.wpe(torch.arange(start, start + ids.shape[1], device=ids.device))
        new = []
        for block, past in zip(self.blocks, cache):
            x, kv = block(x, past)
            new.append(kv)
        return F.linear(self.ln_f(x[:, -1]), self.wte.weight), new

    @torch.inference_mode()
    def generate(self, prompt: Tensor, n: int) -> Tensor:
        """Greedy: the prompt, then n new tokens, (B, T + n)."""
        cache, ids, start, out = [None] * len(self.blocks), prompt, 0, [prompt]
        for _ in range(n):
            logits, cache = self(ids, start, cache)
            start += ids.shape[1]
            ids = logits.argmax(-1, keepdim=True)  # (B, 1)
            out.append(ids)
        return torch.cat(out, dim=1)


@torch.inference_mode()
def functional_generate(gpt: nn.Module, prompt: Tensor, n: int) -> Tensor:
    """Greedy decoding as plain tensor calls over gpt's weights (no module)."""
    cfg, act = gpt.cfg, _approximate(gpt)
    C, H, eps = cfg.d_model, cfg.n_heads, cfg.layer_norm_eps
    cache: list = [None] * cfg.n_layers
    ids, start, out = prompt, 0, [prompt]
    for _ in range(n):
        B, T = ids.shape
        x = (F.embedding(ids, gpt.embed.tok_emb.weight)
             + gpt.embed.pos_emb.weight[start:start + T])
        for i, L in enumerate(gpt.layers):  # L: one layer; h: a hidden tensor
            a = L.self_attn  # norm1, then norm3 (norm2 is cross-attention's)
            h = F.layer_norm(x, (C,), L.norm1.weight, L.norm1.bias, eps)
            q, k, v = (F.linear(h, p.weight, p.bias).view(B, T, H, -1)
                       .transpose(1, 2)
                       for p in (a.q_proj, a.k_proj, a.v_proj))
            if cache[i] is not None:
                k = torch.cat([cache[i][0], k], dim=2)
                v = torch.cat([cache[i][1], v], dim=2)
            cache[i] = (k, v)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)
            y = y.transpose(1, 2).reshape(B, T, C)
            x = x + F.linear(y, a.out_proj.weight, a.out_proj.bias)
            h = F.layer_norm(x, (C,), L.norm3.weight, L.norm3.bias, eps)
            h = F.linear(h, L.ffn.fc1.weight, L.ffn.fc1.bias)
            h = F.gelu(h, approximate=act)
            x = x + F.linear(h, L.ffn.fc2.weight, L.ffn.fc2.bias)
        f = gpt.norm_f
        x = F.layer_norm(x[:, -1], (C,), f.weight, f.bias, eps)
        ids = F.linear(x, gpt.lm_head.weight).argmax(-1, keepdim=True)
        start += T
        out.append(ids)
    return torch.cat(out, dim=1)
