"""Structural tags: XGrammar 0.2.8's JSON format for output that mixes free text with tagged regions
whose contents follow a schema (tool calls, reasoning blocks, channels).

A :class:`StructuralTag` is ``{"type": "structural_tag", "format": {...}}``; the format is a tree of
the models below, told apart by their ``type`` field. The models only describe; compiling a tag
(``Grammar.from_structural_tag``, ``GrammarCompiler.compile_structural_tag``) lowers the tree to
grammask EBNF in :mod:`grammask._structural_tag_lower` and parses that.

Requires pydantic v2 (``pip install grammask[pydantic]``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Literal, Optional, Tuple, Type, Union

from pydantic import BaseModel, Field

try:  # Python 3.9+
    from typing import Annotated
except ImportError:  # pragma: no cover
    from typing_extensions import Annotated

__all__ = [
    "AnyTextFormat",
    "AnyTokensFormat",
    "ConstStringFormat",
    "DispatchFormat",
    "ExcludeTokenFormat",
    "Format",
    "GrammarFormat",
    "JSONSchemaFormat",
    "OptionalFormat",
    "OrFormat",
    "PlusFormat",
    "QwenXMLParameterFormat",
    "RegexFormat",
    "RepeatFormat",
    "SequenceFormat",
    "StarFormat",
    "StructuralTag",
    "StructuralTagItem",
    "TagFormat",
    "TagsWithSeparatorFormat",
    "TokenDispatchFormat",
    "TokenFormat",
    "TokenTriggeredTagsFormat",
    "TriggeredTagsFormat",
]

_MAX_I32 = 2_147_483_647

JSONStyle = Literal[
    "json",
    "qwen_xml",
    "minimax_xml",
    "minimax_m3_xml",
    "deepseek_xml",
    "glm_xml",
    "cohere_xml",
    "kimi_k3_xml",
    "deepseek_v4_1_xml",
]
TokenRef = Union[int, str]


# ---- leaves ----


class ConstStringFormat(BaseModel):
    """Exactly ``value``."""

    type: Literal["const_string"] = "const_string"
    value: str


class JSONSchemaFormat(BaseModel):
    """A value valid against ``json_schema``, written as JSON (``style="json"``) or as one of the
    XML parameter layouts some models use for tool arguments."""

    type: Literal["json_schema"] = "json_schema"
    json_schema: Union[bool, Dict[str, Any]]
    style: JSONStyle = "json"
    any_order: bool = False
    max_whitespace_cnt: Optional[int] = None
    excludes: List[str] = []


class QwenXMLParameterFormat(BaseModel):
    """Deprecated spelling of ``JSONSchemaFormat(style="qwen_xml")``."""

    type: Literal["qwen_xml_parameter"] = "qwen_xml_parameter"
    json_schema: Union[bool, Dict[str, Any]]


class AnyTextFormat(BaseModel):
    """Free text that contains none of ``excludes``; inside a tag it stops at the tag's end."""

    type: Literal["any_text"] = "any_text"
    excludes: List[str] = []
    max_tokens: Optional[int] = Field(default=None, ge=0, le=_MAX_I32)
    max_chars: Optional[int] = Field(default=None, ge=0, le=_MAX_I32)


class TokenFormat(BaseModel):
    """One token, by id or by its text."""

    type: Literal["token"] = "token"
    token: TokenRef


class ExcludeTokenFormat(BaseModel):
    """Any one token outside ``exclude_tokens``."""

    type: Literal["exclude_token"] = "exclude_token"
    exclude_tokens: List[TokenRef] = []


class AnyTokensFormat(BaseModel):
    """Any tokens outside ``exclude_tokens``, at most ``max_tokens`` of them."""

    type: Literal["any_tokens"] = "any_tokens"
    exclude_tokens: List[TokenRef] = []
    max_tokens: Optional[int] = Field(default=None, ge=0, le=_MAX_I32)


class GrammarFormat(BaseModel):
    """Text of an EBNF grammar (root rule ``root``)."""

    type: Literal["grammar"] = "grammar"
    grammar: str


class RegexFormat(BaseModel):
    """Text fully matched by a regular expression."""

    type: Literal["regex"] = "regex"
    pattern: str


# ---- composition ----


class SequenceFormat(BaseModel):
    type: Literal["sequence"] = "sequence"
    elements: List["Format"]


class OrFormat(BaseModel):
    type: Literal["or"] = "or"
    elements: List["Format"]


class OptionalFormat(BaseModel):
    type: Literal["optional"] = "optional"
    content: "Format"


class PlusFormat(BaseModel):
    type: Literal["plus"] = "plus"
    content: "Format"


class StarFormat(BaseModel):
    type: Literal["star"] = "star"
    content: "Format"


class RepeatFormat(BaseModel):
    """``content`` between ``min`` and ``max`` times; ``max=-1`` means no upper bound."""

    type: Literal["repeat"] = "repeat"
    min: int
    max: int
    content: "Format"


# ---- tags and dispatch ----


class TagFormat(BaseModel):
    """``begin content end``; ``end`` may be one string, a choice of strings, or a token."""

    type: Literal["tag"] = "tag"
    begin: Union[str, TokenFormat]
    content: "Format"
    end: Union[str, List[str], TokenFormat]


class TriggeredTagsFormat(BaseModel):
    """Free text in which each trigger starts one of ``tags`` (the tags whose ``begin`` starts
    with that trigger); free text again after the tag's end."""

    type: Literal["triggered_tags"] = "triggered_tags"
    triggers: List[str]
    tags: List[TagFormat]
    at_least_one: bool = False
    stop_after_first: bool = False
    excludes: List[str] = []


class TokenTriggeredTagsFormat(BaseModel):
    type: Literal["token_triggered_tags"] = "token_triggered_tags"
    trigger_tokens: List[TokenRef]
    tags: List[TagFormat]
    exclude_tokens: List[TokenRef] = []
    at_least_one: bool = False
    stop_after_first: bool = False


class TagsWithSeparatorFormat(BaseModel):
    """Tags joined by ``separator`` and nothing else (zero tags allowed unless ``at_least_one``)."""

    type: Literal["tags_with_separator"] = "tags_with_separator"
    tags: List[TagFormat]
    separator: str
    at_least_one: bool = False
    stop_after_first: bool = False


class DispatchFormat(BaseModel):
    """Free text in which each pattern of ``rules`` must be followed by its format."""

    type: Literal["dispatch"] = "dispatch"
    rules: List[Tuple[str, "Format"]]
    loop: bool = True
    excludes: List[str] = []


class TokenDispatchFormat(BaseModel):
    type: Literal["token_dispatch"] = "token_dispatch"
    rules: List[Tuple[TokenRef, "Format"]]
    loop: bool = True
    exclude_tokens: List[TokenRef] = []


Format = Annotated[
    Union[
        AnyTextFormat,
        ConstStringFormat,
        JSONSchemaFormat,
        GrammarFormat,
        RegexFormat,
        QwenXMLParameterFormat,
        OrFormat,
        SequenceFormat,
        TagFormat,
        TriggeredTagsFormat,
        TokenTriggeredTagsFormat,
        TagsWithSeparatorFormat,
        OptionalFormat,
        PlusFormat,
        StarFormat,
        TokenFormat,
        ExcludeTokenFormat,
        AnyTokensFormat,
        RepeatFormat,
        DispatchFormat,
        TokenDispatchFormat,
    ],
    Field(discriminator="type"),
]

for _model in (
    SequenceFormat,
    OrFormat,
    OptionalFormat,
    PlusFormat,
    StarFormat,
    RepeatFormat,
    TagFormat,
    TriggeredTagsFormat,
    TokenTriggeredTagsFormat,
    TagsWithSeparatorFormat,
    DispatchFormat,
    TokenDispatchFormat,
):
    _model.model_rebuild()


class StructuralTagItem(BaseModel):
    """Deprecated legacy item: ``begin``, a JSON Schema (``schema``), ``end``."""

    begin: str
    schema_: Union[str, Type[BaseModel], Dict[str, Any]] = Field(alias="schema")
    end: str


def _schema_value(
    schema: Union[str, Type[BaseModel], Dict[str, Any]],
) -> Union[bool, Dict[str, Any]]:
    if isinstance(schema, str):
        return json.loads(schema)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return schema


class StructuralTag(BaseModel):
    """The top level: ``{"type": "structural_tag", "format": <Format>}`` (the OpenAI-style
    ``response_format`` of vLLM and SGLang)."""

    type: Literal["structural_tag"] = "structural_tag"
    format: Format

    @staticmethod
    def from_legacy_structural_tag(
        tags: List[StructuralTagItem], triggers: List[str]
    ) -> "StructuralTag":
        """The legacy ``(tags, triggers)`` form: each item becomes a JSON Schema tag of one
        ``triggered_tags`` format."""
        return StructuralTag(
            format=TriggeredTagsFormat(
                triggers=list(triggers),
                tags=[
                    TagFormat(
                        begin=t.begin,
                        content=JSONSchemaFormat(json_schema=_schema_value(t.schema_)),
                        end=t.end,
                    )
                    for t in tags
                ],
            )
        )

    @staticmethod
    def from_json(json_str: Union[str, Dict[str, Any]]) -> "StructuralTag":
        """Validate a JSON text or a dict (pydantic's ``ValidationError`` on a bad tree)."""
        if isinstance(json_str, str):
            return StructuralTag.model_validate_json(json_str)
        if isinstance(json_str, dict):
            return StructuralTag.model_validate(json_str)
        raise ValueError("Invalid JSON string or dictionary")
