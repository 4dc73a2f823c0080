"""LlamaIndex long-term memory backed by Cairn: `CairnMemoryBlock` is a `BaseMemoryBlock` for
`llama_index.core.memory.Memory` (needs `pip install 'cairn-sdk[llamaindex]'`).

    from cairn_sdk.llamaindex import CairnMemoryBlock
    from llama_index.core.memory import Memory

    block = CairnMemoryBlock(api_key="mem_…", base_url="http://127.0.0.1:8000", scope={"userId": "alice"})
    memory = Memory.from_defaults(session_id="alice-chat", memory_blocks=[block])

- Reading (`aget`): context/get for the latest user message(s); its text goes into the memory's system
  message (or wherever the Memory's insert method puts blocks). Nothing relevant: an empty string.
- Writing (`aput`): the messages Memory flushes out of its short-term buffer (or that you put yourself) are
  stored with memories/add, one memory per message of a kept role (user and assistant by default), tagged
  `llamaindex` and `role:<role>`, with the chat session's id in the metadata. Each carries an Idempotency-Key
  derived from the message, so a retried flush never stores a message twice.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory.memory import BaseMemoryBlock
from pydantic import Field, PrivateAttr

from cairn_sdk import models as m
from cairn_sdk.async_client import AsyncCairn

__all__ = ["CairnMemoryBlock"]

CONTENT_MAX = 8000
QUERY_MAX = 2000


class CairnMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory in Cairn: context/get on read, memories/add on write (see the module docstring)."""

    name: str = Field(default="cairn_memory", description="The block's name in the memory template.")
    description: str | None = Field(
        default="What is remembered about the user and the work, from Cairn.",
        description="A description of the memory block.",
    )
    roles: tuple[str, ...] = Field(
        default=("user", "assistant"), description="The roles whose messages are stored."
    )
    context_limit: int | None = Field(
        default=None, description="Memories in the context (server default 10)."
    )
    query_messages: int = Field(
        default=1, ge=1, description="How many of the latest user messages make the context query."
    )

    _client: AsyncCairn = PrivateAttr()
    _scope: m.Scope | None = PrivateAttr(default=None)

    def __init__(
        self,
        *,
        client: AsyncCairn | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        scope: m.Scope | Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(**fields)
        self._client = client or AsyncCairn(api_key, base_url=base_url)
        self._scope = scope if isinstance(scope, m.Scope | None) else m.Scope.model_validate(dict(scope))

    @property
    def client(self) -> AsyncCairn:
        return self._client

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = self._query(messages or [])
        if not query:
            return ""
        answer = await self._client.context.get(query, limit=self.context_limit, scope=self._scope)
        return answer.context.strip()

    async def _aput(self, messages: list[ChatMessage]) -> None:
        for message in messages:
            role, text = _role(message), _text_blocks(message).strip()
            if role not in self.roles or not text:
                continue
            session = message.additional_kwargs.get("session_id")
            metadata: dict[str, Any] = {"source": "llamaindex", "role": role}
            if isinstance(session, str):
                metadata["sessionId"] = session
            await self._client.memories.add(
                text[:CONTENT_MAX],
                tags=["llamaindex", f"role:{role}"],
                metadata=metadata,
                scope=self._scope,
                idempotency_key=_message_key(role, text, session),
            )

    def _query(self, messages: Sequence[ChatMessage]) -> str:
        asked = [
            text
            for message in messages
            if _role(message) == "user" and (text := _text_blocks(message).strip())
        ]
        return "\n".join(asked[-self.query_messages :])[-QUERY_MAX:]


def _role(message: ChatMessage) -> str:
    role = message.role
    return role.value if isinstance(role, MessageRole) else str(role)


def _text_blocks(message: ChatMessage) -> str:
    """The message's text (its text blocks joined); images and other blocks are not memories."""
    parts = [getattr(block, "text", None) for block in message.blocks]
    return "\n".join(part for part in parts if isinstance(part, str) and part.strip())


def _message_key(role: str, text: str, session: object) -> str:
    digest = hashlib.sha256(f"{session}\x00{role}\x00{text}".encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest))
