"""A missing API key is said before the agent, the bench and the model SDKs are imported (issue 22: the message
took seconds behind those imports), with the same words the model factory uses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ptxrag.base.model_keys import missing_key, split_openai

HEAVY = (
    "langgraph",
    "langchain_core",
    "langchain_anthropic",
    "langchain_openai",
    "anthropic",
    "openai",
    "torch",
)

PROBE = """
import sys
from typer.testing import CliRunner
from ptxrag.cli import app
r = CliRunner().invoke(app, sys.argv[1:])
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("EXIT", r.exit_code)
print("HEAVY", ",".join(heavy))
print(r.output)
"""


def _cli(args: list[str], env_drop: tuple[str, ...]) -> str:
    import os

    env = {k: v for k, v in os.environ.items() if k not in env_drop}
    code = PROBE.format(heavy=HEAVY)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300
    ).stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "warp-reduce-redux", "--model", "anthropic:claude-x"], "ANTHROPIC_API_KEY is not set"),
        (
            [
                "bench",
                "--tasks",
                "warp-reduce-redux",
                "--models",
                "openai:gpt-x,anthropic:claude-x",
                "--out",
                "{tmp}",
            ],
            "OPENAI_API_KEY is not set",
        ),
    ],
)
def test_a_missing_key_fails_before_anything_heavy_is_imported(args: list[str], words: str, tmp_path) -> None:
    out = _cli([a.format(tmp=tmp_path / "study") for a in args], ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"))
    assert "EXIT 2" in out, out
    assert words in out, out
    assert "HEAVY \n" in out, out  # none of the agent's or the SDKs' modules was imported
    assert not (tmp_path / "study").exists()  # and nothing was written


def test_the_factory_and_the_early_check_agree() -> None:
    import os

    saved = {k: os.environ.pop(k, None) for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    try:
        from ptxrag.agent_graph import ModelConfigError, make_chat_model

        for spec in ("anthropic:claude-x", "openai:gpt-x"):
            problem = missing_key(spec)
            assert problem
            with pytest.raises(ModelConfigError) as e:
                make_chat_model(spec)
            assert str(e.value) == problem
        assert missing_key("openai:llama@http://127.0.0.1:8000/v1") is None  # a local server needs no key
        assert missing_key("replay:demo.toml") is None
    finally:
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v


def test_split_openai() -> None:
    assert split_openai("m@http://h:1/v1") == ("m", "http://h:1/v1")
    assert split_openai("m@https://h/v1") == ("m", "https://h/v1")
    assert split_openai("gpt-5") == ("gpt-5", None)
