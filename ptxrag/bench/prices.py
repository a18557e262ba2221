"""What an episode's tokens cost: a price table (TOML data), matched by model-name prefix.

Token counts follow LangChain's usage metadata: ``input_tokens`` includes the prompt tokens read from or
written to the provider's cache, so the plain input is ``input - cache_read - cache_write``.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ptxrag.agent_graph import TokenUsage
from ptxrag.base.errors import ConfigInputError


class PriceError(ConfigInputError, ValueError):
    """A price table that cannot be read."""


class Price(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    match: str = Field(min_length=1, description="prefix of the model name")
    input: float = Field(ge=0, description="USD per million plain input tokens")
    output: float = Field(ge=0, description="USD per million output tokens")
    cache_read: float = Field(0.0, ge=0, description="USD per million tokens read from the prompt cache")
    cache_write: float = Field(0.0, ge=0, description="USD per million tokens written to the prompt cache")


class PriceTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    prices: list[Price]
    source: str

    def price_for(self, model: str) -> Price | None:
        provider, _, name = model.partition(":")
        if provider == "replay":
            return Price(match="replay", input=0.0, output=0.0)
        name = name.split("@", 1)[0]  # openai:<model>@<base_url>
        return next((p for p in self.prices if name.startswith(p.match)), None)

    def cost_usd(self, model: str, usage: TokenUsage) -> float | None:
        """Dollars for ``usage`` on ``model``; None when the table has no price for it."""
        p = self.price_for(model)
        if p is None:
            return None
        plain = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_creation_tokens)
        total = (
            plain * p.input
            + usage.cache_read_tokens * p.cache_read
            + usage.cache_creation_tokens * p.cache_write
            + usage.output_tokens * p.output
        )
        return total / 1e6


def load_prices(path: Path | None = None) -> PriceTable:
    """The bundled table, or the one at ``path`` (same format)."""
    if path is None:
        text = (resources.files("ptxrag.bench") / "prices.toml").read_text()
        origin = "bundled prices.toml"
    else:
        p = Path(path).expanduser()
        if not p.is_file():
            raise PriceError(f"price table {p} does not exist")
        text, origin = p.read_text(), str(p)
    try:
        data = tomllib.loads(text)
        return PriceTable(prices=[Price.model_validate(x) for x in data.get("price", [])], source=origin)
    except (tomllib.TOMLDecodeError, ValidationError) as e:
        raise PriceError(f"price table {origin} is not valid: {e}") from None
