"""XGrammar 0.1's names, kept working for code written against the first XGrammar API. Each one
emits a ``DeprecationWarning`` that names its current replacement.

========================================  =====================================================
0.1 name                                  current name
========================================  =====================================================
``BNFGrammar(ebnf)``                      ``Grammar.from_ebnf(ebnf)``
``BuiltinGrammar.json()``                 ``Grammar.builtin_json_grammar()``
``BuiltinGrammar.json_schema(schema)``    ``Grammar.from_json_schema(schema)``
``CachedGrammarCompiler(info)``           ``GrammarCompiler(info)``
``CompiledGrammar(info)``                 ``GrammarCompiler(info, cache_enabled=False)``
``CompiledGrammar(grammar, info)``        ``GrammarCompiler(info).compile_grammar(grammar)``
``GrammarMatcher.allocate_token_bitmask`` ``allocate_token_bitmask(batch_size, vocab_size)``
``GrammarMatcher.apply_token_bitmask_inplace``  ``apply_token_bitmask_inplace``
``GrammarMatcher.get_rejected_tokens_from_bitmask``  ``testing._get_masked_tokens_from_bitmask``
``matcher.vocab_size``                    ``compiled_grammar.tokenizer_info.vocab_size``
========================================  =====================================================

The module-level names are reached through ``grammask.BNFGrammar`` etc. (they are not in
``grammask.__all__``); the ``GrammarMatcher``/``CompiledGrammar`` ones are members of those classes.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, Optional, Tuple, Type, Union

from .compiler import CompiledGrammar, GrammarCompiler
from .grammar import Grammar
from .tokenizer_info import TokenizerInfo

__all__ = ["BNFGrammar", "BuiltinGrammar", "CachedGrammarCompiler"]


def deprecated(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that the 0.1 name ``old`` is deprecated in favour of ``new``."""
    warnings.warn(
        f"{old} is deprecated (XGrammar 0.1 API); use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class BNFGrammar:
    """Deprecated: ``BNFGrammar(ebnf_string, root_rule_name="root")`` returns
    ``Grammar.from_ebnf(ebnf_string, root_rule_name=root_rule_name)``."""

    def __new__(cls, ebnf_string: str, root_rule_name: str = "root") -> Grammar:  # type: ignore[misc]
        deprecated("BNFGrammar(...)", "Grammar.from_ebnf(...)")
        return Grammar.from_ebnf(ebnf_string, root_rule_name=root_rule_name)


class BuiltinGrammar:
    """Deprecated holder of the 0.1 builtin grammars: :meth:`json` and :meth:`json_schema`."""

    @staticmethod
    def json() -> Grammar:
        """Deprecated: ``Grammar.builtin_json_grammar()``."""
        deprecated("BuiltinGrammar.json()", "Grammar.builtin_json_grammar()")
        return Grammar.builtin_json_grammar()

    @staticmethod
    def json_schema(
        schema: Union[str, Dict[str, Any], Type[Any]],
        *,
        indent: Optional[int] = None,
        separators: Optional[Tuple[str, str]] = None,
        strict_mode: bool = True,
        **kwargs: Any,
    ) -> Grammar:
        """Deprecated: ``Grammar.from_json_schema(schema, ...)`` (a JSON string, a dict or a
        Pydantic model class)."""
        deprecated("BuiltinGrammar.json_schema(...)", "Grammar.from_json_schema(...)")
        return Grammar.from_json_schema(
            schema, indent=indent, separators=separators, strict_mode=strict_mode, **kwargs
        )


class CachedGrammarCompiler(GrammarCompiler):
    """Deprecated: a :class:`GrammarCompiler` (which caches). Also keeps the 0.1 method names
    ``compile_json_grammar`` and ``clear``."""

    def __init__(self, tokenizer_info: TokenizerInfo, max_threads: int = 8, **kwargs: Any) -> None:
        deprecated("CachedGrammarCompiler(...)", "GrammarCompiler(...)")
        super().__init__(tokenizer_info, max_threads=max_threads, **kwargs)

    def compile_json_grammar(self) -> CompiledGrammar:
        """Deprecated: :meth:`GrammarCompiler.compile_builtin_json_grammar`."""
        deprecated(
            "CachedGrammarCompiler.compile_json_grammar()",
            "GrammarCompiler.compile_builtin_json_grammar()",
        )
        return self.compile_builtin_json_grammar()

    def clear(self) -> None:
        """Deprecated: :meth:`GrammarCompiler.clear_cache`."""
        deprecated("CachedGrammarCompiler.clear()", "GrammarCompiler.clear_cache()")
        self.clear_cache()


def legacy_compiled_grammar(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """``CompiledGrammar(...)`` called the 0.1 way: with a TokenizerInfo (a no-cache compiler) or
    with a Grammar and a TokenizerInfo (a compiled grammar)."""
    first = args[0] if args else kwargs.get("grammar", kwargs.get("tokenizer_info"))
    if isinstance(first, TokenizerInfo):
        deprecated(
            "CompiledGrammar(tokenizer_info, ...)",
            "GrammarCompiler(tokenizer_info, cache_enabled=False)",
            4,
        )
        max_threads = args[1] if len(args) > 1 else kwargs.get("max_threads", 8)
        return GrammarCompiler(first, max_threads=max_threads, cache_enabled=False)
    deprecated(
        "CompiledGrammar(grammar, tokenizer_info)",
        "GrammarCompiler(tokenizer_info).compile_grammar(grammar)",
        4,
    )
    info = args[1] if len(args) > 1 else kwargs["tokenizer_info"]
    return GrammarCompiler(info, cache_enabled=False).compile_grammar(first)
