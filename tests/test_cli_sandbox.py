"""The CLI through typer's runner."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ptxrag.cli import app
from ptxrag.tasks import load_task

runner = CliRunner()


def test_sandbox_check_bundled_example_without_gpu(monkeypatch):
    monkeypatch.setenv("PTXRAG_NO_GPU", "1")
    from ptxrag.sandbox import toolchain

    toolchain.detect_gpu.cache_clear()
    res = runner.invoke(app, ["sandbox", "check", "--task", "warp-reduce-redux", "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["static"]["status"] == "passed" and rep["correctness"]["message"] == "skipped: no GPU"
    assert rep["success"] is False


def test_sandbox_check_failure_exit_code_and_table(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXRAG_NO_GPU", "1")
    k = tmp_path / "bad.cu"
    k.write_text(
        '#include "ptxrag_abi.h"\nextern "C" int ptxrag_launch(const ptxrag_args* a) { return oops; }\n'
    )
    res = runner.invoke(app, ["sandbox", "check", str(k), "--task", "warp-reduce-redux"])
    assert res.exit_code == 1
    assert "compile error" in res.output and "oops" in res.output


def test_unknown_task_is_a_clear_error():
    res = runner.invoke(app, ["sandbox", "check", "--task", "no-such-task"])
    assert res.exit_code == 2 and "unknown task" in res.output


def test_tasks_list_and_show():
    res = runner.invoke(app, ["tasks", "list", "--json"])
    assert res.exit_code == 0
    assert "warp-reduce-redux" in {t["id"] for t in json.loads(res.output)}
    res = runner.invoke(app, ["tasks", "show", "bulk-copy-scale"])
    assert res.exit_code == 0 and "cp.async.bulk" in res.output


def test_tasks_validate_prints_tables_and_saves_json(tmp_path):
    # bulk-reduce-colsum: 3 controls (static by SASS, static by a forbidden library, one for a GPU stage), so
    # the CLI's tables and JSON are checked on every kind of outcome for 4 builds, not warp-reduce-redux's 12
    # (each task's own validation is test_tasks_validate.py's)
    out = tmp_path / "v.json"
    res = runner.invoke(app, ["tasks", "validate", "bulk-reduce-colsum", "--save-json", str(out)])
    assert res.exit_code == 0, res.output
    assert "reference solutions" in res.output and "negative controls" in res.output
    (doc,) = json.loads(out.read_text())
    assert doc["task"] == "bulk-reduce-colsum" and len(doc["controls"]) == len(
        load_task("bulk-reduce-colsum").controls
    )
    static = {c["file"]: c for c in doc["controls"] if c["must_fail_at"] == "static"}
    assert static and all(c["failed_at"] == "static" and c["verdict"] == "ok" for c in static.values())
