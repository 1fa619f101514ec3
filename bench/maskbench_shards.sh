#!/bin/bash
# The whole MaskBench with grammask, XGrammar and llguidance in one run, split into N shards run side
# by side (one per core; engines take turns schema by schema inside each shard, so all three see the same
# load), then merged into one report. Usage (from the repository root):
#   SHARDS=16 BUDGET_S=450 bash bench/maskbench_shards.sh RESULTS_DIR [extra maskbench args]
# Needs GRAMMASK_SHARED (or ../shared) and the three engines importable. Each shard stops starting new
# schemas after BUDGET_S seconds; the merged report counts the schemas actually run.
set -u
OUTDIR=${1:?results folder}; shift
SHARDS=${SHARDS:-$(nproc)}
BUDGET_S=${BUDGET_S:-86400}
PY=${PYTHON:-python3}
ARGS="--engines grammask,xgrammar-default,llguidance --limit 11305 --seed 2727 --timeout-s 5 --memory-mb 4096 --time-budget-s $BUDGET_S --no-plots"
mkdir -p "$OUTDIR"
for i in $(seq 1 "$SHARDS"); do
  $PY -m grammask.bench maskbench $ARGS "$@" --shard "$i/$SHARDS" --out "$OUTDIR/shard-$i" > "$OUTDIR/shard-$i.log" 2>&1 &
done
wait
dirs=()
for i in $(seq 1 "$SHARDS"); do dirs+=("$OUTDIR/shard-$i"); done
$PY -m grammask.bench merge "${dirs[@]}" --out "$OUTDIR/merged"
