"""The slowest mask fills and compiles of grammask on sampled MaskBench schemas (issue 18).

    GRAMMASK_SHARED=/work/shared python bench/tail_states.py --limit 300 --seed 1818 [--wall] [--top 20]
    GRAMMASK_SHARED=/work/shared python bench/tail_states.py --schema o79409 [--schema o61649]

Same sampling (``list_files``), schema options (the ``grammask`` engine of ``python -m
grammask.bench maskbench``) and protocol (a fresh matcher per instance, fill before every token,
then accept it) as the MaskBench harness, but timed in **thread CPU time** by default
(``time.thread_time_ns``), so that a loaded machine's preemptions (4 ms scheduler ticks) do not
show up as tail latency; ``--wall`` uses ``perf_counter_ns`` as the harness does. Prints the
mask and TTFM percentiles, the schemas with the most fills over ``--slow-us``, and the slowest
fills as (µs, file, instance, token position) with the text before that position, to be fed to
``crates/grammask-core/examples/kernel_costs.rs``. ``--schema ID`` (repeatable) runs only the
files whose name contains ID (``o79409`` for ``Github_hard---o79409.json``), instead of the sample.

Each slow fill also shows the minor page faults the thread took during it (``getrusage``, where
the platform counts them per thread): a fill that spends milliseconds outside the grammar work
is typically one fault on a fresh transparent huge page of the allocator's arena (~4-5 ms on a
VM that backs guest memory lazily; ``MIMALLOC_ALLOW_THP=0`` in the environment turns THP off
for the process, for comparison). The summary line counts the slow fills with a fault.

``--builds`` also shows, per slow fill, the per-vocabulary tables it built and the shared caches
it started over (``grammask._core.thread_build_counts``, read around every fill: kind x count
(wall ms: a build preempted counts its time off the CPU too)), sums them over every fill, and
prints the vocabulary's memory by part at the end. The preemptions column is the thread's
involuntary context switches during the fill: on this 2-core VM a preempted fill can read
milliseconds more thread CPU time than the same work unpreempted (cold caches, host steal), so
the summary also names the slowest fill not preempted. ``--probe ID:INSTANCE:TOKEN`` re-times one
fill from the same process state in forked children (their copy-on-write faults included): a
slow fill that is fast in every child was not slow work.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import resource
import importlib.util
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

# The package PYTHONPATH (or the environment) names wins; this checkout's only as a fallback
# (inserting it first made side-by-side runs of two builds measure this one twice).
if importlib.util.find_spec("grammask") is None:
    sys.path.append(str(Path(__file__).resolve().parent.parent / "python"))
from grammask.bench.data import (  # noqa: E402
    default_data_dir,
    default_tokenizer_dir,
    list_files,
    load_hf_tokenizer,
    load_task,
)
from grammask.bench.engines import ENGINES  # noqa: E402


def schema_files(args: argparse.Namespace) -> list[Path]:
    """The sampled files, or with ``--schema`` every file whose name contains one of the IDs."""
    if not args.schema:
        return list_files(default_data_dir(), args.limit, args.seed)
    files = [f for f in list_files(default_data_dir(), None, 0) if any(i in f.name for i in args.schema)]
    files.sort()
    for i in args.schema:
        if not any(i in f.name for f in files):
            raise SystemExit(f"no MaskBench file name contains {i!r}")
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=300, help="schemas sampled (default 300)")
    ap.add_argument("--seed", type=int, default=1818, help="sampling seed (default 1818)")
    ap.add_argument("--wall", action="store_true", help="wall-clock time instead of thread CPU time")
    ap.add_argument("--top", type=int, default=20, help="schemas, slowest fills and compiles listed (default 20)")
    ap.add_argument(
        "--slow-us", type=float, default=300.0,
        help="a fill slower than this (µs) counts as slow in the per-schema counts (default 300)",
    )
    ap.add_argument(
        "--hash", action="store_true",
        help="print a sha256 of every mask of each schema (to check two builds give identical masks)",
    )
    ap.add_argument(
        "--schema", action="append", default=[], metavar="ID",
        help="only the files whose name contains ID (repeatable; --limit and --seed are ignored)",
    )
    ap.add_argument(
        "--dump", metavar="DIR",
        help="write the sample for the Rust examples and exit: DIR/vocab.json, DIR/list.txt (one path "
        "stem a line, in sample order) and per schema STEM.schema.json, STEM.N.txt, STEM.N.at (the "
        "instance's bytes and its token start offsets); see examples/tail_classes.rs",
    )
    ap.add_argument(
        "--probe", action="append", default=[], metavar="ID:INSTANCE:TOKEN",
        help="before that fill (file name containing ID), fork --probe-runs children that each time "
        "the same fill from the same state (thread CPU, faults): what the fill costs in this "
        "process's state, apart from one measurement's luck (repeatable)",
    )
    ap.add_argument("--probe-runs", type=int, default=5, help="children forked per --probe (default 5)")
    ap.add_argument(
        "--builds", action="store_true",
        help="show the per-vocabulary tables each slow fill built (thread_build_counts)",
    )
    args = ap.parse_args()
    if args.dump:
        return dump(args)
    clock = time.perf_counter_ns if args.wall else time.thread_time_ns
    tok = load_hf_tokenizer(default_tokenizer_dir())
    adapter = ENGINES["grammask"](tok)
    # The per-vocabulary token index is built by the first compile; keep it out of the figures.
    adapter.compile('{"type": "object", "properties": {"a": {"type": "string"}}}')
    masks: list[float] = []
    ttfm: list[tuple[float, str]] = []
    slow: list[tuple[float, str, int, int]] = []
    faults: dict[tuple[str, int, int], int] = {}
    preempted: dict[tuple[str, int, int], int] = {}
    thread = getattr(resource, "RUSAGE_THREAD", None)
    builds_of: dict[tuple[str, int, int], str] = {}
    build_totals: Counter = Counter()
    build_ns: Counter = Counter()
    if args.builds:
        from grammask import _core

        def build_counts() -> dict[str, tuple[int, int]]:
            return {k: (n, ns) for k, n, ns in _core.thread_build_counts()}

    def minflt() -> int:
        return resource.getrusage(thread).ru_minflt if thread is not None else 0

    def switches() -> int:
        """The thread's involuntary context switches (preemptions) so far."""
        return resource.getrusage(thread).ru_nivcsw if thread is not None else 0

    texts: dict[tuple[str, int, int], str] = {}
    probes = [(p.split(":")[0], int(p.split(":")[1]), int(p.split(":")[2])) for p in args.probe]
    probed: dict[tuple[str, int, int], list[tuple[float, int]]] = {}
    hashes: dict[str, str] = {}
    gc.disable()
    for f in schema_files(args):
        task = load_task(f, tok)
        t0 = clock()
        try:
            compiled = adapter.compile(task.schema)
            m = adapter.matcher(compiled)
            m.fill()
        except Exception:  # noqa: BLE001 (compile errors are counted by the harness, not here)
            continue
        ttfm.append(((clock() - t0) / 1000.0, f.name))
        digest = hashlib.sha256() if args.hash else None
        for i, inst in enumerate(task.instances):
            m = adapter.matcher(compiled)
            ok = True
            for pos, t in enumerate(inst.tokens):
                if any(p[0] in f.name and p[1] == i and p[2] == pos for p in probes):
                    probed[(f.name, i, pos)] = probe_fill(m, args.probe_runs, clock, minflt)
                f0, s0 = minflt(), switches()
                b0 = build_counts() if args.builds else None
                a = clock()
                m.fill()
                us = (clock() - a) / 1000.0
                built = ""
                if b0 is not None:
                    parts = []
                    for k, (n, ns) in build_counts().items():
                        dn, dns = n - b0[k][0], ns - b0[k][1]
                        if dn:
                            build_totals[k] += dn
                            build_ns[k] += dns
                            parts.append(f"{k} x{dn} ({dns / 1e6:.2f} ms wall)")
                    built = ", ".join(parts)
                masks.append(us)
                if digest is not None:
                    digest.update(m.mask.tobytes())
                if us > args.slow_us:
                    slow.append((us, f.name, i, pos))
                    faults[(f.name, i, pos)] = minflt() - f0
                    preempted[(f.name, i, pos)] = switches() - s0
                    texts[(f.name, i, pos)] = tok.decode(inst.tokens[:pos])[-60:]
                    builds_of[(f.name, i, pos)] = built
                if not m.accept(t):
                    ok = False
                    break
            if ok:
                a = clock()
                m.fill()
                masks.append((clock() - a) / 1000.0)
                if digest is not None:
                    digest.update(m.mask.tobytes())
        if digest is not None:
            hashes[f.name] = digest.hexdigest()[:16]
    gc.enable()
    arr = np.asarray(masks)
    comp = np.asarray([t for t, _ in ttfm])
    kind = "wall" if args.wall else "thread CPU"
    print(f"{len(ttfm)} schemas compiled, {len(arr)} masks ({kind} time, µs)")
    p = np.percentile(arr, [50, 95, 99, 99.9, 100])
    print("mask p50 %.1f p95 %.1f p99 %.1f p99.9 %.1f max %.1f" % tuple(p))
    p = np.percentile(comp, [50, 99, 100]) / 1000.0
    print("ttfm ms p50 %.2f p99 %.1f max %.1f" % tuple(p))
    print(f"schemas with the most fills over {args.slow_us:g} µs:")
    for name, n in Counter(s[1] for s in slow).most_common(args.top):
        print(f"  {n:5d}  {name}")
    if thread is not None:
        faulted = [us for us, name, i, pos in slow if faults[(name, i, pos)] > 0]
        print(
            f"fills over {args.slow_us:g} µs with page faults: {len(faulted)} of {len(slow)} "
            f"({sum(faulted) / 1000.0:.1f} of {sum(s[0] for s in slow) / 1000.0:.1f} ms)"
        )
        cut = max(2000.0, args.slow_us)
        over = [(name, i, pos) for us, name, i, pos in slow if us > cut]
        print(
            f"fills over {cut:g} µs preempted during the fill: {sum(preempted[k] > 0 for k in over)} of {len(over)}"
        )
        calm = [(us, name, i, pos) for us, name, i, pos in slow if preempted[(name, i, pos)] == 0]
        if calm:
            us, name, i, pos = max(calm)
            print(f"slowest fill not preempted: {us:.0f} µs, {name} instance {i} token {pos}")
    print("slowest fills (µs, page faults, preemptions):")
    for us, name, i, pos in sorted(slow, reverse=True)[: args.top]:
        k = (name, i, pos)
        print(f"  {us:10.0f} {faults[k]:4d} {preempted[k]:3d}  {name} instance {i} token {pos}  ...{texts[k]!r}")
        if builds_of.get(k):
            print(f"             built: {builds_of[k]}")
    if args.builds:
        print("built in fills (kind: count, wall ms): " + (", ".join(
            f"{k}: {n}, {build_ns[k] / 1e6:.1f}" for k, n in sorted(build_totals.items())) or "nothing"))
        parts = getattr(adapter.compiler, "get_vocabulary_memory_bytes", None)
        if parts is not None:
            print("vocabulary memory, MiB: " + ", ".join(f"{k} {v / 2**20:.1f}" for k, v in parts().items() if v))
    for (name, i, pos), runs in probed.items():
        us = [f"{t:.0f} ({fl})" for t, fl in runs]
        print(f"probe {name} instance {i} token {pos}: forked fills µs (faults): {', '.join(us)}")
    if args.hash:
        print(f"mask hashes ({len(hashes)} schemas, all: "
              f"{hashlib.sha256(repr(sorted(hashes.items())).encode()).hexdigest()[:16]}):")
        for name, h in sorted(hashes.items()):
            print(f"  {h}  {name}")
    print("slowest compiles (ms):")
    for t, name in sorted(ttfm, reverse=True)[: args.top]:
        print(f"  {t / 1000.0:10.1f}  {name}")
    return 0


def probe_fill(m, runs: int, clock, minflt) -> list[tuple[float, int]]:
    """Times `m.fill()` from the same state in `runs` forked children, one after another."""
    import os

    out = []
    for _ in range(runs):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            f0 = minflt()
            a = clock()
            m.fill()
            us = (clock() - a) / 1000.0
            os.write(w, f"{us} {minflt() - f0}".encode())
            os._exit(0)
        os.close(w)
        with os.fdopen(r) as pipe:
            us, faults = pipe.read().split()
        os.waitpid(pid, 0)
        out.append((float(us), int(faults)))
    return out


def dump(args: argparse.Namespace) -> int:
    """Writes the sample's schemas and tokenized instances under ``args.dump`` (see ``--dump``)."""
    import grammask

    out = Path(args.dump)
    out.mkdir(parents=True, exist_ok=True)
    tok = load_hf_tokenizer(default_tokenizer_dir())
    info = grammask.TokenizerInfo.from_huggingface(tok)
    (out / "vocab.json").write_text(info.serialize_json())
    vocab = info.decoded_vocab
    stems = []
    for f in schema_files(args):
        task = load_task(f, tok)
        stem = str(out / f.stem)
        Path(f"{stem}.schema.json").write_text(task.schema)
        for i, inst in enumerate(task.instances):
            text, at = bytearray(), []
            for t in inst.tokens:
                at.append(len(text))
                text += vocab[t]
            Path(f"{stem}.{i}.txt").write_bytes(bytes(text))
            Path(f"{stem}.{i}.at").write_text("".join(f"{a}\n" for a in at))
        stems.append(stem)
    (out / "list.txt").write_text("".join(f"{s}\n" for s in stems))
    print(f"{len(stems)} schemas written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
