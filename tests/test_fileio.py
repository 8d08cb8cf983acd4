"""Atomic writes: the whole new content or the old file, and the mode any new file gets."""

from __future__ import annotations

import os
import stat

import pytest

from roofline import fileio


def test_text_is_written_whole_with_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        fileio.atomic_write_text(tmp_path / "sub" / "r.json", "héllo\n")
    finally:
        os.umask(old)
    path = tmp_path / "sub" / "r.json"
    assert path.read_text(encoding="utf-8") == "héllo\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's private 0600
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("old")

    def broken(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(fileio.os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        fileio.atomic_write_bytes(path, b"new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
