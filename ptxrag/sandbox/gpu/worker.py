"""GPU worker: correctness and timing of one candidate against the task's PyTorch reference.

Needs only the standard library and torch, so it runs by path in any CUDA container:
    python worker.py CMD_FD RESULT_FD
It imports torch and creates the CUDA context first and says {"ready": true}, so the parent can compile the
candidate meanwhile. The parent sends one JSON command per line on CMD_FD and reads one JSON result per line
on RESULT_FD (stdout and stderr belong to the candidate and are captured to a file). Commands:
    {"cmd": "load", "job": path}                 load the candidate library and the task reference
    {"cmd": "correctness", "save_inputs": dir}   fresh inputs per check set; saves the first set's inputs
    {"cmd": "timing"}                            candidate vs baseline, same timer; recheck on unseen inputs
    {"cmd": "exit"}
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import math
import os
import secrets
import statistics
import sys
import time
import traceback

try:
    from . import abi  # type: ignore[no-redef]
except ImportError:  # run by path
    import abi  # type: ignore[no-redef]

import torch

INT_POISON = -0x5EADBEEF  # fits int32/int64; unsigned and small ints use their max value


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


class Worker:
    def __init__(self, job: dict) -> None:
        self.job = job
        self.device = torch.device("cuda", 0)
        self.lib, self.launch = abi.load_candidate(job["library"])
        spec = importlib.util.spec_from_file_location("ptxrag_task_reference", job["reference_file"])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {job['reference_file']}")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self.reference = getattr(mod, job["reference_function"])
        self.baseline = getattr(mod, job["baseline_function"], None)
        self.stream = torch.cuda.Stream(device=self.device)
        self.scalars = {s["name"]: float(s["value"]) for s in job["scalars"]}
        ws = int(job.get("workspace_bytes", 0))
        self.workspace = torch.zeros(ws, dtype=torch.uint8, device=self.device) if ws else None

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

    def make_inputs(self, dims: dict, seed: int) -> dict[str, torch.Tensor]:
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        out = {}
        for t in self.job["inputs"]:
            x = torch.empty(self.shape(t, dims), dtype=_dtype(t["dtype"]), device=self.device)
            self.fill_input(x, t.get("init", {}), gen)
            out[t["name"]] = x
        return out

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
            x = torch.empty(self.shape(t, dims), dtype=_dtype(t["dtype"]), device=self.device)
            self.poison(x)
            out[t["name"]] = x
        return out

    def call(self, inputs: dict, outputs: dict) -> abi.Call:
        def desc(x: torch.Tensor) -> abi.Tensor:
            return abi.make_tensor(
                x.data_ptr(), str(x.dtype).removeprefix("torch."), list(x.shape), list(x.stride())
            )

        return abi.Call(
            [desc(inputs[t["name"]]) for t in self.job["inputs"]],
            [desc(outputs[t["name"]]) for t in self.job["outputs"]],
            [self.scalars[s["name"]] for s in self.job["scalars"]],
            self.stream.cuda_stream,
            self.workspace.data_ptr() if self.workspace is not None else 0,
            self.workspace.numel() if self.workspace is not None else 0,
        )

    def run_candidate(self, call: abi.Call) -> None:
        rc = self.launch(ctypes.byref(call.args))
        if rc != 0:
            raise CandidateError(abi.describe_rc(rc))

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
        tol = self.job["tolerance"]
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
        err = torch.where(torch.isnan(o) & ref_nan, torch.zeros_like(err), err)
        allowed = tol["atol"] + tol["rtol"] * r.abs()
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
        inputs = self.make_inputs(dims, seed)
        outputs = self.make_outputs(dims)
        call = self.call(inputs, outputs)
        torch.cuda.synchronize()
        with torch.cuda.stream(self.stream):
            self.run_candidate(call)
        self.stream.synchronize()
        torch.cuda.synchronize()  # a fault in the candidate surfaces here (and is sticky)
        if save_dir:
            self.save_inputs(inputs, outputs, save_dir)
        ref = self.run_reference(inputs)
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
                    "file": "",
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
        }
        with open(os.path.join(save_dir, "launch.json"), "w") as f:
            json.dump(launch, f)

    def correctness(self, cmd: dict) -> dict:
        checks = []
        for i, dims in enumerate(self.job["check_dims"]):
            label = f"check {i + 1}" + (" (awkward shape)" if i in self.job.get("awkward", []) else "")
            checks += self.check_once(dims, label, cmd.get("save_inputs") if i == 0 else None)
        return {"checks": checks}

    # -- timing ---------------------------------------------------------------------------------------------
    def timing(self, cmd: dict) -> dict:
        t = self.job["timing"]
        dims = self.job["timing_dims"]
        inputs = self.make_inputs(dims, secrets.randbits(63))
        outputs = self.make_outputs(dims)
        call = self.call(inputs, outputs)
        l2 = torch.cuda.get_device_properties(self.device).L2_cache_size
        flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device=self.device)

        def cand() -> None:
            self.run_candidate(call)

        def base() -> None:
            assert self.baseline is not None
            self.baseline(inputs, dict(self.scalars))

        res: dict = {"dims": dims, "reps": int(t["reps"])}
        res["candidate_median_ms"], res["candidate_device_sync_median_ms"] = self.time_fn(cand, flush, t)
        if self.baseline is not None:
            res["baseline_median_ms"], res["baseline_device_sync_median_ms"] = self.time_fn(base, flush, t)
        # no result reuse: fresh values in the same buffers, poisoned outputs, one more call, compare
        self.refill_inputs(inputs, secrets.randbits(63))
        for x in outputs.values():
            self.poison(x)
        torch.cuda.synchronize()
        with torch.cuda.stream(self.stream):
            cand()
        torch.cuda.synchronize()
        ref = self.run_reference(inputs)
        rechecks = [self.compare(o["name"], outputs[o["name"]], ref[o["name"]]) for o in self.job["outputs"]]
        res["recheck"] = rechecks
        return res

    def time_fn(self, fn, flush: torch.Tensor, t: dict) -> tuple[float, float]:
        """Median of CUDA-event times on the given stream (L2 flushed before each rep), and the median
        of host times around fn with the whole device synchronised (catches work on other streams)."""
        with torch.cuda.stream(self.stream):
            for _ in range(int(t["warmup"])):
                fn()
            torch.cuda.synchronize()
            reps = int(t["reps"])
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            for i in range(reps):
                flush.zero_()
                starts[i].record(self.stream)
                fn()
                ends[i].record(self.stream)
            torch.cuda.synchronize()
            ev = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
            walls = []
            for _ in range(max(5, min(reps, 15))):
                flush.zero_()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                walls.append((time.perf_counter() - t0) * 1e3)
        return ev, statistics.median(walls)


class CandidateError(RuntimeError):
    pass


def main() -> int:
    cmd_fd, res_fd = int(sys.argv[1]), int(sys.argv[2])
    cmds = os.fdopen(cmd_fd, "r")
    results = os.fdopen(res_fd, "w")

    def reply(obj: dict) -> None:
        results.write(json.dumps(obj) + "\n")
        results.flush()

    # warm up first (import torch above, CUDA context here) so the parent can compile meanwhile
    try:
        torch.cuda.init()
        gpu = torch.cuda.get_device_name(0)
    except Exception as e:  # noqa: BLE001
        reply({"ok": False, "kind": "harness", "error": f"CUDA unavailable in the worker: {e}"})
        return 2
    reply({"ok": True, "ready": True, "gpu": gpu})
    worker: Worker | None = None
    for line in cmds:
        cmd = json.loads(line)
        if cmd["cmd"] == "exit":
            break
        if cmd["cmd"] == "load":
            try:
                with open(cmd["job"]) as f:
                    worker = Worker(json.load(f))
                reply({"ok": True})
            except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
                reply({"ok": False, "kind": "load", "error": f"{type(e).__name__}: {e}"})
                return 2
            continue
        if worker is None:
            reply({"ok": False, "kind": "harness", "error": "no job loaded"})
            continue
        try:
            out = getattr(worker, cmd["cmd"])(cmd)
            reply({"ok": True, **out})
        except CandidateError as e:
            reply({"ok": False, "kind": "candidate", "error": str(e)})
        except torch.cuda.OutOfMemoryError as e:
            reply({"ok": False, "kind": "candidate", "error": f"out of GPU memory: {str(e)[:300]}"})
        except RuntimeError as e:
            # CUDA faults (illegal address, illegal instruction, ...) surface as RuntimeError at sync
            reply({"ok": False, "kind": "cuda", "error": str(e).strip().splitlines()[0][:500]})
            return 3  # the context is unusable after a sticky error
        except Exception as e:  # noqa: BLE001
            reply(
                {
                    "ok": False,
                    "kind": "harness",
                    "error": f"{type(e).__name__}: {e}",
                    "traceback": traceback.format_exc()[-2000:],
                }
            )
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
