"""``grammask.kernels``: XGrammar's kernel modules and functions, checked against a numpy
reference; Triton runs in its CPU interpreter (``TRITON_INTERPRET=1``, in a subprocess); the CUDA,
Triton and MLX entry points raise a clear error where their GPU or library is missing, and no
module fails at import."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import grammask as xgr

MODULES = {
    "apply_token_bitmask_inplace_cpu": ["apply_token_bitmask_inplace_cpu"],
    "apply_token_bitmask_inplace_cuda": ["apply_token_bitmask_inplace_cuda"],
    "apply_token_bitmask_inplace_torch": [
        "apply_token_bitmask_inplace_kernel_indices_torch",
        "apply_token_bitmask_inplace_kernel_no_indices_torch",
        "apply_token_bitmask_inplace_torch",
    ],
    "apply_token_bitmask_inplace_torch_compile": [
        "apply_token_bitmask_inplace_kernel_indices_torch_compile",
        "apply_token_bitmask_inplace_kernel_no_indices_torch_compile",
        "apply_token_bitmask_inplace_torch_compile",
    ],
    "apply_token_bitmask_inplace_triton": [
        "apply_token_bitmask_inplace_kernel",
        "apply_token_bitmask_inplace_triton",
    ],
    "apply_token_bitmask_mlx": ["apply_token_bitmask_mlx"],
}


def test_import_grammask_imports_no_kernel_library():
    code = (
        "import sys, grammask, grammask.kernels\n"
        "for m in ('torch', 'triton', 'mlx'):\n"
        "    assert m not in sys.modules, m\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


KERNEL = "apply_token_bitmask_inplace_kernel"  # built on first access: needs Triton


@pytest.mark.parametrize("module", list(MODULES))
def test_every_module_imports_without_its_library(module):
    """Importing never fails and never imports torch/triton/mlx."""
    code = (
        f"import sys, grammask.kernels.{module} as m\n"
        "for mod in ('torch', 'triton', 'mlx'):\n"
        "    assert mod not in sys.modules, mod\n"
        f"for name in {[n for n in MODULES[module] if n != KERNEL]!r}:\n"
        "    assert callable(getattr(m, name)) and getattr(m, name).__doc__, name\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def reference(logits: np.ndarray, bitmask: np.ndarray, vocab_size: int, indices=None) -> np.ndarray:
    out = logits.copy()
    mask2 = bitmask.reshape(1, -1) if bitmask.ndim == 1 else bitmask
    out2 = out.reshape(1, -1) if out.ndim == 1 else out
    rows = range(out2.shape[0]) if indices is None else indices
    for r in rows:
        bits = np.unpackbits(mask2[r].view(np.uint8), bitorder="little")[:vocab_size].astype(bool)
        out2[r, :vocab_size][~bits] = -np.inf
    return out


def cases():
    rng = np.random.default_rng(0)
    for vocab in (1, 31, 32, 33, 1000):
        width = (vocab + 31) // 32
        bm = rng.integers(-(2**31), 2**31 - 1, size=(4, width), dtype=np.int64).astype(np.int32)
        logits = rng.standard_normal((4, vocab + 3)).astype(np.float32)
        yield logits, bm, vocab, None
        yield logits, bm, vocab, [3, 1]
        yield logits[0], bm[0], vocab, None


@pytest.mark.parametrize("kernel", ["cpu", "torch", "torch_compile"])
def test_kernels_match_reference(kernel, monkeypatch):
    torch = pytest.importorskip("torch")
    if kernel == "cpu":
        from grammask.kernels.apply_token_bitmask_inplace_cpu import (
            apply_token_bitmask_inplace_cpu as fn,
        )
    elif kernel == "torch":
        from grammask.kernels.apply_token_bitmask_inplace_torch import (
            apply_token_bitmask_inplace_torch as fn,
        )
    else:
        import grammask.kernels.apply_token_bitmask_inplace_torch_compile as tc

        # inductor on the CPU takes minutes to compile; the eager backend checks the tracing.
        real = torch.compile
        monkeypatch.setattr(
            torch, "compile", lambda f, dynamic: real(f, backend="eager", dynamic=dynamic)
        )
        monkeypatch.setattr(tc, "_compiled", {})
        fn = tc.apply_token_bitmask_inplace_torch_compile
    for logits, bm, vocab, idx in cases():
        want = reference(logits, bm, vocab, idx)
        for dtype in (
            (torch.float32, torch.bfloat16) if kernel != "torch_compile" else (torch.float32,)
        ):
            t = torch.from_numpy(logits.copy()).to(dtype)
            fn(t, torch.from_numpy(bm), vocab, idx)
            np.testing.assert_array_equal(
                t.float().numpy(), torch.from_numpy(want).to(dtype).float().numpy()
            )
        if kernel == "cpu":
            a = logits.copy()
            fn(a, bm, vocab, idx)
            np.testing.assert_array_equal(a, want)
            # indices given as a tensor
            t = torch.from_numpy(logits.copy())
            fn(t, torch.from_numpy(bm), vocab, None if idx is None else torch.tensor(idx))
            np.testing.assert_array_equal(t.numpy(), want)


def test_cpu_kernel_checks_like_xgrammar():
    from grammask.kernels.apply_token_bitmask_inplace_cpu import (
        apply_token_bitmask_inplace_cpu as fn,
    )

    with pytest.raises(ValueError, match="1D or 2D"):
        fn(np.zeros((1, 1, 32), np.float32), np.zeros((1, 1), np.int32))
    with pytest.raises(ValueError, match="larger than the detected"):
        fn(np.zeros((1, 32), np.float32), np.zeros((1, 1), np.int32), vocab_size=40)


def test_gpu_kernels_raise_clear_errors_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from grammask.kernels.apply_token_bitmask_inplace_cuda import apply_token_bitmask_inplace_cuda
    from grammask.kernels.apply_token_bitmask_inplace_triton import (
        apply_token_bitmask_inplace_triton,
    )

    logits, bm = torch.zeros(1, 32), torch.zeros(1, 1, dtype=torch.int32)
    with pytest.raises(xgr.UnsupportedFeatureError, match="GPU"):
        apply_token_bitmask_inplace_cuda(logits, bm)
    with pytest.raises(xgr.UnsupportedFeatureError, match="GPU|Triton"):
        apply_token_bitmask_inplace_triton(logits, bm)
    with pytest.raises(xgr.UnsupportedFeatureError):
        xgr.apply_token_bitmask_inplace(logits, bm, backend="cuda")
    # the named CPU-capable backends run their kernels
    for backend in ("torch_native", "cpu", "auto"):
        x = torch.zeros(1, 32)
        xgr.apply_token_bitmask_inplace(x, torch.tensor([[1]], dtype=torch.int32), backend=backend)
        assert torch.isinf(x).sum() == 31


def test_mlx_kernel_without_mlx():
    if importlib.util.find_spec("mlx") is not None:
        pytest.skip("mlx is installed")
    from grammask.kernels.apply_token_bitmask_mlx import apply_token_bitmask_mlx

    with pytest.raises(xgr.UnsupportedFeatureError, match="MLX"):
        apply_token_bitmask_mlx(None, None, 32)


def test_triton_kernel_in_the_interpreter():
    """The Triton kernel itself, run by Triton's CPU interpreter against the torch kernel."""
    pytest.importorskip("torch")
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    code = textwrap.dedent(
        """
        import torch
        from grammask.kernels import apply_token_bitmask_inplace_triton as tr
        from grammask.kernels import apply_token_bitmask_inplace_torch as to
        apply_token_bitmask_inplace_triton = tr.apply_token_bitmask_inplace_triton
        apply_token_bitmask_inplace_torch = to.apply_token_bitmask_inplace_torch
        g = torch.Generator().manual_seed(0)
        for V in [1, 33, 5000]:
            shape = (3, (V + 31) // 32)
            bm = torch.randint(-2**31, 2**31 - 1, shape, dtype=torch.int32, generator=g)
            for dt in [torch.float32, torch.float16, torch.bfloat16]:
                for idx in [None, [2, 0]]:
                    a = torch.randn(3, V + 5, generator=g).to(dt)
                    b = a.clone()
                    apply_token_bitmask_inplace_triton(a, bm, V, idx)
                    apply_token_bitmask_inplace_torch(b, bm, V, idx)
                    assert torch.equal(a, b), (V, dt, idx)
            a = torch.randn(V, generator=g)
            b = a.clone()
            apply_token_bitmask_inplace_triton(a, bm[0])
            apply_token_bitmask_inplace_torch(b, bm[0])
            assert torch.equal(a, b)
        """
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=600)


def test_kernel_names_match_xgrammar():
    """Every function XGrammar's kernel modules define exists in grammask's module of that name."""
    pytest.importorskip("xgrammar")
    import pkgutil

    import xgrammar.kernels

    theirs = {m.name for m in pkgutil.iter_modules(xgrammar.kernels.__path__)}
    assert theirs == set(MODULES)
    for module, names in MODULES.items():
        ours = importlib.import_module(f"grammask.kernels.{module}")
        for n in names:
            assert n in ours.__all__, (module, n)
        try:
            mod = importlib.import_module(f"xgrammar.kernels.{module}")
        except ImportError:  # XGrammar's CUDA/MLX modules fail at import without their library
            continue
        # Public names only: XGrammar's private helpers (its CUDA build steps, `_`) have no
        # counterpart here.
        defined = {
            n
            for n, v in vars(mod).items()
            if not n.startswith("_")
            and (
                getattr(v, "__module__", None) == mod.__name__
                or type(v).__name__ == "JITFunction"
            )
        }
        assert defined <= set(names), (
            module,
            defined - set(names),
        )


def gpu_cases():
    """(logits, bitmask, vocab_size, indices) on the CPU, numpy: the shapes serving engines pass."""
    rng = np.random.default_rng(1)
    for vocab, extra in ((1, 0), (33, 3), (5000, 0), (151_936, 128)):
        width = (vocab + 31) // 32
        bm = rng.integers(-(2**31), 2**31 - 1, size=(5, width), dtype=np.int64).astype(np.int32)
        bm[1] = 0  # a row that allows nothing
        bm[2] = -1  # a row that allows everything
        logits = rng.standard_normal((5, vocab + extra)).astype(np.float32)
        yield logits, bm, vocab, None
        yield logits, bm, vocab, [4, 0, 2]
        yield logits[3], bm[3], vocab, None


# The two GPU tests below skip without CUDA (CI has no GPU); bench/gpu_check.sh runs them on a
# lent GPU machine.
@pytest.mark.parametrize("backend", ["auto", "cuda", "triton", "torch_compile", "torch_native"])
def test_every_backend_on_a_gpu_matches_the_reference(backend):
    """On a CUDA device (skipped elsewhere; run on the lent GPU machine): each backend, through
    ``apply_token_bitmask_inplace`` and through its kernel module's function, in float32, float16
    and bfloat16, bitmask on the GPU or on the CPU, rows by list and by tensor, against numpy."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if backend == "triton" and importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    dev = torch.device("cuda")
    checked = 0
    for logits, bm, vocab, idx in gpu_cases():
        want = reference(logits, bm, vocab, idx)
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            expect = torch.from_numpy(want).to(dtype)
            for mask_dev in ("cuda", "cpu"):
                for rows in (idx, None if idx is None else torch.tensor(idx)):
                    t = torch.from_numpy(logits.copy()).to(dtype).to(dev)
                    m = torch.from_numpy(bm).to(mask_dev)
                    if backend == "cuda":
                        # XGrammar's CUDA entry takes no vocab_size: it is the bitmask's width.
                        if min(logits.shape[-1], bm.shape[-1] * 32) != vocab:
                            continue
                    xgr.apply_token_bitmask_inplace(t, m, vocab_size=vocab, indices=rows, backend=backend)
                    torch.cuda.synchronize()
                    assert torch.equal(t.cpu(), expect), (backend, vocab, dtype, mask_dev, idx)
                    checked += 1
    assert checked >= 24


def test_gpu_backends_agree_with_xgrammar_on_a_gpu():
    """On a CUDA device with XGrammar installed: grammask's and XGrammar's default entry point
    against the numpy reference for a 2-D batch, a row subset and a 1-D row (float32, bfloat16);
    grammask must equal the reference, and every place XGrammar does not is listed."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    xgrammar = pytest.importorskip("xgrammar")
    g = torch.Generator().manual_seed(2)
    theirs_differ = []
    for vocab in (128_256, 151_936):
        bm = torch.randint(-(2**31), 2**31 - 1, (8, (vocab + 31) // 32), dtype=torch.int32, generator=g)
        for dtype in (torch.float32, torch.bfloat16):
            base = torch.randn(8, vocab, generator=g).to(dtype)
            for idx, rows in ((None, slice(None)), ([7, 1, 3], slice(None)), (None, 0)):
                logits, mask = base[rows], bm[rows]
                want = torch.from_numpy(reference(logits.float().numpy(), mask.numpy(), vocab, idx))
                a, b = logits.clone().cuda(), logits.clone().cuda()
                xgr.apply_token_bitmask_inplace(a, mask.cuda(), indices=idx)
                xgrammar.apply_token_bitmask_inplace(b, mask.cuda(), indices=idx)
                case = (vocab, str(dtype), idx, "1-D" if rows == 0 else "2-D")
                assert torch.equal(a.float().cpu(), want.to(dtype).float()), case
                wrong = (b.float().cpu() != want.to(dtype).float()).nonzero().tolist()
                if wrong:
                    theirs_differ.append((case, len(wrong), wrong[:4]))
    print("XGrammar differs from the reference:", theirs_differ or "nowhere")
