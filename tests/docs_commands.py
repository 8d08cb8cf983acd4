"""The shell commands of README.md and docs/*.md, as a reader would copy them (tests/test_docs_commands.py runs
them on the CPU).

A command is a line of a fenced block tagged ``bash``, ``console``, ``sh`` or ``shell`` that starts with
``roofline ``, ``python -m roofline `` or ``$ `` before either (a ``\\`` at the end of a line continues it; ``;``
separates two commands), or a table cell that is a whole command: a code span starting with ``roofline `` that
has an option and no placeholder in capitals (``REPORT.json``).

Markers (docs/README.md "Commands in the docs"):

- ``# GPU-only`` at the start of the line's comment, ``gpu-only`` after the block's language
  (```` ```bash gpu-only ````), or ``GPU-only`` in a table row's text outside its commands: the command needs a
  CUDA GPU; the test skips it without one.
- ``# slow`` at the start of the comment, or ``slow`` after the language: it takes long on a CPU (more than a few
  seconds); the test skips it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELLS = frozenset({"bash", "console", "sh", "shell"})
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_START = re.compile(r"^(?:\$\s+)?(roofline\s|python\s+-m\s+roofline\s)")
_MARK = re.compile(r"#\s*(GPU-only|slow)\b")
_CELL = re.compile(r"`(roofline [^`]*)`")
_PLACEHOLDER = re.compile(r"\b[A-Z]{2,}[A-Z_]*\b")


@dataclass(frozen=True)
class DocCommand:
    path: str  # relative to the repository: 'docs/bench.md'
    line: int
    text: str  # the shell line as written, continuations joined
    gpu: bool
    slow: bool

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    def argv_lists(self) -> list[tuple[list[str], str | None, bool]]:
        """Each command of the line: (roofline's arguments, the file its standard output is redirected to or None,
        whether it appends). ``python -m roofline ARGS`` is ``roofline ARGS``."""
        lexer = shlex.shlex(self.text, posix=True, punctuation_chars=";>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        commands: list[list[str]] = [[]]
        for token in lexer:
            if token == ";":
                commands.append([])
            else:
                commands[-1].append(token)
        out = []
        for words in commands:
            if not words:
                continue
            if words[0] == "$":
                words = words[1:]
            target, append = None, False
            for redirect in (">", ">>"):
                if redirect in words:
                    at = words.index(redirect)
                    target, append, words = words[at + 1], redirect == ">>", words[:at]
            if words[:3] == ["python", "-m", "roofline"]:
                words = ["roofline", *words[3:]]
            assert words[0] == "roofline", f"{self.id}: not a roofline command: {self.text}"
            out.append((words[1:], target, append))
        return out


def _files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _marks(comment: str, words: set[str]) -> tuple[bool, bool]:
    found = {m.group(1) for m in _MARK.finditer(comment)}
    return "GPU-only" in found or "gpu-only" in words, "slow" in found or "slow" in words


def commands(files: list[Path] | None = None) -> list[DocCommand]:
    """Every command of the docs, in file and line order."""
    found: list[DocCommand] = []
    for file in files or _files():
        rel = file.relative_to(ROOT).as_posix()
        lines = file.read_text(encoding="utf-8").splitlines()
        fence: str | None = None
        words: set[str] = set()
        shell = False
        index = 0
        while index < len(lines):
            line = lines[index]
            number = index + 1
            index += 1
            match = _FENCE.match(line)
            if match and (fence is None or (match.group(1).startswith(fence[0]) and not match.group(2).strip())):
                if fence is None:
                    fence = match.group(1)
                    info = match.group(2).split()
                    shell = bool(info) and info[0] in SHELLS
                    words = set(info[1:])
                else:
                    fence, shell, words = None, False, set()
                continue
            if fence is None:
                if line.startswith("|"):
                    gpu = "GPU-only" in _CELL.sub("", line)  # the row's words outside its commands
                    for cell in _CELL.findall(line):
                        if re.search(r"\s-", cell) and not _PLACEHOLDER.search(cell):
                            found.append(DocCommand(rel, number, cell, gpu, False))
                continue
            if not shell or not _START.match(line.strip()):
                continue
            text = line.strip()
            while text.endswith("\\") and index < len(lines):
                text = text[:-1].rstrip() + " " + lines[index].strip()
                index += 1
            gpu, slow = _marks("#" + text.partition("#")[2] if "#" in text else "", words)
            found.append(DocCommand(rel, number, text, gpu, slow))
    return found
