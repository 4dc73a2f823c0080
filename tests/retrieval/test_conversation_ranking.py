"""The conversation rules of hybrid ranking (question damping, speaker boost, neighbour and reply lifts) touch
conversation turns only: a memory that is not a turn ranks exactly as it would without them, whatever its
text ends with or its metadata says."""

from __future__ import annotations

from memories.selectors import MemoryScope
from pipeline import services as pipeline
from retrieval import search
from tenancy.rls import workspace_context
from tests.memories.helpers import personal_workspace_id, session_start, turn

QUERY = "Should we shard the orders table?"


def _ranked(workspace_id: int) -> list[tuple[str, float]]:
    with workspace_context(workspace_id):
        outcome = search.memory_search(
            workspace_id=workspace_id, scope=MemoryScope(), query=QUERY, strategy="hybrid", limit=10
        )
    assert outcome.applied == "hybrid"
    return [(str(m.id), round(outcome.scores[m.id], 6)) for m in outcome.memories]


def test_it_ranks_a_memory_that_is_not_a_turn_as_without_the_conversation_rules(
    personas, local_embedder, settings
):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    asked = api.add("Should we shard the orders table before Black Friday?", type="decision")
    api.add("We shard the orders table by customer id.")
    # Metadata keys a chat harness might write are the caller's data, not a conversation.
    api.add("Who owns the orders table?", metadata={"sessionId": "s1", "speaker": "Dana"})
    api.add("Dana: the payments team owns it.", metadata={"sessionId": "s1", "speaker": "Dana"})
    for n in range(4):
        api.add(f"Invoice {n} for the quarterly office supplies was paid")
    with workspace_context(workspace_id):
        pipeline.jobs_run_pending(workspace_id=workspace_id)

    settings.SEARCH_QUESTION_DAMPING = 0.4
    settings.SEARCH_SPEAKER_BOOST = 0.4
    settings.SEARCH_SESSION_NEIGHBOUR_WEIGHTS = (0.4, 0.1)
    with_rules = _ranked(workspace_id)
    settings.SEARCH_QUESTION_DAMPING = 0.0
    settings.SEARCH_SPEAKER_BOOST = 0.0
    settings.SEARCH_SESSION_NEIGHBOUR_WEIGHTS = (0.0,)
    assert _ranked(workspace_id) == with_rules
    assert with_rules[0][0] == asked["id"]


def test_it_damps_a_turn_that_asks(personas, local_embedder, settings):
    # The counterpart: the same question as a turn is damped, and its reply comes first.
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    chat = session_start(api)
    asked = turn(api, chat, "Should we shard the orders table before Black Friday?")
    reply = turn(api, chat, "Yes, by customer id.", role="assistant")
    for n in range(4):
        api.add(f"Invoice {n} for the quarterly office supplies was paid")
    with workspace_context(workspace_id):
        pipeline.jobs_run_pending(workspace_id=workspace_id)

    settings.SEARCH_QUESTION_DAMPING = 0.0
    undamped = dict(_ranked(workspace_id))
    settings.SEARCH_QUESTION_DAMPING = 0.4
    damped = dict(_ranked(workspace_id))
    assert damped[asked["id"]] < undamped[asked["id"]]
    assert damped[reply["id"]] == undamped[reply["id"]]
