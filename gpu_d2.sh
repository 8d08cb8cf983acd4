#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
export COLUMNS=160
timeout 250 python3 benchmarks/measure_gpu.py --out /tmp/meas > $OUT/measure.txt 2>&1
cp /tmp/meas/summary.json $OUT/measure_summary.json 2>/dev/null
timeout 230 python3 benchmarks/ncu_counters_gpu.py --out /tmp/ncu --timeout-s 220 > $OUT/ncu.txt 2>&1
cp /tmp/ncu/summary.json $OUT/ncu_summary.json 2>/dev/null
mkdir -p /tmp/v
timeout 100 python3 benchmarks/verify_gpu.py --out /tmp/v --cases silu_written_out --extra benchmarks/models/gpt2_hf.py:bf16 > $OUT/verify_d.txt 2>&1
true
