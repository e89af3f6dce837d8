"""attnlib: attention and Transformers, small enough to read, tested against PyTorch.

The library behind the interactive Transformer book. See ``DESIGN.md`` in the book repository
for the API contract. The names below are the public API: the contract's, and the helpers the
chapters import (seeding, timing, data, the book's models) so that no notebook repeats them.
"""
from .attention import causal_mask, padding_mask, scaled_dot_product_attention
from .mha import MultiHeadAttention
from .mla import MultiHeadLatentAttention
from .cache import KVCache
from .config import TransformerConfig
from .generation import sample_next, top_p_filter
from .layers import DecoderLayer, Embeddings, EncoderLayer, FeedForward
from .norms import RMSNorm
from .models import GPT
from .encoder_decoder import Encoder, EncoderDecoder
from .outputs import ModelOutput
from .positional import (LearnedPositionalEmbedding, RotaryEmbedding,
                         SinusoidalPositionalEncoding, sinusoidal_table)
from .interop import mha_from_torch, mha_to_torch
from .masks import (from_additive, from_hf_attention_mask, from_key_padding, from_nn_mha,
                    to_additive, to_hf_attention_mask, to_key_padding, to_nn_mha)
from .train import train, train_many
from .evaluate import head_output_norms, heads_off, logit_lens, loss_by_position
from .utils import best_time, default_device, peak_memory, seed_everything
from .tokenizers import BPETokenizer, CharTokenizer
from .data import load_corpus
from .dates import DateTokenizer, date_pairs
from .pretrained import (WordPieceTokenizer, encoder_from_hf, gpt_from_hf, load_minilm,
                         mean_pool, sentence_embeddings)
from .pretrained.smollm2 import GGUFTokenizer, load_smollm2, stream_reply
from .tiny_gpt import load_tiny_gpt, save_tiny_gpt, train_tiny_gpt
from .flash import tiled_attention
from .quant import (dequantize_groupwise, dequantize_nf4, dequantize_rows, quantize_groupwise,
                    quantize_linears, quantize_nf4, quantize_rows)
from .lora import LoRALinear, add_lora, merge_lora
from .windows import sliding_window_mask
from .rope_scaling import ScaledRotaryEmbedding, scaled_rope
from .speculative import SpeculativeStats, speculative_generate
from .io_count import AttentionIO, flash_attention_io, naive_attention_io, tile_footprint
from .kv_quant import Int8KVCache
from .gptq import gptq_quantize
from .paged import PagedKVCache, PagedSequence, paged_attention
from . import quant, viz

__version__ = "0.1.0"
