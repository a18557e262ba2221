"""GPU worker: correctness and timing of one candidate against the task's PyTorch reference.

Needs only the standard library and torch, so it runs by path in any CUDA container:
    python worker.py CMD_FD RESULT_FD
It starts the candidate's own process (runner.py: no PyTorch, forbidden libraries refused by an rtld audit,
every kernel's stream recorded by CUPTI), imports torch, creates the CUDA context and says {"ready": true},
so the parent can compile the candidate meanwhile. The worker owns every buffer (shared with the candidate's
process through CUDA IPC), the references and the checks; the candidate's process only makes the calls. The parent sends one JSON command per line on CMD_FD and reads one JSON result per line
on RESULT_FD (stdout and stderr belong to the candidate and are captured to a file). Commands:
    {"cmd": "load", "job": path}                 load the candidate library and the task reference
    {"cmd": "correctness", "save_inputs": dir}   fresh inputs per check set; saves the first set's inputs
    {"cmd": "timing"}                            candidate vs baseline, same timer; recheck on unseen inputs
    {"cmd": "exit"}
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import math
import os
import secrets
import select
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable

try:
    from . import abi, protocol  # type: ignore[no-redef]
except ImportError:  # run by path
    import abi  # type: ignore[no-redef]
    import protocol  # type: ignore[no-redef]

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
else:
    torch: Any = None  # imported by main() once the candidate's process is starting (they overlap)

INT_POISON = -0x5EADBEEF  # fits int32/int64; unsigned and small ints use their max value
GUARD_BYTES = 1 << 16  # random bytes before and after every tensor: a write outside a tensor changes them
SAMPLES_PER_OUTPUT = 64  # output positions re-poisoned before and verified after every timed repetition
TIMING_SLOTS = 3  # buffer sets rotated through the timed loop
TIMING_CONTENTS = 3  # distinct input contents moved between the slots (so a pointer never keys a result)
FULL_CHECKS = 2  # timed repetitions whose whole output is verified
RECORDED_SHARE = 4  # one timed repetition in this many runs with the CUPTI stream record (not in the median)
RECORDED_MIN = 3
START_TIMEOUT_S = 60.0  # the candidate's process: interpreter, CUDA context, CUPTI
#: forbid process creation in the candidate's process from the load of its library on (nospawn.py); set by
#: the evaluator (worker_client.child_env) when SandboxConfig.forbid_process_creation is on (the default)
NO_SPAWN = os.environ.get("PTXRAG_SANDBOX_NO_SPAWN") == "1"
#: the baseline's timings by the job's ``baseline_key`` (task content, timing shape): measured once per worker
BASELINES: dict[str, tuple[float, float]] = {}
PR_SET_DUMPABLE = 4
HANG_MIN_S = 1.0  # a mutant's call is stuck after max(HANG_MIN_S, HANG_FACTOR x the candidate's slowest call)
HANG_FACTOR = 20.0


#: name fragments of the libraries the candidate's process may not load (the rtld audit refuses them)
FORBIDDEN_LIBRARIES = (
    "libcublas",
    "libcudnn",
    "libtorch",
    "libc10",
    "libcufft",
    "libcusparse",
    "libcusolver",
    "libcurand",
    "libnvrtc",
    "libnvJitLink",
    "libnvptxcompiler",
    "libtriton",
)


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


class CandidateProcess:
    """The candidate's process (runner.py) and its line protocol, seen from the worker."""

    def __init__(self, workdir: str, tag: str = "candidate", timeout_s: float | None = None) -> None:
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ)
        audit = os.path.join(here, "audit.so")
        self.audit_log = os.path.join(workdir, f"audit-{tag}.log") if os.path.isfile(audit) else None
        #: seconds one reply may take (None: wait; the evaluator's deadline then stops the whole worker)
        self.timeout_s = timeout_s
        if self.audit_log:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.audit_log)  # a file of that name planted by an earlier job's candidate
            env["LD_AUDIT"] = audit
            env["PTXRAG_AUDIT_LOG"] = self.audit_log
            env["PTXRAG_AUDIT_FORBID"] = ":".join(FORBIDDEN_LIBRARIES)
        monitor = os.path.join(here, "monitor.so")
        self.monitor = monitor if os.path.isfile(monitor) else None
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(here, "runner.py"), str(cmd_r), str(res_w)],
            pass_fds=(cmd_r, res_w),
            env=env,
            cwd=workdir,
        )
        os.close(cmd_r)
        os.close(res_w)
        self.buf = b""
        self.started = False
        self.closed = False
        self.rt = ctypes.CDLL(abi.find_cudart())
        self.rt.cudaIpcGetMemHandle.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cu.cuMemGetAddressRange_v2.argtypes = [
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_uint64,
        ]
        self.bases: dict[int, int] = {}  # allocation base here -> its base in the candidate's process
        #: the only allocation bases this process may map (ExposedMemory.segments); None: no restriction
        self.exportable: set[int] | None = None
        self.next_id = 0

    def ask(self, cmd: dict) -> dict:
        if not self.started:
            hello = self._read(START_TIMEOUT_S)
            if not hello.get("ok"):
                raise HarnessError(hello.get("error", "the candidate process did not start"))
            self.started = True
        os.write(self.cmd_w, (json.dumps(cmd) + "\n").encode())
        return self._read()

    def _read(self, timeout_s: float | None = None) -> dict:
        limit = timeout_s if timeout_s is not None else self.timeout_s
        deadline = None if limit is None else time.monotonic() + limit
        while b"\n" not in self.buf:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                self.proc.kill()
                self.proc.wait()
                raise CandidateHang(f"did not finish within {limit:.1f} s (a kernel that never ends?)")
            ready, _, _ = select.select([self.res_r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.res_r, 1 << 20)
            if not chunk:
                self.proc.wait()
                raise CandidateCudaError(
                    f"the candidate's process {exit_text(self.proc.returncode)} during a call"
                )
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def checked(self, cmd: dict) -> dict:
        res = self.ask(cmd)
        if not res.get("ok"):
            kind, err = res.get("kind"), res.get("error", "unknown error")
            if kind == "cuda":
                raise CandidateCudaError(err)
            if kind == "load":
                raise CandidateLoadError(err)
            raise HarnessError(f"candidate process: {err}")
        return res

    def load(self, library: str) -> list[str]:
        res = self.checked(
            {
                "op": "load",
                "library": library,
                "monitor": self.monitor,
                "audit_log": self.audit_log,
                "no_spawn": NO_SPAWN,
            }
        )
        return list(res.get("audit", []))

    def remote_ptr(self, ptr: int) -> int:
        """The address of ``ptr`` (inside a PyTorch allocation) in the candidate's process. CUDA IPC maps the
        whole allocation, so only allocations of the exposed pool (``exportable``) are ever shared."""
        base = allocation_base(self.cu, ptr)
        if base not in self.bases:
            if self.exportable is not None and base not in self.exportable:
                raise HarnessError(
                    f"refused to share allocation {base:#x} with the candidate: it is not one of the exposed "
                    "pool's (private tensors may lie in it)"
                )
            handle = ctypes.create_string_buffer(64)
            rc = self.rt.cudaIpcGetMemHandle(handle, ctypes.c_void_p(base))
            if rc != 0:
                raise HarnessError(f"cudaIpcGetMemHandle failed ({rc})")
            res = self.checked({"op": "map", "handles": [handle.raw.hex()]})
            self.bases[base] = int(res["ptrs"][0])
        return self.bases[base] + (ptr - base)

    def prepare(self, inputs: list, outputs: list, scalars: list[float], workspace) -> int:
        def desc(x: torch.Tensor) -> list:
            return [
                self.remote_ptr(x.data_ptr()),
                str(x.dtype).removeprefix("torch."),
                list(x.shape),
                list(x.stride()),
            ]

        ws = [self.remote_ptr(workspace.data_ptr()), workspace.numel()] if workspace is not None else None
        k = self.next_id
        self.next_id += 1
        self.checked(
            {
                "op": "prepare",
                "id": k,
                "inputs": [desc(x) for x in inputs],
                "outputs": [desc(x) for x in outputs],
                "scalars": scalars,
                "workspace": ws,
            }
        )
        return k

    def call(self, k: int, wall: bool = False, record: bool = True) -> dict:
        res = self.checked({"op": "call", "id": k, "wall": wall, "record": record})
        if res.get("rc", 0) != 0:
            raise CandidateError(res.get("error") or abi.describe_rc(res["rc"]))
        if res.get("violations"):
            raise CandidateViolation("; ".join(res["violations"]))
        return res

    def close(self) -> None:
        if getattr(self, "closed", False):
            return  # closed already: its fd numbers may belong to another process's pipes by now
        self.closed = True
        with contextlib.suppress(OSError):
            os.write(self.cmd_w, b'{"op": "exit"}\n')
        for fd in (self.cmd_w, self.res_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def children_of(pid: int, proc: str = "/proc") -> set[int]:
    """The live children of ``pid`` (every thread's: a subreaper's adopted orphans go to any of its threads)."""
    out: set[int] = set()
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"{proc}/{pid}/task/{tid}/children") as f:
                out |= {int(c) for c in f.read().split()}
        except (OSError, ValueError):
            continue
    return out


def ended(pid: int, proc: str = "/proc") -> bool:
    """Dead and waiting to be reaped (a zombie): it does no work any more. Unreadable is not ended (a live
    process of another uid, a test's fake /proc). Not containment._is_zombie: this file runs inside the
    sandbox without ptxrag, and there an unreadable process must count as running, not as gone."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
        return data[data.rfind(")") + 2 :].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


def stray_processes(runners: set[int], me: int | None = None, proc: str = "/proc") -> list[int]:
    """Processes in this worker's tree that are none of its candidate processes ``runners``: anything a
    runner started (its descendants) and any child of the worker that is not a runner (the worker is a
    subreaper, so a descendant that left its parent, double fork and setsid included, becomes its child).
    A process the candidate leaves running is work outside the calling process and out of every per-process
    record (CUPTI, the rtld audit: a helper may exec with a clean environment and load cuBLAS). A zombie is
    not one: it has ended (the last job's leftover, killed by the sweep and not reaped yet, is one until the
    worker reaps it; a candidate could always wait for a helper it started)."""
    me = os.getpid() if me is None else me
    stray = children_of(me, proc) - runners
    todo = [*stray, *runners]
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        kids = children_of(pid, proc)
        stray |= kids
        todo += kids
    return sorted(p for p in stray if not ended(p, proc))


def reap_orphans(wait_s: float = 2.0) -> None:
    """Reap this process's ended children (its candidate processes are closed when this is called; the
    parent's sweep has waited for its victims to die). Unreaped, a leftover of the last job would stay in
    this process's tree while the next job runs."""
    deadline = time.monotonic() + wait_s
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        left = children_of(os.getpid())
        if all(not ended(p) for p in left) or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def allocation_base(cu: ctypes.CDLL, ptr: int) -> int:
    """The base address of the cudaMalloc allocation holding ``ptr`` (what CUDA IPC shares whole)."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    rc = cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr))
    if rc != 0:
        raise HarnessError(f"cuMemGetAddressRange failed ({rc})")
    return int(base.value)


class ExposedMemory:
    """The allocations the candidate's process maps (inputs, outputs, workspace), from a pool of their own.

    CUDA IPC shares a whole cudaMalloc allocation, and PyTorch's caching allocator carves many tensors out of
    one (2 MiB segments for small tensors, 20 MiB ones for medium tensors, freed blocks reused for later
    ones), and the candidate's process keeps every mapping for the whole job. Sharing an input from the default
    pool therefore shared whatever lay in its segment then or later: the private copy the reference is computed
    from and the inputs are compared with, the references, the timed repetitions' gathered samples. A kernel
    that found the private copy of its input (a byte-equal region near it) could zero both: the inputs look
    unchanged and the reference of zeros agrees with its zeros. Tensors allocated here come from a
    ``torch.cuda.MemPool``, whose segments hold only tensors allocated in it, and nothing private ever is.
    ``segments`` are their allocation bases: the only ones the worker shares (CandidateProcess.remote_ptr).
    """

    def __init__(self, device: torch.device, base_of: Callable[[int], int]) -> None:
        self.device = device
        pool_cls = getattr(torch.cuda, "MemPool", None)
        self.pool = pool_cls() if pool_cls is not None else None
        self.segments: set[int] = set()
        self.base_of = base_of

    def empty(self, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised tensor in the exposed pool (fill it outside: temporaries must stay private)."""
        ctx = (
            torch.cuda.use_mem_pool(self.pool, device=self.device)
            if self.pool is not None
            else contextlib.nullcontext()
        )
        with ctx:
            x = torch.empty(shape, dtype=dtype, device=self.device)
        if x.numel():
            self.segments.add(self.base_of(x.data_ptr()))
        return x


def exit_text(returncode: int | None) -> str:
    """How a child process ended, with the signal's name (SIGSEGV, SIGKILL...)."""
    if returncode is not None and returncode < 0:
        if NO_SPAWN and -returncode == signal.SIGSYS:
            return (
                "was killed by SIGSYS: it tried to create a process or run a program (forbidden: nospawn.py)"
            )
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"


class Runners:
    """Candidate processes started ahead of need: the interpreter, CUDA context and CUPTI take about a second,
    so a spare starts while the GPU is busy with something else. Spares are only ever started while no
    candidate code runs (after a job's processes are swept) or for the job whose candidate is running."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.spares: list[CandidateProcess] = []
        self.started = 0
        self.every: list[CandidateProcess] = []

    def _new(self) -> CandidateProcess:
        self.started += 1
        c = CandidateProcess(self.workdir, tag=f"runner-{self.started}")
        self.every.append(c)
        return c

    def live_pids(self) -> set[int]:
        """The candidate processes this worker started that still run (spares included)."""
        self.every = [c for c in self.every if c.proc.poll() is None]
        return {c.proc.pid for c in self.every}

    def fill(self, n: int) -> None:
        while len(self.spares) < n:
            self.spares.append(self._new())

    def take(self, timeout_s: float | None = None) -> CandidateProcess:
        while self.spares:
            c = self.spares.pop(0)
            if c.proc.poll() is None:
                c.timeout_s = timeout_s
                return c
            c.close()  # a spare that died before use (killed from outside): never handed out
        c = self._new()
        c.timeout_s = timeout_s
        return c

    def close(self) -> None:
        for c in self.spares:
            c.close()
        self.spares = []


class Worker:
    def __init__(self, job: dict, runners: Runners) -> None:
        self.job = job
        self.device = torch.device("cuda", 0)
        self.runners = runners
        self.cand = cand = runners.take()
        self.main = cand
        # everything the candidate's processes map comes from here, and nothing else is ever shared with them
        self.exposed = ExposedMemory(self.device, lambda p: allocation_base(cand.cu, p))
        cand.exportable = self.exposed.segments
        self.call_wall_max = 0.0  # the longest checked call of the candidate itself (s): mutants' hang limit
        # the reference first: no code of the candidate has run yet (its library's constructors run at load)
        spec = importlib.util.spec_from_file_location("ptxrag_task_reference", job["reference_file"])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {job['reference_file']}")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self.reference = getattr(mod, job["reference_function"])
        self.baseline = getattr(mod, job["baseline_function"], None)
        refused = cand.load(job["library"])
        if refused:
            raise CandidateViolation("; ".join(refused))
        self.stream = torch.cuda.Stream(device=self.device)
        self.scalars = {s["name"]: float(s["value"]) for s in job["scalars"]}
        self.guards: list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.saved_ref: dict[str, torch.Tensor] | None = None
        ws = int(job.get("workspace_bytes", 0))
        self.workspace = self.exposed.empty([ws], torch.uint8) if ws else None
        if self.workspace is not None:
            self.workspace.zero_()

    def close(self) -> None:
        """End the job: the candidate's process goes; torch's cached blocks of this job's buffers too."""
        self.cand.close()
        self.guards = []
        self.saved_ref = None
        self.workspace = None
        torch.cuda.synchronize()
        self.exposed.pool = None  # every exposed tensor is gone: the pool and its segments go with it
        torch.cuda.empty_cache()

    # -- tensors --------------------------------------------------------------------------------------
    def shape(self, t: dict, dims: dict) -> list[int]:
        return [d if isinstance(d, int) else int(dims[d]) for d in t["shape"]]

    def fill_input(self, x: torch.Tensor, init: dict, gen: torch.Generator) -> None:
        kind = init.get("kind", "normal")
        if kind == "randint":
            lo, hi = int(init.get("low", -1)), int(init.get("high", 1))
            x.copy_(torch.randint(lo, hi, x.shape, generator=gen, device=self.device, dtype=torch.int64))
        elif kind == "uniform":
            flo, fhi = float(init.get("low", -1.0)), float(init.get("high", 1.0))
            x.copy_(
                torch.rand(x.shape, generator=gen, device=self.device, dtype=torch.float32) * (fhi - flo)
                + flo
            )
        else:
            m, s = float(init.get("mean", 0.0)), float(init.get("std", 1.0))
            x.copy_(torch.randn(x.shape, generator=gen, device=self.device, dtype=torch.float32) * s + m)

    def guarded(self, shape: list[int], dtype: torch.dtype, name: str) -> torch.Tensor:
        """A contiguous tensor inside a larger allocation whose bytes before and after it are random and
        remembered: ``guards_intact`` finds any write outside the tensor (within GUARD_BYTES of it)."""
        numel = 1
        for d in shape:
            numel *= d
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        raw = self.exposed.empty([2 * GUARD_BYTES + nbytes], torch.uint8)
        gen = torch.Generator(device=self.device)
        gen.manual_seed(secrets.randbits(63))
        raw.copy_(torch.randint(0, 256, raw.shape, generator=gen, device=self.device, dtype=torch.uint8))
        x = raw[GUARD_BYTES : GUARD_BYTES + nbytes].view(dtype).view(shape)
        self.guards.append((name, raw, raw[:GUARD_BYTES].clone(), raw[GUARD_BYTES + nbytes :].clone()))
        return x

    def guards_intact(self) -> str | None:
        """None, or which allocation's guard bytes the candidate overwrote."""
        for name, raw, before, after in self.guards:
            n = before.numel()
            if not torch.equal(raw[:n], before):
                return f"wrote outside its tensors: the {n} bytes just before {name} changed"
            if not torch.equal(raw[raw.numel() - after.numel() :], after):
                return f"wrote outside its tensors: the {after.numel()} bytes just after {name} changed"
        return None

    def make_inputs(self, dims: dict, seed: int, guard: bool = True) -> dict[str, torch.Tensor]:
        """Fresh inputs; ``guard=False`` for private contents the candidate never sees."""
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        out = {}
        for t in self.job["inputs"]:
            shape, dtype = self.shape(t, dims), _dtype(t["dtype"])
            if guard:
                x = self.guarded(shape, dtype, f"input {t['name']!r}")
            else:
                x = torch.empty(shape, dtype=dtype, device=self.device)
            self.fill_input(x, t.get("init", {}), gen)
            out[t["name"]] = x
        return out

    @staticmethod
    def private_copy(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Copies the candidate never sees: the reference runs on these, and the inputs are compared to them."""
        return {k: v.clone() for k, v in inputs.items()}

    @staticmethod
    def inputs_changed(inputs: dict[str, torch.Tensor], private: dict[str, torch.Tensor]) -> str | None:
        for k, v in inputs.items():
            a, b = v.reshape(-1).view(torch.uint8), private[k].reshape(-1).view(torch.uint8)
            if not torch.equal(a, b):
                n = int((a != b).sum())
                return f"modified its input {k!r} ({n} of {a.numel()} bytes changed); inputs are read-only"
        return None

    def refill_inputs(self, inputs: dict[str, torch.Tensor], seed: int) -> None:
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        for t in self.job["inputs"]:
            self.fill_input(inputs[t["name"]], t.get("init", {}), gen)

    def poison(self, x: torch.Tensor) -> None:
        if x.is_floating_point():
            x.fill_(float("nan"))
        elif x.dtype in (torch.int32, torch.int64):
            x.fill_(INT_POISON)
        else:
            x.fill_(torch.iinfo(x.dtype).max)

    def make_outputs(self, dims: dict) -> dict[str, torch.Tensor]:
        out = {}
        for t in self.job["outputs"]:
            x = self.guarded(self.shape(t, dims), _dtype(t["dtype"]), f"output {t['name']!r}")
            self.poison(x)
            out[t["name"]] = x
        return out

    def call(self, inputs: dict, outputs: dict) -> int:
        """Register one call's tensors with the candidate's process; returns the call's id there."""
        return self.cand.prepare(
            [inputs[t["name"]] for t in self.job["inputs"]],
            [outputs[t["name"]] for t in self.job["outputs"]],
            [self.scalars[s["name"]] for s in self.job["scalars"]],
            self.workspace,
        )

    def run_candidate(self, call: int, wall: bool = False, record: bool = True) -> dict:
        """One call in the candidate's process, after everything queued here is done; returns its times.
        ``record``: with the CUPTI stream record (every checked call; a random share of the timed ones)."""
        torch.cuda.synchronize()
        res = self.cand.call(call, wall, record)
        stray = stray_processes(self.runners.live_pids())
        if stray:
            raise CandidateViolation(
                f"ptxrag_launch left {len(stray)} process(es) running (pid {', '.join(map(str, stray[:3]))}): "
                "do the work in the calling process; a process of its own is outside every check"
            )
        return res

    def run_reference(self, inputs: dict) -> dict[str, torch.Tensor]:
        if self.job.get("precision", "float64") == "float64":
            inputs = {k: (v.double() if v.is_floating_point() else v) for k, v in inputs.items()}
        with torch.no_grad():
            ref = self.reference(inputs, dict(self.scalars))
        if isinstance(ref, torch.Tensor):
            ref = {self.job["outputs"][0]["name"]: ref}
        return ref

    # -- comparison ---------------------------------------------------------------------------------------
    def compare(self, name: str, out: torch.Tensor, ref: torch.Tensor) -> dict:
        spec: dict = next((t for t in self.job["outputs"] if t["name"] == name), {})
        tol = spec.get("tolerance") or self.job["tolerance"]  # the output's own, else the task's
        res: dict = {"output": name, "numel": out.numel()}
        if tuple(ref.shape) != tuple(out.shape):
            res.update(
                passed=False, error=f"reference shape {tuple(ref.shape)} != output shape {tuple(out.shape)}"
            )
            return res
        if out.is_floating_point():
            poisoned = torch.isnan(out)
            o = out.double()
        else:
            poison_val = INT_POISON if out.dtype in (torch.int32, torch.int64) else torch.iinfo(out.dtype).max
            poisoned = out == poison_val
            o = out.double()
        r = ref.to(self.device).double()
        ref_nan = torch.isnan(r)
        unwritten = int((poisoned & ~ref_nan).sum())
        nonfinite = int((~torch.isfinite(o) & torch.isfinite(r) & ~poisoned).sum())
        err = (o - r).abs()
        err = torch.where(torch.isnan(err) & ~(torch.isnan(o) & ref_nan), torch.full_like(err, math.inf), err)
        # equal values (an infinite reference included: inf - inf is NaN) and NaN where the reference is NaN
        err = torch.where((torch.isnan(o) & ref_nan) | (o == r), torch.zeros_like(err), err)
        # a tolerance scales a finite reference only: atol + rtol * inf is inf (and NaN with rtol = 0), which
        # accepted any value, NaN or unwritten included, wherever the reference is infinite
        allowed = torch.where(torch.isfinite(r), tol["atol"] + tol["rtol"] * r.abs(), torch.zeros_like(r))
        bad = err > allowed
        mism = int(bad.sum())
        flat = int(torch.argmax(torch.where(bad, err - allowed, err)).item()) if out.numel() else 0
        idx = list(torch.unravel_index(torch.tensor(flat), out.shape)) if out.numel() else []
        finite_err = err[torch.isfinite(err)]
        max_abs = float(finite_err.max()) if finite_err.numel() else 0.0
        rel = err / r.abs().clamp_min(1e-30)
        finite_rel = rel[torch.isfinite(rel)]
        res.update(
            passed=(mism == 0),
            max_abs_err=(math.inf if (err == math.inf).any() else max_abs),
            max_rel_err=float(finite_rel.max()) if finite_rel.numel() else 0.0,
            worst_index=[int(i) for i in idx],
            worst_value=float(o.flatten()[flat]) if out.numel() else None,
            expected_value=float(r.flatten()[flat]) if out.numel() else None,
            mismatches=mism,
            unwritten=unwritten,
            nonfinite=nonfinite,
        )
        return res

    def check_once(self, dims: dict, label: str, save_dir: str | None = None) -> list[dict]:
        seed = secrets.randbits(63)
        self.guards = []
        inputs = self.make_inputs(dims, seed)
        private = self.private_copy(inputs)
        outputs = self.make_outputs(dims)
        call = self.call(inputs, outputs)
        try:
            t0 = time.monotonic()
            self.run_candidate(call)
            if self.cand is self.main:
                self.call_wall_max = max(self.call_wall_max, time.monotonic() - t0)
        except CandidateViolation as e:
            return [
                {"output": t["name"], "passed": False, "error": str(e), "label": label, "dims": dims}
                for t in self.job["outputs"][:1]
            ]
        tampered = self.inputs_changed(inputs, private) or self.guards_intact()
        if tampered:
            return [
                {"output": t["name"], "passed": False, "error": tampered, "label": label, "dims": dims}
                for t in self.job["outputs"][:1]
            ]
        if save_dir:
            self.save_inputs(private, outputs, save_dir)
        ref = self.run_reference(private)
        if save_dir:
            self.saved_ref = {k: v.to(self.device) for k, v in ref.items()}
        results = []
        for t in self.job["outputs"]:
            name = t["name"]
            if name not in ref:
                raise RuntimeError(f"task reference returned no output named {name!r}")
            r = self.compare(name, outputs[name], ref[name])
            r.update(label=label, dims=dims, seed=seed)
            results.append(r)
        return results

    def save_inputs(self, inputs: dict, outputs: dict, save_dir: str) -> None:
        os.makedirs(save_dir, exist_ok=True)
        tensors = []
        for t in self.job["inputs"]:
            x = inputs[t["name"]].contiguous()
            path = os.path.join(save_dir, f"in_{t['name']}.bin")
            with open(path, "wb") as f:
                f.write(x.view(torch.uint8).cpu().numpy().tobytes())
            tensors.append(
                {
                    "file": path,
                    "dtype": t["dtype"],
                    "shape": list(x.shape),
                    "strides": list(x.stride()),
                    "output": False,
                }
            )
        for t in self.job["outputs"]:
            x = outputs[t["name"]]
            tensors.append(
                {
                    "file": os.path.join(save_dir, f"out_{t['name']}.bin"),
                    "dtype": t["dtype"],
                    "shape": list(x.shape),
                    "strides": list(x.stride()),
                    "output": True,
                }
            )
        launch = {
            "library": self.job["library"],
            "tensors": tensors,
            "scalars": [self.scalars[s["name"]] for s in self.job["scalars"]],
            "workspace_bytes": int(self.job.get("workspace_bytes", 0)),
            # the library and the unprofiled calls before the profiled one come from the evaluator's command
            # line (stages/execution.py): this file is writable by the candidate's processes
        }
        with open(os.path.join(save_dir, "launch.json"), "w") as f:
            json.dump(launch, f)

    def correctness(self, cmd: protocol.CorrectnessCommand) -> protocol.ChecksReply:
        checks = []
        for i, dims in enumerate(self.job["check_dims"]):
            label = f"check {i + 1}" + (" (awkward shape)" if i in self.job.get("awkward", []) else "")
            checks += self.check_once(dims, label, cmd.get("save_inputs") if i == 0 else None)
        self.retire_candidate()
        return {"ok": True, "checks": checks}

    def retire_candidate(self) -> None:
        """End the checked candidate process once its checks are done: no code of the candidate runs beside
        the profiled launch and the mutants (a thread of it, named like a driver thread to pass the thread
        check, could rewrite the profiler's report in the job's folder, or inputs a later process reads).
        The timing stage loads the library into a fresh process (``ensure_candidate``); a spare starts now."""
        self.cand.close()
        self.runners.fill(1)

    def hand_over(self, c: CandidateProcess) -> CandidateProcess:
        """A fresh candidate process (a mutant's, the timing stage's) gets what the first one got: only the
        exposed pool to map and a zero-filled workspace. The workspace outlives processes: what an earlier
        process left there told a mutant that it is one (and carried anything else from process to process)."""
        c.exportable = self.exposed.segments
        if self.workspace is not None:
            self.workspace.zero_()
        return c

    def ensure_candidate(self) -> CandidateProcess:
        """The candidate's process for the next calls: the current one, or a fresh one with the library loaded
        when the last was retired."""
        if getattr(self.cand, "closed", False):
            c = self.hand_over(self.runners.take())
            refused = c.load(self.job["library"])
            if refused:
                c.close()
                raise CandidateViolation("; ".join(refused))
            self.cand = self.main = c
        return self.cand

    def mutant(self, cmd: protocol.MutantCommand) -> protocol.MutantReply:
        """The correctness checks of a mutant library, in a fresh candidate process of its own (this
        worker's inputs, references and its candidate's process stay). ``outcome``: "checks" (with the
        checks), or what stopped it: "hung", "faulted", "violation", "error", "not loaded"."""
        main = self.cand
        m = self.hand_over(self.runners.take(timeout_s=float(cmd["limit_s"])))
        self.runners.fill(int(cmd.get("spares", 1)))  # the next mutant's process starts while this one runs
        self.cand = m
        try:
            refused = m.load(cmd["library"])
            if refused:
                return {"ok": True, "outcome": "violation", "error": "; ".join(refused)}
            # a mutant whose call takes far longer than the candidate's slowest checked call is stuck (an
            # mbarrier that never completes): cut off at that bound, not at the stage's deadline
            m.timeout_s = min(float(cmd["limit_s"]), max(HANG_MIN_S, HANG_FACTOR * self.call_wall_max))
            checks = []
            for i, dims in enumerate(self.job["check_dims"]):
                checks += self.check_once(dims, f"check {i + 1}")
                if not all(c["passed"] for c in checks):
                    break  # one wrong check shows the output changed; the other shapes add nothing
            return {"ok": True, "outcome": "checks", "checks": checks}
        except CandidateHang as e:
            return {"ok": True, "outcome": "hung", "error": str(e)}
        except CandidateCudaError as e:
            return {"ok": True, "outcome": "faulted", "error": str(e)[:500]}
        except CandidateViolation as e:
            return {"ok": True, "outcome": "violation", "error": str(e)}
        except CandidateError as e:
            return {"ok": True, "outcome": "error", "error": str(e)}
        except CandidateLoadError as e:
            return {"ok": True, "outcome": "not loaded", "error": str(e)}
        finally:
            self.cand = main
            m.close()

    def verify_profiled(self, cmd: protocol.VerifyProfiledCommand) -> protocol.ChecksReply:
        """Compare the outputs the profiled launch wrote with the reference of the same inputs: the
        instruction counts only count when they come from a call whose result is right."""
        if self.saved_ref is None:
            raise RuntimeError("no saved reference: run correctness with save_inputs first")
        results = []
        for t in self.job["outputs"]:
            ref = self.saved_ref[t["name"]]
            path = os.path.join(cmd["dir"], f"out_{t['name']}.bin")
            try:
                with open(path, "rb") as f:
                    data = bytearray(f.read())
            except OSError as e:
                results.append({"output": t["name"], "passed": False, "error": f"no output saved: {e}"})
                continue
            dtype = _dtype(t["dtype"])
            want = ref.numel() * torch.empty((), dtype=dtype).element_size()
            if len(data) != want:
                results.append({"output": t["name"], "passed": False, "error": "output size differs"})
                continue
            out = torch.frombuffer(data, dtype=torch.uint8).view(dtype).view(ref.shape).to(self.device)
            r = self.compare(t["name"], out, ref)
            r.update(label="profiled launch", dims={})
            results.append(r)
        return {"ok": True, "checks": results}

    # -- timing ---------------------------------------------------------------------------------------------
    def timing(self, cmd: protocol.TimingCommand) -> protocol.TimingReply:
        """Candidate and baseline through the same timed loop, every repetition doing the real work.

        TIMING_SLOTS buffer sets (each input and output guarded) take turns; before each repetition one of
        TIMING_CONTENTS private input contents is copied into the slot (so neither a pointer nor a slot
        predicts the result), the slot's outputs are poisoned whole and L2 is flushed, all outside the
        timed window. After each repetition SAMPLES_PER_OUTPUT output positions are gathered (outside the
        window) and later compared with the reference of the content that repetition saw; FULL_CHECKS
        random repetitions have their whole output compared. Inputs must be unchanged and guards intact.
        """
        t = self.job["timing"]
        dims = self.job["timing_dims"]
        reps, warmup = int(t["reps"]), int(t["warmup"])
        self.ensure_candidate()
        self.guards = []
        # private contents (never shown to the candidate: no guards, no second copy)
        contents = [self.make_inputs(dims, secrets.randbits(63), guard=False) for _ in range(TIMING_CONTENTS)]
        refs = [self.run_reference(c) for c in contents]
        slots = []
        for _ in range(TIMING_SLOTS):
            ins = self.make_inputs(dims, secrets.randbits(63))
            outs = self.make_outputs(dims)
            slots.append((ins, outs, self.call(ins, outs)))
        names = [o["name"] for o in self.job["outputs"]]
        idx = {
            n: torch.randint(0, max(slots[0][1][n].numel(), 1), (SAMPLES_PER_OUTPUT,), device=self.device)
            for n in names
        }
        l2 = torch.cuda.get_device_properties(self.device).L2_cache_size
        flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device=self.device)
        rng = secrets.SystemRandom()
        total = warmup + reps
        plan = [(i % TIMING_SLOTS, rng.randrange(TIMING_CONTENTS)) for i in range(total)]
        full_at = set(rng.sample(range(warmup, total), min(FULL_CHECKS, reps)))
        held = [-1] * TIMING_SLOTS  # which content each slot holds now

        def prepare(i: int, poison: bool) -> None:
            s_i, c_i = plan[i]
            if held[s_i] != c_i:
                for k, v in slots[s_i][0].items():
                    v.copy_(contents[c_i][k])
                held[s_i] = c_i
            if poison:
                for x in slots[s_i][1].values():
                    self.poison(x)
            flush.zero_()

        # the stream record slows every kernel (about 0.15 ms on an H200): a random share of the timed
        # repetitions is recorded (and checked for off-stream and late work) and left out of the median
        recorded = set(range(warmup)) | set(
            rng.sample(range(warmup, total), min(reps - 1, max(RECORDED_MIN, reps // RECORDED_SHARE)))
        )

        def cand(i: int, wall: bool) -> tuple[float, float, bool]:
            rec = wall or i in recorded
            r = self.run_candidate(slots[plan[i][0]][2], wall, record=rec)
            return float(r["ms"]), float(r["wall_ms"]), not r.get("recorded", rec)

        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        gate = abi.StreamGate(self.cand.rt) if self.baseline is not None else None

        def base(i: int, wall: bool) -> tuple[float, float, bool]:
            """The baseline's repetition, bracketed like the candidate's in its process (runner.call)."""
            assert self.baseline is not None and gate is not None
            torch.cuda.synchronize()
            with torch.cuda.stream(self.stream):
                if not wall and not gate.tripped:
                    gate.close(self.stream.cuda_stream)
                e0.record(self.stream)
                t0 = time.perf_counter()
                self.baseline(slots[plan[i][0]][0], dict(self.scalars))
                e1.record(self.stream)
                if not wall:
                    gate.open()
            if wall:
                torch.cuda.synchronize()
            else:
                self.stream.synchronize()
            return e0.elapsed_time(e1), (time.perf_counter() - t0) * 1e3, True

        samples: dict[int, dict[str, torch.Tensor]] = {}
        full: dict[int, dict[str, torch.Tensor]] = {}

        def after_cand(i: int) -> None:
            outs = slots[plan[i][0]][1]
            samples[i] = {n: outs[n].reshape(-1).index_select(0, idx[n]) for n in names}
            if i in full_at:
                full[i] = {n: outs[n].clone() for n in names}

        res: dict = {"ok": True, "dims": dims, "reps": reps, "gpu": torch.cuda.get_device_name(self.device)}
        res["candidate_median_ms"], res["candidate_device_sync_median_ms"] = self.time_fn(
            cand, prepare, after_cand, warmup, reps, poison=True
        )
        key = self.job.get("baseline_key")
        if self.baseline is not None and key and key in BASELINES:
            # the library's time for this task, shape and reference file, measured by this worker earlier
            res["baseline_median_ms"], res["baseline_device_sync_median_ms"] = BASELINES[key]
            res["baseline_cached"] = True
        elif self.baseline is not None:
            # nothing of the candidate's may run beside the library's timing: a kernel its process left
            # running (a side stream in an unrecorded repetition) would slow the baseline and inflate the
            # speedup, of this candidate and, through BASELINES, of every later one in this worker. The
            # process goes (its CUDA context with it); processes it started fail its calls (run_candidate).
            self.cand.close()
            held[:] = [-1] * TIMING_SLOTS
            res["baseline_median_ms"], res["baseline_device_sync_median_ms"] = self.time_fn(
                base, prepare, None, warmup, reps, poison=False
            )
            if key:
                BASELINES[key] = (res["baseline_median_ms"], res["baseline_device_sync_median_ms"])
        torch.cuda.synchronize()
        res["recheck"] = self.verify_timed(plan, contents, refs, slots, held, samples, full, idx, names)
        return res  # type: ignore[return-value]  # built key by key above: the fields of TimingReply

    def verify_timed(self, plan, contents, refs, slots, held, samples, full, idx, names) -> list[dict]:
        """Every repetition's sampled outputs, the fully kept ones, inputs and guards after the timed loop."""
        checks: list[dict] = []
        bad_reps = []
        for i, got in sorted(samples.items()):
            ref = refs[plan[i][1]]
            for n in names:
                r = self.compare(n, got[n], ref[n].reshape(-1).to(self.device).index_select(0, idx[n]))
                if not r["passed"]:
                    bad_reps.append(i)
                    if len(bad_reps) == 1:
                        r.update(
                            error=f"timed repetition {i + 1}: sampled outputs wrong (work skipped or reused?)"
                        )
                        checks.append(r)
        if bad_reps:
            checks[-1]["error"] += f"; {len(set(bad_reps))} of {len(samples)} repetitions wrong"
        for i, got in sorted(full.items()):
            ref = refs[plan[i][1]]
            for n in names:
                r = self.compare(n, got[n], ref[n])
                r.update(label=f"timed repetition {i + 1} (whole output)")
                checks.append(r)
        for s_i, (ins, _outs, _call) in enumerate(slots):
            if held[s_i] >= 0:
                why = self.inputs_changed(ins, contents[held[s_i]])
                if why:
                    checks.append({"output": names[0], "passed": False, "error": f"during timing: {why}"})
        why = self.guards_intact()
        if why:
            checks.append({"output": names[0], "passed": False, "error": f"during timing: {why}"})
        if not checks:
            checks.append({"output": names[0], "passed": True})
        return checks

    def time_fn(self, fn, prepare, after, warmup: int, reps: int, poison: bool) -> tuple[float, float]:
        """Median event time of the repetitions, each prepared (content rotated, outputs poisoned, L2
        flushed) and finished before the next; and the median host time around fn with the whole device
        synchronised. ``fn(i, wall)`` runs repetition i and returns (event ms, host ms, whether the event
        time counts towards the median). The candidate's
        events are recorded on args->stream in its own process, the baseline's on the worker's stream:
        the same bracket (record, call, record, synchronise) around the same prepared buffers."""
        for i in range(warmup):
            prepare(i, poison)
            fn(i, False)
            if after is not None:
                after(i)
        times = []
        for r in range(reps):
            i = warmup + r
            prepare(i, poison)
            ms, _host, counts = fn(i, False)
            if counts:
                times.append(ms)
            if after is not None:
                after(i)
        walls = []
        for r in range(max(5, min(reps, 15))):
            prepare(warmup + r, poison)
            walls.append(fn(warmup + r, True)[1])
        torch.cuda.synchronize()
        return statistics.median(times), statistics.median(walls)


class CandidateError(RuntimeError):
    """ptxrag_launch returned an error code."""


class CandidateCudaError(RuntimeError):
    """The candidate's work faulted (the candidate's process is gone or its context unusable)."""


class CandidateHang(RuntimeError):
    """A call did not return within the candidate process's time limit (the process was killed)."""


class CandidateLoadError(RuntimeError):
    """The candidate library could not be loaded (missing entry point, missing symbol)."""


class CandidateViolation(RuntimeError):
    """Run-time evidence of a forbidden behaviour: a forbidden library, work off args->stream, a thread."""


class HarnessError(RuntimeError):
    """Something of ours failed, not the candidate."""


def nondumpable() -> None:
    """No other process of this uid (a candidate's) may ptrace this one or open its /proc memory: a worker
    kept across candidates must not be altered by one for the next. Signals still reach it; the parent then
    sees it gone and starts a fresh one."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def main() -> int:
    cmd_fd, res_fd = int(sys.argv[1]), int(sys.argv[2])
    cmds = os.fdopen(cmd_fd, "r")
    results = os.fdopen(res_fd, "w")

    def reply(
        obj: protocol.Failure
        | protocol.Ready
        | protocol.ChecksReply
        | protocol.MutantReply
        | protocol.TimingReply
        | dict,
    ) -> None:
        results.write(json.dumps(obj) + "\n")
        results.flush()

    # warm up first (the candidate's process, torch, the CUDA context) so the parent can compile meanwhile
    global torch
    try:
        nondumpable()
        runners = Runners(os.getcwd())
        runners.fill(1)
        import torch

        torch.cuda.init()
        gpu = torch.cuda.get_device_name(0)
    except Exception as e:  # noqa: BLE001
        reply({"ok": False, "kind": "harness", "error": f"CUDA unavailable in the worker: {e}"})
        return 2
    ready: protocol.Ready = {"ok": True, "ready": True, "gpu": gpu}
    reply(ready)
    worker: Worker | None = None
    for line in cmds:
        try:
            cmd = protocol.parse_command(line)
        except ValueError as e:
            reply({"ok": False, "kind": "harness", "error": str(e)})
            continue
        if cmd["cmd"] == "exit":
            break
        try:
            if cmd["cmd"] == "reset":
                # the job is over: its candidate processes (and any spare started during it) go; the
                # parent then sweeps whatever they left and asks for fresh spares
                if worker is not None:
                    worker.close()
                    worker = None
                runners.close()
                reply({"ok": True})
                continue
            if cmd["cmd"] == "spawn":
                # the parent has swept the last job's leftovers; as a subreaper this process is the parent of
                # the orphans among them: reap them (its own candidate processes are all closed by now)
                reap_orphans()
                runners.fill(int(cmd["n"]))
                reply({"ok": True})
                continue
            if cmd["cmd"] == "load":
                if worker is not None:
                    worker.close()
                with open(cmd["job"]) as f:
                    worker = Worker(json.load(f), runners)
                reply({"ok": True})
                continue
            if worker is None:
                reply({"ok": False, "kind": "harness", "error": "no job loaded"})
                continue
            if cmd["cmd"] == "correctness":
                reply(worker.correctness(cmd))
            elif cmd["cmd"] == "verify_profiled":
                reply(worker.verify_profiled(cmd))
            elif cmd["cmd"] == "mutant":
                reply(worker.mutant(cmd))
            else:
                reply(worker.timing(cmd))
        except CandidateLoadError as e:
            reply({"ok": False, "kind": "load", "error": str(e)})
            return 2
        except CandidateViolation as e:
            reply({"ok": False, "kind": "violation", "error": str(e)})
        except CandidateError as e:
            reply({"ok": False, "kind": "candidate", "error": str(e)})
        except CandidateCudaError as e:
            reply({"ok": False, "kind": "cuda", "error": str(e).strip().splitlines()[0][:500]})
            return 3  # the candidate's process is gone or its context unusable
        except torch.cuda.OutOfMemoryError as e:
            reply({"ok": False, "kind": "candidate", "error": f"out of GPU memory: {str(e)[:300]}"})
        except HarnessError as e:
            reply({"ok": False, "kind": "harness", "error": str(e)})
        except RuntimeError as e:
            # a CUDA fault seen by the worker's own context (the candidate corrupted shared memory state)
            reply({"ok": False, "kind": "cuda", "error": str(e).strip().splitlines()[0][:500]})
            return 3
        except Exception as e:  # noqa: BLE001
            reply(
                {
                    "ok": False,
                    "kind": "harness",
                    "error": f"{type(e).__name__}: {e}",
                    "traceback": traceback.format_exc()[-2000:],
                }
            )
    if worker is not None:
        worker.close()
    runners.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
