# ruff: noqa: E501  (tables of prose notes)
"""Generate docs/xgrammar_compat.md: every public name of XGrammar 0.2.8 with grammask's status
and the test that covers it.

    python tools/xgrammar_compat.py            # rewrite docs/xgrammar_compat.md
    python tools/xgrammar_compat.py --check    # exit 1 if the file is stale

Needs xgrammar==0.2.8 installed (it is in the ``bench`` extra and the dev environment). The names
are enumerated from XGrammar itself: the top-level module (``__all__`` and its public
submodules), the public members of its classes, the names its ``testing``, ``exception``,
``config``, ``kernels.*`` and ``contrib.hf`` modules define. Each is looked up in grammask:

* **same**: present, with a compatible signature (grammask may add trailing keyword-only
  parameters with defaults);
* **documented difference**: present, behaviour or signature differs as stated (``DIFFERENCES``);
* **unsupported**: present, raises :class:`grammask.UnsupportedFeatureError` (``UNSUPPORTED``);
* **in progress elsewhere** / **not provided**: absent, listed in ``grammask._compat.GAPS``;
  ``grammask.<name>`` raises an ``AttributeError`` that says so;
* **MISSING** / **SIGNATURE DIFFERS**: a bug; ``tests/test_api_compat.py`` fails on it.

The test column names the most specific test (in ``tests/``) whose code mentions the name.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "xgrammar_compat.md"
TESTS = REPO / "tests"

CLASSES = [
    "Grammar",
    "GrammarCompiler",
    "CompiledGrammar",
    "GrammarMatcher",
    "BatchGrammarMatcher",
    "TokenizerInfo",
    "VocabType",
]
# Private members XGrammar's own tests use (reference §1.4, §1.7): compared too.
PRIVATE_MEMBERS = {
    "_debug_print_internal_state",
    "_detect_add_prefix_space_by_encoding",
    "_detect_metadata_from_hf",
    "_detect_vocab_type_from_vocab",
    "_is_byte_level_tokenizer",
    "_is_sentencepiece_tokenizer",
    "_is_tiktoken_tokenizer",
}
MODULES = ["testing", "exception", "config", "contrib.hf"]
# What xgrammar.testing imports from typing, the standard library, torch, pydantic and its own
# binding. Its other imports are names XGrammar code may import from it: those that are also
# top-level names (Grammar, bitmask_dtype, ...) have their rows there (tests/test_api_compat.py
# checks grammask.testing has them, the same objects); the rest get rows as testing.<name>.
TESTING_IMPORTS = {
    "Any", "Dict", "List", "Literal", "Optional", "Tuple", "Type", "Union", "time", "torch",
    "BaseModel", "_core",
}

_LARK = (
    "llguidance's Lark dialect (docs/lark.md): lexing is exact (no greedy lexemes); rule options "
    "lazy, max_chars, max_tokens, capture, temperature, stop/suffix (string literals, regexes or "
    "terminals) and stop_capture work, as do special tokens (<|name|> needs the tokenizer: "
    "compile_lark, or from_lark(tokenizer_info=)); max_chars and max_tokens work on recursive rules "
    "(max_tokens also on left-recursive ones, and on rules left-recursive through each other when "
    "their group is entered through one rule only, or its entry is its only budgeted rule, or none "
    "of its rules has a budget, and on "
    "rules using other max_tokens rules: nested budgets); "
    "@name grammars raise UnsupportedFeatureError"
)
_STAG = (
    "XGrammar 0.2.8's structural-tag format (docs/structural_tags.md); a token given by its text "
    "needs the tokenizer (compile_structural_tag; from_structural_tag takes ids); json_schema "
    "excludes with style json that could occur outside a JSON string raise UnsupportedFeatureError; "
    "free text is UTF-8 and never an added or special token"
)
_SERIAL = (
    "grammask's own JSON format (version `grammask-2`; `grammask-1` is still read), not "
    "interchangeable with XGrammar's; input "
    "that is not JSON raises DeserializeFormatError (also an InvalidJSONError), a missing or other "
    "version DeserializeVersionError"
)

_SERIAL_GRAMMAR = _SERIAL

# name -> what differs (documented; the rest of the behaviour is XGrammar's).
DIFFERENCES: Dict[str, str] = {
    "Grammar.from_structural_tag": _STAG,
    "GrammarCompiler.compile_structural_tag": _STAG,
    "Grammar.from_lark": _LARK,
    "GrammarCompiler.compile_lark": _LARK,
    "allocate_token_bitmask": "returns a numpy int32 array when torch is not installed",
    "bitmask_dtype": "numpy.int32 when torch is not installed",
    "apply_token_bitmask_inplace": (
        'also takes numpy arrays and a CPU bitmask for GPU logits; backend "auto" runs Triton on '
        "CUDA logits (torch operations without Triton); a 1-D row on CUDA is masked right (XGrammar "
        "0.2.8's Triton kernel reads only its first bitmask word); named backends run "
        "grammask.kernels"
    ),
    "get_serialization_version": (
        'returns "grammask-2" (XGrammar: "v16"); the formats differ'
    ),
    "get_max_recursion_depth": "stored and validated only: grammask's parsers use explicit stacks",
    "set_max_recursion_depth": "stored and validated only (1..1,000,000, as XGrammar)",
    "max_recursion_depth": "stored and validated only",
    "hf": "reached lazily (imports transformers on first use); not in grammask.__all__",
    "Grammar.serialize_json": _SERIAL_GRAMMAR,
    "Grammar.deserialize_json": _SERIAL_GRAMMAR,
    "CompiledGrammar.serialize_json": _SERIAL_GRAMMAR,
    "CompiledGrammar.deserialize_json": _SERIAL_GRAMMAR,
    "TokenizerInfo.serialize_json": _SERIAL,
    "TokenizerInfo.deserialize_json": _SERIAL,
    "TokenizerInfo.from_huggingface": (
        "the tokenizer's declared special tokens are special ids (never produced by grammar text); "
        "special_tokens=\"xgrammar\" restores XGrammar's; stop tokens are XGrammar's "
        "(extra_stop_tokens=True adds end-of-turn tokens)"
    ),
    "TokenizerInfo.special_token_ids": (
        "also the declared special tokens when built by from_huggingface (default "
        'special_tokens="grammask")'
    ),
    "GrammarMatcher.fill_next_token_bitmask": "bits past vocab_size in the last word are 0 (XGrammar sets them to 1)",
    "GrammarMatcher.rollback": "a negative count raises ValueError (XGrammar ignores it)",
    "GrammarMatcher.temperature": (
        "per-rule temperatures as XGrammar's (innermost active rule, maximum over ambiguous paths); "
        "the ambiguity warning is a Python UserWarning, not a C++ stderr line"
    ),
    "GrammarMatcher.get_captures": (
        "only occurrences on a derivation of the whole accepted text (XGrammar also lists dead "
        "ones with deduplicate=False); ambiguous prefixes list nested (later-starting) "
        "occurrences first at the same end"
    ),
    "GrammarMatcher._debug_print_internal_state": "a one-line summary, not XGrammar's parser stacks",
    "GrammarMatcher.traverse_draft_tree": (
        "malformed trees raise InvalidArgumentError (a RuntimeError and a ValueError); the bitmask "
        "must be contiguous; numpy arrays work like tensors"
    ),
    "BatchGrammarMatcher.batch_accept_token": "also takes tuples and numpy arrays of ids (XGrammar: list/tuple)",
    "testing._json_schema_to_ebnf": 'only json_format="json" (the XML styles raise UnsupportedFeatureError)',
    "testing._generate_range_regex": "the same language (checked string by string); the regex is spelled differently",
    "testing._generate_float_regex": "the same language (checked string by string); the regex is spelled differently",
    "testing._ebnf_to_grammar_no_normalization": "same as Grammar.from_ebnf (grammask has no separate normalization)",
    "kernels.apply_token_bitmask_inplace_cuda.apply_token_bitmask_inplace_cuda": (
        "torch operations on the GPU, no nvcc/.cu; raises UnsupportedFeatureError without CUDA"
    ),
    "kernels.apply_token_bitmask_inplace_triton.apply_token_bitmask_inplace_triton": (
        "grammask's own Triton kernel; raises UnsupportedFeatureError without Triton or a GPU"
    ),
    "kernels.apply_token_bitmask_inplace_triton.apply_token_bitmask_inplace_kernel": (
        "grammask's own @triton.jit kernel (different parameters), built on first access"
    ),
    "kernels.apply_token_bitmask_mlx.apply_token_bitmask_mlx": "raises UnsupportedFeatureError without mlx (never at import)",
    "kernels.apply_token_bitmask_inplace_torch_compile.apply_token_bitmask_inplace_torch_compile": (
        "compiled on the first call (XGrammar: at import)"
    ),
}

# name -> what to use instead; calling it raises UnsupportedFeatureError.
UNSUPPORTED: Dict[str, str] = {
    "testing._is_rule_fsm_accept_string": "XGrammar internal; use testing._is_grammar_accept_string",
    "testing._get_allow_empty_rule_ids": 'XGrammar internal; use testing._is_grammar_accept_string(g, "")',
    "testing._print_grammar_fsms": "XGrammar's FSM printer; use str(grammar)",
    **{
        f"testing.GrammarFunctor.{p}": "XGrammar's internal grammar pass; grammask's run inside the compiler"
        for p in (
            "structure_normalizer",
            "rule_inliner",
            "byte_string_fuser",
            "dead_code_eliminator",
            "lookahead_assertion_analyzer",
            "grammar_optimizer",
            "fsm_builder",
            "repetition_normalizer",
        )
    },
}


def _params(fn: Any) -> Optional[List[Tuple[str, Any, Any]]]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    out = []
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        d = p.default
        if type(d).__name__ == "VocabType":
            d = d.name
        out.append((p.name, p.kind, d))
    return out


# Parameter names where XGrammar's code and grammask's differ only in spelling.
_NAME_ALIASES = {("CompiledGrammar.deserialize_json", "json_string"): "json_str"}


def signature_difference(name: str, ours: Any, theirs: Any) -> Optional[str]:
    """None when grammask's signature is XGrammar's, possibly plus trailing keyword-only
    parameters with defaults; else a description."""
    if inspect.isclass(theirs):
        ours, theirs = getattr(ours, "__init__", None), getattr(theirs, "__init__", None)
        if theirs is object.__init__ or theirs is None:
            return None
    if not callable(theirs) or not callable(ours):
        return None
    a, b = _params(ours), _params(theirs)
    if a is None or b is None:
        return None
    a = [(_NAME_ALIASES.get((name, n), n), k, d) for n, k, d in a]
    extra = a[len(b) :]
    if a[: len(b)] == b and all(
        k == inspect.Parameter.KEYWORD_ONLY and d is not inspect.Parameter.empty
        for _, k, d in extra
    ):
        return None
    fmt = lambda ps: ", ".join(n for n, _, _ in ps)  # noqa: E731
    return f"grammask ({fmt(a)}) vs XGrammar ({fmt(b)})"


def _defined_in(module: Any) -> List[str]:
    return sorted(
        n
        for n, v in vars(module).items()
        if not n.startswith("__") and getattr(v, "__module__", None) == module.__name__
    )


def xgrammar_names() -> List[Tuple[str, Any]]:
    """(qualified name, XGrammar object or None when it cannot be imported here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import xgrammar
        import xgrammar.kernels
        import xgrammar.testing

    out: Dict[str, Any] = {}
    top = set(xgrammar.__all__) | {n for n in dir(xgrammar) if not n.startswith("_")}
    for n in sorted(top):
        out[n] = getattr(xgrammar, n)
    for cls_name in CLASSES:
        cls = getattr(xgrammar, cls_name)
        if cls_name == "VocabType":
            for member in cls.__members__:
                out[f"VocabType.{member}"] = cls[member]
            continue
        for klass in cls.__mro__:
            if klass is object or klass.__module__ == "xgrammar.base":
                continue
            for n in vars(klass):
                if n.startswith("__") or (n.startswith("_") and n not in PRIVATE_MEMBERS):
                    continue
                out.setdefault(f"{cls_name}.{n}", inspect.getattr_static(cls, n))
    for mod_name in MODULES:
        mod = importlib.import_module(f"xgrammar.{mod_name}")
        names = _defined_in(mod)
        if mod_name == "testing":
            names += [
                n
                for n in dir(mod)
                if not n.startswith("__")
                and n not in TESTING_IMPORTS
                and getattr(xgrammar, n, None) is not getattr(mod, n)
            ]
        for n in sorted(set(names)):
            obj = getattr(mod, n)
            out[f"{mod_name}.{n}"] = obj
            if inspect.isclass(obj) and mod_name == "testing":
                for m in vars(obj):
                    if not m.startswith("_"):
                        out[f"{mod_name}.{n}.{m}"] = getattr(obj, m)
    out["kernels"] = xgrammar.kernels
    for info in pkgutil.iter_modules(xgrammar.kernels.__path__):
        mod_name = f"kernels.{info.name}"
        out[mod_name] = None
        try:
            mod = importlib.import_module(f"xgrammar.{mod_name}")
        except ImportError:
            mod = None
        names = _kernel_names(info.name) if mod is None else _defined_in(mod)
        if mod is not None:
            names += [
                n
                for n, v in vars(mod).items()
                if type(v).__name__ == "JITFunction" and n not in names
            ]
        for n in sorted(set(names)):
            if n.startswith("_"):
                continue
            out[f"{mod_name}.{n}"] = getattr(mod, n, None) if mod is not None else None
    return sorted(out.items(), key=lambda kv: _sort_key(kv[0]))


def _kernel_names(module: str) -> List[str]:
    """Functions of a kernel module XGrammar cannot import here (no CUDA / no MLX), read from
    its source."""
    import xgrammar.kernels

    path = Path(xgrammar.kernels.__path__[0]) / f"{module}.py"
    tree = ast.parse(path.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]


def _sort_key(name: str) -> Tuple[int, str]:
    head = name.split(".")[0]
    order = 0 if "." not in name else 1 if head in CLASSES else 2
    return (order, name.lower())


def resolve_grammask(name: str) -> Tuple[bool, Any]:
    """(found, object) for a qualified name in grammask."""
    import grammask

    obj: Any = grammask
    parts = name.split(".")
    for i, part in enumerate(parts):
        if inspect.ismodule(obj):
            try:
                obj = getattr(obj, part)
                continue
            except AttributeError:
                try:
                    obj = importlib.import_module(f"{obj.__name__}.{part}")
                    continue
                except ImportError:
                    return False, None
        try:
            obj = inspect.getattr_static(obj, part)
        except AttributeError:
            return False, None
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
    return True, obj


def _test_index() -> List[Tuple[str, str]]:
    """(test id, source) of every test function in tests/."""
    out = []
    for path in sorted(TESTS.glob("test_*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                out.append((f"{path.name}::{node.name}", ast.get_source_segment(text, node) or ""))
    return out


GENERIC_TESTS = {
    "test_api_compat.py::test_every_xgrammar_name_exists",
    "test_api_compat.py::test_signatures_match_xgrammar_everywhere",
}


# Tests for names a text search cannot pin down (module names are common words).
TEST_OVERRIDES = {
    "config": "test_api_compat.py::test_recursion_depth_config",
    "hf": "test_contrib_hf.py",
    "contrib": "test_contrib_hf.py",
    "kernels": "test_kernels.py::test_kernel_names_match_xgrammar",
    "testing": "test_api_compat.py::test_testing_helpers_work",
    "exception": "test_api_compat.py::test_exceptions_derive_from_runtime_error",
}


def covering_test(name: str, index: List[Tuple[str, str]], is_module: bool = False) -> str:
    """The test that uses the name most (preferring tests that also name its class)."""
    if name in TEST_OVERRIDES:
        return TEST_OVERRIDES[name]
    if is_module and "." not in name:
        return "test_api_compat.py::test_every_xgrammar_name_exists"
    leaf = name.split(".")[-1]
    pattern = re.compile(r"(?<![\w])" + re.escape(leaf) + r"(?![\w])")
    owner = name.split(".")[-2] if "." in name else None
    best, best_key = None, (False, 0)
    for tid, src in index:
        if tid in GENERIC_TESTS:
            continue
        count = len(pattern.findall(src))
        if not count:
            continue
        key = (bool(owner and owner in src), count)
        if best is None or key > best_key:
            best, best_key = tid, key
    if best is None and name.startswith("kernels."):
        return "test_kernels.py::test_kernel_names_match_xgrammar"
    return best or "test_api_compat.py::test_every_xgrammar_name_exists"


def classify() -> List[Dict[str, str]]:
    """One row per XGrammar name."""
    from grammask._compat import GAPS

    index = _test_index()
    rows = []
    for name, theirs in xgrammar_names():
        head = name.split(".")[0]
        row = {
            "name": name,
            "test": covering_test(name, index, inspect.ismodule(theirs) or theirs is None),
        }
        if head in GAPS:
            kind, message = GAPS[head]
            row.update(
                status=kind, note=message, test="test_api_compat.py::test_gaps_raise_clear_errors"
            )
        else:
            found, ours = resolve_grammask(name)
            if not found:
                row.update(status="MISSING", note="")
            elif name in UNSUPPORTED:
                row.update(
                    status="unsupported: raises UnsupportedFeatureError",
                    note=UNSUPPORTED[name],
                    test="test_api_compat.py::test_unsupported_names_raise",
                )
            else:
                diff = signature_difference(name, ours, theirs) if theirs is not None else None
                if name in DIFFERENCES:
                    row.update(status="documented difference", note=DIFFERENCES[name])
                elif diff:
                    row.update(status="SIGNATURE DIFFERS", note=diff)
                else:
                    row.update(status="same", note="")
        rows.append(row)
    return rows


def render(rows: List[Dict[str, str]]) -> str:
    counts: Dict[str, int] = {}
    for r in rows:
        key = r["status"].split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    lines = [
        "# XGrammar 0.2.8 compatibility",
        "",
        "Generated by `python tools/xgrammar_compat.py` from XGrammar 0.2.8 itself (do not edit by "
        "hand; `--check` tells whether it is current). Every public XGrammar name: its status in "
        "grammask and the test that covers it. `tests/test_api_compat.py` fails on a name that is "
        "missing without being listed in `grammask._compat.GAPS`, and on a signature that differs "
        "without a documented difference.",
        "",
        "Summary: "
        + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        + f" ({len(rows)} names).",
        "",
        "Statuses: **same** (present, compatible signature; grammask may add trailing keyword-only "
        "parameters); **documented difference** (present; what differs is in the notes); "
        "**unsupported** (present, raises `UnsupportedFeatureError` naming what to use instead); "
        "**in progress elsewhere** / **not provided** (absent; `grammask.<name>` raises an "
        "`AttributeError` that says so).",
        "",
        "XGrammar 0.1 names (`BNFGrammar`, `BuiltinGrammar.json()`, `BuiltinGrammar.json_schema()`, "
        "`CachedGrammarCompiler`, `CompiledGrammar(tokenizer_info)`, "
        "`GrammarMatcher.allocate_token_bitmask`, `GrammarMatcher.apply_token_bitmask_inplace`, "
        "`GrammarMatcher.get_rejected_tokens_from_bitmask`, `GrammarMatcher.vocab_size`) work and "
        "emit a `DeprecationWarning` naming the current name (`grammask/_legacy.py`, "
        "`tests/test_api_compat.py::test_legacy_0_1_names_warn_and_work`).",
        "",
        "`grammask.testing` has every name `xgrammar.testing` has, its re-exports included "
        "(`Grammar`, `GrammarMatcher`, `bitmask_dtype`, ...: the same objects as grammask's "
        "top-level names; `tests/test_api_compat.py::test_testing_has_every_name_of_xgrammars_testing`).",
        "",
        "| XGrammar name | grammask | notes | test |",
        "|---|---|---|---|",
    ]
    for r in rows:
        note = r["note"].replace("|", "\\|")
        lines.append(f"| `{r['name']}` | {r['status']} | {note} | `{r['test']}` |")
    return "\n".join(lines) + "\n"


def main(argv: List[str]) -> int:
    sys.path.insert(0, str(REPO / "tests"))
    text = render(classify())
    if "--check" in argv:
        current = DOC.read_text() if DOC.exists() else ""
        if current != text:
            print(f"{DOC} is stale: run python tools/xgrammar_compat.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
