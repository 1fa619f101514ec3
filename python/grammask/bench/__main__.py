"""Command line: ``python -m grammask.bench maskbench [DIR] --engines ... --out RESULTS_DIR``,
``merge RUN_DIR... --out RESULTS_DIR`` and ``plot RESULTS_DIR``.

Parses arguments, resolves the default data and tokenizer folders (``data``), and hands over to
``maskbench.run`` or ``maskbench.finish``. Exit status 2 for missing inputs, no usable engine, or
results folders that cannot be resumed or merged.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np

from .data import MissingDataError, default_data_dir, default_tokenizer_dir, parse_shard
from .engines import DEFAULT_ENGINES, ENGINES


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m grammask.bench", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    mb = sub.add_parser(
        "maskbench",
        help="mask computation benchmark over MaskBench files (JSON Schema + instances)",
        description="Run the MaskBench protocol: compile each schema, then for every valid and "
        "invalid instance compute the mask before each token, check the token against it, "
        "accept it, and check the stop token at the end.",
    )
    mb.add_argument("data_dir", nargs="?", default=None,
                    help="folder of MaskBench *.json files (default: <shared>/maskbench/data, "
                    "shared = $GRAMMASK_SHARED or ../shared next to the repository)")
    mb.add_argument("--engines", default=DEFAULT_ENGINES,
                    help="comma-separated engines (default %(default)s); 'xgrammar' runs two "
                    "configurations (xgrammar = default options, xgrammar-flex = any_whitespace "
                    "and strict_mode=False), select one with xgrammar-default or xgrammar-flex. "
                    f"Known: {', '.join(n for n in ENGINES if n != 'fake')}")
    mb.add_argument("--limit", type=int, default=None, help="sample this many files")
    mb.add_argument("--seed", type=int, default=0, help="seed for --limit sampling")
    mb.add_argument("--out", required=True, help="results folder (created if needed)")
    mb.add_argument("--tokenizer", default=None,
                    help="Hugging Face tokenizer folder (default: <shared>/tokenizers/llama3)")
    mb.add_argument("--timeout-s", type=float, default=120.0,
                    help="time limit per schema and engine, seconds (default %(default)s)")
    mb.add_argument("--memory-mb", type=int, default=8192,
                    help="resident memory limit per engine worker, MiB (default %(default)s)")
    mb.add_argument("--time-budget-s", type=float, default=None,
                    help="stop starting new schemas after this many seconds; results cover the "
                    "schemas done so far")
    mb.add_argument("--shard", default="1/1", metavar="I/N",
                    help="run shard I of N of the sampled files (every N-th from the I-th); run "
                    "each shard in its own process and folder, then combine them with 'merge'")
    mb.add_argument("--resume", action="store_true",
                    help="continue the run in --out: skip the schemas it holds, append the rest "
                    "(refused if engines, versions, tokenizer, limits, seed, limit or shard differ)")
    mb.add_argument("--overwrite", action="store_true",
                    help="start afresh in an --out folder that already holds a run")
    mb.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    mb.add_argument("--bitmask-per-request", action="store_true",
                    help="allocate each matcher's bitmask inside its timed TTFM (the protocol "
                    "before session 70); default: each engine's bitmask allocated once, before "
                    "any timed window, and refilled by each new matcher")
    mg = sub.add_parser(
        "merge",
        help="combine run folders (shards, or parts run apart) into one report",
        description="Write results.md, results.json, times.npz and plots for the schemas of "
        "several maskbench run folders together. Refuses folders that differ in engines, "
        "versions, tokenizer, time or memory limit, seed, limit or data, or that hold a schema "
        "twice. With one folder, rewrites its report (e.g. after a run was killed).",
    )
    mg.add_argument("run_dirs", nargs="+", help="maskbench --out folders")
    mg.add_argument("--out", required=True, help="folder for the combined report")
    mg.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    pl = sub.add_parser("plot", help="redraw the PNG plots of a results folder from its times.npz")
    pl.add_argument("results_dir")
    pl.add_argument("--prefix", default="", help="prefix for the PNG file names")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "plot":
        from .report import read_times, write_plots

        times_path = Path(args.results_dir) / "times.npz"
        if not times_path.is_file():
            print(f"error: {times_path} not found", file=sys.stderr)
            return 2
        times = read_times(times_path)
        results_path = Path(args.results_dir) / "results.json"
        if results_path.is_file():  # TTFM with compile timeouts counted as the limit
            import json

            from .stats import ttfm_values

            saved = json.loads(results_path.read_text(encoding="utf-8"))
            limit = saved["config"]["timeout_s"]
            for e in times:
                recs = [r for r in saved["records"] if r["engine"] == e]
                times[e]["ttfm_us"] = np.asarray(ttfm_values(recs, limit))
        for p in write_plots(Path(args.results_dir), times, args.prefix):
            print(p)
        return 0
    from .maskbench import finish, run
    from .runner import EngineUnavailable

    if args.command == "merge":
        try:
            finish(args.out, args.run_dirs, plots=not args.no_plots,
                   command="python -m grammask.bench " + " ".join(
                       shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])))
        except (OSError, ValueError) as e:  # FolderMismatch is a ValueError
            print(f"error: {e}", file=sys.stderr)
            return 2
        print((Path(args.out) / "results.md").read_text(encoding="utf-8"))
        return 0
    try:
        shard = parse_shard(args.shard)
        data_dir = args.data_dir or str(default_data_dir())
        tokenizer = args.tokenizer or str(default_tokenizer_dir())
        if args.limit is not None and args.limit < 1:
            raise ValueError("--limit must be at least 1")
        result = run(
            data_dir,
            args.engines,
            args.out,
            tokenizer,
            limit=args.limit,
            seed=args.seed,
            timeout_s=args.timeout_s,
            memory_mb=args.memory_mb,
            time_budget_s=args.time_budget_s,
            plots=not args.no_plots,
            shard=shard,
            resume=args.resume,
            overwrite=args.overwrite,
            bitmask_per_request=args.bitmask_per_request,
        )
    except (MissingDataError, EngineUnavailable, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print((Path(args.out) / "results.md").read_text(encoding="utf-8"))
    cfg = result["config"]
    if cfg["stopped_early"]:
        print(f"note: stopped early ({cfg['stopped_early']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
