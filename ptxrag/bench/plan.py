"""``ptxrag bench --dry-run``: what a study will cost before it runs: its episodes, the tokens each will
send and receive, the dollars per model (``prices.toml``) and the GPU time of the evaluations.

Every number is an estimate from stated assumptions, worst case in rounds: no episode is solved early,
so each runs ``max_rounds`` rounds. Input tokens are counted with cl100k_base on the real prompts (the
condition's static knowledge for the task, the task prompt), with retrieval filling its budget each round,
a verdict of ``feedback_tokens`` and a reply of ``reply_tokens``, resent as the condition's history mode
says. Prompt caching is not credited (the estimate is an upper bound there too).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ptxrag.agent_graph import (
    CorpusKnowledge,
    KnowledgeProvider,
    TokenUsage,
    estimate_episode_tokens,
    load_condition,
)

from .prices import PriceTable, load_prices
from .study import BenchSpec, Episode, model_label, resolve

#: a reply: a few sentences and one .cu file (the suite's reference solutions are 1-5k tokens)
REPLY_TOKENS = 3000
#: the evaluator's verdict in a feedback prompt (capped at MAX_FEEDBACK_TOKENS; usually far less)
FEEDBACK_TOKENS = 800
#: GPU seconds per evaluation: the median with every check, mutation stage included, on the H200
#: (docs/sandbox.md, 2026-12-04); only candidates that pass compile and the static check reach the GPU
GPU_SECONDS_PER_EVALUATION = 21.8


class EpisodeEstimate(BaseModel):
    model_config = ConfigDict(frozen=True)
    episode_id: str
    task_id: str
    model: str
    condition: str
    rounds: int
    static_tokens: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    gpu_s: float


class BenchPlan(BaseModel):
    model_config = ConfigDict(frozen=True)
    episodes: list[EpisodeEstimate]
    per_model: dict[str, dict[str, float | None]] = Field(
        description="model -> episodes, input_tokens, output_tokens, cost_usd (None: no price)"
    )
    gpu_s: float
    assumptions: dict[str, float]
    identical: list[tuple[str, list[str]]] = Field(
        default_factory=list, description="(task, conditions that give it the same prompt)"
    )


def plan_bench(
    spec: BenchSpec,
    *,
    prices: PriceTable | None = None,
    knowledge: KnowledgeProvider | None = None,
    reply_tokens: int = REPLY_TOKENS,
    feedback_tokens: int = FEEDBACK_TOKENS,
) -> BenchPlan:
    """Estimates for every episode of ``spec`` (checked as ``run_bench`` checks it; nothing runs)."""
    prices = prices or load_prices()
    knowledge = knowledge or CorpusKnowledge()
    episodes: list[Episode] = resolve(spec, check_models=False)  # no key needed to price a study
    cache: dict[tuple[str, str, int | None, str | None], tuple[int, int, int, str]] = {}
    prints: dict[str, dict[str, set[str]]] = {}
    out: list[EpisodeEstimate] = []
    for ep in episodes:
        key = (ep.task.id, ep.key.condition, ep.budget_tokens, ep.history)
        if key not in cache:
            cond = load_condition(ep.key.condition)
            if ep.budget_tokens is not None:
                cond = cond.with_budget(ep.budget_tokens)
            if ep.history is not None:
                cond = cond.with_history(ep.history)
            cache[key] = estimate_episode_tokens(
                cond,
                ep.task,
                knowledge,
                ep.max_rounds,
                reply_tokens=reply_tokens,
                feedback_tokens=feedback_tokens,
            )
        static, tin, tout, fp = cache[key]
        prints.setdefault(ep.task.id, {}).setdefault(fp, set()).add(ep.condition_name)
        cost = prices.cost_usd(ep.key.model, TokenUsage(input_tokens=tin, output_tokens=tout))
        out.append(
            EpisodeEstimate(
                episode_id=ep.episode_id, task_id=ep.task.id, model=model_label(ep.key.model),
                condition=ep.condition_name, rounds=ep.max_rounds, static_tokens=static,
                input_tokens=tin, output_tokens=tout, cost_usd=cost,
                gpu_s=ep.max_rounds * GPU_SECONDS_PER_EVALUATION,
            )
        )  # fmt: skip
    per_model: dict[str, dict[str, float | None]] = {}
    for e in out:
        m = per_model.setdefault(
            e.model, {"episodes": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        )
        m["episodes"] = (m["episodes"] or 0) + 1
        m["input_tokens"] = (m["input_tokens"] or 0) + e.input_tokens
        m["output_tokens"] = (m["output_tokens"] or 0) + e.output_tokens
        m["cost_usd"] = None if m["cost_usd"] is None or e.cost_usd is None else m["cost_usd"] + e.cost_usd
    return BenchPlan(
        episodes=out,
        per_model=per_model,
        gpu_s=sum(e.gpu_s for e in out),
        identical=[(t, sorted(c)) for t, fps in prints.items() for c in fps.values() if len(c) > 1],
        assumptions={
            "reply_tokens": reply_tokens,
            "feedback_tokens": feedback_tokens,
            "gpu_s_per_evaluation": GPU_SECONDS_PER_EVALUATION,
        },
    )
