"""Records tests/data/mlp_train_cpu.json.gz: workloads/models/mlp_compute_bound.py (small), one training step
(forward + backward, as `roofline diagnose --mode training` runs it) per torch.profiler step, on the CPU.

    PYTHONPATH=. python tests/data/record_trace.py
"""

import gzip
import importlib.util
import json
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from roofline.diagnose.execute import run_once

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("mlp_train_cpu.json.gz")


def load_model():
    spec = importlib.util.spec_from_file_location("mlp", ROOT / "workloads/models/mlp_compute_bound.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    return module.Model(*module.get_init_inputs()), module.get_inputs()


def main() -> None:
    model, inputs = load_model()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        prof = profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=1, warmup=1, active=3),
            on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
        )
        with prof:
            for _ in range(5):
                model.zero_grad(set_to_none=True)
                run_once(model, inputs, {}, "training")
                prof.step()
        trace = json.loads(path.read_text())
    OUT.write_bytes(gzip.compress(json.dumps(trace, separators=(",", ":")).encode(), mtime=0))


if __name__ == "__main__":
    main()
