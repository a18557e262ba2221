"""The service's request and response bodies: every endpoint answers with one of these, and the OpenAPI
spec (``/openapi.json``) documents each status code with its model (tests/test_service_hardening.py
checks the responses against it with schemathesis)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator

from ptxrag.sandbox.results import EvaluationReport
from ptxrag.tasks.spec import TASK_ID_PATTERN, is_task_id

JobState = Literal["queued", "running", "done", "error"]


class SubmitRequest(BaseModel):
    """A kernel to evaluate for a registered task. Unknown fields are refused (a typo is not ignored)."""

    model_config = ConfigDict(extra="forbid")

    task_id: StrictStr = Field(
        max_length=64,
        pattern=TASK_ID_PATTERN,
        description="the id of a task the service knows (`ptxrag tasks list` there), never a path",
    )
    source: StrictStr = Field(description="one .cu file (docs/abi.md); at most max_source_bytes of UTF-8")
    run_timing: StrictBool = True

    @field_validator("task_id")
    @classmethod
    def _task_id(cls, v: str) -> str:
        if not is_task_id(v):  # the pattern's `$` lets a trailing newline through
            raise ValueError("task_id must be a registered task id, not a path")
        return v

    @field_validator("source")
    @classmethod
    def _utf8(cls, v: str) -> str:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate ("\ud800") in the JSON string
            raise ValueError(f"source is not valid Unicode text at character {e.start}") from None
        return v


class ErrorDetail(BaseModel):
    """Why a request was refused (401, 404, 408, 413, 429)."""

    detail: str


class _JobFields(BaseModel):
    job_id: str
    task_id: str
    status: JobState
    stage: str | None = Field(description="the stage running now (compile, static, correctness, ...)")
    started: float | None = Field(description="Unix time the job started, if it has")
    finished: float | None = Field(description="Unix time the job finished, if it has")
    error: str | None = Field(description="the harness failure that ended the job (status `error`)")
    attempts: int = Field(description="how often the job was started (a restarted service re-runs it)")
    done: bool = Field(description="status is `done` or `error`: nothing will change any more")


class JobStatus(_JobFields):
    """A job's state: ``GET /v1/jobs/{id}`` and each line of ``/events``."""

    created: float = Field(description="Unix time the job was submitted")


class SubmittedJob(_JobFields):
    """The answer to a submission (202: a new job; 200: the existing job for the same input)."""

    created: bool = Field(
        description="true: a new job; false: the existing one for the same task, source, options"
    )
    submitted: float = Field(description="Unix time the job was submitted")


class JobProblem(JobStatus):
    """The report is not there: the job has not finished (409) or the harness failed on it (500)."""

    detail: str


class Health(BaseModel):
    ok: bool
    gpu: str | None = Field(description="the GPU the service sees, or null")


class GpuMetrics(BaseModel):
    device: str | None
    busy_s: float
    busy_now: bool


class Metrics(BaseModel):
    queue_depth: int
    running: int
    jobs_by_status: dict[str, int]
    jobs_by_stage: dict[str, int]
    gpus: list[GpuMetrics]
    workers: int
    isolated: bool
    max_queue: int
    uptime_s: float


def _err(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"model": ErrorDetail, "description": description}
    if headers:
        out["headers"] = headers
    return out


#: OpenAPI documentation of the error answers each endpoint can give (401: added where a token is set)
UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: _err(
        "missing or wrong bearer token (only when the service has one)",
        {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "Bearer"}},
    )
}
NO_JOB: dict[int | str, dict[str, Any]] = {404: _err("no job with this id")}
SUBMIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": SubmittedJob, "description": "the existing job for the same task, source and options"},
    400: _err("the body is not JSON"),
    404: _err("no registered task with this id"),
    408: _err("the request body did not arrive within the service's request timeout"),
    413: _err("the request body or the source is over the service's size limit"),
    429: _err(
        "max_queue jobs are waiting; retry after the given seconds",
        {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait"}},
    ),
}
REPORT_RESPONSES: dict[int | str, dict[str, Any]] = {
    **NO_JOB,
    409: {"model": JobProblem, "description": "the job has not finished"},
    500: {"model": JobProblem, "description": "the harness failed on this job (no verdict)"},
}
EVENTS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "one JobStatus as JSON per line, a line per change, until the job is done",
        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
    },
    **NO_JOB,
}
ARTIFACT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the file's bytes",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    },
    404: _err("no such job or artifact"),
}

__all__ = [
    "ARTIFACT_RESPONSES",
    "EVENTS_RESPONSES",
    "NO_JOB",
    "REPORT_RESPONSES",
    "SUBMIT_RESPONSES",
    "UNAUTHORIZED",
    "ErrorDetail",
    "EvaluationReport",
    "GpuMetrics",
    "Health",
    "JobProblem",
    "JobStatus",
    "Metrics",
    "SubmitRequest",
    "SubmittedJob",
]
