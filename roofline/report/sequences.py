"""Terminal control sequences in text that is not ours (labels, module names, messages from the user's code and
files): found whole, so that stripping one leaves nothing of it behind (no ``]0;title`` after its ESC goes).

One definition for every writer: the renderers' escapers (roofline.render.escape) and the CSV export."""

from __future__ import annotations

import re
from typing import Any

# ECMA-48, 7-bit (ESC ...) and 8-bit (C1) forms: CSI (ESC [ or U+009B, parameters, intermediates, a final byte),
# OSC (ESC ] or U+009D, up to BEL or ST: terminal titles, OSC 8 hyperlinks, OSC 52 clipboard writes), DCS, SOS, PM
# and APC (ESC P X ^ _ or U+0090 U+0098 U+009E U+009F, up to ST); an unterminated string sequence runs to the end
# of the text. Then the other escapes (ESC, intermediates, one final byte).
SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|$)"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)


def strip_sequences(text: Any) -> str:
    """``text`` without terminal control sequences, whole: CSI (colours, cursor moves, ``\\x1b[2J``), OSC (window
    titles, OSC 8 hyperlinks, OSC 52 clipboard writes), DCS, SOS, PM and APC strings, in their 7-bit (ESC) and 8-bit
    (C1) forms, and other ESC escapes. Other characters stay."""
    text = str(text)
    if text.isascii() and "\x1b" not in text:  # nearly every label: no regex
        return text
    return SEQUENCES.sub("", text)


__all__ = ["SEQUENCES", "strip_sequences"]
