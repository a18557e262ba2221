"""The sandbox service over real HTTP on loopback (CI: no GPU, so jobs are compile + static)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ptxrag.sandbox import Sandbox
from ptxrag.sandbox.service import ServiceClient, ServiceConfig, ServiceConfigError, ServiceError
from ptxrag.tasks import load_task

TASK = load_task("warp-reduce-redux")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`ptxrag sandbox serve` in a subprocess, so it can be killed and restarted like the real thing."""

    def __init__(self, state: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.state, self.args, self.port = state, args, _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "PTXRAG_NO_GPU": "1", **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self) -> Server:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ptxrag", "sandbox", "serve", "--port", str(self.port),
             "--state-dir", str(self.state), *self.args],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(self.proc.stderr.read().decode() if self.proc.stderr else "server died")
            time.sleep(0.2)
        raise RuntimeError("server did not come up")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "state").start()
    yield s
    s.kill()


def _variant(i: int) -> str:
    return TASK.solution_source() + f"\n// variant {i}\n"


def test_submit_poll_fetch_and_artifacts(server):
    c = ServiceClient(server.url)
    job = c.submit(TASK.id, _variant(0))
    assert job["created"] and job["status"] in ("queued", "running")
    rep = c.wait(job["job_id"])
    assert rep.static.status == "passed" and rep.correctness.message == "skipped: no GPU"
    names = c.artifacts(job["job_id"])
    assert {"compile.log", "sass.txt", "report.json"} <= set(names)
    assert b"REDUX" in c.artifact(job["job_id"], "sass.txt")
    with pytest.raises(ServiceError, match="404"):
        c.artifact(job["job_id"], "..%2Fjobs.sqlite")
    m = c.metrics()
    assert m["jobs_by_status"].get("done") == 1 and m["queue_depth"] == 0


def test_stream_status(server):
    c = ServiceClient(server.url)
    job = c.submit(TASK.id, _variant(1))
    with httpx.stream("GET", f"{server.url}/v1/jobs/{job['job_id']}/events", timeout=60) as r:
        lines = [line for line in r.iter_lines() if line]
    assert '"done": true' in lines[-1]


def test_same_kernel_same_task_is_evaluated_once(server):
    c = ServiceClient(server.url)
    a = c.submit(TASK.id, _variant(2))
    b = c.submit(TASK.id, _variant(2))
    assert a["job_id"] == b["job_id"] and b["created"] is False
    other = c.submit("bulk-copy-scale", _variant(2))
    assert other["job_id"] != a["job_id"]


def test_sandbox_url_is_a_drop_in_for_the_local_sandbox(server):
    remote = Sandbox(url=server.url).evaluate(TASK, _variant(3))
    local = Sandbox(gpu=None).evaluate(TASK, _variant(3))
    for a, b in zip(remote.stages(), local.stages(), strict=True):
        assert (a.stage, a.status) == (b.stage, b.status)
    assert remote.source_sha256 == local.source_sha256


def test_bad_requests_are_refused_clearly(server):
    c = ServiceClient(server.url)
    with pytest.raises(ServiceError, match="unknown task"):
        c.submit("no-such-task", "x")
    r = httpx.post(server.url + "/v1/jobs", json={"task_id": TASK.id, "source": "x" * (2 << 20)})
    assert r.status_code == 413
    r = httpx.post(server.url + "/v1/jobs", json={"task_id": TASK.id, "source": "y" * (300 << 10)})
    assert r.status_code == 413 and "source larger" in r.json()["detail"]


class _Recorder(httpx.HTTPTransport):
    """A real transport that notes (start, end, status, Retry-After) of each request the client sends."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[float, float, int, str | None]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        t0 = time.monotonic()
        r = super().handle_request(request)
        self.calls.append((t0, time.monotonic(), r.status_code, r.headers.get("Retry-After")))
        return r


def test_retry_after_policy():
    cfg = ServiceConfig(workers=1)  # the defaults: 10 s per waiting job per worker, at least 5 s
    assert [cfg.retry_after_s(d) for d in (0, 1, 2, 64)] == [5, 10, 20, 640]
    assert ServiceConfig(workers=4).retry_after_s(2) == 5
    assert ServiceConfig(workers=1, retry_after_min_s=1, retry_after_per_job_s=1).retry_after_s(2) == 2
    with pytest.raises(ServiceConfigError, match="retry_after_min_s"):
        ServiceConfig(retry_after_min_s=0).check()


def test_queue_full_answers_busy_with_retry_after(tmp_path):
    # a small Retry-After policy (1 s per waiting job, 1 worker, 2 waiting: 2 s) so the client's wait is short
    s = Server(tmp_path / "state", "--workers", "1", "--max-queue", "2", "--retry-after-min", "1",
               "--retry-after-per-job", "1").start()  # fmt: skip
    try:
        codes = [httpx.post(s.url + "/v1/jobs", json={"task_id": TASK.id, "source": _variant(100 + i)}, timeout=30)
                 for i in range(8)]  # fmt: skip
        busy = [r for r in codes if r.status_code == 429]
        assert busy, [r.status_code for r in codes]
        assert busy[0].headers["Retry-After"] == "2" and "busy" in busy[0].json()["detail"]
        # the client waits as told and gets through
        rec = _Recorder()
        rep = ServiceClient(s.url, retry_for_s=300, transport=rec).evaluate(TASK, _variant(200))
        assert rep.static.ok
        told = [(end, float(ra)) for _, end, code, ra in rec.calls if code == 429 and ra is not None]
        assert told, "the queue was still full: the client's first submission must have been told to wait"
        for end, wait in told:
            nxt = min(t0 for t0, *_ in rec.calls if t0 > end)
            assert nxt - end >= wait - 0.05, f"retried {nxt - end:.2f} s after a 429 that said {wait} s"
    finally:
        s.kill()


def test_token_required_and_checked(tmp_path):
    s = Server(tmp_path / "state", env={"PTXRAG_SERVICE_TOKEN": "s3cret"}).start()
    try:
        assert httpx.get(s.url + "/healthz").status_code == 200
        assert httpx.get(s.url + "/metrics").status_code == 401
        assert httpx.get(s.url + "/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
        with pytest.raises(ServiceError, match="bearer token"):
            ServiceClient(s.url, token="nope").metrics()
        assert ServiceClient(s.url, token="s3cret").metrics()["queue_depth"] == 0
    finally:
        s.kill()
    with pytest.raises(ServiceConfigError, match="without a token"):
        ServiceConfig(host="0.0.0.0").check()
    ServiceConfig(host="0.0.0.0", token="t").check()


def test_restart_keeps_finished_jobs_and_requeues_interrupted_ones(tmp_path):
    state = tmp_path / "state"
    s = Server(state, "--workers", "1").start()
    c = ServiceClient(s.url)
    done = c.submit(TASK.id, _variant(300))
    c.wait(done["job_id"])
    pending = [c.submit(TASK.id, _variant(301 + i))["job_id"] for i in range(3)]
    s.kill()  # SIGKILL while jobs are queued or running
    s2 = Server(state, "--workers", "2")
    s2.port, s2.url = s.port, s.url
    s2.start()
    try:
        c2 = ServiceClient(s2.url)
        assert c2.status(done["job_id"])["status"] == "done"
        assert c2.report(done["job_id"]).static.ok
        for jid in pending:
            assert c2.wait(jid).static.ok
    finally:
        s2.kill()


@pytest.mark.slow
def test_load_50_concurrent_clients_none_lost(server, capsys):
    t0 = time.monotonic()

    def one(i: int) -> str:
        c = ServiceClient(server.url, retry_for_s=600)
        rep = c.evaluate(TASK, _variant(1000 + i), run_timing=False)
        return rep.source_sha256

    with ThreadPoolExecutor(max_workers=50) as pool:
        shas = list(pool.map(one, range(50)))
    wall = time.monotonic() - t0
    assert len(set(shas)) == 50
    m = ServiceClient(server.url).metrics()
    assert m["jobs_by_status"].get("done") == 50 and m["jobs_by_status"].get("error") is None
    with capsys.disabled():
        print(
            f"\nload: 50 clients, 50 compile-only jobs in {wall:.1f} s = {50 / wall:.2f} jobs/s "
            f"({m['workers']} workers)"
        )
