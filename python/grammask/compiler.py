"""``GrammarCompiler`` and ``CompiledGrammar``. Compiling builds the rule automata (cheap: masks
are computed lazily per parser state and cached inside the compiled grammar, shared by all its
matchers). The compiler caches compiled grammars by source and options; it is thread-safe and
releases the GIL while compiling."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple, Type, Union

from . import _core
from .exception import DeserializeFormatError, InvalidJSONError, UnsupportedFeatureError, _reraise_version
from .grammar import Grammar, _ebnf_either_dialect, schema_options, schema_to_str
from .tokenizer_info import TokenizerInfo

__all__ = ["CompiledGrammar", "GrammarCompiler"]


class CompiledGrammar:
    """A grammar compiled against a tokenizer. Immutable and shareable across threads."""

    _handle: _core.CompiledGrammar

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], (TokenizerInfo, Grammar)) or "tokenizer_info" in kwargs:
            # XGrammar 0.1: CompiledGrammar(tokenizer_info) was a no-cache compiler, and
            # CompiledGrammar(grammar, tokenizer_info) compiled. Deprecated; see grammask._legacy.
            from ._legacy import legacy_compiled_grammar

            return legacy_compiled_grammar(args, kwargs)
        return super().__new__(cls)

    def __init__(self, handle: _core.CompiledGrammar, *args: Any, **kwargs: Any) -> None:
        """Wraps a core handle; build compiled grammars with ``GrammarCompiler.compile_*``."""
        if getattr(self, "_handle", None) is not None:
            return  # made by the deprecated 0.1 form in __new__
        if args or kwargs:
            raise TypeError("CompiledGrammar is made by GrammarCompiler.compile_*")
        if not isinstance(handle, _core.CompiledGrammar):
            raise TypeError("CompiledGrammar is made by GrammarCompiler.compile_*")
        self._handle = handle

    @property
    def grammar(self) -> Grammar:
        """The grammar this was compiled from."""
        return Grammar(self._handle.grammar)

    @property
    def tokenizer_info(self) -> TokenizerInfo:
        """The vocabulary this was compiled for."""
        return TokenizerInfo._from_handle(self._handle.tokenizer_info)

    @property
    def memory_size_bytes(self) -> int:
        """Approximate bytes held (grammar, automata and the token masks cached so far)."""
        return self._handle.memory_size_bytes

    def serialize_json(self) -> str:
        """The grammar and the tokenizer metadata (not the vocabulary) as JSON."""
        return self._handle.serialize_json()

    @staticmethod
    def deserialize_json(json_string: str, tokenizer_info: TokenizerInfo) -> "CompiledGrammar":
        """Rebuild from :meth:`serialize_json` for ``tokenizer_info`` (whose metadata must match).
        Input that is not JSON raises :class:`~grammask.DeserializeFormatError` (also an
        ``InvalidJSONError``), a missing or other version :class:`~grammask.DeserializeVersionError`."""
        try:
            return CompiledGrammar(_core.CompiledGrammar.deserialize_json(json_string, tokenizer_info._handle))
        except (DeserializeFormatError, InvalidJSONError) as e:
            raise _reraise_version(e) from None


class GrammarCompiler:
    """Compiles grammars for one tokenizer, with a cache keyed by source and options.
    One compile runs on at most ``max_threads`` threads, the calling one included (rule automata
    are built in parallel, on up to 4 threads where the machine has them)."""

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        *,
        max_threads: int = 8,
        cache_enabled: bool = True,
        cache_limit_bytes: int = -1,
    ) -> None:
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise ValueError("Please convert the tokenizer to TokenizerInfo before passing it to GrammarCompiler.")
        if max_threads < 1:
            raise ValueError(f"max_threads must be >= 1, got {max_threads}")
        self.tokenizer_info = tokenizer_info
        self.max_threads = max_threads
        self._handle = _core.GrammarCompiler(tokenizer_info._handle, cache_enabled, cache_limit_bytes, max_threads)

    def compile_json_schema(
        self,
        schema: Union[str, Dict[str, Any], Type[Any]],
        *,
        any_whitespace: bool = True,
        indent: Optional[int] = None,
        separators: Optional[Tuple[str, str]] = None,
        strict_mode: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        any_order: bool = False,
        spelling: str = "canonical",
        format_assertion: bool = True,
        schema_registry: Optional[Mapping[str, Any]] = None,
    ) -> CompiledGrammar:
        """Compile the grammar of JSON documents valid against ``schema`` (text, dict or Pydantic
        model class); the options are :meth:`Grammar.from_json_schema`'s."""
        return CompiledGrammar(
            self._handle.compile_json_schema(
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
        )

    def compile_builtin_json_grammar(
        self, *, spelling: str = "canonical", max_whitespace_cnt: Optional[int] = None
    ) -> CompiledGrammar:
        """Any JSON object or array; ``spelling`` as in :meth:`Grammar.from_json_schema`."""
        return CompiledGrammar(self._handle.compile_builtin_json_grammar(spelling, max_whitespace_cnt))

    def compile_regex(self, regex: str) -> CompiledGrammar:
        """Compile :meth:`Grammar.from_regex`."""
        return CompiledGrammar(self._handle.compile_regex(regex))

    def compile_grammar(self, grammar: Union[str, Grammar], *, root_rule_name: str = "root") -> CompiledGrammar:
        """Compile EBNF text (either dialect, as :meth:`Grammar.from_ebnf` reads it) or a
        :class:`Grammar`. Compiled grammars are cached by source."""
        if isinstance(grammar, str):
            if "::=" not in grammar:  # ISO EBNF, or a GBNF error worth both dialects' messages
                return CompiledGrammar(self._handle.compile_grammar(_ebnf_either_dialect(grammar, root_rule_name)))
            return CompiledGrammar(self._handle.compile_ebnf(grammar, root_rule_name))
        if isinstance(grammar, Grammar):
            return CompiledGrammar(self._handle.compile_grammar(grammar._handle))
        raise TypeError(f"grammar must be EBNF text or a Grammar, got {type(grammar).__name__}")

    def compile_structural_tag(self, *args: Any, **kwargs: Any) -> CompiledGrammar:
        """Compile a structural tag (a model, JSON text or dict), or the legacy ``(tags,
        triggers)``; see :meth:`Grammar.from_structural_tag`."""
        from ._structural_tag_lower import structural_tag_ebnf

        ebnf = structural_tag_ebnf(args, kwargs, self.tokenizer_info)
        return CompiledGrammar(self._handle.compile_ebnf(ebnf, "root"))

    def compile_lark(self, lark_string: str, *, named_grammars: Optional[Dict[str, Any]] = None) -> CompiledGrammar:
        """Compile a Lark grammar (see :meth:`Grammar.from_lark`); cached by its text."""
        if named_grammars:
            raise UnsupportedFeatureError("named grammars (@name in Lark) are not supported")
        return CompiledGrammar(self._handle.compile_lark(lark_string))

    def clear_cache(self) -> None:
        """Drop every cached compiled grammar."""
        self._handle.clear_cache()

    def get_cache_size_bytes(self) -> int:
        """Approximate bytes held by the cache."""
        return self._handle.get_cache_size_bytes()

    def get_vocabulary_memory_bytes(self) -> Dict[str, int]:
        """Bytes held by the vocabulary's token index, per part, and their ``"total"`` (grammask
        only). The index (vocabulary, token trie, slices, run indexes, shared kernels) is built
        once per vocabulary and shared by its compilers and compiled grammars, so it is in no
        grammar's ``memory_size_bytes``; its lazily built parts grow with use, within fixed
        per-vocabulary budgets."""
        parts = dict(self._handle.get_vocabulary_memory_parts())
        parts["total"] = sum(parts.values())
        return parts

    @property
    def cache_limit_bytes(self) -> int:
        """The cache's size limit in bytes (-1: unlimited)."""
        return self._handle.cache_limit_bytes
