"""LangGraph's long-term memory store backed by Cairn: `CairnStore` is a `langgraph.store.base.BaseStore`.

    from cairn_sdk.langgraph import CairnStore
    store = CairnStore(api_key="mem_…", base_url="http://127.0.0.1:8000")
    store.put(("alice", "prefs"), "editor", {"content": "Alice writes code in Helix"})
    store.search(("alice", "prefs"), query="which editor?")

How a namespace maps to Cairn (needs `pip install 'cairn-sdk[langgraph]'`):
- the first label is the Cairn `userId` of every call (with `user_from_namespace=True`, the default), so one
  end user's items are out of reach of another's on the server itself; the store's `scope` supplies
  `tenantId` and `projectId` (with `user_from_namespace=False` the whole store lives in `scope` as given);
- the whole namespace is kept in the memory's metadata (`langgraph.namespace`) and as one tag per prefix
  (`lgns:` and a hash of the prefix), which memories/list filters on, so a prefix lists exactly its items;
- the key: metadata `langgraph.key` and a tag `lgkey:` with a hash of namespace and key (the upsert key: a put
  edits the memory holding it, or adds one);
- the value: metadata `langgraph.value`, and the memory's text (what search embeds and matches) is the value's
  `index` fields, else its `content`, `text` or `memory` string, else the value as JSON.

A search with a query asks memories/search for the 50 best memories of the user (its maximum) and keeps those
under the prefix that pass `filter`; without a query it lists the prefix, newest first. TTLs are not supported
(`supports_ttl` is False): Cairn memories expire by their layer, not per item.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from cairn_sdk import models as m
from cairn_sdk.client import Cairn
from cairn_sdk.errors import NotFoundError

__all__ = ["CairnStore"]

NAMESPACE_TAG = "lgns:"
KEY_TAG = "lgkey:"
STORE_TAG = "langgraph-store"
CONTENT_MAX = 8000
SEARCH_CANDIDATES = 50  # memories/search's maximum page
LIST_PAGE = 100
LIST_NAMESPACES_SCAN = 10_000  # memories read at most to answer one list_namespaces
_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def _digest(*parts: str) -> str:
    # Fixed length, so one tag can never be a substring of another (memories/list matches substrings).
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def namespace_tags(namespace: tuple[str, ...]) -> list[str]:
    """One tag per prefix of the namespace: listing a prefix is a filter on its tag."""
    return [NAMESPACE_TAG + _digest(*namespace[:depth]) for depth in range(1, len(namespace) + 1)]


def key_tag(namespace: tuple[str, ...], key: str) -> str:
    return KEY_TAG + _digest(*namespace, "\x01" + key)


def _matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    for field, wanted in (conditions or {}).items():
        actual = value.get(field)
        if isinstance(wanted, Mapping) and wanted and all(op in _OPERATORS for op in wanted):
            try:
                if not all(_OPERATORS[op](actual, operand) for op, operand in wanted.items()):
                    return False
            except TypeError:  # comparing values of unlike types: not a match
                return False
        elif actual != wanted:
            return False
    return True


class CairnStore(BaseStore):
    """A LangGraph `BaseStore` whose items are Cairn memories (see the module's docstring for the mapping).

    Pass a `Cairn` client, or `api_key` and `base_url` (else CAIRN_API_KEY / CAIRN_BASE_URL). There is no
    hosted default: the base URL is your own server's."""

    supports_ttl = False

    def __init__(
        self,
        client: Cairn | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        scope: m.Scope | Mapping[str, Any] | None = None,
        user_from_namespace: bool = True,
    ) -> None:
        self._owns_client = client is None
        self.client = client or Cairn(api_key, base_url=base_url)
        base = scope if isinstance(scope, m.Scope) else m.Scope.model_validate(dict(scope or {}))
        self.scope = base
        self.user_from_namespace = user_from_namespace

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    # --- BaseStore ---------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The sync client in a worker thread: the same code path, and the event loop is never blocked.
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"CairnStore does not handle {type(op).__name__}")

    # --- scope -------------------------------------------------------------------------------------------

    def _scope_for(self, namespace: tuple[str, ...]) -> m.Scope:
        if not self.user_from_namespace:
            return self.scope
        if not namespace:
            raise InvalidNamespaceError(
                "CairnStore maps a namespace's first label to the Cairn userId, so a search or "
                "list_namespaces must name it (e.g. ('alice',)); build the store with "
                "user_from_namespace=False to search across users"
            )
        if len(namespace[0]) > 120:
            raise InvalidNamespaceError(
                f"The first namespace label becomes the Cairn userId (at most 120 characters), got "
                f"{len(namespace[0])} characters"
            )
        return self.scope.model_copy(update={"user_id": namespace[0]})

    # --- operations --------------------------------------------------------------------------------------

    def _memories_with_key(self, namespace: tuple[str, ...], key: str) -> list[m.Memory]:
        page = self.client.memories.list(
            tags=key_tag(namespace, key), limit=LIST_PAGE, scope=self._scope_for(namespace)
        )
        return [memory for memory in page.memories if self._address(memory) == (namespace, key)]

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        found = self._memories_with_key(namespace, key)
        if not found:
            return None
        item = self._item(found[0])
        return Item(
            namespace=item.namespace,
            key=item.key,
            value=item.value,
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

    def _put(self, op: PutOp) -> None:
        namespace, key = tuple(op.namespace), op.key
        scope = self._scope_for(namespace)
        existing = self._memories_with_key(namespace, key)
        if op.value is None:
            for memory in existing:
                self._forget(memory.id, scope)
            return
        value = dict(op.value)
        metadata = {"langgraph": {"namespace": list(namespace), "key": key, "value": value}}
        tags = [STORE_TAG, *namespace_tags(namespace), key_tag(namespace, key)]
        content = self._content(value, op.index)
        if existing:
            keep, *duplicates = existing  # two racing first puts can both add: the newest one stays
            self.client.memories.edit(keep.id, content=content, tags=tags, metadata=metadata, scope=scope)
            for memory in duplicates:
                self._forget(memory.id, scope)
            return
        added = self.client.memories.add(content, tags=tags, metadata=metadata, scope=scope)
        if not added.admitted:
            raise ValueError(
                f"Cairn's admission control did not store the value of {key!r} in {namespace}: it nearly "
                f"repeats memory {added.id}. Turn admission off for this workspace (memories/settings) to "
                "keep every store item."
            )

    def _forget(self, memory_id: str, scope: m.Scope) -> None:
        with contextlib.suppress(NotFoundError):  # deleted meanwhile: the outcome asked for
            self.client.memories.forget(memory_id, scope=scope)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        scope = self._scope_for(prefix)
        wanted = op.offset + op.limit
        if op.query:
            found = self.client.memories.search(op.query, limit=SEARCH_CANDIDATES, scope=scope).memories
            ranked = [memory for memory in found if self._under(memory, prefix, op.filter)]
            window = ranked[op.offset : wanted]
            # Cairn answers in rank order without a score: the rank becomes one, best first.
            return [
                self._item(memory, score=1.0 / (op.offset + rank + 1)) for rank, memory in enumerate(window)
            ]
        items: list[SearchItem] = []
        for memory in self._listed(prefix, scope):
            if self._under(memory, prefix, op.filter):
                items.append(self._item(memory))
                if len(items) >= wanted:
                    break
        return items[op.offset :]

    def _listed(self, prefix: tuple[str, ...], scope: m.Scope) -> Iterator[m.Memory]:
        tag = namespace_tags(prefix)[-1] if prefix else STORE_TAG
        yield from self.client.memories.iter(tags=tag, page_size=LIST_PAGE, scope=scope)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        conditions = op.match_conditions or ()
        for condition in conditions:
            if condition.match_type == "prefix" and "*" not in condition.path:
                prefix = tuple(condition.path)
                break
        scope = self._scope_for(prefix)
        seen: set[tuple[str, ...]] = set()
        for scanned, memory in enumerate(self._listed(prefix, scope)):
            if scanned >= LIST_NAMESPACES_SCAN:
                break
            address = self._address(memory)
            if address is None:
                continue
            namespace = address[0]
            if not all(_condition_holds(namespace, c.match_type, tuple(c.path)) for c in conditions):
                continue
            seen.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
        return sorted(seen)[op.offset : op.offset + op.limit]

    # --- mapping -----------------------------------------------------------------------------------------

    @staticmethod
    def _content(value: Mapping[str, Any], index: Any) -> str:
        if isinstance(index, list | tuple) and index:
            parts = [_text(value.get(field)) for field in index if value.get(field) is not None]
            text = "\n".join(part for part in parts if part)
        else:
            text = next(
                (
                    value[f]
                    for f in ("content", "text", "memory")
                    if isinstance(value.get(f), str) and value[f]
                ),
                "",
            )
            text = text or json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        text = text.strip() or json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        return text[:CONTENT_MAX]

    @staticmethod
    def _address(memory: m.Memory) -> tuple[tuple[str, ...], str] | None:
        """(namespace, key) of a memory this store wrote; None for any other memory of the scope."""
        stored = (memory.metadata or {}).get("langgraph")
        if not isinstance(stored, dict):
            return None
        namespace, key = stored.get("namespace"), stored.get("key")
        if not isinstance(namespace, list) or not isinstance(key, str):
            return None
        return tuple(str(label) for label in namespace), key

    def _under(self, memory: m.Memory, prefix: tuple[str, ...], conditions: Mapping[str, Any] | None) -> bool:
        address = self._address(memory)
        if address is None or address[0][: len(prefix)] != prefix:
            return False
        value = (memory.metadata or {})["langgraph"].get("value")
        return isinstance(value, dict) and _matches(value, conditions)

    def _item(self, memory: m.Memory, *, score: float | None = None) -> SearchItem:
        address = self._address(memory)
        assert address is not None
        stored = (memory.metadata or {})["langgraph"]
        return SearchItem(
            namespace=address[0],
            key=address[1],
            value=dict(stored.get("value") or {}),
            created_at=memory.created_at,
            updated_at=memory.updated_at,
            score=score,
        )


def _text(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    )


def _condition_holds(namespace: tuple[str, ...], match_type: str, path: tuple[str, ...]) -> bool:
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want == "*" or want == got for want, got in zip(path, part, strict=True))
