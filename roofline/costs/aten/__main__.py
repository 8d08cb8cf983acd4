"""``python -m roofline.costs.aten``: print docs/op-costs.md's covered-ops section, generated from the registry;
``--write PATH`` replaces that section of PATH (between its markers) in place."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from roofline.costs.aten.table import covered_table, with_table
from roofline.fileio import atomic_write_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m roofline.costs.aten", description=__doc__.split("\n")[0])
    parser.add_argument("--write", metavar="PATH", help="replace the generated section of this file (docs/op-costs.md)")
    args = parser.parse_args(argv)
    if not args.write:
        sys.stdout.write(covered_table())
        return 0
    path = Path(args.write)
    atomic_write_text(path, with_table(path.read_text(encoding="utf-8")))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
