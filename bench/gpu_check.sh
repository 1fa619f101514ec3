#!/bin/bash
# GPU checks for a lent GPU machine (no network there): the kernel tests with CUDA present, mask
# application on the GPU beside XGrammar, and the CPU apply and batch benchmarks on idle cores.
# Results go to $OUT (or ./gpu_check_out). Prepare on the CI machine, from the repository root:
#   printf '/.whl/\n/.devdata/\n' >> .git/info/exclude
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl \
#     xgrammar==0.2.8 apache-tvm-ffi pydantic pydantic-core annotated-types typing-inspection typing_extensions
#   mkdir -p .devdata/shared/tokenizers && cp -a ../shared/tokenizers/llama3 .devdata/shared/tokenizers/
#   (cd ../shared/maskbench && tar cf - data | xz -T2 > "$OLDPWD/.devdata/mb.tar.xz")
#   strip -o .devdata/_core.abi3.so python/grammask/_core.abi3.so   # the built extension
# then run `bash bench/gpu_check.sh` there with `.whl` and `.devdata` carried (about 35 MB).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
cp .devdata/_core.abi3.so python/grammask/_core.abi3.so
mkdir -p .devdata/shared/maskbench && tar xJf .devdata/mb.tar.xz -C .devdata/shared/maskbench
export PYTHONPATH=/tmp/site:$PWD/python GRAMMASK_SHARED=$PWD/.devdata/shared PYTHONUNBUFFERED=1
nvidia-smi -L; nproc; cat /proc/loadavg
date +%T; timeout 200 python3 -m pytest -q -rs -s -p no:cacheprovider tests/test_kernels.py tests/test_bitmask.py 2>&1 | tee "$OUT/kernels_test.log" | tail -30
date +%T; timeout 150 python3 bench/apply_bench.py --device cuda --reps 200 2>&1 | tee "$OUT/apply_cuda.log"
date +%T; timeout 170 python3 bench/batch_bench.py --rows 64 --repeats 2 2>&1 | grep -v Warning | tee "$OUT/batch.log"
date +%T; timeout 60 python3 bench/apply_bench.py --reps 200 2>&1 | tee "$OUT/apply_cpu.log"
date +%T
