"""Helpers for tests and debugging, matching ``xgrammar.testing``.

Every name XGrammar 0.2.8's ``testing`` module defines exists here. The ones that expose
XGrammar's internals (its per-rule FSMs, its grammar passes) raise
:class:`~grammask.UnsupportedFeatureError` naming what to use instead, so code that imports them
keeps importing."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _core, _range_regex
from .bitmask import _is_torch, _torch
from .compiler import CompiledGrammar, GrammarCompiler
from .grammar import Grammar, schema_options, schema_to_str
from .exception import UnsupportedFeatureError
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
    "_traverse_draft_tree",
    "_is_rule_fsm_accept_string",
    "_get_allow_empty_rule_ids",
    "_generate_range_regex",
    "_generate_float_regex",
    "_print_grammar_fsms",
    "GrammarFunctor",
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
    schema_registry: Optional[Mapping[str, Any]] = None,
) -> str:
    """The EBNF text a JSON Schema converts to (only ``json_format="json"``)."""
    if json_format != "json":
        from .exception import UnsupportedFeatureError

        raise UnsupportedFeatureError(f"json_format={json_format!r} is not supported; only 'json'")
    return _core.Grammar.json_schema_to_ebnf(
        schema_to_str(schema),
        schema_options(
            any_whitespace,
            indent,
            separators,
            strict_mode,
            max_whitespace_cnt,
            any_order,
            spelling,
            format_assertion,
            schema_registry,
        ),
    )


def _regex_to_ebnf(regex: str, with_rule_name: bool = True) -> str:
    """The EBNF a regex converts to: a ``root ::= ...`` rule, or just its body."""
    text = _core.Grammar.regex_to_ebnf(regex, "root")
    if with_rule_name:
        return text
    first = text.split("\n", 1)[0]
    return first.split("::=", 1)[1].strip() if "::=" in first else text


def _ebnf_to_grammar_no_normalization(ebnf_string: str, root_rule_name: str = "root") -> Grammar:
    """Parse EBNF (grammask has no separate normalization pass: same as ``Grammar.from_ebnf``)."""
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
    """A matcher of ``grammar`` over ``tokenizer_info`` (an empty vocabulary when None), compiled
    without the cache; ``kwargs`` go to :class:`GrammarMatcher`."""
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
    """``(True, id)`` when row ``index`` allows exactly one token, else ``(False, -1)``."""
    arr = _to_numpy(bitmask)
    row = arr.reshape(-1, arr.shape[-1])[index]
    allowed = np.flatnonzero(np.asarray(bitmask_to_bool_mask(row, vocab_size)))
    if len(allowed) == 1:
        return True, int(allowed[0])
    return False, -1


def _traverse_draft_tree(
    retrieve_next_token: Any,
    retrieve_next_sibling: Any,
    draft_tokens: Any,
    matcher: GrammarMatcher,
    allocate_token_bitmask: Any,
    time_threshold: float = -1.0,
) -> bool:
    """Legacy wrapper of :meth:`GrammarMatcher.traverse_draft_tree` (argument order of XGrammar's
    old helper); use the method in new code."""
    return matcher.traverse_draft_tree(
        retrieve_next_token, retrieve_next_sibling, draft_tokens, allocate_token_bitmask, time_threshold
    )


def _unsupported(what: str, instead: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(f"{what} is an XGrammar internal that grammask does not have; {instead}")


def _is_rule_fsm_accept_string(grammar: Grammar, rule_id: int, input_str: str) -> bool:
    """XGrammar's per-rule FSM check; raises :class:`UnsupportedFeatureError` (grammask has no
    per-rule FSMs by rule id). Use :func:`_is_grammar_accept_string` on a grammar whose root is
    that rule."""
    raise _unsupported(
        "testing._is_rule_fsm_accept_string",
        "use testing._is_grammar_accept_string(Grammar.from_ebnf(text, root_rule_name=rule), s)",
    )


def _get_allow_empty_rule_ids(compiled_grammar: CompiledGrammar) -> List[int]:
    """XGrammar's nullable-rule ids; raises :class:`UnsupportedFeatureError`. Use
    ``_is_grammar_accept_string(grammar, "")`` to ask whether a grammar accepts the empty string."""
    raise _unsupported(
        "testing._get_allow_empty_rule_ids", 'use testing._is_grammar_accept_string(grammar, "")'
    )


def _generate_range_regex(start: Optional[int] = None, end: Optional[int] = None) -> str:
    """A regex (``^...$``) for the integers in ``[start, end]``: the language of XGrammar's
    ``_generate_range_regex``, spelled grammask's way (see ``grammask._range_regex``)."""
    return _range_regex.generate_range_regex(start, end)


def _generate_float_regex(
    start: Optional[float] = None,
    end: Optional[float] = None,
    exclusive_start: bool = False,
    exclusive_end: bool = False,
) -> str:
    """A regex (``^...$``) for the decimal numbers (up to 6 fraction digits) in the range: the
    language of XGrammar's ``_generate_float_regex``, spelled grammask's way."""
    return _range_regex.generate_float_regex(start, end, exclusive_start, exclusive_end)


def _print_grammar_fsms(grammar: Grammar) -> str:
    """XGrammar's FSM printer; raises :class:`UnsupportedFeatureError`. Use ``str(grammar)`` for
    the EBNF grammask compiles."""
    raise _unsupported("testing._print_grammar_fsms", "use str(grammar) to print the grammar as EBNF")


class GrammarFunctor:
    """XGrammar's grammar passes, exposed for its own tests. grammask's passes run inside
    ``GrammarCompiler`` and are not separable: each static method raises
    :class:`UnsupportedFeatureError`."""

    @staticmethod
    def _raise(name: str) -> "Grammar":
        raise _unsupported(
            f"testing.GrammarFunctor.{name}",
            "grammask applies its passes when compiling; use Grammar.from_ebnf and str(grammar)",
        )

    @staticmethod
    def structure_normalizer(grammar: Grammar) -> Grammar:
        """Unsupported (XGrammar internal pass)."""
        return GrammarFunctor._raise("structure_normalizer")

    @staticmethod
    def rule_inliner(grammar: Grammar) -> Grammar:
        """Unsupported (XGrammar internal pass)."""
        return GrammarFunctor._raise("rule_inliner")

    @staticmethod
    def byte_string_fuser(grammar: Grammar) -> Grammar:
        """Unsupported (XGrammar internal pass)."""
        return GrammarFunctor._raise("byte_string_fuser")

    @staticmethod
    def dead_code_eliminator(grammar: Grammar) -> Grammar:
        """Unsupported (XGrammar internal pass)."""
        return GrammarFunctor._raise("dead_code_eliminator")

    @staticmethod
    def lookahead_assertion_analyzer(grammar: Grammar) -> Grammar:
        """Unsupported (XGrammar internal pass)."""
        return GrammarFunctor._raise("lookahead_assertion_analyzer")

    @staticmethod
    def grammar_optimizer(grammar: Grammar) -> Grammar:
        """Unsupported (XGrammar internal pass)."""
        return GrammarFunctor._raise("grammar_optimizer")

    @staticmethod
    def fsm_builder(grammar: Grammar) -> Grammar:
        """Unsupported (XGrammar internal pass)."""
        return GrammarFunctor._raise("fsm_builder")

    @staticmethod
    def repetition_normalizer(grammar: Grammar) -> Grammar:
        """Unsupported (XGrammar internal pass)."""
        return GrammarFunctor._raise("repetition_normalizer")


# Names XGrammar's testing module re-exports (with Grammar, GrammarMatcher, ... above), so that
# `from xgrammar.testing import _convert_schema_to_str, bitmask_dtype` works unchanged.
_convert_schema_to_str = schema_to_str


def __getattr__(name: str) -> Any:
    if name == "bitmask_dtype":  # grammask.bitmask_dtype: torch is imported on first use
        from . import bitmask_dtype

        return bitmask_dtype
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
