"""`python -m roofline.findings.rules`: print docs/diagnose.md's rule tables from the registry."""

from __future__ import annotations

from roofline.findings.registry import rules_table, verify_table


def main() -> None:
    print(rules_table(("model", "coverage", "collectives")))
    print()
    print(verify_table())


if __name__ == "__main__":
    main()
