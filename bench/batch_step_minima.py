"""batch_bench.py's workloads on grammask alone, 1 vs 2 threads alternating, with each batch step's
minimum over the runs: on a shared machine the minimum filters out the steps where another process
held the core, so the per-step p50 of 1 vs 2 threads can be compared where the totals cannot.

MaskBench rows are chosen as in batch_bench.py but by grammask alone (XGrammar is not asked), and
cached in ``--rows-cache`` so before/after runs share them.

    python bench/batch_step_minima.py WORKLOAD [--repeats 8] [--rows-cache FILE] [--pool 256]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import batch_bench as bb  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=bb.WORKLOADS)
    ap.add_argument("--pool", type=int, default=256, help="instances a continuous workload draws from")
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--rows-cache", default="")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    import grammask

    tok = AutoTokenizer.from_pretrained(str(bb.shared_dir() / "tokenizers" / "llama3"))
    info = grammask.TokenizerInfo.from_huggingface(tok)
    schemas, docs = bb.workload_rows(args.workload, {"grammask": (grammask, info)}, tok, 64, 0, args.rows_cache, args.pool)
    rows = 64 if args.workload.endswith("-continuous") else 0
    runs: dict[int, list] = {1: [], 2: []}
    for _ in range(args.repeats):
        for t in runs:
            runs[t].append(bb.run(grammask, info, schemas, docs, t, args.workload.startswith("one-schema"), rows=rows))
    print(
        f"{args.workload}: {grammask.__file__}, load average {os.getloadavg()[0]:.1f}, {args.repeats} runs"
    )
    for t, rs in runs.items():
        best = min(rs, key=lambda r: sum(r[0]))
        mins = np.min(np.array([r[0] for r in rs]), axis=0)
        small = mins <= 0.1
        print(
            f"{t} thread(s): best run wall {sum(best[0]):.1f} ms, process CPU {best[1]:.1f} ms, "
            f"p50 {np.percentile(best[0], 50):.4f} p99 {np.percentile(best[0], 99):.3f} ms/step; "
            f"step minima: sum {mins.sum():.2f} ms, p50 {np.percentile(mins, 50):.4f} p99 {np.percentile(mins, 99):.3f}, "
            f"{(~small).sum()} steps over 0.1 ms sum {mins[~small].sum():.2f} ms, the others {mins[small].sum():.2f} ms"
        )


if __name__ == "__main__":
    main()
