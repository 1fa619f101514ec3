"""Bitmask helpers: allocation, shape, reset, dtype, ``apply_token_bitmask_inplace`` (numpy and
torch CPU, every supported float dtype, 1-D/2-D, indices, vocab_size) against a straightforward
reference, and the ``grammask.testing`` bitmask converters."""

from __future__ import annotations

import itertools
import math
import warnings

import grammask as xgr
import numpy as np
import pytest
from grammask import testing

try:
    import torch
except ImportError:  # the numpy tests still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def random_bool(rng, rows, vocab):
    return rng.random((rows, vocab)) < 0.4


def pack(allowed: np.ndarray) -> np.ndarray:
    """Reference packing: bit i % 32 of word i // 32, padding bits set."""
    rows, v = allowed.shape
    words = math.ceil(v / 32)
    out = np.full((rows, words), -1, dtype=np.int64)
    for r in range(rows):
        for w in range(words):
            x = 0
            for b in range(32):
                i = w * 32 + b
                if i >= v or allowed[r, i]:
                    x |= 1 << b
            out[r, w] = x
    return out.astype(np.uint32).view(np.int32)


def reference_apply(logits: np.ndarray, allowed: np.ndarray, rows=None, vocab_size=None):
    out = logits.copy()
    v = allowed.shape[-1] if vocab_size is None else vocab_size
    rows = range(out.shape[0]) if rows is None else rows
    for r in rows:
        for i in range(v):
            if not allowed[r, i]:
                out[r, i] = -np.inf
    return out


# ---------------------------------------------------------------------------------------------
# allocation


def test_shape_and_allocation():
    assert xgr.get_bitmask_shape(1, 32) == (1, 1)
    assert xgr.get_bitmask_shape(3, 33) == (3, 2)
    assert xgr.get_bitmask_shape(2, 128256) == (2, 4008)
    bm = xgr.allocate_token_bitmask(2, 100)
    assert tuple(bm.shape) == (2, 4)
    arr = np.asarray(bm)
    assert arr.dtype == np.int32 and (arr == -1).all()
    if hasattr(bm, "fill_"):
        bm.fill_(0)
    else:
        bm[...] = 0
    xgr.reset_token_bitmask(bm)
    assert (np.asarray(bm) == -1).all()
    np_bm = np.zeros((2, 3), dtype=np.int32)
    xgr.reset_token_bitmask(np_bm)
    assert (np_bm == -1).all()


def test_bitmask_dtype():
    if torch is not None:
        assert xgr.bitmask_dtype == torch.int32
        assert isinstance(xgr.allocate_token_bitmask(1, 10), torch.Tensor)
    else:
        assert xgr.bitmask_dtype == np.int32


def test_allocate_rejects_bad_sizes():
    with pytest.raises(ValueError):
        xgr.allocate_token_bitmask(0, 10)
    with pytest.raises(ValueError):
        xgr.allocate_token_bitmask(1, -1)


# ---------------------------------------------------------------------------------------------
# apply_token_bitmask_inplace: numpy


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("vocab", [1, 31, 32, 33, 100, 1000])
def test_apply_numpy_2d(dtype, vocab):
    rng = np.random.default_rng(vocab)
    allowed = random_bool(rng, 3, vocab)
    logits = rng.standard_normal((3, vocab)).astype(dtype)
    want = reference_apply(logits, allowed)
    xgr.apply_token_bitmask_inplace(logits, pack(allowed))
    np.testing.assert_array_equal(logits, want)


def test_apply_numpy_1d_and_indices_and_vocab_size():
    rng = np.random.default_rng(7)
    allowed = random_bool(rng, 4, 70)
    logits = rng.standard_normal(70).astype(np.float32)
    want = reference_apply(logits[None], allowed[:1])[0]
    xgr.apply_token_bitmask_inplace(logits, pack(allowed[:1])[0])
    np.testing.assert_array_equal(logits, want)

    logits = rng.standard_normal((4, 70)).astype(np.float32)
    want = reference_apply(logits, allowed, rows=[1, 3])
    xgr.apply_token_bitmask_inplace(logits, pack(allowed), indices=[1, 3])
    np.testing.assert_array_equal(logits, want)

    # vocab_size smaller than the logits: the rest is left alone.
    logits = rng.standard_normal((4, 70)).astype(np.float32)
    want = reference_apply(logits, allowed, vocab_size=50)
    xgr.apply_token_bitmask_inplace(logits, pack(allowed), vocab_size=50)
    np.testing.assert_array_equal(logits, want)
    with pytest.raises(ValueError):
        xgr.apply_token_bitmask_inplace(logits, pack(allowed), vocab_size=71)


def test_apply_narrow_bitmask_warns():
    rng = np.random.default_rng(8)
    allowed = random_bool(rng, 1, 40)
    logits = rng.standard_normal((1, 100)).astype(np.float32)
    want = reference_apply(logits, allowed)
    with pytest.warns(UserWarning):
        xgr.apply_token_bitmask_inplace(logits, pack(allowed))
    # The bitmask covers 64 ids (40 allowed bits + 24 padding bits set); the rest is untouched.
    np.testing.assert_array_equal(logits, want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xgr.apply_token_bitmask_inplace(logits, pack(allowed), vocab_size=40)


def test_apply_rejects_bad_arguments():
    logits = np.zeros((2, 64), dtype=np.float32)
    good = np.full((2, 2), -1, dtype=np.int32)
    with pytest.raises(TypeError):
        xgr.apply_token_bitmask_inplace(logits, good.astype(np.int64))
    with pytest.raises(TypeError):
        xgr.apply_token_bitmask_inplace(np.zeros((2, 64), dtype=np.int32), good)
    with pytest.raises(ValueError):
        xgr.apply_token_bitmask_inplace(logits, np.full((3, 2), -1, dtype=np.int32))
    with pytest.raises(ValueError):
        xgr.apply_token_bitmask_inplace(logits, good, indices=[2])
    with pytest.raises(ValueError):
        xgr.apply_token_bitmask_inplace(logits, good, backend="nope")


# ---------------------------------------------------------------------------------------------
# apply_token_bitmask_inplace: torch CPU


@needs_torch
@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
def test_apply_torch(dtype_name):
    dtype = getattr(torch, dtype_name)
    rng = np.random.default_rng(11)
    vocab = 1000
    allowed = random_bool(rng, 3, vocab)
    base = rng.standard_normal((3, vocab)).astype(np.float32)
    logits = torch.tensor(base, dtype=dtype)
    want = reference_apply(logits.float().numpy(), allowed)
    bm = torch.from_numpy(pack(allowed))
    xgr.apply_token_bitmask_inplace(logits, bm)
    assert logits.dtype == dtype
    np.testing.assert_array_equal(logits.float().numpy(), want)

    # 1-D
    logits1 = torch.tensor(base[1], dtype=dtype)
    xgr.apply_token_bitmask_inplace(logits1, bm[1])
    np.testing.assert_array_equal(logits1.float().numpy(), want[1])

    # indices: only those rows
    logits = torch.tensor(base, dtype=dtype)
    want_idx = reference_apply(logits.float().numpy(), allowed, rows=[0, 2])
    xgr.apply_token_bitmask_inplace(logits, bm, indices=[0, 2])
    np.testing.assert_array_equal(logits.float().numpy(), want_idx)

    # vocab_size
    logits = torch.tensor(base, dtype=dtype)
    want_v = reference_apply(logits.float().numpy(), allowed, vocab_size=500)
    xgr.apply_token_bitmask_inplace(logits, bm, vocab_size=500)
    np.testing.assert_array_equal(logits.float().numpy(), want_v)


@needs_torch
def test_apply_torch_narrow_warning_and_bad_dtypes():
    logits = torch.zeros((1, 100))
    bm = torch.full((1, 2), -1, dtype=torch.int32)
    bm[0, 0] = 0
    with pytest.warns(UserWarning):
        xgr.apply_token_bitmask_inplace(logits, bm)
    assert torch.isinf(logits[0, :32]).all() and (logits[0, 32:] == 0).all()
    with pytest.raises(TypeError):
        xgr.apply_token_bitmask_inplace(torch.zeros((1, 64)), bm.to(torch.int64))
    with pytest.raises(TypeError):
        xgr.apply_token_bitmask_inplace(torch.zeros((1, 64), dtype=torch.float64), bm)


@needs_torch
def test_apply_from_matcher_fill():
    info = xgr.TokenizerInfo([b"a", b"b", b"c", b"</s>"], stop_token_ids=[3])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "a" | "b"'))
    bm = xgr.allocate_token_bitmask(1, 4)
    assert m.fill_next_token_bitmask(bm) is True
    logits = torch.zeros((1, 4))
    xgr.apply_token_bitmask_inplace(logits, bm)
    assert logits[0].tolist() == [0.0, 0.0, float("-inf"), float("-inf")]


@needs_torch
def test_fill_follows_a_reused_tensor_that_changes_in_place():
    """The fill reuses its numpy view of the last tensor only while that tensor keeps the same
    memory, shape, strides and dtype: in-place changes must reach the new memory or raise."""
    info = xgr.TokenizerInfo([b"a", b"b", b"c", b"</s>"], stop_token_ids=[3])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "a" | "b"'))
    bm = torch.zeros((1, 1), dtype=torch.int32)
    m.fill_next_token_bitmask(bm)
    assert bm[0, 0].item() == 0b11
    bm.set_(torch.zeros((2, 1), dtype=torch.int32))  # new storage, new shape
    m.fill_next_token_bitmask(bm, 1)
    assert bm[:, 0].tolist() == [0, 0b11]
    bm.as_strided_((1, 1), (1, 2))  # same memory, other strides: still contiguous
    bm.fill_(0)
    m.fill_next_token_bitmask(bm)
    assert bm[0, 0].item() == 0b11
    bm.set_(torch.zeros((4, 1), dtype=torch.int32)[::2])  # not contiguous
    with pytest.raises(ValueError, match="contiguous"):
        m.fill_next_token_bitmask(bm)
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask(torch.zeros((1, 1), dtype=torch.int64))


@needs_torch
def test_fill_by_address_writes_only_its_row():
    """Torch bitmasks are filled by address: row ``index`` of a 2-D tensor (or a 1-D tensor) gets
    exactly the numpy fill's words, the other rows are untouched, and bad rows or widths raise."""
    info = xgr.TokenizerInfo([b"a", b"b", b"c"] + [b"x%d" % i for i in range(60)] + [b"</s>"], stop_token_ids=[63])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "a" | "x1" | "x59"'))
    want = np.zeros((1, 2), dtype=np.int32)
    m.fill_next_token_bitmask(want)
    assert want[0].tolist() != [0, 0]
    bm = torch.full((3, 2), 7, dtype=torch.int32)
    for index in (2, 0, 1):
        before = bm.clone()
        m.fill_next_token_bitmask(bm, index)
        assert bm[index].tolist() == want[0].tolist()
        others = [r for r in range(3) if r != index]
        assert bm[others].tolist() == before[others].tolist()
    flat = torch.zeros(2, dtype=torch.int32)
    m.fill_next_token_bitmask(flat)
    assert flat.tolist() == want[0].tolist()
    with pytest.raises(xgr.InvalidArgumentError, match="out of range"):
        m.fill_next_token_bitmask(bm, 3)
    with pytest.raises(xgr.InvalidArgumentError, match="words per row"):
        m.fill_next_token_bitmask(torch.zeros((1, 1), dtype=torch.int32))
    with pytest.raises(xgr.InvalidArgumentError, match="1-D or 2-D"):
        m.fill_next_token_bitmask(torch.zeros((1, 1, 2), dtype=torch.int32))
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        m.fill_next_token_bitmask([0, 0])


# ---------------------------------------------------------------------------------------------
# testing helpers


@pytest.mark.parametrize("vocab", [1, 32, 45, 200])
def test_bool_mask_round_trips(vocab):
    rng = np.random.default_rng(vocab)
    allowed = random_bool(rng, 2, vocab)
    bm = testing.bool_mask_to_bitmask(allowed)
    np.testing.assert_array_equal(np.asarray(bm), pack(allowed))
    back = testing.bitmask_to_bool_mask(bm, vocab)
    np.testing.assert_array_equal(np.asarray(back), allowed)
    full = np.asarray(testing.bitmask_to_bool_mask(bm))
    assert full.shape == (2, math.ceil(vocab / 32) * 32)
    assert full[:, vocab:].all()  # padding with ones
    for row in range(2):
        masked = testing._get_masked_tokens_from_bitmask(bm, vocab, row)
        assert masked == [i for i in range(vocab) if not allowed[row, i]]


@needs_torch
def test_bool_mask_round_trips_torch():
    allowed = torch.tensor([[True, False, True] * 20])
    bm = testing.bool_mask_to_bitmask(allowed)
    assert isinstance(bm, torch.Tensor) and bm.dtype == torch.int32
    back = testing.bitmask_to_bool_mask(bm, 60)
    assert isinstance(back, torch.Tensor)
    assert back.tolist() == allowed.tolist()


def test_is_single_token_bitmask():
    allowed = np.zeros((2, 70), dtype=bool)
    allowed[0, 65] = True
    allowed[1, [3, 4]] = True
    bm = testing.bool_mask_to_bitmask(allowed)
    assert testing._is_single_token_bitmask(bm, 70, 0) == (True, 65)
    assert testing._is_single_token_bitmask(bm, 70, 1) == (False, -1)
    empty = testing.bool_mask_to_bitmask(np.zeros((1, 70), dtype=bool))
    assert testing._is_single_token_bitmask(empty, 70) == (False, -1)


# --- the Rust CPU kernel against a reference, every dtype and layout ---------------------------


def _reference_apply(logits: np.ndarray, bitmask: np.ndarray, v: int, pairs) -> np.ndarray:
    out = logits.copy()
    bits = np.unpackbits(bitmask.view(np.uint8), axis=-1, bitorder="little").astype(bool)
    for lr, br in pairs:
        row = out[lr, :v]
        row[~bits[br, :v]] = -np.inf
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "strided_rows", "indices", "vocab_size"])
def test_cpu_kernel_matches_reference_numpy(dtype, layout):
    rng = np.random.default_rng(7)
    rows, vocab = 4, 1000
    words = (vocab + 31) // 32
    masks = rng.integers(-(2**31), 2**31 - 1, (rows, words), dtype=np.int64).astype(np.int32)
    masks[1] = 0
    masks[2] = -1
    base = rng.standard_normal((rows, vocab + 37)).astype(dtype)
    logits = base if layout == "strided_rows" else np.ascontiguousarray(base[:, :vocab])
    if layout == "strided_rows":
        logits = base[:, :vocab]  # rows 1037 elements apart
        assert not logits.flags.c_contiguous
    kwargs, pairs, v = {}, [(i, i) for i in range(rows)], vocab
    if layout == "indices":
        kwargs["indices"] = [3, 1]
        pairs = [(3, 3), (1, 1)]
    if layout == "vocab_size":
        kwargs["vocab_size"] = v = 517
    expected = _reference_apply(np.array(logits), masks, v, pairs)
    xgr.apply_token_bitmask_inplace(logits, masks, **kwargs)
    np.testing.assert_array_equal(logits, expected)


@needs_torch
@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
def test_cpu_kernel_matches_reference_torch(dtype_name):
    dtype = getattr(torch, dtype_name)
    rng = np.random.default_rng(11)
    vocab = 151_936
    masks = rng.integers(-(2**31), 2**31 - 1, (2, (vocab + 31) // 32), dtype=np.int64).astype(np.int32)
    logits = torch.randn(2, vocab + 64, dtype=dtype)[:, :vocab]  # strided rows
    expected = logits.float().numpy().copy()
    expected = _reference_apply(expected, masks, vocab, [(0, 0), (1, 1)])
    xgr.apply_token_bitmask_inplace(logits, torch.from_numpy(masks))
    got = logits.float().numpy()
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    kept = ~np.isneginf(expected)
    np.testing.assert_array_equal(got[kept], expected[kept])


def _block_masks(rows: int, words: int, rng) -> np.ndarray:
    """Runs of 8 words (the Rust kernel's block) that are all ones, all zeros, all ones but one
    zero or mixed word, all zeros but one ones or mixed word, or random; row 1 all ones."""
    masks = np.empty((rows, words), np.int64)
    for r in range(rows):
        for b in range(0, words, 8):
            kind, n = (r + b // 8) % 6, min(8, words - b)
            block = np.full(n, -1 if kind in (0, 2, 3) else 0, np.int64)
            if kind in (2, 3, 4):
                block[rng.integers(n)] = {2: 0, 3: rng.integers(1, 2**31), 4: -1}[kind]
            if kind == 5:
                block = rng.integers(-(2**31), 2**31 - 1, n)
            masks[r, b : b + n] = block
    masks[1] = -1
    return masks.astype(np.int32)


@needs_torch
@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("vocab", [151_936, 8 * 32 * 5 + 3 * 32 + 7])
def test_cpu_kernel_block_shortcuts_torch(dtype_name, vocab):
    """Whole-block shortcuts (skip all-ones, fill all-zeros) over every dtype, with a partial
    last block and a partial last word."""
    dtype = getattr(torch, dtype_name)
    masks = _block_masks(4, (vocab + 31) // 32, np.random.default_rng(vocab))
    logits = torch.randn(4, vocab, dtype=dtype)
    expected = _reference_apply(logits.float().numpy(), masks, vocab, [(i, i) for i in range(4)])
    xgr.apply_token_bitmask_inplace(logits, torch.from_numpy(masks))
    got = logits.float().numpy()
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    np.testing.assert_array_equal(got[~np.isneginf(expected)], expected[~np.isneginf(expected)])


@needs_torch
def test_apply_follows_a_reused_bitmask_tensor():
    """apply reuses its numpy view of the last bitmask tensor only while that tensor keeps its
    memory and shape: a tensor moved to new storage must be read from there."""
    bm = torch.full((1, 4), -1, dtype=torch.int32)
    logits = torch.zeros((1, 128))
    xgr.apply_token_bitmask_inplace(logits, bm)
    assert not torch.isinf(logits).any()
    bm.set_(torch.zeros((1, 4), dtype=torch.int32))  # new storage, same shape
    xgr.apply_token_bitmask_inplace(logits, bm)
    assert torch.isneginf(logits).all()
    logits.zero_()
    bm[0, 1] = -1  # in place: the view shares the memory
    xgr.apply_token_bitmask_inplace(logits, bm)
    assert torch.isneginf(logits[0, :32]).all() and not torch.isinf(logits[0, 32:64]).any()


def test_torch_operations_path_matches_the_reference():
    """Logits the Rust kernel and the numpy path decline (strided bfloat16 rows) take the torch
    operations, the same code CUDA logits take without Triton: every row/indices pairing, against a
    bit-by-bit reference."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    checked = 0
    for vocab, nrows, n_mask, idx in itertools.product([1, 33, 5000], [1, 4], [1, 4], [None, [3, 0], []]):
        if (n_mask != nrows and idx is None) or (n_mask > nrows) or (idx and max(idx) >= nrows):
            continue
        words = (vocab + 31) // 32
        bm = rng.integers(-(2**31), 2**31 - 1, (n_mask, words), dtype=np.int64).astype(np.int32)
        logits = torch.randn(nrows, 2 * (vocab + 3), dtype=torch.bfloat16)[:, ::2]
        want = logits.float().clone()
        for r in range(nrows) if idx is None else idx:
            bits = np.unpackbits(bm[r if n_mask > 1 else 0].view(np.uint8), bitorder="little")
            want[r, :vocab][torch.from_numpy(bits[:vocab] == 0)] = float("-inf")
        xgr.apply_token_bitmask_inplace(logits, torch.from_numpy(bm), vocab_size=vocab, indices=idx)
        assert torch.equal(logits.float(), want), (vocab, nrows, n_mask, idx)
        checked += 1
    assert checked == 21
