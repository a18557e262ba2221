"""``ReplayChatModel``: a scripted chat model for demos and tests. It never calls a network.

A replay file (TOML) lists replies in order:

    description = "what this trajectory shows"
    [[reply]]
    text = '''the whole reply, prose and code fences included'''
    [[reply]]
    fail_first = 1            # optional: raise this many times before answering
    error = "rate_limit"      # rate_limit | server_error | fatal
    stop_reason = "max_tokens"  # optional: play a reply cut off at the output limit (default end_turn)
    text = '''...'''

The reply given is chosen by the number of replies the episode already has (the agent passes it in the
run's metadata; without it, the assistant messages in the request are counted), not by a counter, so an
episode resumed in a new process gets the same reply for the same round.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from ptxrag.base.errors import ConfigInputError

from .tokens import count_tokens

ErrorKind = Literal["rate_limit", "server_error", "fatal"]


class ReplayError(ConfigInputError, RuntimeError):
    """A scripted failure, or a replay that has run out of replies."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ReplayEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    text: str = ""
    error: ErrorKind | None = None
    fail_first: int = 0
    stop_reason: str = "end_turn"


def message_text(m: BaseMessage) -> str:
    """The text of a message whose content is a string or a list of content blocks."""
    if isinstance(m.content, str):
        return m.content
    return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in m.content)


_STATUS = {"rate_limit": 429, "server_error": 503, "fatal": 400}


class ReplayChatModel(BaseChatModel):
    """Scripted replies (a test and demo double, labelled ``replay:`` everywhere it appears)."""

    entries: list[ReplayEntry]
    source: str = "inline"
    _failures: dict[int, int] = PrivateAttr(default_factory=dict)
    _calls: int = PrivateAttr(default=0)

    @classmethod
    def from_replies(cls, replies: list[str | ReplayEntry], source: str = "inline") -> ReplayChatModel:
        return cls(
            entries=[r if isinstance(r, ReplayEntry) else ReplayEntry(text=r) for r in replies], source=source
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ReplayChatModel:
        p = Path(path).expanduser()
        if not p.is_file():
            raise FileNotFoundError(f"replay file {p} does not exist")
        try:
            data = tomllib.loads(p.read_text())
            entries = [ReplayEntry.model_validate(e) for e in data.get("reply", [])]
        except (tomllib.TOMLDecodeError, ValidationError) as e:
            raise ValueError(f"replay file {p} is not valid: {e}") from None
        if not entries:
            raise ValueError(f"replay file {p} has no [[reply]] entries")
        return cls(entries=entries, source=str(p))

    @property
    def calls(self) -> int:
        """How many times the model was asked (failed attempts included)."""
        return self._calls

    @property
    def _llm_type(self) -> str:
        return "ptxrag-replay"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._calls += 1
        # the agent passes how many replies the episode already has (its request may resend only some)
        meta = getattr(run_manager, "metadata", None) or {}
        index = meta.get("ptxrag_reply_index")
        if not isinstance(index, int):
            index = sum(1 for m in messages if m.type == "ai")
        if index >= len(self.entries):
            raise ReplayError(
                f"replay {self.source} has {len(self.entries)} replies; reply {index + 1} was asked for"
            )
        entry = self.entries[index]
        if entry.error is not None:
            done = self._failures.get(index, 0)
            if entry.error == "fatal" or done < entry.fail_first:
                self._failures[index] = done + 1
                raise ReplayError(
                    f"scripted {entry.error} on reply {index + 1} of {self.source}", _STATUS[entry.error]
                )
        prompt_tokens = sum(count_tokens(message_text(m)) for m in messages)
        out_tokens = count_tokens(entry.text)
        msg = AIMessage(
            content=entry.text,
            usage_metadata={
                "input_tokens": prompt_tokens,
                "output_tokens": out_tokens,
                "total_tokens": prompt_tokens + out_tokens,
            },
            response_metadata={
                "model_name": f"replay:{Path(self.source).name}",
                "stop_reason": entry.stop_reason,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=msg)])
