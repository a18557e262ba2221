"""What a study is: tasks x models x conditions x samples, and the deterministic id of each episode.

Everything a bench needs is checked here, before anything runs: unknown tasks or conditions, malformed
model specs, missing API keys and missing replay files all raise :class:`BenchConfigError` with what to fix.
"""

from __future__ import annotations

import hashlib
import json
import re
from itertools import product
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ptxrag.base.errors import ConfigInputError
from ptxrag.tasks import TaskSpec


class BenchConfigError(ConfigInputError, ValueError):
    """The study's settings are wrong (or clash with what OUT already holds); the message says what to fix."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BenchSpec(_Frozen):
    """One study: every combination of tasks, models and conditions, ``samples`` times each."""

    tasks: list[str] = Field(min_length=1, description="task ids or task folders")
    models: list[str] = Field(min_length=1, description="model specs; replay:DIR means DIR/<task>.toml")
    conditions: list[str] = Field(min_length=1, description="built-in condition names or .toml files")
    samples: int = Field(1, ge=1, le=1000)
    max_rounds: int = Field(8, ge=1, le=50)
    budget_tokens: int | None = Field(None, ge=256, le=200_000, description="overrides the conditions'")

    @field_validator("tasks", "models", "conditions")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        v = [x.strip() for x in v if x.strip()]
        if not v:
            raise ValueError("give at least one")
        dupes = sorted({x for x in v if v.count(x) > 1})
        if dupes:
            raise ValueError(f"listed twice: {', '.join(dupes)}")
        return v


class EpisodeKey(_Frozen):
    """One episode of a study. ``model`` and ``condition`` are normalized specs (absolute paths)."""

    task_id: str
    model: str
    condition: str
    sample: int = Field(ge=0)

    @property
    def episode_id(self) -> str:
        """Deterministic: the same key always names the same episode (and resumes it)."""
        blob = json.dumps([self.task_id, self.model, self.condition, self.sample])
        digest = hashlib.sha256(blob.encode()).hexdigest()[:10]
        return f"{self.task_id}.{_slug(condition_label(self.condition))}.{_slug(model_label(self.model))}.s{self.sample}.{digest}"


class Episode(_Frozen):
    """An episode ready to run: its key, the task, and the model spec for this task."""

    key: EpisodeKey
    task: TaskSpec
    model_spec: str = Field(description="what run_task is given (replay:DIR resolved to DIR/<task>.toml)")
    condition_name: str
    max_rounds: int
    budget_tokens: int | None = None

    @property
    def episode_id(self) -> str:
        return self.key.episode_id


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9+.-]+", "-", text).strip("-.")[:limit] or "x"


def model_label(spec: str) -> str:
    """A short name for tables: ``replay:/a/b/dir`` -> ``replay:dir``; other specs unchanged."""
    provider, _, rest = spec.partition(":")
    if provider == "replay":
        return f"replay:{Path(rest).name}"
    return spec


def condition_label(spec: str) -> str:
    """``/path/my-cond.toml`` -> ``my-cond``; built-in names unchanged."""
    return Path(spec).stem if spec.endswith(".toml") else spec


def normalize_model(spec: str) -> str:
    """Replay paths made absolute, so the same study resumes from any working directory."""
    provider, sep, rest = spec.partition(":")
    if provider == "replay" and sep and rest:
        return f"replay:{Path(rest).expanduser().resolve()}"
    return spec


def normalize_condition(spec: str) -> str:
    p = Path(spec).expanduser()
    if spec.endswith(".toml") or p.is_file():
        return str(p.resolve())
    return spec


def model_for_task(model: str, task_id: str) -> str:
    """``replay:DIR`` (a folder) becomes ``replay:DIR/<task_id>.toml``; anything else is used as given."""
    provider, _, rest = model.partition(":")
    if provider == "replay" and Path(rest).is_dir():
        return f"replay:{Path(rest) / f'{task_id}.toml'}"
    return model


def resolve(spec: BenchSpec) -> list[Episode]:
    """Every episode of the study, in a stable order; raises BenchConfigError on anything unusable."""
    from ptxrag.agent_graph import ConditionError, ModelConfigError, load_condition, make_chat_model
    from ptxrag.tasks import TaskError, load_task

    problems: list[str] = []
    tasks: list[TaskSpec] = []
    for t in spec.tasks:
        try:
            tasks.append(load_task(t))
        except TaskError as e:
            problems.append(str(e))
    conditions: dict[str, str] = {}
    for c in spec.conditions:
        norm = normalize_condition(c)
        try:
            conditions[norm] = load_condition(norm).name
        except ConditionError as e:
            problems.append(str(e))
    models = [normalize_model(m) for m in spec.models]
    for m in models:
        for task in tasks:
            try:
                make_chat_model(model_for_task(m, task.id))
            except ModelConfigError as e:
                problems.append(f"model {m} for task {task.id}: {e}")
    if len({t.id for t in tasks}) != len(tasks):
        problems.append("two of the tasks given have the same id")
    if problems:
        raise BenchConfigError("the study cannot run:\n  " + "\n  ".join(dict.fromkeys(problems)))
    episodes = []
    for task, model, (cond, cname), sample in product(tasks, models, conditions.items(), range(spec.samples)):
        key = EpisodeKey(task_id=task.id, model=model, condition=cond, sample=sample)
        episodes.append(
            Episode(
                key=key,
                task=task,
                model_spec=model_for_task(model, task.id),
                condition_name=cname,
                max_rounds=spec.max_rounds,
                budget_tokens=spec.budget_tokens,
            )
        )
    return episodes
