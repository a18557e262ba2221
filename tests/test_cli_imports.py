"""Commands that neither embed nor compile must not import the heavy stacks (torch, sentence-transformers,
Chroma, LangGraph): each command runs in a fresh interpreter, and the modules it left in ``sys.modules`` are
inspected. No timing: what is imported does not depend on the machine's speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptxrag.bench.records import EpisodeRow, RoundRow
from ptxrag.bench.store import BenchStore

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "sentence_transformers", "transformers", "chromadb", "langgraph", "langchain_core")

# run the CLI in-process, then print which heavy modules it imported (as the last line of stdout)
PROBE = """
import json, sys
sys.argv = ["ptxrag", *sys.argv[1:]]
{preamble}
from ptxrag.cli import main
try:
    main()
except SystemExit as e:
    code = e.code
print("\\nPROBE " + json.dumps({{"code": code, "heavy": sorted(m for m in {heavy!r} if m in sys.modules)}}))
"""


def probe(argv: list[str], tmp_path: Path, preamble: str = "") -> dict:
    env = {**os.environ, "PTXRAG_HOME": str(tmp_path / "home"), "PTXRAG_NO_GPU": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    p = subprocess.run(
        [sys.executable, "-c", PROBE.format(preamble=preamble, heavy=HEAVY), *argv],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    line = next((x for x in reversed(p.stdout.splitlines()) if x.startswith("PROBE ")), None)
    assert line is not None, f"probe printed nothing\nstdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}"
    return json.loads(line.removeprefix("PROBE "))


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bench folder with two finished episodes, one of them fixed in its second round."""
    out = tmp_path_factory.mktemp("study")
    with BenchStore(out) as store:
        for s in range(2):
            eid = f"warp-reduce-redux.templates.replay.s{s}"
            row = EpisodeRow(
                episode_id=eid, task_id="warp-reduce-redux", family="warp", level=1, model="replay:r",
                condition="templates", condition_spec="templates", sample=s, status="done",
                stop_reason="unverified_no_gpu", max_rounds=3, rounds_used=2, best_round=2, first_static_round=2,
                compiled=True, static_ok=True, unverified=True, cost_usd=0.0,
            )  # fmt: skip
            common = {"episode_id": eid, "correct": False, "executed": False, "success": False}
            store.add_pending([row])
            store.finish(row, [
                RoundRow(round=1, outcome="compile failed", failure_stage="compile", failure_reason="compile failed",
                         compiled=False, static_ok=False, unverified=False, code="a", **common),
                RoundRow(round=2, outcome="GPU stages not run", compiled=True, static_ok=True, unverified=True,
                         code="b", **common),
            ])  # fmt: skip
    return out


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["report", "--help"], ["tasks", "list"], ["export", "fixit", "--help"]],
    ids=" ".join,
)
def test_light_commands_import_no_heavy_stack(argv, tmp_path):
    res = probe(argv, tmp_path)
    assert res["code"] in (0, None)
    assert res["heavy"] == []


def test_report_and_export_read_a_study_without_the_agent_or_the_embedder(study, tmp_path):
    res = probe(["report", str(study), "--out", str(tmp_path / "r")], tmp_path)
    assert res["code"] in (0, None) and (tmp_path / "r" / "report.html").is_file()
    assert res["heavy"] == []
    res = probe(
        ["export", "fixit", str(study), "-o", str(tmp_path / "f.jsonl"), "--include-unverified"], tmp_path
    )
    assert res["code"] in (0, None) and (tmp_path / "f.jsonl").read_text().count("\n") == 2
    assert res["heavy"] == []


def test_the_probe_sees_a_heavy_import(tmp_path):
    """Control: importing the agent package before the same light command is seen (LangGraph is listed)."""
    res = probe(["--help"], tmp_path, preamble="import ptxrag.agent_graph")
    assert "langgraph" in res["heavy"]
