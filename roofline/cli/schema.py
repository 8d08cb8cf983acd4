"""`roofline schema`: print the report's JSON Schema, the file shipped with the package."""

from __future__ import annotations

from roofline.cli.common import print_text


def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of the report that analyze, bench and diagnose write.

    The same file ships inside the package (roofline/report/report.schema.json); validate a report against it
    without roofline, e.g. `roofline schema > report.schema.json` then any JSON Schema validator.
    """
    from roofline.report.jsonschema import shipped

    print_text(shipped())
