"""vLLM's structured-output backend driven with the grammask plugin loaded, on CPU, no model.

vLLM loads its general plugins (the `grammask` entry point among them); its own `XgrammarBackend`
then compiles each request kind on the Llama 3 and Qwen2.5 tokenizers, and its `XgrammarGrammar`
is stepped through a valid instance token by token: every token must be allowed by the filled
bitmask and accepted, an invalid token refused, rollback and termination must work, and the
masks must equal those of the same backend on XGrammar wherever XGrammar accepts the grammar.
"""

from __future__ import annotations

import contextlib
import types

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed here: run .ci/integrations")

import grammask as xgr  # noqa: E402
import torch  # noqa: E402
from cases import (  # noqa: E402
    CASE_IDS,
    CASES,
    TOKENIZERS,
    Timer,
    bit,
    first_disallowed,
    hf_tokenizer,
    unexplained_mask_differences,
    tokens_for,
    xfail_unless_supported,
)
from grammask.integrations import vllm as plugin  # noqa: E402
from vllm.config.structured_outputs import StructuredOutputsConfig  # noqa: E402
from vllm.v1.structured_output import backend_xgrammar  # noqa: E402
from vllm.v1.structured_output.backend_types import StructuredOutputOptions  # noqa: E402

KIND = {
    "json": StructuredOutputOptions.JSON,
    "json_object": StructuredOutputOptions.JSON_OBJECT,
    "regex": StructuredOutputOptions.REGEX,
    "ebnf": StructuredOutputOptions.GRAMMAR,
    "lark": StructuredOutputOptions.GRAMMAR,
    "choice": StructuredOutputOptions.CHOICE,
    "structural_tag": StructuredOutputOptions.STRUCTURAL_TAG,
}

OVERHEAD: dict = {}
# (family, case) -> [(step, {reason: #tokens on which the masks differ for it})]
MASK_DIFFS: dict = {}


@pytest.fixture(scope="module", autouse=True)
def plugin_loaded():
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    assert plugin.is_registered(), (
        "vLLM did not load the grammask entry point (vllm.general_plugins)"
    )
    yield


def vllm_config(backend: str = "xgrammar"):
    # VllmConfig() needs a device; the structured-output backend only reads these three fields.
    return types.SimpleNamespace(
        structured_outputs_config=StructuredOutputsConfig(backend=backend),
        model_config=None,
        speculative_config=None,
    )


_BACKENDS: dict = {}


def backend_for(family: str, library: str = "grammask"):
    key = (family, library)
    if key not in _BACKENDS:
        tok = hf_tokenizer(family)
        with on_xgrammar() if library == "xgrammar" else contextlib.nullcontext():
            _BACKENDS[key] = backend_xgrammar.XgrammarBackend(
                vllm_config(), tokenizer=tok, vocab_size=TOKENIZERS[family]
            )
    return _BACKENDS[key]


@contextlib.contextmanager
def on_xgrammar():
    """vLLM's backend module back on XGrammar for the duration (compiles bind the library)."""
    plugin.unregister()
    try:
        yield
    finally:
        plugin.register()


def compile_on(family: str, case, library: str = "grammask"):
    backend = backend_for(family, library)
    with on_xgrammar() if library == "xgrammar" else contextlib.nullcontext():
        return backend.compile_grammar(KIND[case.kind], case.spec)


def test_the_plugin_swaps_only_the_xgrammar_module_names():
    assert backend_xgrammar.xgr is plugin.XGRAMMAR_NAMES
    assert (
        backend_xgrammar.has_xgrammar_unsupported_json_features
        is plugin.has_unsupported_json_features
    )
    # Mask application keeps vLLM's kernel path (XGrammar's apply, same bitmask layout).
    from vllm.v1.structured_output import utils

    assert utils.xgr is not plugin.XGRAMMAR_NAMES


@pytest.mark.parametrize("family", list(TOKENIZERS))
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_request_runs_token_by_token(family, case):
    xfail_unless_supported(case)
    grammar = compile_on(family, case)
    assert isinstance(grammar.matcher, xgr.GrammarMatcher)
    backend = backend_for(family)
    info = grammar.ctx.tokenizer_info
    tok = hf_tokenizer(family)
    tokens = tokens_for(tok, info, case.instance)
    bitmask = backend.allocate_token_bitmask(2)
    assert bitmask.dtype == torch.int32 and bitmask.shape == (2, (TOKENIZERS[family] + 31) // 32)
    stops = set(info.stop_token_ids)

    # An invalid first token is refused (and validate_tokens keeps no prefix of it).
    grammar.fill_bitmask(bitmask, 1)
    bad = first_disallowed(bitmask[1], TOKENIZERS[family], stops)
    assert grammar.validate_tokens([bad]) == []
    assert grammar.accept_tokens("req", [bad]) is False

    fill, accept = Timer(), Timer()
    for t in tokens:
        with fill:
            grammar.fill_bitmask(bitmask, 0)
        assert bit(bitmask[0], t), f"token {t} ({tok.decode([t])!r}) is masked out"
        with accept:
            assert grammar.accept_tokens("req", [t])
        assert not grammar.is_terminated()
    grammar.fill_bitmask(bitmask, 0)
    stop = info.stop_token_ids[0]
    assert bit(bitmask[0], stop), "the stop token must be allowed at the end"
    assert grammar.validate_tokens([stop]) == [stop] and not grammar.is_terminated()
    assert grammar.accept_tokens("req", [stop]) and grammar.is_terminated()
    assert grammar.accept_tokens("req", [bad]), "tokens after termination are ignored"
    OVERHEAD[(family, case.name)] = (fill.per_us(), accept.per_us(), len(tokens))

    # Rollback: undo the stop token and the last (up to) two tokens, then replay them.
    k = min(2, len(tokens))
    grammar.rollback(k + 1)
    assert not grammar.is_terminated()
    assert (
        grammar.accept_tokens("req", tokens[len(tokens) - k :] + [stop]) and grammar.is_terminated()
    )
    grammar.reset()
    assert not grammar.is_terminated() and grammar.accept_tokens("req", tokens[:1])


@pytest.mark.parametrize("family", list(TOKENIZERS))
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_masks_equal_xgrammar(family, case):
    """Both backends built by vLLM the same way; masks compared on every state of the instance.
    Stop tokens may differ: grammask also stops on <|eom_id|>/<|end_of_text|>-style tokens that
    XGrammar's `from_huggingface` leaves out, so those ids are compared separately."""
    xfail_unless_supported(case)
    try:
        theirs = compile_on(family, case, "xgrammar")
    except Exception as e:  # XGrammar refuses it: nothing to compare
        pytest.skip(f"XGrammar does not accept this {case.kind} request: {e}")
    ours = compile_on(family, case)
    info = ours.ctx.tokenizer_info
    their_info = theirs.ctx.tokenizer_info
    stop_ids = set(info.stop_token_ids) | set(their_info.stop_token_ids)
    tokens = tokens_for(hf_tokenizer(family), info, case.instance)
    n = TOKENIZERS[family]
    decoded = info.decoded_vocab
    a = backend_for(family).allocate_token_bitmask(1)
    b = backend_for(family, "xgrammar").allocate_token_bitmask(1)
    special = set(info.special_token_ids)
    for step, t in enumerate(tokens + [None]):
        ours.fill_bitmask(a, 0)
        theirs.fill_bitmask(b, 0)
        prefix = b"".join(decoded[x] for x in tokens[:step])
        reasons: dict = {}
        unexplained = unexplained_mask_differences(
            case.kind, a[0], b[0], n, decoded, prefix, stop_ids, special, theirs.ctx, reasons
        )
        if reasons:
            MASK_DIFFS.setdefault((family, case.name), []).append((step, reasons))
        assert not unexplained, (
            f"step {step}: masks differ on {[(i, decoded[i] if i < len(decoded) else None, bit(a[0], i)) for i in unexplained[:10]]}"
        )
        if t is not None:
            assert ours.accept_tokens("r", [t]) and theirs.accept_tokens("r", [t])


# On vLLM's list of JSON Schema features it will not send to XGrammar; grammask enforces them all.
LISTED_BUT_COMPILED = [
    {"type": "integer", "multipleOf": 5},
    {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
    {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
    {"allOf": [{"type": "string"}, {"enum": ["yes", "no"]}]},
    {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "properties": {"a": {}}},
    {"type": "array", "contains": {"const": 1}},
]
# grammask refuses this one (uniqueItems over unboundedly many values).
REFUSED = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}


def route(**spec):
    """The backend `auto` picks for a request (vLLM's own SamplingParams validation)."""
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    params = SamplingParams(structured_outputs=StructuredOutputsParams(**spec))
    model_config = types.SimpleNamespace(is_diffusion=False)
    params._validate_structured_outputs(
        model_config, StructuredOutputsConfig(backend="auto"), hf_tokenizer("llama3")
    )
    return params.structured_outputs._backend


@pytest.mark.parametrize(
    "schema", LISTED_BUT_COMPILED, ids=lambda s: "-".join(k for k in s if k != "type")
)
def test_auto_keeps_schemas_grammask_compiles(schema):
    from vllm.exceptions import VLLMValidationError

    with on_xgrammar():
        assert backend_xgrammar.has_xgrammar_unsupported_json_features(schema), (
            "vLLM's own list flags it"
        )
        try:  # without the plugin: sent elsewhere, or refused by guidance
            assert route(json=schema) != "xgrammar"
        except VLLMValidationError:
            pass
    assert not plugin.has_unsupported_json_features(schema)
    assert route(json=schema) == "xgrammar"


def test_auto_falls_back_where_grammask_refuses():
    from vllm.exceptions import VLLMValidationError

    assert plugin.has_unsupported_json_features(REFUSED)
    try:
        backend = route(json=REFUSED)
    except VLLMValidationError as e:  # guidance refuses it too: its own message, as before
        assert "Grammar error" in str(e)
    else:
        assert backend in ("guidance", "outlines")


def test_auto_routes_other_kinds_to_grammask():
    assert route(regex=r"[a-z]+") == "xgrammar"
    assert route(choice=["a", "b"]) == "xgrammar"
    assert route(grammar='root ::= "x"') == "xgrammar"
    assert route(json_object=True) == "xgrammar"


def test_other_backends_are_untouched():
    from vllm.v1.structured_output.backend_guidance import GuidanceBackend

    tok = hf_tokenizer("llama3")
    backend = GuidanceBackend(
        vllm_config("guidance"), tokenizer=tok, vocab_size=TOKENIZERS["llama3"]
    )
    grammar = backend.compile_grammar(StructuredOutputOptions.REGEX, "[0-9]+")
    assert type(grammar).__module__.endswith("backend_guidance")
    assert "grammask" not in repr(type(getattr(grammar, "ll_matcher", None)))


def test_zz_report_overhead(capsys):
    """Prints the per-token fill and accept times measured above (µs), for docs/integrations.md."""
    if not OVERHEAD:
        pytest.skip("no overhead measured (run the whole file)")
    with capsys.disabled():
        print(
            "\nvLLM XgrammarGrammar on grammask, per token: fill_bitmask / accept_tokens (µs), tokens"
        )
        for (family, name), (f, a, n) in sorted(OVERHEAD.items()):
            print(f"  {family:8s} {name:22s} {f:8.1f} {a:8.1f} {n:4d}")
        print("JSON states where the masks differ, every token explained (tokens per reason):")
        for key, rows in sorted(MASK_DIFFS.items()):
            total: dict = {}
            for _, reasons in rows:
                for why, n in reasons.items():
                    total[why] = total.get(why, 0) + n
            print(f"  {key[0]:8s} {key[1]:22s} {len(rows):3d} states: {total}")
