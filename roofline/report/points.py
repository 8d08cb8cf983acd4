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

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

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
_SKIP = frozenset(SKIP_FLAGS)
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
        return not self.flags or _SKIP.isdisjoint(self.flags)

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
    parts = ["x".join(map(str, s)) if isinstance(s, list) and s else "()" for s in shapes[:limit]]
    return ", ".join(parts) + (", ..." if len(shapes) > limit else "")


def _shorten(text: str, limit: int = SHORT_LABEL_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


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
    families: dict[tuple[str, tuple[str, ...]], list[list[str]]] = {}
    for row in rows:
        get = row.get
        kind = get("kind") or ""
        kind = kind if type(kind) is str else str(kind)
        words = str(get("label") or get("name") or get("op") or "").split()
        full = words if not kind or (words and words[0] == kind) else [kind, *words]
        short = words if words and "=" not in words[0] else full
        lead = []
        for word in short:
            if "=" in word:
                break
            lead.append(word)
        family = (kind, tuple(lead))
        kin = families.get(family)
        if kin is None:
            families[family] = [short]
        else:
            kin.append(short)
        parsed.append((" ".join(full), short, family))
    # NB: the words a family shares are computed once per family (every member is in it, so this is each member's
    # intersection with its kin): linear in the rows, where a per-row intersection was quadratic.
    shared = {
        family: _common_words(kin) - set(family[1]) if len(kin) > 1 else set() for family, kin in families.items()
    }
    out = []
    for full, short, family in parsed:
        dropped = shared[family]
        text = " ".join([w for w in short if w not in dropped] if dropped else short)
        out.append((full, text if len(text) <= SHORT_LABEL_CHARS else _shorten(text)))
    return out


def _op_label(row: Mapping[str, Any]) -> tuple[str, str]:
    """(full, short) label of a diagnosed op: 'mm 1x1024, 1024x4096 @ blocks.0.up'."""
    op = str(row.get("op") or "").removeprefix("aten::")
    input_shapes = row.get("input_shapes")
    shapes = _shapes(input_shapes)
    module = str(row.get("module") or "") or "(model)"
    backward = " (backward)" if row.get("phase") == "backward" or "(backward)" in str(row.get("key", "")) else ""
    source = row.get("source")
    at = source_text(str(source)) if source else ""
    full = f"{op} [{shapes}]{backward} @ {module}" + (f" at {at}" if at else "")
    short_shapes = shapes if isinstance(input_shapes, list) and len(input_shapes) <= 2 else _shapes(input_shapes, 2)
    short = f"{op} [{short_shapes}]{backward}" + (f" @ {module}" if module != "(model)" else "")
    return full, _shorten(short)


# ------------------------------------------------------------------------------------------------ points


_PLAIN_NUMBERS = frozenset((float, int, type(None)))
_INF = math.inf


def _finite(value: Any) -> float | None:
    """finite_number, the float case first (nearly every stored number)."""
    kind = type(value)
    if kind is float:
        return value if -_INF < value < _INF else None
    return float(value) if kind is int else finite_number(value)  # NB: an int past a float raises, as there


def _stored(row: Mapping[str, Any]) -> tuple[Any, Any, Any, Any, str]:
    """(intensity, attainable, efficiency, roof time, bound) as Stored.of reads them; read straight from the row
    where each is a plain number or null and the bound a text (every row a roofline wrote), else through Stored."""
    get = row.get
    values = (get("intensity"), get("attainable_flops_per_s"), get("efficiency"), get("roof_time_s"))
    bound = get("bound")
    if (bound is None or type(bound) is str) and all(type(v) in _PLAIN_NUMBERS for v in values):
        return (*(None if v is None else float(v) for v in values), bound or "")  # type: ignore[return-value]
    stored = Stored.of(row)
    return stored.intensity, stored.attainable_flops_per_s, stored.efficiency, stored.roof_time_s, stored.bound


def _flags(
    source: str,
    flops: float | None,
    nbytes: float | None,
    time_s: float | None,
    timed: Any,
    intensity: float | None,
    efficiency: float | None,
) -> tuple[tuple[str, ...], float | None]:
    """A point's flags, and its time (None when not timed), from its finite numbers."""
    flags: list[str] = []
    if source == "analytic":
        flags.append(PREDICTED)
    if flops is None or nbytes is None:
        flags.append(UNCOUNTED)
    elif flops == 0:
        flags.append(NO_FLOPS)
    elif nbytes == 0:
        flags.append(NO_BYTES)
    if not time_s or time_s <= 0 or timed is False:
        flags.append(UNTIMED)
        time_s = None if not time_s or time_s <= 0 else time_s
    skipped = bool(flags) and not _SKIP.isdisjoint(flags)
    if intensity is None and not skipped:
        flags.append(NO_INTENSITY)
        skipped = True
    if efficiency is not None and efficiency > 1.0 and not skipped:
        flags.append(ABOVE_ROOF)
    return tuple(flags), time_s


def _new_point(fields: dict[str, Any]) -> Point:
    """A Point of every field at once: its frozen dataclass's __init__ sets them one by one through
    object.__setattr__ (3 us a point; 0.3 us this way), which 100,000 points felt."""
    point = object.__new__(Point)
    point.__dict__.update(fields)
    return point


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
    get = row.get
    flops = _finite(get("flops"))
    nbytes = _finite(get("bytes"))
    intensity, attainable, efficiency, _, bound = _stored(row)
    intensity, efficiency = _finite(intensity), _finite(efficiency)
    flags, time_s = _flags(source, flops, nbytes, _finite(get(time_key)), get("timed"), intensity, efficiency)
    kind = get("kind") or get("op") or ""
    roof = get("roof") or ""
    limiter = get("limiter") or ""
    kernels = get("kernels")
    return _new_point(
        {
            "label": labels[0],
            "short_label": labels[1],
            "report": report_name,
            "source": source,
            "device": device,
            "index": index,
            "kind": kind if type(kind) is str else str(kind),
            "roof": roof if type(roof) is str else str(roof),
            "flops": flops,
            "bytes": nbytes,
            "intensity": intensity,
            "throughput": flops / time_s if flops and time_s else None,
            "attainable": _finite(attainable),
            "time_s": time_s,
            "share": None,
            "efficiency": efficiency,
            "bound": bound,
            "calls": calls,
            "limiter": limiter if type(limiter) is str else str(limiter),
            "launches": max(int(_finite(kernels) or 0), calls, 1),
            "flags": flags,
            "rows": rows or (index,),
        }
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
        p.__dict__["share"] = p.time_s / total if p.time_s and total else None  # NB: as _new_point sets fields
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
        _, _, _, roof_time_s, bound = _stored(row)
        members[key].append(
            ironlaw.Member(_finite(row.get("flops")), _finite(row.get("bytes")), roof_time_s or 0.0, time_s, bound)
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
    return _with_shares(_row_points(rows, labels, name, source, default_device, time_key))


_TEXT = frozenset((str, type(None)))


def _row_points(
    rows: Sequence[Mapping[str, Any]],
    labels: Sequence[tuple[str, str]],
    name: str,
    source: str,
    default_device: str,
    time_key: str,
) -> list[Point]:
    """One point per row, as _point makes each: rows that are all dicts of plain values (every report a roofline
    wrote) read column by column in C and made in one loop (:func:`_column_points`: 100,000 rows through _point
    took a second); any other report row by row through _point."""
    columns = _plain_columns(rows, time_key)
    if columns is not None:
        return _column_points(columns, labels, name, source, default_device)
    return [
        _point(row, index=index, labels=labels[index], report_name=name, source=source,
               device=str(row.get("device") or default_device), time_key=time_key)
        for index, row in enumerate(rows)
    ]  # fmt: skip


#: the fields a point reads of a row, as _point reads them (the time under its key: TIME below)
_NUMBER_FIELDS = ("flops", "bytes", "TIME", "intensity", "attainable_flops_per_s", "efficiency", "kernels")
_TEXT_FIELDS = ("kind", "op", "roof", "limiter", "device", "bound")


def _column(rows: Sequence[dict[str, Any]], key: str) -> list[Any]:
    """``row.get(key)`` of every row, in C."""
    return list(map(dict.get, rows, itertools.repeat(key)))


def _numbers(values: list[Any]) -> list[float | None] | None:
    """A column of plain numbers (float, int, None) as _point converts each (a float, None for null or a NaN
    or infinity): in C where all are finite floats; None where any is not a plain number."""
    kinds = set(map(type, values))
    if not kinds <= _PLAIN_NUMBERS:
        return None
    if kinds == _FLOAT and all(map(math.isfinite, values)):
        return values
    inf = _INF
    return [None if v is None or not -inf < v < inf else float(v) for v in values]


_FLOAT = frozenset((float,))


def _plain_columns(rows: Sequence[Any], time_key: str) -> dict[str, list[Any]] | None:
    """The columns _point reads, converted as it converts each value (numbers: :func:`_numbers`; ``kind``:
    the kind or else the op), when every row is a dict and every value a plain number or text (and the roof
    time a plain number, which _stored checks); else None (rows read one by one)."""
    if not rows or not all(type(row) is dict for row in rows):
        return None
    columns: dict[str, list[Any]] = {}
    for key in _NUMBER_FIELDS:
        found = _numbers(_column(rows, time_key if key == "TIME" else key))
        if found is None:
            return None
        columns[key] = found
    if not set(map(type, _column(rows, "roof_time_s"))) <= _PLAIN_NUMBERS:
        return None
    for key in _TEXT_FIELDS:
        columns[key] = _column(rows, key)
    kinds, ops = columns.pop("kind"), columns.pop("op")
    columns["kind"] = [kind or op for kind, op in zip(kinds, ops, strict=True)]
    for key in ("kind", "roof", "limiter", "device", "bound"):
        if not set(map(type, columns[key])) <= _TEXT:
            return None
    columns["timed"] = _column(rows, "timed")
    return columns


def _column_points(
    columns: dict[str, list[Any]], labels: Sequence[tuple[str, str]], name: str, source: str, default_device: str
) -> list[Point]:
    """_point's points of rows read as columns (:func:`_plain_columns`): the same fields, the same values."""
    points = []
    new = object.__new__
    get = columns.__getitem__
    keys = ("flops", "bytes", "TIME", "intensity", "attainable_flops_per_s", "efficiency", "kernels", "roof")
    values = zip(*map(get, keys), *map(get, ("limiter", "device", "bound", "kind", "timed")), labels, strict=True)
    for index, row in enumerate(values):
        flops, nbytes, time_s, intensity, attainable, efficiency, kernels, roof = row[:8]
        limiter, device, bound, kind, timed, (label, short) = row[8:]
        flags, time_s = _flags(source, flops, nbytes, time_s, timed, intensity, efficiency)
        point = new(Point)  # NB: as _new_point
        point.__dict__.update(
            label=label,
            short_label=short,
            report=name,
            source=source,
            device=device or default_device,
            index=index,
            kind=kind or "",
            roof=roof or "",
            flops=flops,
            bytes=nbytes,
            intensity=intensity,
            throughput=flops / time_s if flops and time_s else None,
            attainable=attainable,
            time_s=time_s,
            share=None,
            efficiency=efficiency,
            bound=bound or "",
            calls=1,
            limiter=limiter or "",
            launches=max(int(kernels) if kernels is not None else 0, 1),
            flags=flags,
            rows=(index,),
        )
        points.append(point)
    return points


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
    view = object.__new__(FindingView)  # NB: every field at once, as _new_point makes a Point
    view.__dict__.update(
        where=str(data.get("where") or where),
        bottleneck=str(data.get("bottleneck") or ""),
        properties=tuple(map(str, data.get("properties") or ())),
        technique=str(data.get("technique") or ""),
        evidence=str(data.get("evidence") or ""),
        time_s=_finite(data.get("time_s")),
        best_time_s=_finite(data.get("best_time_s")),
        share=_finite(data.get("share")),
    )
    return view


def report_findings(report: Any, labels: Sequence[str] | None = None) -> list[FindingView]:
    """Findings, largest saving first: diagnose's top-level list, else every row's (one per rule and row).
    ``labels``: each row's full label where the caller has them (its points': report_points), else made here."""
    return list(Findings(report, labels))


class Findings(Sequence[FindingView]):
    """A report's findings, largest saving first (report_findings), each made a FindingView when it is read: a
    page shows the first ten of a 100,000-row report's 170,000 (their order needs only each one's saving)."""

    def __init__(self, report: Any, labels: Sequence[str] | None = None) -> None:
        top = getattr(report, "findings", None)
        stored: list[tuple[Mapping[str, Any], str]] = []
        if isinstance(top, list):
            stored = [(f, "") for f in top if isinstance(f, Mapping)]
        else:
            if labels is None:
                labels = [label for label, _ in _workload_labels(report.rows)]
            several = len(report.devices) > 1
            for row, label in zip(report.rows, labels, strict=True):
                listed = row.get("findings")
                if not listed:
                    continue
                where = label + (f" on {row['device']}" if several and row.get("device") else "")
                stored += [(f, where) for f in listed if isinstance(f, Mapping)]
        savings = [ironlaw.saving(_finite(f.get("time_s")), _finite(f.get("best_time_s"))) for f, _ in stored]
        self._stored = stored
        self._order = sorted(range(len(stored)), key=lambda i: -savings[i])  # NB: stable, as sorting the views
        self._made: dict[int, FindingView] = {}

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> FindingView: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[FindingView, ...]: ...

    def __getitem__(self, index: int | slice) -> FindingView | tuple[FindingView, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        position = self._order[index]
        view = self._made.get(position)
        if view is None:
            view = self._made[position] = _finding(*self._stored[position])
        return view

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Findings({len(self)} findings)"


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
    findings: Sequence[FindingView]  # largest saving first (Findings: made when read)
    notes: tuple[str, ...]  # the chart's notes (skipped and above-roof points, projections)
    totals: Mapping[str, Any]  # diagnose: the report's summary block ({} otherwise)
    uncounted: tuple[Mapping[str, Any], ...]  # diagnose: ops without a cost formula
    verified: tuple[VerifiedView, ...] | None = None  # diagnose --verify (roofline.report.verified); None: not run
    memory: MemoryView | None = None  # parameters and memory (roofline.report.memory); None: the report has none


def report_document(
    report: Any,
    name: str,
    *,
    notes: Sequence[str] = (),
    per_call: bool = False,
    points: Sequence[Point] | None = None,
) -> ReportDocument:
    """What html and markdown show of ``report``. ``points``: report_points(report, name, per_call=per_call)
    where the caller has them already (the chart of the same page), so that they are made once."""
    if points is None:
        points = report_points(report, name, per_call=per_call)
    per_row = report.source != "diagnose" and len(points) == len(report.rows)  # analytic, bench: a point per row
    labels = [p.label for p in points] if per_row else None
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
        findings=Findings(report, labels),
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
    "Findings",
    "Point",
    "PointsSummary",
    "ReportDocument",
    "report_document",
    "report_findings",
    "report_points",
    "summarize",
]
