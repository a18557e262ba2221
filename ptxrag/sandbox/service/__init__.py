"""The sandbox as an HTTP service: one GPU box evaluates kernels for many agents.

Server: ``create_app(ServiceConfig(...))`` (FastAPI), started by ``ptxrag sandbox serve``.
Client: ``ServiceClient(url, token)``, also reached through ``Sandbox(url=...)``.
"""

from .client import ServiceBusy, ServiceClient, ServiceError
from .config import ServiceConfig, ServiceConfigError

__all__ = ["ServiceBusy", "ServiceClient", "ServiceConfig", "ServiceConfigError", "ServiceError"]
