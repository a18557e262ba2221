"""The embedding model's own "Loading weights" bar (transformers' tqdm) never reaches the CLI's output:
the commands that may load the model silence Hugging Face's progress bars before anything imports it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptxrag.cli import agent_cmd, app, bench_cmd

ROOT = Path(__file__).resolve().parents[1]

# draw the bar that transformers' weight loader draws, through the same tqdm wrapper
DRAW = """
{preamble}
from transformers.utils.logging import tqdm
for _ in tqdm(range(3), desc="Loading weights"):
    pass
"""


def _stderr(preamble: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    p = subprocess.run(
        [sys.executable, "-c", DRAW.format(preamble=preamble)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return p.stderr


def test_quiet_model_loading_silences_the_loading_weights_bar():
    assert "Loading weights" in _stderr("")  # control: the bar is drawn by default
    assert _stderr("from ptxrag.cli.common import quiet_model_loading; quiet_model_loading()") == ""


class Called(Exception):
    pass


def _stop() -> None:
    raise Called


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        (agent_cmd, ["demo"]),
        (agent_cmd, ["run", "warp-reduce-redux", "--model", "replay:x.toml"]),
        (bench_cmd, ["bench", "--out", "o", "--tasks", "warp-reduce-redux", "--models", "replay:x"]),
    ],
    ids=lambda x: x[0] if isinstance(x, list) else "",
)
def test_commands_that_may_load_the_model_silence_it_first(module, argv, monkeypatch):
    monkeypatch.setattr(module, "quiet_model_loading", _stop)
    res = CliRunner().invoke(app, argv)
    assert isinstance(res.exception, Called), res.output
