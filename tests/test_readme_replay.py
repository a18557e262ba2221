"""The README's offline-study commands, as a new user copies them: the replay files it names exist, the
bench it shows accepts them, and a task without its replay file is refused before anything runs."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptxrag.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _offline_block() -> list[str]:
    """The shell lines of the README's code block right after 'Offline, `--models replay:DIR`'."""
    text = (ROOT / "README.md").read_text()
    after = text[text.index("Offline, `--models replay:DIR`") :]
    block = re.search(r"```bash\n(.*?)```", after, re.S)
    assert block, "the README's offline bench example is gone"
    return block.group(1).replace("\\\n", " ").strip().splitlines()


def test_the_readmes_replay_files_exist_and_its_bench_accepts_them(tmp_path, monkeypatch):
    setup, bench = _offline_block()
    assert "ptxrag/agent_graph/demo/warp-reduce-redux.toml" in (ROOT / "README.md").read_text()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "replays").mkdir()
    cp = shlex.split(setup.split("&&", 1)[1])
    assert cp[0] == "cp" and cp[-1] == "replays/"
    for name in cp[1:-1]:
        shutil.copy(ROOT / name, tmp_path / "replays")  # fails if the README names a file that is not there
    argv = shlex.split(bench)
    assert argv[:2] == ["ptxrag", "bench"]
    argv[argv.index("--out") + 1] = str(tmp_path / "study")
    res = runner.invoke(app, [*argv[1:], "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "dry run: 8 episode(s)" in res.output
    (tmp_path / "replays" / "warp-elect-sum.toml").unlink()
    res = runner.invoke(app, [*argv[1:], "--dry-run"])
    assert res.exit_code != 0 and "warp-elect-sum.toml does not exist" in res.output.replace("\n", "")


@pytest.mark.parametrize("path", ["ptxrag/agent_graph/demo/warp-reduce-redux.toml"])
def test_the_demo_replay_file_the_readme_shows_is_the_demos(path):
    readme = (ROOT / "README.md").read_text()
    assert f"({path})" in readme and (ROOT / path).is_file()
