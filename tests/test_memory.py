"""Parameters and memory (issue 29 item 4): per-module parameters, weights, activations, KV cache and the peak
allocated, stored once in the report (``memory``) and shown by every renderer. Tiny models, injected timings."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from diagnose_doubles import timed_by  # noqa: E402
from test_api_diagnose import fake_cpu, fake_time  # noqa: E402, F401

import roofline  # noqa: E402
from roofline.diagnose.count import count_ops  # noqa: E402
from roofline.diagnose.memory import memory_facts, module_parameters, peak_memory  # noqa: E402
from roofline.render.diagnose import DiagnoseRenderer  # noqa: E402
from roofline.render.report_html import HtmlReportRenderer  # noqa: E402
from roofline.render.report_markdown import MarkdownReportRenderer  # noqa: E402
from roofline.report.memory import (  # noqa: E402
    CPU_PEAK_NOTE,
    INFERENCE_BASIS,
    TRAINING_BASIS,
    MemoryFacts,
    ModuleParams,
    activation_bytes,
    memory_view,
)
from roofline.report.points import report_document  # noqa: E402


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def test_a_linear_4_3_has_15_parameters_in_60_bytes():
    facts = module_parameters(torch.nn.Linear(4, 3))
    assert (facts.parameters, facts.parameter_bytes, facts.buffer_bytes, facts.weight_bytes) == (15, 60, 0, 60)
    assert facts.modules == [ModuleParams(module="", type="Linear", parameters=15, bytes=60, total_parameters=15,
                                          total_bytes=60)]  # fmt: skip


def test_own_and_subtree_parameters_a_shared_weight_counted_once_and_buffers():
    model = mlp()
    facts = module_parameters(model)
    assert [(m.module, m.type, m.parameters, m.total_parameters) for m in facts.modules] == [
        ("", "Sequential", 0, 4 * 8 + 8 + 8 * 3 + 3),
        ("0", "Linear", 40, 40),
        ("2", "Linear", 27, 27),
    ]
    tied = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False), torch.nn.Linear(4, 4, bias=False))
    tied[1].weight = tied[0].weight
    assert (module_parameters(tied).parameters, module_parameters(tied).modules[0].total_bytes) == (16, 64)
    norm = module_parameters(torch.nn.BatchNorm1d(4).to(torch.bfloat16))
    # weight + bias in bf16; running mean/var bf16, num_batches_tracked int64
    assert (norm.parameters, norm.parameter_bytes, norm.buffer_bytes, norm.weight_bytes) == (8, 16, 24, 40)
    plain = module_parameters(lambda x: x)
    assert plain.parameters is None and "plain callable" in plain.notes[0]


def test_activations_of_a_known_small_model():
    """Linear(4,8) -> ReLU -> Linear(8,3) on a batch of 2 (fp32): the ReLU's output (2x8x4 = 64 bytes) is what the
    backward pass reads of the forward's tensors; in inference the first Linear's and the ReLU's outputs are live
    together (the ReLU reads one and writes the other): 128 bytes."""
    x = torch.randn(2, 4)
    assert activation_bytes(count_ops(mlp(), (x,), {}, mode="training"), "training") == (64, TRAINING_BASIS)
    assert activation_bytes(count_ops(mlp(), (x,), {}, mode="inference"), "inference") == (128, INFERENCE_BASIS)
    assert activation_bytes([], "inference") == (None, "")


def test_peak_on_the_cpu_is_none_with_a_note_and_on_cuda_the_allocators_peak(monkeypatch):
    with peak_memory("cpu") as peak:
        pass
    assert (peak.bytes, peak.notes) == (None, [CPU_PEAK_NOTE])
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: calls.append("read") or 4096)
    with peak_memory("cuda:0") as peak:
        calls.append("run")
    assert calls == ["sync", "reset", "run", "sync", "read"]
    assert (peak.bytes, peak.source, peak.notes) == (4096, "torch.cuda.max_memory_allocated", [])
    facts = memory_facts(torch.nn.Linear(4, 3), [], "inference", peak)
    assert facts.peak_allocated_bytes == 4096 and facts.activation_bytes is None and facts.notes


def _report(mode: str = "inference"):
    result = roofline.diagnose(mlp(), (torch.randn(2, 4),), mode=mode, warmup=0, iters=1,
                               boundaries=timed_by(fake_time))  # fmt: skip
    return result.report()


def test_the_report_stores_the_block_once_and_reads_it_back(fake_cpu, tmp_path):  # noqa: F811
    report = _report("training")
    stored = report.memory
    assert (stored["parameters"], stored["parameter_bytes"], stored["weight_bytes"]) == (67, 268, 268)
    assert (stored["activation_bytes"], stored["activations"]) == (64, TRAINING_BASIS)
    assert stored["peak_allocated_bytes"] is None and CPU_PEAK_NOTE in stored["notes"]
    path = report.save(tmp_path / "r.json")
    back = roofline.load_report(path)
    assert back.memory == stored == json.loads(path.read_text())["memory"]
    assert MemoryFacts.model_validate(back.memory).modules[1] == ModuleParams(
        module="0", type="Linear", parameters=40, bytes=160, total_parameters=40, total_bytes=160
    )
    view = memory_view(back)
    assert view is not None and dict(view.items) == {
        "parameters": "67 (268 B)",
        "weights": "268 B",
        "activations": f"64 B ({TRAINING_BASIS})",
        "peak allocated": "not measured",
    }


def test_every_renderer_shows_the_memory_lines(fake_cpu):  # noqa: F811
    report = _report()
    console = DiagnoseRenderer(color=False).render(report)
    doc = report_document(report, "r")
    markdown = MarkdownReportRenderer().render(doc)
    html = HtmlReportRenderer().render(doc)
    assert "  memory     parameters 67 (268 B); weights 268 B; activations 128 B" in console
    for text in (markdown, html):
        assert "Parameters and memory" in text
    for text in (console, markdown, html):
        assert "268 B" in text and f"128 B ({INFERENCE_BASIS})" in text
        assert "Sequential" in text and CPU_PEAK_NOTE in text
    assert "| (model) | Sequential | 67 | 0 | 268 B |" in markdown
    assert "<td>0</td><td>Linear</td>" in html
    # a report without the block (older ones, bench, analyze) shows no section
    older = report.model_copy(update={"memory": None})
    assert memory_view(older) is None and "  memory  " not in DiagnoseRenderer(color=False).render(older)


def test_an_analytic_decode_report_shows_the_cost_models_kv_cache(tmp_path):
    from typer.testing import CliRunner

    from roofline.cli import app

    out = tmp_path / "d.json"
    args = ["analyze", "decode", "--params", "8.75e9", "--d-model", "4096", "--layers", "32", "--heads", "32",
            "--context", "1024", "--batch", "4", "-d", "h100-sxm", "-o", str(out)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = roofline.load_report(out)
    serving = report.rows[0]["serving"]
    kv = serving["kv_cache_per_request_bytes"]
    assert kv > 0
    view = memory_view(report)
    assert view is not None and len(view.items) == len(report.rows)
    from roofline.units import format_bytes

    text = MarkdownReportRenderer().render(report_document(report, "d"))
    assert f"KV cache {format_bytes(kv)} per request, x batch 4 = {format_bytes(4 * kv)}" in text
    assert f"weights {format_bytes(serving['weight_memory_bytes'])}" in text


def test_a_profiled_loop_region_stores_parameters_and_activations(fake_cpu):  # noqa: F811
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with roofline.profile(steps=1, warmup=0, model=model) as run:
        for _ in range(10):
            optimizer.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            optimizer.step()
            run.step()
            if run.done:
                break
    memory = run.report().memory
    # the ReLU's output (64 B) and the batch the step itself made (randn 2x4: 32 B), which the first Linear's
    # weight gradient reads; the seed of ones the loop's backward starts from is no activation
    assert (memory["parameters"], memory["activation_bytes"], memory["activations"]) == (67, 96, TRAINING_BASIS)
    assert memory["peak_allocated_bytes"] is None and "peak allocated: not measured in a loop" in memory["notes"]


@pytest.mark.gpu
def test_on_cuda_the_report_reads_the_allocators_real_peak():
    """A real CUDA diagnosis: the peak is CUDA's allocator's, at least the weights and one input and output on the
    device, and below weights + six activations (the input, three outputs, the last call's output kept) plus a
    64 MiB allowance (the allocator's rounding, cuBLAS's workspace)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096))
    x = torch.randn(2048, 4096)
    memory = roofline.diagnose(model, (x,), device="cuda", warmup=1, iters=2).report().memory
    assert memory is not None and memory["peak_source"] == "torch.cuda.max_memory_allocated"
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    activation = x.numel() * x.element_size()  # each of the three outputs is as large as the input
    assert weights + 2 * activation <= memory["peak_allocated_bytes"] <= weights + 6 * activation + 64 * 2**20
