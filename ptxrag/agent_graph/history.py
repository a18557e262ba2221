"""What of the conversation is resent each round: the condition's history mode, counted in tokens.

The state keeps every message (transcripts and resumes need them); the request each round is rebuilt
from the completed rounds' records:

- ``full``: the system prompt, then every earlier round's prompt and reply, then this round's prompt;
- ``last-k``: the system prompt; one user message with the task prompt (round 1's, which holds the task
  statement), a line saying how many rounds were left out, and the prompt of the oldest kept round; then
  the last ``keep_rounds`` rounds verbatim;
- ``summary``: as ``last-k``, with one line per left-out round (what its code did, the verdict).
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ptxrag.tasks import TaskSpec

from .conditions import Condition, HistorySettings
from .knowledge import KnowledgeProvider
from .replay import message_text
from .state import RoundRecord
from .tokens import count_tokens


@dataclass(frozen=True)
class Request:
    """The messages sent for one round, and what they cost in ``cl100k_base`` tokens."""

    messages: list[BaseMessage]
    history_tokens: int
    """tokens of earlier rounds resent (prompts, replies, summary lines); 0 in round 1"""
    sent_tokens: int
    """tokens of every message sent (system prompt, history, this round's prompt)"""
    rounds_resent: list[int]
    """earlier rounds resent verbatim"""
    rounds_summarized: list[int]
    """earlier rounds given as one line (summary) or left out (last-k)"""


def summary_line(r: RoundRecord) -> str:
    lines = len(r.code.splitlines()) if r.code else 0
    did = f"a kernel of {lines} lines" if r.code else "no usable code"
    return f"- round {r.round}: {did}; verdict: {r.outcome}"


def build_request(
    system: BaseMessage, rounds: list[RoundRecord], prompt: str, settings: HistorySettings
) -> Request:
    """The request for the round after ``rounds``, whose prompt is ``prompt``."""
    if settings.mode == "full" or len(rounds) <= settings.keep_rounds:
        kept, dropped = rounds, []
    else:
        kept, dropped = rounds[-settings.keep_rounds :], rounds[: -settings.keep_rounds]
    msgs: list[BaseMessage] = [system]
    if dropped:
        head = [dropped[0].prompt.strip()]
        if settings.mode == "summary":
            head.append(
                f"## Earlier rounds ({len(dropped)}, summarized; their code and verdicts are not repeated)\n\n"
                + "\n".join(summary_line(r) for r in dropped)
            )
        else:
            head.append(f"({len(dropped)} earlier round(s) left out of this conversation.)")
        # the oldest kept round's prompt follows in the same user message (roles must alternate)
        head.append(kept[0].prompt.strip() if kept else prompt.strip())
        msgs.append(HumanMessage(content="\n\n".join(head) + "\n"))
        if kept:
            msgs.append(AIMessage(content=kept[0].reply))
            for r in kept[1:]:
                msgs += [HumanMessage(content=r.prompt), AIMessage(content=r.reply)]
            msgs.append(HumanMessage(content=prompt))
    else:
        for r in kept:
            msgs += [HumanMessage(content=r.prompt), AIMessage(content=r.reply)]
        msgs.append(HumanMessage(content=prompt))
    sent = sum(count_tokens(message_text(m)) for m in msgs)
    history = sent - count_tokens(message_text(system)) - count_tokens(prompt) if rounds else 0
    return Request(
        messages=msgs,
        history_tokens=max(history, 0),
        sent_tokens=sent,
        rounds_resent=[r.round for r in kept],
        rounds_summarized=[r.round for r in dropped],
    )


def visible_rounds(rounds: list[RoundRecord], settings: HistorySettings) -> list[RoundRecord]:
    """The earlier rounds whose prompts the next request resends verbatim (round 1's is always resent)."""
    if settings.mode == "full" or len(rounds) <= settings.keep_rounds:
        return list(rounds)
    return [rounds[0], *rounds[-settings.keep_rounds :]]


#: tokens a feedback prompt adds around the (capped) verdict and retrieved knowledge: the template,
#: the instruction-absent lines, notes about the reply
FEEDBACK_OVERHEAD_TOKENS = 600
#: tokens of one summary line at most (the outcome is cut to 160 characters)
SUMMARY_LINE_TOKENS = 80


def largest_request_tokens(
    settings: HistorySettings,
    *,
    system_tokens: int,
    task_prompt_tokens: int,
    retrieval_tokens: int,
    max_output_tokens: int,
    max_rounds: int,
) -> int:
    """An upper bound on the largest request of an episode of ``max_rounds`` rounds (cl100k_base): the
    system prompt, the task prompt, every resent round at its largest (capped verdict, full retrieval
    budget, a reply at the output limit), summary lines and the last round's prompt."""
    from .prompts import MAX_FEEDBACK_TOKENS

    feedback = MAX_FEEDBACK_TOKENS + FEEDBACK_OVERHEAD_TOKENS + retrieval_tokens
    task = task_prompt_tokens + retrieval_tokens
    earlier = max_rounds - 1
    kept = earlier if settings.mode == "full" else min(settings.keep_rounds, earlier)
    dropped = earlier - kept
    summary = dropped * SUMMARY_LINE_TOKENS + 40 if settings.mode == "summary" and dropped else 0
    return system_tokens + task + kept * (max(feedback, task) + max_output_tokens) + summary + feedback


def estimate_episode_tokens(
    cond: Condition,
    task: TaskSpec,
    knowledge: KnowledgeProvider,
    rounds: int,
    *,
    reply_tokens: int,
    feedback_tokens: int,
) -> tuple[int, int, int, str]:
    """For a dry run: (static tokens, input tokens over ``rounds`` rounds, output tokens, the context
    fingerprint), counted on the real system and task prompts, with retrieval filling its budget, each
    verdict ``feedback_tokens`` and each reply ``reply_tokens``, resent as the history mode says."""
    from .knowledge import build_static_context, context_fingerprint
    from .prompts import system_prompt, task_prompt

    static = build_static_context(cond, task, knowledge)
    system = count_tokens(system_prompt(static))
    retrieved = cond.retrieval_budget_tokens
    first = count_tokens(task_prompt(task, None)) + retrieved
    later = feedback_tokens + FEEDBACK_OVERHEAD_TOKENS + retrieved
    total = 0
    for k in range(1, rounds + 1):
        earlier = list(range(1, k))
        kept = earlier if cond.history.mode == "full" else earlier[-cond.history.keep_rounds :]
        dropped = [i for i in earlier if i not in kept]
        request = system + (first if k == 1 else later)
        request += sum((first if i == 1 else later) + reply_tokens for i in kept)
        if dropped:
            request += first + (len(dropped) * SUMMARY_LINE_TOKENS if cond.history.mode == "summary" else 20)
        total += request
    return (static.tokens if static else 0), total, rounds * reply_tokens, context_fingerprint(cond, static)
