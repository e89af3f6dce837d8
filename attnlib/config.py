"""TransformerConfig: every size and switch of a model in one validated dataclass."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ._checks import as_int, as_real

POSITIONALS = ("learned", "sinusoidal", "rope", "none")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swiglu")
NORMS = ("layernorm", "rmsnorm")


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
    activation: str = "gelu"     # "relu" (2017) | "gelu" (BERT) | "gelu_tanh" (GPT-2) | "swiglu" (Llama)
    norm_first: bool = True  # pre-norm x + f(norm(x)) (GPT-2 on); False: 2017 post-norm norm(x + f(x))
    dropout: float = 0.0     # on attention weights, sublayer outputs and embeddings (training only)
    bias: bool = True        # biases in the attention and FFN projections
    tie_weights: bool = True  # the LM head reuses the token embedding matrix (GPT-2, the 2017 model)
    layer_norm_eps: float = 1e-5  # 1e-5 for GPT-2; BERT uses 1e-12
    # Options needed to load real checkpoints exactly (off by default):
    type_vocab_size: int = 0     # > 0: token-type (segment) embeddings added to the input (BERT: 2)
    embedding_norm: bool = False  # LayerNorm right after the embedding sum (BERT)
    pad_id: Optional[int] = None  # padding token id (its embedding row gets no special treatment)
    # Modern decoders (Llama, Mistral, Qwen, SmolLM2):
    n_kv_heads: Optional[int] = None  # G key/value heads; None -> n_heads (multi-head attention),
    # 1 = multi-query, 1 < G < H = grouped-query: query head h reads key/value head h // (H / G)
    norm: str = "layernorm"   # "layernorm" | "rmsnorm" (Llama: no mean subtraction, no bias); eps is layer_norm_eps
    rope_base: float = 10000.0  # RoPE base theta (positional="rope"); Llama 3 uses 500000

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field, and fill the defaults that follow from others (d_ff, n_kv_heads).
        A model calls it again when it is built, so a field edited after construction is checked."""
        # sizes: Python, numpy or 0-d tensor ints, stored as Python ints
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            value = getattr(self, name)
            n = as_int(value)
            if n is None or n < 1:
                raise ValueError(f"{name} must be a positive int, got {name}={value!r}")
            setattr(self, name, n)
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        if as_int(self.d_ff) is None or as_int(self.d_ff) < 1:
            raise ValueError(f"d_ff must be a positive int (or None for 4 * d_model), got d_ff={self.d_ff!r}")
        self.d_ff = as_int(self.d_ff)
        for name in ("n_kv_heads", "type_vocab_size", "pad_id"):
            value = getattr(self, name)
            if as_int(value) is not None:
                setattr(self, name, as_int(value))
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: each head needs an "
                f"equal share D = d_model / n_heads"
            )
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if isinstance(self.n_kv_heads, bool) or not isinstance(self.n_kv_heads, int) or self.n_kv_heads < 1:
            raise ValueError(f"n_kv_heads must be a positive int (or None for n_heads), got n_kv_heads={self.n_kv_heads!r}")
        if self.n_heads % self.n_kv_heads != 0:
            raise ValueError(
                f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}: each key/value head "
                f"serves an equal group of n_heads / n_kv_heads query heads; pick n_kv_heads among the "
                f"divisors of {self.n_heads}"
            )
        if self.norm not in NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; choose one of {', '.join(map(repr, NORMS))}")
        for name in ("rope_base", "dropout", "layer_norm_eps"):  # a 0-d tensor or array: its number
            value = getattr(self, name)
            if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
                setattr(self, name, value.item())
        if as_real(self.rope_base) is None or not 0 < self.rope_base < math.inf:
            raise ValueError(f"rope_base must be a positive number (RoPE's theta, e.g. 10000.0), got rope_base={self.rope_base!r}")
        if self.positional not in POSITIONALS:
            raise ValueError(f"unknown positional {self.positional!r}; choose one of {', '.join(map(repr, POSITIONALS))}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose one of {', '.join(map(repr, ACTIVATIONS))}")
        if self.positional == "rope" and self.head_dim % 2:
            raise ValueError(
                f"positional='rope' rotates dims in pairs, so the head width must be even; got "
                f"head_dim = d_model / n_heads = {self.d_model} / {self.n_heads} = {self.head_dim}"
            )
        for name in ("dropout", "layer_norm_eps"):
            value = getattr(self, name)
            if as_real(value) is None:
                raise TypeError(f"{name} must be a number, got {name}={value!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got dropout={self.dropout}")
        if not 0 < self.layer_norm_eps < math.inf:
            raise ValueError(f"layer_norm_eps must be positive and finite, got {self.layer_norm_eps}")
        for name in ("norm_first", "bias", "tie_weights", "embedding_norm"):
            value = getattr(self, name)
            if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
                value = bool(value)  # numpy's bool
                setattr(self, name, value)
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {name}={value!r}")
        if isinstance(self.type_vocab_size, bool) or not isinstance(self.type_vocab_size, int) or self.type_vocab_size < 0:
            raise ValueError(f"type_vocab_size must be an int >= 0, got {self.type_vocab_size!r}")
        if self.pad_id is not None and as_int(self.pad_id) is None:
            raise TypeError(f"pad_id must be an int token id or None, got pad_id={self.pad_id!r}")
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id={self.pad_id} is outside [0, vocab_size={self.vocab_size})")

    @property
    def head_dim(self) -> int:
        """D = d_model / n_heads."""
        return self.d_model // self.n_heads
