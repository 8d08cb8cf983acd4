#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
export COLUMNS=160
date -u > $OUT/env.txt; nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv >> $OUT/env.txt
PYTHONUNBUFFERED=1 timeout 170 python3 benchmarks/ceilings_gpu.py --out /tmp/ceil > $OUT/ceilings.txt 2>&1
cp /tmp/ceil/ceilings.json $OUT/ceilings.json 2>/dev/null
timeout 300 python3 benchmarks/measure_gpu.py --out /tmp/meas > $OUT/measure.txt 2>&1
cp /tmp/meas/summary.json $OUT/measure_summary.json 2>/dev/null
timeout 90 python3 benchmarks/training_match.py --device cuda --out /tmp/tm > $OUT/training_match.txt 2>&1
cp /tmp/tm/*.json $OUT/ 2>/dev/null
true
