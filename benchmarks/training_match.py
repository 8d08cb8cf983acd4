"""How much of a training step the timing pass matches to the counted ops (issue 16: backward ops).

    python benchmarks/training_match.py --device cuda --out DIR [--model benchmarks/models/gpt2_train.py]

For each attention variant of the GPT-2-like model (eager, sdpa) and each matching rule (strict: an op's name as
counted; variants: an in-place op matched to its out-of-place spelling, roofline.diagnose.join.match_name), counts
one forward + backward, times --iters profiled steps and prints: counted ops, the share of them matched, the share
of device time matched (matched / (matched + unmatched)), and the unmatched ops by name. Writes training-match.json
into --out. Sizes: ROOFLINE_MODEL_SIZE=large (GPT-2 small) unless --small.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure(model_path: Path, device: str, dtype: str | None, iters: int, strict: bool) -> dict:
    from roofline.diagnose import join
    from roofline.diagnose.count import count_ops
    from roofline.diagnose.loader import load_model
    from roofline.diagnose.profile import time_model

    loaded = load_model(model_path, device=device, dtype=dtype, mode="training")
    records = count_ops(loaded.model, loaded.inputs, loaded.kwargs, mode="training")
    saved = getattr(join, "match_name", None)
    if strict and saved is not None:
        join.match_name = lambda name: name
    try:
        timing = time_model(
            loaded.model, loaded.inputs, loaded.kwargs, records, device=device, mode="training", warmup=2, iters=iters
        )
    finally:
        if saved is not None:
            join.match_name = saved
    matched = {op.index for op in timing.ops}
    device_s = sum(op.device_time_s for op in timing.ops)
    missing = collections.Counter(f"{r.op} ({r.phase})" for r in records if r.index not in matched)
    return {
        "ops": len(records),
        "matched_ops": len(matched),
        "ops_share": len(matched) / len(records),
        "matched_time_s": device_s,
        "unmatched_time_s": timing.unmatched_time_s,
        "time_share": device_s / (device_s + timing.unmatched_time_s) if device_s + timing.unmatched_time_s else 0.0,
        "unmatched": dict(missing.most_common(12)),
        "notes": timing.notes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "benchmarks" / "models" / "gpt2_train.py")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default=None, help="fp32 | bf16 | fp16 (default: as written)")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="the model's small sizes (CPU)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not args.small:
        os.environ["ROOFLINE_MODEL_SIZE"] = "large"
    results = []
    for attention in ("eager", "sdpa"):
        os.environ["ROOFLINE_ATTENTION"] = attention
        for rule in ("strict", "variants"):
            row = measure(args.model, args.device, args.dtype, args.iters, strict=rule == "strict")
            results.append({"attention": attention, "rule": rule, "device": args.device, **row})
            print(
                f"{attention:6} {rule:8} ops {row['matched_ops']:5}/{row['ops']:<5} {row['ops_share']:7.1%}  "
                f"time {row['time_share']:7.1%}  unmatched: {row['unmatched']}",
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "training-match.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
