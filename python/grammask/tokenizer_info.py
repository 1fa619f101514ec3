"""Token vocabularies: what each token id of a model means, in bytes.

``TokenizerInfo`` is the first object a user builds: it wraps the Rust ``Vocabulary``
(``grammask._core.TokenizerInfo``, kept as ``_handle``) that every compiled grammar shares. It is
API-compatible with XGrammar 0.2.8's ``TokenizerInfo``: the same vocabulary type, prefix-space flag,
decoded bytes and stop tokens for the tokenizer families it supports, with one deliberate
difference: ``from_huggingface`` marks every added token (``tokenizer.added_tokens_decoder``:
``<|im_start|>``, ``<|eot_id|>``, Qwen2.5's ``<tool_call>`` and ``<|fim_pad|>``, whether the
tokenizer flags them special or not; except whitespace-only ones such as Gemma's ``"\n\n"``,
which spell ordinary text), the declared special tokens (bos/unk/pad) and Tekken's control block
as special, so grammar *text* never produces them even when a grammar spells them
out; a grammar asks for one by id (``Token(id)`` in EBNF, ``<|name|>``/``<[id]>`` in Lark, a
``token`` structural tag, or a structural-tag begin/end string that is exactly one added token).
XGrammar treats them as ordinary text. ``from_huggingface(..., special_tokens="xgrammar")``
restores XGrammar's behaviour (only padding ids and tokens that decode to nothing are special);
``special_tokens="marked"`` makes only the added tokens flagged special special (grammask's
behaviour before token-level elements existed).

Stop tokens follow XGrammar: ``eos_token_id``, or, when a tokenizer has none, the tokens whose text
is one of XGrammar's end markers. ``extra_stop_tokens=True`` also stops on every other end-of-text
or end-of-turn token the vocabulary has (``<|eot_id|>``, ``<|eom_id|>``, ``<|im_end|>``,
``<end_of_turn>``, ``<|end|>``, ...), which chat models emit when their generation config says so.

Tokens are given as the tokenizer spells them (``"Ġhello"``, ``"▁hi"``, ``"<0x0A>"``) together
with a :class:`VocabType` saying how to read that spelling; the Rust core decodes them.
``from_huggingface`` detects the type, the stop tokens and the special tokens from a
``transformers`` tokenizer. ``transformers`` and ``tokenizers`` are imported lazily: this module
needs neither.
"""

from __future__ import annotations

import json
import re
import warnings
from enum import Enum
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Union

from . import _core
from .exception import _reraise_version

__all__ = ["TokenizerInfo", "VocabType"]


class VocabType(Enum):
    """How a tokenizer spells the bytes of its tokens (XGrammar's integer codes)."""

    RAW = 0
    """Tokens are their bytes (tiktoken, raw byte vocabularies)."""

    BYTE_FALLBACK = 1
    """SentencePiece style: ``<0xHH>`` is the byte 0xHH and ``▁`` (U+2581) is a space
    (Llama 2, Mistral 7B, Phi-3, Gemma)."""

    BYTE_LEVEL = 2
    """GPT-2 style: each char of the 256-char ``bytes_to_unicode`` alphabet stands for one byte
    (GPT-2, Llama 3, Qwen2, DeepSeek, Mistral Nemo)."""


def _byte_level_alphabet() -> List[str]:
    """The chars of GPT-2's byte-to-unicode map, indexed by byte."""
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    chars = []
    shifted = 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(0x100 + shifted))
            shifted += 1
    return chars


_BYTE_LEVEL_CHARSET: FrozenSet[str] = frozenset(_byte_level_alphabet())
"""The 256 chars byte-level BPE tokenizers spell bytes with."""

_BYTE_FALLBACK_PIECE = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
_BYTE_LEVEL_SPELLING = re.compile(
    "[" + "".join(re.escape(c) for c in sorted(_BYTE_LEVEL_CHARSET)) + "]*", re.DOTALL
)

# Texts of tokens that end generation, as the Rust core detects them when no stop list is given.
_DETECTION_STOP_TOKENS: FrozenSet[str] = frozenset(_core.TokenizerInfo.DETECTION_STOP_TOKENS)

# The subset XGrammar 0.2.8 detects (its DETECTION_STOP_TOKENS): the default.
_XGRAMMAR_DETECTION_STOP_TOKENS: FrozenSet[str] = frozenset(
    {
        "</s>",
        "<|end_of_text|>",
        "<|eot_id|>",
        "<|endoftext|>",
        "<eos>",
        "<|eos|>",
        "<end_of_turn>",
        "<｜end▁of▁sentence｜>",
    }
)

# Mistral's Tekken tokenizers reserve ids 0..999 for control tokens.
_TEKKEN_NUM_CONTROL_TOKENS = 1000

EncodedVocab = Union[Sequence[bytes], Sequence[str]]


def _ids_list(ids: Union[int, Sequence[int], None], what: str) -> Optional[List[int]]:
    if ids is None:
        return None
    if isinstance(ids, int):
        return [ids]
    out = list(ids)
    for i in out:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"{what} must be integers, got {i!r}")
    return out


class TokenizerInfo:
    """A tokenizer's vocabulary as bytes, with its stop and special tokens.

    ``vocab_size`` is the width of the model's logits. It may exceed ``len(encoded_vocab)``
    (models pad their output layer, e.g. Phi-3 32064 vs 32011 tokens, Qwen2.5 152064 vs 151665);
    the extra ids are special and always masked out. Pass the model's ``config.vocab_size``.
    """

    _handle: _core.TokenizerInfo

    def __init__(
        self,
        encoded_vocab: EncodedVocab,
        vocab_type: VocabType = VocabType.RAW,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Union[List[int], int, None] = None,
        add_prefix_space: bool = False,
        special_token_ids: Optional[List[int]] = None,
        extra_stop_tokens: bool = False,
    ) -> None:
        """Build the vocabulary.

        Parameters
        ----------
        encoded_vocab : list of bytes or str
            The tokens as the tokenizer spells them, indexed by id.
        vocab_type : VocabType
            How to read that spelling.
        vocab_size : int, optional
            The model's logits width; defaults to ``len(encoded_vocab)`` and may not be smaller.
        stop_token_ids : list of int or int, optional
            Ids that end generation. ``None`` detects them by their text, as XGrammar does
            (``</s>``, ``<|end_of_text|>``, ``<|eot_id|>``, ``<|endoftext|>``, ``<eos>``,
            ``<|eos|>``, ``<end_of_turn>``, ``<｜end▁of▁sentence｜>``).
        add_prefix_space : bool
            Whether the tokenizer prepends a space to the text it encodes.
        special_token_ids : list of int, optional
            Extra ids grammar text can never produce (added/control tokens). grammask extension.
        extra_stop_tokens : bool
            With ``stop_token_ids=None``, also detect ``<|im_end|>``, ``<|eom_id|>`` and
            ``<|end|>`` (grammask extension; XGrammar does not).
        """
        if not isinstance(vocab_type, VocabType):
            vocab_type = VocabType(vocab_type)
        stops = _ids_list(stop_token_ids, "stop_token_ids")
        specials = _ids_list(special_token_ids, "special_token_ids")
        self._handle = _core.TokenizerInfo(
            encoded_vocab, vocab_type.value, vocab_size, stops, specials, bool(add_prefix_space)
        )
        if stops is None and not extra_stop_tokens:
            detected = self._handle.stop_token_ids
            decoded = self._handle.decoded_vocab if detected else []
            kept = [i for i in detected if decoded[i].decode("utf-8", "replace") in _XGRAMMAR_DETECTION_STOP_TOKENS]
            if kept != detected:
                self._handle = _core.TokenizerInfo(
                    encoded_vocab, vocab_type.value, vocab_size, kept, specials, bool(add_prefix_space)
                )

    @classmethod
    def _from_handle(cls, handle: _core.TokenizerInfo) -> "TokenizerInfo":
        obj = cls.__new__(cls)
        obj._handle = handle
        return obj

    # ----------------------------------------------------------------------------- Hugging Face

    @staticmethod
    def from_huggingface(
        tokenizer: Any,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Union[List[int], int, None] = None,
        special_tokens: str = "grammask",
        extra_stop_tokens: bool = False,
    ) -> "TokenizerInfo":
        """Build the vocabulary of a ``transformers`` tokenizer.

        Supports tokenizers backed by the ``tokenizers`` library (byte-level BPE, SentencePiece
        style BPE with byte fallback, Tekken in Hugging Face format), slow SentencePiece
        tokenizers (``sp_model``) and tiktoken wrappers.

        ``vocab_size`` is the model's logits width (``config.vocab_size``); it defaults to the
        tokenizer's size. Ids past the tokenizer are padding; tokenizer ids past ``vocab_size``
        are dropped. Stop tokens default to ``[eos_token_id]`` as in XGrammar (when the tokenizer
        has no eos, a warning and detection by text). ``extra_stop_tokens=True`` adds the added
        special tokens whose text marks an end of text or turn (``<|eot_id|>``, ``<|eom_id|>``,
        ``<|im_end|>``, ``<end_of_turn>``, ``<|end|>``, ...).

        ``special_tokens="grammask"`` (default) makes every added token (but whitespace-only
        ones, Gemma's ``"\n\n"``), the declared special tokens and Tekken's control block
        special ids, which grammar text never produces (a
        grammar names them by id: ``Token(id)``, Lark ``<|name|>``); ``"marked"`` makes only the
        added tokens flagged special special (Qwen2.5's ``<tool_call>`` is then text);
        ``"xgrammar"`` keeps only XGrammar's special ids (padding and tokens that decode to
        nothing), so a grammar spelling ``<|im_start|>`` can produce that token as text.

        Raises ``ValueError`` for an empty ``stop_token_ids``, an unknown ``special_tokens`` or an
        unsupported tokenizer.
        """
        if special_tokens not in ("grammask", "marked", "xgrammar"):
            raise ValueError(
                f"special_tokens must be 'grammask', 'marked' or 'xgrammar', got {special_tokens!r}"
            )
        stop_list = _ids_list(stop_token_ids, "stop_token_ids")
        if stop_list is not None and len(stop_list) == 0:
            raise ValueError("stop_token_ids cannot be empty")

        try:
            vocab_dict: Dict[Any, int] = tokenizer.get_vocab()
        except AttributeError as e:
            raise ValueError(
                f"Unsupported tokenizer type: {type(tokenizer).__name__} has no get_vocab()"
            ) from e
        tokenizer_vocab_size = max(len(vocab_dict), max(vocab_dict.values(), default=-1) + 1)
        if vocab_size is None:
            vocab_size = tokenizer_vocab_size
        num_encoded = min(vocab_size, tokenizer_vocab_size)
        encoded_vocab: List[Union[str, bytes]] = [""] * num_encoded
        for token, token_id in vocab_dict.items():
            if 0 <= token_id < num_encoded:
                encoded_vocab[token_id] = token

        if TokenizerInfo._is_tiktoken_tokenizer(tokenizer):
            vocab_type = VocabType.RAW
            first = TokenizerInfo._first_token_of(tokenizer, " ")
            if first == "Ġ":
                vocab_type = VocabType.BYTE_LEVEL
            add_prefix_space = False
        elif hasattr(tokenizer, "backend_tokenizer") and tokenizer.backend_tokenizer is not None:
            meta = TokenizerInfo._detect_metadata_from_hf(
                TokenizerInfo._pipeline_json(tokenizer.backend_tokenizer)
            )
            vocab_type = meta["vocab_type"]
            add_prefix_space = meta["add_prefix_space"]
            from_vocab = TokenizerInfo._detect_vocab_type_from_vocab(vocab_dict)
            if from_vocab is not None and from_vocab != vocab_type:
                # The serialized pipeline can be rebuilt unfaithfully (transformers v5); the
                # spelling of the vocabulary itself is the better witness.
                vocab_type = from_vocab
                add_prefix_space = TokenizerInfo._detect_add_prefix_space_by_encoding(tokenizer, vocab_type)
        elif TokenizerInfo._is_sentencepiece_tokenizer(tokenizer):
            vocab_type = VocabType.BYTE_FALLBACK if "<0x0A>" in vocab_dict else VocabType.RAW
            add_prefix_space = True
        else:
            raise ValueError(f"Unsupported tokenizer type: {type(tokenizer).__name__}")

        special = (
            TokenizerInfo._special_ids_from_hf(tokenizer, num_encoded, special_tokens == "grammask")
            if special_tokens != "xgrammar"
            else None
        )
        if stop_list is None:
            stop_list = TokenizerInfo._stop_ids_from_hf(tokenizer, num_encoded, extra_stop_tokens)
            if not stop_list:
                warnings.warn(
                    "stop_token_ids is not given and the tokenizer has no eos_token_id in the "
                    "vocabulary; detecting stop tokens by their text (possibly none)",
                    stacklevel=2,
                )
                stop_list = None

        return TokenizerInfo(
            encoded_vocab,
            vocab_type,
            vocab_size=vocab_size,
            stop_token_ids=stop_list,
            add_prefix_space=add_prefix_space,
            special_token_ids=special,
            extra_stop_tokens=extra_stop_tokens,
        )

    @staticmethod
    def _special_ids_from_hf(tokenizer: Any, num_encoded: int, all_added: bool = True) -> List[int]:
        """Added tokens (all but the whitespace-only ones, or with ``all_added=False`` those
        marked special), the tokenizer's declared special tokens (bos, unk, pad, ...), and
        Tekken's control-token block."""
        ids = set()
        added = getattr(tokenizer, "added_tokens_decoder", None) or {}
        for token_id, token in added.items():
            if getattr(token, "special", False):
                ids.add(int(token_id))
            elif all_added and str(getattr(token, "content", "")).strip():
                # Whitespace-only added tokens (Gemma's "\n", "\n\n", space runs) are how the
                # tokenizer spells ordinary text: they stay text.
                ids.add(int(token_id))
        for token_id in getattr(tokenizer, "all_special_ids", None) or []:
            if token_id is not None:
                ids.add(int(token_id))
        if TokenizerInfo._is_tekken(tokenizer, added):
            ids.update(range(_TEKKEN_NUM_CONTROL_TOKENS))
        return sorted(i for i in ids if 0 <= i < num_encoded)

    @staticmethod
    def _is_tekken(tokenizer: Any, added: Dict[int, Any]) -> bool:
        """Mistral Tekken tokenizers in Hugging Face format: ids 0..999 are control tokens
        (``<unk>``, ``<s>``, ``</s>``, ``[INST]``, ``<SPECIAL_N>``, ...)."""
        if len(added) < _TEKKEN_NUM_CONTROL_TOKENS:
            return False
        n = _TEKKEN_NUM_CONTROL_TOKENS
        contents = [getattr(added.get(i), "content", None) for i in range(n)]
        if any(c is None for c in contents):
            return False
        return sum(1 for c in contents if c.startswith("<SPECIAL_")) >= n // 2

    @staticmethod
    def _stop_ids_from_hf(tokenizer: Any, vocab_size: int, extra: bool = False) -> List[int]:
        """``[eos]`` (XGrammar's choice); with ``extra``, also the added special tokens whose
        text is an end marker."""
        stop: List[int] = []
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos is None and TokenizerInfo._is_sentencepiece_tokenizer(tokenizer):
            sp = TokenizerInfo._sp_model_of(tokenizer)
            eos_id = sp.eos_id() if sp is not None else -1
            eos = eos_id if eos_id >= 0 else None
        if isinstance(eos, int) and 0 <= eos < vocab_size:
            stop.append(eos)
        if not extra:
            return stop
        # Only added tokens marked special count: `</s>` is an ordinary token (an HTML tag) in
        # Gemma, and a non-special added token in Phi-3 whose generation config does not stop on it.
        added = getattr(tokenizer, "added_tokens_decoder", None) or {}
        for token_id in sorted(added):
            token = added[token_id]
            content = getattr(token, "content", None)
            if not getattr(token, "special", False):
                continue
            if content in _DETECTION_STOP_TOKENS and 0 <= token_id < vocab_size:
                if token_id not in stop:
                    stop.append(int(token_id))
        return stop

    @staticmethod
    def _pipeline_json(backend: Any) -> str:
        """The decoder, normalizer and pre-tokenizer of a ``tokenizers.Tokenizer`` as a small
        ``tokenizer.json``-shaped string (serializing the whole tokenizer with ``to_str`` and
        parsing it costs about a second for a 130k vocabulary)."""
        parts = {}
        try:
            for name in ("decoder", "normalizer", "pre_tokenizer"):
                component = getattr(backend, name)
                parts[name] = None if component is None else json.loads(component.__getstate__())
        except Exception:  # an unusual backend: fall back to the full serialization
            return backend.to_str()
        return json.dumps(parts)

    @staticmethod
    def _first_token_of(tokenizer: Any, text: str) -> Optional[str]:
        try:
            ids = tokenizer.encode(text, add_special_tokens=False)
            tokens = tokenizer.convert_ids_to_tokens(ids)
        except Exception:  # a tokenizer that cannot encode gives no evidence
            return None
        if not tokens:
            return None
        first = tokens[0]
        return first.decode("latin-1") if isinstance(first, bytes) else first

    @staticmethod
    def _is_tiktoken_tokenizer(tokenizer: Any) -> bool:
        """A remote-code tokenizer wrapping a ``tiktoken.Encoding`` (Qwen-1, Kimi-K2, ...)."""
        inner = getattr(tokenizer, "tokenizer", None)
        inner_type = type(inner)
        if inner_type.__name__ == "Encoding" and inner_type.__module__.startswith("tiktoken"):
            return True
        names = getattr(tokenizer, "vocab_files_names", None) or {}
        vocab_file = names.get("vocab_file", "") if isinstance(names, dict) else ""
        return isinstance(vocab_file, str) and "tiktoken" in vocab_file

    @staticmethod
    def _is_byte_level_tokenizer(tokenizer: Any) -> bool:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            return False
        return TokenizerInfo._detect_metadata_from_hf(backend.to_str())["vocab_type"] == (
            VocabType.BYTE_LEVEL
        )

    @staticmethod
    def _sp_model_of(tokenizer: Any) -> Any:
        for holder in (tokenizer, getattr(tokenizer, "tokenizer", None)):
            if holder is None:
                continue
            for name in ("sp_model", "tok"):
                sp = getattr(holder, name, None)
                if sp is not None and hasattr(sp, "eos_id") and hasattr(sp, "id_to_piece"):
                    return sp
        return None

    @staticmethod
    def _is_sentencepiece_tokenizer(tokenizer: Any) -> bool:
        return TokenizerInfo._sp_model_of(tokenizer) is not None

    @staticmethod
    def _detect_add_prefix_space_by_encoding(tokenizer: Any, vocab_type: Optional[VocabType]) -> bool:
        """Whether encoding ``"a"`` yields a token spelled with a leading space marker: ``▁`` for
        BYTE_FALLBACK, ``Ġ`` for the other types, either when ``vocab_type`` is None."""
        first = TokenizerInfo._first_token_of(tokenizer, "a")
        if not first:
            return False
        if vocab_type is None:
            return first[:1] in ("▁", "Ġ")
        return first.startswith("▁" if vocab_type == VocabType.BYTE_FALLBACK else "Ġ")

    @staticmethod
    def _detect_vocab_type_from_vocab(vocab_dict: Dict[Any, int]) -> Optional[VocabType]:
        """Guess the type from the spelling alone: at least 128 ``<0xHH>`` pieces means byte
        fallback; at least 128 single chars of the byte-level alphabet, with at least 99% of the
        tokens spelled in that alphabet, means byte level. ``None`` when neither holds."""
        byte_pieces = 0
        single_chars = 0
        in_alphabet = 0
        total = 0
        for token in vocab_dict:
            if not isinstance(token, str):
                continue
            total += 1
            if _BYTE_FALLBACK_PIECE.match(token):
                byte_pieces += 1
            if len(token) == 1 and token in _BYTE_LEVEL_CHARSET:
                single_chars += 1
            if _BYTE_LEVEL_SPELLING.fullmatch(token):
                in_alphabet += 1
        if byte_pieces >= 128:
            return VocabType.BYTE_FALLBACK
        if total and single_chars >= 128 and in_alphabet >= 0.99 * total:
            return VocabType.BYTE_LEVEL
        return None

    @staticmethod
    def _detect_metadata_from_hf(backend_str: str) -> Dict[str, Any]:
        """Read the vocabulary type and ``add_prefix_space`` from a ``tokenizer.json`` string.

        The decoder (or any decoder of a ``Sequence``) decides the type: ``ByteLevel`` means
        BYTE_LEVEL, ``ByteFallback`` means BYTE_FALLBACK, anything else RAW. A space is prepended
        when the normalizer has ``Prepend("▁")``, or the pre-tokenizer is ``Metaspace`` with
        ``prepend_scheme`` ``always``/``first`` (or the legacy ``add_prefix_space: true``), or a
        ``ByteLevel`` pre-tokenizer with ``add_prefix_space: true``.
        """
        spec = json.loads(backend_str)

        def components(node: Any, list_key: str) -> List[Dict[str, Any]]:
            # Flattens `Sequence` nodes iteratively (nesting is shallow, but input is untrusted).
            out, stack = [], [node]
            while stack:
                item = stack.pop()
                if not isinstance(item, dict):
                    continue
                if item.get("type") == "Sequence":
                    stack.extend(reversed(item.get(list_key) or []))
                else:
                    out.append(item)
            return out

        decoders = components(spec.get("decoder"), "decoders")
        types = {d.get("type") for d in decoders}
        if "ByteLevel" in types:
            vocab_type = VocabType.BYTE_LEVEL
        elif "ByteFallback" in types:
            vocab_type = VocabType.BYTE_FALLBACK
        else:
            vocab_type = VocabType.RAW

        add_prefix_space = False
        for n in components(spec.get("normalizer"), "normalizers"):
            if n.get("type") == "Prepend" and n.get("prepend") == "▁":
                add_prefix_space = True
        for p in components(spec.get("pre_tokenizer"), "pretokenizers"):
            kind = p.get("type")
            if kind == "Metaspace":
                scheme = p.get("prepend_scheme")
                if scheme in ("always", "first") or (scheme is None and p.get("add_prefix_space")):
                    add_prefix_space = True
            elif kind == "ByteLevel" and p.get("add_prefix_space"):
                add_prefix_space = True
        return {"vocab_type": vocab_type, "add_prefix_space": add_prefix_space}

    # ----------------------------------------------------------------------------- GGUF

    @staticmethod
    def from_gguf(
        path: Any,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Union[List[int], int, None] = None,
    ) -> "TokenizerInfo":
        """Build the vocabulary of a GGUF model file (llama.cpp), read with the ``gguf`` package.

        ``path`` is the file, or a ``llama_cpp.Llama`` (its ``model_path`` is read). The tokens,
        their spelling (``tokenizer.ggml.model``: ``llama`` = byte fallback, ``gpt2`` =
        byte-level) and their types come from the metadata: control, unused and unknown tokens,
        and user-defined tokens shaped ``<...>``, are special. Stop tokens default to the
        ``eos``, ``eot`` and ``eom`` ids (and ``eos_token_ids``). grammask extension.
        """
        from .integrations.llamacpp import tokenizer_info_from_gguf

        return tokenizer_info_from_gguf(path, vocab_size=vocab_size, stop_token_ids=stop_token_ids)

    # ----------------------------------------------------------------------------- properties

    @property
    def vocab_type(self) -> VocabType:
        """How the tokens are spelled."""
        return VocabType(self._handle.vocab_type)

    @property
    def vocab_size(self) -> int:
        """The model's logits width (the bitmask covers this many ids)."""
        return self._handle.vocab_size

    @property
    def add_prefix_space(self) -> bool:
        """Whether the tokenizer prepends a space to the text it encodes."""
        return self._handle.add_prefix_space

    @property
    def prepend_space_in_tokenization(self) -> bool:
        """Deprecated alias of :attr:`add_prefix_space`."""
        warnings.warn(
            "prepend_space_in_tokenization is deprecated; use add_prefix_space",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._handle.add_prefix_space

    @property
    def decoded_vocab(self) -> List[bytes]:
        """The bytes each token means, one entry per token given (padding ids excluded)."""
        return self._handle.decoded_vocab

    @property
    def stop_token_ids(self) -> List[int]:
        """The ids that end generation."""
        return self._handle.stop_token_ids

    @property
    def special_token_ids(self) -> List[int]:
        """Ids grammar text never produces: padding ids, empty tokens, special and control
        tokens. Stop tokens are not listed here."""
        return self._handle.special_token_ids

    # ----------------------------------------------------------------------------- serialization

    def dump_metadata(self) -> str:
        """``{"vocab_type":..,"vocab_size":..,"add_prefix_space":..,"stop_token_ids":[..]}``."""
        return self._handle.dump_metadata()

    @staticmethod
    def from_vocab_and_metadata(encoded_vocab: EncodedVocab, metadata: str) -> "TokenizerInfo":
        """Rebuild from the tokens and :meth:`dump_metadata`'s string. Special ids other than
        empty and padding ids are not part of the metadata."""
        return TokenizerInfo._from_handle(
            _core.TokenizerInfo.from_vocab_and_metadata(encoded_vocab, metadata)
        )

    def serialize_json(self) -> str:
        """Everything needed to rebuild this object, as JSON; byte strings are lowercase hex."""
        return self._handle.serialize_json()

    @staticmethod
    def deserialize_json(json_string: str) -> "TokenizerInfo":
        """Rebuild from :meth:`serialize_json`'s string. Input that is not JSON raises
        :class:`~grammask.DeserializeFormatError` (also an ``InvalidJSONError``), a missing or other
        version :class:`~grammask.DeserializeVersionError`."""
        try:
            return TokenizerInfo._from_handle(_core.TokenizerInfo.deserialize_json(json_string))
        except (_core.DeserializeFormatError, _core.InvalidJSONError) as e:
            raise _reraise_version(e) from None

    def __getstate__(self) -> str:
        return self.serialize_json()

    def __setstate__(self, state: str) -> None:
        self._handle = _core.TokenizerInfo.deserialize_json(state)

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(vocab_type={self.vocab_type.name}, vocab_size={self.vocab_size}, "
            f"add_prefix_space={self.add_prefix_space}, stop_token_ids={self.stop_token_ids})"
        )
