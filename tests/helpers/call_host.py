"""Test helper: load a compiled candidate and call ptxrag_launch with no tensors, on the CPU.

Used to show that host-side misbehaviour of a candidate (infinite loop, segfault, fork bomb) is contained
without a GPU. Run by path: python call_host.py LIB.so
"""

import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ptxrag" / "sandbox" / "gpu"))
import abi  # noqa: E402

_, launch = abi.load_candidate(sys.argv[1])
call = abi.Call([], [], [], 0)
print("rc", launch(ctypes.byref(call.args)), flush=True)
