"""Replay folders of the recorded offline study: model A replays the bundled trajectories (the demo's
warp-reduce-redux file and the bench tests' warp-elect-sum file); model B is made from the same replies,
reordered so it behaves differently: it skips the compile error on warp-reduce-redux (in SASS from round 2)
and never finds elect.sync on warp-elect-sum (its first, elect-less reply every round).

Usage: python make_replays.py OUT_DIR   (writes OUT_DIR/a/*.toml and OUT_DIR/b/*.toml)
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SOURCES = {
    "warp-reduce-redux": ROOT / "ptxrag" / "agent_graph" / "demo" / "warp-reduce-redux.toml",
    "warp-elect-sum": ROOT / "tests" / "fixtures" / "bench" / "warp-elect-sum.toml",
}
#: model B's replies, as indices into the source file's replies, one per round
B_ORDER = {"warp-reduce-redux": [1, 2], "warp-elect-sum": [0, 0, 0, 0]}


def write_replay(path: Path, task: str, description: str, texts: list[str]) -> None:
    parts = [f'task = "{task}"', f'description = "{description}"', ""]
    for t in texts:
        assert "'''" not in t
        parts += ["[[reply]]", f"text = '''\n{t.strip()}\n'''", ""]
    path.write_text("\n".join(parts))


def main(out: Path) -> None:
    (out / "a").mkdir(parents=True, exist_ok=True)
    (out / "b").mkdir(parents=True, exist_ok=True)
    for task, src in SOURCES.items():
        shutil.copy(src, out / "a" / f"{task}.toml")
        replies = [r["text"] for r in tomllib.loads(src.read_text())["reply"]]
        write_replay(
            out / "b" / f"{task}.toml", task, f"model B of the offline study: replies {B_ORDER[task]} of {src.name}",
            [replies[i] for i in B_ORDER[task]],
        )  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
