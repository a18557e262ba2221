"""The Ray executor on a local Ray instance (2 CPUs, no dashboard, small object store): episodes as Ray
tasks, CPU stages as CPU tasks, and no GPU task on a cluster without GPUs."""

from __future__ import annotations

import json
import sqlite3

import pytest
from test_bench_e2e import TASKS, no_gpu, replay_dir

from ptxrag.bench import BenchSpec, run_bench

ray = pytest.importorskip("ray", reason="the Ray executor test needs ray (in the dev extra)")


def test_ray_executor_runs_a_study_on_a_local_instance(tmp_path, monkeypatch):
    from ptxrag.bench.executors.ray_cluster import RayExecutor

    no_gpu(monkeypatch)
    replays = replay_dir(tmp_path / "replays")
    spec = BenchSpec(tasks=TASKS, models=[f"replay:{replays}"], conditions=["templates"], max_rounds=4)
    executor = RayExecutor(num_cpus=2, num_gpus=0, object_store_mb=80, workers=2)
    events = []
    summary = run_bench(spec, tmp_path / "out", executor=executor, on_event=events.append)
    assert not ray.is_initialized()  # the instance it started is shut down
    assert executor.used_gpu is False
    assert summary.executor == "ray" and summary.complete and summary.done == 2 and summary.unverified == 2
    assert [e.kind for e in events].count("episode_finished") == 2
    db = sqlite3.connect(tmp_path / "out" / "bench.sqlite")
    db.row_factory = sqlite3.Row
    eps = {r["task_id"]: dict(r) for r in db.execute("SELECT * FROM episodes")}
    assert {t: e["rounds_used"] for t, e in eps.items()} == {"warp-reduce-redux": 3, "warp-elect-sum": 2}
    assert {e["stop_reason"] for e in eps.values()} == {"unverified_no_gpu"}
    last = db.execute(
        "SELECT report_json FROM rounds WHERE episode_id = ? AND round = 3",
        (eps["warp-reduce-redux"]["episode_id"],),
    ).fetchone()[0]
    report = json.loads(last)
    assert report["compile"]["status"] == "passed" and report["static"]["status"] == "passed"
    assert {report[s]["message"] for s in ("correctness", "execution", "timing")} == {"skipped: no GPU"}
    # the episodes ran in Ray workers but checkpointed into the bench folder, so a re-run skips them all
    again = run_bench(
        spec, tmp_path / "out", executor=RayExecutor(num_cpus=2, num_gpus=0, object_store_mb=80)
    )
    assert again.already_done == 2 and again.ran == 0
