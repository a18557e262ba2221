"""Conditions: what knowledge the model gets, as data. The study's independent variable.

A condition is a TOML file: which knowledge layers are injected statically (once, in the system prompt),
whether manual and contract excerpts are retrieved each round, and the token budget that both share.
The built-in ones live in ``agent_graph/conditions/``; a user-defined one is any file with the same keys
(``load_condition("path/to/mine.toml")``).
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ptxrag.base.errors import ConditionInputError

Layer = Literal["hardware", "templates", "contracts", "patterns", "hints"]
HistoryMode = Literal["full", "last-k", "summary"]
Source = Literal["ptx-isa", "contracts", "patterns", "hints", "templates", "hardware"]

#: the context budget of a condition file that names none, tokens of ``cl100k_base`` per round (tokens.py);
#: the built-in conditions set their own, each large enough for its layers whole on every suite task
DEFAULT_BUDGET_TOKENS = 8000


class ConditionError(ConditionInputError, ValueError):
    """A condition file is missing or invalid; the message names the file and what to fix."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RetrievalSettings(_Frozen):
    enabled: bool = False
    sources: list[Source] = Field(
        default_factory=lambda: list[Source](["ptx-isa", "contracts"]),
        description="retriever sources to search",
    )
    k_per_query: int = Field(6, ge=1, le=50, description="hits asked for per query")
    max_queries: int = Field(6, ge=1, le=20, description="queries per round at most")
    repeat_sections: bool = Field(False, description="allow a section already shown in an earlier round")
    reserve_tokens: int | None = Field(
        None,
        ge=0,
        description="tokens kept for retrieval when static layers share the budget (default: half of it)",
    )


class HistorySettings(_Frozen):
    """What of the earlier rounds is resent each round (the conversation is kept whole in the state and
    the transcript either way). ``full``: every earlier prompt and reply. ``last-k``: the task prompt and
    the last ``keep_rounds`` rounds verbatim, older rounds dropped. ``summary``: as ``last-k``, with one
    line per older round (its verdict) instead of nothing."""

    mode: HistoryMode = "summary"
    keep_rounds: int = Field(2, ge=1, le=50, description="last-k and summary: earlier rounds resent verbatim")


class Condition(_Frozen):
    """One knowledge condition. ``budget_tokens`` bounds static plus retrieved context in every round."""

    name: str
    description: str = ""
    static: list[Layer] = Field(default_factory=list, description="layers injected once, in this order")
    retrieval: RetrievalSettings = RetrievalSettings()
    budget_tokens: int = Field(DEFAULT_BUDGET_TOKENS, ge=256, le=200_000)
    history: HistorySettings = HistorySettings()
    static_fill: bool = Field(
        False,
        description="after the part of each layer the task needs, add further whole documents of the "
        "layer while the budget has room (off: the prompt carries exactly what the task needs)",
    )
    source_file: str | None = Field(None, description="where the condition was loaded from")

    @model_validator(mode="after")
    def _check(self) -> Condition:
        if len(set(self.static)) != len(self.static):
            raise ValueError(f"static layers repeat: {self.static}")
        # a no-knowledge baseline is legitimate, but it must be named so on purpose
        unnamed = "baseline" not in self.name and "none" not in self.name
        if not self.static and not self.retrieval.enabled and unnamed:
            raise ValueError(
                "this condition gives the model no knowledge at all (no static layers, retrieval "
                "disabled); name it '...baseline...' or '...none...' if that is intended"
            )
        return self

    @property
    def retrieval_budget_tokens(self) -> int:
        """Tokens retrieval may use each round."""
        if not self.retrieval.enabled:
            return 0
        if not self.static:
            return self.budget_tokens
        reserve = self.retrieval.reserve_tokens
        return min(self.budget_tokens, self.budget_tokens // 2 if reserve is None else reserve)

    @property
    def static_budget_tokens(self) -> int:
        """Tokens the static layers may use (the rest of the budget is kept for retrieval)."""
        return self.budget_tokens - self.retrieval_budget_tokens if self.static else 0

    def with_budget(self, budget_tokens: int) -> Condition:
        return self.model_copy(update={"budget_tokens": budget_tokens})

    def with_history(self, mode: HistoryMode, keep_rounds: int | None = None) -> Condition:
        k = self.history.keep_rounds if keep_rounds is None else keep_rounds
        return self.model_copy(update={"history": HistorySettings(mode=mode, keep_rounds=k)})


def _builtin_dir():  # noqa: ANN202 - importlib Traversable
    return resources.files("ptxrag.agent_graph") / "conditions"


def builtin_conditions() -> list[str]:
    """Names of the conditions shipped with ptxrag."""
    return sorted(p.name.removesuffix(".toml") for p in _builtin_dir().iterdir() if p.name.endswith(".toml"))


def _parse(text: str, origin: str) -> Condition:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConditionError(f"{origin}: not valid TOML: {e}") from None
    try:
        return Condition.model_validate({**data, "source_file": origin})
    except ValidationError as e:
        lines = [f"{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg']}" for err in e.errors()]
        raise ConditionError(f"{origin}: invalid condition:\n  " + "\n  ".join(lines)) from None


def load_condition(name_or_path: str | Path) -> Condition:
    """A built-in condition by name (``rag+templates``) or a user-defined one from a ``.toml`` path."""
    if isinstance(name_or_path, Condition):
        return name_or_path
    text = str(name_or_path)
    p = Path(text).expanduser()
    if text.endswith(".toml") or p.is_file():
        if not p.is_file():
            raise ConditionError(f"condition file {p} does not exist")
        return _parse(p.read_text(), str(p))
    f = _builtin_dir() / f"{text}.toml"
    if not f.is_file():
        raise ConditionError(
            f"unknown condition {text!r}; built-in: {', '.join(builtin_conditions())}; "
            "or give the path of a .toml file with the same keys"
        )
    return _parse(f.read_text(), f"builtin:{text}")
