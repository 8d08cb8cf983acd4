"""The escapers of text that reaches markup: GitHub-flavoured Markdown and XML (JUnit, HTML).

Report text is not ours: labels, module names, device names, notes and commands come from the user's model,
spec sheets and report files, and end up in pull-request comments and CI summaries. Every renderer that
writes Markdown or XML passes such text through one of these.
"""

from __future__ import annotations

import html
import re
from typing import Any

from roofline.report.sequences import strip_sequences

# XML 1.0 allows tab, newline, carriage return and U+0020 up, less the surrogates and U+FFFE/U+FFFF.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Terminals and charts: also no escape sequences (ESC, the C1 controls, DEL); tab and newline stay.
_NOT_PLAIN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_MARKDOWN = str.maketrans({"\\": "\\\\", "`": "\\`", "|": "\\|", "&": "&amp;", "<": "&lt;", "\r": " ", "\n": " "})
_BACKTICKS = re.compile("`+")


def markdown_text(text: Any) -> str:
    """``text`` as literal inline Markdown, safe in a table cell: no raw HTML or autolink (``<`` and ``&``
    become entities), no code span (backticks escaped), no cell break (``|`` escaped), no link or image (the
    ``(`` after a ``]`` escaped: ``[l](javascript:...)`` stays text, ``[16x128]`` as it is), one line, and none
    of the characters :func:`xml_text` drops (terminal control sequences, lone surrogates that UTF-8 cannot
    write).

    Emphasis characters are left alone (``snake_case_names`` stay readable in the source; a stray ``*`` can
    only style text, never inject markup)."""
    text = strip_sequences(text).replace("\r\n", " ").translate(_MARKDOWN)
    return xml_text(text.replace("](", "]\\("))


def markdown_code(text: Any) -> str:
    """``text`` as one inline code span: fenced by more backticks than it holds, on one line.

    Inside a code span nothing is markup; not for table cells (GitHub splits cells on ``|`` even there)."""
    body = xml_text(" ".join(str(text).splitlines()))
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def xml_text(text: Any) -> str:
    """``text`` without the characters XML 1.0 cannot hold (control characters, lone surrogates): for values
    handed to ElementTree, which escapes ``& < > "`` itself but writes these as they are (a broken document).
    Terminal control sequences (:func:`strip_sequences`) go whole."""
    return _XML_ILLEGAL.sub("", strip_sequences(text))


def plain_text(text: Any) -> str:
    """``text`` without control characters (tab and newline kept), escape sequences' ESC, lone surrogates and
    U+FFFE/U+FFFF: for a terminal (a module named ``\x1b[2J`` must not clear it) and for chart labels. A whole
    control sequence goes (:func:`strip_sequences`: an OSC title or link leaves no ``]0;...`` behind)."""
    return _NOT_PLAIN.sub("", strip_sequences(text))


def console_text(text: Any) -> str:
    """``text`` for rich console markup: :func:`plain_text`, then rich's markup escaped (``[bold]`` stays text).
    Every console renderer uses this (as ``escape``) for text that is not ours."""
    from rich.markup import escape

    return escape(plain_text(text))


def xml_escape(text: Any) -> str:
    """``text`` escaped for XML or HTML written by hand (element text and quoted attribute values)."""
    return html.escape(xml_text(text), quote=True)


__all__ = [
    "console_text",
    "markdown_code",
    "markdown_text",
    "plain_text",
    "strip_sequences",
    "xml_escape",
    "xml_text",
]
