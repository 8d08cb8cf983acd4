"""The shipped spec sheets: they load, their names and aliases are unambiguous, the hand-checked dense
values are right (never the 2:4-sparse figures), and broken sheets fail with the file and the field."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from roofline.device import Device
from roofline.errors import SpecError
from roofline.ironlaw import ridge_point
from roofline.resources import data_dir
from roofline.roofs import device_from_sheet
from roofline.specs.loader import ENV_DIR, SpecRegistry, load_registry, load_sheet, normalize
from roofline.specs.schema import SpecSheet

REPO = Path(__file__).resolve().parent.parent
SPECS_DIR = data_dir("hardware_specs")
DOC = REPO / "docs" / "spec-sheets.md"

SHIPPED = {
    "v100-sxm2",
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "a100-pcie-40gb",
    "a100-pcie-80gb",
    "h100-sxm",
    "h100-pcie",
    "h100-nvl",
    "h200-sxm",
    "b200",
    "l4",
    "l40s",
    "a10",
    "t4",
    "rtx-4090",
    "rtx-3090",
    "mi250x",
    "mi300x",
}
GEFORCE = {"rtx-4090", "rtx-3090"}


def full_registry() -> SpecRegistry:
    """Every shipped sheet, parsed. The registry parses a built-in sheet on first use, so a test looping over
    ``registry.sheets`` of a fresh registry would see none of them (and pass, checking nothing, when run alone)."""
    return load_registry(env={}).load_all()


@pytest.fixture(scope="module")
def registry():
    return full_registry()


def _device(registry, name: str) -> Device:
    return device_from_sheet(registry.get(name))


def _fp16_ridge(device: Device) -> float:
    return ridge_point(device.roof("fp16", "tensor").flops_per_s, device.dram_bandwidth)


# ---------------------------------------------------------------------------------------------- loading


def test_every_shipped_sheet_loads(registry):
    assert set(registry.names()) == SHIPPED
    assert all(origin == "built-in" for origin in registry.origins.values())


def test_names_match_file_names(registry):
    files = sorted(p for p in SPECS_DIR.iterdir() if p.suffix in (".yaml", ".yml"))
    assert len(files) == len(SHIPPED)
    for path in files:
        sheet = load_sheet(path)
        assert path.name == f"{sheet.name}.yaml"
        assert registry.paths[sheet.name] == path


def test_no_alias_is_shared_or_shadows_a_name(registry):
    owner: dict[str, str] = {normalize(name): name for name in registry.names()}
    for name, sheet in registry.sheets.items():
        for alias in sheet.aliases:
            key = normalize(alias)
            assert owner.setdefault(key, name) == name, f"{alias!r} of {name} collides with {owner[key]}"


def test_every_alias_resolves_to_its_own_sheet(registry):
    for name, sheet in registry.sheets.items():
        for alias in sheet.aliases:
            assert registry.get(alias).name == name


@pytest.mark.parametrize(
    ("reported", "name"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H200", "h200-sxm"),
        ("nvidia h200", "h200-sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("Tesla V100-SXM2-16GB", "v100-sxm2"),
        ("Tesla V100-SXM2-32GB", "v100-sxm2"),
        ("Tesla T4", "t4"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 3090", "rtx-3090"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA B200", "b200"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI250X", "mi250x"),
        ("a100-80gb-sxm", "a100-sxm-80gb"),
        ("A100 SXM4 80GB", "a100-sxm-80gb"),
        ("H100_SXM", "h100-sxm"),
    ],
)
def test_lookup_by_reported_name(registry, reported, name):
    assert registry.get(reported).name == name


# ------------------------------------------------------------------------------------- hand-checked values

# (sheet, dotted field path, dense value). Comments name the wrong (sparse or copied) value it must not be.
CHECKED = [
    ("h100-sxm", "compute_dense_tflops.tensor.bf16", 989.4),  # not 1978.9 (sparse)
    ("h100-sxm", "compute_dense_tflops.tensor.fp16", 989.4),  # not 1979 (sparse)
    ("h100-sxm", "compute_dense_tflops.tensor.fp8", 1978.9),  # not 3958 (sparse)
    ("h100-sxm", "compute_dense_tflops.tensor.tf32", 494.7),  # not 156 (the A100 value)
    ("h100-sxm", "compute_dense_tflops.vector.fp32", 66.9),
    ("h100-sxm", "memory.dram.bandwidth_gb_per_s", 3350),  # not 3072
    ("h100-pcie", "compute_dense_tflops.tensor.bf16", 756),
    ("h100-pcie", "memory.dram.bandwidth_gb_per_s", 2000),
    ("h100-nvl", "memory.dram.bandwidth_gb_per_s", 3900),
    ("h200-sxm", "compute_dense_tflops.tensor.bf16", 989.4),
    ("h200-sxm", "memory.dram.bandwidth_gb_per_s", 4800),
    ("h200-sxm", "memory.l2.capacity_mib", 60),
    ("b200", "compute_dense_tflops.tensor.bf16", 2250),  # not 4500 (sparse)
    ("b200", "compute_dense_tflops.tensor.fp4", 9000),
    ("b200", "memory.dram.bandwidth_gb_per_s", 8000),
    ("a100-sxm-80gb", "memory.dram.bandwidth_gb_per_s", 2039),
    ("a100-sxm-40gb", "memory.dram.bandwidth_gb_per_s", 1555),
    ("a100-pcie-80gb", "memory.dram.bandwidth_gb_per_s", 1935),
    ("a100-sxm-80gb", "compute_dense_tflops.tensor.bf16", 312),  # not 624 (sparse)
    ("a100-sxm-80gb", "compute_dense_tflops.tensor.tf32", 156),
    ("v100-sxm2", "compute_dense_tflops.tensor.fp16", 125),
    ("v100-sxm2", "memory.dram.bandwidth_gb_per_s", 900),
    ("l4", "memory.dram.bandwidth_gb_per_s", 300),  # not 3350 (H100's)
    ("l4", "compute_dense_tflops.tensor.fp16", 121),
    ("l40s", "compute_dense_tflops.tensor.bf16", 362),
    ("a10", "compute_dense_tflops.tensor.bf16", 125),
    ("t4", "compute_dense_tflops.tensor.fp16", 65),
    ("rtx-4090", "compute_dense_tflops.tensor.fp16", 165.2),  # fp32 accumulate, not 330.3
    ("rtx-3090", "compute_dense_tflops.tensor.fp16", 71),  # fp32 accumulate, not 142
    ("mi300x", "compute_dense_tflops.tensor.bf16", 1307.4),
    ("mi300x", "memory.dram.bandwidth_gb_per_s", 5300),
    ("mi300x", "memory.llc.capacity_mib", 256),
    ("mi250x", "compute_dense_tflops.tensor.bf16", 191.5),  # one GCD: half of 383
    ("mi250x", "memory.dram.bandwidth_gb_per_s", 1600),  # one GCD: half of 3.2 TB/s
    ("mi250x", "memory.dram.capacity_gb", 64),
    ("mi250x", "compute_units", 110),
]


def _field(sheet: SpecSheet, path: str):
    value = sheet
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize(("name", "path", "expected"), CHECKED)
def test_hand_checked_dense_values(registry, name, path, expected):
    assert _field(registry.get(name), path) == pytest.approx(expected)


# Ridge points (FLOP/byte, fp16 tensor over DRAM) from the source text's generation table.
@pytest.mark.parametrize(
    ("name", "ridge"),
    [("v100-sxm2", 139), ("a100-sxm-80gb", 153), ("h100-sxm", 295.3), ("b200", 281)],
)
def test_generation_ridge_points(registry, name, ridge):
    assert _fp16_ridge(_device(registry, name)) == pytest.approx(ridge, rel=0.005)


def test_h100_fp8_ridge(registry):
    device = _device(registry, "h100-sxm")
    fp8 = ridge_point(device.roof("fp8", "tensor").flops_per_s, device.dram_bandwidth)
    assert fp8 == pytest.approx(590.7, rel=0.005)


# Dense fp16 tensor = SMs x FLOP/clk/SM x tensor clock (the facts' derivation): catches a sparse figure.
@pytest.mark.parametrize(
    ("name", "flop_per_clk", "clock_mhz"),
    [
        ("v100-sxm2", 1024, 1530),
        ("a100-sxm-80gb", 2048, 1410),
        ("h100-sxm", 4096, 1830),
        ("h100-pcie", 4096, 1620),
        ("t4", 1024, 1590),
    ],
)
def test_fp16_tensor_matches_derivation(registry, name, flop_per_clk, clock_mhz):
    sheet = registry.get(name)
    derived = sheet.compute_units * flop_per_clk * clock_mhz * 1e6 / 1e12
    assert sheet.compute_dense_tflops.tensor.fp16 == pytest.approx(derived, rel=0.01)


def test_nvidia_data_center_sheets_have_fp32_vector_and_fp16_tensor(registry):
    for name, sheet in registry.sheets.items():
        if sheet.vendor != "nvidia" or name in GEFORCE:
            continue
        device = device_from_sheet(sheet)
        assert ("fp32", "vector") in device.compute, name
        assert ("fp16", "tensor") in device.compute, name
        assert sheet.compute_capability, name


def test_parts_without_bf16_or_fp64_columns(registry):
    for name in ("v100-sxm2", "t4"):
        tensor = registry.get(name).compute_dense_tflops.tensor
        assert tensor.bf16 is None and tensor.tf32 is None, name
    assert registry.get("v100-sxm2").compute_dense_tflops.tensor.int8 is None
    for name in ("l4", "l40s", "a10", "t4", "rtx-4090", "rtx-3090"):  # the GDDR table has no FP64 column
        assert registry.get(name).compute_dense_tflops.vector.fp64 is None, name


def test_tensor_peaks_are_not_below_vector_fp32(registry):
    for name, sheet in registry.sheets.items():
        peaks = sheet.compute_dense_tflops
        assert peaks.tensor.fp16 is not None, name
        assert peaks.tensor.fp16 > peaks.vector.fp32, name


def test_unconfirmed_paths_name_real_fields(registry):
    for name, sheet in registry.sheets.items():
        for path in sheet.unconfirmed:
            model: type = SpecSheet
            for part in path.split("."):
                assert part in model.model_fields, f"{name}: unconfirmed {path!r} is not a field"
                annotation = model.model_fields[part].annotation
                model = next(
                    (a for a in getattr(annotation, "__args__", (annotation,)) if isinstance(a, type)),
                    annotation,
                )


def test_unconfirmed_values_are_flagged(registry):
    nvl = registry.get("h100-nvl")
    for path in (
        "compute_units",
        "boost_clock_mhz",
        "compute_dense_tflops.tensor.fp16",
        "memory.l2.capacity_mib",
    ):
        assert path in nvl.unconfirmed
    assert "boost_clock_mhz" in registry.get("b200").unconfirmed
    assert registry.get("b200").boost_clock_mhz is None
    assert "compute_units" in registry.get("l4").unconfirmed
    assert "memory.l2.capacity_mib" in registry.get("l40s").unconfirmed
    assert registry.get("h100-sxm").unconfirmed == []


def test_launch_floors_and_scopes(registry):
    for name, sheet in registry.sheets.items():
        assert sheet.launch_floor_us == (10.0 if sheet.vendor == "amd" else 4.0), name
        assert sheet.sources, name
    assert registry.get("mi300x").memory.l2.scope == "per XCD"
    assert registry.get("mi250x").memory.l2.scope == "per GCD"
    assert registry.get("mi300x").compute_capability is None


# Each check above that loops over every sheet, and a bad value planted in a temporary copy of the shipped sheets
# that it must catch, through the same fixture path (the copy stands in for the built-in directory).
PLANTED = [
    (test_tensor_peaks_are_not_below_vector_fp32, "compute_dense_tflops.tensor.fp16", 0.001),
    (test_nvidia_data_center_sheets_have_fp32_vector_and_fp16_tensor, "compute_capability", None),
    (test_unconfirmed_paths_name_real_fields, "unconfirmed", ["no_such_field"]),
    (test_launch_floors_and_scopes, "launch_floor_us", 5.0),
    (test_no_alias_is_shared_or_shadows_a_name, "aliases", ["l4"]),
    (test_every_alias_resolves_to_its_own_sheet, "aliases", ["l4"]),
]


@pytest.mark.parametrize(("check", "path", "value"), PLANTED, ids=[check.__name__ for check, _, _ in PLANTED])
def test_loop_checks_catch_a_value_planted_in_one_sheet(tmp_path, monkeypatch, check, path, value):
    copy = tmp_path / "hardware_specs"
    shutil.copytree(SPECS_DIR, copy)
    t4 = copy / "t4.yaml"
    data = yaml.safe_load(t4.read_text(encoding="utf-8"))
    _set(data, path, value)
    t4.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    monkeypatch.setattr("roofline.specs.loader.data_dir", lambda name: copy)
    planted = full_registry()
    assert planted.paths["t4"] == t4
    with pytest.raises(AssertionError):
        check(planted)


# ------------------------------------------------------------------------------------------ the docs table


def docs_table_rows(registry) -> list[str]:
    """The rows of the shipped-sheets table in docs/spec-sheets.md (the snippet there prints the same)."""
    rows = []
    for name in registry.names():
        sheet = registry.sheets[name]
        tensor = sheet.compute_dense_tflops.tensor
        device = device_from_sheet(sheet)
        ridge = _fp16_ridge(device)
        bf16 = f"{tensor.bf16:g}" if tensor.bf16 else "-"
        rows.append(
            f"| {name} | {sheet.display_name} | {tensor.fp16:g} / {bf16} | "
            f"{sheet.memory.dram.bandwidth_gb_per_s:g} | {ridge:.0f} |"
        )
    return rows


def test_docs_table_matches_sheets(registry):
    text = DOC.read_text(encoding="utf-8")
    for row in docs_table_rows(registry):
        assert row in text, f"docs/spec-sheets.md is stale: regenerate the table ({row})"


# --------------------------------------------------------------------------------------- broken sheets


def _minimal(name: str = "my-gpu") -> dict:
    return {
        "schema_version": 1,
        "name": name,
        "display_name": "My GPU",
        "vendor": "other",
        "architecture": "test",
        "compute_units": 10,
        "compute_dense_tflops": {"vector": {"fp32": 10.0}, "tensor": {"fp16": 100.0}},
        "memory": {"dram": {"type": "HBM3", "capacity_gb": 16, "bandwidth_gb_per_s": 1000}},
        "launch_floor_us": 5.0,
        "sources": ["test"],
    }


def _write(directory: Path, data: dict, filename: str | None = None) -> Path:
    path = directory / (filename or f"{data['name']}.yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_minimal_sheet_is_valid(tmp_path):
    sheet = load_sheet(_write(tmp_path, _minimal()))
    assert sheet.name == "my-gpu" and sheet.compute_unit_name == "SM"


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nmemory: {dram: [1, 2\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_sheet(path)
    message = str(info.value)
    assert str(path) in message and "invalid YAML" in message and "line" in message


def _delete(data: dict, path: str) -> None:
    *parents, last = path.split(".")
    for part in parents:
        data = data[part]
    del data[last]


def _set(data: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    for part in parents:
        data = data[part]
    data[last] = value


@pytest.mark.parametrize(
    ("mutate", "field", "fragment"),
    [
        (lambda d: _delete(d, "compute_units"), "compute_units", "required field is missing"),
        (
            lambda d: _delete(d, "memory.dram.bandwidth_gb_per_s"),
            "memory.dram.bandwidth_gb_per_s",
            "required field is missing",
        ),
        (
            lambda d: _set(d, "memory.dram.bandwith_gb_per_s", 10),
            "memory.dram.bandwith_gb_per_s",
            "unknown key",
        ),
        (lambda d: _set(d, "tdp", 300), "tdp", "unknown key"),
        (
            lambda d: _set(d, "compute_dense_tflops.tensor.bf8", 1),
            "compute_dense_tflops.tensor.bf8",
            "unknown key",
        ),
        (lambda d: _set(d, "memory.dram.bandwidth_gb_per_s", -1), "memory.dram.bandwidth_gb_per_s", "-1"),
        (lambda d: _set(d, "compute_dense_tflops.vector.fp32", 0), "compute_dense_tflops.vector.fp32", "0"),
        (lambda d: _set(d, "compute_units", -4), "compute_units", "-4"),
        (lambda d: _set(d, "sources", []), "sources", "at least 1"),
        (lambda d: _set(d, "sources", ["  "]), "sources", "non-empty"),
        (lambda d: _set(d, "name", "H100 SXM"), "name", "pattern"),
    ],
)
def test_schema_errors_name_file_and_field(tmp_path, mutate, field, fragment):
    data = _minimal()
    mutate(data)
    path = _write(tmp_path, data, "bad.yaml")
    with pytest.raises(SpecError) as info:
        load_sheet(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert field in message and fragment in message, message


def test_top_level_must_be_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(SpecError, match="mapping"):
        load_sheet(path)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_registry(extra_files=[tmp_path / "nope.yaml"], env={})


# -------------------------------------------------------------------------------- user sheets and overrides


def test_env_dir_adds_and_overrides(tmp_path):
    _write(tmp_path, _minimal("my-gpu"))
    override = _minimal("h100-sxm")
    override["memory"]["dram"]["bandwidth_gb_per_s"] = 3000
    _write(tmp_path, override)
    registry = load_registry(env={ENV_DIR: str(tmp_path)})
    assert set(registry.names()) == SHIPPED | {"my-gpu"}
    assert registry.origins["my-gpu"] == ENV_DIR
    assert registry.origins["h100-sxm"] == ENV_DIR
    assert registry.get("h100-sxm").memory.dram.bandwidth_gb_per_s == 3000
    assert registry.paths["h100-sxm"] == tmp_path / "h100-sxm.yaml"
    assert registry.origins["h200-sxm"] == "built-in"


def test_env_dir_several_directories(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    _write(first, _minimal("gpu-a"))
    _write(second, _minimal("gpu-b"))
    (second / "README.txt").write_text("not a sheet", encoding="utf-8")
    registry = load_registry(env={ENV_DIR: os.pathsep.join([str(first), str(second)])})
    assert {"gpu-a", "gpu-b"} <= set(registry.names())


def test_env_dir_must_be_a_directory(tmp_path):
    with pytest.raises(SpecError, match=ENV_DIR):
        load_registry(env={ENV_DIR: str(tmp_path / "missing")})


def test_env_dir_with_a_broken_sheet_fails(tmp_path):
    data = _minimal("my-gpu")
    data["memory"]["dram"]["bandwidth_gb_per_s"] = -5
    path = _write(tmp_path, data)
    with pytest.raises(SpecError, match=str(path)):
        load_registry(env={ENV_DIR: str(tmp_path)})


def test_extra_files_add_and_override_env(tmp_path):
    env_dir, spec_dir = tmp_path / "env", tmp_path / "spec"
    env_dir.mkdir()
    spec_dir.mkdir()
    env_sheet = _minimal("my-gpu")
    _write(env_dir, env_sheet)
    spec_sheet = _minimal("my-gpu")
    spec_sheet["compute_units"] = 20
    spec_path = _write(spec_dir, spec_sheet, "anything.yaml")
    extra = _write(spec_dir, _minimal("other-gpu"))
    registry = load_registry(extra_files=[spec_path, extra], env={ENV_DIR: str(env_dir)})
    assert registry.get("my-gpu").compute_units == 20
    assert registry.origins["my-gpu"] == "--spec"
    assert registry.paths["my-gpu"] == spec_path
    assert registry.get("other-gpu").name == "other-gpu"


def test_user_sheet_alias_lookup(tmp_path):
    data = _minimal("my-gpu")
    data["aliases"] = ["ACME Accelerator X1"]
    registry = load_registry(extra_files=[_write(tmp_path, data)], env={})
    assert registry.get("acme_accelerator_x1").name == "my-gpu"


def test_built_in_sheets_are_parsed_on_demand():
    from roofline.specs.loader import load_registry

    registry = load_registry(env={})
    assert registry.find("h100-sxm").name == "h100-sxm"
    assert "a100-sxm-80gb" in registry.pending  # only the named sheet was parsed
    assert registry.find("NVIDIA H200").name == "h200-sxm"  # an alias needs them all
    assert registry.pending == {}


def test_interconnect_links_carry_direction_and_source():
    sheet = load_sheet(SPECS_DIR / "h100-sxm.yaml")
    nvlink = sheet.interconnect.nvlink_bandwidth_per_gpu
    assert (nvlink.gb_per_s, nvlink.direction) == (900, "bidirectional") and "seed 004" in nvlink.source
    assert nvlink.per_direction_gb_per_s == 450
    link = device_from_sheet(sheet).peer_link()
    assert link.name == "nvlink" and link.bytes_per_s == 450e9


def test_the_old_interconnect_keys_are_refused_with_their_new_names(tmp_path):
    text = (SPECS_DIR / "h100-sxm.yaml").read_text()
    start = text.index("interconnect:")
    end = text.index("tdp_w:")
    sheet = tmp_path / "old.yaml"
    sheet.write_text(text[:start] + "interconnect: {nvlink_gb_per_s: 900}\n" + text[end:])
    with pytest.raises(SpecError, match="nvlink_gb_per_s was renamed: write nvlink_bandwidth_per_gpu"):
        load_sheet(sheet)
