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
from typing import Any, Literal, cast

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ptxrag.base.errors import ConfigInputError, ModelApiFailure
from ptxrag.base.model_keys import missing_key, split_openai

from .replay import ReplayChatModel, message_text
from .state import TokenUsage

Provider = Literal["anthropic", "openai", "replay", "custom"]
MaxTokensParam = Literal["auto", "max_tokens", "max_completion_tokens"]
DEFAULT_MAX_OUTPUT_TOKENS = 8192
#: the context window assumed for a model (the smallest of the usual hosted ones: GPT-4o's 128k)
DEFAULT_CONTEXT_WINDOW_TOKENS = 128_000
#: provider stop reasons that mean "cut off at the output limit"
CUT_OFF_REASONS = frozenset({"max_tokens", "length", "max_output_tokens"})
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
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    #: OpenAI-compatible route: which request field carries the output limit
    max_tokens_param: str = ""
    #: OpenAI-compatible route: builds the client for the other field after a 400 that names this one
    rebuild: Callable[[str], BaseChatModel] | None = field(default=None, repr=False, compare=False)

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

    def invoke(self, messages: list[BaseMessage], *, reply_index: int | None = None) -> AIMessage:
        """One reply, with retries. ``reply_index`` (how many replies the episode already has) travels in
        the run's metadata, never to the provider; a replay model picks its scripted reply by it."""
        prepared = self.prepare(messages)
        config: dict[str, Any] = {}
        if reply_index is not None:
            config["metadata"] = {"ptxrag_reply_index": reply_index}
        try:
            try:
                reply = self._call(prepared, config)
            except Exception as e:
                other = self._other_param(e)
                if other is None or self.rebuild is None:
                    raise
                # the endpoint refused the output-limit field: use the other one from now on
                self.chat, self.max_tokens_param = self.rebuild(other), other
                reply = self._call(prepared, config)
        except Exception as e:
            kind = "still failing after retries" if is_transient(e) else "failed"
            raise ModelCallError(f"model {self.label} {kind}: {type(e).__name__}: {e}") from e
        if not isinstance(reply, AIMessage):
            raise ModelCallError(f"model {self.label} returned {type(reply).__name__}, not an AIMessage")
        return reply

    def _call(self, prepared: list[BaseMessage], config: dict[str, Any]) -> Any:
        retrying = Retrying(
            stop=stop_after_attempt(self.retry.attempts),
            wait=self._wait,
            retry=retry_if_exception(is_transient),
            reraise=True,
            sleep=self.sleep,
        )
        for attempt in retrying:
            with attempt:
                reply = self.chat.invoke(prepared, config=cast(RunnableConfig, config) if config else None)
        return reply

    def _other_param(self, exc: BaseException) -> str | None:
        """After a 400 that names the output-limit field this client sends, the other field."""
        if self.max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            return None
        status = getattr(exc, "status_code", None) or getattr(
            getattr(exc, "response", None), "status_code", None
        )
        if status != 400 or self.max_tokens_param not in str(exc):
            return None
        return "max_tokens" if self.max_tokens_param == "max_completion_tokens" else "max_completion_tokens"


def stop_reason_of(reply: AIMessage) -> str:
    """The provider's stop reason (Anthropic ``stop_reason``, OpenAI ``finish_reason``), or ''."""
    meta = reply.response_metadata or {}
    return str(meta.get("stop_reason") or meta.get("finish_reason") or "")


def usage_of(reply: AIMessage) -> TokenUsage:
    u: dict[str, Any] = dict(reply.usage_metadata or {})
    details = u.get("input_token_details") or {}
    return TokenUsage(
        input_tokens=int(u.get("input_tokens", 0) or 0),
        output_tokens=int(u.get("output_tokens", 0) or 0),
        cache_read_tokens=int(details.get("cache_read", 0) or 0),
        cache_creation_tokens=int(details.get("cache_creation", 0) or 0),
    )


def make_chat_model(
    spec: str,
    *,
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
    temperature: float | None = None,
    timeout_s: float = 600.0,
    retry: RetryPolicy | None = None,
    max_tokens_param: MaxTokensParam = "auto",
) -> ChatModel:
    """A chat model from a spec string; see ``SPEC_FORMS``. Raises ModelConfigError with what to fix.

    ``max_tokens_param`` (OpenAI-compatible route): the request field for the output limit; ``auto``
    sends ``max_completion_tokens`` to api.openai.com and ``max_tokens`` to other servers, and either
    switches to the other field once after a 400 that names it."""
    retry = retry or RetryPolicy()
    provider, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ModelConfigError(f"model spec {spec!r} is not one of: {SPEC_FORMS}")
    if provider == "replay":
        try:
            return ChatModel(ReplayChatModel.from_file(Path(rest)), f"replay:{rest}", "replay", retry)
        except (FileNotFoundError, ValueError) as e:
            raise ModelConfigError(str(e)) from None
    problem = missing_key(spec)
    if problem:
        raise ModelConfigError(problem)
    if provider == "anthropic":
        from langchain_anthropic import ChatAnthropic

        kwargs: dict = {
            "model": rest,
            "max_tokens": max_output_tokens,
            "max_retries": 0,
            "timeout": timeout_s,
        }
        if temperature is not None:
            kwargs["temperature"] = temperature
        return ChatModel(
            ChatAnthropic(**kwargs), spec, "anthropic", retry, max_output_tokens=max_output_tokens
        )
    if provider == "openai":
        model, base_url = split_openai(rest)
        key = os.environ.get("OPENAI_API_KEY")
        from langchain_openai import ChatOpenAI

        param: str = max_tokens_param
        if param == "auto":
            # api.openai.com wants max_completion_tokens (o-series refuse max_tokens); local servers
            # (older vLLM, Ollama) read max_tokens and silently ignore the newer field
            param = (
                "max_completion_tokens" if base_url is None or "api.openai.com" in base_url else "max_tokens"
            )
        okw: dict = {
            "model": model,
            "api_key": key or "not-needed",
            "max_retries": 0,
            "timeout": timeout_s,
        }
        if base_url:
            okw["base_url"] = base_url
        if temperature is not None:
            okw["temperature"] = temperature

        def build(field_name: str) -> BaseChatModel:
            if field_name == "max_tokens":  # ChatOpenAI renames its max_tokens; send the field ourselves
                return ChatOpenAI(**okw, extra_body={"max_tokens": max_output_tokens})
            return ChatOpenAI(**okw, max_tokens=max_output_tokens)

        return ChatModel(
            build(param), spec, "openai", retry, max_output_tokens=max_output_tokens,
            max_tokens_param=param, rebuild=build,
        )  # fmt: skip
    raise ModelConfigError(f"unknown model provider {provider!r} in {spec!r}; use one of: {SPEC_FORMS}")


def as_chat_model(model: Any, retry: RetryPolicy | None = None) -> ChatModel:
    """Accept a spec string, any LangChain chat model, a ChatModel, a LangChain Runnable (e.g. a
    ``RunnableLambda``) or a plain callable: messages in, a string or an AIMessage out."""
    if isinstance(model, ChatModel):
        return model
    if isinstance(model, str):
        return make_chat_model(model, retry=retry)
    if isinstance(model, BaseChatModel):
        provider: Provider = "replay" if isinstance(model, ReplayChatModel) else "custom"
        label = f"replay:{model.source}" if isinstance(model, ReplayChatModel) else type(model).__name__
        return ChatModel(model, label, provider, retry or RetryPolicy())
    if isinstance(model, Runnable) or callable(model):
        chat = CallableChatModel(fn=model)
        return ChatModel(chat, chat.label, "custom", retry or RetryPolicy())
    raise ModelConfigError(
        f"not a model: {model!r}; give a spec ({SPEC_FORMS}), a LangChain chat model, a Runnable or a callable"
    )


class CallableChatModel(BaseChatModel):
    """A plain function or a LangChain Runnable used as a chat model: it gets the message list and
    returns a string, an AIMessage, or anything with a ``content`` attribute."""

    fn: Any

    @property
    def label(self) -> str:
        name = getattr(self.fn, "name", None) or getattr(self.fn, "__name__", None) or type(self.fn).__name__
        return f"callable:{name}"

    @property
    def _llm_type(self) -> str:
        return "ptxrag-callable"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        out = self.fn.invoke(messages) if isinstance(self.fn, Runnable) else self.fn(messages)
        if isinstance(out, AIMessage):
            msg = out
        elif isinstance(out, str):
            msg = AIMessage(content=out)
        elif isinstance(getattr(out, "content", None), str | list):
            msg = AIMessage(content=out.content)
        else:
            raise ModelCallError(
                f"the model callable returned {type(out).__name__}, not a string or a message"
            )
        return ChatResult(generations=[ChatGeneration(message=msg)])
