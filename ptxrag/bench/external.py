"""Published numbers of other studies (data in ``ptxbench.toml``), shown beside a study's own, labelled
external. Nothing here is measured by ptxrag; each table names its source."""

from __future__ import annotations

import tomllib
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field


class ExternalResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    model: str
    rounds: int = Field(description="turn limit k of the published number")
    hits: int
    n: int


class ExternalWorkload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    ptxrag_tasks: list[str] = Field(description="the ptxrag tasks nearest to this workload")
    results: list[ExternalResult]


class ExternalStudy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    source: str
    measure: str
    workloads: list[ExternalWorkload]


def ptxbench() -> ExternalStudy:
    """PTXBench's published Hopper results (see the comments of ``ptxbench.toml`` for the exact rows)."""
    data = tomllib.loads((resources.files("ptxrag.bench") / "ptxbench.toml").read_text())
    return ExternalStudy(
        source=data["source"],
        measure=data["measure"],
        workloads=[
            ExternalWorkload(
                name=w["name"],
                ptxrag_tasks=w["ptxrag_tasks"],
                results=[ExternalResult(model=m, rounds=k, hits=h, n=n) for m, k, h, n in w["results"]],
            )
            for w in data["workload"]
        ],
    )
