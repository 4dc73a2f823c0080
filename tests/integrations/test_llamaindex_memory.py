"""CairnMemoryBlock: LlamaIndex's Memory reads context/get and writes memories/add on the live server."""

from __future__ import annotations

import asyncio

from cairn_sdk import Cairn
from cairn_sdk.llamaindex import CairnMemoryBlock
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory

from tests.integrations.conftest import LIVE

pytestmark = LIVE


def test_it_stores_flushed_messages_and_recalls_them_in_the_system_message(base_url, alice):
    scope = {"userId": "li-alice"}

    async def scenario() -> tuple[list[ChatMessage], list[ChatMessage]]:
        block = CairnMemoryBlock(api_key=alice.key, base_url=base_url, scope=scope)
        # A tiny short-term budget: older messages are flushed into the block at once.
        memory = Memory.from_defaults(
            session_id="li-chat", token_limit=60, chat_history_token_ratio=0.5, memory_blocks=[block]
        )
        await memory.aput_messages(
            [
                ChatMessage(role="user", content="My team ships the mobile app every second Thursday."),
                ChatMessage(role="assistant", content="Noted: mobile releases happen every second Thursday."),
                ChatMessage(role="user", content="Also, our on-call rotation changes on Mondays at 9am."),
                ChatMessage(role="assistant", content="Got it."),
            ]
        )
        await memory.aput(ChatMessage(role="user", content="When does the mobile app ship?"))
        later = Memory.from_defaults(session_id="li-other-chat", memory_blocks=[block])
        await later.aput(ChatMessage(role="user", content="When does the mobile app ship?"))
        answer = await later.aget()
        nothing = Memory.from_defaults(
            session_id="li-bob-chat",
            memory_blocks=[
                CairnMemoryBlock(api_key=alice.key, base_url=base_url, scope={"userId": "li-bob"})
            ],
        )
        await nothing.aput(ChatMessage(role="user", content="When does the mobile app ship?"))
        return answer, await nothing.aget()

    answer, others = asyncio.run(scenario())
    stored = Cairn(alice.key, base_url=base_url).memories.list(scope=scope, limit=100).memories
    contents = {memory.content for memory in stored}
    assert "My team ships the mobile app every second Thursday." in contents
    first = next(m for m in stored if m.content.startswith("My team ships"))
    assert set(first.tags) == {"llamaindex", "role:user"}
    assert first.metadata == {"source": "llamaindex", "role": "user", "sessionId": "li-chat"}

    # A new chat of the same user gets it back from Cairn in the system message.
    system = answer[0]
    assert system.role == "system" and "every second Thursday" in system.content
    assert "cairn_memory" in system.content
    # Another user of the workspace does not.
    assert all("second Thursday" not in (message.content or "") for message in others)


def test_it_reads_nothing_without_a_user_message_and_stores_a_message_once(base_url, alice):
    async def scenario() -> str:
        block = CairnMemoryBlock(api_key=alice.key, base_url=base_url, roles=("user",))
        assert await block.aget([]) == ""
        message = ChatMessage(role="user", content="The staging cluster lives in eu-west-1.")
        await block.aput([message], session_id="s1")
        await block.aput([message], session_id="s1")  # a retried flush
        await block.aput([ChatMessage(role="assistant", content="Sure.")])  # not a kept role
        return await block.aget([ChatMessage(role="user", content="Where is the staging cluster?")])

    context = asyncio.run(scenario())
    assert "eu-west-1" in context
    contents = [m.content for m in Cairn(alice.key, base_url=base_url).memories.list().memories]
    assert contents == ["The staging cluster lives in eu-west-1."]
