"""Episodes as Ray tasks, so a cluster of GPU machines runs a study in parallel.

Scheduling: an episode task asks for no CPU (it mostly waits on the model); each evaluation runs its CPU
stages (compile, static check) as a task holding one CPU, and, when they pass and the cluster has GPUs, its
GPU stages as a task holding one whole GPU, so Ray never puts two candidates' GPU stages on one GPU at once
(Ray sets CUDA_VISIBLE_DEVICES for the task; the sandbox uses the first visible GPU). On a cluster without
GPUs the CPU stages are the whole evaluation and the GPU stages say ``skipped: no GPU``.

Resuming needs the bench folder on storage every node sees (episodes checkpoint into OUT/episodes/<id>/).
Only the driver writes the bench database.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ptxrag.agent_graph import EpisodeResult
from ptxrag.base.errors import HarnessError
from ptxrag.sandbox import EvaluationReport
from ptxrag.tasks import TaskSpec

from ..study import Episode
from .base import RunContext, needs_retrieval, run_episode


class RayUnavailable(HarnessError, RuntimeError):
    """Ray is not installed, or the cluster cannot be reached."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable(
            f"the Ray executor needs ray ({e}); install it with: pip install 'ptxrag[ray]'"
        ) from None
    return ray


# -- the remote side ------------------------------------------------------------------------------------
_worker_retriever: Any = None


def _cpu_stages(task: TaskSpec, source: str) -> str:
    from ptxrag.sandbox import Sandbox

    return Sandbox(gpu=False).evaluate(task, source).model_dump_json()


def _gpu_stages(task: TaskSpec, source: str) -> str:
    from ptxrag.sandbox import Sandbox

    return Sandbox().evaluate(task, source).model_dump_json()


class RayStagedEvaluator:
    """Evaluate in two Ray tasks: CPU stages on any CPU, then GPU stages on a GPU of their own."""

    def __init__(self, use_gpu: bool) -> None:
        ray = _ray()
        self.use_gpu = use_gpu
        self._cpu = ray.remote(num_cpus=1, max_retries=2)(_cpu_stages)
        self._gpu = ray.remote(num_cpus=1, num_gpus=1, max_retries=2)(_gpu_stages)

    def evaluate(self, task: TaskSpec, source: str) -> EvaluationReport:
        ray = _ray()
        first = EvaluationReport.model_validate_json(ray.get(self._cpu.remote(task, source)))
        if not self.use_gpu or first.first_failure is not None:
            return first
        return EvaluationReport.model_validate_json(ray.get(self._gpu.remote(task, source)))


def _episode_task(ep: Episode, out: str, sandbox: str, use_gpu: bool, retrieve: bool) -> str:
    global _worker_retriever
    retriever = None
    if retrieve:
        if _worker_retriever is None:  # one per worker process, reused by its later episodes
            from ptxrag.agent_graph import default_retriever

            _worker_retriever = default_retriever()
        retriever = _worker_retriever
    evaluator: Any = RayStagedEvaluator(use_gpu) if sandbox == "local" else sandbox
    result = run_episode(ep, Path(out), sandbox=evaluator, retriever=retriever)
    return result.model_dump_json()


# -- the driver side ------------------------------------------------------------------------------------
class RayExecutor:
    name = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        workers: int = 16,
        num_cpus: int | None = None,
        num_gpus: int | None = None,
        object_store_mb: int = 256,
        poll_s: float = 0.5,
    ) -> None:
        """``address``: a running cluster (``auto``, ``ray://host:10001``); None starts a local instance with
        ``num_cpus`` CPUs, ``num_gpus`` GPUs (default: those it detects) and a small object store (results are small JSON strings). ``workers``: episodes
        in flight at once."""
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.address = address
        self.workers = workers
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.object_store_mb = object_store_mb
        self.poll_s = poll_s
        self.used_gpu: bool | None = None

    def _init(self) -> bool:
        """Connect or start; True when this call started Ray (and so must shut it down)."""
        ray = _ray()
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if self.address:
            kwargs["address"] = self.address
        else:
            kwargs["num_cpus"] = self.num_cpus
            kwargs["num_gpus"] = self.num_gpus
            kwargs["object_store_memory"] = self.object_store_mb * 1024 * 1024
        try:
            ray.init(**kwargs)
        except Exception as e:  # noqa: BLE001 - name the cluster and the cause
            where = self.address or "a local Ray instance"
            raise RayUnavailable(f"could not start or reach {where}: {type(e).__name__}: {e}") from e
        return True

    def run(self, episodes: Sequence[Episode], ctx: RunContext) -> None:
        if not episodes:
            return
        if not isinstance(ctx.sandbox, str):
            raise ValueError("the Ray executor takes --sandbox local or a sandbox URL, not an object")
        ray = _ray()
        started_here = self._init()
        try:
            self.used_gpu = ray.cluster_resources().get("GPU", 0) >= 1
            retrieve = needs_retrieval(episodes)
            task = ray.remote(num_cpus=0, max_retries=3)(_episode_task)
            todo = list(episodes)
            inflight: dict[Any, Episode] = {}
            try:
                while todo or inflight:
                    while todo and len(inflight) < self.workers:
                        ep = todo.pop(0)
                        ctx.started(ep)
                        ref = task.remote(ep, str(ctx.out), ctx.sandbox, self.used_gpu, retrieve)
                        inflight[ref] = ep
                    ready, _ = ray.wait(list(inflight), num_returns=1, timeout=self.poll_s)
                    for ref in ready:
                        ep = inflight.pop(ref)
                        try:
                            result = EpisodeResult.model_validate_json(ray.get(ref))
                        except Exception as e:  # noqa: BLE001 - a failed task is recorded; the rest go on
                            ctx.failed(ep, _unwrap(e))
                            continue
                        ctx.finished(ep, result)
            except BaseException:
                for ref in inflight:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
                raise
        finally:
            if started_here:
                ray.shutdown()


def _unwrap(e: BaseException) -> BaseException:
    """The user's exception inside a RayTaskError, when there is one."""
    cause = getattr(e, "cause", None)
    return cause if isinstance(cause, BaseException) else e
