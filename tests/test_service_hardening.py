"""Hostile clients of the sandbox service (issue 16, "The service"): a chunked body far over the size limit,
task ids that are host paths, and responses that must match the OpenAPI spec for every status code (checked
in real job states and by a bounded schemathesis run on loopback). No job compiles here: the scheduler's
enqueue is stubbed wherever a submission could be accepted."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.openapi.checks import JsonSchemaError
from uvicorn.protocols.http.h11_impl import H11Protocol

from ptxrag.sandbox.results import CompileResult, EvaluationReport, skipped
from ptxrag.sandbox.service.client import ServiceClient
from ptxrag.sandbox.service.config import ServiceConfig
from ptxrag.sandbox.service.limits import MAX_HEAD_BYTES, BodySizeLimit, head_deadline_protocol
from ptxrag.sandbox.service.server import create_app, job_key, serve
from ptxrag.tasks import builtin_suite_dir

TOKEN = "hardening-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMIT = 1 << 20  # the service's default max_request_bytes


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the size limit, counted while the body streams in -------------------------------------------------
def test_limit_middleware_stops_reading_an_endless_chunked_body() -> None:
    """ASGI level: a body with no Content-Length that never ends is refused after LIMIT bytes."""
    pulled = 0
    chunk = b"x" * 65536

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": chunk, "more_body": True}  # 200 MB, or forever

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the app must not see a body over the limit")

    scope = {"type": "http", "method": "POST", "headers": [(b"transfer-encoding", b"chunked")]}
    asyncio.run(BodySizeLimit(app, LIMIT)(scope, receive, send))
    assert sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]
    assert pulled * len(chunk) <= LIMIT + len(chunk)  # at most one chunk past the limit was read


def test_limit_middleware_hands_a_small_chunked_body_on_whole() -> None:
    parts = [b'{"a": ', b"1", b"}"]
    got: list[bytes] = []

    async def receive() -> dict[str, Any]:
        body = parts.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(parts)}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        m = await receive()
        got.append(m["body"])
        assert m["more_body"] is False

    async def send(message: dict[str, Any]) -> None:
        pass

    asyncio.run(BodySizeLimit(app, LIMIT)({"type": "http", "headers": []}, receive, send))
    assert got == [b'{"a": 1}']


def test_limit_middleware_cuts_off_a_body_that_trickles_in() -> None:
    """ASGI level: a body that arrives a byte at a time and never ends gets 408 at the deadline; the
    deadline is on the whole body, not on each chunk (every chunk here comes quickly)."""

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"type": "http.request", "body": b"x", "more_body": True}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the app must not see a body that never completes")

    async def main() -> None:
        # the cap only stops a broken middleware from hanging the test; the deadline answers long before
        await asyncio.wait_for(BodySizeLimit(app, LIMIT, timeout_s=0.5)({"type": "http", "headers": []},
                                                                        receive, send), 120)  # fmt: skip

    asyncio.run(main())
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert b"not complete within 0.5 s" in sent[1]["body"]


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _chunked_post(port: int, total: int, chunk_bytes: int = 1 << 16) -> tuple[int, bytes]:
    """POST a chunked body of ``total`` bytes on a raw socket; (bytes sent, response) when the server
    answers or drops the connection."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)  # a server that stops reading without answering shows as a timeout, not a hang
    s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
    frame = b"%x\r\n" % chunk_bytes + b"x" * chunk_bytes + b"\r\n"
    sent = 0
    try:
        while sent < total:
            if select.select([s], [], [], 0)[0]:
                break  # the server answered early
            s.sendall(frame)
            sent += chunk_bytes
        else:
            s.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    response = b""
    with contextlib.suppress(ConnectionResetError, TimeoutError):
        while chunk := s.recv(65536):
            response += chunk
    s.close()
    return sent, response


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """`ptxrag sandbox serve` in its own process, to measure its memory."""
    port = _port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptxrag", "sandbox", "serve", "--port", str(port), "--state-dir",
         str(tmp_path / "state"), "--workers", "1"],
        env={**os.environ, "PTXRAG_NO_GPU": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "server did not come up")
        time.sleep(0.2)
    yield url, proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_chunked_200mb_body_is_refused_without_being_read(served: tuple[str, subprocess.Popen]) -> None:
    url, proc = served
    port = int(url.rsplit(":", 1)[1])
    before = _peak_rss_kib(proc.pid)
    sent, response = _chunked_post(port, 200 << 20)
    growth_mib = (_peak_rss_kib(proc.pid) - before) / 1024
    # the server stopped reading near the limit: what got out is the limit plus socket buffers, not 200 MB
    assert sent < 32 << 20, f"{sent >> 20} MiB of the 200 MiB body went through before the refusal"
    assert growth_mib < 32, f"the server's peak memory grew by {growth_mib:.0f} MiB"
    if response:  # the 413 usually arrives before the connection is reset
        assert response.startswith(b"HTTP/1.1 413") and b"request larger than" in response
    # the service is unharmed and a small chunked body still gets through to the app
    assert httpx.get(url + "/healthz").status_code == 200
    body = b'{"task_id": "no-such-task", "source": "x"}'
    r = httpx.post(
        url + "/v1/jobs", content=iter([body[:10], body[10:]]), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 404 and "unknown task" in r.json()["detail"]


# -- task ids name registered tasks, never host paths --------------------------------------------------
class Live:
    """The app on loopback in a thread (uvicorn, real HTTP), with job execution stubbed out."""

    def __init__(self, app: Any, **config: Any) -> None:
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", **config)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Live:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def _app(tmp_path: Path, **kw: Any) -> Any:
    app = create_app(ServiceConfig(state_dir=tmp_path / "state", workers=1, **kw))
    app.state.scheduler.enqueue = lambda job_id: None  # nothing compiles in these tests
    return app


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    with Live(_app(tmp_path, token=TOKEN)) as s:
        yield s


HOST_PATHS = [
    "/tmp/x",
    "../suite/warp-reduce-redux",
    str(builtin_suite_dir() / "warp-reduce-redux"),  # a real task folder, by path
    "warp-reduce-redux/../warp-elect-sum",
    "warp-reduce-redux\n",
]


@pytest.mark.parametrize("task_id", HOST_PATHS)
def test_submit_refuses_a_host_path_as_task_id(live: Live, task_id: str) -> None:
    r = httpx.post(live.url + "/v1/jobs", json={"task_id": task_id, "source": "x"}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert "task_id" in r.text
    assert httpx.get(live.url + "/metrics", headers=AUTH).json()["jobs_by_status"] == {}  # no job made


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"task_id": "warp-reduce-redux", "source": "\\ud800"}', "not valid Unicode"),  # was a 500
        (b'{"task_id": "warp-reduce-redux", "source": "x", "run_timing": "yes"}', "run_timing"),
        (b'{"task_id": "warp-reduce-redux", "source": "x", "run_timimg": false}', "run_timimg"),
        (b'{"task_id": 7, "source": "x"}', "task_id"),
    ],
    ids=["lone surrogate", "string for a bool", "unknown field", "number for the id"],
)
def test_malformed_submissions_are_422_not_500(live: Live, body: bytes, words: str) -> None:
    r = httpx.post(live.url + "/v1/jobs", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 422 and words in r.text, r.text


def test_submit_refuses_an_unknown_task_id_with_404(live: Live) -> None:
    r = httpx.post(live.url + "/v1/jobs", json={"task_id": "no-such-task", "source": "x"}, headers=AUTH)
    assert r.status_code == 404 and "unknown task 'no-such-task'" in r.json()["detail"]


def test_a_stored_job_naming_a_path_is_not_loaded_from_it(tmp_path: Path) -> None:
    """A job row with a path as task id (an older service, a hand-edited database) fails as a harness
    error instead of loading the task folder it names."""
    app = _app(tmp_path)
    store, sched = app.state.store, app.state.scheduler
    folder = str(builtin_suite_dir() / "warp-reduce-redux")
    job, _ = store.submit("k", folder, "x", {"run_timing": False}, 8)
    sched._run(job.id)
    done = store.get(job.id)
    assert done.status == "error" and "not a task id" in (done.error or "")


# -- slow clients are cut off (slow loris) -------------------------------------------------------------
#: the service's request timeout in these tests, and the most a test waits for the server to act on it:
#: the attack never completes, so only the deadline can end it; the cap keeps a broken server from hanging
SLOW_TIMEOUT_S = 1.0
CAP_S = float(os.environ.get("PTXRAG_TEST_SLOW_CLIENT_CAP_S", "120"))


def _trickle(port: int, head: bytes, drip: bytes) -> tuple[bytes, float]:
    """Send ``head``, then ``drip`` one byte every 50 ms until the server answers or closes; return what
    it answered and how long after ``head`` it closed the connection."""
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    s.sendall(head)
    got = b""
    i = 0
    try:
        while time.monotonic() - t0 < CAP_S:
            if select.select([s], [], [], 0.05)[0]:
                chunk = s.recv(65536)
                if not chunk:
                    break  # closed
                got += chunk
                continue
            if drip:
                s.sendall(drip[i % len(drip) : i % len(drip) + 1])
                i += 1
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        s.close()
    return got, time.monotonic() - t0


@pytest.fixture
def slow_live(tmp_path: Path) -> Iterator[Live]:
    """The service with a short request timeout, on the protocol class and head limit ``serve`` uses."""
    app = _app(tmp_path, token=TOKEN, request_timeout_s=SLOW_TIMEOUT_S)
    with Live(
        app, http=head_deadline_protocol(SLOW_TIMEOUT_S), h11_max_incomplete_event_size=MAX_HEAD_BYTES
    ) as s:
        yield s


def test_serve_runs_uvicorn_with_the_deadline_protocol_and_head_limit(tmp_path: Path, monkeypatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    serve(ServiceConfig(state_dir=tmp_path / "state", workers=1, request_timeout_s=7.0))
    proto = seen["http"]
    assert isinstance(proto, type) and issubclass(proto, H11Protocol) and proto.head_timeout_s == 7.0
    assert seen["h11_max_incomplete_event_size"] == MAX_HEAD_BYTES


@pytest.mark.parametrize("endless", ["many header lines", "one header line"])
def test_a_huge_request_head_is_refused_near_the_limit(slow_live: Live, endless: str) -> None:
    """httptools (uvicorn's own choice when installed) buffered a 400 MB head; h11 stops at the limit."""
    s = socket.create_connection(("127.0.0.1", slow_live.port))
    s.settimeout(30)
    s.sendall(
        b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + (b"X-Long: " if endless == "one header line" else b"")
    )
    piece = b"X-Pad: " + b"a" * 8000 + b"\r\n" if endless == "many header lines" else b"a" * 8000
    sent = 0
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        while sent < 64 << 20 and not select.select([s], [], [], 0)[0]:
            s.sendall(piece * 8)
            sent += len(piece) * 8
    got = b""
    with contextlib.suppress(ConnectionResetError, TimeoutError):
        got = s.recv(65536)
    s.close()
    assert sent < 4 << 20, f"{sent >> 20} MiB of head went in before the refusal"
    assert got == b"" or got.startswith(b"HTTP/1.1 400"), got[:200]


def test_a_head_sent_a_byte_at_a_time_loses_its_connection(slow_live: Live) -> None:
    start = b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    got, waited = _trickle(slow_live.port, start, b"X-Pad: aaaaaaaa\r\n")  # never the blank line
    assert waited < CAP_S, "the server kept reading a head that never ends"
    assert waited >= SLOW_TIMEOUT_S * 0.9 and b"200" not in got  # closed by the deadline, not before


def test_a_connection_that_sends_nothing_is_closed(slow_live: Live) -> None:
    _, waited = _trickle(slow_live.port, b"", b"")
    assert SLOW_TIMEOUT_S * 0.9 <= waited < CAP_S


def test_a_body_sent_a_byte_at_a_time_gets_408(slow_live: Live) -> None:
    head = (b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: 100000\r\n\r\n")  # fmt: skip
    got, waited = _trickle(slow_live.port, head, b'{"task_id": "warp-reduce-redux"')
    assert waited < CAP_S, "the server kept reading a body that never ends"
    assert got.startswith(b"HTTP/1.1 408"), got[:200]
    assert b"request body not complete within 1 s" in got
    spec = httpx.get(slow_live.url + "/openapi.json").json()
    assert "408" in spec["paths"]["/v1/jobs"]["post"]["responses"]  # documented
    # the service still answers prompt clients, on the same protocol class
    r = httpx.post(slow_live.url + "/v1/jobs", json={"task_id": "no-such-task", "source": "x"}, headers=AUTH)
    assert r.status_code == 404


def test_a_kept_alive_connection_gets_the_head_deadline_again(slow_live: Live) -> None:
    # a first request answered promptly, then a second head that never ends on the same connection
    first = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n"
    got, waited = _trickle(slow_live.port, first, b"X-Pad: a\r\n")
    assert got.startswith(b"HTTP/1.1 200") and got.count(b"HTTP/1.1") == 1, got[:300]
    assert waited < CAP_S


def test_the_client_retries_a_408() -> None:
    answers = [httpx.Response(408, json={"detail": "request body not complete within 30 s"}),
               httpx.Response(404, json={"detail": "unknown task"})]  # fmt: skip
    transport = httpx.MockTransport(lambda request: answers.pop(0))
    client = ServiceClient("http://svc", transport=transport, retry_for_s=600)
    r = client._request("POST", "/v1/jobs", json={})
    assert r.status_code == 404 and not answers


def test_the_request_timeout_must_be_a_positive_number() -> None:
    from ptxrag.sandbox.service.config import ServiceConfigError

    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ServiceConfigError, match="request_timeout_s"):
            ServiceConfig(request_timeout_s=bad).check()


# -- response models and status codes match the OpenAPI spec -------------------------------------------
def _report(task_id: str = "warp-reduce-redux") -> dict[str, Any]:
    rep = EvaluationReport(
        task_id=task_id, source_sha256="0" * 64, arch="sm_90a", success=False,
        compile=CompileResult(status="failed", message="error: expected a ';'", log="k.cu(3): error"),
        static=skipped("static", "skipped: compile failed"),  # type: ignore[arg-type]
        correctness=skipped("correctness", "skipped: compile failed"),  # type: ignore[arg-type]
        execution=skipped("execution", "skipped: compile failed"),  # type: ignore[arg-type]
        timing=skipped("timing", "skipped: compile failed"),  # type: ignore[arg-type]
    )  # fmt: skip
    return rep.model_dump(mode="json")


@pytest.fixture
def states(tmp_path: Path) -> Iterator[tuple[Live, dict[str, str], Any]]:
    """A service with jobs in every state: done (with artifacts), errored, queued; queue of 3 now full."""
    app = _app(tmp_path, token=TOKEN, max_queue=3)
    store = app.state.store
    ids = {}
    opts = {"run_timing": True}
    for name in ("done", "error", "queued", "q2", "q3"):
        src = f"// {name}"
        job, _ = store.submit(job_key("warp-reduce-redux", src, opts), "warp-reduce-redux", src, opts, 10)
        ids[name] = job.id
    store.start(ids["done"])
    store.finish(ids["done"], _report())
    (app.state.scheduler.artifacts / ids["done"]).mkdir(parents=True)
    (app.state.scheduler.artifacts / ids["done"] / "compile.log").write_text("k.cu(3): error\n")
    store.finish(ids["error"], None, "SandboxFailure: nvcc not found")
    with Live(app) as s:
        schema = schemathesis.openapi.from_url(s.url + "/openapi.json")
        yield s, ids, schema


def test_every_documented_answer_matches_the_spec(states: tuple[Live, dict[str, str], Any]) -> None:
    s, ids, schema = states
    seen: dict[tuple[str, str], set[int]] = {}

    spec = httpx.get(s.url + "/openapi.json").json()

    def check(method: str, path: str, url: str, **kw: Any) -> httpx.Response:
        kw.setdefault("headers", AUTH)
        r = httpx.request(method, s.url + url, timeout=30, **kw)
        documented = spec["paths"][path][method.lower()]["responses"]
        assert str(r.status_code) in documented, (
            f"{method} {url}: {r.status_code} is not documented: {r.text}"
        )
        schema[path][method].validate_response(r)  # the body matches the model documented for its code
        seen.setdefault((method, path), set()).add(r.status_code)
        return r

    done, err, queued = ids["done"], ids["error"], ids["queued"]
    src = (builtin_suite_dir() / "warp-reduce-redux" / "solution.cu").read_text()
    check("GET", "/healthz", "/healthz", headers={})
    check("GET", "/metrics", "/metrics")
    check("GET", "/metrics", "/metrics", headers={})  # 401
    assert check("POST", "/v1/jobs", "/v1/jobs", json={"task_id": "warp-reduce-redux", "source": "// done"},
                 ).status_code == 200  # the existing job  # fmt: skip
    assert check("POST", "/v1/jobs", "/v1/jobs", json={"task_id": "warp-reduce-redux", "source": src}
                 ).status_code == 429  # fmt: skip
    check("POST", "/v1/jobs", "/v1/jobs", json={"task_id": "no-such-task", "source": "x"})  # 404
    check("POST", "/v1/jobs", "/v1/jobs", json={"task_id": "/tmp/x", "source": "x"})  # 422
    check(
        "POST",
        "/v1/jobs",
        "/v1/jobs",
        content=b"\x19\xffe",
        headers={**AUTH, "Content-Type": "application/json"},
    )
    check("POST", "/v1/jobs", "/v1/jobs", json={"task_id": "warp-reduce-redux", "source": "y" * (300 << 10)})
    check("POST", "/v1/jobs", "/v1/jobs", json={"task_id": "warp-reduce-redux", "source": "y" * (2 << 20)})
    check("POST", "/v1/jobs", "/v1/jobs", json={"task_id": "warp-reduce-redux", "source": "x"}, headers={})
    for jid in (done, err, queued, "no-such-job"):
        check("GET", "/v1/jobs/{job_id}", f"/v1/jobs/{jid}")
        check("GET", "/v1/jobs/{job_id}/report", f"/v1/jobs/{jid}/report")
        check("GET", "/v1/jobs/{job_id}/artifacts", f"/v1/jobs/{jid}/artifacts")
    for path in ("/v1/jobs/{job_id}", "/v1/jobs/{job_id}/report", "/v1/jobs/{job_id}/events",
                 "/v1/jobs/{job_id}/artifacts", "/v1/jobs/{job_id}/artifacts/{name}"):  # fmt: skip
        check("GET", path, path.format(job_id=done, name="compile.log"), headers={})  # 401
    events = check("GET", "/v1/jobs/{job_id}/events", f"/v1/jobs/{done}/events")
    assert events.headers["content-type"].startswith("application/x-ndjson") and '"done": true' in events.text
    check("GET", "/v1/jobs/{job_id}/events", f"/v1/jobs/{'0' * 32}/events")
    art = "/v1/jobs/{job_id}/artifacts/{name}"
    assert check("GET", art, f"/v1/jobs/{done}/artifacts/compile.log").content == b"k.cu(3): error\n"
    check("GET", art, f"/v1/jobs/{done}/artifacts/..")
    check("GET", art, f"/v1/jobs/{done}/artifacts/jobs.sqlite")
    assert seen[("POST", "/v1/jobs")] == {200, 400, 401, 404, 413, 422, 429}
    assert seen[("GET", "/v1/jobs/{job_id}/report")] == {200, 401, 404, 409, 500}
    # every status code the spec documents (but 202, which needs a job to run, 408, which needs a slow
    # client: test_a_body_sent_a_byte_at_a_time_gets_408, and 422 on path-only GETs, which no string can
    # provoke) was seen
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            documented = (
                {int(c) for c in op["responses"]} - {202, 408} - ({422} if method == "get" else set())
            )
            assert documented == seen[(method.upper(), path)], (method, path)


def test_a_new_submission_answers_202_as_documented(live: Live) -> None:
    schema = schemathesis.openapi.from_url(live.url + "/openapi.json")
    r = httpx.post(
        live.url + "/v1/jobs", json={"task_id": "warp-reduce-redux", "source": "// new"}, headers=AUTH
    )
    schema["/v1/jobs"]["POST"].validate_response(r)
    assert r.status_code == 202 and r.json()["created"] is True and r.json()["status"] == "queued"


def test_a_body_that_breaks_its_model_would_be_caught(live: Live) -> None:
    """The body check used above is not vacuous: a 200 whose body is not the documented model fails it."""
    schema = schemathesis.openapi.from_url(live.url + "/openapi.json")
    health = schema["/healthz"]["GET"]
    metrics = httpx.get(live.url + "/metrics", headers=AUTH)  # a 200 whose body is not a Health
    with pytest.raises(JsonSchemaError, match="Response violates schema"):
        health.validate_response(metrics)
    health.validate_response(httpx.get(live.url + "/healthz"))


# -- a bounded schemathesis run on loopback ------------------------------------------------------------
@pytest.fixture
def api_schema(tmp_path: Path) -> Iterator[Any]:
    with Live(_app(tmp_path, token=TOKEN, max_queue=2)) as s:
        yield schemathesis.openapi.from_url(s.url + "/openapi.json")


#: every operation of the service; test_the_fuzzed_operations_are_all_of_them keeps the list complete
OPERATIONS = [
    ("GET", "/healthz"),
    ("GET", "/metrics"),
    ("POST", "/v1/jobs"),
    ("GET", "/v1/jobs/{job_id}"),
    ("GET", "/v1/jobs/{job_id}/report"),
    ("GET", "/v1/jobs/{job_id}/events"),
    ("GET", "/v1/jobs/{job_id}/artifacts"),
    ("GET", "/v1/jobs/{job_id}/artifacts/{name}"),
]
#: negative cases (bodies and values that break the schema) need constraints to break: only the submission has them
FUZZ = [(m, p, "positive") for m, p in OPERATIONS] + [("POST", "/v1/jobs", "negative")]


def test_the_fuzzed_operations_are_all_of_them(api_schema: Any) -> None:
    ops = {(r.ok().method.upper(), r.ok().path) for r in api_schema.get_all_operations()}
    assert ops == set(OPERATIONS)


# bounded by a count of examples per operation, never by time: no deadline, no speed health checks, a fixed
# seed, no example database (nothing replayed from earlier runs) and no shrinking phase. The schemathesis
# pytest plugin is not used (its parametrize fails under pytest 9.2: no `_nodeid`); hypothesis drives each
# operation's strategy.
@pytest.mark.timeout(300)  # a backstop for a hang, not the bound
@pytest.mark.parametrize(("method", "path", "mode"), FUZZ, ids=[f"{m} {p} {g}" for m, p, g in FUZZ])
def test_schemathesis_on_loopback(api_schema: Any, method: str, path: str, mode: str) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=GenerationMode(mode)))
    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])  # fmt: skip
    def run(case: Any) -> None:
        case.call_and_validate(headers=AUTH)

    run()
