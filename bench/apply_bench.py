"""apply_token_bitmask_inplace on CPU: grammask's Rust kernel against XGrammar's CPU kernel, in
the same run, on one thread (torch.set_num_threads(1)).

Rows of 151,936 logits (Qwen2.5's vocabulary) with three kinds of mask: `sparse` (10 words with
allowed tokens, the rest disallowed: a typical constrained step), `dense` (all allowed) and
`mixed` (random words: the kernel's worst case). Prints p50/p99 per dtype and batch size.

    python bench/apply_bench.py [--reps 300]
    python bench/apply_bench.py --device cuda [--reps 300]

With ``--device cuda`` the logits and masks live on the GPU and each backend is timed per call
with CUDA events after a synchronize (launch and Python overhead included, as a decode loop pays
them): grammask's ``auto`` (torch operations), ``triton`` and ``cuda`` entry points beside
XGrammar's ``auto`` (Triton), ``cuda`` (its JIT-compiled kernel, when it builds) and
``torch_compile``, rows of 151,936 logits, batch 1 to 128.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import time

import numpy as np
import torch

import grammask
import xgrammar

VOCAB = 151_936


def timed(f, reps: int) -> tuple[float, float]:
    ts = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        f()
        ts.append(time.perf_counter_ns() - t)
    return float(np.percentile(ts, 50)) / 1e3, float(np.percentile(ts, 99)) / 1e3


def masks(kind: str, rows: int, rng: np.random.Generator) -> np.ndarray:
    words = (VOCAB + 31) // 32
    if kind == "dense":
        return np.full((rows, words), -1, np.int32)
    if kind == "mixed":
        return rng.integers(-(2**31), 2**31 - 1, (rows, words), dtype=np.int64).astype(np.int32)
    m = np.zeros((rows, words), np.int32)
    m[:, :10] = rng.integers(-(2**31), 2**31 - 1, (rows, 10), dtype=np.int64).astype(np.int32)
    return m


def timed_cuda(f, reps: int) -> tuple[float, float]:
    """p50/p99 in microseconds of one call of ``f`` on the GPU, each call alone (synchronized)."""
    for _ in range(10):
        f()
    ts = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        f()
        end.record()
        torch.cuda.synchronize()
        ts.append(start.elapsed_time(end) * 1e3)
    return float(np.percentile(ts, 50)), float(np.percentile(ts, 99))


def main_cuda(reps: int) -> None:
    rng = np.random.default_rng(0)
    print(f"torch {torch.__version__}, xgrammar {importlib.metadata.version('xgrammar')}, "
          f"grammask {grammask.__version__}; {torch.cuda.get_device_name()}")
    engines = {
        "grammask auto": lambda x, m: grammask.apply_token_bitmask_inplace(x, m),
        "grammask triton": lambda x, m: grammask.apply_token_bitmask_inplace(x, m, backend="triton"),
        "grammask cuda": lambda x, m: grammask.apply_token_bitmask_inplace(x, m, backend="cuda"),
        "xgrammar auto": lambda x, m: xgrammar.apply_token_bitmask_inplace(x, m),
        "xgrammar cuda": lambda x, m: xgrammar.apply_token_bitmask_inplace(x, m, backend="cuda"),
        "xgrammar torch_compile": lambda x, m: xgrammar.apply_token_bitmask_inplace(x, m, backend="torch_compile"),
    }
    print("| mask | dtype | batch | " + " | ".join(f"{e} p50 / p99 us" for e in engines) + " |")
    print("|---|---|---:|" + "---:|" * len(engines))
    broken: dict = {}
    for batch in (1, 16, 64, 128):
        for kind in ("sparse", "mixed"):
            for dtype in (torch.float32, torch.bfloat16):
                bm = torch.from_numpy(masks(kind, batch, rng)).cuda()
                base = torch.randn(batch, VOCAB, dtype=dtype).cuda()
                want = base.clone()
                grammask.apply_token_bitmask_inplace(want, bm, backend="torch_native")
                cells = []
                for name, f in engines.items():
                    if name in broken:
                        cells.append("n/a")
                        continue
                    x = torch.randn(batch, VOCAB, dtype=dtype).cuda()
                    try:
                        check = base.clone()
                        f(check, bm)
                        torch.cuda.synchronize()
                        a = timed_cuda(lambda: f(x, bm), reps)
                    except Exception as e:  # e.g. XGrammar's CUDA kernel needs its JIT build
                        broken[name] = f"{type(e).__name__}: {str(e)[:200]}"
                        cells.append("n/a")
                        continue
                    assert torch.equal(check, want), f"{name} disagrees with the reference"
                    cells.append(f"{a[0]:.1f} / {a[1]:.1f}")
                name = str(dtype).replace("torch.", "")
                print(f"| {kind} | {name} | {batch} | " + " | ".join(cells) + " |", flush=True)
    for name, why in broken.items():
        print(f"{name}: not timed ({why})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=300, help="timed calls per cell (default 300)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = ap.parse_args()
    if args.device == "cuda":
        main_cuda(args.reps)
        return
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"torch {torch.__version__}, xgrammar {importlib.metadata.version('xgrammar')}, grammask {grammask.__version__}; one thread")
    print("| mask | dtype | batch | grammask p50 | p99 | xgrammar p50 | p99 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for batch in (1, 16):
        for kind in ("sparse", "dense", "mixed"):
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                bm = torch.from_numpy(masks(kind, batch, rng))
                ours, theirs = torch.randn(batch, VOCAB, dtype=dtype), torch.randn(batch, VOCAB, dtype=dtype)
                a = timed(lambda: grammask.apply_token_bitmask_inplace(ours, bm), args.reps)
                b = timed(lambda: xgrammar.apply_token_bitmask_inplace(theirs, bm), args.reps)
                x, y = torch.randn(batch, VOCAB, dtype=dtype), None
                y = x.clone()
                grammask.apply_token_bitmask_inplace(x, bm)
                xgrammar.apply_token_bitmask_inplace(y, bm)
                assert torch.equal(x, y), "the kernels disagree"
                name = str(dtype).replace("torch.", "")
                print(f"| {kind} | {name} | {batch} | {a[0]:.1f} us | {a[1]:.1f} us | {b[0]:.1f} us | {b[1]:.1f} us |")


if __name__ == "__main__":
    main()
