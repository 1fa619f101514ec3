"""Time to first mask (compile, matcher, first fill) of engines through the MaskBench adapters,
the engines alternating per schema, in thread CPU time (usable on a loaded machine), after a warm
phase (other schemas compiled first, as a benchmark runner has).

    GRAMMASK_SHARED=/path/to/shared python bench/ttfm_pair.py WARM.txt BAND.txt [--engines grammask,llguidance] [--bitmask-per-request]

WARM and BAND list MaskBench files (paths), one a line. Prints each engine's p50 and sum of wall
and thread CPU time over BAND, and the median per-schema CPU ratio of the first engine to the
second.
Each engine's bitmask is allocated once, before the timed window, and refilled by each new
matcher (the MaskBench protocol, `engines.BitmaskPool`); with `--bitmask-per-request` each matcher
allocates its own inside the window (the protocol before session 70). The timed window also
frees the compiled grammar and the matcher (one expression).
A BAND file that an engine refuses is left out of every engine's figures (and named). With
`--each`, also one line per BAND file: each engine's thread CPU time (ms).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from grammask.bench.data import default_tokenizer_dir, load_hf_tokenizer
from grammask.bench.engines import ENGINES


def schemas(path: str) -> list[str]:
    """The `schema` field of each MaskBench file listed in `path`, as JSON text."""
    lines = Path(path).read_text().split()
    return [json.dumps(json.loads(Path(p).read_text())["schema"]) for p in lines]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("warm")
    ap.add_argument("band")
    ap.add_argument("--engines", default="grammask,llguidance")
    ap.add_argument("--each", action="store_true", help="also print each BAND file's thread CPU time per engine")
    ap.add_argument("--bitmask-per-request", action="store_true",
                    help="allocate each matcher's bitmask inside the timed window")
    args = ap.parse_args()
    tok = load_hf_tokenizer(default_tokenizer_dir())
    adapters = {e: ENGINES[e](tok, bitmask_per_request=args.bitmask_per_request)
                for e in args.engines.split(",")}
    for ad in adapters.values():
        for s in schemas(args.warm):
            try:
                ad.matcher(ad.compile(s)).fill()
            except Exception:  # noqa: BLE001 (a schema an engine refuses only warms less)
                pass
    wall: dict[str, list[float]] = {e: [] for e in adapters}
    cpu: dict[str, list[float]] = {e: [] for e in adapters}
    paths = Path(args.band).read_text().split()
    kept: list[str] = []
    for path, s in zip(paths, schemas(args.band)):
        times: dict[str, tuple[float, float]] = {}
        for e, ad in adapters.items():
            a, ta = time.perf_counter(), time.thread_time()
            try:
                ad.matcher(ad.compile(s)).fill()
            except Exception as exc:  # noqa: BLE001 (a schema an engine refuses leaves every engine's figures)
                print(f"{Path(path).stem}: {e} refused it ({str(exc)[:80]})")
                break
            tb, b = time.thread_time(), time.perf_counter()
            times[e] = ((b - a) * 1e3, (tb - ta) * 1e3)
        else:
            kept.append(path)
            for e, (w, c) in times.items():
                wall[e].append(w)
                cpu[e].append(c)
    if args.each:
        for i, path in enumerate(kept):
            print(Path(path).stem, " ".join(f"{e} {cpu[e][i]:.2f}" for e in adapters))
    for e in adapters:
        print(f"{e:<12} wall p50 {statistics.median(wall[e]):.3f} ms sum {sum(wall[e]):.1f}; "
              f"thread cpu p50 {statistics.median(cpu[e]):.3f} ms sum {sum(cpu[e]):.1f}")
    if len(adapters) >= 2:
        first, second = list(adapters)[:2]
        ratios = [x / y for x, y in zip(cpu[first], cpu[second])]
        print(f"per-schema cpu ratio {first}/{second}: median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
