"""The advice oracle: does the diagnosis name the technique that pays off? On every problem of the corpus
(benchmarks/advice_corpus.py: nn modules and conv/Linear chains generated from tables, plus workloads/models), the
diagnosis's findings beside every mechanical technique measured.

    python benchmarks/advice_oracle.py --out advice-h100.json --precompile 4     # on a CUDA machine (bf16 shapes)
    python benchmarks/advice_oracle.py --out advice-h100.json --resume --ncu     # then ncu on what was measured
    python benchmarks/advice_oracle.py --out advice-h100.json --resume --rediagnose r2   # new rules, same timings
    python benchmarks/advice_oracle.py --out advice-h100.json --rescore   # the scoring again, no GPU
    python benchmarks/advice_oracle.py --device cpu --quick --limit 4 --out advice-cpu.json   # the logic, on a CPU

Time: --time-limit (default 470 s, the whole run, --precompile included) stops cleanly and writes what was measured
("complete": false, "stopped" says where); the same command with --resume goes on where it stopped (and --ncu adds
ncu to the problems already measured; --rediagnose TAG diagnoses them again with this checkout's rules, keeping the
techniques' timings). --precompile N first compiles every problem's techniques in N parallel
processes (at most --precompile-limit s), so that the timed pass, one problem at a time, loads inductor's caches
instead of compiling; --problem-budget caps one problem's techniques, --technique-timeout one technique.

Per problem:
1. ``roofline.diagnose(model, inputs)`` in-process: the findings in rank order, each finding's mechanical technique
   (roofline.diagnose.verify.technique_for: 'compile', 'channels_last', 'channels_last+compile', 'reduce-overhead',
   'tf32'...; '' for a code change), and the dominant op (most time, identical ops together): its limiter, kernel;
2. eager, then each technique on a fresh copy (roofline.diagnose.verify.TECHNIQUES, as --verify applies them):
   compile, channels_last and channels_last+compile (4-D inputs or weights only), reduce-overhead (CUDA only);
   plus any other mechanical technique a top-3 finding names (for 'harmful' only, never the best). Warm-up
   (compilation) first, then ROUNDS rounds of calls sized to about --round-ms each (CUDA events on a GPU, the host
   clock on the CPU), the median; the first outputs checked against eager's (roofline.diagnose.verify's
   tolerance: bf16 within a relative RMS error of 1e-2, fp32 allclose). A technique that fails, mismatches or runs
   past its time is recorded with its one-line reason;
3. best = the fastest of the measured techniques (MEASURED). hit (where the best gives at least HIT_GAIN): the
   best, or a technique within TIE (3%) of its speedup (a tie within the rounds' noise), is named by one of the
   first three findings. "Named" is by parts: a best that combines parts
   (channels_last+compile) is named when every part is named by the first three findings (a user who follows
   them applies them together, as --verify's "all" does: roofline.diagnose.verify.combine_techniques); hit_exact
   asks for the best's own name. harmful = a technique a top-3 finding names, measured slower than HARMFUL x eager;
   then the same after --verify: --verify measures each finding's technique on the whole model and re-ranks the
   findings (roofline.diagnose.verify.rerank: a finding whose technique measured slower goes last, and reads
   "0.76x: don't" where it stays). The oracle measures those techniques on the whole problem as --verify applies
   them (verify.TECHNIQUES), so it builds the VerifiedFinding of each finding from its own measurement
   (measured_gain: the oracle's speedup of the finding's technique, outputs_match: its check) and calls
   verify.rerank on them: hit_after_verify = the best named (by parts) by the first three findings after the
   re-ranking that are not marked slower; harmful_after_verify = a technique of those findings measured below
   HARMFUL and not marked slower. It is the re-ranking --verify does, applied to the oracle's measurements, not a
   separate --verify run: a technique measured below HARMFUL is below 1x, so marked slower and demoted, and
   harmful_after_verify counts only what that re-ranking leaves as advice (none, when the measurements are
   --verify's); the numbers before --verify say how often the diagnosis alone leads with a slower technique;
4. ``--ncu``: the dominant op's longest kernel under ``ncu --section SpeedOfLight --clock-control none``: its class
   (SM vs memory throughput, benchmarks/diagnose_fixes_gpu.py's sol_class) against the dominant op's limiter.
   Without ncu on PATH: 'not measured'.

Totals: hit rate (hits / problems whose best gives >= HIT_GAIN; by parts, exactly, and after --verify), harmful
advice (before and after --verify), bound-class agreement, and per kind (module, chain, small, model). The results
(JSON, schema SCHEMA) are written atomically to --out after every problem; --resume keeps the problems already
there. --time-limit stops cleanly between problems (or cuts the running technique at the limit) and writes what
was measured; --problem-budget caps one problem's techniques. Progress on stderr; the table on stdout (--json: the
JSON instead).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "benchmarks")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from advice_corpus import Problem, corpus, free_device  # noqa: E402
from diagnose_fixes_gpu import agrees, kernel_base_name, ours_class, parse_sol_launches, sol_class  # noqa: E402

SCHEMA = "roofline-advice-oracle/1"
HIT_GAIN = 1.5  # the best technique counts (for the hit rate) when it gives at least this
HARMFUL = 0.95  # a named technique measured below this x eager is harmful advice
TOP = 3  # the findings that count as the advice
#: a technique within this factor of the best's speedup is as good as the best (a hit when named). NB: the
#: techniques' medians move by a few percent between rounds (compile 1.64x against channels_last+compile 1.65x on
#: batchnorm2d-c128, H100 r3): naming either is the right advice
TIE = 0.97
MEASURED = ("compile", "channels_last", "channels_last+compile", "reduce-overhead")
ROUNDS = 5

# timer(step, iters, device) -> seconds the `iters` calls took together (roofline.diagnose.verify.Timer)
Timer = Callable[[Callable[[], object], int, str], float]
Progress = Callable[[str], None]
Step = Callable[[], Any]


class TechniqueTimeout(Exception):
    """A technique (or the diagnosis) ran past its time."""


@dataclass
class Options:
    device: str = "cuda"
    quick: bool = False
    rounds: int = ROUNDS
    round_s: float = 0.02  # each timed round: about this long (at least one call)
    warmup: int = 3  # calls before timing (the first compiles)
    problem_budget_s: float = 60.0  # techniques not started once a problem's techniques have taken this long
    technique_timeout_s: float = 90.0  # one technique (its compilation included) stopped after this long
    deadline: float = math.inf  # time.monotonic() at which the run stops
    roofs: str = "auto"
    diagnose_iters: int = 10
    timer: Timer | None = None  # None: roofline.diagnose.profile.time_loop
    boundaries: Any = None  # roofline.diagnose.pipeline.Boundaries (tests inject a timer)
    ncu: bool = False
    ncu_timeout_s: float = 180.0
    work: Path = field(default_factory=lambda: Path("."))  # where ncu's scripts and CSVs go


# ------------------------------------------------------------------------------------------------ scoring


def applies(name: str, four_d: bool, device: str) -> str:
    """'' when technique ``name`` is measured on this problem, else why not."""
    parts = name.split("+")
    if "channels_last" in parts and not four_d:
        return "not applicable: no 4-D input or weight"
    if "reduce-overhead" in parts and not device.startswith("cuda"):
        return "not applicable: CUDA graphs run on CUDA only"
    return ""


def parts(name: str) -> set[str]:
    """A technique's parts: 'channels_last+compile' -> {'channels_last', 'compile'}; '' -> none."""
    return {p for p in name.split("+") if p}


def named_by_parts(best: str, named: Sequence[str]) -> bool:
    """Whether every part of technique ``best`` is named by one of the ``named`` techniques (each of those by any
    of its parts): a user who does what the findings say applies them together, as --verify's "all" does
    (roofline.diagnose.verify.combine_techniques)."""
    given = set().union(*(parts(n) for n in named)) if named else set()
    return bool(parts(best)) and parts(best) <= given


def verified_entries(entry: dict[str, Any]) -> list[Any]:
    """One roofline.diagnose.verify.VerifiedFinding per finding (rank order), from the oracle's own measurements:
    measured_gain = the speedup the oracle measured for the finding's technique on the whole problem (None where
    not measured or the outputs differed), outputs_match = its check (None: not run) -- what --verify measures for
    the same technique, applied the same way (verify.TECHNIQUES)."""
    from roofline.diagnose.verify import VerifiedFinding

    techniques = entry.get("techniques") or {}
    out = []
    for f in entry.get("findings") or entry.get("top") or []:
        name = f.get("technique") or ""
        t = (techniques.get(name) or {}) if name else {}
        out.append(
            VerifiedFinding(
                rule=f.get("rule") or "",
                technique=name,
                measured_gain=t.get("speedup"),  # NB: None unless the outputs matched
                outputs_match=t.get("match"),
            )
        )
    return out


def after_verify(entry: dict[str, Any]) -> list[tuple[str, bool]]:
    """The first TOP findings after --verify's re-ranking (roofline.diagnose.verify.rerank on
    :func:`verified_entries`): (technique, marked slower) each; a finding whose technique measured slower goes
    last, and where it stays among the first TOP it reads "0.76x: don't"."""
    from types import SimpleNamespace

    from roofline.diagnose.verify import rerank

    findings = [SimpleNamespace(**f) for f in entry.get("findings") or entry.get("top") or []]
    _, verified = rerank(findings, verified_entries(entry))
    per = [v for v in verified if v.rule not in ("all", "sweep")][:TOP]
    return [(v.technique, v.slower) for v in per]


def score(entry: dict[str, Any]) -> dict[str, Any]:
    """best (technique, speedup) among MEASURED; hit (None: the best gives < HIT_GAIN or nothing measured; else
    whether the best is named by the first TOP findings, by parts: :func:`named_by_parts`), hit_exact (the best's
    own name among them); harmful (the top-3-named techniques measured below HARMFUL); named_best (the best gain a
    top-3 technique gave); and the same after --verify (:func:`after_verify`): hit_after_verify (named by the
    first TOP findings after the re-ranking that are not marked slower), harmful_after_verify (a technique of
    those findings measured below HARMFUL and not marked slower). Pure: ``entry`` holds 'techniques'
    {name: {'speedup': float | None, 'match': bool | None}}, 'top' [{'rule', 'technique'}] and optionally
    'findings' (all, rank order; default 'top')."""
    techniques = entry.get("techniques") or {}
    speedups = {name: t["speedup"] for name, t in techniques.items() if t.get("speedup") is not None}
    named = [f.get("technique") or "" for f in (entry.get("top") or [])[:TOP]]
    candidates = {n: s for n, s in speedups.items() if n in MEASURED}
    best_name = max(candidates, key=lambda n: candidates[n]) if candidates else None
    best = candidates.get(best_name) if best_name else None
    target = best is not None and best >= HIT_GAIN
    harmful = sorted({n for n in named if n and n in speedups and speedups[n] < HARMFUL})
    named_gains = [speedups[n] for n in named if n in speedups]
    verified = after_verify(entry)
    advised = [n for n, slower in verified if n and not slower]
    # the techniques as good as the best (within TIE of its speedup): naming any of them is the best advice
    tied = [n for n, v in candidates.items() if best is not None and v >= TIE * best]
    return {
        "best": best_name,
        "best_speedup": best,
        "hit": any(named_by_parts(n, named) for n in tied) if target and best_name else None,
        "hit_exact": any(n in named for n in tied) if target else None,
        "harmful": harmful,
        "named_best": max(named_gains) if named_gains else None,
        "top_after_verify": [{"technique": n, "slower": slower} for n, slower in verified],
        "hit_after_verify": any(named_by_parts(n, advised) for n in tied) if target and best_name else None,
        "harmful_after_verify": sorted({n for n in advised if n in speedups and speedups[n] < HARMFUL}),
    }


def summarise(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals over the problems: hit rate (by parts, exact, after --verify), harmful advice (before and after
    --verify), bound-class agreement, and the targets, hits and harmful problems per kind (pure)."""
    measured = [e for e in entries if e.get("best") is not None]
    targets = [e for e in entries if e.get("hit") is not None]
    hits = sum(1 for e in targets if e["hit"])
    hits_after = sum(1 for e in targets if e.get("hit_after_verify"))
    harmful = [e for e in entries if e.get("harmful")]
    harmful_after = [e for e in entries if e.get("harmful_after_verify")]
    classes = [e["class_agrees"] for e in entries if e.get("class_agrees") is not None]
    named = sum(1 for e in entries if any(f.get("technique") for f in (e.get("top") or [])[:TOP]))
    kinds: dict[str, dict[str, int]] = {}
    for e in entries:
        k = kinds.setdefault(str(e.get("kind") or "?"), {"problems": 0, "targets": 0, "hits": 0, "harmful": 0})
        k["problems"] += 1
        k["targets"] += e.get("hit") is not None
        k["hits"] += bool(e.get("hit"))
        k["harmful"] += bool(e.get("harmful"))
    return {
        "problems": len(entries),
        "failed": sum(1 for e in entries if e.get("error")),
        "measured": len(measured),
        "best_at_least_hit_gain": len(targets),
        "hits": hits,
        "hit_rate": hits / len(targets) if targets else None,
        "hits_exact": sum(1 for e in targets if e.get("hit_exact")),
        "hits_after_verify": hits_after,
        "hit_rate_after_verify": hits_after / len(targets) if targets else None,
        "harmful_problems": len(harmful),
        "harmful_advice": sum(len(e["harmful"]) for e in harmful),
        "harmful_problems_after_verify": len(harmful_after),
        "harmful_advice_after_verify": sum(len(e["harmful_after_verify"]) for e in harmful_after),
        "top3_names_a_technique": named,
        "class_measured": len(classes),
        "class_agrees": sum(classes),
        "class_agreement": sum(classes) / len(classes) if classes else None,
        "by_kind": kinds,
    }


# ------------------------------------------------------------------------------------------------ diagnosing


def dominant_op(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The op holding most time (identical ops -- op and input shapes -- together, the longest of them): its op,
    limiter, share of the timed ops and longest kernel (as benchmarks/diagnose_fixes_gpu.py picks it)."""
    timed = [r for r in rows if r.get("timed")]
    groups: dict[Any, list[dict[str, Any]]] = {}
    for r in timed:
        groups.setdefault((r.get("op"), json.dumps(r.get("input_shapes"))), []).append(r)
    if not groups:
        return {}
    total = sum(r.get("time_s") or 0.0 for r in timed)
    group = max(groups.values(), key=lambda g: sum(r.get("time_s") or 0.0 for r in g))
    top = max(group, key=lambda r: r.get("time_s") or 0.0)
    kernels = top.get("kernel_facts") or []
    kernel = max(kernels, key=lambda k: k.get("time_s") or 0.0).get("name", "") if kernels else ""
    group_s = sum(r.get("time_s") or 0.0 for r in group)
    return {
        "op": top.get("op"),
        "module": top.get("module"),
        "limiter": top.get("limiter") or top.get("bound"),
        "share": group_s / total if total else None,
        "count": len(group),
        "kernel": kernel,
    }


def diagnosis_facts(diagnosis: Any, device: str) -> dict[str, Any]:
    """The findings (rank order, each with its technique) and the dominant op of a roofline.Diagnosis."""
    from roofline.diagnose.verify import technique_for

    findings = [
        {"rule": f.rule, "technique": technique_for(f.rule, device)[0], "share": round(float(f.share), 4)}
        for f in diagnosis.findings
    ]
    rows = diagnosis.report().model_dump(mode="json").get("rows") or []
    return {"findings": findings, "top": findings[:TOP], "dominant": dominant_op(rows)}


# ------------------------------------------------------------------------------------------------ timing


@contextlib.contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Raise TechniqueTimeout in the main thread after ``seconds`` (SIGALRM; no limit where there is none)."""
    usable = hasattr(signal, "SIGALRM") and math.isfinite(seconds)
    if not usable:
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise TechniqueTimeout(what)

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def warmed(fn: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], options: Options) -> tuple[Any, float, Step]:
    """(the first outputs, kept; the warm-up's seconds, compilation included; the step that calls ``fn`` once)."""
    from roofline.diagnose.execute import run_once
    from roofline.diagnose.profile import synchronize
    from roofline.diagnose.verify import _kept

    def step() -> Any:
        return run_once(fn, inputs, kwargs, "inference")

    start = time.perf_counter()
    out = _kept(step())  # NB: a copy: a CUDA graph's replays overwrite the outputs of the calls before them
    for _ in range(max(options.warmup, 1) - 1):
        step()
    synchronize(options.device)
    return out, time.perf_counter() - start, step


def per_call(steps: Sequence[Step], options: Options) -> list[float]:
    """Median seconds per call of each step over ``options.rounds`` rounds, the steps alternating (ABBA: none
    always runs on a warmer device); each round about ``options.round_s`` long (at least one call)."""
    from roofline.diagnose.profile import time_loop

    timer = options.timer or time_loop
    calls = []
    for step in steps:
        one = min(timer(step, 1, options.device) for _ in range(3))  # NB: the fastest: a busy host's hiccup aside
        calls.append(max(1, min(1000, int(options.round_s / one))) if one > 0 else 1)
    samples: list[list[float]] = [[] for _ in steps]
    order = list(range(len(steps)))
    for r in range(max(options.rounds, 1)):
        for i in order if r % 2 == 0 else order[::-1]:
            samples[i].append(timer(steps[i], calls[i], options.device) / calls[i])
    return [median(s) for s in samples]


def four_dimensional(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether channels_last can change anything: a 4-D input or a 4-D weight."""
    from roofline.diagnose.verify import _leaves

    params = list(model.parameters()) if hasattr(model, "parameters") else []
    return any(t.dim() == 4 for t in _leaves((inputs, kwargs)) + params)


def measure_technique(
    name: str, model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], eager: tuple[Any, Step], options: Options
) -> dict[str, Any]:
    """One technique on a fresh copy: speedup over eager, timed alternating with it (None unless the outputs
    match), seconds per call of both, the warm-up's seconds, note."""
    from roofline.diagnose.verify import TECHNIQUES, failure_note, outputs_close, tolerance

    eager_out, eager_step = eager
    result: dict[str, Any] = {"speedup": None, "seconds_per_call": None, "warm_s": None, "match": None, "note": ""}
    left = options.deadline - time.monotonic()
    budget, why = (left, "the time limit") if left < options.technique_timeout_s else (options.technique_timeout_s, "")
    try:
        with time_limit(budget, why or f"{name} ran past its {budget:.0f} s"):
            fn, args, kw = copy.deepcopy(model), inputs, kwargs
            for part in name.split("+"):
                fn, args, kw = TECHNIQUES[part](fn, args, kw, options.device)
            out, warm_s, step = warmed(fn, args, kw, options)
            rtol, atol = tolerance(name, eager_out)
            match, note = outputs_close(eager_out, out, rtol, atol)
            del out
            result.update(warm_s=round(warm_s, 3), match=match, note=note)
            if match:
                eager_s, fixed_s = per_call([eager_step, step], options)
                result.update(seconds_per_call=fixed_s, eager_s=eager_s)
                result["speedup"] = eager_s / fixed_s if fixed_s > 0 else None
    except TechniqueTimeout as exc:
        result["note"] = f"stopped: {exc}"
    except Exception as exc:  # a technique that fails is a result, not the end of the run
        result["note"] = failure_note(exc)
    finally:
        free_device(options.device)
    return result


# ------------------------------------------------------------------------------------------------ one problem


def _diagnose(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], problem: Problem, options: Options) -> Any:
    import roofline

    return roofline.diagnose(
        model,
        inputs,
        kwargs,
        device=options.device,
        warmup=2,
        iters=options.diagnose_iters,
        roofs=options.roofs,
        name=problem.id,
        boundaries=options.boundaries,
    )


def run_problem(problem: Problem, options: Options, tell: Progress = lambda line: None) -> dict[str, Any]:
    """Diagnose ``problem`` and measure every technique: the entry (see the module docstring). An error while
    building, diagnosing or running eager is the entry's ``error``; a technique's failure is that technique's note."""
    from roofline.diagnose.verify import TECHNIQUES, failure_note

    start = time.monotonic()
    entry: dict[str, Any] = {
        "id": problem.id,
        "family": problem.family,
        "kind": problem.kind,
        "dtype": problem.dtype(options.device),
        "shape": problem.shape(options.quick) if problem.path is None else ("small" if options.quick else "large"),
        "techniques": {},
    }
    try:
        with time_limit(options.deadline - time.monotonic(), "the time limit (while building or diagnosing)"):
            model, inputs, kwargs = problem.build(options.device, options.quick)
            tell(f"{problem.id}: diagnosing")
            facts = diagnosis_facts(_diagnose(model, inputs, kwargs, problem, options), options.device)
            entry.update(facts)
            tell(f"{problem.id}: eager")
            eager_out, _, eager_step = warmed(model, inputs, kwargs, options)
            (eager_s,) = per_call([eager_step], options)
    except Exception as exc:
        entry["error"] = failure_note(exc) if not isinstance(exc, TechniqueTimeout) else f"stopped: {exc}"
        entry["seconds"] = round(time.monotonic() - start, 2)
        free_device(options.device)
        return entry
    entry["eager_s"] = eager_s
    four_d = four_dimensional(model, inputs, kwargs)
    named = [f["technique"] for f in entry["top"] if f["technique"]]
    extra = [n for n in dict.fromkeys(named) if n not in MEASURED and all(p in TECHNIQUES for p in n.split("+"))]
    begun = time.monotonic()  # the problem's budget: its techniques' time
    for name in [*MEASURED, *extra]:
        why = applies(name, four_d, options.device)
        if not why and time.monotonic() - begun > options.problem_budget_s:
            why = f"skipped: the problem's budget ({options.problem_budget_s:.0f} s) is spent"
        if not why and time.monotonic() >= options.deadline:
            why = "skipped: the time limit is reached"
        if not why and "pad" in name.split("+"):
            why = "not measured: pad needs the finding's modules"
        if why:
            entry["techniques"][name] = {"speedup": None, "note": why}
            continue
        tell(f"{problem.id}: {name}")
        entry["techniques"][name] = measure_technique(name, model, inputs, kwargs, (eager_out, eager_step), options)
    entry.update(score(entry))
    entry["seconds"] = round(time.monotonic() - start, 2)
    del model, inputs, kwargs, eager_out, eager_step
    free_device(options.device)
    return entry


def rediagnose(entry: dict[str, Any], problem: Problem, options: Options, tag: str = "1") -> dict[str, Any]:
    """``entry`` (a problem measured before) with its diagnosis run again by this checkout: findings, dominant op
    and scores anew, the techniques' timings kept (the expensive part); its ncu result kept only when the dominant
    kernel is the same. An error while diagnosing is recorded in ``rediagnose_error`` and the old facts kept."""
    from roofline.diagnose.verify import failure_note

    try:
        with time_limit(options.deadline - time.monotonic(), "the time limit (while diagnosing)"):
            model, inputs, kwargs = problem.build(options.device, options.quick)
            facts = diagnosis_facts(_diagnose(model, inputs, kwargs, problem, options), options.device)
    except Exception as exc:
        return {**entry, "rediagnose_error": failure_note(exc)}
    finally:
        free_device(options.device)
    fresh = {**entry, **facts, "rediagnosed": tag}
    fresh.pop("rediagnose_error", None)
    if (entry.get("dominant") or {}).get("kernel") != (facts.get("dominant") or {}).get("kernel"):
        fresh.pop("ncu", None)
    fresh.update(score(fresh))
    fresh.update(class_facts(fresh))
    return fresh


# ------------------------------------------------------------------------------------------------ precompiling


def compiles(name: str) -> bool:
    return any(part in ("compile", "reduce-overhead") for part in name.split("+"))


def warm_caches(problems: Sequence[Problem], options: Options, tell: Progress = lambda line: None) -> int:
    """Compile every compiling technique of each problem once (two calls each), so that the timed run finds
    inductor's caches (FX graphs, Triton kernels) warm; failures are left to the timed run. The count compiled."""
    from roofline.diagnose.verify import TECHNIQUES, failure_note

    done = 0
    for problem in problems:
        if time.monotonic() >= options.deadline:
            break
        try:
            model, inputs, kwargs = problem.build(options.device, options.quick)
            four_d = four_dimensional(model, inputs, kwargs)
        except Exception as exc:
            tell(f"{problem.id}: {failure_note(exc)}")
            continue
        for name in [n for n in MEASURED if compiles(n) and not applies(n, four_d, options.device)]:
            left = min(options.technique_timeout_s, options.deadline - time.monotonic())
            try:
                with time_limit(left, f"{name} ran past its time"):
                    fn, args, kw = copy.deepcopy(model), inputs, kwargs
                    for part in name.split("+"):
                        fn, args, kw = TECHNIQUES[part](fn, args, kw, options.device)
                    warmed(fn, args, kw, Options(device=options.device, warmup=2))
                done += 1
            except Exception as exc:  # NB: TechniqueTimeout too: the timed run says what failed
                tell(f"{problem.id}: {name}: {failure_note(exc) if not isinstance(exc, TechniqueTimeout) else exc}")
            finally:
                free_device(options.device)
        del model, inputs, kwargs
    return done


def precompile(
    problems: Sequence[Problem], workers: int, seconds: float, device: str, quick: bool, tell: Progress
) -> None:
    """``workers`` processes warming inductor's caches (:func:`warm_caches`) for ``problems`` (dealt round-robin),
    at most ``seconds``: the compilations run in parallel on the host's cores before the timing, which runs one
    problem at a time. Those still running at the limit are stopped (their process groups)."""
    chunks = [list(problems[i::workers]) for i in range(workers)]
    env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "2")}
    procs = []
    for chunk in filter(None, chunks):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--warm-only", "--device", device, "--out", os.devnull]
        cmd += ["--ids", ",".join(p.id for p in chunk), "--time-limit", str(max(seconds, 1.0))]
        cmd += ["--quick"] if quick else []
        procs.append(
            subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
    tell(f"precompiling {len(problems)} problems in {len(procs)} processes (at most {seconds:.0f} s)")
    end = time.monotonic() + seconds + 10.0
    for proc in procs:
        try:
            proc.wait(timeout=max(end - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # NB: the group: its inductor compile workers too
            proc.wait()
    tell("precompiling done")


# ------------------------------------------------------------------------------------------------ ncu


NCU_RUNNER = """
import sys
sys.path.insert(0, {benchmarks!r}); sys.path.insert(0, {root!r})
from advice_oracle import replay
replay({problem!r}, {device!r}, {quick!r})
"""


def replay(problem_id: str, device: str, quick: bool, calls: int = 3) -> None:
    """Build ``problem_id`` and call it ``calls`` times, eager (what ncu profiles)."""
    import torch

    (problem,) = [p for p in corpus() if p.id == problem_id]
    model, inputs, kwargs = problem.build(device, quick)
    with torch.no_grad():
        for _ in range(calls):
            model(*inputs, **kwargs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()


#: launches of the dominant kernel's base name profiled (after the first): the longest is taken
NCU_LAUNCHES = 8


def run_ncu(entry: dict[str, Any], options: Options) -> dict[str, Any]:
    """ncu SpeedOfLight on the dominant op's longest kernel: NCU_LAUNCHES launches of its base name after the
    first, the longest of them (a base name such as 'elementwise_kernel' names many kernels): SM and memory
    throughput, class."""
    ncu = shutil.which("ncu")
    kernel = (entry.get("dominant") or {}).get("kernel") or ""
    if ncu is None:
        return {"skipped": "not measured: no ncu on PATH"}
    if not options.device.startswith("cuda"):
        return {"skipped": "not measured: ncu profiles CUDA kernels"}
    if not kernel:
        return {"skipped": "not measured: the dominant op has no kernel name"}
    base = kernel_base_name(kernel)
    script = options.work / f"ncu-{entry['id']}.py"
    script.write_text(
        NCU_RUNNER.format(
            benchmarks=str(ROOT / "benchmarks"),
            root=str(ROOT),
            problem=entry["id"],
            device=options.device,
            quick=options.quick,
        )
    )
    import re

    cmd = [ncu, "--clock-control", "none", "--section", "SpeedOfLight", "--csv", "-k", f"regex:^{re.escape(base)}$"]
    cmd += ["--launch-skip", "1", "--launch-count", str(NCU_LAUNCHES), sys.executable, str(script)]
    timeout = max(1.0, min(options.ncu_timeout_s, options.deadline - time.monotonic()))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"kernel": base, "error": f"ncu ran past {timeout:.0f} s"}
    finally:
        script.unlink(missing_ok=True)
    launches = parse_sol_launches(done.stdout)
    if not launches:
        return {"kernel": base, "error": (done.stderr.strip().splitlines() or ["no metrics"])[-1][:200]}
    # NB: a base name ('elementwise_kernel') is shared by many kernels: the longest launch is the dominant kernel's
    values = max(launches, key=lambda v: v.get("Duration", 0.0))
    duration = values.pop("Duration", None)
    return {
        "kernel": base,
        "sol": values,
        "class": sol_class(values),
        "launches": len(launches),
        "duration_s": duration,
    }


def class_facts(entry: dict[str, Any]) -> dict[str, Any]:
    """class_ours (roofline.findings.bounds.hardware_class of the dominant op's limiter and kernel) and
    class_agrees (against the stored ncu class; None without one): pure, so a rescore needs no GPU."""
    ncu_class = (entry.get("ncu") or {}).get("class")
    dominant = entry.get("dominant") or {}
    ours = ours_class(dominant.get("limiter"), dominant.get("kernel") or "")
    return {"class_ours": ours, "class_agrees": agrees(ncu_class, ours) if ncu_class and ours else None}


def add_ncu(entry: dict[str, Any], options: Options) -> None:
    entry["ncu"] = run_ncu(entry, options)
    entry.update(class_facts(entry))


def rescore(path: Path) -> dict[str, Any]:
    """The document at ``path`` scored again by this checkout (hits, harmful, the bound classes from the stored
    timings, findings and ncu results), written back: the scoring's own changes, no GPU."""
    doc = json.loads(path.read_text())
    entries = [{**e, **score(e), **class_facts(e)} if not e.get("error") else e for e in doc.get("problems", [])]
    meta = {k: v for k, v in doc.items() if k not in ("schema", "summary", "problems")}
    out = document(entries, meta)
    write_atomically(path, json.dumps(out, indent=1) + "\n")
    return out


# ------------------------------------------------------------------------------------------------ output


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _hit(value: bool | None) -> str:
    return "-" if value is None else ("hit" if value else "miss")


def table(entries: Sequence[dict[str, Any]]) -> str:
    """One line a problem: the best technique, the first TOP findings' techniques, hit (by parts) before and
    after --verify, and the harmful techniques before and after (a demoted finding's technique is not advice)."""
    head = (
        f"{'problem':36} {'best':22} {'speedup':>8}  {'top-3 findings: technique':56} {'hit':5} {'hit*':5} "
        "harmful (* after --verify)"
    )
    lines = [head, "-" * len(head)]
    for e in entries:
        if e.get("error"):
            lines.append(f"{e['id']:36} error: {e['error'][:100]}")
            continue
        top = ", ".join(f"{f['rule']}:{f['technique'] or '-'}" for f in e.get("top") or []) or "(no finding)"
        harmful = ",".join(e.get("harmful") or []) or "-"
        after = ",".join(e.get("harmful_after_verify") or []) or "-"
        lines.append(
            f"{e['id']:36} {e.get('best') or '-':22} {_fmt(e.get('best_speedup')):>8}  {top[:56]:56} "
            f"{_hit(e.get('hit')):5} {_hit(e.get('hit_after_verify')):5} {harmful} / *{after}"
        )
    return "\n".join(lines)


def _rate(n: int, of: int) -> str:
    return f"{n}/{of}" + (f" ({n / of:.0%})" if of else "")


def totals_text(summary: dict[str, Any]) -> str:
    agreement = summary["class_agreement"]
    targets = summary["best_at_least_hit_gain"]
    return (
        f"problems {summary['problems']} (failed {summary['failed']}, measured {summary['measured']}); "
        f"hit rate {_rate(summary['hits'], targets)} (best technique >= {HIT_GAIN}x named in the top {TOP}, "
        f"by parts; exactly {summary['hits_exact']}), after --verify {_rate(summary['hits_after_verify'], targets)}; "
        f"harmful advice {summary['harmful_advice']} in {summary['harmful_problems']} problems (< {HARMFUL}x), "
        f"after --verify {summary['harmful_advice_after_verify']} in {summary['harmful_problems_after_verify']}; "
        f"bound class agrees with ncu {summary['class_agrees']}/{summary['class_measured']}"
        f"{'' if agreement is None else f' ({agreement:.0%})'}"
    )


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def document(entries: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    return {"schema": SCHEMA, **meta, "summary": summarise(entries), "problems": entries}


# ------------------------------------------------------------------------------------------------ main


def select(problems: list[Problem], filters: str, limit: int | None) -> list[Problem]:
    words = [w for w in filters.split(",") if w]
    chosen = [p for p in problems if not words or any(w in p.id for w in words)]
    return chosen[:limit] if limit is not None else chosen


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="the results JSON (written after every problem)")
    parser.add_argument("--device", default="cuda", help="cuda | cuda:N | cpu (default cuda)")
    parser.add_argument("--quick", action="store_true", help="the small CPU shapes (fp32); implied by --device cpu")
    parser.add_argument("--filter", default="", help="comma list: problems whose id contains any of these")
    parser.add_argument("--limit", type=int, default=None, help="at most this many problems (after --filter)")
    parser.add_argument("--no-models", action="store_true", help="the generated problems only")
    parser.add_argument("--resume", action="store_true", help="keep the problems --out holds already")
    parser.add_argument("--ncu", action="store_true", help="ncu SpeedOfLight on each problem's dominant kernel")
    parser.add_argument(
        "--rediagnose",
        default="",
        metavar="TAG",
        help="with --resume: diagnose the kept problems again (this checkout's rules), their timings kept; the "
        "problems already rediagnosed under TAG are skipped (a pass cut by --time-limit goes on)",
    )
    parser.add_argument(
        "--ncu-redo",
        default="",
        metavar="TAG",
        help="with --ncu: measure again where ncu was measured before (those already redone under TAG skipped)",
    )
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="score --out again with this checkout (hits, harmful, bound classes; no timing, no GPU) and stop",
    )
    parser.add_argument("--time-limit", type=float, default=470.0, help="seconds for the whole run (default 470)")
    parser.add_argument("--problem-budget", type=float, default=40.0, help="seconds per problem's techniques")
    parser.add_argument("--technique-timeout", type=float, default=60.0, help="seconds per technique at most")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--round-ms", type=float, default=20.0)
    parser.add_argument("--roofs", default="auto", help="auto | spec | measured (roofline diagnose --roofs)")
    parser.add_argument("--json", action="store_true", help="print the JSON document instead of the table")
    parser.add_argument("--list", action="store_true", help="list the selected problems and stop")
    parser.add_argument(
        "--precompile",
        type=int,
        default=0,
        help="N processes compile every problem's techniques first (warm inductor caches; 0: none)",
    )
    parser.add_argument("--precompile-limit", type=float, default=150.0, help="seconds for --precompile at most")
    parser.add_argument("--ids", default="", help=argparse.SUPPRESS)  # exact ids (precompile workers)
    parser.add_argument("--warm-only", action="store_true", help=argparse.SUPPRESS)  # a precompile worker
    args = parser.parse_args(argv)
    if args.out is None and not args.list:
        parser.error("--out is required (the results JSON)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    quick = args.quick or not args.device.startswith("cuda")
    problems = select(corpus(models=not args.no_models), args.filter, args.limit)
    if args.ids:
        wanted = set(args.ids.split(","))
        problems = [p for p in problems if p.id in wanted]
    if args.list:
        print("\n".join(f"{p.id:40} {p.kind:7} {p.dtype(args.device)}" for p in problems))
        return 0
    if args.rescore:
        if not args.out.exists():
            print(f"Error: {args.out} does not exist: --rescore scores a results document again", file=sys.stderr)
            return 2
        doc = rescore(args.out)
        print(json.dumps(doc, indent=1) if args.json else table(doc["problems"]) + "\n" + totals_text(doc["summary"]))
        return 0

    def tell(line: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {line}", file=sys.stderr, flush=True)

    options = Options(
        device=args.device,
        quick=quick,
        rounds=args.rounds,
        round_s=args.round_ms / 1e3,
        problem_budget_s=args.problem_budget,
        technique_timeout_s=args.technique_timeout,
        deadline=started + args.time_limit,
        roofs=args.roofs,
        ncu=args.ncu,
        work=args.out.parent if args.out is not None else Path("."),
    )
    if args.warm_only:
        warm_caches(problems, options, tell)
        return 0
    kept: dict[str, dict[str, Any]] = {}
    if args.resume and args.out.exists():
        kept = {e["id"]: e for e in json.loads(args.out.read_text()).get("problems", []) if not e.get("stopped")}
    todo = [p for p in problems if p.id not in kept]
    # NB: the kept problems --filter/--limit did not select stay in the document as they were
    chosen = {p.id for p in problems}
    others = [e for key, e in kept.items() if key not in chosen]
    if args.precompile > 0 and todo:
        limit = min(args.precompile_limit, options.deadline - time.monotonic())
        precompile(todo, args.precompile, limit, args.device, quick, tell)
    import torch

    meta: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/advice_oracle.py", *(sys.argv[1:] if argv is None else argv)]),
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "quick": quick,
        "thresholds": {"hit_gain": HIT_GAIN, "harmful": HARMFUL, "top": TOP},
        "corpus": len(problems),
        "complete": False,
        "stopped": "",
    }
    entries: list[dict[str, Any]] = []
    for i, problem in enumerate(problems, 1):
        if time.monotonic() >= options.deadline:
            meta["stopped"] = f"time limit ({args.time_limit:.0f} s) reached before {problem.id}: --resume goes on"
            tell(meta["stopped"])
            # NB: the problems a --resume run kept and did not reach stay in the document as they were
            entries += [kept[p.id] for p in problems[i - 1 :] if p.id in kept]
            break
        entry = kept.get(problem.id)
        if (
            entry is not None
            and args.rediagnose
            and not entry.get("error")
            and entry.get("rediagnosed") != args.rediagnose
        ):
            tell(f"({i}/{len(problems)}) {problem.id}: diagnosing again")
            entry = rediagnose(entry, problem, options, args.rediagnose)
        if entry is None:
            tell(f"({i}/{len(problems)}) {problem.id}")
            try:
                entry = run_problem(problem, options, tell)
            except Exception as exc:  # anything else: this problem's error, never the end of the run
                entry = {"id": problem.id, "family": problem.family, "kind": problem.kind, "error": repr(exc)[:300]}
            if any("time limit" in str(t.get("note", "")) for t in entry.get("techniques", {}).values()) or (
                "time limit" in str(entry.get("error", ""))
            ):
                entry["stopped"] = True  # cut by the limit: --resume measures it again
        redo = args.ncu_redo and (entry.get("ncu") or {}).get("redone") != args.ncu_redo
        if args.ncu and not entry.get("error") and ("ncu" not in entry or redo) and time.monotonic() < options.deadline:
            tell(f"{problem.id}: ncu")
            add_ncu(entry, options)
            if args.ncu_redo:
                entry["ncu"]["redone"] = args.ncu_redo
        entries.append(entry)
        if not args.json:
            print(table([entry]).splitlines()[-1], flush=True)
        meta["elapsed_s"] = round(time.monotonic() - started, 1)
        write_atomically(args.out, json.dumps(document(entries + others, meta), indent=1) + "\n")
    else:
        meta["complete"] = True
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    doc = document(entries + others, meta)
    write_atomically(args.out, json.dumps(doc, indent=1) + "\n")
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(totals_text(doc["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
