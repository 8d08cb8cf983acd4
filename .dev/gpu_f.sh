#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
export COLUMNS=160
date -u > $OUT/env.txt
timeout 330 python3 benchmarks/diagnose_speed_gpu.py --out /tmp/speed --budget-s 300 > $OUT/speed.txt 2>&1
cp /tmp/speed/summary.json $OUT/speed_summary.json 2>/dev/null
timeout 100 python3 benchmarks/compiled_gpu.py --model benchmarks/models/gpt2_hf_compiled.py --out $OUT/compiled-gpt2.json > $OUT/compiled.txt 2>&1
ROOFLINE_MODEL_SIZE=large timeout 60 python3 -m roofline -q diagnose workloads/models/gelu_chain_unfused.py --device cuda --dtype bf16 --verify -o /tmp/v.json > /dev/null 2>&1
python3 -c "
import json; r=json.load(open('/tmp/v.json'))
for v in r.get('verified', []): print(v['rule'], v['technique'], v.get('fixed_s'), sum((v.get('op_times_s') or {}).values()))
" > $OUT/verify_perop.txt 2>&1
timeout 80 python3 benchmarks/trace_roundtrip_gpu.py --mode training --out $OUT/trace-training.json > $OUT/trace.txt 2>&1
true
