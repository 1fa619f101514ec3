"""Tool calling: structural tags for the output formats of known model families.

``get_model_structural_tag(model, tools, tool_choice, reasoning, ...)`` returns a
:class:`~grammask.structural_tag.StructuralTag` (XGrammar 0.2.8's API, used by vLLM and SGLang) that
an engine compiles with ``GrammarCompiler.compile_structural_tag``. Each model family is described
by a small spec (the strings around a call, how calls are grouped, the reasoning block) and built by
one of three shapes: calls in free text (``flat``), calls inside a section (``section``), and
Harmony's channels; Kimi-K3, MiniMax M3 and Cohere have a builder each.

Differences from XGrammar, on purpose: tool-argument whitespace is bounded by default
(``DEFAULT_MAX_WHITESPACE_CNT`` characters per run when ``max_whitespace_cnt`` is None), so a
tool-call region can always end, including for a tool with no parameters in an XML style.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Union

from pydantic import TypeAdapter

from .openai_tool_call_schema import (
    AllowedToolChoiceParam,
    BuiltinToolChoiceParam,
    BuiltinToolParam,
    FunctionDefinition,
    FunctionToolParam,
    NamedToolChoiceParam,
    ToolChoiceOptionParam,
    ToolParam,
)
from .structural_tag import (
    AnyTextFormat,
    ConstStringFormat,
    JSONSchemaFormat,
    OptionalFormat,
    OrFormat,
    RegexFormat,
    SequenceFormat,
    StructuralTag,
    TagFormat,
    TagsWithSeparatorFormat,
    TriggeredTagsFormat,
)

__all__ = [
    "DEFAULT_MAX_WHITESPACE_CNT",
    "get_builtin_structural_tag",
    "get_model_structural_tag",
    "normalize_tool_choice",
    "register_model_structural_tag",
    "supported_models",
]

#: Whitespace bound applied to tool arguments when the caller gives none.
DEFAULT_MAX_WHITESPACE_CNT = 16

Choice = Literal["auto", "required", "forced"]
Reasoning = Literal["enabled", "disabled", "auto"]
_registry: Dict[str, Callable[..., StructuralTag]] = {}
_TOOLS = TypeAdapter(ToolParam)
_CHOICE = TypeAdapter(ToolChoiceOptionParam)
THINK = ("<think>", "</think>")


def register_model_structural_tag(
    name: str,
) -> Callable[[Callable[..., StructuralTag]], Callable[..., StructuralTag]]:
    """Decorator: register a builder ``f(tools, builtin_tools, tool_choice, reasoning, **options)``
    under ``name`` for :func:`get_model_structural_tag`."""

    def deco(fn: Callable[..., StructuralTag]) -> Callable[..., StructuralTag]:
        _registry[name] = fn
        return fn

    return deco


def supported_models() -> List[str]:
    return list(_registry)


def normalize_tool_choice(
    tools: Optional[List[Union[ToolParam, dict]]] = None,
    tool_choice: Union[ToolChoiceOptionParam, dict, None] = "auto",
) -> Tuple[List[FunctionToolParam], List[BuiltinToolParam], Choice]:
    """``(function_tools, builtin_tools, "auto" | "required" | "forced")`` for a builder.

    "none" empties the tool lists (text only); a named function or builtin type keeps that one tool
    ("forced"); ``allowed_tools`` keeps the listed tools under its mode. Raises ``ValueError`` when
    a named tool is missing, "required" has no tool, or "forced" does not resolve to one tool."""
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise ValueError("The 'tools' argument must be a list.")
    parsed = [
        t if isinstance(t, (FunctionToolParam, BuiltinToolParam)) else _TOOLS.validate_python(t)
        for t in tools
    ]
    funcs = [t for t in parsed if isinstance(t, FunctionToolParam)]
    builtins = [t for t in parsed if isinstance(t, BuiltinToolParam)]
    choice_obj = "auto" if tool_choice is None else _CHOICE.validate_python(tool_choice)
    choice: Choice
    if isinstance(choice_obj, AllowedToolChoiceParam):
        names, types = set(), set()
        for ref in choice_obj.allowed_tools.tools:
            if ref.type == "function":
                if ref.function is None:
                    raise ValueError("Allowed function tool references must include 'function'.")
                names.add(ref.function.name)
            else:
                types.add(ref.type)
        missing = names - {t.function.name for t in funcs}
        if missing:
            raise ValueError(f"Allowed function tools are not found in the tools list: {missing}.")
        builtins = [t for t in builtins if t.type in types]
        missing_types = types - {t.type for t in builtins}
        if missing_types:
            raise ValueError(
                f"Allowed builtin tools are not found in the tools list: {missing_types}."
            )
        funcs = [t for t in funcs if t.function.name in names]
        choice = choice_obj.allowed_tools.mode
    elif isinstance(choice_obj, NamedToolChoiceParam):
        funcs = [t for t in funcs if t.function.name == choice_obj.function.name]
        if not funcs:
            raise ValueError(
                f"The tool with name '{choice_obj.function.name}' is not found in the tools list."
            )
        builtins, choice = [], "forced"
    elif isinstance(choice_obj, BuiltinToolChoiceParam):
        builtins = [t for t in builtins if t.type == choice_obj.type]
        if len(builtins) != 1:
            raise ValueError(
                f"Builtin tool choice must match exactly one builtin tool, got {len(builtins)} matches."
            )
        funcs, choice = [], "forced"
    elif choice_obj == "none":
        funcs, builtins, choice = [], [], "auto"
    else:
        choice = choice_obj  # "auto" | "required"
    if choice == "required" and not funcs and not builtins:
        raise ValueError(
            "The 'tools' list is empty, which is not allowed when 'tool_choice' is 'required'."
        )
    if choice == "forced" and len(funcs) + len(builtins) != 1:
        raise ValueError("Forced tool choice must resolve to exactly one tool.")
    return funcs, builtins, choice


def get_model_structural_tag(
    model: str,
    tools: Optional[List[Union[ToolParam, dict]]] = None,
    tool_choice: Union[ToolChoiceOptionParam, dict, None] = "auto",
    reasoning: Union[bool, Reasoning] = "enabled",
    force_reasoning: bool = False,
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
) -> StructuralTag:
    """The structural tag of ``model``'s reasoning and tool-call format for these tools.

    ``tool_choice``: "auto" (text or calls), "none" (text only), "required" (at least one call),
    ``{"type": "function", "function": {"name": ...}}`` (that call), a builtin type, or
    ``allowed_tools``. ``reasoning``: "enabled" (the prompt opened the reasoning block), "auto"
    (optional block), "disabled". ``parallel_tool_calls=False`` allows at most one call.
    ``max_whitespace_cnt=None`` bounds whitespace runs in arguments to
    ``DEFAULT_MAX_WHITESPACE_CNT``. An unknown model raises ``ValueError``."""
    fn = _registry.get(model)
    if fn is None:
        raise ValueError(f"Unknown format type: {model}, supported types: {list(_registry)}")
    funcs, builtins, choice = normalize_tool_choice(tools, tool_choice)
    if isinstance(reasoning, bool):
        mode: Reasoning = "enabled" if reasoning else "disabled"
    elif reasoning in ("enabled", "disabled", "auto"):
        mode = reasoning
    else:
        raise ValueError(
            "The 'reasoning' argument must be a bool or one of: 'enabled', 'disabled', 'auto'."
        )
    if not isinstance(parallel_tool_calls, bool):
        raise ValueError("The 'parallel_tool_calls' argument must be a bool.")
    return fn(
        funcs,
        builtins,
        choice,
        mode,
        any_order=any_order,
        exclude_special_tokens=exclude_special_tokens,
        max_whitespace_cnt=max_whitespace_cnt,
        parallel_tool_calls=parallel_tool_calls,
    )


#: Deprecated alias (as in XGrammar).
get_builtin_structural_tag = get_model_structural_tag


# ---------- shared pieces ----------


def _schema(fn: Union[FunctionDefinition, BuiltinToolParam]) -> Union[bool, Dict[str, Any]]:
    """The argument schema: unconstrained JSON when absent or when ``strict`` is False."""
    if isinstance(fn, FunctionDefinition) and fn.strict is False:
        return True
    return True if fn.parameters is None else fn.parameters


@dataclass
class _Opts:
    any_order: bool = False
    exclude_special_tokens: bool = True
    max_whitespace_cnt: Optional[int] = None
    parallel_tool_calls: bool = True

    def args(
        self, fn: Union[FunctionDefinition, BuiltinToolParam], style: str = "json"
    ) -> JSONSchemaFormat:
        ws = (
            DEFAULT_MAX_WHITESPACE_CNT
            if self.max_whitespace_cnt is None
            else self.max_whitespace_cnt
        )
        return JSONSchemaFormat(
            json_schema=_schema(fn), style=style, any_order=self.any_order, max_whitespace_cnt=ws
        )

    def excl(self, tokens: Any) -> List[str]:
        return list(tokens) if self.exclude_special_tokens else []


@dataclass
class _Reasoning:
    """A leading ``<think>...</think>`` block."""

    begin: str = "<think>"
    end: str = "</think>"
    suffix: str = ""
    excludes: Tuple[str, ...] = THINK
    prompt_opens_block: bool = True  # in "enabled" mode the prompt ends with the opener
    exclude_when_enabled: bool = True  # False: the block may hold the think markers in "enabled"

    def prefix(self, mode: Reasoning, o: _Opts) -> Any:
        if mode == "disabled":
            return None
        begin = "" if mode == "enabled" and self.prompt_opens_block else self.begin
        excl = self.excludes if (mode != "enabled" or self.exclude_when_enabled) else ()
        block: Any = TagFormat(
            begin=begin, content=AnyTextFormat(excludes=o.excl(excl)), end=self.end
        )
        if self.suffix:
            block = SequenceFormat(elements=[block, ConstStringFormat(value=self.suffix)])
        return OptionalFormat(content=block) if mode == "auto" else block


def _assemble(prefix: Any, body: Any) -> StructuralTag:
    return StructuralTag(format=body if prefix is None else SequenceFormat(elements=[prefix, body]))


@dataclass
class _Flat:
    """Calls written straight into free text: ``call_begin(name) args call_end``; a trigger starts
    each call."""

    begin: Callable[[str], str]
    end: str
    trigger: str
    text_excludes: Tuple[str, ...] = THINK
    style: str = "json"
    reasoning: Optional[_Reasoning] = None
    no_tool_excludes: Optional[Tuple[str, ...]] = None

    def build(
        self,
        funcs: List[FunctionToolParam],
        builtins: List[BuiltinToolParam],
        choice: Choice,
        mode: Reasoning,
        **kw: Any,
    ) -> StructuralTag:
        o = _Opts(**kw)
        tags = [
            TagFormat(
                begin=self.begin(t.function.name),
                content=o.args(t.function, self.style),
                end=self.end,
            )
            for t in funcs
        ]
        if choice == "forced":
            if not tags:
                raise ValueError("Forced tool choice must resolve to exactly one tool.")
            body: Any = tags[0]
        elif tags:
            body = TriggeredTagsFormat(
                triggers=[self.trigger],
                tags=tags,
                excludes=o.excl(self.text_excludes),
                at_least_one=choice == "required",
                stop_after_first=not o.parallel_tool_calls,
            )
        else:
            body = AnyTextFormat(excludes=o.excl(self.no_tool_excludes or self.text_excludes))
        return _assemble(self.reasoning.prefix(mode, o) if self.reasoning else None, body)


@dataclass
class _Section:
    """Calls grouped in a section: ``section_begin call (sep call)* section_end`` in free text."""

    section_begin: str
    section_end: str
    call: Callable[[str, _Opts, FunctionDefinition], TagFormat]
    separator: str = ""
    text_excludes: Tuple[str, ...] = THINK
    reasoning: Optional[_Reasoning] = field(default_factory=_Reasoning)
    # Forced call: one tag whose begin/end include the section markers (DeepSeek) or the markers
    # as separate strings around the call (Kimi); "required" likewise a tag or a sequence.
    merge_forced: bool = True

    def build(
        self,
        funcs: List[FunctionToolParam],
        builtins: List[BuiltinToolParam],
        choice: Choice,
        mode: Reasoning,
        **kw: Any,
    ) -> StructuralTag:
        o = _Opts(**kw)
        tags = [self.call(t.function.name, o, t.function) for t in funcs]
        one = not o.parallel_tool_calls
        if choice == "forced":
            if not tags:
                raise ValueError("Forced tool choice must resolve to exactly one tool.")
            call = tags[0]
            if self.merge_forced:
                body: Any = TagFormat(
                    begin=self.section_begin + call.begin,
                    content=call.content,
                    end=call.end + self.section_end,
                )
            else:
                body = SequenceFormat(
                    elements=[
                        ConstStringFormat(value=self.section_begin),
                        call,
                        ConstStringFormat(value=self.section_end),
                    ]
                )
        elif tags:
            calls = TagsWithSeparatorFormat(
                tags=tags, separator=self.separator, at_least_one=True, stop_after_first=one
            )
            section = TagFormat(begin=self.section_begin, content=calls, end=self.section_end)
            if choice == "required" and self.merge_forced:
                body = section
            elif choice == "required":
                body = SequenceFormat(
                    elements=[
                        ConstStringFormat(value=self.section_begin),
                        calls,
                        ConstStringFormat(value=self.section_end),
                    ]
                )
            else:
                body = TriggeredTagsFormat(
                    triggers=[self.section_begin],
                    tags=[section],
                    excludes=o.excl(self.text_excludes),
                    stop_after_first=one,
                )
        else:
            body = AnyTextFormat(excludes=o.excl(THINK))
        return _assemble(self.reasoning.prefix(mode, o) if self.reasoning else None, body)


@dataclass
class _Invoke:
    """``<invoke name="f">`` calls in an XML argument style, grouped in a function-calls block
    (DeepSeek-V3.2, MiniMax). Forced and required calls start with ``lead`` + the block opener."""

    invoke_begin: Callable[[str], str]
    invoke_end: str
    block_begin: str
    block_end: str
    trigger: str
    lead: str
    style: str
    reasoning: _Reasoning = field(default_factory=_Reasoning)
    disabled_prefix: Tuple[str, ...] = ()  # constants written instead of reasoning when disabled
    no_tool_excludes_trigger: bool = False  # DeepSeek-V4.1: text without tools may not open a block

    def build(
        self,
        funcs: List[FunctionToolParam],
        builtins: List[BuiltinToolParam],
        choice: Choice,
        mode: Reasoning,
        **kw: Any,
    ) -> StructuralTag:
        o = _Opts(**kw)
        tags = [
            TagFormat(
                begin=self.invoke_begin(t.function.name),
                content=o.args(t.function, self.style),
                end=self.invoke_end,
            )
            for t in funcs
        ]
        one = not o.parallel_tool_calls
        if choice == "forced":
            if not tags:
                raise ValueError("Forced tool choice must resolve to exactly one tool.")
            body: Any = SequenceFormat(
                elements=[
                    ConstStringFormat(value=self.lead + self.block_begin),
                    tags[0],
                    ConstStringFormat(value=self.block_end),
                ]
            )
        elif not tags:
            excludes = o.excl(THINK) + ([self.trigger] if self.no_tool_excludes_trigger else [])
            body = AnyTextFormat(excludes=excludes)
        else:
            calls = TagsWithSeparatorFormat(
                tags=tags, separator="", at_least_one=True, stop_after_first=one
            )
            if choice == "required":
                body = SequenceFormat(
                    elements=[
                        ConstStringFormat(value=self.lead + self.block_begin),
                        calls,
                        ConstStringFormat(value=self.block_end),
                    ]
                )
            else:
                body = TriggeredTagsFormat(
                    triggers=[self.trigger],
                    tags=[TagFormat(begin=self.block_begin, content=calls, end=self.block_end)],
                    excludes=o.excl(THINK),
                    stop_after_first=one,
                )
        if mode == "disabled" and self.disabled_prefix:
            return StructuralTag(
                format=SequenceFormat(
                    elements=[ConstStringFormat(value=v) for v in self.disabled_prefix] + [body]
                )
            )
        return _assemble(self.reasoning.prefix(mode, o), body)


def _register(name: str, spec: Any) -> None:
    def builder(
        tools: Optional[List[FunctionToolParam]] = None,
        builtin_tools: Optional[List[BuiltinToolParam]] = None,
        tool_choice: Choice = "auto",
        reasoning: Reasoning = "enabled",
        **kw: Any,
    ) -> StructuralTag:
        opts = {
            k: kw[k]
            for k in (
                "any_order",
                "exclude_special_tokens",
                "max_whitespace_cnt",
                "parallel_tool_calls",
            )
            if k in kw
        }
        return spec.build(tools or [], builtin_tools or [], tool_choice, reasoning, **opts)

    builder.__name__ = f"get_{name}_structural_tag"
    builder.__doc__ = (
        f"The structural tag of the {name!r} tool-call format (see get_model_structural_tag)."
    )
    register_model_structural_tag(name)(builder)
    globals()[builder.__name__] = builder


# ---------- the model families ----------

_DS_CALLS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")
_DS_CALL, _DS_CALL_END, _DS_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"

_register(
    "llama",
    _Flat(begin=lambda n: '{"name": "' + n + '", "parameters": ', end="}", trigger='{"name": '),
)
_register(
    "qwen_3",
    _Flat(
        begin=lambda n: '<tool_call>\n{"name": "' + n + '", "arguments": ',
        end="}\n</tool_call>",
        trigger="<tool_call>",
        reasoning=_Reasoning(suffix="\n\n"),
    ),
)
_register(
    "exaone",
    _Flat(
        begin=lambda n: '<tool_call>{"name": "' + n + '", "arguments": ',
        end="}</tool_call>",
        trigger="<tool_call>",
        reasoning=_Reasoning(suffix="\n\n", exclude_when_enabled=False),
    ),
)
_QWEN_XML = _Flat(
    begin=lambda n: f"<tool_call>\n<function={n}>\n",
    end="\n</function>\n</tool_call>",
    trigger="<tool_call>\n<function=",
    style="qwen_xml",
    reasoning=_Reasoning(suffix="\n\n"),
)
_register("qwen_3_5", _QWEN_XML)
_register("qwen_3_coder", _QWEN_XML)
_MIMO_TEXT = ("<think>", "</think>", "</tool_call>", "<function=")
_register(
    "mimo",
    _Flat(
        begin=lambda n: f"<tool_call><function={n}>",
        end="</function></tool_call>",
        trigger="<tool_call>",
        text_excludes=_MIMO_TEXT,
        no_tool_excludes=("<tool_call>",) + _MIMO_TEXT,
        style="qwen_xml",
        reasoning=_Reasoning(excludes=("<tool_call>",) + _MIMO_TEXT, prompt_opens_block=False),
    ),
)
_register(
    "deepseek_r1",
    _Section(
        *_DS_CALLS,
        call=lambda n, o, fn: TagFormat(
            begin=f"{_DS_CALL}function{_DS_SEP}{n}\n```json\n",
            content=o.args(fn),
            end=f"\n```{_DS_CALL_END}",
        ),
        separator="\n",
    ),
)
_register(
    "deepseek_v3_1",
    _Section(
        *_DS_CALLS,
        call=lambda n, o, fn: TagFormat(
            begin=f"{_DS_CALL}{n}{_DS_SEP}", content=o.args(fn), end=_DS_CALL_END
        ),
    ),
)
_register(
    "kimi",
    _Section(
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        call=lambda n, o, fn: TagFormat(
            begin=f"<|tool_call_begin|>functions.{n}:",
            content=SequenceFormat(
                elements=[
                    RegexFormat(pattern=r"\d+"),
                    ConstStringFormat(value="<|tool_call_argument_begin|>"),
                    o.args(fn),
                ]
            ),
            end="<|tool_call_end|>",
        ),
        text_excludes=THINK + ("<|tool_call_begin|>",),
        reasoning=_Reasoning(exclude_when_enabled=False),
        merge_forced=False,
    ),
)


_GLM_ARGS = ("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
_GLM_REASONING = THINK + ("<tool_call>", "</tool_call>") + _GLM_ARGS
_register(
    "glm_4_7",
    _Flat(
        begin=lambda n: f"<tool_call>{n}",
        end="</tool_call>",
        trigger="<tool_call>",
        text_excludes=THINK + ("</tool_call>",) + _GLM_ARGS,
        no_tool_excludes=_GLM_REASONING,
        style="glm_xml",
        reasoning=_Reasoning(excludes=_GLM_REASONING),
    ),
)
_DSML = "｜DSML｜"
_register(
    "deepseek_v3_2",
    _Invoke(
        invoke_begin=lambda n: f'<{_DSML}invoke name="{n}">\n',
        invoke_end=f"</{_DSML}invoke>\n",
        block_begin=f"<{_DSML}function_calls>\n",
        block_end=f"</{_DSML}function_calls>",
        trigger=f"<{_DSML}function_calls>",
        lead="\n\n",
        style="deepseek_xml",
    ),
)
for _v4_name, _invoke, _calls, _v4_style in (
    ("deepseek_v4", "invoke", "tool_calls", "deepseek_xml"),
    ("deepseek_v4_1", " invoke", " calls", "deepseek_v4_1_xml"),
):
    _register(
        _v4_name,
        _Invoke(
            invoke_begin=lambda n, _i=_invoke: f'<{_DSML}{_i} name="{n}">\n',
            invoke_end=f"</{_DSML}{_invoke}>\n",
            block_begin=f"<{_DSML}{_calls}>\n",
            block_end=f"</{_DSML}{_calls}>",
            trigger=f"<{_DSML}{_calls}>",
            lead="\n\n",
            style=_v4_style,
            no_tool_excludes_trigger=_v4_name == "deepseek_v4_1",
        ),
    )
_register(
    "minimax",
    _Invoke(
        invoke_begin=lambda n: f'<invoke name="{n}">\n',
        invoke_end="</invoke>\n",
        block_begin="<minimax:tool_call>\n",
        block_end="</minimax:tool_call>",
        trigger="<minimax:tool_call>",
        lead="\n",
        style="minimax_xml",
        reasoning=_Reasoning(suffix="\n\n", exclude_when_enabled=False),
        disabled_prefix=("\n</think>\n\n", "\n\n"),
    ),
)


# Harmony (gpt-oss): messages on channels joined by "<|start|>assistant".
_H_CALL_END = "<|call|>"
_H_SEP = "<|start|>assistant"
_H_MSG_END = ["<|end|>", "<|return|>"]


def _harmony(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Choice = "auto",
    reasoning: Reasoning = "enabled",
    **kw: Any,
) -> StructuralTag:
    o = _Opts(**{k: v for k, v in kw.items() if k in _Opts.__dataclass_fields__})
    tools, builtin_tools = tools or [], builtin_tools or []

    def fn_calls(fn: FunctionDefinition) -> List[TagFormat]:
        n = fn.name
        heads = [
            f"<|channel|>commentary to=functions.{n}<|constrain|>json<|message|>",
            f" to=functions.{n}<|channel|>commentary <|constrain|>json<|message|>",
            f" to=functions.{n}<|channel|>commentary json<|message|>",
        ]
        return [TagFormat(begin=h, content=o.args(fn), end=_H_CALL_END) for h in heads]

    def builtin_calls(t: BuiltinToolParam) -> List[TagFormat]:
        n = t.name or t.type
        heads = [
            f"<|channel|>commentary to={n} code<|message|>",
            f" to={n}<|channel|>commentary code<|message|>",
        ]
        return [TagFormat(begin=h, content=o.args(t), end=_H_CALL_END) for h in heads]

    calls: List[TagFormat] = []
    messages: List[TagFormat] = []
    if tool_choice == "forced":
        if builtin_tools:
            calls += builtin_calls(builtin_tools[0])
        elif tools:
            calls += fn_calls(tools[0].function)
        else:
            raise ValueError("Forced tool choice must resolve to exactly one tool.")
    elif tool_choice == "auto":
        for f in tools:
            calls += fn_calls(f.function)
        for t in builtin_tools:
            calls += builtin_calls(t)
        if tool_choice == "auto":
            messages.append(
                TagFormat(
                    begin="<|channel|>final<|message|>", content=AnyTextFormat(), end=_H_MSG_END
                )
            )
    else:
        for t in builtin_tools:
            calls += builtin_calls(t)
        for f in tools:
            calls += fn_calls(f.function)
    if reasoning != "disabled":
        messages.append(
            TagFormat(
                begin="<|channel|>analysis<|message|>", content=AnyTextFormat(), end=_H_MSG_END
            )
        )
    if o.parallel_tool_calls or not calls:
        return StructuralTag(
            format=TagsWithSeparatorFormat(tags=calls + messages, separator=_H_SEP)
        )
    one_call = TagsWithSeparatorFormat(
        tags=calls, separator=_H_SEP, at_least_one=True, stop_after_first=True
    )
    if not messages:
        return StructuralTag(format=OptionalFormat(content=one_call))
    return StructuralTag(
        format=OrFormat(
            elements=[
                TagsWithSeparatorFormat(tags=messages, separator=_H_SEP),
                one_call,
                SequenceFormat(
                    elements=[
                        TagsWithSeparatorFormat(tags=messages, separator=_H_SEP, at_least_one=True),
                        ConstStringFormat(value=_H_SEP),
                        one_call,
                    ]
                ),
            ]
        )
    )


register_model_structural_tag("harmony")(_harmony)
get_harmony_structural_tag = _harmony


def _reasoning_block(mode: Reasoning, begin: str, end: str, excludes: List[str]) -> Any:
    """The usual leading reasoning block: the prompt opened it ("enabled"), optional ("auto")."""
    if mode == "disabled":
        return None
    block = TagFormat(
        begin="" if mode == "enabled" else begin, content=AnyTextFormat(excludes=excludes), end=end
    )
    return OptionalFormat(content=block) if mode == "auto" else block


def _calls_group(tags: List[TagFormat], o: _Opts) -> TagsWithSeparatorFormat:
    return TagsWithSeparatorFormat(
        tags=tags, separator="", at_least_one=True, stop_after_first=not o.parallel_tool_calls
    )


# Kimi-K3: every block is <|open|>NAME<|sep|>...<|close|>NAME<|sep|>; the prompt already opened
# the first block (think, or response when reasoning is disabled).
_K3_OPEN, _K3_CLOSE, _K3_SEP = "<|open|>", "<|close|>", "<|sep|>"


def _kimi_k3(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Choice = "auto",
    reasoning: Reasoning = "enabled",
    **kw: Any,
) -> StructuralTag:
    o = _Opts(**{k: v for k, v in kw.items() if k in _Opts.__dataclass_fields__})
    tools = tools or []
    specials = [_K3_OPEN, _K3_CLOSE]

    def block(name: str, closing: bool = False) -> str:
        return f"{_K3_CLOSE if closing else _K3_OPEN}{name}{_K3_SEP}"

    def call(fn: FunctionDefinition) -> TagFormat:
        args = o.args(fn, "kimi_k3_xml")
        args.excludes = o.excl(specials + [_K3_SEP])
        return TagFormat(
            begin=f'{_K3_OPEN}call tool="{fn.name}" index="',
            content=SequenceFormat(
                elements=[
                    RegexFormat(pattern=r"\d+"),
                    ConstStringFormat(value=f'"{_K3_SEP}'),
                    args,
                ]
            ),
            end=block("call", True),
        )

    calls = [call(t.function) for t in tools]
    tools_part: Any = None
    if tool_choice == "forced":
        if not calls:
            raise ValueError("Forced tool choice must resolve to exactly one tool.")
        tools_part = SequenceFormat(
            elements=[
                ConstStringFormat(value=block("tools")),
                calls[0],
                ConstStringFormat(value=block("tools", True)),
            ]
        )
    elif tool_choice == "required":
        tools_part = SequenceFormat(
            elements=[
                ConstStringFormat(value=block("tools")),
                _calls_group(calls, o),
                ConstStringFormat(value=block("tools", True)),
            ]
        )
    elif calls:
        tools_part = OptionalFormat(
            content=TagFormat(
                begin=block("tools"), content=_calls_group(calls, o), end=block("tools", True)
            )
        )
    elements: List[Any] = []
    think = _reasoning_block(reasoning, block("think"), block("think", True), o.excl(specials))
    if think is not None:
        elements.append(think)
    elements.append(
        TagFormat(
            begin="" if reasoning == "disabled" else block("response"),
            content=AnyTextFormat(excludes=o.excl(specials)),
            end=block("response", True),
        )
    )
    if tools_part is not None:
        elements.append(tools_part)
    elements.append(ConstStringFormat(value=block("message", True)))
    return StructuralTag(format=SequenceFormat(elements=elements))


# MiniMax M3: every marker is prefixed with a namespace string.
_MM3 = "]<]minimax[>["
_MM3_THINK = ("<mm:think>", "</mm:think>")


def _minimax_m3(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Choice = "auto",
    reasoning: Reasoning = "enabled",
    **kw: Any,
) -> StructuralTag:
    o = _Opts(**{k: v for k, v in kw.items() if k in _Opts.__dataclass_fields__})
    tools = tools or []
    if builtin_tools:
        raise ValueError("MiniMax M3 does not support builtin tools.")
    trigger, block_end = f"{_MM3}<tool_call>", f"{_MM3}</tool_call>"
    text_excl = list(_MM3_THINK) + [block_end, f"{_MM3}<invoke", f"{_MM3}</invoke>"]
    invokes = [
        TagFormat(
            begin=f'{_MM3}<invoke name="{t.function.name}">',
            content=o.args(t.function, "minimax_m3_xml"),
            end=f"{_MM3}</invoke>\n",
        )
        for t in tools
    ]

    def block(content: Any) -> TagFormat:
        return TagFormat(begin=trigger + "\n", content=content, end=block_end)

    if tool_choice == "forced":
        if not invokes:
            raise ValueError("Forced tool choice must resolve to exactly one tool.")
        body: Any = block(invokes[0])
    elif invokes:
        body = TriggeredTagsFormat(
            triggers=[trigger],
            tags=[block(_calls_group(invokes, o))],
            excludes=o.excl(text_excl),
            at_least_one=tool_choice == "required",
            stop_after_first=not o.parallel_tool_calls,
        )
    else:
        body = AnyTextFormat(excludes=o.excl([trigger] + text_excl))
    think = _reasoning_block(reasoning, *_MM3_THINK, o.excl([trigger] + text_excl))
    if isinstance(think, OptionalFormat):
        # "auto": a full block, a lone closing marker, or nothing.
        think.content = OrFormat(
            elements=[think.content, ConstStringFormat(value=_MM3_THINK[1])]
        )
    return _assemble(think, body)


_COHERE_THINK = ("<|START_THINKING|>", "<|END_THINKING|>")


def _cohere(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Choice = "auto",
    reasoning: Reasoning = "enabled",
    **kw: Any,
) -> StructuralTag:
    o = _Opts(**{k: v for k, v in kw.items() if k in _Opts.__dataclass_fields__})
    tools = tools or []
    begin, end = "<cofl:tool_calls>", "</cofl:tool_calls>"
    calls = [
        TagFormat(
            begin='<cofl:tool_call id="',
            content=SequenceFormat(
                elements=[
                    RegexFormat(pattern=r"\d+"),
                    ConstStringFormat(value=f'" name="{t.function.name}">'),
                    o.args(t.function, "cohere_xml"),
                ]
            ),
            end="</cofl:tool_call>",
        )
        for t in tools
    ]
    if tool_choice == "forced":
        if not calls:
            raise ValueError("Forced tool choice must resolve to exactly one tool.")
        inner: Any = calls[0]
    elif tool_choice == "required":
        inner = _calls_group(calls, o)
    else:
        inner = None
    if inner is not None:
        body: Any = SequenceFormat(
            elements=[ConstStringFormat(value=begin), inner, ConstStringFormat(value=end)]
        )
    elif calls:
        body = TriggeredTagsFormat(
            triggers=[begin],
            tags=[TagFormat(begin=begin, content=_calls_group(calls, o), end=end)],
            excludes=o.excl(_COHERE_THINK),
            stop_after_first=not o.parallel_tool_calls,
        )
    else:
        body = AnyTextFormat(excludes=o.excl(_COHERE_THINK))
    think_excl = [] if reasoning == "enabled" else o.excl(_COHERE_THINK)
    return _assemble(_reasoning_block(reasoning, *_COHERE_THINK, think_excl), body)


for _name, _fn in (("kimi_k3", _kimi_k3), ("minimax_m3", _minimax_m3), ("cohere", _cohere)):
    _fn.__name__ = f"get_{_name}_structural_tag"
    _fn.__doc__ = (
        f"The structural tag of the {_name!r} tool-call format (see get_model_structural_tag)."
    )
    register_model_structural_tag(_name)(_fn)
    globals()[_fn.__name__] = _fn
