"""Loading the user's model file: the three conventions, device/dtype handling, script context, and errors."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

from roofline.diagnose.loader import CONVENTIONS, LoadedModel, load_model
from roofline.errors import DeviceError, UsageError, UserCodeError, WorkloadError


def write(tmp_path: Path, text: str, name: str = "model.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


CLASS_MODEL = """
    import torch
    from torch import nn

    class Model(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.fc = nn.Linear(d_in, d_out)

        def forward(self, x, ids):
            return self.fc(x) + ids.float().sum()

    def get_inputs():
        return [torch.randn(2, 8), torch.arange(3)]

    def get_init_inputs():
        return [8, 4]
"""


def test_class_model_convention(tmp_path):
    loaded = load_model(write(tmp_path, CLASS_MODEL))
    assert isinstance(loaded, LoadedModel)
    assert loaded.convention == "class-model"
    assert loaded.model.fc.in_features == 8 and loaded.model.fc.out_features == 4
    assert [t.shape for t in loaded.inputs] == [torch.Size([2, 8]), torch.Size([3])]
    assert loaded.kwargs == {}
    assert not loaded.model.training  # inference: eval()
    assert loaded.path == (tmp_path / "model.py").resolve()
    assert loaded.model(*loaded.inputs).shape == (2, 4)


def test_dtype_casts_model_and_floating_inputs_only(tmp_path):
    loaded = load_model(write(tmp_path, CLASS_MODEL), dtype="bf16")
    assert loaded.model.fc.weight.dtype == torch.bfloat16
    x, ids = loaded.inputs
    assert x.dtype == torch.bfloat16
    assert ids.dtype == torch.int64  # integer inputs untouched
    assert load_model(write(tmp_path, CLASS_MODEL), dtype="fp16").inputs[0].dtype == torch.float16


def test_training_mode_puts_model_in_train(tmp_path):
    assert load_model(write(tmp_path, CLASS_MODEL), mode="training").model.training


def test_model_variable_with_example_inputs(tmp_path):
    path = write(
        tmp_path,
        """
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        example_inputs = (torch.randn(3, 4),)
        """,
    )
    loaded = load_model(path)
    assert loaded.convention == "model-variable"
    assert len(loaded.inputs) == 1 and loaded.inputs[0].shape == (3, 4)


def test_model_variable_with_get_inputs_and_nested_dict_inputs(tmp_path):
    path = write(
        tmp_path,
        """
        import torch

        class M(torch.nn.Module):
            def forward(self, x, extra):
                return x * extra["scale"] + extra["pair"][0]

        model = M()

        def get_inputs():
            return {"x": torch.randn(2, 2), "extra": {"scale": torch.ones(2, 2), "pair": [torch.zeros(2), 1]}}
        """,
    )
    loaded = load_model(path, dtype="fp16")
    assert loaded.inputs == ()
    assert set(loaded.kwargs) == {"x", "extra"}
    assert loaded.kwargs["extra"]["scale"].dtype == torch.float16  # nested tensors cast too
    assert loaded.kwargs["extra"]["pair"][0].dtype == torch.float16 and loaded.kwargs["extra"]["pair"][1] == 1
    assert loaded.model(**loaded.kwargs).shape == (2, 2)


def test_entry_function(tmp_path):
    path = write(
        tmp_path,
        """
        import torch

        def build():
            return torch.nn.Linear(5, 2), torch.randn(7, 5)   # a single tensor as inputs

        model = "not this one"
        """,
    )
    loaded = load_model(path, entry="build")
    assert loaded.convention == "entry"
    assert isinstance(loaded.model, torch.nn.Linear)
    assert len(loaded.inputs) == 1 and loaded.inputs[0].shape == (7, 5)


def test_sibling_import_and_main_block_not_run(tmp_path):
    path = write(
        tmp_path,
        """
        import torch
        import helper_mod   # a sibling module: importable because sys.path[0] is the file's directory

        model = torch.nn.Identity()
        example_inputs = [torch.zeros(1) + helper_mod.VALUE]

        if __name__ == "__main__":
            raise SystemExit("the __main__ block must not run")
        """,
    )
    write(tmp_path, "VALUE = 3\n", name="helper_mod.py")
    argv_before, path_before = list(sys.argv), list(sys.path)
    try:
        loaded = load_model(path, argv=["--size", "4"])  # the __main__ block would raise SystemExit
        assert loaded.inputs[0].item() == 3
        assert sys.argv == argv_before and sys.path == path_before
    finally:
        sys.modules.pop("helper_mod", None)


def test_script_context_seen_by_the_file(tmp_path):
    path = write(
        tmp_path,
        """
        import sys
        import torch

        class Model(torch.nn.Module):
            def forward(self, x):
                return x

        def get_init_inputs():
            return []

        def get_inputs():
            return [torch.tensor([float(len(sys.argv))])]

        assert __name__ != "__main__"
        assert sys.argv[1:] == ["--size", "4"], sys.argv
        assert sys.path[0] == __file__.rsplit("/", 1)[0], sys.path[0]
        """,
    )
    argv_before, path_before = list(sys.argv), list(sys.path)
    loaded = load_model(path, argv=["--size", "4"])
    assert loaded.inputs[0].item() == 3.0  # get_inputs() also ran with the file's argv
    assert sys.argv == argv_before and sys.path == path_before


def test_inputs_created_on_cpu_are_moved(tmp_path, monkeypatch):
    # No GPU here: the 'meta' device stands in for it (a real move of every tensor, and of the model).
    from roofline.diagnose import loader

    monkeypatch.setattr(loader, "resolve_device", lambda device: "meta")
    loaded = load_model(write(tmp_path, CLASS_MODEL), device="cuda", dtype="bf16")
    assert loaded.model.fc.weight.device.type == "meta"
    x, ids = loaded.inputs
    assert x.device.type == ids.device.type == "meta"
    assert x.dtype == torch.bfloat16 and ids.dtype == torch.int64


# ------------------------------------------------------------------------------------------------ errors


def test_missing_file(tmp_path):
    with pytest.raises(WorkloadError, match=r"nope\.py"):
        load_model(tmp_path / "nope.py")


def test_not_a_python_file(tmp_path):
    path = tmp_path / "model.txt"
    path.write_text("x = 1\n")
    with pytest.raises(WorkloadError, match=r"model\.txt.*\.py"):
        load_model(path)


def test_no_convention_lists_the_accepted_ones(tmp_path):
    with pytest.raises(WorkloadError) as info:
        load_model(write(tmp_path, "import torch\nnet = torch.nn.Linear(2, 2)\n"))
    message = str(info.value)
    assert "model.py" in message
    for convention in CONVENTIONS:
        assert convention in message
    assert "\n" not in message


def test_model_without_inputs(tmp_path):
    with pytest.raises(WorkloadError, match="example_inputs"):
        load_model(write(tmp_path, "import torch\nmodel = torch.nn.Linear(2, 2)\n"))


def test_bad_entry(tmp_path):
    path = write(tmp_path, "import torch\nNOT_CALLABLE = 3\ndef build():\n    return torch.nn.Linear(2, 2)\n")
    with pytest.raises(WorkloadError, match="missing"):
        load_model(path, entry="missing")
    with pytest.raises(WorkloadError, match="not a function"):
        load_model(path, entry="NOT_CALLABLE")
    with pytest.raises(WorkloadError, match=r"must return \(model, inputs\)"):
        load_model(path, entry="build")


def test_file_raising_at_import_gives_users_traceback(tmp_path):
    path = write(
        tmp_path,
        """
        import torch

        def helper():
            return 1 / 0

        VALUE = helper()
        """,
    )
    with pytest.raises(UserCodeError) as info:
        load_model(path)
    err = info.value
    assert err.exit_code == 1
    assert "ZeroDivisionError" in str(err)
    text = err.traceback_text
    assert str(path.resolve()) in text
    assert "line 5" in text and "line 7" in text  # return 1 / 0; VALUE = helper()
    assert "roofline/" not in text and "runpy" not in text


def test_exception_in_get_inputs_and_constructor(tmp_path):
    path = write(
        tmp_path,
        """
        import torch

        class Model(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
                raise ValueError(f"bad size {n}")

        def get_init_inputs():
            return [3]

        def get_inputs():
            return []
        """,
    )
    with pytest.raises(UserCodeError, match="bad size 3") as info:
        load_model(path)
    assert "line 7" in info.value.traceback_text and "loader.py" not in info.value.traceback_text


def test_syntax_error_names_the_users_line(tmp_path):
    path = write(tmp_path, "import torch\nmodel = (\n")
    with pytest.raises(UserCodeError, match="SyntaxError") as info:
        load_model(path)
    assert "model.py" in info.value.traceback_text and "runpy" not in info.value.traceback_text


def test_system_exit_in_the_file_is_the_users_error(tmp_path):
    with pytest.raises(UserCodeError, match="SystemExit"):
        load_model(write(tmp_path, "import sys\nsys.exit(2)\n"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_cuda_is_a_device_error(tmp_path):
    with pytest.raises(DeviceError, match="--device cpu"):
        load_model(write(tmp_path, CLASS_MODEL), device="cuda")


def test_bad_dtype_device_and_mode(tmp_path):
    path = write(tmp_path, CLASS_MODEL)
    with pytest.raises(UsageError, match="fp32, bf16, fp16"):
        load_model(path, dtype="int8")
    with pytest.raises(UsageError, match="--device"):
        load_model(path, device="tpu")
    with pytest.raises(UsageError, match="--mode"):
        load_model(path, mode="serving")


@pytest.mark.gpu
def test_moves_to_cuda(tmp_path):
    loaded = load_model(write(tmp_path, CLASS_MODEL), device="cuda", dtype="bf16")
    assert loaded.model.fc.weight.device.type == "cuda"
    assert all(t.device.type == "cuda" for t in loaded.inputs)
    assert loaded.inputs[1].dtype == torch.int64


# ------------------------------------------------------------------------------------------------ built on the device


def test_the_files_functions_run_with_the_cuda_device_as_default_and_again_on_the_cpu_when_that_fails(
    tmp_path, monkeypatch
):
    # no GPU here: the default-device context is replaced by one that records the device and, for get_inputs,
    # fails as a CPU random generator does under a CUDA default device
    from roofline.diagnose import loader

    file = tmp_path / "m.py"
    file.write_text(
        "import torch\n"
        "CALLS = []\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); CALLS.append('init'); self.l = torch.nn.Linear(2, 2)\n"
        "    def forward(self, x):\n"
        "        return self.l(x)\n"
        "def get_inputs():\n"
        "    CALLS.append('inputs')\n"
        "    return (torch.randn(1, 2),)\n"
    )
    seen = []

    def fake(device, fn):
        seen.append((device, getattr(fn, "__name__", "")))
        if getattr(fn, "__name__", "") == "get_inputs":
            raise RuntimeError("Expected a 'cuda' device type for generator")
        return fn()

    monkeypatch.setattr(loader, "_on_default_device", fake)
    namespace = loader._run_file(file)
    _model, inputs, convention = loader._find_model(namespace, file, None, "cuda:0")
    assert convention == "class-model" and isinstance(inputs, tuple)
    assert [name for _, name in seen] == ["<lambda>", "get_inputs"] and {d for d, _ in seen} == {"cuda:0"}
    assert namespace["CALLS"] == [
        "init",
        "inputs",
    ]  # get_inputs failed under the context (before its body), ran once on the CPU
    seen.clear()
    loader._find_model(namespace, file, None, "cpu")
    assert seen == []  # on the CPU nothing changes
