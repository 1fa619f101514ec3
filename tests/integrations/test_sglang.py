"""SGLang with the grammask plugin loaded, on CPU, no model.

SGLang's `load_plugins()` runs the `grammask` entry point (group `sglang.srt.plugins`), which
adds `grammask` to `--grammar-backend` and to SGLang's grammar-backend registry. The backend is
then made the way SGLang makes it (`create_grammar_backend` with `--grammar-backend grammask`
when the runtime context can be installed on this machine, else the registry's factory), and
each request kind goes through SGLang's own dispatch (`_init_value_dispatch`) and is stepped
token by token through the `BaseGrammarObject` contract.
"""

from __future__ import annotations

import argparse

import pytest

sglang = pytest.importorskip("sglang", reason="SGLang is not installed here: run .ci/integrations")

import torch  # noqa: E402
from cases import (  # noqa: E402
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

# SGLang's request keys: ("json", schema), ("regex", ..), ("ebnf", ..), ("structural_tag", ..).
# It has no choice or Lark kinds; choices arrive as EBNF alternatives.
KEY = {
    "json": "json",
    "json_object": "json",
    "regex": "regex",
    "ebnf": "ebnf",
    "choice": "ebnf",
    "structural_tag": "structural_tag",
}
SGLANG_CASES = [c for c in CASES if c.kind in KEY]
OVERHEAD: dict = {}
# (family, case) -> {reason: #tokens on which the masks differ from SGLang's XGrammar backend}
MASK_DIFFS: dict = {}


@pytest.fixture(scope="module", autouse=True)
def plugins_loaded():
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY

    assert "grammask" in GRAMMAR_BACKEND_REGISTRY, "SGLang did not run the grammask entry point"


def test_grammar_backend_flag_accepts_grammask():
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    args = parser.parse_args(["--model-path", "m", "--grammar-backend", "grammask"])
    assert args.grammar_backend == "grammask"


_BACKENDS: dict = {}


def make_backend(family: str):
    if family not in _BACKENDS:
        from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY

        tok = hf_tokenizer(family)
        server_args = argparse.Namespace(
            grammar_backend="grammask",
            constrained_json_disable_any_whitespace=False,
            constrained_json_max_whitespace_cnt=None,
        )
        eos = {tok.eos_token_id} if tok.eos_token_id is not None else None
        _BACKENDS[family] = GRAMMAR_BACKEND_REGISTRY["grammask"](
            server_args, tok, TOKENIZERS[family], eos
        )
    return _BACKENDS[family]


def dispatch(family: str, case):
    backend = make_backend(family)
    spec = case.spec
    if case.name == "choice":
        spec = " | ".join(f'"{c}"' for c in __import__("json").loads(spec))
        spec = f"root ::= {spec}"
    return backend._init_value_dispatch((KEY[case.kind], spec), require_reasoning=False)


@pytest.mark.parametrize("family", list(TOKENIZERS))
@pytest.mark.parametrize("case", SGLANG_CASES, ids=[c.name for c in SGLANG_CASES])
def test_request_runs_token_by_token(family, case):
    from sglang.srt.constrained.base_grammar_backend import GrammarRow, InvalidGrammarObject

    xfail_unless_supported(case)
    grammar = dispatch(family, case)
    assert not isinstance(grammar, InvalidGrammarObject), grammar.error_message
    backend = make_backend(family)
    info = backend.tokenizer_info
    tok = hf_tokenizer(family)
    tokens = tokens_for(tok, info, case.instance)
    n = TOKENIZERS[family]
    mask = grammar.allocate_vocab_mask(vocab_size=n, batch_size=3, device="cpu")
    assert mask.dtype == torch.int32 and mask.shape == (3, (n + 31) // 32)
    stops = set(info.stop_token_ids)

    grammar.fill_vocab_mask(mask, 2)
    bad = first_disallowed(mask[2], n, stops)
    with pytest.raises(ValueError):
        grammar.accept_token(bad)

    # The cache hands out copies: a copy is a fresh matcher on the same compiled grammar.
    twin = grammar.copy()
    assert twin is not grammar and twin.matcher is not grammar.matcher
    fill, accept = Timer(), Timer()
    for t in tokens:
        with fill:
            grammar.fill_vocab_mask(mask, 0)
        # The batched form (as SGLang's sampling_batch_info calls it) fills the same rows.
        type(grammar).fill_vocab_mask_batched([GrammarRow(row=1, grammar=twin)], mask)
        assert torch.equal(mask[0], mask[1])
        assert bit(mask[0], t), f"token {t} ({tok.decode([t])!r}) is masked out"
        with accept:
            grammar.accept_token(t)
        twin.accept_token(t)
        assert not grammar.is_terminated()
    OVERHEAD[(family, case.name)] = (fill.per_us(), accept.per_us(), len(tokens))

    # Apply on CPU logits: only allowed tokens survive.
    grammar.fill_vocab_mask(mask, 0)
    logits = torch.zeros((1, n))
    moved = type(grammar).move_vocab_mask(mask[:1], "cpu")
    grammar.apply_vocab_mask(logits, moved)
    stop = info.stop_token_ids[0]
    bits = torch.tensor([bit(mask[0], i) for i in range(n)])
    assert torch.equal(torch.isfinite(logits[0]), bits) and bits[stop]

    grammar.accept_token(stop)
    assert grammar.is_terminated()
    grammar.rollback(1)
    assert not grammar.is_terminated()
    k = min(2, len(tokens))
    grammar.rollback(k)
    for t in tokens[len(tokens) - k :] + [stop]:
        grammar.accept_token(t)
    assert grammar.is_terminated()
    assert grammar.try_jump_forward(tok) is None or isinstance(
        grammar.try_jump_forward(tok)[1], str
    )


_XGRAMMAR_BACKENDS: dict = {}


def xgrammar_dispatch(family: str, case):
    """The same request through SGLang's own XGrammar backend (real XGrammar 0.2.8)."""
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    if family not in _XGRAMMAR_BACKENDS:
        tok = hf_tokenizer(family)
        eos = [tok.eos_token_id] if tok.eos_token_id is not None else None
        _XGRAMMAR_BACKENDS[family] = XGrammarGrammarBackend(tok, TOKENIZERS[family], eos)
    spec = case.spec
    if case.name == "choice":
        spec = "root ::= " + " | ".join(f'"{c}"' for c in __import__("json").loads(spec))
    return _XGRAMMAR_BACKENDS[family]._init_value_dispatch((KEY[case.kind], spec), require_reasoning=False)


@pytest.mark.parametrize("family", list(TOKENIZERS))
@pytest.mark.parametrize("case", SGLANG_CASES, ids=[c.name for c in SGLANG_CASES])
def test_masks_equal_xgrammar(family, case):
    """Masks of `--grammar-backend grammask` and `--grammar-backend xgrammar` at every state of the
    instance. Stop ids are compared apart (grammask also stops on <|eom_id|>-style tokens); JSON
    differences must each be explained (canonical spelling, boundary whitespace: cases.py)."""
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    xfail_unless_supported(case)
    theirs = xgrammar_dispatch(family, case)
    if isinstance(theirs, InvalidGrammarObject):
        pytest.skip(f"XGrammar does not accept this {case.kind} request: {theirs.error_message}")
    ours = dispatch(family, case)
    info = make_backend(family).tokenizer_info
    n = TOKENIZERS[family]
    decoded = info.decoded_vocab
    tokens = tokens_for(hf_tokenizer(family), info, case.instance)
    stop_ids = set(info.stop_token_ids) | set(hf_tokenizer(family).all_special_ids)
    a = ours.allocate_vocab_mask(vocab_size=n, batch_size=1, device="cpu")
    b = theirs.allocate_vocab_mask(vocab_size=n, batch_size=1, device="cpu")
    special = set(info.special_token_ids)
    reasons = MASK_DIFFS.setdefault((family, case.name), {})
    for step, t in enumerate(tokens + [None]):
        ours.fill_vocab_mask(a, 0)
        theirs.fill_vocab_mask(b, 0)
        prefix = b"".join(decoded[x] for x in tokens[:step])
        unexplained = unexplained_mask_differences(
            case.kind, a[0], b[0], n, decoded, prefix, stop_ids, special, theirs.ctx, reasons
        )
        assert not unexplained, f"step {step}: masks differ on {[(i, decoded[i], bit(a[0], i)) for i in unexplained[:10]]}"
        if t is not None:
            ours.accept_token(t)
            theirs.accept_token(t)


def test_jump_forward_string():
    grammar = make_backend("llama3")._init_value_dispatch(
        ("ebnf", 'root ::= "hello world" [0-9]'), False
    )
    helper = grammar.try_jump_forward(hf_tokenizer("llama3"))
    assert helper is not None and helper[1] == "hello world"
    assert grammar.jump_forward_str_state(helper) == ("hello world", -1)


@pytest.mark.parametrize(
    "key, fragment",
    [
        (("json", '{"type": "object", "properties": {"a": {"type": "strin"}}}'), "strin"),
        (("json", "{not json"), ""),
        (("regex", "(unclosed"), ""),
        (("ebnf", "root ::= ("), ""),
        (
            ("json", '{"type": "array", "items": {"type": "integer"}, "uniqueItems": true}'),
            "uniqueItems",
        ),
    ],
)
def test_bad_input_gives_sglangs_invalid_grammar_object(key, fragment):
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    grammar = make_backend("llama3")._init_value_dispatch(key, require_reasoning=False)
    assert isinstance(grammar, InvalidGrammarObject)
    assert grammar.error_message and fragment in grammar.error_message


def test_create_grammar_backend_with_the_flag():
    """SGLang's own factory, reading `--grammar-backend grammask` from its runtime context."""
    from sglang.srt.constrained.base_grammar_backend import create_grammar_backend
    from sglang.srt.runtime_context import get_context
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    args = parser.parse_args(
        ["--model-path", "m", "--grammar-backend", "grammask", "--device", "cpu"]
    )
    try:
        server_args = ServerArgs.from_cli_args(args)
        get_context().set_server_args(server_args)
    except Exception as e:  # resolving ServerArgs needs a model config and a device
        pytest.skip(
            f"SGLang cannot resolve its server arguments without a model here: {type(e).__name__}: {e}"
        )
    tok = hf_tokenizer("llama3")
    backend = create_grammar_backend(server_args, tok, TOKENIZERS["llama3"], {tok.eos_token_id})
    assert type(backend).__name__ == "GrammaskGrammarBackend"


def test_zz_report_overhead(capsys):
    if not OVERHEAD:
        pytest.skip("no overhead measured (run the whole file)")
    with capsys.disabled():
        print("\nSGLang GrammaskGrammar, per token: fill_vocab_mask / accept_token (µs), tokens")
        for (family, name), (f, a, n) in sorted(OVERHEAD.items()):
            print(f"  {family:8s} {name:22s} {f:8.1f} {a:8.1f} {n:4d}")
        print("JSON masks against --grammar-backend xgrammar, every difference explained (tokens per reason):")
        for (family, name), total in sorted(MASK_DIFFS.items()):
            print(f"  {family:8s} {name:22s} {total}")
