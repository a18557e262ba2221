"""The study report's newer measures on hand-made episode rows: pass@k, Newcombe's paired interval, "n/a (GPU
not run)", the per-task table, cost per solved episode, PTXBench's numbers labelled external, transcript links."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from ptxrag.bench import metrics
from ptxrag.bench.external import ptxbench
from ptxrag.bench.records import EpisodeRow, RoundRow
from ptxrag.bench.render import _inline
from ptxrag.bench.report import write_report
from ptxrag.bench.store import BenchStore


def ep(task: str, cond: str, sample: int, *, success: bool = False, static: bool = True, gpu: bool = True,
       solved: int | None = None, tokens: int = 1000, cost: float | None = 0.01, model: str = "anthropic:m",
       transcript: str | None = None) -> EpisodeRow:  # fmt: skip
    """A finished episode: ``gpu`` False means its GPU stages were skipped (no GPU)."""
    return EpisodeRow(
        episode_id=f"{task}.{cond}.{model}.s{sample}", task_id=task, family="warp", level=1, model=model,
        condition=cond, condition_spec=cond, sample=sample, status="done",
        stop_reason=("solved" if success else "round_limit") if gpu or not static else "unverified_no_gpu",
        max_rounds=8, rounds_used=solved or 3, best_round=solved or 3, first_static_round=1 if static else None,
        solved_round=solved if success else None, compiled=True, static_ok=static, correct=success,
        executed=success, success=success, unverified=static and not gpu, input_tokens=tokens - 200,
        output_tokens=200, cost_usd=cost, transcript_md=transcript,
    )  # fmt: skip


def test_pass_at_k_is_the_unbiased_estimator():
    assert metrics.pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert metrics.pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))  # 0.7
    assert metrics.pass_at_k(5, 4, 2) == 1.0 and metrics.pass_at_k(3, 0, 3) == 0.0
    with pytest.raises(ValueError):
        metrics.pass_at_k(2, 1, 3)


def test_pass_at_k_table_averages_over_tasks_up_to_the_fewest_samples():
    rows = [ep("a", "rag", s, success=s < 1) for s in range(4)] + [
        ep("b", "rag", s, success=True) for s in range(2)
    ]
    (p,) = metrics.pass_at_k_table(rows)
    assert p.tasks == 2 and p.samples_min == 2 and set(p.values) == {1, 2}
    assert p.values[1] == pytest.approx((0.25 + 1.0) / 2)
    assert p.values[2] == pytest.approx((metrics.pass_at_k(4, 1, 2) + 1.0) / 2)


def test_newcombe_paired_interval_matches_the_published_example_and_is_not_a_point_at_small_n():
    # Newcombe (1998), Stat Med 17:2635, example (a, b, c, d) = (36, 12, 2, 0): 0.0569 to 0.3404
    lo, hi = metrics.newcombe_paired_ci(36, 12, 2, 0)
    assert (round(lo, 4), round(hi, 4)) == (0.0569, 0.3404)
    lo, hi = metrics.newcombe_paired_ci(0, 0, 0, 2)  # 0/2 vs 0/2: the bootstrap used to print [0, 0]
    assert lo < -0.5 and hi > 0.5
    (c,) = metrics.compare_conditions([ep("a", "x", 0, success=True), ep("a", "y", 0)])
    assert c.diff == 1.0 and c.ci_low is not None and c.ci_low < 0.5 and c.ci_high == 1.0


def test_gpu_rates_are_unknown_only_when_no_episode_had_a_gpu_verdict():
    no_gpu = [ep("a", "x", s, gpu=False) for s in range(2)]
    assert metrics.gpu_not_run(no_gpu)
    assert not metrics.gpu_not_run([*no_gpu, ep("a", "x", 2, gpu=True)])  # one verdict: the rate is a rate
    assert not metrics.gpu_not_run([ep("a", "x", 0, static=False, gpu=False)])  # never got to the GPU: failed
    (s,) = metrics.aggregate(no_gpu, ("condition",))
    assert s.gpu_not_run and s.rates["static_ok"].hits == 2


def test_cost_per_solved_episode_charges_failures_to_the_successes():
    rows = [ep("a", "x", 0, success=True, solved=2), ep("a", "x", 1), ep("a", "x", 2, cost=None)]
    (e,) = metrics.cost_efficiency(rows)
    assert e.solved == 1 and e.tokens == 3000 and e.tokens_per_solved == 3000.0
    assert e.cost_usd is None and e.cost_per_solved_usd is None  # an unpriced episode: no dollar figure
    (e,) = metrics.cost_efficiency(rows[:2])
    assert e.cost_per_solved_usd == pytest.approx(0.02) and e.tokens_per_in_sass == 1000.0


def test_ptxbench_numbers_are_sourced_and_counted():
    ext = ptxbench()
    assert "zhang677/PTXBench" in ext.source and "491860b" in ext.source
    (w,) = ext.workloads
    assert w.ptxrag_tasks == ["gemm-wgmma-bf16"]
    opus = {r.rounds: (r.hits, r.n) for r in w.results if r.model == "Claude Opus 4.8"}
    assert opus == {1: (11, 12), 4: (12, 12), 8: (12, 12)}


def test_inline_links_stay_inside_the_study():
    assert (
        _inline("[t](episodes/a b/transcript.md)") == "[t](episodes/a b/transcript.md)"
    )  # no spaces allowed
    assert _inline("[t](episodes/x/transcript.md)") == '<a href="episodes/x/transcript.md">t</a>'
    assert "<a" not in _inline("[t](javascript:alert(1))") and "<a" not in _inline("[t](https://x.org/a)")


@pytest.fixture
def study(tmp_path: Path) -> Path:
    out = tmp_path / "study"
    rows = [
        *(ep("warp-a", c, s, gpu=False, transcript=f"episodes/{c}{s}/t/transcript.md") for c in ("x", "y") for s in range(2)),
        *(ep("gemm-wgmma-bf16", "x", s, success=s == 0, solved=2) for s in range(2)),
    ]  # fmt: skip
    with BenchStore(out) as store:
        store.check_settings({"max_rounds": "8", "budget_tokens": "per condition"})
        for r in rows:
            store.add_pending([r])
            store.finish(r, [RoundRow(episode_id=r.episode_id, round=1, outcome="o", compiled=True,
                                      static_ok=r.static_ok, correct=False, executed=False, success=False,
                                      unverified=r.unverified)])  # fmt: skip
            if r.transcript_md:
                (out / r.transcript_md).parent.mkdir(parents=True)
                (out / r.transcript_md).write_text("# transcript\n")
    return out


def test_report_has_per_task_cells_na_external_and_relative_transcript_links(study, tmp_path):
    files = write_report(study, dest=tmp_path / "rep")
    md = Path(files.markdown).read_text()
    page = Path(files.html).read_text()
    # the per-task table: GPU-less cells say n/a, the GPU-run task has its rates and rounds to success
    assert (
        "| warp-a | x | 2 | 100% (2/2) [34–100%] | n/a (GPU not run) | n/a (GPU not run) | n/a (GPU not run) |"
        in md
    )
    assert (
        "| gemm-wgmma-bf16 | x | 2 | 100% (2/2) [34–100%] | 50% (1/2) [9–91%] | 50% (1/2) [9–91%] | 2.0 |"
        in md
    )
    # pass@k for the GPU-run task: 1 of 2 samples solved -> pass@1 0.5, pass@2 1.0 (mixed group x: known)
    assert re.search(r"\| x \| anthropic:m \| success \| 2 \| 2 \| 0\.25 \| 0\.50 \|", md)
    assert "| y | anthropic:m | success | 1 | 2 | n/a (GPU not run) | n/a (GPU not run) |" in md
    # PTXBench beside ours, labelled, with our matching task's success@k
    assert "Claude Opus 4.8 (PTXBench, external) | gemm_n7168_k5120 (Hopper) | 92% (11/12) [65–99%]" in md
    assert "| anthropic:m · x (this study) | gemm-wgmma-bf16 | 0% (0/2) [0–66%] | 50% (1/2) [9–91%] |" in md
    # cost per solved: the condition's own budget from its TOML (templates has one; x is not built in: '?')
    assert "tokens per solved" in md and "| y (budget ?) | anthropic:m | 2 | n/a (GPU not run) |" in md
    # transcripts: relative to the report folder, and they resolve
    links = re.findall(r'href="([^"]+)"', page)
    assert len(links) == 4 and all((tmp_path / "rep" / x).resolve().is_file() for x in links)
    assert "[transcript](../study/episodes/x0/t/transcript.md)" in md


def test_bench_summary_table_says_na_where_no_episode_ran_the_gpu(study):
    """The table ``ptxrag bench`` prints at the end: y never ran the GPU (n/a, not 0%); x has verdicts."""
    from rich.console import Console

    from ptxrag.cli.bench_cmd import _summary_table

    con = Console(width=250, record=True)
    con.print(_summary_table(study))
    rows = {
        line.split("│")[1].strip(): line for line in con.export_text().splitlines() if "anthropic:m" in line
    }
    assert set(rows) == {"x", "y"}
    assert "n/a (GPU not run)" in rows["y"] and "0% (0/" not in rows["y"]
    assert "25% (1/4) [5–70%]" in rows["x"] and "n/a" not in rows["x"]


def test_cost_table_budget_is_what_the_episode_ran_with_not_the_condition_file_now(tmp_path):
    """templates.toml says 16000 today; an episode that ran at 8000 (its transcript header) is labelled 8000."""
    out = tmp_path / "study"
    rows = [
        ep("warp-a", "templates", s).model_copy(
            update={"transcript_jsonl": f"episodes/t{s}/transcript.jsonl"}
        )
        for s in range(2)
    ]
    rows[1] = rows[1].model_copy(update={"transcript_jsonl": None})  # no transcript: the file's budget
    with BenchStore(out) as store:
        store.check_settings({"max_rounds": "8", "budget_tokens": "per condition"})
        for r in rows:
            store.add_pending([r])
            store.finish(r, [])
    (out / "episodes" / "t0").mkdir(parents=True)
    (out / "episodes" / "t0" / "transcript.jsonl").write_text(
        json.dumps({"type": "episode", "budget_tokens": 8000}) + "\n"
    )
    md = Path(write_report(out, dest=tmp_path / "rep").markdown).read_text()
    assert "| templates (budget 8000) | anthropic:m | 1 |" in md
    assert "| templates (budget 16000) | anthropic:m | 1 |" in md


def test_harness_errors_are_shown_as_failures_beside_the_rate_they_are_left_out_of(tmp_path):
    """Episodes the harness ended are out of the rates; were a candidate able to turn its failure into a harness
    error, the study would look better. The report says what success would be with them counted as failures."""
    from ptxrag.bench.render import Document, to_markdown
    from ptxrag.bench.report import _study_section

    def render_markdown(sections):
        return to_markdown(Document("study", sections))

    with BenchStore(tmp_path):
        pass  # the study folder's database (the section reads the study's settings from it)
    done = [ep("a", "x", 0, success=True), ep("a", "x", 1, success=True), ep("a", "x", 2)]
    errored = [ep("a", "x", s).model_copy(update={"status": "error"}) for s in (3, 4, 5)]
    text = render_markdown([_study_section(tmp_path, [*done, *errored], done)])
    assert "3 episode(s) ended in a harness error" in text
    assert "would be 33% (2/6)" in text and "67% (2/3)" in text
    clean = render_markdown([_study_section(tmp_path, done, done)])
    assert "harness error" not in clean
