"""Shared fixtures of the Python test suite.

Real tokenizers live in ``<shared>/tokenizers/<family>``, where ``<shared>`` is ``$GRAMMASK_SHARED``
or else ``../shared`` next to the repository root. Tests that need them skip with a message naming
what is missing; everything else runs on synthetic vocabularies.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import grammask as xgr
import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# tests/integrations/ needs vLLM, SGLang, llama-cpp-python or MLX, each in its own environment:
# `.ci/integrations` (make test-integrations) builds them and sets GRAMMASK_INTEGRATIONS=1.
collect_ignore = [] if os.environ.get("GRAMMASK_INTEGRATIONS") == "1" else ["integrations"]
CORPUS_DIR = REPO_ROOT / "testdata" / "grammars"


def shared_dir() -> Path | None:
    """The shared data directory, or None when it cannot be found."""
    env = os.environ.get("GRAMMASK_SHARED")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared")
    for c in candidates:
        if (c / "tokenizers").is_dir():
            return c
    return None


def _looked_in() -> str:
    env = os.environ.get("GRAMMASK_SHARED")
    where = [f"$GRAMMASK_SHARED={env}"] if env else ["$GRAMMASK_SHARED (unset)"]
    where.append(str(REPO_ROOT.parent / "shared"))
    return ", ".join(where)


def tokenizer_dir(family: str) -> Path:
    """``<shared>/tokenizers/<family>``, or skip the test saying what is missing."""
    d = shared_dir()
    if d is None:
        pytest.skip(f"shared data dir with tokenizers/ not found (looked in {_looked_in()})")
    path = d / "tokenizers" / family
    if not (path / "tokenizer.json").is_file():
        pytest.skip(f"tokenizer {family!r} missing: no {path / 'tokenizer.json'}")
    return path


@cache
def _hf_tokenizer_cached(family: str) -> Any:
    import transformers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir(family)))


def hf_tokenizer(family: str) -> Any:
    """The Hugging Face tokenizer of a family (cached), or skip."""
    pytest.importorskip("transformers", reason="transformers is not installed")
    tokenizer_dir(family)  # skips with a clear message before the cache is touched
    return _hf_tokenizer_cached(family)


@cache
def _tokenizer_info_cached(family: str, vocab_size: int | None) -> xgr.TokenizerInfo:
    return xgr.TokenizerInfo.from_huggingface(_hf_tokenizer_cached(family), vocab_size=vocab_size)


def tokenizer_info(family: str, vocab_size: int | None = None) -> xgr.TokenizerInfo:
    """A cached TokenizerInfo of a real family (``vocab_size`` pads the logits), or skip."""
    hf_tokenizer(family)
    return _tokenizer_info_cached(family, vocab_size)


@cache
def _compiler_cached(family: str, vocab_size: int | None) -> xgr.GrammarCompiler:
    return xgr.GrammarCompiler(_tokenizer_info_cached(family, vocab_size))


def compiler(family: str, vocab_size: int | None = None) -> xgr.GrammarCompiler:
    """A cached GrammarCompiler of a real family, or skip."""
    tokenizer_info(family, vocab_size)
    return _compiler_cached(family, vocab_size)


def tokenize(tok: Any, info: Any, doc: str) -> list:
    """The tokenizer's own ids for ``doc`` when their bytes spell it exactly, else a greedy
    longest-match over the decoded vocabulary (still real tokens)."""
    decoded = info.decoded_vocab
    special = set(info.special_token_ids)
    ids = tok.encode(doc, add_special_tokens=False)
    if b"".join(decoded[i] for i in ids) == doc.encode():
        return ids
    by_bytes = {}
    for i, d in enumerate(decoded):
        if d and i not in special and i not in info.stop_token_ids:
            by_bytes.setdefault(d, i)
    data = doc.encode()
    out, pos = [], 0
    while pos < len(data):
        for n in range(min(32, len(data) - pos), 0, -1):
            t = by_bytes.get(data[pos : pos + n])
            if t is not None:
                out.append(t)
                pos += n
                break
        else:
            raise AssertionError(f"byte {data[pos]:#x} has no token")
    return out


# ---------------------------------------------------------------------------------------------
# Synthetic vocabularies


def byte_vocab(extra: Sequence[bytes] = (), stop: bool = True) -> list[bytes]:
    """Every single byte, then ``extra``, then ``</s>`` (the stop token) when ``stop``."""
    toks = [bytes([b]) for b in range(256)] + list(extra)
    if stop:
        toks.append(b"</s>")
    return toks


def small_info(
    tokens: Sequence[bytes],
    *,
    stop_ids: list[int] | None = None,
    vocab_size: int | None = None,
    special: bool = False,
) -> xgr.TokenizerInfo:
    """A RAW TokenizerInfo over ``tokens`` (the last token is the stop token unless ``stop_ids``)."""
    if stop_ids is None:
        stop_ids = [len(tokens) - 1]
    return xgr.TokenizerInfo(
        list(tokens), xgr.VocabType.RAW, vocab_size=vocab_size, stop_token_ids=stop_ids
    )


def matcher_for(ebnf: str, tokens: Sequence[bytes], **kwargs: Any) -> xgr.GrammarMatcher:
    info = small_info(tokens)
    return xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar(ebnf), **kwargs)


def allowed_ids(matcher: xgr.GrammarMatcher, vocab_size: int) -> np.ndarray:
    """The token ids the matcher's filled bitmask allows."""
    bm = np.zeros(xgr.get_bitmask_shape(1, vocab_size), dtype=np.int32)
    matcher.fill_next_token_bitmask(bm)
    bits = np.unpackbits(bm.view(np.uint8), axis=-1, bitorder="little")[0, :vocab_size].astype(bool)
    return np.flatnonzero(bits)


def bool_mask(matcher: xgr.GrammarMatcher, vocab_size: int) -> np.ndarray:
    bm = np.zeros(xgr.get_bitmask_shape(1, vocab_size), dtype=np.int32)
    matcher.fill_next_token_bitmask(bm)
    return np.unpackbits(bm.view(np.uint8), axis=-1, bitorder="little")[0, :vocab_size].astype(bool)


def run_python(code: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter with the same ``sys.path`` (so a crash or a hang fails
    the calling test instead of killing pytest)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


# ---------------------------------------------------------------------------------------------
# No skip for a missing package
#
# The `test` extra installs everything the suite needs, peer engines included. A test that skips
# because a module cannot be imported therefore means a broken set-up, and fails the run: CI must
# not stay green on a machine where a dependency is missing. Skips for missing *data* (the shared
# tokenizers, MaskBench) stay skips with their message. Set GRAMMASK_ALLOW_MISSING_PACKAGES=1 to
# run a partial install anyway.

_MISSING_PACKAGE_MARKERS = ("could not import", "is not installed", "no module named")
_missing_package_skips: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return
    reason = str(report.longrepr[2])
    if any(m in reason.lower() for m in _MISSING_PACKAGE_MARKERS):
        _missing_package_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _missing_package_skips and not os.environ.get("GRAMMASK_ALLOW_MISSING_PACKAGES"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _missing_package_skips:
        return
    tr = terminalreporter
    tr.section("skipped for a missing package (install the test extra: pip install -e '.[test]')")
    for line in _missing_package_skips:
        tr.write_line(line)
    if not os.environ.get("GRAMMASK_ALLOW_MISSING_PACKAGES"):
        tr.write_line("these skips fail the run (GRAMMASK_ALLOW_MISSING_PACKAGES=1 tolerates them)")
