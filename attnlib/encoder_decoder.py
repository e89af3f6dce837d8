"""The two other layouts built from the same blocks: Encoder (BERT-style, bidirectional) and
EncoderDecoder (the 2017 translation model), with its decoding loop.

Parameter names (loaders rely on them): Encoder as GPT (``embed.*``, ``layers.{i}.*``,
``norm_f``); EncoderDecoder: ``encoder.*`` (an :class:`Encoder`, whose ``embed`` the decoder
shares), ``decoder_layers.{i}.*``, ``decoder_norm_f``, ``lm_head``.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor, nn

from ._checks import check_flag, checking, trusted
from .cache import KVCache, all_or_nothing
from .checks import (LogitWatch, check_attention_mask, check_cache, check_config,
                     check_ids, check_max_new_tokens, check_sampling, check_special_ids,
                     check_targets)
from .attention import check_mask
from .config import TransformerConfig
from .generation import pick
from .layers import DecoderLayer, Embeddings, EncoderLayer, init_weights
from .models import HF_LOADERS
from .norms import make_norm
from .outputs import ModelOutput, lm_loss
from .positional import RotaryEmbedding


def _final_norm(cfg: TransformerConfig) -> Optional[nn.Module]:
    """Pre-norm stacks end in a norm; a post-norm stack already does."""
    return make_norm(cfg.norm, cfg.d_model, cfg.layer_norm_eps) if cfg.norm_first else None


class Encoder(nn.Module):
    """Bidirectional (BERT-style) stack: every token attends to every real token.

    Shapes:
        input_ids (B, T) long -> hidden_states (B, T, C); values at padded positions are
        unspecified.
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        check_config(cfg)
        if cfg.sliding_window is not None:  # a causal window; this stack reads both ways
            raise ValueError(f"sliding_window={cfg.sliding_window} is a window over earlier "
                             f"tokens (causal, GPT); an Encoder (and an EncoderDecoder's source) "
                             f"attends both ways: build it with sliding_window=None")
        self.cfg = cfg
        self.embed = Embeddings(cfg)
        rope = cfg.positional == "rope"
        self.rope = RotaryEmbedding(cfg.head_dim, base=cfg.rope_base) if rope else None
        self.layers = nn.ModuleList(EncoderLayer.from_config(cfg) for _ in range(cfg.n_layers))
        self.norm_f = _final_norm(cfg)
        self.apply(init_weights)

    def forward(self, input_ids: Tensor, *, attention_mask: Optional[Tensor] = None,
                token_type_ids: Optional[Tensor] = None, need_weights: bool = False) -> ModelOutput:
        """Args:
            attention_mask: (B, T), 1 = real token, 0 = padding (Hugging Face convention).
            token_type_ids: (B, T) segment ids, needs cfg.type_vocab_size > 0.

        Returns ModelOutput(hidden_states (B, T, C), attentions)."""
        mask = self.check_call(input_ids, attention_mask, token_type_ids, need_weights)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # (T,)
        attentions = []
        with trusted():  # checked above: the layers trust it
            x = self.embed(input_ids, positions, token_type_ids)  # (B, T, C)
            rope = self.rope.cos_sin(positions, x.dtype) if self.rope is not None else None
            for layer in self.layers:
                x, w = layer(x, attn_mask=mask, need_weights=need_weights, rope=rope)
                attentions.append(w)
            if self.norm_f is not None:
                x = self.norm_f(x)
        return ModelOutput(hidden_states=x, attentions=attentions if need_weights else None)

    def check_call(self, input_ids: Any, attention_mask: Any, token_type_ids: Any,
                   need_weights: Any) -> Optional[Tensor]:
        """The door of :meth:`forward`; returns the attention mask as bool (B, 1, 1, T) or None."""
        device = self.embed.tok_emb.weight.device
        check_ids("input_ids", input_ids, self.cfg.vocab_size, self.cfg.max_len, 0, device)
        if token_type_ids is not None:
            if self.embed.type_emb is None:
                raise ValueError("token_type_ids given but the config has type_vocab_size=0")
            if not isinstance(token_type_ids, Tensor) or token_type_ids.shape != input_ids.shape:
                raise ValueError(f"token_type_ids must have the shape of input_ids "
                                 f"{tuple(input_ids.shape)}")
            check_ids("token_type_ids", token_type_ids, self.cfg.type_vocab_size,
                      self.cfg.max_len, 0, device)
        check_flag("need_weights", need_weights)
        return check_attention_mask(attention_mask, input_ids, "attention_mask")

    @classmethod
    def from_hf(cls, hf_model: Any) -> "Encoder":
        """An Encoder with the same hidden states as a transformers BertModel."""
        return HF_LOADERS["Encoder"](hf_model, cls)


class EncoderDecoder(nn.Module):
    """The 2017 layout: an Encoder reads the source; a causal decoder with cross-attention writes
    the target. One embedding matrix is shared by encoder, decoder and (tied) LM head.

    Shapes:
        src_ids (B, S), tgt_ids (B, T) -> logits (B, T, vocab); cross_attentions (B, H, T, S).
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        check_config(cfg)
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder_layers = nn.ModuleList(DecoderLayer.from_config(cfg, cross_attention=True)
                                            for _ in range(cfg.n_layers))
        self.decoder_norm_f = _final_norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(init_weights)
        if cfg.tie_weights:
            self.lm_head.weight = self.encoder.embed.tok_emb.weight

    @property
    def embed(self) -> Embeddings:
        """The shared embeddings (they live in the encoder)."""
        return self.encoder.embed

    def encode(self, src_ids: Tensor, *, src_attention_mask: Optional[Tensor] = None,
               need_weights: bool = False) -> tuple[Tensor, Optional[Tensor], Optional[list]]:
        """Returns (memory (B, S, C), memory_mask bool (B, 1, 1, S) or None, encoder attentions)."""
        check_ids("src_ids", src_ids, self.cfg.vocab_size, self.cfg.max_len)  # name the source
        memory_mask = check_attention_mask(src_attention_mask, src_ids, "src_attention_mask")
        out = self.encoder(src_ids, attention_mask=src_attention_mask, need_weights=need_weights)
        return out.hidden_states, memory_mask, out.attentions

    def decode(self, tgt_ids: Tensor, memory: Tensor, *, memory_mask: Optional[Tensor] = None,
               cache: Optional[KVCache] = None, need_weights: bool = False) -> ModelOutput:
        """Run the decoder on tgt_ids (continuing after cache.seq_len tokens when cached).

        Returns ModelOutput(logits (B, T, vocab), attentions, cross_attentions, hidden_states)."""
        self.check_decode(tgt_ids, memory, memory_mask, cache, need_weights)
        past = cache.seq_len if cache is not None else 0
        positions = torch.arange(past, past + tgt_ids.shape[1], device=tgt_ids.device)  # (T,)
        attentions, cross = [], []
        with all_or_nothing(cache), trusted():
            x = self.embed(tgt_ids, positions)  # (B, T, C)
            rope = self.encoder.rope
            rope = rope.cos_sin(positions, x.dtype) if rope is not None else None
            for i, layer in enumerate(self.decoder_layers):
                x, w, cw = layer(x, memory, memory_mask=memory_mask, cache=cache, layer_idx=i,
                                 need_weights=need_weights, rope=rope)
                attentions.append(w)
                cross.append(cw)
            if self.decoder_norm_f is not None:
                x = self.decoder_norm_f(x)
            logits = self.lm_head(x)
        if not need_weights:
            attentions = cross = None
        return ModelOutput(logits=logits, attentions=attentions, cross_attentions=cross,
                           hidden_states=x)

    def check_decode(self, tgt_ids: Any, memory: Any, memory_mask: Any, cache: Any,
                     need_weights: Any) -> None:
        """The door of :meth:`decode`: ids, the encoder output, its mask and the cache."""
        C = self.cfg.d_model
        if not isinstance(memory, Tensor) or memory.dim() != 3 or memory.shape[-1] != C:
            shape = tuple(memory.shape) if isinstance(memory, Tensor) else type(memory).__name__
            raise ValueError(f"memory must be the encoder output, shape (B, S, d_model={C}), got "
                             f"{shape}; for one sentence add the batch dim: memory[None]")
        if not checking():
            return
        check_cache(cache)
        past = cache.seq_len if cache is not None else 0
        device = self.embed.tok_emb.weight.device
        check_ids("tgt_ids", tgt_ids, self.cfg.vocab_size, self.cfg.max_len, past, device)
        check_flag("need_weights", need_weights)
        self.decoder_layers[0].cross_attn.check_input("memory", memory)  # device and dtype
        if memory.shape[0] != tgt_ids.shape[0]:
            raise ValueError(f"tgt_ids has batch {tgt_ids.shape[0]} but the source has batch "
                             f"{memory.shape[0]}")
        if memory_mask is not None:
            B, T, S = tgt_ids.shape[0], tgt_ids.shape[1], memory.shape[1]
            check_mask(memory_mask, (B, self.cfg.n_heads, T, S))
        if cache is not None:
            cache.check_model(self, tgt_ids.shape[0])
            cache.check_source(memory)

    def forward(self, src_ids: Tensor, tgt_ids: Tensor, targets: Optional[Tensor] = None, *,
                src_attention_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> ModelOutput:
        """Args:
            src_ids (B, S); tgt_ids (B, T) decoder input (starts with bos); targets (B, T) for
            the loss; src_attention_mask (B, S): 1 real, 0 pad.

        Returns ModelOutput(logits, loss, attentions, cross_attentions, hidden_states,
        encoder_attentions)."""
        memory, memory_mask, enc_att = self.encode(src_ids, src_attention_mask=src_attention_mask,
                                                   need_weights=need_weights)
        if targets is not None:
            check_targets(targets, tgt_ids, self.cfg.vocab_size)
        out = self.decode(tgt_ids, memory, memory_mask=memory_mask, need_weights=need_weights)
        out.loss = lm_loss(out.logits, targets)
        out.encoder_attentions = enc_att
        return out

    def generate(self, src_ids: Tensor, max_new_tokens: int, *, bos_id: int,
                 eos_id: Optional[int] = None, temperature: float = 0.0, use_cache: bool = True,
                 top_k: Optional[int] = None, generator: Optional[torch.Generator] = None,
                 src_attention_mask: Optional[Tensor] = None,
                 top_p: Optional[float] = None) -> Tensor:
        """Translate: start from bos_id, add tokens until every row has produced eos_id (rows
        that finished earlier are filled with eos_id) or max_new_tokens were added.

        The encoder runs once; with use_cache each decoder layer computes the cross-attention
        keys/values of the source once and reuses them. temperature, top_k, top_p: as in
        GPT.generate. Returns (B, 1 + n), n <= max_new_tokens."""
        bos_id, eos_id = check_special_ids(self.cfg.vocab_size, bos_id, eos_id)
        n_new = check_max_new_tokens(max_new_tokens, 1, self.cfg.max_len)
        temperature, top_k, top_p = check_sampling(temperature, top_k, top_p, generator)
        check_flag("use_cache", use_cache)
        B = src_ids.shape[0] if isinstance(src_ids, Tensor) and src_ids.dim() == 2 else 1
        device = src_ids.device if isinstance(src_ids, Tensor) else None
        ids = torch.full((B, 1 + n_new), bos_id, dtype=torch.long, device=device)
        finished = torch.zeros(B, dtype=torch.bool, device=ids.device)
        cache = KVCache() if use_cache else None  # the source's cross keys/values made once
        watch, n = LogitWatch(), 0  # every step's logits, checked once after the loop
        with torch.inference_mode():
            memory, memory_mask, _ = self.encode(src_ids, src_attention_mask=src_attention_mask)
        with torch.inference_mode(), trusted():  # the source is checked: the steps trust it
            for n in range(1, n_new + 1):
                step = ids[:, n - 1:n] if use_cache else ids[:, :n]
                out = self.decode(step, memory, memory_mask=memory_mask, cache=cache)
                logits = out.logits[:, -1:]  # (B, 1, vocab)
                nxt = pick(logits, temperature, top_k, top_p, generator)  # (B, 1)
                # uncached, the step computed every position: a view would keep all of them
                watch.add(logits if use_cache else logits.clone())
                if eos_id is not None:
                    nxt = nxt.masked_fill(finished[:, None], eos_id)  # finished rows repeat eos
                    finished = finished | (nxt[:, 0] == eos_id)
                ids[:, n:n + 1] = nxt
                if eos_id is not None and bool(finished.all()):  # one read per step: stop early
                    break
            watch.check()  # (B, steps): one read for the whole call
        return ids[:, :1 + n].clone() if n < n_new else ids
