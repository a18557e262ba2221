"""ctypes mirror of sandbox/abi/ptxrag_abi.h (standard library only)."""

from __future__ import annotations

import ctypes
import glob
import os
import sys

ABI_VERSION = 1
MAX_DIMS = 8

#: dtype name -> (ABI code, bytes per element); codes must match ptxrag_abi.h
DTYPES: dict[str, tuple[int, int]] = {
    "float32": (0, 4),
    "float16": (1, 2),
    "bfloat16": (2, 2),
    "float64": (3, 8),
    "int32": (4, 4),
    "int64": (5, 8),
    "int8": (6, 1),
    "uint8": (7, 1),
    "float8_e4m3fn": (8, 1),
    "float8_e5m2": (9, 1),
    "uint32": (10, 4),
    "int16": (11, 2),
}

ERRORS = {
    10001: "PTXRAG_ERR_BAD_ARGS (unexpected tensor count, dtype or rank)",
    10002: "PTXRAG_ERR_UNSUPPORTED_SHAPE",
    10003: "PTXRAG_ERR_DRIVER_ENTRY (a driver function could not be resolved)",
    10004: "PTXRAG_ERR_TENSOR_MAP (cuTensorMapEncode* failed: check alignment, strides, box sizes)",
    1: "cudaErrorInvalidValue",
    2: "cudaErrorMemoryAllocation",
    9: "cudaErrorInvalidConfiguration (bad grid/block size or too much shared memory)",
    98: "cudaErrorInvalidDeviceFunction",
    200: "cudaErrorInvalidKernelImage",
    209: "cudaErrorNoKernelImageForDevice (built for another arch)",
    400: "cudaErrorInvalidResourceHandle",
    700: "cudaErrorIllegalAddress",
    701: "cudaErrorLaunchOutOfResources (too many registers or threads)",
    702: "cudaErrorLaunchTimeout",
    715: "cudaErrorIllegalInstruction",
    716: "cudaErrorMisalignedAddress",
    719: "cudaErrorLaunchFailure",
}


def describe_rc(rc: int) -> str:
    return f"ptxrag_launch returned {rc}: {ERRORS.get(rc, 'see cudaError_t / PTXRAG_ERR_* codes')}"


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
    ]


class Args(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_int32),
        ("n_inputs", ctypes.c_int32),
        ("n_outputs", ctypes.c_int32),
        ("n_scalars", ctypes.c_int32),
        ("inputs", ctypes.POINTER(Tensor)),
        ("outputs", ctypes.POINTER(Tensor)),
        ("scalars", ctypes.POINTER(ctypes.c_double)),
        ("stream", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
    ]


def make_tensor(ptr: int, dtype: str, shape: list[int], strides: list[int]) -> Tensor:
    t = Tensor()
    t.data = ptr
    t.dtype = DTYPES[dtype][0]
    t.ndim = len(shape)
    for i in range(MAX_DIMS):
        t.shape[i] = shape[i] if i < len(shape) else 1
        t.strides[i] = strides[i] if i < len(strides) else 0
    return t


class Call:
    """Holds every ctypes object one ptxrag_launch call points into (so nothing is freed early)."""

    def __init__(
        self,
        inputs: list[Tensor],
        outputs: list[Tensor],
        scalars: list[float],
        stream: int,
        workspace: int = 0,
        workspace_bytes: int = 0,
    ) -> None:
        self.inputs = (Tensor * max(1, len(inputs)))(*inputs)
        self.outputs = (Tensor * max(1, len(outputs)))(*outputs)
        self.scalars = (ctypes.c_double * max(1, len(scalars)))(*scalars)
        self.args = Args(
            ABI_VERSION,
            len(inputs),
            len(outputs),
            len(scalars),
            ctypes.cast(self.inputs, ctypes.POINTER(Tensor)),
            ctypes.cast(self.outputs, ctypes.POINTER(Tensor)),
            ctypes.cast(self.scalars, ctypes.POINTER(ctypes.c_double)),
            stream,
            workspace or None,
            workspace_bytes,
        )


def load_candidate(path: str):
    """dlopen the candidate and type its entry point. Raises OSError/AttributeError with a clear text."""
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    try:
        fn = lib.ptxrag_launch
    except AttributeError:
        raise AttributeError(
            'the library defines no `extern "C" int ptxrag_launch(const ptxrag_args*)` entry point'
        ) from None
    fn.argtypes = [ctypes.POINTER(Args)]
    fn.restype = ctypes.c_int
    return lib, fn


def find_cudart() -> str:
    """Path of a libcudart shared library, without importing torch."""
    env = os.environ.get("PTXRAG_CUDART")
    if env:
        return env
    pats = []
    for entry in sys.path:
        pats += [
            os.path.join(entry, "nvidia", "cu13", "lib", "libcudart.so*"),
            os.path.join(entry, "nvidia", "cuda_runtime", "lib", "libcudart.so*"),
        ]
    pats += [
        "/usr/local/cuda/lib64/libcudart.so*",
        "/usr/local/cuda/targets/*/lib/libcudart.so*",
        "/usr/lib/x86_64-linux-gnu/libcudart.so*",
    ]
    for pat in pats:
        hits = sorted(glob.glob(pat))
        if hits:
            return hits[-1]
    raise FileNotFoundError("libcudart not found; set PTXRAG_CUDART to its path")


class StreamGate:
    """Holds a stream until the host opens the gate, so that a call's events time only its GPU work.

    ``close(stream)`` enqueues a wait on a host-mapped word (cuStreamWaitValue32); everything enqueued after
    it (the start event, the call, the end event) runs back to back once ``open()`` writes the word, so the
    host's launch overhead is outside the timed window, as it is for work queued behind other work. Code
    that synchronises the held stream before ``open()`` would wait forever: a watchdog opens the gate after
    ``watchdog_s`` and ``tripped`` says so (the caller then stops gating).
    """

    def __init__(self, rt: ctypes.CDLL, watchdog_s: float = 2.0) -> None:
        import threading

        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cu.cuStreamWaitValue32_v2.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint64,
            ctypes.c_uint32,
            ctypes.c_uint,
        ]
        self.host = ctypes.c_void_p()
        if rt.cudaHostAlloc(ctypes.byref(self.host), ctypes.c_size_t(4), 2) != 0:  # cudaHostAllocMapped
            raise RuntimeError("cudaHostAlloc(mapped) failed")
        self.dev = ctypes.c_void_p()
        if rt.cudaHostGetDevicePointer(ctypes.byref(self.dev), self.host, 0) != 0:
            raise RuntimeError("cudaHostGetDevicePointer failed")
        self.word = ctypes.c_uint32.from_address(self.host.value or 0)
        self.word.value = 0
        self.n = 0
        self.tripped = False
        self.watchdog_s = watchdog_s
        self._armed = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._watch, name="ptxrag-gate", daemon=True).start()

    def _watch(self) -> None:
        while True:
            self._armed.wait()
            self._armed.clear()
            if not self._done.wait(self.watchdog_s):
                self.tripped = True
                self.open()

    def close(self, stream: int) -> None:
        with self._lock:
            self.n += 1
        rc = self.cu.cuStreamWaitValue32_v2(stream or None, self.dev.value or 0, self.n, 0)  # GEQ
        if rc != 0:
            raise RuntimeError(f"cuStreamWaitValue32 failed ({rc})")
        self._done.clear()
        self._armed.set()

    def open(self) -> None:
        with self._lock:
            self.word.value = self.n
        self._done.set()
