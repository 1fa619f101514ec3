"""Helpers for tests and debugging, matching ``xgrammar.testing``."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _core
from .bitmask import _is_torch, _torch
from .compiler import CompiledGrammar, GrammarCompiler
from .grammar import Grammar, schema_options, schema_to_str
from .matcher import GrammarMatcher
from .tokenizer_info import TokenizerInfo

__all__ = [
    "_json_schema_to_ebnf",
    "_regex_to_ebnf",
    "_ebnf_to_grammar_no_normalization",
    "_get_matcher_from_grammar",
    "_get_matcher_from_grammar_and_tokenizer_info",
    "_is_grammar_accept_string",
    "_get_masked_tokens_from_bitmask",
    "_is_single_token_bitmask",
    "bool_mask_to_bitmask",
    "bitmask_to_bool_mask",
]


def _json_schema_to_ebnf(
    schema: Union[str, Dict[str, Any], Any],
    *,
    any_whitespace: bool = True,
    indent: Optional[int] = None,
    separators: Optional[Tuple[str, str]] = None,
    max_whitespace_cnt: Optional[int] = None,
    strict_mode: bool = True,
    json_format: str = "json",
    any_order: bool = False,
    spelling: str = "canonical",
    format_assertion: bool = True,
) -> str:
    if json_format != "json":
        from .exception import UnsupportedFeatureError

        raise UnsupportedFeatureError(f"json_format={json_format!r} is not supported; only 'json'")
    return _core.Grammar.json_schema_to_ebnf(
        schema_to_str(schema),
        schema_options(
            any_whitespace, indent, separators, strict_mode, max_whitespace_cnt, any_order, spelling, format_assertion
        ),
    )


def _regex_to_ebnf(regex: str, with_rule_name: bool = True) -> str:
    text = _core.Grammar.regex_to_ebnf(regex, "root")
    if with_rule_name:
        return text
    first = text.split("\n", 1)[0]
    return first.split("::=", 1)[1].strip() if "::=" in first else text


def _ebnf_to_grammar_no_normalization(ebnf_string: str, root_rule_name: str = "root") -> Grammar:
    return Grammar.from_ebnf(ebnf_string, root_rule_name=root_rule_name)


_EMPTY_INFO: Optional[TokenizerInfo] = None


def _empty_tokenizer_info() -> TokenizerInfo:
    global _EMPTY_INFO
    if _EMPTY_INFO is None:
        _EMPTY_INFO = TokenizerInfo([])
    return _EMPTY_INFO


def _get_matcher_from_grammar(grammar: Union[Grammar, str], **kwargs: Any) -> GrammarMatcher:
    """A matcher over an empty vocabulary that can only accept strings, terminating without a stop
    token (as XGrammar's helper)."""
    return _get_matcher_from_grammar_and_tokenizer_info(
        grammar, _empty_tokenizer_info(), terminate_without_stop_token=True, **kwargs
    )


def _get_matcher_from_grammar_and_tokenizer_info(
    grammar: Union[Grammar, str], tokenizer_info: Optional[TokenizerInfo] = None, **kwargs: Any
) -> GrammarMatcher:
    info = tokenizer_info if tokenizer_info is not None else _empty_tokenizer_info()
    compiler = GrammarCompiler(info, cache_enabled=False)
    compiled = compiler.compile_grammar(grammar)
    return GrammarMatcher(compiled, **kwargs)


def _is_grammar_accept_string(
    grammar: Union[Grammar, str],
    input_str: Union[str, bytes],
    *,
    debug_print: bool = False,
    print_time: bool = False,
    require_termination: bool = True,
) -> bool:
    """Whether the grammar accepts the whole string (or a prefix of a sentence when
    ``require_termination`` is False)."""
    matcher = _get_matcher_from_grammar(grammar)
    start = time.monotonic_ns()
    ok = matcher.accept_string(input_str)
    if print_time:
        print(f"accept_string: {(time.monotonic_ns() - start) / 1e3:.1f} us")
    if not ok:
        return False
    return matcher.is_terminated() if require_termination else True


def _to_numpy(bitmask: Any) -> np.ndarray:
    return bitmask.detach().cpu().numpy() if _is_torch(bitmask) else np.asarray(bitmask)


def bitmask_to_bool_mask(bit_mask: Any, vocab_size: Optional[int] = None) -> Any:
    """Bitmask rows to boolean rows (torch when given torch)."""
    arr = _to_numpy(bit_mask)
    bits = np.unpackbits(np.ascontiguousarray(arr.astype(np.int32)).view(np.uint8), axis=-1, bitorder="little").astype(bool)
    if vocab_size is not None:
        bits = bits[..., :vocab_size]
    if _is_torch(bit_mask):
        return _torch().from_numpy(bits)
    return bits


def bool_mask_to_bitmask(bool_mask: Any) -> Any:
    """Boolean rows to int32 bitmask rows, padding with ones."""
    arr = _to_numpy(bool_mask).astype(bool)
    pad = (-arr.shape[-1]) % 32
    if pad:
        arr = np.concatenate([arr, np.ones(arr.shape[:-1] + (pad,), dtype=bool)], axis=-1)
    packed = np.packbits(arr, axis=-1, bitorder="little").view(np.int32)
    if _is_torch(bool_mask):
        return _torch().from_numpy(packed.copy())
    return packed


def _get_masked_tokens_from_bitmask(bitmask: Any, vocab_size: int, index: int = 0) -> List[int]:
    """The rejected token ids of one row."""
    arr = _to_numpy(bitmask)
    row = arr.reshape(-1, arr.shape[-1])[index]
    allowed = bitmask_to_bool_mask(row, vocab_size)
    return [int(i) for i in np.flatnonzero(~np.asarray(allowed))]


def _is_single_token_bitmask(bitmask: Any, vocab_size: int, index: int = 0) -> Tuple[bool, int]:
    arr = _to_numpy(bitmask)
    row = arr.reshape(-1, arr.shape[-1])[index]
    allowed = np.flatnonzero(np.asarray(bitmask_to_bool_mask(row, vocab_size)))
    if len(allowed) == 1:
        return True, int(allowed[0])
    return False, -1
