"""Service configuration: one typed object, checked before the server starts."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from ptxrag.base.errors import ConfigInputError

TOKEN_ENV = "PTXRAG_SERVICE_TOKEN"


class ServiceConfigError(ConfigInputError, ValueError):
    """The service would start in an unsafe or impossible configuration."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class ServiceConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    gpus: list[str] = field(
        default_factory=list
    )  # CUDA device ids; empty: the visible GPU (if any) as one slot
    workers: int = field(
        default_factory=lambda: max(2, os.cpu_count() or 2)
    )  # concurrent jobs (compiles in parallel)
    max_queue: int = 64  # queued jobs beyond which submissions get 429 + Retry-After
    #: the Retry-After of a 429: ``retry_after_per_job_s`` for each waiting job per worker, at least
    #: ``retry_after_min_s`` (seconds; whole seconds on the wire)
    retry_after_min_s: int = 5
    retry_after_per_job_s: int = 10
    max_source_bytes: int = 256 * 1024
    max_request_bytes: int = 1024 * 1024
    #: seconds a client has to send a request's head (from connecting) and, separately, its body (from the
    #: head); a slower one is cut off (408 for a body), so slow senders cannot hold the connections
    request_timeout_s: float = 30.0
    state_dir: Path | None = None  # SQLite + artifacts; default $PTXRAG_HOME/service
    stage_timeout_s: float | None = None  # override per-stage GPU limits
    #: candidate processes run as a dedicated uid (sandbox_uid_base + job slot) with no network (when root)
    isolate: bool = True
    sandbox_uid_base: int = 64000

    def retry_after_s(self, depth: int) -> int:
        """Seconds a 429 tells the client to wait with ``depth`` jobs waiting."""
        return max(self.retry_after_min_s, self.retry_after_per_job_s * depth // max(1, self.workers))

    @staticmethod
    def read_token(token: str | None = None, token_file: Path | None = None) -> str | None:
        """Explicit token, else a token file, else $PTXRAG_SERVICE_TOKEN."""
        if token:
            return token
        if token_file is not None:
            try:
                text = token_file.read_text().strip()
            except OSError as e:
                raise ServiceConfigError(f"cannot read token file {token_file}: {e}") from e
            if not text:
                raise ServiceConfigError(f"token file {token_file} is empty")
            return text
        return os.environ.get(TOKEN_ENV) or None

    def check(self) -> None:
        if not is_loopback(self.host) and not self.token:
            raise ServiceConfigError(
                f"refusing to listen on {self.host} without a token: set {TOKEN_ENV}, pass --token-file, "
                "or bind to 127.0.0.1"
            )
        if self.workers < 1 or self.max_queue < 1:
            raise ServiceConfigError("workers and max_queue must be at least 1")
        if self.retry_after_min_s < 1 or self.retry_after_per_job_s < 0:
            raise ServiceConfigError(
                "retry_after_min_s must be at least 1 and retry_after_per_job_s at least 0"
            )
        if not (0 < self.request_timeout_s < 86400):  # also refuses nan and inf
            raise ServiceConfigError(
                f"request_timeout_s={self.request_timeout_s} is not a number of seconds between 0 and 86400"
            )
