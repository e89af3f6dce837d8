"""GPT: the decoder-only language model, its forward and its generation loop.

Parameter names (loaders rely on them): ``embed.tok_emb``, ``embed.pos_emb`` (see
:class:`attnlib.layers.Embeddings`), ``layers.{i}.*`` (see :mod:`attnlib.layers`), ``norm_f``
(final norm, pre-norm stacks only: a post-norm stack already ends in a norm), ``lm_head``
(bias-free, its weight tied to ``embed.tok_emb.weight`` when ``tie_weights``). The encoder and the
encoder-decoder are in :mod:`attnlib.encoder_decoder`.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import Tensor, nn

from ._checks import trusted
from .cache import KVCache, all_or_nothing
from .checks import LogitWatch, check_config, check_forward, check_generate
from .config import TransformerConfig
from .generation import pick
from .layers import DecoderLayer, Embeddings, init_weights
from .norms import make_norm
from .outputs import ModelOutput, lm_loss
from .positional import RotaryEmbedding

# Class name -> the function that converts a transformers model into it. attnlib.pretrained
# fills this in (it imports the models; the models never import it).
HF_LOADERS: dict[str, Callable[[Any, type], nn.Module]] = {}


class GPT(nn.Module):
    """Decoder-only language model: embeddings, L causal blocks, final norm, LM head.

    Args:
        cfg: sizes and switches (TransformerConfig).

    Shapes:
        input_ids (B, T) long -> logits (B, T, vocab). With a KVCache, T new tokens continue
        after the cache.seq_len tokens it holds (positions and the causal mask shift with it).
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        check_config(cfg)
        self.cfg = cfg
        self.embed = Embeddings(cfg)
        rope = cfg.positional == "rope"
        width = cfg.qk_rope_head_dim if cfg.attention == "mla" else cfg.head_dim  # rotated dims
        self.rope = RotaryEmbedding(width, base=cfg.rope_base) if rope else None
        self.layers = nn.ModuleList(DecoderLayer.from_config(cfg) for _ in range(cfg.n_layers))
        norm_f = make_norm(cfg.norm, cfg.d_model, cfg.layer_norm_eps)
        self.norm_f = norm_f if cfg.norm_first else None  # a post-norm stack ends in a norm
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(init_weights)
        if cfg.tie_weights:  # one matrix maps ids -> vectors and vectors -> logits
            self.lm_head.weight = self.embed.tok_emb.weight

    def forward(self, input_ids: Tensor, targets: Optional[Tensor] = None, *,
                cache: Optional[KVCache] = None, need_weights: bool = False,
                logits_to_keep: int = 0) -> ModelOutput:
        """Args:
            input_ids: (B, T) token ids; targets: (B, T) next-token ids (-100 = skip) for the loss.
            cache: a KVCache to read and extend (incremental decoding).
            need_weights: return each layer's attention weights (B, H, T, T_total).
            logits_to_keep: compute the logits of the last this many positions only (0 = all);
                generation needs only the last one, and the LM head is the largest product.

        Returns ModelOutput(logits, loss, attentions, hidden_states)."""
        check_forward(self, input_ids, targets, cache, need_weights, logits_to_keep)
        past = cache.seq_len if cache is not None else 0
        positions = torch.arange(past, past + input_ids.shape[1], device=input_ids.device)  # (T,)
        with all_or_nothing(cache), trusted():  # checked above; a failed step leaves the cache
            x = self.embed(input_ids, positions)  # (B, T, C)
            rope = self.rope.cos_sin(positions, x.dtype) if self.rope is not None else None
            attentions = []
            for i, layer in enumerate(self.layers):
                x, w, _ = layer(x, cache=cache, layer_idx=i, need_weights=need_weights, rope=rope)
                attentions.append(w)
            x = self.norm_f(x) if self.cfg.norm_first else x  # pre-norm stacks end in a norm
            last = x[:, -logits_to_keep:] if 0 < logits_to_keep < x.shape[1] else x  # 0: all
            logits = self.lm_head(last)  # (B, T or logits_to_keep, vocab)
        loss = lm_loss(logits, targets) if targets is not None else None
        return ModelOutput(logits, loss, attentions if need_weights else None, hidden_states=x)

    def generate(self, input_ids: Tensor, max_new_tokens: int, *, temperature: float = 1.0,
                 top_k: Optional[int] = None, top_p: Optional[float] = None,
                 use_cache: bool = True, generator: Optional[torch.Generator] = None) -> Tensor:
        """Extend each prompt by max_new_tokens tokens (temperature 0 = greedy).

        Sampling: logits / temperature, then the top_k most likely tokens, then the nucleus (the
        smallest set whose probability sums to >= top_p), then a draw with ``generator``.
        Each step is this model's own forward (with a KVCache: only the new token), under
        inference mode, where no dropout acts. Returns (B, T + max_new_tokens), the prompt first."""
        n, temperature, top_k, top_p = check_generate(self, input_ids, max_new_tokens, temperature,
                                                      top_k, top_p, use_cache, generator)
        cache = KVCache() if use_cache else None
        new, watch = [], LogitWatch()  # the watch checks every step's logits once, at the end
        with torch.inference_mode(), trusted():
            step = input_ids  # the whole prompt first (prefill), then one token at a time
            for _ in range(n):
                logits = self(step, cache=cache, logits_to_keep=1).logits  # (B, 1, vocab)
                token = pick(logits, temperature, top_k, top_p, generator)  # (B, 1)
                new.append(token), watch.add(logits)
                step = token if use_cache else torch.cat([input_ids, *new], dim=1)  # else: all
            watch.check()  # NaN or inf in any step's logits: one read for the whole call
        return torch.cat([input_ids, *new], dim=1)  # outside inference mode: an ordinary tensor

    @classmethod
    def from_hf(cls, hf_model: Any) -> "GPT":
        """A GPT with the same logits as a transformers GPT2LMHeadModel, LlamaForCausalLM or
        MistralForCausalLM (sliding window) or DeepseekV3ForCausalLM with dense layers only (the
        conversion: :mod:`attnlib.pretrained`)."""
        return HF_LOADERS["GPT"](hf_model, cls)
