"""Launch a candidate, without torch: the process Nsight Compute profiles (one call of a few, not the first).

Usage: python launch_once.py JOB.json [LIBRARY WARM_CALLS]
JOB.json: {"library": path, "tensors": [{"file", "dtype", "shape", "strides", "output"}],
           "scalars": [...], "workspace_bytes": n, "warm_calls": k}
Input tensors are raw bytes saved by the correctness stage (the same values the check used). JOB.json is
written by the GPU worker into a folder the candidate's processes can write (its process was running while
and after it was written), so what decides whose counts these are comes from the command line, from the
evaluator: the library to load and how many unprofiled calls come first (before, a candidate could set
"warm_calls" to 0 and make the profiled call its process's first, or point "library" at another file).
Exit code 0 when the call returned 0 and the device reported no error.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

try:
    from . import abi, nospawn  # type: ignore[no-redef]
except ImportError:  # run by path
    import abi  # type: ignore[no-redef]
    import nospawn  # type: ignore[no-redef]


def _check(rt, rc: int, what: str) -> None:
    if rc != 0:
        rt.cudaGetErrorString.restype = ctypes.c_char_p
        msg = rt.cudaGetErrorString(rc).decode()
        print(f"launch_once: {what} failed: {msg} ({rc})", file=sys.stderr)
        sys.exit(3)


def launch_params(argv: list[str], job: dict) -> tuple[str, int]:
    """(library, unprofiled calls before the profiled one): the command line's, else JOB.json's."""
    if len(argv) >= 4:
        return argv[2], max(0, int(argv[3]))
    return job["library"], int(job.get("warm_calls", 0))


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        job = json.load(f)
    library, warm_calls = launch_params(argv, job)
    rt = ctypes.CDLL(abi.find_cudart())
    # the evaluator's environment (worker_client.child_env) asks for the filter; as in runner.py: the CUDA
    # context (and the profiler's injection) first, then no new process from here on (the candidate's code
    # first runs in load_candidate: its constructors)
    if os.environ.get("PTXRAG_SANDBOX_NO_SPAWN") == "1":
        _check(rt, rt.cudaFree(None), "cudaFree(0)")
        try:
            nospawn.forbid_process_creation()
        except OSError as e:
            msg = f"the process-creation filter could not be installed: {e} ({nospawn.MISSING_HINT})"
            print(f"launch_once: harness error: {msg}", file=sys.stderr)
            return 6
    _, launch = abi.load_candidate(library)
    ins: list[abi.Tensor] = []
    outs: list[abi.Tensor] = []
    keep: list[bytearray] = []
    out_ptrs: list[tuple[ctypes.c_void_p, int]] = []
    for t in job["tensors"]:
        nbytes = abi.DTYPES[t["dtype"]][1]
        for s in t["shape"]:
            nbytes *= s
        ptr = ctypes.c_void_p()
        _check(rt, rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1))), "cudaMalloc")
        if t["output"]:
            _check(rt, rt.cudaMemset(ptr, 0xFF, ctypes.c_size_t(nbytes)), "cudaMemset")
            out_ptrs.append((ptr, nbytes))
        else:
            with open(t["file"], "rb") as f:
                data = bytearray(f.read())
            if len(data) != nbytes:
                print(f"launch_once: {t['file']} has {len(data)} bytes, expected {nbytes}", file=sys.stderr)
                return 4
            host = (ctypes.c_char * nbytes).from_buffer(data)
            _check(rt, rt.cudaMemcpy(ptr, host, ctypes.c_size_t(nbytes), 1), "cudaMemcpy")
            keep.append(data)
        desc = abi.make_tensor(ptr.value or 0, t["dtype"], t["shape"], t["strides"])
        (outs if t["output"] else ins).append(desc)
    ws = ctypes.c_void_p()
    wsb = int(job.get("workspace_bytes", 0))
    if wsb:
        _check(rt, rt.cudaMalloc(ctypes.byref(ws), ctypes.c_size_t(wsb)), "cudaMalloc(workspace)")
        _check(rt, rt.cudaMemset(ws, 0, ctypes.c_size_t(wsb)), "cudaMemset(workspace)")
    stream = ctypes.c_void_p()
    _check(rt, rt.cudaStreamCreateWithFlags(ctypes.byref(stream), 1), "cudaStreamCreate")
    call = abi.Call(ins, outs, list(job.get("scalars", [])), stream.value or 0, ws.value or 0, wsb)
    # unprofiled calls first (ncu runs with --profile-from-start off), then the outputs poisoned again
    # and one call between cudaProfilerStart and cudaProfilerStop: its outputs are the ones checked
    for _ in range(warm_calls):
        rc = launch(ctypes.byref(call.args))
        if rc != 0:
            print(f"launch_once: {abi.describe_rc(rc)}", file=sys.stderr)
            return 5
        _check(rt, rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
    for ptr, nbytes in out_ptrs:
        _check(rt, rt.cudaMemset(ptr, 0xFF, ctypes.c_size_t(nbytes)), "cudaMemset")
    if wsb:
        _check(rt, rt.cudaMemset(ws, 0, ctypes.c_size_t(wsb)), "cudaMemset(workspace)")
    _check(rt, rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
    _check(rt, rt.cudaProfilerStart(), "cudaProfilerStart")
    rc = launch(ctypes.byref(call.args))
    if rc != 0:
        print(f"launch_once: {abi.describe_rc(rc)}", file=sys.stderr)
        return 5
    _check(rt, rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
    _check(rt, rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
    _check(rt, rt.cudaProfilerStop(), "cudaProfilerStop")
    # the outputs go back to the evaluator, which compares them with the reference of these inputs
    for t, (ptr, nbytes) in zip([t for t in job["tensors"] if t["output"]], out_ptrs, strict=True):
        host = (ctypes.c_char * max(nbytes, 1))()
        _check(rt, rt.cudaMemcpy(host, ptr, ctypes.c_size_t(nbytes), 2), "cudaMemcpy(output)")
        if t.get("file"):
            with open(t["file"], "wb") as f:
                f.write(bytes(host)[:nbytes])
    sys.stdout.flush()
    os._exit(0)  # skip teardown of a context the candidate may have left odd


if __name__ == "__main__":
    sys.exit(main(sys.argv))
