"""The service keeps one sandbox per (sandbox uid, GPU) between jobs, so its GPU worker stays warm, and a warm
worker writes each job's artifacts into that job's folder (issue 21: the service started a new worker per job)."""

from __future__ import annotations

from pathlib import Path

from ptxrag.sandbox import SandboxConfig
from ptxrag.sandbox.service import ServiceConfig
from ptxrag.sandbox.service.jobs import JobStore
from ptxrag.sandbox.service.server import Scheduler
from ptxrag.sandbox.worker_client import WorkerProcess


def _scheduler(tmp_path: Path) -> Scheduler:
    cfg = ServiceConfig(state_dir=tmp_path / "state", workers=2)
    return Scheduler(cfg, JobStore(tmp_path / "jobs.sqlite"), tmp_path / "artifacts")


def test_a_uid_keeps_its_sandbox_across_jobs_with_each_jobs_settings(tmp_path: Path) -> None:
    sched = _scheduler(tmp_path)
    first = sched._sandbox(7, SandboxConfig(artifacts_dir=tmp_path / "job-a", cuda_device="0"))
    again = sched._sandbox(
        7, SandboxConfig(artifacts_dir=tmp_path / "job-b", cuda_device="0", run_timing=False)
    )
    assert again is first  # the same warm sandbox (and its idle worker) for the next job of the uid
    assert again.config.artifacts_dir == tmp_path / "job-b" and again.config.run_timing is False
    other_uid = sched._sandbox(8, SandboxConfig(artifacts_dir=tmp_path / "job-c", cuda_device="0"))
    other_gpu = sched._sandbox(7, SandboxConfig(artifacts_dir=tmp_path / "job-d", cuda_device="1"))
    assert len({id(first), id(other_uid), id(other_gpu)}) == 3  # a worker runs as one uid on one GPU
    closed = []
    for sb in (first, other_uid, other_gpu):
        sb.close = lambda sb=sb: closed.append(sb)  # type: ignore[method-assign]
    sched.close()
    assert len(closed) == 3 and sched._warm == {}


def test_a_warm_worker_writes_each_jobs_artifacts_into_that_jobs_folder(tmp_path: Path) -> None:
    """A worker started for one job keeps the config it was started with; the artifacts folder is the job's."""
    w = WorkerProcess.__new__(WorkerProcess)  # the bookkeeping only: no process is started
    w.work = tmp_path / "work"
    w.work.mkdir()
    w.log = w.work / "worker.log"
    w.jobs, w._log_from = 0, 0
    for job in ("job-a", "job-b"):
        w.begin_job(tmp_path / job)
        (w.work / "ncu.csv").write_text(f"counts of {job}\n")
        with w.log.open("a") as f:
            f.write(f"output of {job}\n")
        w._copy_artifacts()
    assert (tmp_path / "job-a" / "ncu.csv").read_text() == "counts of job-a\n"
    assert (tmp_path / "job-b" / "ncu.csv").read_text() == "counts of job-b\n"
    assert (tmp_path / "job-b" / "worker.log").read_text() == "output of job-b\n"  # only its own job's output
    w.begin_job(None)
    w._copy_artifacts()  # a job without an artifacts folder writes none
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job-a", "job-b", "work"]
