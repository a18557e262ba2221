"""Harness deadlines that stretch on a busy machine instead of turning load into a failure.

A fixed timeout on a tool the harness runs (cuobjdump, nm, readelf) is a guess about how fast the machine
is. `harness_timeout(base_s)` keeps `base_s` on an idle machine (so idle wall time is unchanged) and
multiplies it by the run-queue pressure (1-minute load average per CPU, capped) when the machine is busy,
times the operator's `PTXRAG_TIMEOUT_SCALE` (default 1). It never shortens a deadline.
"""

from __future__ import annotations

import os

from ptxrag.base.errors import ConfigInputError

#: the most the load factor alone stretches a deadline (a runaway load average must not mean "forever")
MAX_LOAD_FACTOR = 8.0
SCALE_ENV = "PTXRAG_TIMEOUT_SCALE"


class TimeoutScaleError(ConfigInputError, ValueError):
    """PTXRAG_TIMEOUT_SCALE is not a finite number >= 1 (user error: fix the environment)."""


def timeout_scale() -> float:
    """The operator's multiplier from PTXRAG_TIMEOUT_SCALE (1 when unset)."""
    raw = os.environ.get(SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (1.0 <= value < 1e6):  # also rejects nan and inf
        raise TimeoutScaleError(
            f"{SCALE_ENV}={raw!r} is not a number between 1 and 1e6; unset it or set e.g. 3"
        )
    return value


def load_factor() -> float:
    """1 on an idle machine; load average per CPU when above 1, capped at MAX_LOAD_FACTOR."""
    try:
        load1 = os.getloadavg()[0]
    except OSError:  # platform without a load average
        return 1.0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(MAX_LOAD_FACTOR, max(1.0, load1 / max(1, cpus)))


def harness_timeout(base_s: float) -> float:
    """`base_s` stretched by the machine's load and PTXRAG_TIMEOUT_SCALE; never below `base_s`."""
    return base_s * load_factor() * timeout_scale()


def describe_harness_timeout(tool: str, waited_s: float) -> str:
    """One line that says the harness, not the candidate, ran out of time, and how to give it more."""
    return (
        f"harness timeout: {tool} did not finish within {waited_s:.0f} s (load factor {load_factor():.1f}); "
        f"this is the machine being slow, not the candidate: retry, or set {SCALE_ENV} (e.g. 3)"
    )
