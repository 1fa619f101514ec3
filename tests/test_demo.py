"""``grammask demo`` and the shared decode loop: a real decode over the embedded tiny model always
ends valid, the token budget closes structures, and ``import grammask`` stays light."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import Future

import pytest


def test_import_grammask_does_not_import_torch_or_fastapi():
    code = (
        "import sys, grammask, grammask.serve; "
        "heavy = [m for m in ('torch', 'fastapi', 'transformers', 'uvicorn') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
jsonschema = pytest.importorskip("jsonschema")

from grammask import GrammarCompiler, TokenizerInfo  # noqa: E402
from grammask.demo import SAMPLE_SCHEMA  # noqa: E402
from grammask.serve.decode import generate  # noqa: E402
from grammask.serve.engine import TextDecoder  # noqa: E402
from grammask.tiny_model import build_tiny_model, build_tiny_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    tok = build_tiny_tokenizer()
    model = build_tiny_model(len(tok))
    info = TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
    return model, tok, info, GrammarCompiler(info)


def _run(tiny, compiled, max_tokens, seed):
    model, tok, info, _ = tiny
    fut = Future()
    fut.set_result((compiled, 0.0))
    ids = tok("Describe a person.", add_special_tokens=False)["input_ids"]
    gen = generate(model, ids, info=info, compile_future=fut, max_tokens=max_tokens, seed=seed)
    text = TextDecoder(info, skip=set(info.special_token_ids) | set(info.stop_token_ids)).decode(
        gen.token_ids
    )
    return gen, text


def test_tiny_model_is_deterministic(tiny):
    model, tok, _, _ = tiny
    again = build_tiny_model(len(tok))
    for a, b in zip(model.parameters(), again.parameters()):
        assert torch.equal(a, b)
    assert build_tiny_tokenizer().get_vocab() == tok.get_vocab()


@pytest.mark.parametrize("seed", range(4))
def test_sample_schema_decodes_valid(tiny, seed):
    compiled = tiny[3].compile_json_schema(SAMPLE_SCHEMA, any_whitespace=False)
    gen, text = _run(tiny, compiled, 256, seed)
    assert gen.finish_reason == "stop" and gen.completion_tokens <= 256
    jsonschema.validate(json.loads(text), SAMPLE_SCHEMA)
    assert gen.grammar_s > 0 and gen.model_s > 0


@pytest.mark.parametrize("max_tokens", [6, 12, 24, 48])
def test_budget_closes_any_json_object(tiny, max_tokens):
    compiled = tiny[3].compile_json_schema({"type": "object"}, any_whitespace=False)
    for seed in range(3):
        gen, text = _run(tiny, compiled, max_tokens, seed)
        assert gen.completion_tokens <= max_tokens
        assert gen.finish_reason == "stop", text
        assert isinstance(json.loads(text), dict)


def test_budget_too_small_is_length(tiny):
    compiled = tiny[3].compile_json_schema(SAMPLE_SCHEMA, any_whitespace=False)
    gen, _ = _run(tiny, compiled, 5, 0)
    assert gen.finish_reason == "length" and gen.grammar_completed is False


def test_demo_command_ends_valid():
    out = subprocess.run(
        [sys.executable, "-m", "grammask", "demo"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "valid:     yes" in out.stdout
    for field in ("grammar_init_s", "grammar_per_token_s", "model_per_token_s"):
        assert field in out.stdout


def test_demo_bad_grammar_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.ebnf"
    bad.write_text('root ::= "a" (')
    out = subprocess.run(
        [sys.executable, "-m", "grammask", "demo", "--grammar", str(bad)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1
    assert (
        out.stderr.strip().startswith("grammask demo: error:")
        and len(out.stderr.strip().splitlines()) == 1
    )


def test_model_directory_loads_and_decodes(tiny, tmp_path):
    """``--model DIR`` path: a saved model and tokenizer load back and decode under a regex."""
    from grammask.tiny_model import load_model_and_tokenizer

    model, tok, _, _ = tiny
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, tok2, model_id = load_model_and_tokenizer(str(tmp_path), device="cpu")
    assert model_id == str(tmp_path)
    info = TokenizerInfo.from_huggingface(tok2, vocab_size=loaded.config.vocab_size)
    fut = Future()
    fut.set_result((GrammarCompiler(info).compile_regex("[a-z]{3,6}@example\\.com"), 0.0))
    gen = generate(loaded, tok2("hi")["input_ids"], info=info, compile_future=fut, max_tokens=40, seed=0)
    text = TextDecoder(info, skip=set(info.stop_token_ids)).decode(gen.token_ids)
    assert gen.finish_reason == "stop" and text.endswith("@example.com"), text
