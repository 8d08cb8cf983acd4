"""What torch.compile did while a compiled model ran: graphs compiled, graph breaks with their reasons,
recompilations with the guard that failed. Read from dynamo's own counters (``torch._dynamo.utils.counters``,
``guard_failures``), which accumulate over the process: :func:`snapshot` before the run, :func:`facts_since` after.

Also :func:`is_compile_failure`: whether an exception came from torch.compile (dynamo, AOTAutograd, inductor) rather
than from the model's own code. torch is imported inside the functions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from roofline.errors import exception_chain

REASON_CHARS = 200  # a graph break's or a recompilation's reason, cut to this many characters


@dataclass(frozen=True)
class Snapshot:
    graphs: int = 0
    breaks: Counter[str] = field(default_factory=Counter)
    guard_failures: int = 0


@dataclass(frozen=True)
class CompileFacts:
    graphs: int  # graphs compiled during the run
    graph_breaks: list[tuple[str, int]]  # (reason, times seen), most frequent first
    recompiles: list[str]  # each recompilation's failed guard


def _utils() -> Any:
    try:
        import torch._dynamo.utils as utils
    except Exception:  # NB: a torch without dynamo: nothing to read
        return None
    return utils


def _failures(utils: Any) -> list[str]:
    table = getattr(utils, "guard_failures", None) or {}
    return [str(reason) for reasons in list(table.values()) for reason in reasons]


def snapshot() -> Snapshot:
    """dynamo's counters now."""
    utils = _utils()
    if utils is None:
        return Snapshot()
    counters = utils.counters
    return Snapshot(
        graphs=int(counters["stats"].get("unique_graphs", 0)),
        breaks=Counter(dict(counters["graph_break"])),
        guard_failures=len(_failures(utils)),
    )


def reason_line(text: str) -> str:
    """A dynamo reason in one line: its first line, with the 'Explanation:' line after it when there is one."""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    if not lines:
        return "(no reason given)"
    head = lines[0]
    explanation = next((line for line in lines[1:] if line.startswith("Explanation:")), "")
    if explanation:
        head = f"{head}: {explanation.removeprefix('Explanation:').strip()}"
    return head if len(head) <= REASON_CHARS else head[: REASON_CHARS - 3] + "..."


def facts_since(before: Snapshot) -> CompileFacts:
    """What dynamo compiled, broke and recompiled since ``before``."""
    utils = _utils()
    if utils is None:
        return CompileFacts(0, [], [])
    now = snapshot()
    breaks: Counter[str] = Counter()
    for reason, count in (now.breaks - before.breaks).items():
        breaks[reason_line(reason)] += count
    failures = _failures(utils)[before.guard_failures :]
    return CompileFacts(
        graphs=max(now.graphs - before.graphs, 0),
        graph_breaks=sorted(breaks.items(), key=lambda item: (-item[1], item[0])),
        recompiles=[reason_line(reason) for reason in failures],
    )


#: where torch.compile's own exceptions live
COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch._functorch")
COMPILER_ERRORS = ("BackendCompilerFailed", "InductorError", "Unsupported", "TorchRuntimeError")


def _from_compiler(exc: BaseException) -> bool:
    return (type(exc).__module__ or "").startswith(COMPILER_MODULES)


def is_compile_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it wraps) was raised by torch.compile's machinery, not the model's code."""
    return any(_from_compiler(e) or type(e).__name__ in COMPILER_ERRORS for e in exception_chain(exc))


def failure_line(exc: BaseException) -> str:
    """A torch.compile failure in one line: the innermost compile error's type and first line."""
    chosen = next((e for e in reversed(exception_chain(exc)) if _from_compiler(e)), exc)
    text = str(chosen).strip().splitlines()
    first = text[0][:REASON_CHARS] if text else ""
    return f"{type(chosen).__name__}" + (f": {first}" if first else "")


__all__ = ["CompileFacts", "Snapshot", "facts_since", "failure_line", "is_compile_failure", "reason_line", "snapshot"]
