"""Three Transformer layouts from the same blocks: GPT (decoder only), Encoder (BERT-style), and
EncoderDecoder (the 2017 translation model).

Parameter names (loaders rely on them): ``embed.tok_emb``, ``embed.pos_emb``, ``embed.type_emb``,
``embed.norm`` (see :class:`attnlib.layers.Embeddings`), ``layers.{i}.*`` (see
:mod:`attnlib.layers`), ``norm_f`` (final norm, pre-norm stacks only: a post-norm stack
already ends in a norm), ``lm_head`` (bias-free, its weight tied to ``embed.tok_emb.weight``
when ``tie_weights``). EncoderDecoder: ``encoder.*`` (an :class:`Encoder`, whose ``embed`` the
decoder shares), ``decoder_layers.{i}.*``, ``decoder_norm_f``, ``lm_head``.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor, nn

from ._checks import checked, checking
from .attention import check_flag, check_mask
from .cache import KVCache, check_cache
from .config import TransformerConfig
from .generation import generate_decoder_only, generate_encoder_decoder
from .layers import DecoderLayer, Embeddings, EncoderLayer
from .norms import make_norm
from .positional import RotaryEmbedding
from .outputs import IGNORE_INDEX, ModelOutput, check_device, check_ids, check_keep, init_weights, key_mask, lm_loss  # noqa: F401


def _from_hf(cls: type, hf_model: Any, parts: str) -> nn.Module:
    """``cls`` with a transformers model's weights (attnlib.pretrained imported only here)."""
    from .pretrained import hf
    from .pretrained._common import load_exact
    cfg, state, name = getattr(hf, parts)(hf_model)
    model = cls(cfg)
    load_exact(model, state, name)
    return model.eval()


def _rope(cfg: TransformerConfig) -> Optional[RotaryEmbedding]:
    return RotaryEmbedding(cfg.head_dim, base=cfg.rope_base) if cfg.positional == "rope" else None


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
        if not isinstance(cfg, TransformerConfig):
            raise TypeError(f"cfg must be an attnlib.TransformerConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.embed = Embeddings(cfg)
        self.rope = _rope(cfg)
        self.layers = nn.ModuleList(DecoderLayer.from_config(cfg) for _ in range(cfg.n_layers))
        self.norm_f = make_norm(cfg.norm, cfg.d_model, cfg.layer_norm_eps) if cfg.norm_first else None
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(init_weights)
        if cfg.tie_weights:  # one matrix maps ids -> vectors and vectors -> logits
            self.lm_head.weight = self.embed.tok_emb.weight

    def check_ids(self, input_ids: Any, past: int = 0) -> None:
        check_ids("input_ids", input_ids, self.cfg.vocab_size, self.cfg.max_len, past)

    def forward(self, input_ids: Tensor, targets: Optional[Tensor] = None, *, cache: Optional[KVCache] = None,
                need_weights: bool = False, logits_to_keep: int = 0) -> ModelOutput:
        """Args:
            input_ids: (B, T) token ids; targets: (B, T) next-token ids (-100 = skip) for the loss.
            cache: a KVCache to read and extend (incremental decoding).
            need_weights: return each layer's attention weights (B, H, T, T_total).
            logits_to_keep: compute the logits of the last this many positions only (0 = all);
                generation needs only the last one, and the LM head is the largest product.

        Returns ModelOutput(logits, loss, attentions, hidden_states)."""
        check_cache(cache)
        past = cache.seq_len if cache is not None else 0
        if checking():  # here, once: the layers below trust what this forward hands them
            self.check_ids(input_ids, past)
            check_device("input_ids", input_ids, self.embed.tok_emb.weight)
            check_flag("need_weights", need_weights)
            if cache is not None:
                cache.check_batch(input_ids.shape[0])
        keep = check_keep(logits_to_keep, targets)
        snap = cache.snapshot() if cache is not None else None
        try:  # a cache of another model is refused; a step that fails changes nothing
            if cache is not None:
                cache.bind(self)
            with checked():
                return self._forward(input_ids, targets, cache, past, need_weights, keep)
        except BaseException:
            if cache is not None:
                cache.restore(snap)
            raise

    def _forward(self, input_ids: Tensor, targets: Optional[Tensor], cache: Optional[KVCache], past: int,
                 need_weights: bool, keep: int) -> ModelOutput:
        T = input_ids.shape[1]
        positions = torch.arange(past, past + T, device=input_ids.device)  # (T,): after the cache
        x = self.embed(input_ids.long(), positions)  # (B, T, C)
        rope = self.rope.cos_sin(positions, x.dtype) if self.rope is not None else None  # (T, D) x 2
        attentions = [] if need_weights else None
        for i, layer in enumerate(self.layers):
            x, w, _ = layer(x, cache=cache, layer_idx=i, need_weights=need_weights, rope=rope)
            if need_weights:
                attentions.append(w)
        if self.norm_f is not None:
            x = self.norm_f(x)
        logits = self.lm_head(x[:, -keep:] if keep else x)  # (B, T or keep, vocab)
        return ModelOutput(logits=logits, loss=lm_loss(logits, targets, self.cfg.vocab_size),
                           attentions=attentions, hidden_states=x)

    def generate(self, input_ids: Tensor, max_new_tokens: int, *, temperature: float = 1.0,
                 top_k: Optional[int] = None, top_p: Optional[float] = None, use_cache: bool = True,
                 generator: Optional[torch.Generator] = None) -> Tensor:
        """Extend each prompt by max_new_tokens tokens (temperature 0 = greedy).

        Sampling: logits / temperature, then the top_k most likely tokens, then the nucleus (the
        smallest set whose probability sums to >= top_p), then a draw with ``generator``.
        Returns (B, T + max_new_tokens) including the prompt. Each step is this model's own forward
        (with a KVCache: only the new token), under inference mode; train/eval mode is kept."""
        return generate_decoder_only(self, input_ids, max_new_tokens, temperature=temperature, top_k=top_k,
                                     top_p=top_p, use_cache=use_cache, generator=generator)

    @classmethod
    def from_hf(cls, hf_model: Any) -> "GPT":
        """A GPT with the same logits as a transformers GPT2LMHeadModel or LlamaForCausalLM."""
        return _from_hf(cls, hf_model, "gpt_parts")


class Encoder(nn.Module):
    """Bidirectional (BERT-style) stack: every token attends to every real token.

    Shapes:
        input_ids (B, T) long -> hidden_states (B, T, C); values at padded positions are unspecified.
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(cfg, TransformerConfig):
            raise TypeError(f"cfg must be an attnlib.TransformerConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.embed = Embeddings(cfg)
        self.rope = _rope(cfg)
        self.layers = nn.ModuleList(EncoderLayer.from_config(cfg) for _ in range(cfg.n_layers))
        self.norm_f = make_norm(cfg.norm, cfg.d_model, cfg.layer_norm_eps) if cfg.norm_first else None
        self.apply(init_weights)

    def forward(self, input_ids: Tensor, *, attention_mask: Optional[Tensor] = None,
                token_type_ids: Optional[Tensor] = None, need_weights: bool = False) -> ModelOutput:
        """Args:
            attention_mask: (B, T), 1 = real token, 0 = padding (Hugging Face convention).
            token_type_ids: (B, T) segment ids, needs cfg.type_vocab_size > 0.

        Returns ModelOutput(hidden_states (B, T, C), attentions)."""
        check_ids("input_ids", input_ids, self.cfg.vocab_size, self.cfg.max_len)
        check_device("input_ids", input_ids, self.embed.tok_emb.weight)
        if token_type_ids is not None:
            if self.embed.type_emb is None:
                raise ValueError("token_type_ids given but the config has type_vocab_size=0")
            if not isinstance(token_type_ids, Tensor) or token_type_ids.shape != input_ids.shape:
                raise ValueError(f"token_type_ids must have the shape of input_ids {tuple(input_ids.shape)}")
            check_ids("token_type_ids", token_type_ids, self.cfg.type_vocab_size, self.cfg.max_len)
            token_type_ids = token_type_ids.long()
        check_flag("need_weights", need_weights)
        mask = key_mask(attention_mask, input_ids, "attention_mask")
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # (T,)
        attentions = [] if need_weights else None
        with checked():  # everything above is checked: the layers trust it
            x = self.embed(input_ids.long(), positions, token_type_ids)  # (B, T, C)
            rope = self.rope.cos_sin(positions, x.dtype) if self.rope is not None else None  # (T, D) x 2
            for layer in self.layers:
                x, w = layer(x, attn_mask=mask, need_weights=need_weights, rope=rope)
                if need_weights:
                    attentions.append(w)
            if self.norm_f is not None:
                x = self.norm_f(x)
        return ModelOutput(hidden_states=x, attentions=attentions)

    @classmethod
    def from_hf(cls, hf_model: Any) -> "Encoder":
        """An Encoder with the same hidden states as a transformers BertModel."""
        return _from_hf(cls, hf_model, "encoder_parts")


class EncoderDecoder(nn.Module):
    """The 2017 layout: an Encoder reads the source; a causal decoder with cross-attention writes
    the target. One embedding matrix is shared by encoder, decoder and (tied) LM head.

    Shapes:
        src_ids (B, S), tgt_ids (B, T) -> logits (B, T, vocab); cross_attentions (B, H, T, S).
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(cfg, TransformerConfig):
            raise TypeError(f"cfg must be an attnlib.TransformerConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder_layers = nn.ModuleList(DecoderLayer.from_config(cfg, cross_attention=True)
                                            for _ in range(cfg.n_layers))
        self.decoder_norm_f = make_norm(cfg.norm, cfg.d_model, cfg.layer_norm_eps) if cfg.norm_first else None
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(init_weights)
        if cfg.tie_weights:
            self.lm_head.weight = self.encoder.embed.tok_emb.weight

    @property
    def embed(self) -> Embeddings:
        """The shared embeddings (they live in the encoder)."""
        return self.encoder.embed

    def encode(self, src_ids: Tensor, *, src_attention_mask: Optional[Tensor] = None,
               need_weights: bool = False) -> tuple[Tensor, Optional[Tensor], Optional[list[Tensor]]]:
        """Returns (memory (B, S, C), memory_mask bool (B, 1, 1, S) or None, encoder attentions)."""
        check_ids("src_ids", src_ids, self.cfg.vocab_size, self.cfg.max_len)  # errors name the source
        memory_mask = key_mask(src_attention_mask, src_ids, "src_attention_mask")
        out = self.encoder(src_ids, attention_mask=src_attention_mask, need_weights=need_weights)
        return out.hidden_states, memory_mask, out.attentions

    def decode(self, tgt_ids: Tensor, memory: Tensor, *, memory_mask: Optional[Tensor] = None,
               cache: Any = None, need_weights: bool = False) -> ModelOutput:
        """Run the decoder on tgt_ids (continuing after cache.seq_len tokens when cached).

        Returns ModelOutput(logits (B, T, vocab), attentions, cross_attentions, hidden_states)."""
        if not isinstance(memory, Tensor) or memory.dim() != 3 or memory.shape[-1] != self.cfg.d_model:
            shape = tuple(memory.shape) if isinstance(memory, Tensor) else type(memory).__name__
            raise ValueError(f"memory must be the encoder output, shape (B, S, d_model={self.cfg.d_model}), "
                             f"got {shape}; for one sentence add the batch dim: memory[None]")
        check_cache(cache)
        past = cache.seq_len if cache is not None else 0
        if checking():  # here, once: the layers below trust what this call hands them
            check_ids("tgt_ids", tgt_ids, self.cfg.vocab_size, self.cfg.max_len, past)
            check_device("tgt_ids", tgt_ids, self.embed.tok_emb.weight)
            check_flag("need_weights", need_weights)
            if cache is not None:
                cache.check_batch(tgt_ids.shape[0])
            self.decoder_layers[0].cross_attn.check_input("memory", memory)  # device and dtype
            if memory_mask is not None:
                check_mask(memory_mask, (tgt_ids.shape[0], self.cfg.n_heads, tgt_ids.shape[1], memory.shape[1]))
        if memory.shape[0] != tgt_ids.shape[0]:
            raise ValueError(f"tgt_ids has batch {tgt_ids.shape[0]} but the source has batch {memory.shape[0]}")
        snap = cache.snapshot() if cache is not None else None
        try:  # another model or another source is refused; a step that fails changes nothing
            if cache is not None:
                cache.bind(self, memory)
            with checked():
                return self._decode(tgt_ids, memory, memory_mask, cache, past, need_weights)
        except BaseException:
            if cache is not None:
                cache.restore(snap)
            raise

    def _decode(self, tgt_ids: Tensor, memory: Tensor, memory_mask: Optional[Tensor], cache: Optional[KVCache],
                past: int, need_weights: bool) -> ModelOutput:
        positions = torch.arange(past, past + tgt_ids.shape[1], device=tgt_ids.device)  # (T,)
        x = self.embed(tgt_ids.long(), positions)  # (B, T, C)
        rope = self.encoder.rope.cos_sin(positions, x.dtype) if self.encoder.rope is not None else None
        attentions = [] if need_weights else None
        cross = [] if need_weights else None
        for i, layer in enumerate(self.decoder_layers):
            x, w, cw = layer(x, memory, memory_mask=memory_mask, cache=cache, layer_idx=i,
                             need_weights=need_weights, rope=rope)
            if need_weights:
                attentions.append(w)
                cross.append(cw)
        if self.decoder_norm_f is not None:
            x = self.decoder_norm_f(x)
        return ModelOutput(logits=self.lm_head(x), attentions=attentions, cross_attentions=cross,
                           hidden_states=x)

    def forward(self, src_ids: Tensor, tgt_ids: Tensor, targets: Optional[Tensor] = None, *,
                src_attention_mask: Optional[Tensor] = None, need_weights: bool = False) -> ModelOutput:
        """Args:
            src_ids (B, S); tgt_ids (B, T) decoder input (starts with bos); targets (B, T) for the loss;
            src_attention_mask (B, S): 1 real, 0 pad.

        Returns ModelOutput(logits, loss, attentions, cross_attentions, hidden_states, encoder_attentions)."""
        memory, memory_mask, enc_att = self.encode(src_ids, src_attention_mask=src_attention_mask,
                                                   need_weights=need_weights)
        out = self.decode(tgt_ids, memory, memory_mask=memory_mask, need_weights=need_weights)
        out.loss = lm_loss(out.logits, targets, self.cfg.vocab_size)
        out.encoder_attentions = enc_att
        return out

    def generate(self, src_ids: Tensor, max_new_tokens: int, *, bos_id: int, eos_id: Optional[int] = None,
                 temperature: float = 0.0, use_cache: bool = True, top_k: Optional[int] = None,
                 generator: Optional[torch.Generator] = None,
                 src_attention_mask: Optional[Tensor] = None, top_p: Optional[float] = None) -> Tensor:
        """Translate: start from bos_id, add tokens until every row has produced eos_id (rows
        that finished earlier are filled with eos_id) or max_new_tokens were added.

        The encoder runs once; with use_cache each decoder layer computes the cross-attention
        keys/values of the source once and reuses them. temperature, top_k, top_p: as in GPT.generate.
        Returns (B, 1 + n), n <= max_new_tokens."""
        return generate_encoder_decoder(self, src_ids, max_new_tokens, bos_id=bos_id, eos_id=eos_id,
                                        temperature=temperature, top_k=top_k, use_cache=use_cache,
                                        generator=generator, src_attention_mask=src_attention_mask,
                                        top_p=top_p)
