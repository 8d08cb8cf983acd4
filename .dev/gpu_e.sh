#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
export COLUMNS=160
date -u > $OUT/env.txt
timeout 100 python3 benchmarks/trace_roundtrip_gpu.py --out $OUT/trace-inference.json > $OUT/trace.txt 2>&1
timeout 100 python3 benchmarks/trace_roundtrip_gpu.py --mode training --out $OUT/trace-training.json >> $OUT/trace.txt 2>&1
ROOFLINE_MODEL_SIZE=large timeout 90 python3 -m roofline diagnose workloads/models/gelu_chain_unfused.py --device cuda --dtype bf16 --verify -o /tmp/v.json > $OUT/verify_perop.txt 2>&1
python3 -c "
import json; r=json.load(open('/tmp/v.json'))
print(json.dumps([{k: v.get(k) for k in ('rule','technique','bound_gain','measured_gain','op_times_s','note')} for v in r.get('verified', [])], indent=1))
" >> $OUT/verify_perop.txt 2>&1
timeout 250 python3 benchmarks/ncu_counters_gpu.py --out /tmp/ncu --timeout-s 240 > $OUT/ncu.txt 2>&1
cp /tmp/ncu/summary.json $OUT/ncu_summary.json 2>/dev/null
true
