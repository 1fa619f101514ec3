"""OpenAI Chat Completions tool and tool-choice parameters, as pydantic models (the shapes
``get_model_structural_tag`` accepts; the same names and fields as ``xgrammar.openai_tool_call_schema``).

Function tools: ``{"type": "function", "function": {"name", "description", "parameters", "strict"}}``.
Builtin (server) tools: ``{"type": <provider type>, "name": <output name>, "parameters": <schema>}``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel

__all__ = [
    "AllowedToolChoiceParam",
    "AllowedToolRef",
    "AllowedToolsParam",
    "BuiltinToolChoiceParam",
    "BuiltinToolParam",
    "FunctionDefinition",
    "FunctionToolParam",
    "NamedToolChoiceFunction",
    "NamedToolChoiceParam",
    "ToolChoiceOptionParam",
    "ToolParam",
]


class FunctionDefinition(BaseModel):
    name: str
    description: Optional[str] = None
    parameters: Optional[Dict[str, Any]] = None  # None: unconstrained JSON arguments
    strict: Optional[bool] = None  # False: the parameters schema is not enforced


class FunctionToolParam(BaseModel):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class BuiltinToolParam(BaseModel):
    type: str
    name: Optional[str] = None  # the name written in the output; defaults to ``type``
    parameters: Optional[Dict[str, Any]] = None


ToolParam = Union[FunctionToolParam, BuiltinToolParam]


class NamedToolChoiceFunction(BaseModel):
    name: str


class NamedToolChoiceParam(BaseModel):
    type: Literal["function"] = "function"
    function: NamedToolChoiceFunction


class BuiltinToolChoiceParam(BaseModel):
    type: str
    name: Optional[str] = None


class AllowedToolRef(BaseModel):
    type: str
    function: Optional[NamedToolChoiceFunction] = None
    name: Optional[str] = None


class AllowedToolsParam(BaseModel):
    mode: Literal["auto", "required"]
    tools: List[AllowedToolRef]


class AllowedToolChoiceParam(BaseModel):
    type: Literal["allowed_tools"] = "allowed_tools"
    allowed_tools: AllowedToolsParam


ToolChoiceOptionParam = Union[
    Literal["none", "auto", "required"],
    NamedToolChoiceParam,
    AllowedToolChoiceParam,
    BuiltinToolChoiceParam,
]
