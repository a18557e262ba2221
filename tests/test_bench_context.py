"""Budgets as a study axis, the dry run, and the context report (tokens per layer and per retrieved
section, conditions identical for a task), over an offline study: replay models, a scripted sandbox."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from test_agent_doubles import ManualRetrieverDouble, ScriptedSandbox, kernel_reply
from typer.testing import CliRunner

from ptxrag.agent_graph import load_condition
from ptxrag.agent_graph.knowledge import CorpusKnowledge, build_static_context
from ptxrag.bench import BenchSpec, run_bench
from ptxrag.bench.context_report import context_markdown
from ptxrag.bench.study import EpisodeKey, parse_budget, resolve
from ptxrag.cli import app
from ptxrag.tasks import load_task

runner = CliRunner()
TASKS = ["warp-reduce-redux", "bulk-copy-scale"]


def _replays(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for t in TASKS:
        replies = "".join(f"[[reply]]\ntext = '''{kernel_reply(f'{t}-{i}')}'''\n" for i in range(3))
        (folder / f"{t}.toml").write_text(replies)
    return folder


def test_budget_parsing():
    assert [parse_budget(x) for x in ("8k", "16K", "32000", "1.5k")] == [8000, 16000, 32000, 1500]
    with pytest.raises(ValueError, match="not a token budget"):
        parse_budget("lots")


def test_budgets_are_an_axis_with_their_own_condition_names(tmp_path):
    replays = _replays(tmp_path / "r")
    spec = BenchSpec(
        tasks=TASKS[:1], models=[f"replay:{replays}"], conditions=["templates"], budgets=[8000, 16000]
    )
    eps = resolve(spec)
    assert [e.condition_name for e in eps] == ["templates@8k", "templates@16k"]
    assert [e.budget_tokens for e in eps] == [8000, 16000] and len({e.episode_id for e in eps}) == 2
    # without the axis an episode keeps the id it always had
    plain = EpisodeKey(task_id="t", model="m", condition="c", sample=0)
    digest = hashlib.sha256(json.dumps(["t", "m", "c", 0]).encode()).hexdigest()[:10]
    assert plain.episode_id == f"t.c.m.s0.{digest}"
    with pytest.raises(ValueError, match="either a budget or budgets"):
        BenchSpec(
            tasks=TASKS, models=["replay:x"], conditions=["templates"], budget_tokens=8000, budgets=[8000]
        )


def test_dry_run_prints_episodes_tokens_cost_and_gpu_time_without_a_key_or_a_folder(tmp_path):
    out = tmp_path / "study"
    res = runner.invoke(
        app,
        ["bench", "--dry-run", "--out", str(out), "--tasks", "gemm-wgmma-bf16", "--models",
         "anthropic:claude-sonnet-4-5,openai:my-local@http://127.0.0.1:9/v1", "--conditions", "templates",
         "--budgets", "8k,16k", "--max-rounds", "2"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert not out.exists()
    assert "dry run: 4 episode(s)" in res.output and "templates@8k" in res.output
    assert "no price in prices.toml" in res.output  # the local model
    assert "GPU time: at most" in res.output
    from ptxrag.bench.plan import plan_bench

    plan = plan_bench(
        BenchSpec(
            tasks=["gemm-wgmma-bf16"],
            models=["anthropic:claude-sonnet-4-5"],
            conditions=["templates"],
            budgets=[8000, 16000],
            max_rounds=2,
        )  # fmt: skip
    )
    small, large = plan.episodes
    # at 8k the GEMM's templates do not fit whole, so only the hardware card is carried
    assert small.static_tokens < 1000 < 9000 < large.static_tokens
    assert large.input_tokens > small.input_tokens and small.cost_usd is not None and small.cost_usd > 0
    assert plan.gpu_s == pytest.approx(2 * 2 * 21.8)
    assert plan.identical == []


def test_dry_run_names_conditions_that_give_a_task_the_same_prompt():
    from ptxrag.bench.plan import plan_bench

    spec = BenchSpec(tasks=["warp-reduce-redux", "bulk-copy-scale"], models=["anthropic:claude-sonnet-4-5"],
                     conditions=["templates", "contracts"], budgets=[16000, 32000], max_rounds=1)  # fmt: skip
    identical = sorted(plan_bench(spec).identical)
    # no contract covers redux.sync, and each task's needed layers fit either budget whole
    assert identical == [
        ("bulk-copy-scale", ["contracts@16k", "contracts@32k"]),
        ("bulk-copy-scale", ["templates@16k", "templates@32k"]),
        ("warp-reduce-redux", ["contracts@16k", "contracts@32k", "templates@16k", "templates@32k"]),
    ]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    base = tmp_path_factory.mktemp("ctx")
    replays = _replays(base / "replays")
    spec = BenchSpec(
        tasks=TASKS, models=[f"replay:{replays}"], conditions=["templates", "contracts", "rag"], max_rounds=2
    )
    summary = run_bench(
        spec, base / "out", workers=1, sandbox=ScriptedSandbox(["static", "success"] * 20),
        retriever=ManualRetrieverDouble(),
    )  # fmt: skip
    assert summary.complete, summary
    return base / "out"


def test_context_report_shows_tokens_per_layer_per_condition(study):
    md = context_markdown(study)
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in md.splitlines()
            if line.startswith("| ") and "replay:" in line}  # fmt: skip
    header = next(line for line in md.splitlines() if line.startswith("| condition | model | episodes"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols[4:] == ["hardware", "templates", "contracts", "retrieved:ptx-isa", "history", "sent"]

    def cell(cond, col):
        line = rows[(cond, "replay:replays")]
        text = line.strip("|").split("|")[cols.index(col)].strip()
        return None if text == "–" else float(text)

    pack = CorpusKnowledge()
    expect = {}
    for name in ("templates", "contracts"):
        per = [
            build_static_context(load_condition(name), load_task(t), pack).tokens_by_source() for t in TASKS
        ]
        expect[name] = {
            k: sum(p.get(k, 0) for p in per) / len(per) for k in ("hardware", "templates", "contracts")
        }
    for name in ("templates", "contracts"):
        for layer in load_condition(name).static:
            assert cell(name, layer) == pytest.approx(expect[name][layer], abs=0.5), (name, layer)
    # a layer or source the condition does not have reads '–', not a measured 0
    assert cell("rag", "templates") is None and cell("rag", "hardware") is None
    assert cell("rag", "retrieved:ptx-isa") > 0
    assert cell("templates", "retrieved:ptx-isa") is None and cell("templates", "contracts") is None
    assert cell("contracts", "history") > 0
    assert "## Context: retrieved sections" in md and "| rag | §" in md


def test_context_report_names_conditions_identical_for_a_task(study):
    md = context_markdown(study)
    same = md[md.index("## Context: conditions identical for a task") :]
    assert "| `warp-reduce-redux` | `contracts` = `templates` |" in same
    assert "bulk-copy-scale" not in same  # its contracts differ


def test_ptxrag_report_appends_the_context_section(study, tmp_path):
    res = runner.invoke(app, ["report", str(study), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Context carried per condition" in md and (tmp_path / "rep" / "context.md").is_file()
    assert md.count("## Context carried per condition") == 1
    page = (tmp_path / "rep" / "report.html").read_text()  # the HTML page has the same sections
    assert "<h2>Context carried per condition (cl100k_base tokens)</h2>" in page
    assert (
        "<h2>Context: conditions identical for a task</h2>" in page and "<th>retrieved:ptx-isa</th>" in page
    )


def test_the_library_report_has_the_context_sections_too(study, tmp_path):
    from ptxrag.bench import write_report

    files = write_report(study, dest=tmp_path / "lib")
    assert "## Context carried per condition" in Path(files.markdown).read_text()
