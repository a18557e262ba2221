"""The lead's side of the GPU worker's line protocol (CPU only): a worker whose replies are out of step is
never handed the next candidate."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ptxrag.sandbox import SandboxConfig
from ptxrag.sandbox.worker_client import WorkerDied, WorkerProcess


def _fake_worker(tmp_path: Path, after_hello: str) -> SandboxConfig:
    """A stand-in for the worker's interpreter: says hello, then answers the first command with
    ``after_hello`` (argv: worker.py, the command fd, the result fd)."""
    fake = tmp_path / "fake-python"
    fake.write_text(
        "#!/bin/bash\n"
        "echo '{\"ok\": true}' >&$3\n"
        "read -r line <&$2\n"
        f"printf '%s\\n' '{after_hello}' >&$3\n"
        "sleep 30\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return SandboxConfig(runner_python=str(fake))


@pytest.mark.parametrize(
    ("reply", "says"),
    [("printed by a candidate", "unreadable reply"), ("[1, 2]", "not an object")],
)
def test_an_unreadable_reply_retires_the_worker(tmp_path, reply, says):
    w = WorkerProcess(_fake_worker(tmp_path, reply))
    try:
        if w.start_error:
            pytest.skip(f"the candidate process's native helpers cannot be built here: {w.start_error}")
        with pytest.raises(WorkerDied, match=says):
            w.ask({"cmd": "reset"}, 60.0, "ending the job")
        assert not w.reusable
        assert not w.end_job()  # the sandbox closes it instead of keeping it warm
    finally:
        w.close()


def test_a_worker_that_answers_in_step_stays_reusable(tmp_path):
    w = WorkerProcess(_fake_worker(tmp_path, '{"ok": true}'))
    try:
        if w.start_error:
            pytest.skip(f"the candidate process's native helpers cannot be built here: {w.start_error}")
        assert w.ask({"cmd": "reset"}, 60.0, "ending the job") == {"ok": True}
        assert w.reusable
    finally:
        w.close()
