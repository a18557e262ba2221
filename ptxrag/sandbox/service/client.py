"""Client of the sandbox service. Retries transient failures (connection errors, 5xx, 429 busy) with
tenacity; never retries a verdict: a finished report is final, and resubmitting the same kernel for the same task
returns the same job (the service keys jobs by content)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from ptxrag.base.errors import SandboxFailure

from .config import TOKEN_ENV

if TYPE_CHECKING:
    from ptxrag.sandbox.results import EvaluationReport
    from ptxrag.tasks.spec import TaskSpec


class ServiceError(SandboxFailure, RuntimeError):
    """The service refused or failed a request in a way retrying will not fix."""


class ServiceBusy(SandboxFailure, RuntimeError):
    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"service busy; retry after {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s


class _Transient(RuntimeError):
    pass


def _transient(e: BaseException) -> bool:
    return isinstance(e, (httpx.TransportError, _Transient, ServiceBusy))


def _wait(retry_state: Any) -> float:
    e = retry_state.outcome.exception() if retry_state.outcome else None
    if isinstance(e, ServiceBusy):
        return min(e.retry_after_s, 60.0)
    return wait_exponential(multiplier=0.5, max=10)(retry_state)


class ServiceClient:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float = 3600.0,
        poll_s: float = 0.5,
        retry_for_s: float = 300.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        token = token or os.environ.get(TOKEN_ENV)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=60.0, transport=transport)
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.retry_for_s = retry_for_s

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        for attempt in Retrying(
            retry=retry_if_exception(_transient),
            wait=_wait,
            stop=stop_after_delay(self.retry_for_s),
            reraise=True,
        ):
            with attempt:
                r = self.http.request(method, path, **kw)
                if r.status_code == 429:
                    raise ServiceBusy(float(r.headers.get("Retry-After", "5")))
                if r.status_code == 408 or r.status_code >= 502:  # 408: the body was too slow to arrive
                    raise _Transient(f"{r.status_code} from the service")
                return r
        raise AssertionError("unreachable")

    @staticmethod
    def _check(r: httpx.Response) -> dict[str, Any]:
        if r.status_code == 401:
            raise ServiceError(f"the service needs a bearer token: set {TOKEN_ENV}")
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise ServiceError(f"{r.status_code}: {detail}")
        return r.json()

    def submit(self, task_id: str, source: str, *, run_timing: bool = True) -> dict[str, Any]:
        body = {"task_id": task_id, "source": source, "run_timing": run_timing}
        return self._check(self._request("POST", "/v1/jobs", json=body))

    def status(self, job_id: str) -> dict[str, Any]:
        return self._check(self._request("GET", f"/v1/jobs/{job_id}"))

    def report(self, job_id: str) -> EvaluationReport:
        from ptxrag.sandbox.results import EvaluationReport

        return EvaluationReport.model_validate(self._check(self._request("GET", f"/v1/jobs/{job_id}/report")))

    def wait(self, job_id: str) -> EvaluationReport:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            st = self.status(job_id)
            if st["status"] == "error":
                raise ServiceError(f"the service's harness failed on job {job_id}: {st.get('error')}")
            if st["status"] == "done":
                return self.report(job_id)
            time.sleep(self.poll_s)
        raise ServiceError(f"job {job_id} did not finish within {self.timeout_s:.0f} s")

    def evaluate(self, task: TaskSpec | str, source: str, *, run_timing: bool = True) -> EvaluationReport:
        task_id = task if isinstance(task, str) else task.id
        job = self.submit(task_id, source, run_timing=run_timing)
        return self.wait(job["job_id"])

    def artifacts(self, job_id: str) -> list[str]:
        return self._check(self._request("GET", f"/v1/jobs/{job_id}/artifacts"))  # type: ignore[return-value]

    def artifact(self, job_id: str, name: str) -> bytes:
        r = self._request("GET", f"/v1/jobs/{job_id}/artifacts/{name}")
        if r.status_code >= 400:
            self._check(r)
        return r.content

    def metrics(self) -> dict[str, Any]:
        return self._check(self._request("GET", "/metrics"))

    def close(self) -> None:
        self.http.close()
