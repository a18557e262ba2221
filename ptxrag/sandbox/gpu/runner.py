"""The candidate's process: loads the candidate library and calls it, without PyTorch.

Started by the GPU worker (worker.py), which owns every buffer: the worker allocates inputs, outputs and
workspace with PyTorch, exports them as CUDA IPC handles, and checks the results. This process maps them,
calls ``ptxrag_launch`` on its own stream and says how long the call took. Nothing PyTorch maps (cuBLAS,
cuDNN, libtorch) is mapped here, and the rtld audit library (native/audit.c, LD_AUDIT) refuses to load any
forbidden library, so a vendor routine cannot be reached by a name built at run time. The CUPTI monitor
(native/monitor.cpp) records on which stream every kernel, copy and memset of a call ran; every call is
checked for work off ``args->stream``, work enqueued after the call returned, and host threads left behind.

Usage: python runner.py CMD_FD RESULT_FD      (one JSON command per line; one JSON reply per line)
    {"op": "load", "library": path, "monitor": path or null, "audit_log": path or null, "no_spawn": bool}
    {"op": "map", "handles": [hex, ...]}            -> {"ptrs": [int, ...]} (base addresses here)
    {"op": "prepare", "id": k, "inputs": [...], "outputs": [...], "scalars": [...], "workspace": [ptr, n]}
    {"op": "call", "id": k, "wall": bool, "record": bool}   -> {"rc", "ms", "wall_ms", "violations"}
    {"op": "exit"}
Tensors are [ptr, dtype, shape, strides] with ptr in this process's address space.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import time

try:
    from . import abi, nospawn  # type: ignore[no-redef]
except ImportError:  # run by path
    import abi  # type: ignore[no-redef]
    import nospawn  # type: ignore[no-redef]

IPC_HANDLE_BYTES = 64
MARKER_VALUE = 0xA5  # the runner's 4-byte memset after each call: CUPTI's timestamp of "the call returned"
# host threads the CUDA driver and CUPTI start on their own (a candidate's thread is named after the process)
SYSTEM_THREAD_PREFIXES = ("cuda", "cupti")


class CudaError(RuntimeError):
    pass


class IpcMemHandle(ctypes.Structure):
    """cudaIpcMemHandle_t: passed by value (a ctypes array argument would decay to a pointer)."""

    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_BYTES)]


class Runner:
    def __init__(self) -> None:
        self.rt = ctypes.CDLL(abi.find_cudart())
        self.rt.cudaGetErrorString.restype = ctypes.c_char_p
        self.rt.cudaIpcOpenMemHandle.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            IpcMemHandle,
            ctypes.c_uint,
        ]
        self.rt.cudaEventElapsedTime.argtypes = [
            ctypes.POINTER(ctypes.c_float),
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self.check(self.rt.cudaSetDevice(0), "cudaSetDevice")
        self.check(self.rt.cudaFree(None), "creating the CUDA context")
        self.launch = None
        self.lib = None
        self.monitor: ctypes.CDLL | None = None
        self.recording = True
        self.audit_log: str | None = None
        self.audit_seen = 0
        self.calls: dict[int, abi.Call] = {}
        self.mapped: dict[str, int] = {}
        self.stream = ctypes.c_void_p()
        self.ev = (ctypes.c_void_p(), ctypes.c_void_p())
        self.marker = ctypes.c_void_p()

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise CudaError(f"{what}: {self.rt.cudaGetErrorString(rc).decode()} ({rc})")

    # -- commands -------------------------------------------------------------------------------------------
    def load(self, cmd: dict) -> dict:
        self.audit_log = cmd.get("audit_log")
        self.mark_audit_start()
        if cmd.get("monitor"):
            mon = ctypes.CDLL(cmd["monitor"])
            mon.ptxrag_monitor_error.restype = ctypes.c_char_p
            mon.ptxrag_monitor_now.restype = ctypes.c_uint64
            mon.ptxrag_monitor_begin.argtypes = [ctypes.c_void_p]
            mon.ptxrag_monitor_end.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int]
            mon.ptxrag_monitor_enable.argtypes = [ctypes.c_int]
            if mon.ptxrag_monitor_start() != 0:
                raise RuntimeError(
                    "the CUPTI stream monitor did not start: " + mon.ptxrag_monitor_error().decode()
                )
            self.monitor = mon
        self.check(self.rt.cudaStreamCreateWithFlags(ctypes.byref(self.stream), 1), "cudaStreamCreate")
        for e in self.ev:
            self.check(self.rt.cudaEventCreate(ctypes.byref(e)), "cudaEventCreate")
        self.check(self.rt.cudaMalloc(ctypes.byref(self.marker), ctypes.c_size_t(4)), "cudaMalloc(marker)")
        self.gate: abi.StreamGate | None = abi.StreamGate(self.rt)
        self.rt.cudaDeviceSynchronize()
        self.threads = self.thread_set()
        if cmd.get("no_spawn"):
            # from here on creating a process kills this one (nospawn.py); the candidate's code first runs
            # in load_candidate (its constructors). A filter that cannot be installed is the harness's
            # failure, not the candidate's (an OSError would read as the candidate's load error)
            try:
                nospawn.forbid_process_creation()
            except OSError as e:
                raise RuntimeError(
                    f"the process-creation filter could not be installed: {e} ({nospawn.MISSING_HINT})"
                ) from e
        self.lib, self.launch = abi.load_candidate(cmd["library"])
        return {"audit": self.audit_violations()}

    def map(self, cmd: dict) -> dict:
        ptrs = []
        for h in cmd["handles"]:
            if h not in self.mapped:
                raw = IpcMemHandle.from_buffer_copy(bytes.fromhex(h))
                ptr = ctypes.c_void_p()
                self.check(self.rt.cudaIpcOpenMemHandle(ctypes.byref(ptr), raw, 1), "cudaIpcOpenMemHandle")
                self.mapped[h] = ptr.value or 0
            ptrs.append(self.mapped[h])
        return {"ptrs": ptrs}

    def prepare(self, cmd: dict) -> dict:
        def tensors(items: list) -> list[abi.Tensor]:
            return [abi.make_tensor(p, dt, shape, strides) for p, dt, shape, strides in items]

        ws_ptr, ws_bytes = cmd.get("workspace") or (0, 0)
        self.calls[int(cmd["id"])] = abi.Call(
            tensors(cmd["inputs"]),
            tensors(cmd["outputs"]),
            [float(s) for s in cmd["scalars"]],
            self.stream.value or 0,
            ws_ptr,
            ws_bytes,
        )
        return {}

    def call(self, cmd: dict) -> dict:
        assert self.launch is not None
        call = self.calls[int(cmd["id"])]
        record = bool(cmd.get("record", True)) and self.monitor is not None
        if self.monitor is not None and record != self.recording:
            if self.monitor.ptxrag_monitor_enable(int(record)) != 0:
                raise RuntimeError("stream monitor: " + self.monitor.ptxrag_monitor_error().decode())
            self.recording = record
        if record and self.monitor is not None and self.monitor.ptxrag_monitor_begin(self.stream) != 0:
            raise RuntimeError("stream monitor: " + self.monitor.ptxrag_monitor_error().decode())
        gate = self.gate if not cmd.get("wall") else None
        if gate is not None:
            gate.close(self.stream.value or 0)
        self.check(self.rt.cudaEventRecord(self.ev[0], self.stream), "cudaEventRecord")
        t0 = time.perf_counter()
        rc = self.launch(ctypes.byref(call.args))
        self.check(self.rt.cudaEventRecord(self.ev[1], self.stream), "cudaEventRecord")
        gated = gate is not None and not gate.tripped
        if gate is not None:
            gate.open()
            if gate.tripped:  # the candidate synchronised inside the call: time it ungated from now on
                self.gate = None
        self.check(
            self.rt.cudaMemsetAsync(self.marker, MARKER_VALUE, ctypes.c_size_t(4), self.stream),
            "marker memset",
        )
        if cmd.get("wall"):
            err = self.rt.cudaDeviceSynchronize()
        else:
            err = self.rt.cudaStreamSynchronize(self.stream)
        wall_ms = (time.perf_counter() - t0) * 1e3
        self.check(err, "the candidate's work")  # a fault in the candidate surfaces here (and is sticky)
        if rc != 0:
            return {"rc": rc, "error": abi.describe_rc(rc)}
        ms = ctypes.c_float()
        self.check(self.rt.cudaEventElapsedTime(ctypes.byref(ms), self.ev[0], self.ev[1]), "event time")
        violations = self.audit_violations()
        if record and self.monitor is not None:
            done = self.monitor.ptxrag_monitor_now()
            buf = ctypes.create_string_buffer(1024)
            bad = self.monitor.ptxrag_monitor_end(done, buf, len(buf))
            if bad < 0:
                raise RuntimeError("stream monitor: " + self.monitor.ptxrag_monitor_error().decode())
            if bad > 0:
                violations.append("work off args->stream: " + buf.value.decode(errors="replace"))
        left = self.thread_set() - self.threads
        stray = [
            f"{tid} ({name})" for tid, name in sorted(left) if not name.startswith(SYSTEM_THREAD_PREFIXES)
        ]
        if stray:
            violations.append(
                f"ptxrag_launch left {len(stray)} new host thread(s) running ({', '.join(stray[:3])}); "
                "do the work on the calling thread and finish it before returning"
            )
        self.threads |= left  # reported once
        return {
            "rc": 0,
            "ms": float(ms.value),
            "wall_ms": wall_ms,
            "gated": gated,
            "recorded": record,
            "violations": violations,
        }

    # -- evidence -------------------------------------------------------------------------------------------
    @staticmethod
    def thread_set() -> set[tuple[int, str]]:
        out = set()
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    out.add((int(tid), f.read().strip()))
            except OSError:
                continue
        return out

    def mark_audit_start(self) -> None:
        """Lines already in the audit log are not this candidate's: the log's name is predictable
        (audit-runner-N.log in the job's folder, kept across the jobs of a warm worker), so a candidate could
        plant "refused" lines in the log of a later job's process and fail an honest candidate there."""
        try:
            with open(self.audit_log or "") as f:
                self.audit_seen = len(f.read().splitlines())
        except OSError:
            self.audit_seen = 0

    def audit_violations(self) -> list[str]:
        """Library loads the audit library refused (or saw mapped) since the last look."""
        if not self.audit_log:
            return []
        try:
            with open(self.audit_log) as f:
                lines = f.read().splitlines()
        except OSError:
            return []
        new, self.audit_seen = lines[self.audit_seen :], len(lines)
        names = sorted({ln.split(" ", 1)[-1].rsplit("/", 1)[-1] for ln in new if ln.strip()})
        if not names:
            return []
        return [f"tried to load a forbidden library at run time: {', '.join(names[:4])} (refused)"]


def main() -> int:
    cmds = os.fdopen(int(sys.argv[1]), "r")
    results = os.fdopen(int(sys.argv[2]), "w")

    def reply(obj: dict) -> None:
        results.write(json.dumps(obj) + "\n")
        results.flush()

    # a spare waits for its candidate: no other process of this uid may ptrace it or write its memory meanwhile
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    try:
        runner = Runner()
    except Exception as e:  # noqa: BLE001
        reply({"ok": False, "kind": "harness", "error": f"candidate process: {e}"})
        return 2
    reply({"ok": True, "ready": True})
    for line in cmds:
        cmd = json.loads(line)
        op = cmd.get("op")
        if op == "exit":
            break
        try:
            if op == "load":
                out = runner.load(cmd)
            elif op == "map":
                out = runner.map(cmd)
            elif op == "prepare":
                out = runner.prepare(cmd)
            elif op == "call":
                out = runner.call(cmd)
            else:
                raise ValueError(f"unknown op {op!r}")
            reply({"ok": True, **out})
        except (OSError, AttributeError) as e:
            reply({"ok": False, "kind": "load", "error": str(e)})
            if op == "load":
                return 2
        except CudaError as e:
            reply({"ok": False, "kind": "cuda", "error": str(e)})
            return 3  # the context is unusable after a sticky error
        except Exception as e:  # noqa: BLE001
            reply({"ok": False, "kind": "harness", "error": f"{type(e).__name__}: {e}"})
    results.flush()
    os._exit(0)  # skip teardown of a context the candidate may have left odd


if __name__ == "__main__":
    sys.exit(main())
