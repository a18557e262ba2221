"""Episodes on this machine: a thread per running episode (model calls wait on the network in parallel),
compiles across the CPU cores, the GPU shared through the sandbox's GpuShare (see gpu.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from ptxrag.agent_graph import make_sandbox
from ptxrag.sandbox.protocol import Evaluator

from ..study import Episode
from .base import LockedRetriever, RunContext, run_episode
from .gpu import StagedEvaluator


class LocalExecutor:
    name = "local"

    def __init__(self, workers: int = 4, *, compile_slots: int | None = None, gpu_shared: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        if gpu_shared < 1:
            raise ValueError(f"gpu_shared must be at least 1, not {gpu_shared}")
        self.workers = workers
        self.compile_slots = compile_slots
        self.gpu_shared = gpu_shared
        self.evaluator: Evaluator | None = None

    def _evaluator(self, spec: Evaluator | str) -> Evaluator:
        if spec == "local":
            return StagedEvaluator(
                compile_slots=self.compile_slots, gpu_shared=self.gpu_shared, concurrency=self.workers
            )
        if isinstance(spec, str):
            return make_sandbox(spec)  # a sandbox service schedules its own GPU
        return spec

    def run(self, episodes: Sequence[Episode], ctx: RunContext) -> None:
        if not episodes:
            return
        self.evaluator = self._evaluator(ctx.sandbox)
        retriever = LockedRetriever(ctx.retriever) if ctx.retriever is not None else None
        stop = threading.Event()

        def one(ep: Episode) -> None:
            if stop.is_set():
                return
            ctx.started(ep)
            try:
                result = run_episode(
                    ep,
                    ctx.out,
                    sandbox=self.evaluator,  # type: ignore[arg-type]
                    retriever=retriever,
                    on_event=lambda ev: ctx.event(ep, ev),
                )
            except Exception as e:  # noqa: BLE001 - one episode's failure is recorded, the rest go on
                ctx.failed(ep, e)
                return
            ctx.finished(ep, result)

        pool = ThreadPoolExecutor(max_workers=min(self.workers, len(episodes)), thread_name_prefix="episode")
        futures: set[Future[None]] = {pool.submit(one, ep) for ep in episodes}
        try:
            while futures:
                done, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
                for f in done:
                    f.result()  # one() records its own failures; anything else is a bug worth raising
        except BaseException:
            # Ctrl-C or a bug: start nothing new; running episodes are checkpointed, a re-run resumes them
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        if isinstance(self.evaluator, StagedEvaluator):
            self.evaluator.close()  # its warm GPU workers (a collected sandbox stops them too)
