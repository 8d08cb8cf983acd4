"""A Hugging Face model reference -> the ``config.json`` it names, found on this machine, never on the network
(HF_HUB_OFFLINE's rule: what is not here is an error naming how to get it). Read by `roofline analyze
decode|prefill --config REF` and `roofline diagnose --hf REF`.

A reference is, tried in this order:
  1. a local directory holding ``config.json`` (a model saved by ``save_pretrained``, a snapshot you copied);
  2. a ``.json`` file (the config itself);
  3. a hub id (``ORG/NAME``, or a legacy one-part name such as ``gpt2``) in the Hugging Face hub's local cache:
     ``models--ORG--NAME/snapshots/REV/config.json`` under HF_HUB_CACHE (else HUGGINGFACE_HUB_CACHE, else
     HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub), the revision ``refs/main``
     names, else the newest snapshot that has a config.json;
  4. a hub id shipped with roofline (``workloads/hf/ORG/NAME/config.json``, the hub's own files: :func:`shipped_ids`),
     matched without regard to case; ``gpt2`` is the hub's old name of ``openai-community/gpt2``.
Pure: no transformers, no huggingface_hub, no torch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from roofline.errors import WorkloadError
from roofline.resources import data_dir

#: the hub's former names of models that moved under an organisation (it still redirects them)
ALIASES: dict[str, str] = {"gpt2": "openai-community/gpt2"}
#: a hub id: ORG/NAME or a one-part legacy name (letters, digits, '-', '_', '.')
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
CONFIG = "config.json"
FETCH = "fetch its config.json once (`hf download {ref} config.json`) or give a directory holding config.json"


@dataclass(frozen=True)
class HfConfigRef:
    """Where a reference led: ``path`` (the config.json), ``name`` (what reports call the model: the hub id, or
    the reference as given) and ``origin`` (a local directory, a local file, the Hugging Face cache, shipped)."""

    path: Path
    name: str
    origin: str


def shipped_dir() -> Path:
    return data_dir("workloads") / "hf"


def shipped_ids() -> list[str]:
    """The hub ids whose config.json ships with roofline (ORG/NAME)."""
    root = shipped_dir()
    return sorted(p.parent.relative_to(root).as_posix() for p in root.glob(f"*/*/{CONFIG}"))


def hub_cache() -> Path:
    """The Hugging Face hub's cache directory, as huggingface_hub finds it from the environment."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = Path(os.environ["XDG_CACHE_HOME"]).expanduser() if os.environ.get("XDG_CACHE_HOME") else None
    return (cache or Path.home() / ".cache") / "huggingface" / "hub"


def _cached(hub_id: str, cache: Path) -> Path | None:
    """The config.json of ``hub_id`` in the hub cache ``cache``: the snapshot refs/main names, else the newest
    snapshot holding one; None when the cache has none."""
    repo = cache / f"models--{hub_id.replace('/', '--')}"
    snapshots = repo / "snapshots"
    try:
        revision = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        revision = ""
    if revision and (snapshots / revision / CONFIG).is_file():
        return snapshots / revision / CONFIG
    try:
        found = [s / CONFIG for s in snapshots.iterdir() if (s / CONFIG).is_file()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _shipped(hub_id: str) -> tuple[str, Path] | None:
    """(the shipped id as spelled, its config.json) for ``hub_id`` (any case, or a former name)."""
    wanted = ALIASES.get(hub_id.lower(), hub_id).lower()
    for name in shipped_ids():
        if name.lower() == wanted:
            return name, shipped_dir() / name / CONFIG
    return None


def resolve_config(ref: str) -> HfConfigRef:
    """The config.json that ``ref`` names (the module docstring's order). WorkloadError (one line naming the fix)
    for a directory without config.json, a file that is not a .json, a missing .json, or an id found nowhere."""
    text = str(ref).strip()
    path = Path(text).expanduser()
    if not text:
        raise WorkloadError("an empty Hugging Face reference: give ORG/NAME, a model directory or a config.json")
    if path.is_dir():
        if not (path / CONFIG).is_file():
            raise WorkloadError(
                f"{text}: a directory without {CONFIG}: give the directory of a Hugging Face model (where "
                "save_pretrained wrote config.json) or the config file itself"
            )
        return HfConfigRef(path / CONFIG, text.rstrip("/\\") or text, "a local directory")
    if text.lower().endswith(".json"):
        if not path.is_file():
            raise WorkloadError(f"{text}: no such Hugging Face config file")
        return HfConfigRef(path, text, "a local file")
    if path.exists():
        raise WorkloadError(f"{text}: a Hugging Face config.json (a .json file), a model directory or a hub id")
    if not HUB_ID.match(text):
        raise WorkloadError(f"{text}: no such directory or file, and not a Hugging Face model id (ORG/NAME)")
    cache = hub_cache()
    for hub_id in dict.fromkeys((text, ALIASES.get(text.lower(), text))):
        cached = _cached(hub_id, cache)
        if cached is not None:
            return HfConfigRef(cached, hub_id, f"the Hugging Face cache ({cache})")
    shipped = _shipped(text)
    if shipped is not None:
        return HfConfigRef(shipped[1], shipped[0], "shipped with roofline")
    raise WorkloadError(
        f"{text}: no config for this Hugging Face id here (not a local directory, not in the hub cache {cache}, "
        f"not one roofline ships: {', '.join(shipped_ids())}); roofline never downloads: {FETCH.format(ref=text)}"
    )


def hub_id_of(path: Path) -> str | None:
    """The hub id of a config.json found in the hub cache's layout (models--ORG--NAME/snapshots/REV/config.json)
    or among the shipped ones; None for any other file."""
    path = Path(path)
    if path.name != CONFIG:
        return None
    parts = path.parts
    if len(parts) >= 4 and parts[-3] == "snapshots" and parts[-4].startswith("models--"):
        return parts[-4].removeprefix("models--").replace("--", "/")
    try:
        relative = path.resolve().parent.relative_to(shipped_dir().resolve()).as_posix()
    except (ValueError, OSError, FileNotFoundError):
        return None
    return relative if relative.count("/") == 1 else None


__all__ = ["ALIASES", "HfConfigRef", "hub_cache", "hub_id_of", "resolve_config", "shipped_dir", "shipped_ids"]
