"""llama.cpp: vocabularies from GGUF files and a logits processor for llama-cpp-python.

``tokenizer_info_from_gguf`` (exposed as :meth:`grammask.TokenizerInfo.from_gguf`) reads a GGUF
file's tokenizer metadata with the ``gguf`` package: ``tokenizer.ggml.model`` gives the spelling
(``llama`` = SentencePiece with ``<0xHH>`` byte pieces and ``▁`` spaces, ``gpt2`` = byte-level
BPE), ``tokenizer.ggml.tokens`` the tokens, ``tokenizer.ggml.token_type`` which are control,
unused or unknown (special: grammar text never produces them), and the ``eos``/``eot``/``eom``
ids the stop tokens.

:class:`LogitsProcessor` follows llama-cpp-python's ``LogitsProcessor`` contract,
``(input_ids: np.ndarray[intc], scores: np.ndarray[single]) -> np.ndarray[single]``, called once per
sampled token with the whole sequence so far. Pass it as
``llm(prompt, logits_processor=LogitsProcessorList([proc]))`` (or to ``create_completion`` /
``generate``). ``gguf`` and ``llama_cpp`` are imported lazily; only numpy is needed here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

import numpy as np

from ..bitmask import apply_token_bitmask_inplace
from ._processor import SequenceProcessor

if TYPE_CHECKING:
    from ..tokenizer_info import TokenizerInfo

__all__ = ["LogitsProcessor", "tokenizer_info_from_gguf"]

# llama.cpp's token types (llama_cpp.LLAMA_TOKEN_TYPE_*).
TOKEN_TYPE_NORMAL = 1
TOKEN_TYPE_UNKNOWN = 2
TOKEN_TYPE_CONTROL = 3
TOKEN_TYPE_USER_DEFINED = 4
TOKEN_TYPE_UNUSED = 5
TOKEN_TYPE_BYTE = 6

_STOP_KEYS = (
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",
)


def _field_value(field: Any) -> Any:
    """A GGUF field's value: a scalar, a str, or a list of them (any gguf release)."""
    contents = getattr(field, "contents", None)
    if callable(contents):  # gguf >= 0.11
        return contents()
    import gguf

    parts = [field.parts[i] for i in field.data]
    main = field.types[0] if field.types else None
    if main == gguf.GGUFValueType.ARRAY:
        sub = field.types[-1]
        if sub == gguf.GGUFValueType.STRING:
            return [bytes(p).decode("utf-8", errors="surrogateescape") for p in parts]
        return [p.tolist()[0] for p in parts]
    if main == gguf.GGUFValueType.STRING:
        return bytes(parts[0]).decode("utf-8", errors="surrogateescape")
    return parts[0].tolist()[0]


def read_gguf_tokenizer(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """The ``tokenizer.ggml.*`` metadata of a GGUF file, as plain Python values."""
    try:
        import gguf
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("reading GGUF files needs the gguf package: pip install gguf") from e
    reader = gguf.GGUFReader(os.fspath(path), "r")
    return {
        key: _field_value(field)
        for key, field in reader.fields.items()
        if key.startswith("tokenizer.ggml.")
    }


def tokenizer_info_from_gguf(
    path_or_model: Any,
    *,
    vocab_size: Optional[int] = None,
    stop_token_ids: Union[List[int], int, None] = None,
) -> "TokenizerInfo":
    """Build a :class:`~grammask.TokenizerInfo` from a GGUF file (or a ``llama_cpp.Llama``, whose
    ``model_path`` is read). See :meth:`grammask.TokenizerInfo.from_gguf`."""
    from ..tokenizer_info import TokenizerInfo, VocabType

    path = getattr(path_or_model, "model_path", path_or_model)
    meta = read_gguf_tokenizer(path)
    model = meta.get("tokenizer.ggml.model")
    tokens: Sequence[str] = meta.get("tokenizer.ggml.tokens") or []
    if not tokens:
        raise ValueError(f"{path}: no tokenizer.ggml.tokens in the GGUF metadata")
    if model == "llama":
        vocab_type, add_prefix_space = VocabType.BYTE_FALLBACK, True
    elif model == "gpt2":
        vocab_type, add_prefix_space = VocabType.BYTE_LEVEL, False
    else:
        raise ValueError(
            f"{path}: tokenizer.ggml.model {model!r} is not supported (grammask reads 'llama', "
            "SentencePiece with byte fallback, and 'gpt2', byte-level BPE)"
        )
    types = meta.get("tokenizer.ggml.token_type") or [TOKEN_TYPE_NORMAL] * len(tokens)
    special = [
        i
        for i, (tok, kind) in enumerate(zip(tokens, types))
        if kind in (TOKEN_TYPE_CONTROL, TOKEN_TYPE_UNKNOWN, TOKEN_TYPE_UNUSED)
        # llama.cpp marks added tokens such as <|im_end|> USER_DEFINED; like llguidance, treat
        # the ones shaped <...> as control tokens.
        or (
            kind == TOKEN_TYPE_USER_DEFINED
            and len(tok) > 2
            and tok.startswith("<")
            and tok.endswith(">")
        )
    ]
    if stop_token_ids is None:
        stops: List[int] = []
        for key in _STOP_KEYS:
            value = meta.get(key)
            if isinstance(value, int) and 0 <= value < len(tokens) and value not in stops:
                stops.append(value)
        for value in meta.get("tokenizer.ggml.eos_token_ids") or []:
            if 0 <= value < len(tokens) and value not in stops:
                stops.append(value)
        stop_token_ids = stops or None
    return TokenizerInfo(
        list(tokens),
        vocab_type,
        vocab_size=vocab_size,
        stop_token_ids=stop_token_ids,
        add_prefix_space=add_prefix_space,
        special_token_ids=special,
    )


class LogitsProcessor(SequenceProcessor):
    """Constrains a llama-cpp-python generation to a compiled grammar.

    Single-use: the first call sees the prompt; each later call brings the tokens sampled since.
    Once the grammar has terminated (a stop token was sampled) the scores are left alone.
    """

    def _ids(self, tokens: Any) -> np.ndarray:
        return np.asarray(tokens)

    def _apply(self, logits: Any, covered: int) -> None:
        apply_token_bitmask_inplace(logits, self.token_bitmask[0], vocab_size=covered)
