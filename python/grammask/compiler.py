"""``GrammarCompiler`` and ``CompiledGrammar``. Compiling builds the rule automata (cheap: masks
are computed lazily per parser state and cached inside the compiled grammar, shared by all its
matchers). The compiler caches compiled grammars by source and options; it is thread-safe and
releases the GIL while compiling."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type, Union

from . import _core
from .exception import DeserializeFormatError, UnsupportedFeatureError, _reraise_version
from .grammar import Grammar, _ebnf_either_dialect, schema_options, schema_to_str
from .tokenizer_info import TokenizerInfo

__all__ = ["CompiledGrammar", "GrammarCompiler"]


class CompiledGrammar:
    """A grammar compiled against a tokenizer's vocabulary. Immutable and shareable across threads.

    Made by the ``GrammarCompiler.compile_*`` methods (or :meth:`deserialize_json`), never
    constructed directly. Every :class:`~grammask.GrammarMatcher` made from it shares its token
    mask cache, which fills as parser states are first met.
    """

    _handle: _core.CompiledGrammar

    def __init__(self, handle: _core.CompiledGrammar) -> None:
        if not isinstance(handle, _core.CompiledGrammar):
            raise TypeError("CompiledGrammar is made by GrammarCompiler.compile_*")
        self._handle = handle

    @property
    def grammar(self) -> Grammar:
        """The grammar that was compiled."""
        return Grammar(self._handle.grammar)

    @property
    def tokenizer_info(self) -> TokenizerInfo:
        """The vocabulary the grammar was compiled for."""
        return TokenizerInfo._from_handle(self._handle.tokenizer_info)

    @property
    def memory_size_bytes(self) -> int:
        """Heap bytes of the grammar, its automata and its mask cache so far (the vocabulary's
        shared token index is not counted)."""
        return self._handle.memory_size_bytes

    def serialize_json(self) -> str:
        """The grammar and the tokenizer metadata (not the vocabulary) as JSON.

        Returns:
            JSON text that :meth:`deserialize_json` reads back with the same vocabulary.
        """
        return self._handle.serialize_json()

    @staticmethod
    def deserialize_json(json_string: str, tokenizer_info: TokenizerInfo) -> "CompiledGrammar":
        """Rebuild a compiled grammar from :meth:`serialize_json`'s text.

        Args:
            json_string: the serialized compiled grammar.
            tokenizer_info: the vocabulary it was compiled for; its metadata must match the
                serialized one.

        Raises:
            InvalidJSONError: the text is not JSON.
            DeserializeFormatError: the text is not a serialized compiled grammar, or the
                tokenizer metadata differs.
            DeserializeVersionError: it was written by an incompatible version of grammask.
        """
        try:
            return CompiledGrammar(_core.CompiledGrammar.deserialize_json(json_string, tokenizer_info._handle))
        except DeserializeFormatError as e:
            raise _reraise_version(e) from None


class GrammarCompiler:
    """Compiles grammars for one vocabulary, with a cache keyed by source and options.

    Compiling builds the rule automata; token masks are computed lazily while matching. The
    compiler is thread-safe and releases the GIL while compiling.

    Args:
        tokenizer_info: the vocabulary to compile for.
        max_threads: accepted for XGrammar compatibility; must be at least 1.
        cache_enabled: whether compiled grammars are cached (by source text and options).
        cache_limit_bytes: the cache's size bound in bytes (least recently used grammars are
            evicted); -1 means unlimited.

    Raises:
        ValueError: ``tokenizer_info`` is not a :class:`~grammask.TokenizerInfo`, or
            ``max_threads`` is below 1.
    """

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
        self._handle = _core.GrammarCompiler(tokenizer_info._handle, cache_enabled, cache_limit_bytes)

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
    ) -> CompiledGrammar:
        """Compile a JSON Schema: the output is a JSON document valid against it.

        Every keyword is enforced exactly or refused; see the JSON Schema guide for the options
        and docs/json_schema.md for the keyword coverage.

        Args:
            schema: JSON text, a dict (or bool), or a Pydantic v2 model class.
            any_whitespace: allow JSON whitespace around every token; when False, use exactly
                ``separators`` (and ``indent``).
            indent: with ``any_whitespace=False``, the layout of ``json.dumps(..., indent=n)``.
            separators: with ``any_whitespace=False``, the ``(item, key)`` separators; default
                ``(", ", ": ")``, or ``(",", ": ")`` with ``indent``.
            strict_mode: close objects that list ``properties`` without saying anything about
                ``additionalProperties`` (and arrays with ``prefixItems`` but no ``items``), as
                XGrammar does; False follows JSON Schema exactly.
            max_whitespace_cnt: with ``any_whitespace``, the longest whitespace run allowed.
            any_order: accept object keys in any order (implied by ``strict_mode=False``).

        Returns:
            The compiled grammar (from the cache when the same schema and options were compiled).

        Raises:
            InvalidJSONError: the schema text is not JSON.
            InvalidSchemaError: the schema is invalid or unsatisfiable.
            UnsupportedFeatureError: a keyword cannot be enforced exactly; the message names it
                and its JSON pointer.
            LimitExceededError: a size limit was exceeded (docs/limits.md).
        """
        return CompiledGrammar(
            self._handle.compile_json_schema(
                schema_to_str(schema),
                schema_options(any_whitespace, indent, separators, strict_mode, max_whitespace_cnt, any_order),
            )
        )

    def compile_builtin_json_grammar(self) -> CompiledGrammar:
        """Compile the builtin JSON grammar: any JSON object or array, without surrounding
        whitespace (see :meth:`Grammar.builtin_json_grammar`)."""
        return CompiledGrammar(self._handle.compile_builtin_json_grammar())

    def compile_regex(self, regex: str) -> CompiledGrammar:
        """Compile a regular expression; the whole output must match it.

        Args:
            regex: a pattern in the common subset of ECMA-262 and Python ``re`` syntax.

        Raises:
            GrammarSyntaxError: the pattern does not parse.
            UnsupportedFeatureError: the pattern uses backreferences, lookaround or syntax on
                which ECMA-262 and Python disagree.
            LimitExceededError: a size limit was exceeded (docs/limits.md).
        """
        return CompiledGrammar(self._handle.compile_regex(regex))

    def compile_grammar(self, grammar: Union[str, Grammar], *, root_rule_name: str = "root") -> CompiledGrammar:
        """Compile EBNF text (either dialect, as :meth:`Grammar.from_ebnf` reads it) or a
        :class:`Grammar`. Compiled grammars are cached by source.

        Args:
            grammar: EBNF text (GBNF ``name ::= expr``, or ISO ``name = expr .`` when the text
                has no ``::=``), or a :class:`Grammar`.
            root_rule_name: the start rule of EBNF text.

        Raises:
            GrammarSyntaxError: the text parses in neither dialect.
            InvalidGrammarError: the grammar is invalid (an undefined rule, no root rule).
            UnsupportedFeatureError: the text uses an unsupported macro or rule option.
            LimitExceededError: a size limit was exceeded (docs/limits.md).
            TypeError: ``grammar`` is neither a string nor a :class:`Grammar`.
        """
        if isinstance(grammar, str):
            if "::=" not in grammar:  # ISO EBNF, or a GBNF error worth both dialects' messages
                return CompiledGrammar(self._handle.compile_grammar(_ebnf_either_dialect(grammar, root_rule_name)))
            return CompiledGrammar(self._handle.compile_ebnf(grammar, root_rule_name))
        if isinstance(grammar, Grammar):
            return CompiledGrammar(self._handle.compile_grammar(grammar._handle))
        raise TypeError(f"grammar must be EBNF text or a Grammar, got {type(grammar).__name__}")

    def compile_structural_tag(self, *args: Any, **kwargs: Any) -> CompiledGrammar:
        """Compile a structural tag (XGrammar's API). Not supported yet.

        Raises:
            UnsupportedFeatureError: always, for now.
        """
        raise UnsupportedFeatureError("structural tags are not supported by grammask yet")

    def compile_lark(self, *args: Any, **kwargs: Any) -> CompiledGrammar:
        """Compile a Lark grammar (XGrammar's API). Not supported yet; use EBNF.

        Raises:
            UnsupportedFeatureError: always, for now.
        """
        raise UnsupportedFeatureError("Lark grammars are not supported by grammask yet; use EBNF")

    def clear_cache(self) -> None:
        """Drop every cached compiled grammar (grammars already returned stay valid)."""
        self._handle.clear_cache()

    def get_cache_size_bytes(self) -> int:
        """The approximate memory held by the cache of compiled grammars, in bytes."""
        return self._handle.get_cache_size_bytes()

    @property
    def cache_limit_bytes(self) -> int:
        """The cache's size bound in bytes; -1 means unlimited."""
        return self._handle.cache_limit_bytes
