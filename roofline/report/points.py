"""Report rows as plain points on a roofline: intensity, throughput, time, share, bound, flags.

Pure (no matplotlib, no pandas): every chart, table and export reads these. One Point per report row
(analytic, bench) or per diagnosed op group (diagnose: the op calls of the same op, input shapes and phase,
across modules; ``per_call=True`` gives one per op call). The time and throughput a point carries:

- analytic: the predicted minimum time (iron law, launch floor included); throughput = FLOPs / that time;
- bench: the measured median time per call; throughput = FLOPs / median;
- diagnose: the measured device (CPU: self CPU) time per iteration; throughput = FLOPs / time.

Intensity, attainable rate, efficiency and bound are the values the report's rows store (roofline.ironlaw
defines them, roofline.report.rows.Stored reads them): a point never recomputes them. A diagnose group sums its
op calls by roofline.ironlaw.group (attainable = FLOPs / summed roofline time, efficiency = summed roofline time /
summed measured time, the bound holding most of the time). Efficiency is achieved over attainable, so
``efficiency > 1`` is exactly "above its roof" (flagged: the roof is a hard limit).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofline import ironlaw
from roofline.report.aggregate import held_most
from roofline.report.memory import MemoryView, memory_view
from roofline.report.rows import Stored, finite_number, positive_number, source_text, sources_text
from roofline.report.verified import VerifiedView, report_verified

PREDICTED = "predicted"  # analytic: a floor computed from the counts, not a measurement
ABOVE_ROOF = "above-roof"  # achieved more than the roof allows: the counts, the time or the roof are wrong
UNTIMED = "untimed"  # no measured time (diagnose ops the profiler did not see, or time 0)
UNCOUNTED = "uncounted"  # no cost formula: FLOPs unknown
NO_FLOPS = "no-flops"  # counted, but does no arithmetic (views, copies, cat): not on a FLOP/s chart
NO_BYTES = "no-bytes"  # moves no bytes: intensity is infinite
NO_INTENSITY = "no-intensity"  # counted, but its stored intensity is null (a NaN or Infinity in the report)

SKIP_FLAGS = (UNTIMED, UNCOUNTED, NO_FLOPS, NO_BYTES, NO_INTENSITY)
SKIP_REASONS = {
    UNTIMED: "not timed (no measured time)",
    UNCOUNTED: "uncounted (no cost formula: FLOPs unknown)",
    NO_FLOPS: "no FLOPs (views, copies, data movement only)",
    NO_BYTES: "no bytes moved (intensity infinite)",
    NO_INTENSITY: "no stored intensity (null in the report)",
}
# Labels on charts stay readable; the full label is kept in Point.label and in every table and export.
SHORT_LABEL_CHARS = 44


@dataclass(frozen=True)
class Point:
    label: str  # the row's full name
    short_label: str  # what a chart writes beside the point
    report: str  # name of the report it came from (file stem)
    source: str  # analytic | bench | diagnose
    device: str  # device (spec-sheet) name the report placed it on
    index: int  # row index in report.rows (diagnose groups: index in aggregates.ops)
    kind: str  # workload kind (gemm, attention, ...) or aten op
    roof: str  # compute roof it runs against, 'bf16 tensor' ('' when none)
    flops: float | None
    bytes: float | None
    intensity: float | None  # FLOP/byte
    throughput: float | None  # FLOP/s: achieved (measured) or predicted (analytic)
    attainable: float | None  # FLOP/s: FLOPs / roofline time, as the row stores it
    time_s: float | None  # per call (analytic, bench) or per iteration (diagnose)
    share: float | None  # of the total time of its report on its device
    efficiency: float | None  # roofline time / time = throughput / attainable, as the row stores it
    bound: str  # compute | memory | launch | '' (as the row stores it)
    calls: int = 1  # op calls summed in this point (diagnose groups)
    limiter: str = ""  # diagnose: the evidence bound class as stored ('' for other reports and older ones)
    launches: int = 1  # kernel launches (CPU: op dispatches) its time includes at least: one launch floor each
    flags: tuple[str, ...] = ()
    rows: tuple[int, ...] = ()  # the report rows it sums (diagnose groups: its op calls; else its own row)

    @property
    def plottable(self) -> bool:
        return not any(flag in SKIP_FLAGS for flag in self.flags)

    @property
    def above_roof(self) -> bool:
        return ABOVE_ROOF in self.flags


@dataclass(frozen=True)
class FindingView:
    """A finding as a report stores it (analytic/bench: per row; diagnose: top level), ready to show."""

    where: str  # row label or module ('' when the finding is the whole report's)
    bottleneck: str
    properties: tuple[str, ...]
    technique: str
    evidence: str
    time_s: float | None
    best_time_s: float | None
    share: float | None  # of the report's time (diagnose)

    @property
    def gain(self) -> float | None:
        return ironlaw.gain(self.time_s, self.best_time_s) if self.time_s else None

    @property
    def saving_s(self) -> float:
        return ironlaw.saving(self.time_s, self.best_time_s)


@dataclass(frozen=True)
class PointsSummary:
    """Counts and totals over the points of one report, for the summary of html/markdown output."""

    points: int
    plotted: int
    skipped: dict[str, int]  # skip flag -> count
    above_roof: int
    by_bound: dict[str, int]
    total_time_s: float
    skipped_time_s: float


# ------------------------------------------------------------------------------------------------ helpers


def _shapes(shapes: Any, limit: int = 3) -> str:
    if not isinstance(shapes, list):
        return ""
    parts = ["x".join(str(d) for d in s) if isinstance(s, list) and s else "()" for s in shapes[:limit]]
    return ", ".join(parts) + (", ..." if len(shapes) > limit else "")


def _shorten(text: str, limit: int = SHORT_LABEL_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


def _is_setting(word: str) -> bool:
    return "=" in word


def _common_words(kin: Sequence[Sequence[str]]) -> set[str]:
    """The words every member of a family has: one set narrowed in C by each member's words, stopping once empty
    (no set built per member)."""
    common = set(kin[0])
    for words in kin[1:]:
        if not common:
            break
        common.intersection_update(words)
    return common


def _workload_labels(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(full, short) labels of analytic/bench rows.

    Full: kind + label ('attention batch=1 heads=32 seq_q=1024 head_dim=128 causal naive'). Short: the label
    alone when it starts with its own name ('gelu numel=16777216', 'decode llama-3-8b qkv_proj m=1 ...'), else
    kind + label; then the settings every row of the same family shares are dropped (they do not tell the
    points apart): 'attention seq_q=1024 naive'."""
    parsed = []
    for row in rows:
        kind = str(row.get("kind") or "")
        words = str(row.get("label") or row.get("name") or row.get("op") or "").split()
        full = words if not kind or (words and words[0] == kind) else [kind, *words]
        short = words if words and not _is_setting(words[0]) else full
        lead = []
        for word in short:
            if _is_setting(word):
                break
            lead.append(word)
        parsed.append((" ".join(full), short, (kind, tuple(lead))))
    families: dict[tuple[str, tuple[str, ...]], list[list[str]]] = {}
    for _, short, family in parsed:
        families.setdefault(family, []).append(short)
    # NB: the words a family shares are computed once per family (every member is in it, so this is each member's
    # intersection with its kin): linear in the rows, where a per-row intersection was quadratic.
    shared = {
        family: _common_words(kin) - set(family[1]) if len(kin) > 1 else set() for family, kin in families.items()
    }
    return [(full, _shorten(" ".join(w for w in short if w not in shared[family]))) for full, short, family in parsed]


def _op_label(row: Mapping[str, Any]) -> tuple[str, str]:
    """(full, short) label of a diagnosed op: 'mm 1x1024, 1024x4096 @ blocks.0.up'."""
    op = str(row.get("op") or "").removeprefix("aten::")
    shapes = _shapes(row.get("input_shapes"))
    module = str(row.get("module") or "") or "(model)"
    backward = " (backward)" if row.get("phase") == "backward" or "(backward)" in str(row.get("key", "")) else ""
    at = source_text(str(row.get("source") or ""))
    full = f"{op} [{shapes}]{backward} @ {module}" + (f" at {at}" if at else "")
    short = f"{op} [{_shapes(row.get('input_shapes'), limit=2)}]{backward}" + (
        f" @ {module}" if module != "(model)" else ""
    )
    return full, _shorten(short)


# ------------------------------------------------------------------------------------------------ points


def _point(
    row: Mapping[str, Any],
    *,
    index: int,
    labels: tuple[str, str],
    report_name: str,
    source: str,
    device: str,
    time_key: str,
    calls: int = 1,
    rows: tuple[int, ...] = (),
) -> Point:
    flags: list[str] = []
    flops = finite_number(row.get("flops"))
    nbytes = finite_number(row.get("bytes"))
    time_s = finite_number(row.get(time_key))
    stored = Stored.of(row)
    if source == "analytic":
        flags.append(PREDICTED)
    if flops is None or nbytes is None:
        flags.append(UNCOUNTED)
    elif flops == 0:
        flags.append(NO_FLOPS)
    elif nbytes == 0:
        flags.append(NO_BYTES)
    if not time_s or time_s <= 0 or row.get("timed") is False:
        flags.append(UNTIMED)
        time_s = None if not time_s or time_s <= 0 else time_s
    intensity = finite_number(stored.intensity)
    if intensity is None and not any(f in SKIP_FLAGS for f in flags):
        flags.append(NO_INTENSITY)
    efficiency = finite_number(stored.efficiency)
    if efficiency is not None and efficiency > 1.0 and not any(f in SKIP_FLAGS for f in flags):
        flags.append(ABOVE_ROOF)
    return Point(
        label=labels[0],
        short_label=labels[1],
        report=report_name,
        source=source,
        device=device,
        index=index,
        kind=str(row.get("kind") or row.get("op") or ""),
        roof=str(row.get("roof") or ""),
        flops=flops,
        bytes=nbytes,
        intensity=intensity,
        throughput=flops / time_s if flops and time_s else None,
        attainable=finite_number(stored.attainable_flops_per_s),
        time_s=time_s,
        share=None,
        efficiency=efficiency,
        bound=stored.bound,
        calls=calls,
        limiter=str(row.get("limiter") or ""),
        launches=max(int(finite_number(row.get("kernels")) or 0), calls, 1),
        flags=tuple(flags),
        rows=rows or (index,),
    )


def _with_shares(points: list[Point]) -> list[Point]:
    """Each point's share of the total time of its report on its device (None when nothing is timed), set on the
    points just built (not yet seen by anyone: dataclasses.replace per point cost a tenth of a large report's
    markdown)."""
    totals: dict[tuple[str, str], float] = {}
    for p in points:
        if p.time_s:
            totals[(p.report, p.device)] = totals.get((p.report, p.device), 0.0) + p.time_s
    for p in points:
        total = totals.get((p.report, p.device))
        object.__setattr__(p, "share", p.time_s / total if p.time_s and total else None)
    return points


def _op_groups(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Diagnosed op calls grouped by what runs: op, input shapes, phase and roof (across modules), timed and
    untimed apart. Counts and kernels are summed; intensity, attainable, efficiency and bound are the group's by
    roofline.ironlaw.group, from the stored values of its calls."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    members: dict[tuple[Any, ...], list[ironlaw.Member]] = {}
    limiters: dict[tuple[Any, ...], list[tuple[str, float]]] = {}
    for index, row in enumerate(rows):
        timed = row.get("timed") is not False and bool(positive_number(row.get("time_s")))
        key = (row.get("op"), repr(row.get("input_shapes")), row.get("phase"), row.get("roof"), timed)
        group = groups.get(key)
        if group is None:
            group = groups[key] = {
                "index": index,
                "op": row.get("op"),
                "input_shapes": row.get("input_shapes"),
                "phase": row.get("phase"),
                "roof": row.get("roof"),
                "timed": timed,
                "kernels": 0,
                "count": 0,
                "modules": {},  # an ordered set: a list's `in` made grouping quadratic in a group's modules
                "sources": {},  # the calls' places in the user's code (OpPoint.source), an ordered set too
                "rows": [],
            }
            members[key] = []
            limiters[key] = []
        time_s = positive_number(row.get("time_s")) or 0.0
        limiters[key].append((str(row.get("limiter") or ""), time_s))
        members[key].append(
            Stored.of(row).member(finite_number(row.get("flops")), finite_number(row.get("bytes")), time_s)
        )
        group["kernels"] += int(finite_number(row.get("kernels")) or 0)
        group["count"] += 1
        group["rows"].append(index)
        group["modules"][str(row.get("module") or "") or "(model)"] = None
        if row.get("source"):
            group["sources"][str(row["source"])] = None
    for key, group in groups.items():
        law = ironlaw.group(members[key])
        group.update(
            modules=list(group["modules"]),
            sources=list(group["sources"]),
            flops=law.flops,
            bytes=law.bytes,
            time_s=law.time_s,
            intensity=law.intensity,
            roof_time_s=law.roof_time_s,
            attainable_flops_per_s=law.attainable_flops_per_s,
            efficiency=law.efficiency,
            bound=law.bound,
            limiter=held_most(limiters[key]),
        )
    return list(groups.values())


def _group_label(group: Mapping[str, Any]) -> tuple[str, str]:
    """(full, short): 'addmm [32, 8x32, 32x32] x64 @ blocks.0.0, blocks.1.0, ... (64 modules)'."""
    op = str(group.get("op") or "").removeprefix("aten::")
    backward = " (backward)" if group.get("phase") == "backward" else ""
    calls = f" x{group['count']}" if group["count"] > 1 else ""
    modules = list(group.get("modules") or [])
    where = ", ".join(modules[:3]) + (f", ... ({len(modules)} modules)" if len(modules) > 3 else "")
    at = sources_text(group.get("sources") or ())
    full = f"{op} [{_shapes(group.get('input_shapes'))}]{backward}{calls} @ {where}" + (f" at {at}" if at else "")
    module = f" @ {modules[0]}" if len(modules) == 1 and modules[0] != "(model)" else ""
    short = f"{op} [{_shapes(group.get('input_shapes'), limit=2)}]{backward}{calls}{module}"
    return full, _shorten(short)


def report_points(report: Any, name: str = "", *, per_call: bool = False) -> list[Point]:
    """The points of one report (roofline.report.schema.Report), in the report's order."""
    source = report.source
    default_device = report.devices[0].name if report.devices else ""
    if source == "diagnose" and not per_call:
        groups = _op_groups(report.rows)
        points = [
            _point(
                g,
                index=int(g["index"]),
                labels=_group_label(g),
                report_name=name,
                source=source,
                device=default_device,
                time_key="time_s",
                calls=int(g["count"]),
                rows=tuple(g["rows"]),
            )
            for g in groups
        ]
        return _with_shares(points)
    rows = report.rows
    labels = [_op_label(r) for r in rows] if source == "diagnose" else _workload_labels(rows)
    time_key = "median_s" if source == "bench" else "time_s"
    points = [
        _point(
            row,
            index=i,
            labels=labels[i],
            report_name=name,
            source=source,
            device=str(row.get("device") or default_device),
            time_key=time_key,
        )
        for i, row in enumerate(rows)
    ]
    return _with_shares(points)


def summarize(points: Iterable[Point]) -> PointsSummary:
    points = list(points)
    skipped: dict[str, int] = {}
    by_bound: dict[str, int] = {}
    skipped_time = 0.0
    for p in points:
        if not p.plottable:
            flag = next(f for f in p.flags if f in SKIP_FLAGS)
            skipped[flag] = skipped.get(flag, 0) + 1
            skipped_time += p.time_s or 0.0
        else:
            by_bound[p.bound or "unknown"] = by_bound.get(p.bound or "unknown", 0) + 1
    return PointsSummary(
        points=len(points),
        plotted=sum(1 for p in points if p.plottable),
        skipped=skipped,
        above_roof=sum(1 for p in points if p.above_roof),
        by_bound=by_bound,
        total_time_s=sum(p.time_s or 0.0 for p in points),
        skipped_time_s=skipped_time,
    )


def _finding(data: Mapping[str, Any], where: str) -> FindingView:
    return FindingView(
        where=str(data.get("where") or where),
        bottleneck=str(data.get("bottleneck") or ""),
        properties=tuple(str(p) for p in data.get("properties") or ()),
        technique=str(data.get("technique") or ""),
        evidence=str(data.get("evidence") or ""),
        time_s=finite_number(data.get("time_s")),
        best_time_s=finite_number(data.get("best_time_s")),
        share=finite_number(data.get("share")),
    )


def report_findings(report: Any) -> list[FindingView]:
    """Findings, largest saving first: diagnose's top-level list, else every row's (one per rule and row)."""
    top = getattr(report, "findings", None)
    if isinstance(top, list):
        found = [_finding(f, "") for f in top if isinstance(f, Mapping)]
    else:
        labels = _workload_labels(report.rows)
        found = []
        for row, (label, _) in zip(report.rows, labels, strict=True):
            device = f" on {row['device']}" if len(report.devices) > 1 and row.get("device") else ""
            found += [_finding(f, label + device) for f in row.get("findings") or () if isinstance(f, Mapping)]
    return sorted(found, key=lambda f: -f.saving_s)


@dataclass(frozen=True)
class ReportDocument:
    """What html and markdown output show of one report: its facts, points (largest time first), findings."""

    name: str
    source: str
    command: str
    created_utc: str
    tool_version: str
    devices: tuple[Any, ...]  # roofline.report.schema.DeviceInfo
    points: tuple[Point, ...]  # by time, largest first; untimed ones last
    summary: PointsSummary
    findings: tuple[FindingView, ...]
    notes: tuple[str, ...]  # the chart's notes (skipped and above-roof points, projections)
    totals: Mapping[str, Any]  # diagnose: the report's summary block ({} otherwise)
    uncounted: tuple[Mapping[str, Any], ...]  # diagnose: ops without a cost formula
    verified: tuple[VerifiedView, ...] | None = None  # diagnose --verify (roofline.report.verified); None: not run
    memory: MemoryView | None = None  # parameters and memory (roofline.report.memory); None: the report has none


def report_document(report: Any, name: str, *, notes: Sequence[str] = (), per_call: bool = False) -> ReportDocument:
    points = report_points(report, name, per_call=per_call)
    ordered = sorted(points, key=lambda p: (p.time_s is None, -(p.time_s or 0.0), p.index))
    totals = getattr(report, "summary", None)
    uncounted = getattr(report, "uncounted", None)
    return ReportDocument(
        name=name,
        source=report.source,
        command=report.command,
        created_utc=report.created_utc,
        tool_version=report.tool_version,
        devices=tuple(report.devices),
        points=tuple(ordered),
        summary=summarize(points),
        findings=tuple(report_findings(report)),
        notes=tuple(notes),
        totals=totals if isinstance(totals, Mapping) else {},
        uncounted=tuple(u for u in uncounted or () if isinstance(u, Mapping)) if isinstance(uncounted, list) else (),
        verified=report_verified(report),
        memory=memory_view(report),
    )


__all__ = [
    "ABOVE_ROOF",
    "NO_BYTES",
    "NO_FLOPS",
    "PREDICTED",
    "UNCOUNTED",
    "UNTIMED",
    "FindingView",
    "Point",
    "PointsSummary",
    "ReportDocument",
    "report_document",
    "report_findings",
    "report_points",
    "summarize",
]
