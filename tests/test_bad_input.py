"""The bad-input corpus: every command, fed what a user gets wrong, answers with one line and its documented exit
code (docs/cli.md), never our traceback.

Each case is ``(id, argv, code, needle)``: ``argv`` may name files of the corpus directory as ``{d}/NAME`` (made
by the ``corpus`` fixture below); the error line must contain ``needle``. A case whose code is 1 is the user's own
code failing: their traceback is shown (never one of our frames), then our one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SHEET = Path(__file__).resolve().parents[1] / "hardware_specs" / "h100-sxm.yaml"

MODEL_OK = """\
import torch
from torch import nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x)

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""

FILES: dict[str, str | bytes] = {
    "sheet_inf.yaml": SHEET.read_text().replace("fp32: 66.9}", "fp32: .inf}"),
    "sheet_1e400.yaml": SHEET.read_text().replace("fp32: 66.9}", "fp32: 1e400}"),
    "sheet_tiny_bw.yaml": SHEET.read_text().replace("bandwidth_gb_per_s: 3350", "bandwidth_gb_per_s: 1e-300"),
    "sheet_zero_bw.yaml": SHEET.read_text().replace("bandwidth_gb_per_s: 3350", "bandwidth_gb_per_s: 0"),
    "sheet_neg.yaml": SHEET.read_text().replace("fp32: 66.9}", "fp32: -1}"),
    "sheet_nan.yaml": SHEET.read_text().replace("fp32: 66.9}", "fp32: .nan}"),
    "sheet_text.yaml": SHEET.read_text().replace("fp32: 66.9}", "fp32: fast}"),
    "sheet_missing.yaml": "\n".join(
        line for line in SHEET.read_text().splitlines() if "bandwidth_gb_per_s" not in line
    ),
    "sheet_extra.yaml": SHEET.read_text() + "\nwarp_drive: true\n",
    "sheet_syntax.yaml": "name: [unclosed\n",
    "sheet_python.yaml": "!!python/object/apply:os.system ['echo hi']\n",
    "sheet_list.yaml": "- a\n- b\n",
    "sheet_empty.yaml": "",
    "sheet_binary.yaml": bytes(range(256)) * 4,
    "sheet_latin1.yaml": "name: caf\xe9\ndisplay_name: x\n".encode("latin-1"),
    "suite_bad.yaml": "name: s\nworkloads: 3\n",
    "suite_kind.yaml": "name: s\nworkloads:\n  - {kind: fft, n: 8}\n",
    "suite_size.yaml": "name: s\nworkloads:\n  - {kind: gemm, m: 0, n: 8, k: 8}\n",
    "suite_binary.yaml": b"\x00\xff\xfe" * 50,
    "llm_bad.yaml": "name: x\nlayers: -3\n",
    "not_json.json": "{ this is not json",
    "foreign.json": json.dumps({"hello": "world"}),
    "future.json": json.dumps({"schema": "roofline.report", "version": 99, "rows": []}),
    "empty.json": "",
    "list.json": "[1, 2, 3]",
    "notes.txt": "my notes\n",
    "model_ok.py": MODEL_OK,
    "model_syntax.py": "def broken(:\n",
    "model_none.py": "x = 1\n",
    "model_raises.py": MODEL_OK.replace("return self.lin(x)", "raise ValueError('bad shape in my model')"),
    "model_exit_import.py": "import sys\nsys.exit(0)\n",
    "model_exit_forward.py": MODEL_OK.replace("return self.lin(x)", "import sys; sys.exit(3)"),
    "model_import_error.py": "import no_such_package_xyz\n",
    "model_inputs_raise.py": MODEL_OK.replace("return [torch.randn(4, 8)]", "raise RuntimeError('no data')"),
    "model_bad_inputs.py": MODEL_OK.replace("return [torch.randn(4, 8)]", "return 42"),
    "model.txt": MODEL_OK,
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    for name, content in FILES.items():
        path = d / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    (d / "adir").mkdir()
    return d


GEMM = ["analyze", "gemm", "-n", "8", "-k", "8", "-d", "h100-sxm"]
CONV_TAIL = ["--width", "8", "--kernel-size", "3", "--stride", "0", "-d", "h100-sxm"]
CPU_GEMM = ["bench", "gemm", "-n", "8", "-k", "8", "--device", "cpu"]

CASES: list[tuple[str, list[str], int, str]] = [
    # the command line itself
    ("unknown-command", ["warp"], 2, "No such command"),
    ("unknown-option", ["--warp"], 2, "No such option"),
    ("quiet-verbose", ["-q", "-v", "specs", "list"], 2, "--quiet and --verbose"),
    ("completion-shell", ["completion", "tcsh"], 2, "'tcsh' is not a shell"),
    # specs
    ("specs-show-unknown", ["specs", "show", "h900"], 2, "h900"),
    ("specs-validate-missing", ["specs", "validate", "{d}/nothing.yaml"], 2, "nothing.yaml"),
    ("specs-validate-inf", ["specs", "validate", "{d}/sheet_inf.yaml"], 2, "sheet_inf.yaml"),
    ("specs-validate-1e400", ["specs", "validate", "{d}/sheet_1e400.yaml"], 2, "sheet_1e400.yaml"),
    ("specs-validate-tiny-bw", ["specs", "validate", "{d}/sheet_tiny_bw.yaml"], 2, "bandwidth"),
    ("specs-validate-zero-bw", ["specs", "validate", "{d}/sheet_zero_bw.yaml"], 2, "bandwidth"),
    ("specs-validate-negative", ["specs", "validate", "{d}/sheet_neg.yaml"], 2, "sheet_neg.yaml"),
    ("specs-validate-nan", ["specs", "validate", "{d}/sheet_nan.yaml"], 2, "sheet_nan.yaml"),
    ("specs-validate-text", ["specs", "validate", "{d}/sheet_text.yaml"], 2, "sheet_text.yaml"),
    ("specs-validate-missing-field", ["specs", "validate", "{d}/sheet_missing.yaml"], 2, "sheet_missing.yaml"),
    ("specs-validate-extra-field", ["specs", "validate", "{d}/sheet_extra.yaml"], 2, "warp_drive"),
    ("specs-validate-syntax", ["specs", "validate", "{d}/sheet_syntax.yaml"], 2, "sheet_syntax.yaml"),
    ("specs-validate-python-tag", ["specs", "validate", "{d}/sheet_python.yaml"], 2, "sheet_python.yaml"),
    ("specs-validate-list", ["specs", "validate", "{d}/sheet_list.yaml"], 2, "sheet_list.yaml"),
    ("specs-validate-empty", ["specs", "validate", "{d}/sheet_empty.yaml"], 2, "sheet_empty.yaml"),
    ("specs-validate-binary", ["specs", "validate", "{d}/sheet_binary.yaml"], 2, "sheet_binary.yaml"),
    ("specs-validate-latin1", ["specs", "validate", "{d}/sheet_latin1.yaml"], 2, "sheet_latin1.yaml"),
    ("specs-validate-directory", ["specs", "validate", "{d}/adir"], 2, "adir"),
    ("specs-list-bad-spec", ["specs", "list", "--spec", "{d}/sheet_inf.yaml"], 2, "sheet_inf.yaml"),
    ("analyze-with-bad-spec", [*GEMM, "-m", "8", "--spec", "{d}/sheet_binary.yaml"], 2, "sheet_binary.yaml"),
    # analyze: sizes, words, devices, outputs
    ("analyze-size-zero", [*GEMM, "-m", "0"], 2, "-m"),
    ("analyze-size-negative", [*GEMM, "-m", "-5"], 2, "-m"),
    ("analyze-size-word", [*GEMM, "-m", "big"], 2, "-m"),
    ("analyze-size-nan", [*GEMM, "-m", "nan"], 2, "-m"),
    ("analyze-size-inf", [*GEMM, "-m", "inf"], 2, "-m"),
    ("analyze-size-huge-product", [*GEMM, "-m", "1e300x1e300"], 2, "-m"),
    ("analyze-size-fraction", [*GEMM, "-m", "2.5"], 2, "-m"),
    ("analyze-size-empty-list-item", [*GEMM, "-m", "1,,2"], 2, "-m"),
    ("analyze-missing-size", ["analyze", "gemm", "-m", "8", "-k", "8", "-d", "h100-sxm"], 2, "-n"),
    ("analyze-dtype", [*GEMM, "-m", "8", "--dtype", "fp7"], 2, "fp7"),
    ("analyze-device", ["analyze", "gemm", "-m", "8", "-n", "8", "-k", "8", "-d", "h900"], 2, "h900"),
    ("analyze-device-list-gap", ["analyze", "gemm", "-m", "8", "-n", "8", "-k", "8", "-d", "h100-sxm,,b200"], 2, "-"),
    ("analyze-unknown-kind", ["analyze", "fft", "-n", "8"], 2, "fft"),
    (
        "analyze-attention-seq",
        ["analyze", "attention", "--seq", "0", "--heads", "8", "--head-dim", "64", "-d", "h100-sxm"],
        2,
        "--seq",
    ),
    ("analyze-decode-model", ["analyze", "decode", "--model", "gpt7", "-d", "h100-sxm"], 2, "gpt7"),
    (
        "analyze-launch-floor-unit",
        ["analyze", "decode", "--model", "gpt2", "--launch-floor", "5 usec", "-d", "h100-sxm"],
        2,
        "--launch-floor: cannot read '5 usec' as a time",
    ),
    ("analyze-decode-bad-config", ["analyze", "decode", "--model", "{d}/llm_bad.yaml", "-d", "h100-sxm"], 2, "llm"),
    (
        "analyze-elementwise-op",
        ["analyze", "elementwise", "--op", "frobnicate", "-N", "64", "-d", "h100-sxm"],
        2,
        "frobnicate",
    ),
    (
        "analyze-conv-stride",
        [
            *["analyze", "conv2d", "--batch", "1", "--in-channels", "8", "--out-channels", "8", "--height", "8"],
            *CONV_TAIL,
        ],
        2,
        "--stride",
    ),
    ("analyze-suite-unknown", ["analyze", "suite", "no-such-suite", "-d", "h100-sxm"], 2, "no-such-suite"),
    ("analyze-suite-bad", ["analyze", "suite", "{d}/suite_bad.yaml", "-d", "h100-sxm"], 2, "suite_bad.yaml"),
    ("analyze-suite-kind", ["analyze", "suite", "{d}/suite_kind.yaml", "-d", "h100-sxm"], 2, "fft"),
    ("analyze-suite-size", ["analyze", "suite", "{d}/suite_size.yaml", "-d", "h100-sxm"], 2, "suite_size.yaml"),
    ("analyze-suite-binary", ["analyze", "suite", "{d}/suite_binary.yaml", "-d", "h100-sxm"], 2, "suite_binary"),
    ("analyze-output-empty", [*GEMM, "-m", "8", "-o", ""], 2, "-o"),
    ("analyze-output-directory", [*GEMM, "-m", "8", "-o", "{d}/adir"], 2, "adir"),
    ("analyze-output-no-parent", [*GEMM, "-m", "8", "-o", "{d}/model_ok.py/r.json"], 2, "-o"),
    ("analyze-output-not-ours", [*GEMM, "-m", "8", "-o", "{d}/foreign.json"], 2, "foreign.json"),
    ("analyze-plot-extension", [*GEMM, "-m", "8", "--plot", "{d}/c.txt"], 2, "c.txt"),
    # bench (all fail before any timing)
    ("bench-size-zero", [*CPU_GEMM, "-m", "0"], 2, "-m"),
    ("bench-cuda-absent", ["bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cuda"], 2, "cuda"),
    ("bench-suite-missing", ["bench", "{d}/nothing.yaml", "--device", "cpu"], 2, "nothing.yaml"),
    ("bench-suite-bad", ["bench", "{d}/suite_bad.yaml", "--device", "cpu"], 2, "suite_bad.yaml"),
    ("bench-max-time-negative", [*CPU_GEMM, "-m", "8", "--max-time", "-1"], 2, "--max-time"),
    ("bench-max-time-nan", [*CPU_GEMM, "-m", "8", "--max-time", "nan"], 2, "--max-time"),
    ("bench-timeout-zero", [*CPU_GEMM, "-m", "8", "--timeout", "0"], 2, "--timeout"),
    ("bench-max-time-unit", [*CPU_GEMM, "-m", "8", "--max-time", "5 secs"], 2, "--max-time: cannot read '5 secs'"),
    ("bench-timeout-unit", [*CPU_GEMM, "-m", "8", "--timeout", "10m"], 2, "--timeout: cannot read '10m' as a time"),
    ("bench-output-directory", [*CPU_GEMM, "-m", "8", "-o", "{d}/adir"], 2, "adir"),
    (
        "bench-output-is-suite",
        ["bench", "{d}/suite_size.yaml", "--device", "cpu", "-o", "{d}/suite_size.yaml"],
        2,
        "-o",
    ),
    ("bench-dtype", [*CPU_GEMM, "-m", "8", "--dtype", "fp7"], 2, "fp7"),
    # calibrate
    ("calibrate-device", ["calibrate", "--device", "tpu"], 2, "tpu"),
    ("calibrate-cuda-absent", ["calibrate", "--device", "cuda"], 2, "cuda"),
    # diagnose
    ("diagnose-missing", ["diagnose", "{d}/nothing.py", "--device", "cpu"], 2, "nothing.py"),
    ("diagnose-directory", ["diagnose", "{d}/adir", "--device", "cpu"], 2, "adir"),
    ("diagnose-no-model", ["diagnose", "{d}/model_none.py", "--device", "cpu"], 2, "model_none.py"),
    ("diagnose-entry-missing", ["diagnose", "{d}/model_ok.py", "--device", "cpu", "--entry", "build"], 2, "build"),
    ("diagnose-cuda-absent", ["diagnose", "{d}/model_ok.py", "--device", "cuda"], 2, "cuda"),
    ("diagnose-dtype", ["diagnose", "{d}/model_ok.py", "--device", "cpu", "--dtype", "fp7"], 2, "fp7"),
    ("diagnose-mode", ["diagnose", "{d}/model_ok.py", "--device", "cpu", "--mode", "sideways"], 2, "sideways"),
    ("diagnose-iters-zero", ["diagnose", "{d}/model_ok.py", "--device", "cpu", "--iters", "0"], 2, "--iters"),
    ("diagnose-warmup-negative", ["diagnose", "{d}/model_ok.py", "--device", "cpu", "--warmup", "-1"], 2, "--warmup"),
    (
        "diagnose-timeout-negative",
        ["diagnose", "{d}/model_ok.py", "--device", "cpu", "--timeout", "-3"],
        2,
        "--timeout",
    ),
    ("diagnose-output-is-model", ["diagnose", "{d}/model_ok.py", "--device", "cpu", "-o", "{d}/model_ok.py"], 2, "-o"),
    (
        "diagnose-output-not-ours",
        ["diagnose", "{d}/model_ok.py", "--device", "cpu", "-o", "{d}/list.json"],
        2,
        "list.json",
    ),
    ("diagnose-syntax", ["diagnose", "{d}/model_syntax.py", "--device", "cpu"], 1, "SyntaxError"),
    ("diagnose-import-error", ["diagnose", "{d}/model_import_error.py", "--device", "cpu"], 1, "no_such_package_xyz"),
    ("diagnose-forward-raises", ["diagnose", "{d}/model_raises.py", "--device", "cpu"], 1, "bad shape in my model"),
    ("diagnose-inputs-raise", ["diagnose", "{d}/model_inputs_raise.py", "--device", "cpu"], 1, "no data"),
    ("diagnose-exit-at-import", ["diagnose", "{d}/model_exit_import.py", "--device", "cpu"], 1, "exit"),
    ("diagnose-exit-in-forward", ["diagnose", "{d}/model_exit_forward.py", "--device", "cpu"], 1, "exit"),
    ("diagnose-bad-inputs", ["diagnose", "{d}/model_bad_inputs.py", "--device", "cpu"], 1, "must be Tensor"),
    # plot
    ("plot-missing", ["plot", "{d}/nothing.json", "-o", "{d}/c.png"], 2, "nothing.json"),
    ("plot-not-json", ["plot", "{d}/not_json.json", "-o", "{d}/c.png"], 2, "not_json.json"),
    ("plot-foreign", ["plot", "{d}/foreign.json", "-o", "{d}/c.png"], 2, "foreign.json"),
    ("plot-future", ["plot", "{d}/future.json", "-o", "{d}/c.png"], 2, "future.json"),
    ("plot-empty", ["plot", "{d}/empty.json", "-o", "{d}/c.png"], 2, "empty.json"),
    ("plot-extension", ["plot", "{d}/r.json", "-o", "{d}/c.txt"], 2, "c.txt"),
    ("plot-size", ["plot", "{d}/r.json", "-o", "{d}/c.png", "--size", "0x0"], 2, "--size"),
    ("plot-device", ["plot", "{d}/r.json", "-o", "{d}/c.png", "--device", "h900"], 2, "h900"),
    ("plot-output-is-input", ["plot", "{d}/r.json", "-o", "{d}/r.json", "--format", "svg"], 2, "-o"),
    # report
    ("report-missing", ["report", "{d}/nothing.json", "--format", "markdown"], 2, "nothing.json"),
    ("report-not-json", ["report", "{d}/not_json.json", "--format", "markdown"], 2, "not_json.json"),
    ("report-list", ["report", "{d}/list.json", "--format", "markdown"], 2, "list.json"),
    ("report-format", ["report", "{d}/r.json", "--format", "docx"], 2, "docx"),
    ("report-output-is-input", ["report", "{d}/r.json", "--format", "markdown", "-o", "{d}/r.json"], 2, "-o"),
    ("report-output-not-ours", ["report", "{d}/r.json", "-o", "{d}/notes.txt", "--format", "markdown"], 2, "notes.txt"),
    # baseline
    ("baseline-save-missing", ["baseline", "save", "{d}/nothing.json", "-o", "{d}/b.json"], 2, "nothing.json"),
    ("baseline-save-corrupt", ["baseline", "save", "{d}/not_json.json", "-o", "{d}/b.json"], 2, "not_json.json"),
    ("baseline-save-foreign", ["baseline", "save", "{d}/foreign.json", "-o", "{d}/b.json"], 2, "foreign.json"),
    ("baseline-save-over-report", ["baseline", "save", "{d}/r.json", "-o", "{d}/r.json"], 2, "r.json"),
    ("baseline-save-over-other", ["baseline", "save", "{d}/r.json", "-o", "{d}/notes.txt"], 2, "notes.txt"),
    ("baseline-show-missing", ["baseline", "show", "{d}/nothing.json"], 2, "nothing.json"),
    ("baseline-show-report", ["baseline", "show", "{d}/r.json"], 2, "r.json"),
    # gate
    ("gate-baseline-missing", ["gate", "{d}/r.json", "--baseline", "{d}/nothing.json"], 2, "nothing.json"),
    ("gate-baseline-corrupt", ["gate", "{d}/r.json", "--baseline", "{d}/not_json.json"], 2, "not_json.json"),
    ("gate-baseline-is-report", ["gate", "{d}/r.json", "--baseline", "{d}/r.json"], 2, "r.json"),
    ("gate-report-missing", ["gate", "{d}/nothing.json", "--baseline", "{d}/b0.json"], 2, "nothing.json"),
    ("gate-fail-on-word", ["gate", "{d}/r.json", "--baseline", "{d}/b0.json", "--fail-on", "speed"], 2, "speed"),
    ("gate-fail-on-number", ["gate", "{d}/r.json", "--baseline", "{d}/b0.json", "--fail-on", "efficiency:x%"], 2, "x%"),
    ("gate-junit-directory", ["gate", "{d}/r.json", "--baseline", "{d}/b0.json", "--junit", "{d}/adir"], 2, "adir"),
]


@pytest.fixture(scope="module")
def reports(corpus: Path) -> Path:
    """A measured (synthetic bench) report r.json and its baseline b0.json in the corpus directory, for the readers'
    cases."""
    from gate_synthetic import bench_report, bench_row, spread

    from roofline.cli import main
    from roofline.report.schema import write_report

    write_report(bench_report([bench_row("m=4096", spread(1.8e-4, 20, 0.01))]), corpus / "r.json")
    with pytest.raises(SystemExit) as exit_info:
        main(["-q", "baseline", "save", str(corpus / "r.json"), "-o", str(corpus / "b0.json")])
    assert exit_info.value.code in (0, None)
    return corpus


def test_corpus_is_large_and_named_once():
    ids = [case[0] for case in CASES]
    assert len(ids) >= 80
    assert len(ids) == len(set(ids))


def _case(case: tuple[str, list[str], int, str]) -> object:
    """A case; those about an absent GPU are skipped where torch sees one."""
    if "cuda-absent" not in case[0]:
        return pytest.param(*case[1:], id=case[0])
    from conftest import _cuda_available

    skip = pytest.mark.skipif(_cuda_available(), reason="a GPU is present here")
    return pytest.param(*case[1:], id=case[0], marks=skip)


@pytest.mark.parametrize(("argv", "code", "needle"), [_case(c) for c in CASES])
def test_bad_input_is_one_line(cli, reports, argv, code, needle):
    d = str(reports)
    args = [a.replace("{d}", d) for a in argv]
    result = cli(*args)
    assert result.code == code, result.err
    lines = result.err.rstrip("\n").splitlines()
    assert lines, "nothing on stderr"
    last = lines[-1]
    assert last.startswith("Error: "), result.err
    assert needle in last or needle in result.err, result.err
    if code == 1:  # the user's traceback, none of our frames
        assert "/roofline/" not in result.err.replace("\\", "/").split("Error: ")[0].replace(d, ""), result.err
    else:
        assert "Traceback" not in result.err, result.err
        assert len(lines) == 1 or all(not line.startswith("Error") for line in lines[:-1]), result.err
