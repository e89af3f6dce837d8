"""TransformerConfig: every size and switch of a model in one validated dataclass."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

POSITIONALS = ("learned", "sinusoidal", "rope", "none")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swiglu")


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

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {name}={value!r}")
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        if isinstance(self.d_ff, bool) or not isinstance(self.d_ff, int) or self.d_ff < 1:
            raise ValueError(f"d_ff must be a positive int (or None for 4 * d_model), got d_ff={self.d_ff!r}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: each head needs an "
                f"equal share D = d_model / n_heads"
            )
        if self.positional not in POSITIONALS:
            raise ValueError(f"unknown positional {self.positional!r}; choose one of {', '.join(map(repr, POSITIONALS))}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose one of {', '.join(map(repr, ACTIVATIONS))}")
        if self.positional == "rope" and self.head_dim % 2:
            raise ValueError(
                f"positional='rope' rotates dims in pairs, so the head width must be even; got "
                f"head_dim = d_model / n_heads = {self.d_model} / {self.n_heads} = {self.head_dim}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got dropout={self.dropout}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps}")
        if isinstance(self.type_vocab_size, bool) or not isinstance(self.type_vocab_size, int) or self.type_vocab_size < 0:
            raise ValueError(f"type_vocab_size must be an int >= 0, got {self.type_vocab_size!r}")
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id={self.pad_id} is outside [0, vocab_size={self.vocab_size})")

    @property
    def head_dim(self) -> int:
        """D = d_model / n_heads."""
        return self.d_model // self.n_heads
