"""Drop-in compatibility with XGrammar 0.2.8 (shared/reference/xgrammar-api.md §1).

1. The names of ``xgrammar.__all__`` that grammask implements are importable from grammask, with
   the documented signatures (parameter names, kinds and defaults), written down here from the
   reference so the test runs without xgrammar.
2. When xgrammar is installed (it is in the test environment): every public XGrammar name
   (enumerated from xgrammar itself by ``tools/xgrammar_compat.py``) exists in grammask unless it
   is in the documented allow-list ``grammask._compat.GAPS``, with a compatible signature unless
   the difference is documented; the same signatures compared with xgrammar's own; differential
   tests of masks on real vocabularies, of matcher semantics and of configuration/errors.
   XGrammar lets added tokens match their text and grammask makes the ones the tokenizer marks
   special unproducible, so special and stop ids are left out of the mask comparison.
3. The XGrammar 0.1 names of shared/seeds/004 work and warn; allow-listed gaps and unsupported
   names raise clear errors; every public grammask name has a docstring.
"""

from __future__ import annotations

import inspect
import json
import sys
import warnings
from pathlib import Path

import grammask
import grammask as xgr
import numpy as np
import pytest
from conftest import hf_tokenizer, tokenize, tokenizer_info
from grammask import testing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import xgrammar_compat  # noqa: E402  (tools/xgrammar_compat.py: the compatibility table)

P = inspect.Parameter
POS, KW, VAR_POS, VAR_KW = P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY, P.VAR_POSITIONAL, P.VAR_KEYWORD
REQ = P.empty

# Names of xgrammar.__all__ (§1) that grammask implements.
IMPLEMENTED = [
    "exception",
    "testing",
    "CompiledGrammar",
    "GrammarCompiler",
    "DeserializeFormatError",
    "DeserializeVersionError",
    "InvalidJSONError",
    "InvalidStructuralTagError",
    "Grammar",
    "BatchGrammarMatcher",
    "GrammarMatcher",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_dtype",
    "get_bitmask_shape",
    "reset_token_bitmask",
    "TokenizerInfo",
    "VocabType",
    "get_max_recursion_depth",
    "get_serialization_version",
    "max_recursion_depth",
    "set_max_recursion_depth",
]

# (object path, [(name, kind, default)]) from xgrammar-api.md §1.1-1.7 and §1.13; `self` omitted.
SIGNATURES = {
    "Grammar.from_ebnf": [("ebnf_string", POS, REQ), ("root_rule_name", KW, "root")],
    "Grammar.from_json_schema": [
        ("schema", POS, REQ),
        ("any_whitespace", KW, True),
        ("indent", KW, None),
        ("separators", KW, None),
        ("strict_mode", KW, True),
        ("max_whitespace_cnt", KW, None),
        ("print_converted_ebnf", KW, False),
        ("any_order", KW, False),
    ],
    "Grammar.from_regex": [("regex_string", POS, REQ), ("print_converted_ebnf", KW, False)],
    "Grammar.builtin_json_grammar": [],
    "Grammar.concat": [("grammars", VAR_POS, REQ)],
    "Grammar.union": [("grammars", VAR_POS, REQ)],
    "Grammar.serialize_json": [],
    "Grammar.deserialize_json": [("json_string", POS, REQ)],
    "GrammarCompiler.__init__": [
        ("tokenizer_info", POS, REQ),
        ("max_threads", KW, 8),
        ("cache_enabled", KW, True),
        ("cache_limit_bytes", KW, -1),
    ],
    "GrammarCompiler.compile_json_schema": [
        ("schema", POS, REQ),
        ("any_whitespace", KW, True),
        ("indent", KW, None),
        ("separators", KW, None),
        ("strict_mode", KW, True),
        ("max_whitespace_cnt", KW, None),
        ("any_order", KW, False),
    ],
    "GrammarCompiler.compile_builtin_json_grammar": [],
    "GrammarCompiler.compile_regex": [("regex", POS, REQ)],
    "GrammarCompiler.compile_grammar": [("grammar", POS, REQ), ("root_rule_name", KW, "root")],
    "GrammarCompiler.clear_cache": [],
    "GrammarCompiler.get_cache_size_bytes": [],
    "CompiledGrammar.serialize_json": [],
    "CompiledGrammar.deserialize_json": [("json_string", POS, REQ), ("tokenizer_info", POS, REQ)],
    "GrammarMatcher.__init__": [
        ("compiled_grammar", POS, REQ),
        ("override_stop_tokens", KW, None),
        ("terminate_without_stop_token", KW, False),
        ("max_rollback_tokens", KW, -1),
        ("default_temperature", KW, None),
    ],
    "GrammarMatcher.accept_token": [("token_id", POS, REQ), ("debug_print", KW, False)],
    "GrammarMatcher.accept_string": [("input_str", POS, REQ), ("debug_print", KW, False)],
    "GrammarMatcher.fill_next_token_bitmask": [
        ("bitmask", POS, REQ),
        ("index", POS, 0),
        ("debug_print", KW, False),
    ],
    "GrammarMatcher.find_jump_forward_string": [],
    "GrammarMatcher.rollback": [("num_tokens", POS, 1)],
    "GrammarMatcher.is_terminated": [],
    "GrammarMatcher.is_completed": [],
    "GrammarMatcher.reset": [],
    "GrammarMatcher.fork": [],
    "GrammarMatcher._debug_print_internal_state": [],
    "BatchGrammarMatcher.__init__": [("max_threads", POS, "auto")],
    "BatchGrammarMatcher.batch_fill_next_token_bitmask": [
        ("matchers", POS, REQ),
        ("bitmask", POS, REQ),
        ("indices", POS, None),
        ("debug_print", POS, False),
    ],
    "BatchGrammarMatcher.batch_accept_token": [
        ("matchers", POS, REQ),
        ("tokens", POS, REQ),
        ("debug_print", POS, False),
    ],
    "BatchGrammarMatcher.batch_accept_string": [
        ("matchers", POS, REQ),
        ("strings", POS, REQ),
        ("debug_print", POS, False),
    ],
    "BatchGrammarMatcher.batch_rollback": [("matchers", POS, REQ), ("num_tokens", POS, 1)],
    "TokenizerInfo.__init__": [
        ("encoded_vocab", POS, REQ),
        ("vocab_type", POS, "RAW"),
        ("vocab_size", KW, None),
        ("stop_token_ids", KW, None),
        ("add_prefix_space", KW, False),
    ],
    "TokenizerInfo.from_huggingface": [
        ("tokenizer", POS, REQ),
        ("vocab_size", KW, None),
        ("stop_token_ids", KW, None),
    ],
    "TokenizerInfo.from_vocab_and_metadata": [("encoded_vocab", POS, REQ), ("metadata", POS, REQ)],
    "TokenizerInfo.dump_metadata": [],
    "TokenizerInfo.serialize_json": [],
    "TokenizerInfo.deserialize_json": [("json_string", POS, REQ)],
    "get_bitmask_shape": [("batch_size", POS, REQ), ("vocab_size", POS, REQ)],
    "allocate_token_bitmask": [("batch_size", POS, REQ), ("vocab_size", POS, REQ)],
    "reset_token_bitmask": [("bitmask", POS, REQ)],
    "apply_token_bitmask_inplace": [
        ("logits", POS, REQ),
        ("bitmask", POS, REQ),
        ("vocab_size", KW, None),
        ("indices", KW, None),
        ("backend", KW, "auto"),
    ],
    "testing._json_schema_to_ebnf": [
        ("schema", POS, REQ),
        ("any_whitespace", KW, True),
        ("indent", KW, None),
        ("separators", KW, None),
        ("max_whitespace_cnt", KW, None),
        ("strict_mode", KW, True),
        ("json_format", KW, "json"),
        ("any_order", KW, False),
    ],
    "testing._regex_to_ebnf": [("regex", POS, REQ), ("with_rule_name", POS, True)],
    "testing._ebnf_to_grammar_no_normalization": [
        ("ebnf_string", POS, REQ),
        ("root_rule_name", POS, "root"),
    ],
    "testing._get_matcher_from_grammar": [("grammar", POS, REQ), ("kwargs", VAR_KW, REQ)],
    "testing._get_matcher_from_grammar_and_tokenizer_info": [
        ("grammar", POS, REQ),
        ("tokenizer_info", POS, None),
        ("kwargs", VAR_KW, REQ),
    ],
    "testing._is_grammar_accept_string": [
        ("grammar", POS, REQ),
        ("input_str", POS, REQ),
        ("debug_print", KW, False),
        ("print_time", KW, False),
        ("require_termination", KW, True),
    ],
    "testing._get_masked_tokens_from_bitmask": [
        ("bitmask", POS, REQ),
        ("vocab_size", POS, REQ),
        ("index", POS, 0),
    ],
    "testing._is_single_token_bitmask": [
        ("bitmask", POS, REQ),
        ("vocab_size", POS, REQ),
        ("index", POS, 0),
    ],
    "testing.bool_mask_to_bitmask": [("bool_mask", POS, REQ)],
    "testing.bitmask_to_bool_mask": [("bit_mask", POS, REQ), ("vocab_size", POS, None)],
}

# Parameter names where the reference table (§1.3) and XGrammar's code differ; the code wins for
# the differential test only.
XGRAMMAR_NAME_ALIASES = {("CompiledGrammar.deserialize_json", "json_string"): "json_str"}


def resolve(root, path: str):
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def params(fn) -> list:
    sig = inspect.signature(fn)
    out = []
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        d = p.default
        if hasattr(d, "name") and type(d).__name__ == "VocabType":
            d = d.name
        out.append((p.name, p.kind, d))
    return out


@pytest.mark.parametrize("name", IMPLEMENTED)
def test_names_importable(name):
    assert hasattr(grammask, name), f"grammask.{name} is missing"
    assert name in grammask.__all__ or name == "bitmask_dtype"


def without_extensions(got: list, want: list) -> list:
    """grammask may add trailing keyword-only parameters with defaults (extensions that callers
    written for XGrammar never pass); they are dropped before comparing."""
    extra = got[len(want) :]
    if got[: len(want)] == want and all(k == KW and d is not REQ for _, k, d in extra):
        return want
    return got


@pytest.mark.parametrize("path", list(SIGNATURES))
def test_documented_signatures(path):
    got = params(resolve(grammask, path))
    assert without_extensions(got, SIGNATURES[path]) == SIGNATURES[path], f"{path}: got {got}"


def test_properties():
    for cls, names in {
        xgr.CompiledGrammar: ["grammar", "tokenizer_info", "memory_size_bytes"],
        xgr.GrammarMatcher: ["max_rollback_tokens", "stop_token_ids", "temperature"],
        xgr.TokenizerInfo: [
            "vocab_type",
            "vocab_size",
            "add_prefix_space",
            "decoded_vocab",
            "stop_token_ids",
            "special_token_ids",
            "prepend_space_in_tokenization",
        ],
        xgr.GrammarCompiler: ["cache_limit_bytes"],
    }.items():
        for n in names:
            assert isinstance(inspect.getattr_static(cls, n), property), f"{cls.__name__}.{n}"


def test_vocab_type_values():
    assert [(v.name, v.value) for v in xgr.VocabType] == [
        ("RAW", 0),
        ("BYTE_FALLBACK", 1),
        ("BYTE_LEVEL", 2),
    ]


def test_exceptions_derive_from_runtime_error():
    names = [
        "GrammaskError",
        "DeserializeFormatError",
        "DeserializeVersionError",
        "InvalidJSONError",
        "InvalidStructuralTagError",
        "GrammarSyntaxError",
        "InvalidGrammarError",
        "InvalidSchemaError",
        "UnsupportedFeatureError",
        "LimitExceededError",
    ]
    for n in names:
        cls = getattr(xgr, n)
        assert issubclass(cls, RuntimeError), n
        assert issubclass(cls, xgr.GrammaskError), n
        assert getattr(xgr.exception, n) is cls
    assert issubclass(xgr.DeserializeVersionError, xgr.DeserializeFormatError)
    # A syntax error is a RuntimeError as in XGrammar.
    with pytest.raises(RuntimeError, match="line 1"):
        xgr.Grammar.from_ebnf("root ::= (")


def test_unsupported_features_raise_typed_errors():
    info = xgr.TokenizerInfo([b"a", b"</s>"], stop_token_ids=[1])
    c = xgr.GrammarCompiler(info)
    with pytest.raises(xgr.UnsupportedFeatureError, match="needs the tokenizer"):
        xgr.Grammar.from_structural_tag({"type": "structural_tag", "format": {"type": "token", "token": "a"}})
    # max_chars on a recursive rule works (tests/test_rule_options.py), with max_tokens on it too.
    c.compile_lark('start[max_chars=3, max_tokens=2]: "(" start ")" | "a"')
    with pytest.raises(xgr.UnsupportedFeatureError, match="left-recursive through other rules"):
        c.compile_grammar(
            'root ::= x\nx[max_tokens=3] ::= y ")" | "[" z "]" | "a"\ny[capture] ::= z "(" | v "(" | "b"\n'
            'z[capture] ::= y "+" | "c"\nv[capture] ::= y "-" | "e"'
        )


def test_testing_helpers_work():
    assert testing._is_grammar_accept_string('root ::= "a" "b"*', "abb")
    assert not testing._is_grammar_accept_string('root ::= "a" "b"*', "ba")
    assert testing._is_grammar_accept_string('root ::= "a" "b"*', "a", require_termination=False)
    assert testing._is_grammar_accept_string(xgr.Grammar.from_ebnf('root ::= "x"?'), "")
    m = testing._get_matcher_from_grammar('root ::= "ab"')
    assert m.accept_string("ab") and m.is_terminated()
    assert "::=" in testing._regex_to_ebnf("a+")
    assert "::=" not in testing._regex_to_ebnf("a+", with_rule_name=False)
    assert "::=" in testing._json_schema_to_ebnf({"type": "integer"})
    assert str(testing._ebnf_to_grammar_no_normalization('root ::= "a"'))


# ---------------------------------------------------------------------------------------------
# against xgrammar itself


@pytest.fixture(scope="module")
def xgrammar():
    return pytest.importorskip("xgrammar", reason="xgrammar is not installed (differential tests)")


def test_testing_has_every_name_of_xgrammars_testing(xgrammar):
    """``from xgrammar.testing import X`` works as ``from grammask.testing import X`` for every X
    that module has, the names it re-exports (``Grammar``, ``bitmask_dtype``,
    ``_convert_schema_to_str``, ...) included."""
    import xgrammar.testing

    names = [
        n for n in dir(xgrammar.testing) if not n.startswith("__") and n not in xgrammar_compat.TESTING_IMPORTS
    ]
    assert len(names) >= 24
    assert [n for n in names if not hasattr(testing, n)] == []
    for n in ("Grammar", "GrammarMatcher", "GrammarCompiler", "CompiledGrammar", "TokenizerInfo"):
        assert getattr(testing, n) is getattr(xgr, n)
    assert testing.bitmask_dtype == xgr.bitmask_dtype == xgrammar.testing.bitmask_dtype
    for schema in ('{"type": "integer"}', {"type": "string", "maxLength": 3}):
        assert testing._convert_schema_to_str(schema) == xgrammar.testing._convert_schema_to_str(schema)


@pytest.mark.parametrize("path", list(SIGNATURES))
def test_signatures_match_xgrammar(xgrammar, path):
    import xgrammar.testing

    theirs = params(resolve(xgrammar, path))
    ours = [
        (XGRAMMAR_NAME_ALIASES.get((path, n), n), k, d)
        for n, k, d in params(resolve(grammask, path))
    ]
    assert without_extensions(ours, theirs) == theirs, (
        f"{path}:\n grammask {ours}\n xgrammar {theirs}"
    )


def test_implemented_names_are_in_xgrammar_all(xgrammar):
    missing = [n for n in IMPLEMENTED if n not in xgrammar.__all__]
    assert not missing


DIFF_GRAMMARS = {
    "json": (None, '{"a": [1, 2.5, true, null, "x y"], "b": {"c": "日本"}}'),
    "arith": (
        (
            'root ::= expr\nexpr ::= expr "+" term | term\nterm ::= term "*" factor | factor\n'
            'factor ::= "(" expr ")" | [0-9]+'
        ),
        "(1+23)*4+56",
    ),
    "list": (
        'root ::= "[" (item ("," " "? item)*)? "]"\nitem ::= [a-z]+ | "\\"" [^"]* "\\""',
        '[abc, "x y", de,"é"]',
    ),
}


@pytest.mark.parametrize("grammar_name", list(DIFF_GRAMMARS))
@pytest.mark.parametrize("family", ["llama3", "qwen2.5"])
def test_masks_agree_with_xgrammar(xgrammar, family, grammar_name):
    tok = hf_tokenizer(family)
    ours_info = tokenizer_info(family)
    theirs_info = xgrammar.TokenizerInfo.from_huggingface(tok)
    assert theirs_info.vocab_size == ours_info.vocab_size
    vocab_size = ours_info.vocab_size
    ebnf, doc = DIFF_GRAMMARS[grammar_name]
    oc, tc = xgr.GrammarCompiler(ours_info), xgrammar.GrammarCompiler(theirs_info)
    # XGrammar's builtin JSON is the exact any-spelling language.
    ocg = oc.compile_builtin_json_grammar(spelling="any") if ebnf is None else oc.compile_grammar(ebnf)
    tcg = tc.compile_builtin_json_grammar() if ebnf is None else tc.compile_grammar(ebnf)
    om, tm = xgr.GrammarMatcher(ocg), xgrammar.GrammarMatcher(tcg)
    excluded = (
        set(ours_info.special_token_ids)
        | set(ours_info.stop_token_ids)
        | set(theirs_info.stop_token_ids)
    )
    excluded |= set(theirs_info.special_token_ids)
    keep = np.ones(vocab_size, dtype=bool)
    keep[list(excluded)] = False
    ids = tokenize(tok, ours_info, doc)
    obm = np.zeros(xgr.get_bitmask_shape(1, vocab_size), dtype=np.int32)
    tbm = xgrammar.allocate_token_bitmask(1, vocab_size)
    for pos in range(len(ids) + 1):
        om.fill_next_token_bitmask(obm)
        tm.fill_next_token_bitmask(tbm)
        a = np.unpackbits(obm.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)
        b = np.unpackbits(tbm.numpy().view(np.uint8), bitorder="little")[:vocab_size].astype(bool)
        diff = np.flatnonzero((a != b) & keep)
        decoded = ours_info.decoded_vocab
        assert diff.size == 0, (
            f"{family}/{grammar_name} after {pos} tokens: {diff.size} ids differ, e.g. "
            f"{[(int(i), decoded[i], bool(a[i])) for i in diff[:8]]}"
        )
        assert om.is_completed() == tm.is_completed()
        if pos < len(ids):
            assert om.accept_token(ids[pos]) and tm.accept_token(ids[pos])


DIFF_SEMANTICS_GRAMMARS = [
    'root ::= "a" "b"*',
    'root ::= ("a" | "(" root ")")*',
    'root ::= "ab" | "a" "b" "a"?',
    'root ::= [a-b]+ ")"?',
]


@pytest.mark.parametrize("terminate_without_stop", [False, True])
@pytest.mark.parametrize("grammar", DIFF_SEMANTICS_GRAMMARS)
def test_matcher_semantics_agree_with_xgrammar(xgrammar, grammar, terminate_without_stop):
    """Random operation sequences give the same results (or both raise) in both libraries."""
    import random

    toks = ["a", "b", "ab", "(", ")", "</s>"]
    n = len(toks)
    ours = xgr.GrammarMatcher(
        xgr.GrammarCompiler(xgr.TokenizerInfo(toks, stop_token_ids=[5])).compile_grammar(grammar),
        terminate_without_stop_token=terminate_without_stop,
    )
    theirs = xgrammar.GrammarMatcher(
        xgrammar.GrammarCompiler(xgrammar.TokenizerInfo(toks, stop_token_ids=[5])).compile_grammar(
            grammar
        ),
        terminate_without_stop_token=terminate_without_stop,
    )
    rng = random.Random(f"{grammar}/{terminate_without_stop}")
    obm = np.zeros((1, 1), dtype=np.int32)
    tbm = xgrammar.allocate_token_bitmask(1, n)

    def run(fn):
        try:
            return ("ok", fn())
        except Exception:  # noqa: BLE001 -- both must raise; the exception types differ by design
            return ("raised", None)

    log = []
    for step in range(150):
        op = rng.choice(["tok", "tok", "tok", "str", "rollback", "fill", "jump", "reset"])
        if op == "tok":
            t = rng.choice(list(range(n)) + [-1, n, 1000])
            a, b = run(lambda t=t: ours.accept_token(t)), run(lambda t=t: theirs.accept_token(t))
        elif op == "str":
            s = "".join(rng.choice("ab()") for _ in range(rng.randint(0, 3)))
            a, b = run(lambda s=s: ours.accept_string(s)), run(lambda s=s: theirs.accept_string(s))
        elif op == "rollback":
            k = rng.randint(0, 2)
            a, b = run(lambda k=k: ours.rollback(k)), run(lambda k=k: theirs.rollback(k))
        elif op == "fill":
            a = run(lambda: (ours.fill_next_token_bitmask(obm), int(obm[0, 0]) & ((1 << n) - 1)))
            b = run(lambda: (theirs.fill_next_token_bitmask(tbm), int(tbm[0, 0]) & ((1 << n) - 1)))
        elif op == "jump":
            a, b = run(ours.find_jump_forward_string), run(theirs.find_jump_forward_string)
        else:
            a, b = run(ours.reset), run(theirs.reset)
        log.append((op, a, b))
        state_a = (ours.is_completed(), ours.is_terminated())
        state_b = (theirs.is_completed(), theirs.is_terminated())
        assert a == b and state_a == state_b, (
            f"step {step}: {op}: grammask {a} {state_a}, xgrammar {b} {state_b}\n"
            + "\n".join(map(str, log[-8:]))
        )


# ---------------------------------------------------------------------------------------------
# every public XGrammar name (tools/xgrammar_compat.py; docs/xgrammar_compat.md)


@pytest.fixture(scope="module")
def compat_rows(xgrammar):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xgrammar_compat.classify()


def test_every_xgrammar_name_exists(compat_rows):
    """Each public name of XGrammar 0.2.8 exists in grammask, or is an allow-listed gap."""
    missing = [r["name"] for r in compat_rows if r["status"] == "MISSING"]
    assert not missing, f"XGrammar names missing from grammask (add them or document a gap): {missing}"
    assert len(compat_rows) > 150


def test_compat_table_is_current(compat_rows):
    """docs/xgrammar_compat.md has every name with its current status and notes, and the current
    summary (its test column may lag behind new tests: `python tools/xgrammar_compat.py`)."""

    def statuses(text: str) -> list:
        return [
            line.split(" | ")[:3] if line.startswith("| `") else line
            for line in text.splitlines()
            if line.startswith(("| `", "Summary:"))
        ]

    assert statuses(xgrammar_compat.DOC.read_text()) == statuses(xgrammar_compat.render(compat_rows)), (
        "docs/xgrammar_compat.md is stale: run python tools/xgrammar_compat.py"
    )


def test_signatures_match_xgrammar_everywhere(compat_rows):
    """Every callable's signature is XGrammar's (plus trailing keyword-only extensions) unless the
    difference is documented in tools/xgrammar_compat.py."""
    bad = [(r["name"], r["note"]) for r in compat_rows if r["status"] == "SIGNATURE DIFFERS"]
    assert not bad, bad


def test_gaps_raise_clear_errors():
    from grammask._compat import GAPS

    for name, (kind, message) in GAPS.items():
        assert not hasattr(grammask, name), f"{name} exists now: remove it from grammask._compat.GAPS"
        with pytest.raises(AttributeError, match=kind) as err:
            getattr(grammask, name)
        assert name in str(err.value) and message in str(err.value)


def _call_with_dummies(fn):
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return fn(*[None] * len(params))


@pytest.mark.parametrize("name", sorted(xgrammar_compat.UNSUPPORTED))
def test_unsupported_names_raise(name):
    """Names listed as unsupported exist and raise UnsupportedFeatureError naming an alternative."""
    found, obj = xgrammar_compat.resolve_grammask(name)
    assert found, name
    if "in progress elsewhere" not in xgrammar_compat.UNSUPPORTED[name]:
        assert obj.__doc__, f"{name} has no docstring"
    if name.startswith("GrammarMatcher."):
        info = xgr.TokenizerInfo(["a", "</s>"], stop_token_ids=[1])
        matcher = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "a"'))
        call = lambda: getattr(matcher, name.split(".")[1])()  # noqa: E731
    elif name.startswith("GrammarCompiler."):
        compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(["a"]))
        call = lambda: _call_with_dummies(getattr(compiler, name.split(".")[1]))  # noqa: E731
    else:
        call = lambda: _call_with_dummies(obj)  # noqa: E731
    with pytest.raises(xgr.UnsupportedFeatureError) as err:
        call()
    assert len(str(err.value)) > 20


def test_documented_entries_exist():
    """The difference and unsupported lists name things grammask has (no stale entries)."""
    for name in list(xgrammar_compat.DIFFERENCES) + list(xgrammar_compat.UNSUPPORTED):
        found, _ = xgrammar_compat.resolve_grammask(name)
        assert found, name


def _public_objects():
    """(name, object) of grammask's public API: __all__, class members, testing, config, kernels."""
    import importlib

    out = []
    for n in grammask.__all__:
        if n in ("__version__", "bitmask_dtype"):
            continue
        obj = getattr(grammask, n)
        out.append((n, obj))
        if inspect.isclass(obj):
            for m, v in vars(obj).items():
                if not m.startswith("_") and (callable(v) or isinstance(v, (property, staticmethod))):
                    out.append((f"{n}.{m}", v))
    for mod in ("testing", "config", "draft_tree"):
        module = importlib.import_module(f"grammask.{mod}")
        out += [(f"{mod}.{n}", getattr(module, n)) for n in module.__all__]
    import pkgutil

    kernels = importlib.import_module("grammask.kernels")
    for info in pkgutil.iter_modules(kernels.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"grammask.kernels.{info.name}")
        out.append((f"kernels.{info.name}", module))
        out += [
            (f"kernels.{info.name}.{n}", getattr(module, n))
            for n in module.__all__
            if n != "apply_token_bitmask_inplace_kernel"
        ]
    return out


# Stubs another change replaces (Lark grammars, structural tags).
IN_PROGRESS_STUBS: set = set()


def test_public_names_have_docstrings():
    undocumented = []
    for name, obj in _public_objects():
        if name in IN_PROGRESS_STUBS:
            continue
        target = obj.__func__ if isinstance(obj, staticmethod) else obj.fget if isinstance(obj, property) else obj
        if inspect.isclass(target) and issubclass(target, BaseException):
            continue  # exception classes from the core are documented in exception.py
        if not (getattr(target, "__doc__", None) or "").strip():
            undocumented.append(name)
    assert not undocumented, undocumented


def test_legacy_0_1_names_warn_and_work():
    """XGrammar 0.1's names (shared/seeds/004) work and warn with the current name."""
    info = xgr.TokenizerInfo(["a", "b", "1", "{", "}", '"', ":", ",", " ", "</s>"], stop_token_ids=[9])

    def warns(fragment):
        return pytest.warns(DeprecationWarning, match=fragment)

    with warns("Grammar.from_ebnf"):
        g = xgr.BNFGrammar('root ::= "a"+')
    assert isinstance(g, xgr.Grammar)
    with warns("Grammar.builtin_json_grammar"):
        json_grammar = xgr.BuiltinGrammar.json()
    with warns("Grammar.from_json_schema"):
        schema_grammar = xgr.BuiltinGrammar.json_schema(json.dumps({"type": "integer"}))
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str
        age: int

    with warns("Grammar.from_json_schema"):
        xgr.BuiltinGrammar.json_schema(Person)
    with warns("GrammarCompiler"):
        cached = xgr.CachedGrammarCompiler(info, max_threads=8)
    assert isinstance(cached, xgr.GrammarCompiler)
    cg = cached.compile_json_schema('{"type": "integer"}')
    with warns("compile_builtin_json_grammar"):
        cached.compile_json_grammar()
    with warns("clear_cache"):
        cached.clear()
    with warns("cache_enabled=False"):
        nocache = xgr.CompiledGrammar(info, max_threads=8)
    assert isinstance(nocache, xgr.GrammarCompiler)
    with warns("compile_grammar"):
        compiled = xgr.CompiledGrammar(g, info)
    assert isinstance(compiled, xgr.CompiledGrammar)
    matcher = xgr.GrammarMatcher(cg)
    with warns("tokenizer_info.vocab_size"):
        assert matcher.vocab_size == 10
    with warns("allocate_token_bitmask"):
        bitmask = xgr.GrammarMatcher.allocate_token_bitmask(10)
    assert tuple(bitmask.shape) == (1, 1)
    matcher.fill_next_token_bitmask(bitmask)
    logits = np.zeros((1, 10), dtype=np.float32)
    with warns("apply_token_bitmask_inplace"):
        xgr.GrammarMatcher.apply_token_bitmask_inplace(logits, np.asarray(bitmask))
    assert np.isfinite(logits[0, 2]) and not np.isfinite(logits[0, 0])  # "1" allowed, "a" not
    with warns("_get_masked_tokens_from_bitmask"):
        rejected = xgr.GrammarMatcher.get_rejected_tokens_from_bitmask(bitmask, 10)
    assert 2 not in rejected and 0 in rejected
    with warns("allocate_token_bitmask"):
        assert tuple(xgr.GrammarMatcher.allocate_token_bitmask(10, 4).shape) == (4, 1)
    assert "BNFGrammar" not in grammask.__all__
    assert str(json_grammar) and str(schema_grammar)


# ---------------------------------------------------------------------------------------------
# config and serialization errors


def test_recursion_depth_config(xgrammar):
    assert xgr.get_max_recursion_depth() == xgrammar.get_max_recursion_depth() == 10000
    for value in (-1, 0, 10**6 + 1, 10**8):
        with pytest.raises(RuntimeError):
            xgr.set_max_recursion_depth(value)
        with pytest.raises(RuntimeError):
            xgrammar.set_max_recursion_depth(value)
    for value in (1, 10**6):
        xgr.set_max_recursion_depth(value)
        assert xgr.get_max_recursion_depth() == value
    xgr.set_max_recursion_depth(10000)
    with xgr.max_recursion_depth(50):
        assert xgr.get_max_recursion_depth() == 50
        with xgr.max_recursion_depth(7):
            assert xgr.get_max_recursion_depth() == 7
        assert xgr.get_max_recursion_depth() == 50
    assert xgr.get_max_recursion_depth() == 10000
    with pytest.raises(KeyError):
        with xgr.max_recursion_depth(9):
            raise KeyError("restored on error")
    assert xgr.get_max_recursion_depth() == 10000


def test_recursion_depth_from_environment():
    import subprocess

    code = "import grammask; print(grammask.get_max_recursion_depth())"
    import os

    cases = [
        ({"XGRAMMAR_MAX_RECURSION_DEPTH": "123"}, "123"),
        ({"GRAMMASK_MAX_RECURSION_DEPTH": "77", "XGRAMMAR_MAX_RECURSION_DEPTH": "123"}, "77"),
        ({"GRAMMASK_MAX_RECURSION_DEPTH": "nope"}, "10000"),
    ]
    for env, want in cases:
        run = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        out = run.stdout.strip()
        assert out == want


def test_serialization_version():
    version = xgr.get_serialization_version()
    assert isinstance(version, str) and version
    assert json.loads(xgr.Grammar.from_ebnf('root ::= "a"').serialize_json())["__VERSION__"] == version


def _deserializers():
    info = xgr.TokenizerInfo(["a", "b", "</s>"])
    compiled = xgr.GrammarCompiler(info).compile_grammar('root ::= "a"')
    return [
        ("Grammar", xgr.Grammar.from_ebnf('root ::= "a"').serialize_json(), xgr.Grammar.deserialize_json),
        ("TokenizerInfo", info.serialize_json(), xgr.TokenizerInfo.deserialize_json),
        ("CompiledGrammar", compiled.serialize_json(), lambda s: xgr.CompiledGrammar.deserialize_json(s, info)),
    ]


@pytest.mark.parametrize("kind", ["Grammar", "TokenizerInfo", "CompiledGrammar"])
def test_deserialize_errors(kind):
    """Malformed input raises DeserializeFormatError (non-JSON also InvalidJSONError, as
    XGrammar raises); a wrong or missing version DeserializeVersionError."""
    text, load = next((t, f) for k, t, f in _deserializers() if k == kind)
    load(text)  # round trip works
    obj = json.loads(text)
    version_key = "__VERSION__"
    assert version_key in obj
    for bad in ("not json", text[:-3], ""):
        with pytest.raises(xgr.DeserializeFormatError) as err:
            load(bad)
        assert isinstance(err.value, xgr.InvalidJSONError)
        assert not isinstance(err.value, xgr.DeserializeVersionError)
    with pytest.raises(xgr.DeserializeFormatError) as err:
        load("[1, 2]")
    assert not isinstance(err.value, xgr.InvalidJSONError)
    with pytest.raises(xgr.DeserializeVersionError):
        load(json.dumps({**obj, version_key: "v16"}))
    with pytest.raises(xgr.DeserializeVersionError):
        load(json.dumps({k: v for k, v in obj.items() if k != version_key}))
