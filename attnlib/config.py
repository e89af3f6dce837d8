"""TransformerConfig: every size and switch of a model in one validated dataclass."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from ._checks import as_int, as_real

POSITIONALS = ("learned", "sinusoidal", "rope", "none")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swiglu")
NORMS = ("layernorm", "rmsnorm")
ATTENTIONS = ("mha", "mla")
MLA_SIZES = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


@dataclass
class TransformerConfig:
    """Sizes and switches shared by :class:`GPT`, :class:`Encoder` and :class:`EncoderDecoder`.

    The book's vocabulary: C = d_model, H = n_heads, D = C / H, L = n_layers, T <= max_len.
    """

    vocab_size: int          # number of token ids; valid ids are 0 .. vocab_size - 1
    d_model: int             # C, the width of every token vector in the residual stream
    n_heads: int             # H; each head gets D = d_model / n_heads dims
    n_layers: int            # L blocks (for EncoderDecoder: L encoder + L decoder blocks)
    d_ff: Optional[int] = None   # FFN hidden width; None -> 4 * d_model (the 2017 and GPT-2 ratio).
    # With "swiglu" the FFN has two d_ff-wide input projections (value and gate), so it holds
    # 3 * C * d_ff weights instead of 2 * C * d_ff; Llama shrinks d_ff to ~8/3 * C to compensate.
    # We do not rescale silently: pass the d_ff you want.
    max_len: int = 256       # context length: the most tokens (prompt + cache) a model sees
    positional: str = "learned"  # "learned" (GPT-2, BERT) | "sinusoidal" (2017) | "rope" | "none"
    activation: str = "gelu"  # "relu" (2017) | "gelu" (BERT) | "gelu_tanh" (GPT-2) | "swiglu"
    norm_first: bool = True  # pre-norm x + f(norm(x)) (GPT-2 on); False: the 2017 norm(x + f(x))
    dropout: float = 0.0     # on attention weights, sublayer outputs and embeddings (training only)
    bias: bool = True        # biases in the attention and FFN projections
    tie_weights: bool = True  # the LM head reuses the token embedding matrix (GPT-2, 2017)
    layer_norm_eps: float = 1e-5  # 1e-5 for GPT-2; BERT uses 1e-12
    # Options needed to load real checkpoints exactly (off by default):
    type_vocab_size: int = 0     # > 0: token-type (segment) embeddings added to the input (BERT: 2)
    embedding_norm: bool = False  # LayerNorm right after the embedding sum (BERT)
    pad_id: Optional[int] = None  # padding token id (its embedding row gets no special treatment)
    # Modern decoders (Llama, Mistral, Qwen, SmolLM2):
    n_kv_heads: Optional[int] = None  # G key/value heads; None -> n_heads (multi-head attention),
    # 1 = multi-query, 1 < G < H = grouped-query: query head h reads key/value head h // (H / G)
    norm: str = "layernorm"   # "layernorm" | "rmsnorm" (Llama: no centring, no bias); eps as above
    rope_base: float = 10000.0  # RoPE base theta (positional="rope"); Llama 3 uses 500000
    # Attention in recent models (chapter 13):
    sliding_window: Optional[int] = None  # W: query i sees keys i-W+1 .. i (Mistral); None: all
    attention: str = "mha"   # "mha" (grouped-/multi-query through n_kv_heads) | "mla" (DeepSeek)
    kv_lora_rank: Optional[int] = None  # MLA: width of the latent c_kv that the cache holds
    q_lora_rank: Optional[int] = None   # MLA: width of the queries' latent (None: no latent)
    qk_nope_head_dim: Optional[int] = None  # MLA: per-head query/key dims that carry no RoPE
    qk_rope_head_dim: Optional[int] = None  # MLA: per-head dims that carry RoPE (keys: shared)
    v_head_dim: Optional[int] = None    # MLA: per-head value width

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field, and fill the defaults that follow from others (d_ff, n_kv_heads).
        A model calls it again when it is built, so a field edited after construction is checked."""
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            setattr(self, name, _size(name, getattr(self, name)))
        self.d_ff = 4 * self.d_model if self.d_ff is None else _size("d_ff", self.d_ff)
        for name in ("n_kv_heads", "type_vocab_size", "pad_id", "sliding_window", "q_lora_rank",
                     *MLA_SIZES):
            value = getattr(self, name)
            if as_int(value) is not None:  # numpy or 0-d tensor ints, stored as Python ints
                setattr(self, name, as_int(value))
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: "
                             f"each head needs an equal share D = d_model / n_heads")
        self.n_kv_heads = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        if not _is_int(self.n_kv_heads) or self.n_kv_heads < 1:
            raise ValueError(f"n_kv_heads must be a positive int (or None for n_heads), got "
                             f"n_kv_heads={self.n_kv_heads!r}")
        if self.n_heads % self.n_kv_heads != 0:
            raise ValueError(f"n_heads={self.n_heads} is not divisible by n_kv_heads="
                             f"{self.n_kv_heads}: each key/value head serves an equal group of "
                             f"n_heads / n_kv_heads query heads; pick n_kv_heads among the "
                             f"divisors of {self.n_heads}")
        for name, allowed in (("norm", NORMS), ("positional", POSITIONALS),
                              ("activation", ACTIVATIONS), ("attention", ATTENTIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; choose one of "
                                 f"{', '.join(map(repr, allowed))}")
        for name in ("rope_base", "dropout", "layer_norm_eps"):  # a 0-d tensor or array: its number
            value = getattr(self, name)
            if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
                setattr(self, name, value.item())
        if as_real(self.rope_base) is None or not 0 < self.rope_base < math.inf:
            raise ValueError(f"rope_base must be a positive number (RoPE's theta, e.g. 10000.0), "
                             f"got rope_base={self.rope_base!r}")
        if self.positional == "rope" and self.attention == "mha" and self.head_dim % 2:
            raise ValueError(f"positional='rope' rotates dims in pairs, so the head width must be "
                             f"even; got head_dim = d_model / n_heads = {self.d_model} / "
                             f"{self.n_heads} = {self.head_dim}")
        for name in ("dropout", "layer_norm_eps"):
            if as_real(getattr(self, name)) is None:
                raise TypeError(f"{name} must be a number, got {name}={getattr(self, name)!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got dropout={self.dropout}")
        if not 0 < self.layer_norm_eps < math.inf:
            raise ValueError(f"layer_norm_eps must be positive and finite, got "
                             f"{self.layer_norm_eps}")
        for name in ("norm_first", "bias", "tie_weights", "embedding_norm"):
            value = getattr(self, name)
            if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
                value = bool(value)  # numpy's bool
                setattr(self, name, value)
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {name}={value!r}")
        if not _is_int(self.type_vocab_size) or self.type_vocab_size < 0:
            raise ValueError(f"type_vocab_size must be an int >= 0, got {self.type_vocab_size!r}")
        if self.pad_id is not None and as_int(self.pad_id) is None:
            raise TypeError(f"pad_id must be an int token id or None, got pad_id={self.pad_id!r}")
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id={self.pad_id} is outside [0, vocab_size={self.vocab_size})")
        if self.sliding_window is not None:
            _size("sliding_window", self.sliding_window)
        self._validate_mla()

    def _validate_mla(self) -> None:
        """MLA's sizes: all four given (and q_lora_rank, if any) for attention="mla"."""
        given = [name for name in (*MLA_SIZES, "q_lora_rank") if getattr(self, name) is not None]
        if self.attention == "mha":
            if given:
                raise ValueError(f"{', '.join(given)} are sizes of multi-head latent attention; "
                                 f"pass attention='mla' with them, or leave them None")
            return
        for name in MLA_SIZES:
            if getattr(self, name) is None:
                raise ValueError(f"attention='mla' needs {name} (DeepSeek's sizes: kv_lora_rank, "
                                 f"qk_nope_head_dim, qk_rope_head_dim, v_head_dim)")
            _size(name, getattr(self, name), minimum=0 if name == "qk_rope_head_dim" else 1)
        if self.q_lora_rank is not None:
            _size("q_lora_rank", self.q_lora_rank)
        if self.qk_rope_head_dim % 2 or (self.positional == "rope") != (self.qk_rope_head_dim > 0):
            raise ValueError(f"attention='mla' rotates qk_rope_head_dim dims in pairs with "
                             f"positional='rope' (an even number > 0), and none without RoPE; got "
                             f"qk_rope_head_dim={self.qk_rope_head_dim}, "
                             f"positional={self.positional!r}")

    @property
    def head_dim(self) -> int:
        """D = d_model / n_heads."""
        return self.d_model // self.n_heads


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _size(name: str, value: Any, minimum: int = 1) -> int:
    """A size as a Python int >= minimum, or a ValueError that names it."""
    n = as_int(value)
    if n is None or n < minimum:
        what = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {what}, got {name}={value!r}")
    return n
