"""Replays batch_fill_with's two-thread schedule on row costs dumped by batch_critical_path.py
(``--dump F``): per step, rows claimed in predicted-cost order by two threads from a shared
counter (the second joining ``--wake`` us late), the whole step serial when the predicted work
beside the longest row is under ``SPLIT_MIN_NS``, as in crates/grammask-core/src/batch.rs.

Predictions as there: a memo hit costs ``HIT_NS``; a matcher's first miss ``UNKNOWN_MISS_NS``;
later misses from its past misses, by the rule compared: ``last`` (the last miss) or ``decay``
(``batch::next_miss_estimate``: max(miss, 0.9 x previous)). A row under ``--hit-us`` counts as a
memo hit (the dump has no look-up results). Printed beside the bound (max(slowest row, half the
step)) and the same schedule with true costs (order and threshold). A step's instance -1, where
the dump has one, is the batch call's serial time: added to the step, not scheduled.

Hand-offs are modelled, not timed: a split step first costs ``--setup`` us on the calling thread
(look-ups and order, before the parked thread is woken), the second thread joins ``--wake`` us
after that, and when it finishes more than ``CALLER_SPIN_NS`` after the calling thread, the
calling thread has gone to sleep and returns ``--end-wake`` us late. ``--stages`` prints the gap
from the bound to the decay rule with all three, one cost added at a time (order and threshold,
then the wake, the setup, the end wake), for the wake latencies listed.

    python bench/batch_replay.py DUMP [--wake 10] [--setup 0] [--end-wake 0] [--hit-us 3]
        [--stages 10,30,60]
"""

from __future__ import annotations

import argparse
import json

HIT_NS = 400
UNKNOWN_MISS_NS = 1_000_000
SPLIT_MIN_NS = 50_000
CALLER_SPIN_NS = 30_000  # crates/grammask-py/src/pool.rs CALLER_SPIN


def makespan(costs: dict[int, int], order: list[int], wake_ns: int, setup_ns: int = 0, end_ns: int = 0) -> int:
    """Two threads take `order`'s rows in turn as they come free, after `setup_ns`; the second
    starts `wake_ns` later. The step ends `end_ns` late when the second thread ends more than
    CALLER_SPIN_NS after the first (the calling thread slept)."""
    free = [setup_ns, setup_ns + wake_ns]
    for row in order:
        k = 0 if free[0] <= free[1] else 1
        free[k] += costs[row]
    if free[1] == setup_ns + wake_ns:
        return free[0]  # the second thread found nothing left
    return max(free[0], free[1] + (end_ns if free[1] - free[0] > CALLER_SPIN_NS else 0))


def replay(steps, rule: str, wake_ns: int, hit_ns: float, setup_ns: int = 0, end_ns: int = 0) -> float:
    """Total ms of the decode under `rule` ('last', 'decay', or 'true': the true costs decide the
    order and the serial threshold)."""
    est: dict[int, int] = {}
    total = 0
    for step in steps:
        cost = dict(step)
        total += cost.pop(-1, 0)
        hit = {r: c < hit_ns for r, c in cost.items()}
        pred = cost if rule == "true" else {r: HIT_NS if hit[r] else est.get(r, UNKNOWN_MISS_NS) for r in cost}
        if sum(pred.values()) - max(pred.values()) < SPLIT_MIN_NS:
            total += sum(cost.values())
        else:
            total += makespan(cost, sorted(cost, key=lambda r: -pred[r]), wake_ns, setup_ns, end_ns)
        for r, c in cost.items():
            if not hit[r]:
                est[r] = c if rule == "last" else max(c, est.get(r, 0) // 10 * 9, 1)
    return total / 1e6


def stages(steps, serial: float, bound: float, hit_ns: float, setup_ns: int, end_ns: int, wakes: list[float]) -> None:
    """One line per wake latency: the speed-up after each cost is added to the bound."""
    print("wake us | bound | true costs | decay order, no hand-off | + wake | + setup | + end wake")
    for w in wakes:
        wake_ns = int(w * 1e3)
        xs = [
            serial / bound,
            serial / replay(steps, "true", 0, hit_ns),
            serial / replay(steps, "decay", 0, hit_ns),
            serial / replay(steps, "decay", wake_ns, hit_ns),
            serial / replay(steps, "decay", wake_ns, hit_ns, setup_ns),
            serial / replay(steps, "decay", wake_ns, hit_ns, setup_ns, end_ns or wake_ns),
        ]
        print(f"{w:g} | " + " | ".join(f"{x:.3f}x" for x in xs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--wake", type=float, default=10.0, help="us before the second thread starts")
    ap.add_argument("--setup", type=float, default=0.0, help="us of a split step before the wake")
    ap.add_argument("--end-wake", type=float, default=0.0, help="us a sleeping caller returns late (stages: --wake's)")
    ap.add_argument("--hit-us", type=float, default=3.0)
    ap.add_argument("--stages", default="", help="wake latencies (us, comma-separated) for the gap table")
    args = ap.parse_args()
    with open(args.dump) as f:
        steps = json.load(f)
    serial = sum(c for s in steps for _, c in s) / 1e6
    call = sum(c for s in steps for r, c in s if r == -1) / 1e6
    rows = [[c for r, c in s if r != -1] for s in steps]
    bound = sum(max(max(s), sum(s) / 2) for s in rows) / 1e6 + call
    print(f"serial {serial:.2f} ms; bound {bound:.2f} ms ({serial / bound:.3f}x)")
    setup_ns, end_ns = int(args.setup * 1e3), int(args.end_wake * 1e3)
    if args.stages:
        stages(steps, serial, bound, args.hit_us * 1e3, setup_ns, end_ns, [float(w) for w in args.stages.split(",")])
        return
    for rule in ("true", "last", "decay"):
        ms = replay(steps, rule, int(args.wake * 1e3), args.hit_us * 1e3, setup_ns, end_ns)
        print(f"order by {rule:5s}: {ms:.2f} ms ({serial / ms:.3f}x)")


if __name__ == "__main__":
    main()
