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
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ptxrag.base.errors import ConfigInputError
from ptxrag.tasks import TaskSpec

#: the agent's history modes (agent_graph.conditions.HistoryMode; spelled out so a study's settings are
#: checked without importing the agent)
HistoryModeName = Literal["full", "last-k", "summary"]


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
    budgets: list[int] | None = Field(
        None, description="a study axis: every episode once per budget (overrides the conditions')"
    )
    history: list[HistoryModeName] | None = Field(
        None,
        description="history modes (overriding the conditions'): one applies to every episode; several "
        "are a study axis, every episode once per mode",
    )

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return None
        if not v or any(not 256 <= b <= 200_000 for b in v) or len(set(v)) != len(v):
            raise ValueError("budgets: distinct token counts between 256 and 200000")
        return v

    @model_validator(mode="after")
    def _one_budget_setting(self) -> BenchSpec:
        if self.budgets and self.budget_tokens is not None:
            raise ValueError("give either a budget or budgets (a study axis), not both")
        return self

    @property
    def budget_axis(self) -> list[int | None]:
        return list(self.budgets) if self.budgets else [self.budget_tokens]

    @field_validator("history")
    @classmethod
    def _histories(cls, v: list[HistoryModeName] | None) -> list[HistoryModeName] | None:
        if v is not None and (not v or len(set(v)) != len(v)):
            raise ValueError("history: distinct modes (full, last-k, summary)")
        return v

    @property
    def history_axis(self) -> list[HistoryModeName | None]:
        """The history mode of each pass over the study (None: each condition's own)."""
        return list(self.history) if self.history else [None]

    @property
    def history_is_axis(self) -> bool:
        return self.history is not None and len(self.history) > 1

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
    budget_tokens: int | None = Field(None, description="set when budgets are a study axis")
    history: HistoryModeName | None = Field(None, description="set when history modes are a study axis")

    @property
    def episode_id(self) -> str:
        """Deterministic: the same key always names the same episode (and resumes it)."""
        parts: list[object] = [self.task_id, self.model, self.condition, self.sample]
        if self.budget_tokens is not None:
            parts.append(self.budget_tokens)
        if self.history is not None:  # appended only when set: ids of studies without the axis are unchanged
            parts.append(f"history={self.history}")
        digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:10]
        cond = axis_name(condition_label(self.condition), self.budget_tokens, self.history)
        return f"{self.task_id}.{_slug(cond)}.{_slug(model_label(self.model))}.s{self.sample}.{digest}"


class Episode(_Frozen):
    """An episode ready to run: its key, the task, and the model spec for this task."""

    key: EpisodeKey
    task: TaskSpec
    model_spec: str = Field(description="what run_task is given (replay:DIR resolved to DIR/<task>.toml)")
    condition_name: str
    max_rounds: int
    budget_tokens: int | None = None
    history: HistoryModeName | None = Field(None, description="overrides the condition's history mode")

    @property
    def episode_id(self) -> str:
        return self.key.episode_id


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9+.-]+", "-", text).strip("-.")[:limit] or "x"


def budget_label(tokens: int) -> str:
    """8000 -> ``8k``; 8192 -> ``8192``."""
    return f"{tokens // 1000}k" if tokens % 1000 == 0 else str(tokens)


def axis_name(condition: str, budget_tokens: int | None, history: str | None) -> str:
    """A condition's name on the study's axes: ``templates``, ``templates@8k``, ``templates/full``,
    ``templates@8k/full`` (each axis value is its own condition in every table)."""
    name = condition
    if budget_tokens is not None:
        name += f"@{budget_label(budget_tokens)}"
    if history is not None:
        name += f"/{history}"
    return name


def parse_budget(text: str) -> int:
    """``8k`` -> 8000, ``16000`` -> 16000 (k means a thousand, as in the built-in budgets)."""
    t = text.strip().lower()
    try:
        return int(float(t[:-1]) * 1000) if t.endswith("k") else int(t)
    except ValueError:
        raise ValueError(f"not a token budget: {text!r} (write 8k or 8000)") from None


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


def resolve(spec: BenchSpec, *, check_models: bool = True) -> list[Episode]:
    """Every episode of the study, in a stable order; raises BenchConfigError on anything unusable.
    ``check_models=False`` (a dry run) does not ask for credentials, only for well-formed specs."""
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
                if check_models or m.startswith("replay:"):
                    make_chat_model(model_for_task(m, task.id))
                elif m.partition(":")[0] not in ("anthropic", "openai") or not m.partition(":")[2]:
                    raise ModelConfigError(f"model spec {m!r} is not anthropic:, openai: or replay:")
            except ModelConfigError as e:
                problems.append(f"model {m} for task {task.id}: {e}")
    if len({t.id for t in tasks}) != len(tasks):
        problems.append("two of the tasks given have the same id")
    if problems:
        raise BenchConfigError("the study cannot run:\n  " + "\n  ".join(dict.fromkeys(problems)))
    episodes = []
    for task, model, (cond, cname), budget, history, sample in product(
        tasks, models, conditions.items(), spec.budget_axis, spec.history_axis, range(spec.samples)
    ):
        on_axis = budget if spec.budgets else None
        history_on_axis = history if spec.history_is_axis else None
        key = EpisodeKey(
            task_id=task.id, model=model, condition=cond, sample=sample, budget_tokens=on_axis,
            history=history_on_axis,
        )  # fmt: skip
        episodes.append(
            Episode(
                key=key,
                task=task,
                model_spec=model_for_task(model, task.id),
                condition_name=axis_name(cname, on_axis, history_on_axis),
                max_rounds=spec.max_rounds,
                budget_tokens=budget,
                history=history,
            )
        )
    return episodes
