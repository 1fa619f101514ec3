"""``Grammar``: the language a matcher enforces, built from EBNF, a regex, a JSON Schema or the
builtin JSON grammar. Parsing and conversion run in the Rust core with the GIL released."""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Tuple, Type, Union

from . import _core
from .exception import DeserializeFormatError, InvalidJSONError, UnsupportedFeatureError, _reraise_version

__all__ = ["Grammar", "schema_options", "schema_to_str"]


def schema_to_str(schema: Union[str, Dict[str, Any], bool, Type[Any]]) -> str:
    """A JSON Schema given as text, a dict/bool, or a Pydantic v2 model class, as JSON text."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, (dict, bool)):
        return json.dumps(schema)
    model_json_schema = getattr(schema, "model_json_schema", None)
    if callable(model_json_schema):
        return json.dumps(model_json_schema())
    raise TypeError(
        f"schema must be a JSON string, a dict or a Pydantic model class, got {type(schema).__name__}"
    )


class Grammar:
    """An immutable grammar. ``str(grammar)`` prints EBNF that :meth:`from_ebnf` parses back to the
    same language."""

    _handle: _core.Grammar

    def __init__(self, handle: _core.Grammar) -> None:
        if not isinstance(handle, _core.Grammar):
            raise TypeError("use Grammar.from_ebnf / from_json_schema / from_regex to build a Grammar")
        self._handle = handle

    def __str__(self) -> str:
        return self._handle.to_ebnf()

    def __repr__(self) -> str:
        return f"Grammar(<{self._handle.num_rules()} rules, root {self._handle.root_rule_name()!r}>)"

    def to_string(self) -> str:
        """The grammar as EBNF (same as ``str(grammar)``)."""
        return str(self)

    @staticmethod
    def from_ebnf(ebnf_string: str, *, root_rule_name: str = "root") -> "Grammar":
        """Parse EBNF: the XGrammar/GBNF dialect (``name ::= expr``), or the ISO dialect
        (``name = expr .``) when the text has no ``::=`` (see :meth:`from_iso_ebnf`).

        Raises:
            GrammarSyntaxError: the text parses in neither dialect; the message is the GBNF
                parser's, followed by the ISO parser's when the text has no ``::=``.
        """
        return Grammar(_ebnf_either_dialect(ebnf_string, root_rule_name))

    @staticmethod
    def from_iso_ebnf(ebnf_string: str, *, root_rule_name: str = "root") -> "Grammar":
        """Parse ISO-style EBNF (``name = expr .``, ``"a" … "z"``, ``[opt]``, ``{rep}``)."""
        return Grammar(_core.Grammar.from_iso_ebnf(ebnf_string, root_rule_name))

    @staticmethod
    def from_json_schema(
        schema: Union[str, Dict[str, Any], Type[Any]],
        *,
        any_whitespace: bool = True,
        indent: Optional[int] = None,
        separators: Optional[Tuple[str, str]] = None,
        strict_mode: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        print_converted_ebnf: bool = False,
        any_order: bool = False,
        spelling: str = "canonical",
        format_assertion: bool = True,
        schema_registry: Optional[Mapping[str, Any]] = None,
    ) -> "Grammar":
        """The grammar of JSON documents valid against ``schema``.

        ``spelling="canonical"`` (default) admits the spellings common serializers write (no ``\\u``
        escape of printable ASCII, integers without fraction or exponent, finite numbers, whitespace
        runs of at most ``DEFAULT_MAX_WHITESPACE_CNT`` unless ``max_whitespace_cnt`` is given);
        ``spelling="any"`` admits every JSON spelling (validate given text). ``format_assertion``
        (default ``True``) asserts ``format`` in every draft; ``False`` treats it as an annotation.
        ``schema_registry`` maps URIs to schema documents (text, dict or bool) that ``$ref`` may name
        besides the schema itself; nothing is fetched, another remote reference is an error.
        """
        text = schema_to_str(schema)
        opts = schema_options(
            any_whitespace,
            indent,
            separators,
            strict_mode,
            max_whitespace_cnt,
            any_order,
            spelling,
            format_assertion,
            schema_registry,
        )
        if print_converted_ebnf:
            print(_core.Grammar.json_schema_to_ebnf(text, opts))
        return Grammar(_core.Grammar.from_json_schema(text, opts))

    @staticmethod
    def from_regex(regex_string: str, *, print_converted_ebnf: bool = False) -> "Grammar":
        """The strings fully matched by an ECMA-262/Python-style regular expression."""
        if print_converted_ebnf:
            print(_core.Grammar.regex_to_ebnf(regex_string, "root"))
        return Grammar(_core.Grammar.from_regex(regex_string))

    @staticmethod
    def builtin_json_grammar(*, spelling: str = "canonical", max_whitespace_cnt: Optional[int] = None) -> "Grammar":
        """Any JSON object or array (no surrounding whitespace); ``spelling`` as in
        :meth:`from_json_schema` (``"any"``: exact ECMA-404 with unbounded whitespace)."""
        return Grammar(_core.Grammar.builtin_json_grammar(spelling, max_whitespace_cnt))

    @staticmethod
    def from_structural_tag(*args: Any, **kwargs: Any) -> "Grammar":
        """The grammar of a structural tag: ``from_structural_tag(tag)`` with a
        :class:`~grammask.structural_tag.StructuralTag`, its JSON text or dict, or the legacy
        ``from_structural_tag(tags, triggers)``. See docs/structural_tags.md."""
        from ._structural_tag_lower import structural_tag_ebnf

        return Grammar.from_ebnf(structural_tag_ebnf(args, kwargs))

    @staticmethod
    def from_lark(
        lark_string: str,
        *,
        tokenizer_info: Any = None,
        named_grammars: Optional[Dict[str, Any]] = None,
    ) -> "Grammar":
        """Parse a grammar in the Lark dialect of llguidance / XGrammar (root rule ``start``).

        ``tokenizer_info`` resolves special tokens named by their text (``<|eot_id|>``); token
        ids (``<[128000]>``, ``<[1-5]>``, ``<[^13]>``, ``<[*]>``) need none;
        ``named_grammars`` (``@name`` references) raises :class:`UnsupportedFeatureError`.
        See docs/lark.md for the coverage and semantics.
        """
        if named_grammars:
            raise UnsupportedFeatureError("named grammars (@name in Lark) are not supported")
        handle = getattr(tokenizer_info, "_handle", None) if tokenizer_info is not None else None
        return Grammar(_core.Grammar.from_lark(lark_string, handle))

    @staticmethod
    def concat(*grammars: "Grammar") -> "Grammar":
        """The concatenation of the grammars' languages."""
        return Grammar(_core.Grammar.concat([g._handle for g in grammars]))

    @staticmethod
    def union(*grammars: "Grammar") -> "Grammar":
        """The union of the grammars' languages."""
        return Grammar(_core.Grammar.union([g._handle for g in grammars]))

    def serialize_json(self) -> str:
        """The grammar as versioned JSON (see :func:`grammask.get_serialization_version`)."""
        return self._handle.serialize_json()

    @staticmethod
    def deserialize_json(json_string: str) -> "Grammar":
        """Rebuild from :meth:`serialize_json`. Input that is not JSON raises
        :class:`~grammask.DeserializeFormatError` (also an ``InvalidJSONError``), a missing or
        other version :class:`~grammask.DeserializeVersionError`."""
        try:
            return Grammar(_core.Grammar.deserialize_json(json_string))
        except (DeserializeFormatError, InvalidJSONError) as e:
            raise _reraise_version(e) from None


def _ebnf_either_dialect(text: str, root_rule_name: str) -> _core.Grammar:
    """Parses GBNF-style EBNF; text without ``::=`` that fails as GBNF is tried as ISO EBNF.

    The dialects cannot be confused: every GBNF rule contains ``::=``, which ISO EBNF never does.
    """
    from .exception import GrammarSyntaxError

    try:
        return _core.Grammar.from_ebnf(text, root_rule_name)
    except GrammarSyntaxError as gbnf_error:
        if "::=" in text:
            raise
        try:
            return _core.Grammar.from_iso_ebnf(text, root_rule_name)
        except GrammarSyntaxError as iso_error:
            raise GrammarSyntaxError(
                f"{gbnf_error}\n(the text has no '::=', so it was also read as ISO EBNF "
                f"`rule = expr .`, which failed too: {iso_error})"
            ) from None


def schema_options(
    any_whitespace: bool = True,
    indent: Optional[int] = None,
    separators: Optional[Tuple[str, str]] = None,
    strict_mode: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    any_order: bool = False,
    spelling: str = "canonical",
    format_assertion: bool = True,
    schema_registry: Optional[Mapping[str, Any]] = None,
) -> _core.JsonSchemaOptions:
    """The core's options object for the keyword arguments every JSON Schema entry point takes."""
    seps = None if separators is None else (str(separators[0]), str(separators[1]))
    registry = None
    if schema_registry is not None:
        registry = [(str(uri), schema_to_str(doc)) for uri, doc in schema_registry.items()]
    return _core.JsonSchemaOptions(
        any_whitespace, indent, seps, strict_mode, max_whitespace_cnt, any_order, spelling, format_assertion, registry
    )


#: Whitespace-run bound of canonical spelling when ``max_whitespace_cnt`` is not given.
DEFAULT_MAX_WHITESPACE_CNT = 64
