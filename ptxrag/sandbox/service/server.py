"""The sandbox service: FastAPI app, job scheduler and GPU slots."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import queue
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ptxrag.base.paths import home
from ptxrag.tasks import TaskError, load_task

from ..containment import Limits
from ..evaluator import Sandbox, SandboxConfig, StageLimits
from ..gpushare import GpuShare, lock_name, visible_gpu_id
from ..results import EvaluationReport
from ..toolchain import detect_gpu
from .config import ServiceConfig
from .jobs import JobStore, QueueFull
from .limits import MAX_HEAD_BYTES, BodySizeLimit, head_deadline_protocol
from .schemas import (
    ARTIFACT_RESPONSES,
    EVENTS_RESPONSES,
    NO_JOB,
    REPORT_RESPONSES,
    SUBMIT_RESPONSES,
    UNAUTHORIZED,
    Health,
    JobStatus,
    Metrics,
    SubmitRequest,
    SubmittedJob,
)

_NAME_RE = re.compile(r"[A-Za-z0-9._-]+")


class GpuSlot:
    """One GPU: jobs take turns on it through the sandbox's :class:`GpuShare` (the ncu launch and timing alone,
    also against a bench on the same machine; with ``shared=1``, the default, every GPU stage alone)."""

    def __init__(self, device: str | None, shared: int = 1) -> None:
        self.device = device
        self.share = GpuShare(lock_name(device) if device else visible_gpu_id(), shared=shared)
        self.busy_s = 0.0
        self.holders = 0  # jobs in a GPU stage on it now
        self._count = threading.Lock()

    @contextlib.contextmanager
    def _held(self, inner: contextlib.AbstractContextManager[None]) -> Iterator[None]:
        with self._count:
            self.holders += 1
        try:
            with inner:
                t0 = time.monotonic()
                try:
                    yield
                finally:
                    with self._count:
                        self.busy_s += time.monotonic() - t0
        finally:
            with self._count:
                self.holders -= 1

    def shared(self) -> contextlib.AbstractContextManager[None]:
        return self._held(self.share.shared())

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        return self._held(self.share.exclusive())


class Scheduler:
    """Runs jobs on a thread pool (compiles in parallel); GPU stages serialised per GPU slot."""

    def __init__(self, cfg: ServiceConfig, store: JobStore, artifacts: Path) -> None:
        self.cfg = cfg
        self.store = store
        self.artifacts = artifacts
        devices: list[str | None] = list(cfg.gpus) or [None]
        self.slots = [GpuSlot(d) for d in devices]
        self._next = 0
        self._pick = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=cfg.workers, thread_name_prefix="ptxrag-job")
        self.started = time.time()
        # one sandbox uid per concurrent job: cleaning up a job kills every process of its uid
        self.uids: queue.Queue[int] = queue.Queue()
        for i in range(cfg.workers):
            self.uids.put(cfg.sandbox_uid_base + i)
        # one sandbox per (uid, GPU), kept between jobs so its GPU worker stays warm (PyTorch loaded, the CUDA
        # context made, the library's timings measured): a job holds its uid alone, so it has the sandbox alone;
        # the worker runs as that uid, and each job still gets fresh candidate processes, inputs and checks
        self._warm: dict[tuple[int, str | None], Sandbox] = {}
        self._warm_lock = threading.Lock()

    def _sandbox(self, uid: int, cfg: SandboxConfig) -> Sandbox:
        """The warm sandbox of ``uid`` on ``cfg.cuda_device``, set to this job's ``cfg`` (its artifacts folder,
        its timing option): everything a worker was started with (uid, device, limits) is the same by the key."""
        key = (uid, cfg.cuda_device)
        with self._warm_lock:
            sb = self._warm.get(key)
            if sb is None:
                sb = self._warm[key] = Sandbox(cfg)
            else:
                sb.config = cfg
            return sb

    def close(self) -> None:
        """Stop every warm GPU worker."""
        with self._warm_lock:
            for sb in self._warm.values():
                sb.close()
            self._warm.clear()

    def _slot(self) -> GpuSlot:
        with self._pick:
            free = [s for s in self.slots if not s.holders]
            if free:
                return free[0]
            s = self.slots[self._next % len(self.slots)]
            self._next += 1
            return s

    def enqueue(self, job_id: str) -> None:
        self.pool.submit(self._run, job_id)

    def _run(self, job_id: str) -> None:
        job = self.store.get(job_id)
        source = self.store.source(job_id)
        if job is None or source is None or job.status != "queued":
            return
        self.store.start(job_id)
        try:
            task = load_task(job.task_id, by_path=False)  # a registered id, never a host path
            slot = self._slot()
            out = self.artifacts / job_id
            out.mkdir(parents=True, exist_ok=True)
            limits = StageLimits()
            if self.cfg.stage_timeout_s:
                t = self.cfg.stage_timeout_s
                limits = StageLimits(correctness_s=t, execution_s=max(t, 120.0), timing_s=max(t, 120.0))
            uid = self.uids.get()
            try:
                sb = self._sandbox(
                    uid,
                    SandboxConfig(
                        run_timing=bool(job.options.get("run_timing", True)),
                        artifacts_dir=out,
                        cuda_device=slot.device,
                        gpu_share=slot,
                        stage_limits=limits,
                        limits=Limits.isolated(uid) if self.cfg.isolate else Limits(),
                        idle_workers=1,
                    ),
                )
                rep = sb.evaluate(task, source, on_stage=lambda s: self.store.set_stage(job_id, s))
            finally:
                self.uids.put(uid)
            (out / "compile.log").write_text(rep.compile.log)
            (out / "sass.txt").write_text(rep.static.sass_excerpt)
            (out / "report.json").write_text(rep.model_dump_json(indent=2))
            self.store.finish(job_id, rep.model_dump(mode="json"))
        except Exception as e:  # noqa: BLE001 - a harness failure ends this job, never the service
            self.store.finish(job_id, None, f"{type(e).__name__}: {e}")

    def metrics(self) -> dict[str, Any]:
        counts = self.store.counts()
        return {
            "queue_depth": counts.get("queued", 0),
            "running": counts.get("running", 0),
            "jobs_by_status": counts,
            "jobs_by_stage": self.store.stages(),
            "gpus": [
                {"device": s.device, "busy_s": round(s.busy_s, 3), "busy_now": s.holders > 0}
                for s in self.slots
            ],
            "workers": self.cfg.workers,
            "isolated": self.cfg.isolate and os.geteuid() == 0,
            "max_queue": self.cfg.max_queue,
            "uptime_s": round(time.time() - self.started, 1),
        }


class _AsciiJSON(JSONResponse):
    """JSON with non-ASCII escaped: a validation error echoes the input, which may hold a lone surrogate
    that UTF-8 cannot encode (FastAPI's own 422 then fails with a 500)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def job_key(task_id: str, source: str, options: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for part in (task_id, source, json.dumps(options, sort_keys=True)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def create_app(cfg: ServiceConfig) -> FastAPI:
    cfg.check()
    state = cfg.state_dir or (home() / "service")
    store = JobStore(state / "jobs.sqlite")
    sched = Scheduler(cfg, store, state / "artifacts")

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):  # noqa: ANN202
        for jid in store.requeue_interrupted():
            sched.enqueue(jid)
        yield
        sched.pool.shutdown(wait=False, cancel_futures=True)
        sched.close()

    app = FastAPI(title="ptxrag sandbox service", version="1", lifespan=lifespan)
    app.state.scheduler = sched
    app.state.store = store
    # counted while the body streams in: a chunked body has no Content-Length to trust
    app.add_middleware(BodySizeLimit, max_bytes=cfg.max_request_bytes, timeout_s=cfg.request_timeout_s)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _AsciiJSON({"detail": jsonable_encoder(exc.errors())}, status_code=422)

    bearer = Depends(HTTPBearer(auto_error=False, description="the service's token (--token-file)"))

    def auth(creds: HTTPAuthorizationCredentials | None = bearer) -> None:
        got = creds.credentials if creds is not None else ""
        if not hmac.compare_digest(got.encode(), (cfg.token or "").encode()):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})

    # the spec documents the bearer scheme and 401 only when the service has a token (loopback may have none)
    guarded: list[Any] = [Depends(auth)] if cfg.token else []
    unauth = UNAUTHORIZED if cfg.token else {}

    @app.get("/healthz", response_model=Health)
    def healthz() -> Health:
        gpu = detect_gpu()
        return Health(ok=True, gpu=gpu.label if gpu else None)

    @app.get("/metrics", dependencies=guarded, response_model=Metrics, responses={**unauth})
    def metrics() -> dict[str, Any]:
        return sched.metrics()

    @app.post(
        "/v1/jobs",
        dependencies=guarded,
        status_code=202,
        response_model=SubmittedJob,
        responses={**SUBMIT_RESPONSES, **unauth},
        description="Submit a kernel: 202 with a new job, 200 with the existing one for the same input.",
    )
    def submit(req: SubmitRequest) -> JSONResponse:
        if len(req.source.encode()) > cfg.max_source_bytes:
            raise HTTPException(413, f"source larger than {cfg.max_source_bytes} bytes")
        try:
            load_task(req.task_id, by_path=False)  # registered ids only: a client never names a host path
        except TaskError as e:
            raise HTTPException(404, str(e)) from None
        options = {"run_timing": req.run_timing}
        try:
            job, created = store.submit(job_key(req.task_id, req.source, options), req.task_id, req.source,
                                        options, cfg.max_queue)  # fmt: skip
        except QueueFull as e:
            retry = cfg.retry_after_s(e.depth)
            return JSONResponse({"detail": f"busy: {e}; retry after {retry} s"}, status_code=429,
                                headers={"Retry-After": str(retry)})  # fmt: skip
        if created:
            sched.enqueue(job.id)
        pub = job.public()
        body = SubmittedJob.model_validate({**pub, "created": created, "submitted": pub["created"]})
        return JSONResponse(body.model_dump(mode="json"), status_code=202 if created else 200)

    def _job(job_id: str):  # noqa: ANN202
        job = store.get(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return job

    @app.get("/v1/jobs/{job_id}", dependencies=guarded, response_model=JobStatus,
             responses={**NO_JOB, **unauth})  # fmt: skip
    def status(job_id: str) -> dict[str, Any]:
        return _job(job_id).public()

    @app.get("/v1/jobs/{job_id}/report", dependencies=guarded, response_model=EvaluationReport,
             responses={**REPORT_RESPONSES, **unauth})  # fmt: skip
    def report(job_id: str) -> JSONResponse:
        job = _job(job_id)
        if job.status == "error":
            return JSONResponse(
                {"detail": f"the harness failed: {job.error}", **job.public()}, status_code=500
            )
        if job.report is None:
            return JSONResponse({"detail": "not finished", **job.public()}, status_code=409)
        return JSONResponse(job.report)  # stored as EvaluationReport.model_dump(mode="json")

    @app.get("/v1/jobs/{job_id}/events", dependencies=guarded, response_class=StreamingResponse,
             response_model=None, responses={**EVENTS_RESPONSES, **unauth})  # fmt: skip
    async def events(job_id: str) -> StreamingResponse:
        _job(job_id)

        async def gen():  # noqa: ANN202
            last = None
            deadline = time.monotonic() + 3600
            while time.monotonic() < deadline:
                job = store.get(job_id)
                assert job is not None
                now = (job.status, job.stage)
                if now != last:
                    last = now
                    yield json.dumps(job.public()) + "\n"
                if job.status in ("done", "error"):
                    return
                await asyncio.sleep(0.2)

        return StreamingResponse(gen(), media_type="application/x-ndjson")

    @app.get("/v1/jobs/{job_id}/artifacts", dependencies=guarded, response_model=list[str],
             responses={**NO_JOB, **unauth})  # fmt: skip
    def artifacts(job_id: str) -> list[str]:
        _job(job_id)
        d = sched.artifacts / job_id
        return sorted(p.name for p in d.iterdir() if p.is_file()) if d.is_dir() else []

    @app.get("/v1/jobs/{job_id}/artifacts/{name}", dependencies=guarded, response_class=FileResponse,
             response_model=None, responses={**ARTIFACT_RESPONSES, **unauth})  # fmt: skip
    def artifact(job_id: str, name: str) -> FileResponse:
        _job(job_id)
        if not _NAME_RE.fullmatch(name) or name in (".", ".."):
            raise HTTPException(404, f"no artifact {name!r}")
        p = sched.artifacts / job_id / name
        if not p.is_file():
            raise HTTPException(404, f"no artifact {name!r}")
        return FileResponse(p, media_type="application/octet-stream")

    return app


def serve(cfg: ServiceConfig) -> None:
    import uvicorn

    app = create_app(cfg)
    uvicorn.run(
        app,
        host=cfg.host,
        port=cfg.port,
        log_level="info",
        limit_concurrency=256,
        # h11, never httptools (it buffers any head), with a deadline on each request head
        http=head_deadline_protocol(cfg.request_timeout_s),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
    )


__all__ = ["SubmitRequest", "create_app", "job_key", "serve"]
