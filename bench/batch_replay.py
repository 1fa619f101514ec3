"""Replays batch_fill_with's two-thread schedule on row costs dumped by batch_critical_path.py
(``--dump F``): per step, rows claimed in predicted-cost order by two threads from a shared
counter (the second joining ``--wake`` us late), the whole step serial when the predicted work
beside the longest row is under ``SPLIT_MIN_NS``, as in crates/grammask-core/src/batch.rs.

Predictions as there: a memo hit costs ``HIT_NS``; a matcher's first miss ``UNKNOWN_MISS_NS``;
later misses from its past misses, by the rule compared: ``last`` (the last miss) or ``decay``
(``batch::next_miss_estimate``: max(miss, 0.9 x previous)). A row under ``--hit-us`` counts as a
memo hit (the dump has no look-up results). Printed beside the bound (max(slowest row, half the
step)) and the same schedule with true costs (order and threshold). A replay, not a timing: it shows what the order
and the serial threshold cost, not hand-off latencies.

    python bench/batch_replay.py DUMP [--wake 10] [--hit-us 3]
"""

from __future__ import annotations

import argparse
import json

HIT_NS = 400
UNKNOWN_MISS_NS = 1_000_000
SPLIT_MIN_NS = 50_000


def makespan(costs: dict[int, int], order: list[int], wake_ns: int) -> int:
    """Two threads take `order`'s rows in turn as they come free; the second starts at `wake_ns`."""
    free = [0, wake_ns]
    for row in order:
        k = 0 if free[0] <= free[1] else 1
        free[k] += costs[row]
    return max(free[0], free[1] if free[1] > wake_ns else 0)


def replay(steps, rule: str, wake_ns: int, hit_ns: float) -> float:
    """Total ms of the decode under `rule` ('last', 'decay', or 'true': the true costs decide the
    order and the serial threshold)."""
    est: dict[int, int] = {}
    total = 0
    for step in steps:
        cost = dict(step)
        hit = {r: c < hit_ns for r, c in cost.items()}
        pred = cost if rule == "true" else {r: HIT_NS if hit[r] else est.get(r, UNKNOWN_MISS_NS) for r in cost}
        if sum(pred.values()) - max(pred.values()) < SPLIT_MIN_NS:
            total += sum(cost.values())
        else:
            total += makespan(cost, sorted(cost, key=lambda r: -pred[r]), wake_ns)
        for r, c in cost.items():
            if not hit[r]:
                est[r] = c if rule == "last" else max(c, est.get(r, 0) // 10 * 9, 1)
    return total / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--wake", type=float, default=10.0, help="us before the second thread starts")
    ap.add_argument("--hit-us", type=float, default=3.0)
    args = ap.parse_args()
    with open(args.dump) as f:
        steps = json.load(f)
    serial = sum(c for s in steps for _, c in s) / 1e6
    bound = sum(max(max(c for _, c in s), sum(c for _, c in s) / 2) for s in steps) / 1e6
    print(f"serial {serial:.2f} ms; bound {bound:.2f} ms ({serial / bound:.3f}x)")
    for rule in ("true", "last", "decay"):
        ms = replay(steps, rule, int(args.wake * 1e3), args.hit_us * 1e3)
        print(f"order by {rule:5s}: {ms:.2f} ms ({serial / ms:.3f}x)")


if __name__ == "__main__":
    main()
