"""CairnStore: LangGraph's BaseStore semantics (put, get, search, delete, list_namespaces) on a live server,
and a compiled graph that reads and writes memories through it."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest
from cairn_sdk import Cairn
from cairn_sdk.langgraph import CairnStore
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import InvalidNamespaceError, Item, SearchItem

from tests.integrations.conftest import LIVE, Account

pytestmark = LIVE


@pytest.fixture
def store(base_url: str, alice: Account) -> CairnStore:
    return CairnStore(api_key=alice.key, base_url=base_url, scope={"tenantId": "lg-app"})


def test_it_puts_gets_updates_and_deletes_by_namespace_and_key(store):
    assert store.get(("alice", "prefs"), "editor") is None
    store.put(("alice", "prefs"), "editor", {"content": "Alice writes code in Helix", "tier": 1})
    item = store.get(("alice", "prefs"), "editor")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (
        ("alice", "prefs"),
        "editor",
        {"content": "Alice writes code in Helix", "tier": 1},
    )

    # The key is an upsert key: a second put edits the same memory.
    store.put(("alice", "prefs"), "editor", {"content": "Alice switched to Zed", "tier": 2})
    updated = store.get(("alice", "prefs"), "editor")
    assert updated is not None and updated.value["content"] == "Alice switched to Zed"
    assert updated.created_at == item.created_at and updated.updated_at > item.updated_at
    assert len(store.search(("alice", "prefs"))) == 1

    store.delete(("alice", "prefs"), "editor")
    assert store.get(("alice", "prefs"), "editor") is None
    assert store.search(("alice", "prefs")) == []


def test_it_finds_by_query_within_a_namespace_only(store, bob: Account, base_url):
    store.put(("alice", "prefs"), "editor", {"content": "Alice writes code in Helix"})
    store.put(("alice", "travel"), "seat", {"content": "Alice prefers an aisle seat on long flights"})
    store.put(("bob", "prefs"), "editor", {"content": "Bob writes code in Emacs"})

    found = store.search(("alice", "prefs"), query="which code editor")
    assert [(i.namespace, i.key) for i in found] == [(("alice", "prefs"), "editor")]
    assert isinstance(found[0], SearchItem) and found[0].score is not None
    # Another namespace does not see it, with or without a query; the first label is the Cairn user.
    travel = store.search(("alice", "travel"), query="which code editor")
    assert [(i.namespace, i.key) for i in travel] in ([], [(("alice", "travel"), "seat")])
    assert [i.key for i in store.search(("bob",), query="code editor")] == ["editor"]
    assert store.search(("bob",), query="code editor")[0].value["content"] == "Bob writes code in Emacs"
    assert {i.namespace for i in store.search(("alice",))} == {("alice", "prefs"), ("alice", "travel")}

    # On the server, bob's item belongs to Cairn user "bob" and alice's to "alice".
    cairn = Cairn(store.client.api_key, base_url=base_url)
    assert cairn.memories.list(scope={"tenantId": "lg-app", "userId": "carol"}).memories == []
    assert {
        m.content for m in cairn.memories.list(scope={"tenantId": "lg-app", "userId": "bob"}).memories
    } == {"Bob writes code in Emacs"}
    # Another Cairn account with the same namespaces sees nothing of alice's.
    other = CairnStore(api_key=bob.key, base_url=base_url, scope={"tenantId": "lg-app"})
    assert other.get(("alice", "prefs"), "editor") is None
    assert other.search(("alice",), query="editor") == []


def test_it_filters_on_value_fields_and_pages(store):
    for n in range(5):
        store.put(("alice", "tasks"), f"t{n}", {"content": f"Task number {n}", "done": n % 2 == 0, "n": n})
    done = store.search(("alice", "tasks"), filter={"done": True})
    assert sorted(i.key for i in done) == ["t0", "t2", "t4"]
    assert sorted(i.key for i in store.search(("alice", "tasks"), filter={"n": {"$gte": 3}})) == ["t3", "t4"]
    first, second = (
        store.search(("alice", "tasks"), limit=2),
        store.search(("alice", "tasks"), limit=2, offset=2),
    )
    assert len(first) == 2 and len(second) == 2 and not {i.key for i in first} & {i.key for i in second}
    assert [i.key for i in store.search(("alice", "tasks"), query="task", filter={"n": 1})] == ["t1"]


def test_it_lists_namespaces_under_a_prefix(store):
    store.put(("alice", "prefs"), "a", {"content": "one"})
    store.put(("alice", "prefs", "ui"), "b", {"content": "two"})
    store.put(("alice", "travel"), "c", {"content": "three"})
    assert store.list_namespaces(prefix=("alice",)) == [
        ("alice", "prefs"),
        ("alice", "prefs", "ui"),
        ("alice", "travel"),
    ]
    assert store.list_namespaces(prefix=("alice",), max_depth=2) == [("alice", "prefs"), ("alice", "travel")]
    assert store.list_namespaces(prefix=("alice",), suffix=("ui",)) == [("alice", "prefs", "ui")]
    assert store.list_namespaces(prefix=("alice",), limit=1, offset=1) == [("alice", "prefs", "ui")]
    with pytest.raises(InvalidNamespaceError, match="userId"):
        store.list_namespaces()


def test_it_keeps_other_memories_of_the_workspace_out(store, base_url, alice):
    cairn = Cairn(alice.key, base_url=base_url)
    cairn.memories.add("Alice writes code in Vim", scope={"tenantId": "lg-app", "userId": "alice"})
    store.put(("alice", "prefs"), "editor", {"content": "Alice writes code in Helix"})
    assert [i.value["content"] for i in store.search(("alice",), query="code editor")] == [
        "Alice writes code in Helix"
    ]


def test_it_answers_async_calls(store):
    async def scenario() -> list[SearchItem]:
        await store.aput(("alice", "notes"), "k", {"text": "Async put through the store"})
        assert (await store.aget(("alice", "notes"), "k")) is not None
        return await store.asearch(("alice", "notes"), query="async put")

    assert [i.key for i in asyncio.run(scenario())] == ["k"]


def test_it_serves_a_compiled_graph_that_reads_and_writes_memories(store, alice):
    class State(TypedDict):
        user: str
        message: str
        recalled: list[str]

    def remember(state: State, runtime: Runtime) -> dict:
        if state["message"].startswith("remember "):
            fact = state["message"].removeprefix("remember ")
            assert runtime.store is not None
            runtime.store.put((state["user"], "memories"), str(abs(hash(fact))), {"content": fact})
        return {}

    def recall(state: State, runtime: Runtime) -> dict:
        assert runtime.store is not None
        found = runtime.store.search((state["user"], "memories"), query=state["message"], limit=3)
        return {"recalled": [item.value["content"] for item in found]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=store)

    graph.invoke(
        {"user": "alice", "message": "remember The release train leaves every Tuesday", "recalled": []}
    )
    answer = graph.invoke({"user": "alice", "message": "when does the release train leave?", "recalled": []})
    assert answer["recalled"] == ["The release train leaves every Tuesday"]
    assert graph.invoke({"user": "bob", "message": "release train", "recalled": []})["recalled"] == []

    workspace = Cairn(alice.key, base_url=store.client.base_url.removesuffix("/api/sdk/v1"))
    tenant = workspace.memories.list(scope={"tenantId": "lg-app", "userId": "alice"}).memories
    assert [m.content for m in tenant] == ["The release train leaves every Tuesday"]


def test_it_refuses_a_namespace_langgraph_refuses(store):
    with pytest.raises(InvalidNamespaceError):
        store.put(("alice", "a.b"), "k", {"content": "x"})
    with pytest.raises(NotImplementedError, match="TTL"):
        store.put(("alice",), "k", {"content": "x"}, ttl=5)
