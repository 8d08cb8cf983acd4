"""Where in the user's code an op was called: the file and line the counting pass stores with each op.

An op's source is the innermost Python frame of the user's code on the stack when the op reaches the counting
pass's dispatch mode: frames of torch, of the standard library and of the counting pass itself are looked through;
a frame of any other roofline module ends the walk with no source (the op is roofline's own: the loss run_once
sums, a technique --verify applies). Library code outside torch (transformers, a user's package) is the user's.

Backward ops run inside autograd nodes, called by the engine (no user frame above them on a GPU, the loss's
``backward()`` line on the CPU): an op in backward takes the source of the forward op whose output the node
belongs to (:meth:`Sources.produced`: a forward op's tensor inputs carry the nodes their producers created), ''
where no counted forward op made it (AccumulateGrad). A forward recomputed in backward (activation checkpointing)
runs user code again and is walked as forward.

Cost: one walk per op up to the first user frame; each code object is classified once and each (code, line)
text made once, so the walk is a few dict look-ups per frame (docs/performance.md: the counting pass's cost).
The stored text is ``'/abs/path/model.py:42'``; :func:`roofline.report.rows.source_text` shows it relative to the
working directory.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import CodeType, FrameType
from typing import Any

_SKIP, _STOP, _USER = 0, 1, 2
_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOFLINE = os.path.dirname(_HERE) + os.sep
# the counting pass's own modules: looked through (their frames sit between the op and the user's code)
_COUNTING = tuple(os.path.join(_HERE, name) for name in ("count.py", "source.py"))


def _roots() -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(torch's package, the standard library's folders, site-packages' folders), each ending in a separator."""
    torch = sys.modules.get("torch")
    file = getattr(torch, "__file__", None) if torch is not None else None
    torch_root = os.path.dirname(os.path.abspath(file)) + os.sep if file else "\0"
    paths = sysconfig.get_paths()

    def roots(*keys: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(os.path.abspath(paths[key]) + os.sep for key in keys if paths.get(key)))

    return torch_root, roots("stdlib", "platstdlib"), roots("purelib", "platlib")


class SourceFinder:
    """The innermost frame of the user's code on the stack, as ``'/abs/file.py:LINE'`` ('' none); cached per
    code object and per (code, line)."""

    def __init__(self) -> None:
        self._kinds: dict[CodeType, int] = {}
        self._texts: dict[tuple[CodeType, int], str] = {}
        self._torch, self._stdlib, self._site = _roots()

    def classify(self, filename: str) -> int:
        if filename.startswith("<"):  # '<frozen importlib._bootstrap>' is the library's; '<string>' the user's
            return _SKIP if filename.startswith("<frozen") else _USER
        path = os.path.abspath(filename)
        if path.startswith(_COUNTING):
            return _SKIP
        if path.startswith(_ROOFLINE):
            return _STOP
        if path.startswith(self._torch):
            return _SKIP
        if path.startswith(self._site):  # NB: site-packages may sit inside the standard library's folder
            return _USER
        return _SKIP if path.startswith(self._stdlib) else _USER

    def find(self, frame: FrameType | None = None) -> str:
        frame = frame if frame is not None else sys._getframe(1)
        kinds = self._kinds
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = kinds[code] = self.classify(code.co_filename)
            if kind == _USER:
                key = (code, frame.f_lineno)
                text = self._texts.get(key)
                if text is None:
                    text = self._texts[key] = f"{os.path.abspath(code.co_filename)}:{frame.f_lineno}"
                return text
            if kind == _STOP:
                return ""
            frame = frame.f_back
        return ""


class Sources:
    """The source of every op the counting pass records: the user's frame in forward, the forward op's in
    backward (through the autograd nodes the forward ops' outputs carry)."""

    def __init__(self) -> None:
        self.finder = SourceFinder()
        self._nodes: dict[int, str] = {}  # id(autograd node) -> the source of the forward op that created it
        self._alive: list[Any] = []  # the nodes mapped, kept alive so that their ids stay theirs

    def of(self, node: Any, forward: bool) -> str:
        """The source of the op recorded now: ``node`` the autograd node running it (None: none); ``forward``:
        a module's forward is running (forward, or a forward recomputed in backward)."""
        if node is None or forward:
            return self.finder.find(sys._getframe(2))
        return self._nodes.get(id(node), "")

    def produced(self, inputs: list[Any], producers: tuple[int | None, ...], records: list[Any]) -> None:
        """A forward op's tensor inputs: the node each produced input carries is its producer's (``records``: the
        ops recorded so far, by index; each with its ``source``)."""
        for t, producer in zip(inputs, producers, strict=False):
            if producer is None:
                continue
            node = getattr(t, "grad_fn", None)
            if node is not None and id(node) not in self._nodes:
                self._nodes[id(node)] = records[producer].source
                self._alive.append(node)

    def clear(self) -> None:
        self._nodes.clear()
        self._alive.clear()


__all__ = ["SourceFinder", "Sources"]
