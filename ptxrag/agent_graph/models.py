"""Chat models through LangChain: ``anthropic:<model>``, ``openai:<model>@<base_url>``, ``replay:<file>``.

One retry layer (tenacity) around every call: rate limits, overload and server errors are retried with
exponential backoff and jitter, or after the server's ``Retry-After`` (``retry-after-ms``) when it sends
one, bounded by the policy's ``max_wait_s``; anything else fails the call at once. The SDKs' own retries are off so
attempts are counted in one place.
"""

from __future__ import annotations

import email.utils
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ptxrag.base.errors import ConfigInputError, ModelApiFailure

from .replay import ReplayChatModel, message_text
from .state import TokenUsage

Provider = Literal["anthropic", "openai", "replay", "custom"]
DEFAULT_MAX_OUTPUT_TOKENS = 8192
SPEC_FORMS = (
    "anthropic:<model> (key from ANTHROPIC_API_KEY), openai:<model>@<base_url> (any OpenAI-compatible "
    "server: vLLM, Ollama; key from OPENAI_API_KEY when the server needs one), replay:<file> (scripted, offline)"
)


class ModelConfigError(ConfigInputError, ValueError):
    """The model spec is malformed or its credentials are missing; the message says what to set."""


class ModelCallError(ModelApiFailure, RuntimeError):
    """A model call failed for good (not transient, or still failing after every retry)."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    initial_wait_s: float = 2.0
    max_wait_s: float = 60.0


_TRANSIENT_NAMES = {
    "RateLimitError", "InternalServerError", "OverloadedError", "ServiceUnavailableError",
    "APIConnectionError", "APITimeoutError", "ConnectError", "ReadTimeout", "ConnectTimeout",
    "RemoteProtocolError",
}  # fmt: skip


def is_transient(exc: BaseException) -> bool:
    """Rate limits (429), timeouts (408), conflicts (409), overload (529) and 5xx, and connection errors."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return status in (408, 409, 429) or status >= 500
    return any(c.__name__ in _TRANSIENT_NAMES for c in type(exc).__mro__)


def retry_after_s(exc: BaseException | None, now: float | None = None) -> float | None:
    """The wait the server asked for in an error's ``retry-after-ms`` or ``Retry-After`` header (seconds or an
    HTTP date), or None when it sent none that parses to a non-negative wait."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            wait = float(ms) / 1000.0
            return wait if wait >= 0 else None
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        wait = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        wait = when.timestamp() - (time.time() if now is None else now)
        wait = max(wait, 0.0)
    return wait if wait >= 0 else None


@dataclass
class ChatModel:
    """A chat model with its label and provider; ``invoke`` applies retries and prompt caching."""

    chat: BaseChatModel
    label: str
    provider: Provider = "custom"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it gave one (capped at ``max_wait_s``), else backoff with jitter."""
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after_s(exc)
        if asked is not None:
            return min(asked, self.retry.max_wait_s)
        backoff = wait_exponential_jitter(
            multiplier=self.retry.initial_wait_s, max=self.retry.max_wait_s, jitter=self.retry.initial_wait_s
        )
        return float(backoff(state))

    def prepare(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """Anthropic: mark the system prompt (instructions and static knowledge, the same every round)
        as a cache breakpoint, so later rounds read it from the prompt cache."""
        if self.provider != "anthropic" or not messages or not isinstance(messages[0], SystemMessage):
            return messages
        text = message_text(messages[0])
        cached = SystemMessage(
            content=[{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]
        )
        return [cached, *messages[1:]]

    def invoke(self, messages: list[BaseMessage]) -> AIMessage:
        prepared = self.prepare(messages)
        retrying = Retrying(
            stop=stop_after_attempt(self.retry.attempts),
            wait=self._wait,
            retry=retry_if_exception(is_transient),
            reraise=True,
            sleep=self.sleep,
        )
        try:
            for attempt in retrying:
                with attempt:
                    reply = self.chat.invoke(prepared)
        except Exception as e:
            kind = "still failing after retries" if is_transient(e) else "failed"
            raise ModelCallError(f"model {self.label} {kind}: {type(e).__name__}: {e}") from e
        if not isinstance(reply, AIMessage):
            raise ModelCallError(f"model {self.label} returned {type(reply).__name__}, not an AIMessage")
        return reply


def usage_of(reply: AIMessage) -> TokenUsage:
    u: dict[str, Any] = dict(reply.usage_metadata or {})
    details = u.get("input_token_details") or {}
    return TokenUsage(
        input_tokens=int(u.get("input_tokens", 0) or 0),
        output_tokens=int(u.get("output_tokens", 0) or 0),
        cache_read_tokens=int(details.get("cache_read", 0) or 0),
        cache_creation_tokens=int(details.get("cache_creation", 0) or 0),
    )


def _split_openai(rest: str) -> tuple[str, str | None]:
    for marker in ("@http://", "@https://"):
        if marker in rest:
            model, _, url = rest.rpartition(marker)
            return model, marker[1:] + url
    return rest, None


def make_chat_model(
    spec: str,
    *,
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
    temperature: float | None = None,
    timeout_s: float = 600.0,
    retry: RetryPolicy | None = None,
) -> ChatModel:
    """A chat model from a spec string; see ``SPEC_FORMS``. Raises ModelConfigError with what to fix."""
    retry = retry or RetryPolicy()
    provider, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ModelConfigError(f"model spec {spec!r} is not one of: {SPEC_FORMS}")
    if provider == "replay":
        try:
            return ChatModel(ReplayChatModel.from_file(Path(rest)), f"replay:{rest}", "replay", retry)
        except (FileNotFoundError, ValueError) as e:
            raise ModelConfigError(str(e)) from None
    if provider == "anthropic":
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise ModelConfigError(
                "ANTHROPIC_API_KEY is not set: export ANTHROPIC_API_KEY=... to use "
                f"{spec}, or run offline with a scripted model: --model replay:FILE "
                "(`ptxrag demo` shows one)"
            )
        from langchain_anthropic import ChatAnthropic

        kwargs: dict = {
            "model": rest,
            "max_tokens": max_output_tokens,
            "max_retries": 0,
            "timeout": timeout_s,
        }
        if temperature is not None:
            kwargs["temperature"] = temperature
        return ChatModel(ChatAnthropic(**kwargs), spec, "anthropic", retry)
    if provider == "openai":
        model, base_url = _split_openai(rest)
        key = os.environ.get("OPENAI_API_KEY")
        if not key and base_url is None:
            raise ModelConfigError(
                "OPENAI_API_KEY is not set: export it to use the OpenAI API, give a local server as "
                "openai:<model>@http://host:port/v1 (no key needed), or run offline with --model replay:FILE"
            )
        from langchain_openai import ChatOpenAI

        okw: dict = {
            "model": model,
            "api_key": key or "not-needed",
            "max_tokens": max_output_tokens,
            "max_retries": 0,
            "timeout": timeout_s,
        }
        if base_url:
            okw["base_url"] = base_url
        if temperature is not None:
            okw["temperature"] = temperature
        return ChatModel(ChatOpenAI(**okw), spec, "openai", retry)
    raise ModelConfigError(f"unknown model provider {provider!r} in {spec!r}; use one of: {SPEC_FORMS}")


def as_chat_model(model: str | BaseChatModel | ChatModel, retry: RetryPolicy | None = None) -> ChatModel:
    """Accept a spec string, any LangChain chat model, or a ChatModel."""
    if isinstance(model, ChatModel):
        return model
    if isinstance(model, str):
        return make_chat_model(model, retry=retry)
    if isinstance(model, BaseChatModel):
        provider: Provider = "replay" if isinstance(model, ReplayChatModel) else "custom"
        label = f"replay:{model.source}" if isinstance(model, ReplayChatModel) else type(model).__name__
        return ChatModel(model, label, provider, retry or RetryPolicy())
    raise ModelConfigError(f"not a model: {model!r}; give a spec ({SPEC_FORMS}) or a LangChain chat model")
