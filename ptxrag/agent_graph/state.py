"""The graph's typed state, and the frozen records it accumulates (checkpointed after every node)."""

from __future__ import annotations

import operator
from typing import Annotated, Literal, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import BaseModel, ConfigDict, Field

from ptxrag.sandbox import EvaluationReport

from .conditions import Condition

StopReason = Literal["solved", "round_limit", "unverified_no_gpu"]
"""Why an episode ended on its own: solved; out of rounds; or the CPU-side checks passed and only the
GPU stages (skipped here) could say more."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RetrievalQuery(_Frozen):
    text: str
    reason: str = Field(description="what in the task or the last verdict asked for it")


class ShownSection(_Frozen):
    """One piece of knowledge put in front of the model."""

    source: str
    version: str = ""
    section_number: str = Field(description="manual section number, or the document id of a pack document")
    title: str
    url: str = ""
    tokens: int
    truncated: bool = False
    query: str = Field("", description="the retrieval query that found it; empty for static layers")
    score: float | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.version, self.section_number)


class ContextBlock(_Frozen):
    """Knowledge shown in one place (the system prompt, or one round's message), within a token budget."""

    kind: Literal["static", "retrieved"]
    text: str
    tokens: int
    budget_tokens: int
    sections: list[ShownSection] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="what was cut or unavailable, and why")


class TokenUsage(_Frozen):
    """Tokens the provider reports (a replay model reports cl100k_base counts of its prompt and reply)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
        )


class RoundDraft(_Frozen):
    """A round in progress: filled by retrieve, then generate; evaluate turns it into a RoundRecord."""

    round: int
    queries: list[RetrievalQuery] = Field(default_factory=list)
    retrieved: ContextBlock | None = None
    prompt: str = ""
    reply: str = ""
    code: str | None = None
    extraction_notes: list[str] = Field(default_factory=list)
    extraction_error: str | None = None
    usage: TokenUsage = TokenUsage()
    model_wall_s: float = 0.0


class RoundRecord(_Frozen):
    """One completed round: what the model saw and said, the code taken from it, and the verdict."""

    round: int
    queries: list[RetrievalQuery] = Field(default_factory=list)
    retrieved: ContextBlock | None = None
    static_tokens: int = Field(0, description="tokens of static knowledge in the system prompt")
    retrieved_tokens: int = Field(0, description="tokens of knowledge retrieved for this round")
    prompt: str
    reply: str
    code: str | None
    extraction_notes: list[str] = Field(default_factory=list)
    extraction_error: str | None = None
    report: EvaluationReport | None = Field(None, description="None when the reply held no code")
    outcome: str = Field(description="one line: where this attempt stopped")
    usage: TokenUsage = TokenUsage()
    model_wall_s: float = 0.0
    eval_wall_s: float = 0.0

    @property
    def success(self) -> bool:
        return self.report is not None and self.report.success

    @property
    def stages_passed(self) -> int:
        if self.report is None:
            return 0
        return sum(1 for s in self.report.stages()[:4] if s.ok)


class AgentState(TypedDict, total=False):
    task_id: str
    """The task being solved (its spec is in the runtime context; the id is checked on resume)."""
    condition: Condition
    """The knowledge condition of this episode."""
    model_label: str
    """The model spec the episode was started with (checked on resume)."""
    max_rounds: int
    """Round limit; the episode stops after this many evaluated attempts."""
    round: int
    """Number of completed (evaluated) rounds: the explicit counter routing relies on."""
    messages: Annotated[list[AnyMessage], add_messages]
    """The conversation: system prompt (with static knowledge), then per round a prompt and a reply."""
    static_context: ContextBlock | None
    """Knowledge injected once for the condition (None when the condition has no static layers)."""
    draft: RoundDraft | None
    """The round in progress, or None between rounds."""
    shown: Annotated[list[ShownSection], operator.add]
    """Every retrieved section shown so far (so none is shown twice unless the condition allows it)."""
    rounds: Annotated[list[RoundRecord], operator.add]
    """Completed rounds, in order."""
    best_round: int | None
    """The round of the best attempt so far (success first, then stages passed, then speed)."""
    stop_reason: StopReason | None
    """Set by route when the episode ends."""


#: state classes the checkpointer may deserialize (the nested ones are rebuilt by their parents)
CHECKPOINT_TYPES: list[type] = [Condition, ContextBlock, RoundDraft, RoundRecord, ShownSection]
