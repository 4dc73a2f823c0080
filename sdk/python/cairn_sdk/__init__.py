"""Cairn's Python SDK: memories, context and the memory graph for AI agents.

from cairn_sdk import Cairn
cairn = Cairn()                                        # CAIRN_API_KEY, CAIRN_BASE_URL
cairn.memories.add("We deploy with blue-green releases on Fridays", tags=["deploy"])
print(cairn.context.get("how do we deploy?").context)
"""

from cairn_sdk import models
from cairn_sdk._core import UNSET, RetryPolicy, __version__
from cairn_sdk.async_client import AsyncCairn
from cairn_sdk.client import Cairn
from cairn_sdk.errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    CairnError,
    ConfigurationError,
    ConflictError,
    JobFailedError,
    JobTimeoutError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
)
from cairn_sdk.models import Scope

__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AsyncCairn",
    "AuthenticationError",
    "BadRequestError",
    "Cairn",
    "CairnError",
    "ConfigurationError",
    "ConflictError",
    "JobFailedError",
    "JobTimeoutError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "RetryPolicy",
    "Scope",
    "ServerError",
    "UNSET",
    "__version__",
    "models",
]
