"""Where ptxrag keeps its data: ``PTXRAG_HOME``, or a per-user default."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The data directory (indexes, compile cache, runs). Created on first use."""
    env = os.environ.get("PTXRAG_HOME")
    if env:
        p = Path(env).expanduser()
    else:
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        p = Path(base) / "ptxrag"
    p.mkdir(parents=True, exist_ok=True)
    return p


def cache_dir(*parts: str) -> Path:
    p = home().joinpath("cache", *parts)
    p.mkdir(parents=True, exist_ok=True)
    return p
