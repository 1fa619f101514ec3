"""Concurrency stress on the Python API: one compiled grammar shared by 8 threads with matchers on
each, batch fills with the GIL released running beside them, and 8 concurrent compiles of the same
grammar into one compiler cache. Every mask equals the mask of a serial run; errors raised from
threads are grammask exceptions (``GrammaskError``), never pyo3's ``PanicException``."""

from __future__ import annotations

import json
import random
import threading

import numpy as np
import pytest

import grammask as xgr
from conftest import byte_vocab, small_info

SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 6},
            "tags": {"type": "array", "items": {"enum": ["a", "bc", 1, None]}},
            "n": {"type": "integer"},
            "sub": {"$ref": "#"},
        },
        "required": ["name"],
    }
)
TOKENS = byte_vocab([b'{"', b'name', b'": "', b'",', b'tags', b'["', b'bc', b'"]', b"null", b", ", b"sub", b"{}"])
THREADS = 8
PATHS = 4
STEPS = 40


def info() -> xgr.TokenizerInfo:
    return small_info(TOKENS)


def run_path(compiled: xgr.CompiledGrammar, seed: int) -> list[bytes]:
    """Masks (raw bytes) along a random path of allowed tokens chosen by ``seed``."""
    rng = random.Random(seed)
    m = xgr.GrammarMatcher(compiled)
    bm = xgr.allocate_token_bitmask(1, len(TOKENS))
    out = []
    for _ in range(STEPS):
        if m.is_terminated():
            break
        m.fill_next_token_bitmask(bm)
        out.append(bm.numpy().tobytes() if hasattr(bm, "numpy") else np.asarray(bm).tobytes())
        bits = np.unpackbits(np.asarray(bm).view(np.uint8), bitorder="little")[: len(TOKENS)]
        allowed = np.flatnonzero(bits)
        if len(allowed) == 0:
            break
        assert m.accept_token(int(rng.choice(list(allowed))))
    return out


def serial_masks() -> dict[int, list[bytes]]:
    return {
        s: run_path(xgr.GrammarCompiler(info(), cache_enabled=False).compile_json_schema(SCHEMA), s)
        for s in range(THREADS * PATHS)
    }


def run_threads(target, n: int) -> list:
    results: list = [None] * n
    errors: list = []
    barrier = threading.Barrier(n)

    def work(i: int) -> None:
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as e:  # noqa: BLE001 - a PanicException is a BaseException
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    return results


def test_shared_grammar_eight_threads_with_batch_fill_equals_serial():
    serial = serial_masks()
    shared = xgr.GrammarCompiler(info(), cache_enabled=False).compile_json_schema(SCHEMA)
    batch = xgr.BatchGrammarMatcher(max_threads=2)

    def per_thread(i: int) -> dict[int, list[bytes]]:
        got = {s: run_path(shared, s) for s in range(i * PATHS, (i + 1) * PATHS)}
        # Batch fills of 16 fresh matchers on the shared grammar, GIL released, interleaved.
        ms = [xgr.GrammarMatcher(shared) for _ in range(16)]
        bm = xgr.allocate_token_bitmask(16, len(TOKENS))
        batch.batch_fill_next_token_bitmask(ms, bm)
        first = np.asarray(bm)[0].tobytes()
        assert all(np.asarray(bm)[r].tobytes() == first for r in range(16))
        assert first == serial[0][0]
        return got

    for got in run_threads(per_thread, THREADS):
        for s, masks in got.items():
            assert masks == serial[s], f"path {s}"


def test_concurrent_compiles_of_one_grammar_into_one_cache():
    serial = serial_masks()
    compiler = xgr.GrammarCompiler(info(), cache_enabled=True)
    compiled = run_threads(lambda i: compiler.compile_json_schema(SCHEMA), THREADS)
    for i, cg in enumerate(compiled):
        assert run_path(cg, i) == serial[i]
    size = compiler.get_cache_size_bytes()
    assert size > 0
    compiler.compile_json_schema(SCHEMA)
    assert compiler.get_cache_size_bytes() == size, "the grammar is cached once"


def test_errors_from_threads_are_grammask_exceptions():
    compiler = xgr.GrammarCompiler(info(), cache_enabled=True)

    def bad(i: int) -> str:
        try:
            if i % 2:
                compiler.compile_json_schema('{"type": ')
            else:
                m = xgr.GrammarMatcher(compiler.compile_json_schema(SCHEMA))
                m.rollback(5)
        except xgr.GrammaskError as e:
            return type(e).__name__
        return "no error"

    names = run_threads(bad, THREADS)
    assert "no error" not in names, names


def test_batch_threads_agree_on_64_rows():
    compiled = xgr.GrammarCompiler(info()).compile_json_schema(SCHEMA)
    rng = random.Random(3)
    ms = []
    for i in range(64):
        m = xgr.GrammarMatcher(compiled)
        for _ in range(i % 17):
            bm = xgr.allocate_token_bitmask(1, len(TOKENS))
            if m.is_terminated():
                break
            m.fill_next_token_bitmask(bm)
            allowed = np.flatnonzero(np.unpackbits(np.asarray(bm).view(np.uint8), bitorder="little")[: len(TOKENS)])
            m.accept_token(int(rng.choice(list(allowed))))
        if not m.is_terminated():
            ms.append(m)
    masks = []
    for threads in (1, 2, 8):
        bm = xgr.allocate_token_bitmask(len(ms), len(TOKENS))
        xgr.BatchGrammarMatcher(max_threads=threads).batch_fill_next_token_bitmask(ms, bm)
        masks.append(np.asarray(bm).copy())
    assert np.array_equal(masks[0], masks[1]) and np.array_equal(masks[0], masks[2])
    for i, m in enumerate(ms):
        one = xgr.allocate_token_bitmask(1, len(TOKENS))
        m.fill_next_token_bitmask(one)
        assert np.array_equal(np.asarray(one)[0], masks[0][i])


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
