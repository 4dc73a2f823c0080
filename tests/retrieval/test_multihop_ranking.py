"""Hybrid ranking of conversation turns: turns that ask are damped after they have lifted their replies, and
the turns of a speaker the query names come first. These rules key on a turn's session link, index and
speaker (sessions/checkpoint); memories that are not turns are never touched by them, whatever their text or
metadata. Real PostgreSQL, the real write flow and the real local embedding model; each end-to-end test
builds a tiny workspace where the change decides the order."""

from __future__ import annotations

from memories.selectors import MemoryScope
from pipeline import services as pipeline
from retrieval import search
from tenancy.rls import workspace_context
from tests.memories.helpers import ids, memory_row, personal_workspace_id, session_start, turn


def _embedded(personas) -> int:
    workspace_id = personal_workspace_id(personas.alice)
    with workspace_context(workspace_id):
        pipeline.jobs_run_pending(workspace_id=workspace_id)
    return workspace_id


def hybrid(api, query: str, limit: int = 3) -> dict:
    # Importance off: its length heuristic would reorder close scores and hide what these tests pin.
    return api.ok(
        "memories/search", {"query": query, "strategy": "hybrid", "limit": limit, "importanceWeight": 0}
    )


# --- question damping ---------------------------------------------------------------------------------------


def test_it_recognises_a_question_behind_closing_quotes():
    assert search.is_question('Sam said, "What hobbies do you have?"')
    assert search.is_question("Any plans for the weekend? ")
    assert search.is_question("Did you go? \u201d")
    assert not search.is_question('Evan said, "I paint. Do you?" and shared a photo of a lake')
    assert not search.is_question("Painting, since 2019.")


def test_it_damps_only_turns_that_ask_and_reorders(personas):
    workspace_id = personal_workspace_id(personas.alice)
    api = personas.alice_api
    chat = session_start(api)
    asked = memory_row(workspace_id, turn(api, chat, "What hobbies do you have?")["id"])
    told = memory_row(workspace_id, turn(api, chat, "I paint and hike on weekends")["id"])
    damped = search.question_damping([(asked, 1.0), (told, 0.7)], weight=0.4)
    assert [(m.id, round(s, 4)) for m, s in damped] == [(told.id, 0.7), (asked.id, 0.6)]
    assert search.question_damping([(asked, 1.0), (told, 0.7)], weight=0.0)[0][0].id == asked.id
    # A memory that is not a turn keeps its score, even with a conversation's metadata keys.
    note = memory_row(workspace_id, api.add("Should we shard the orders table?")["id"])
    keyed = memory_row(
        workspace_id, api.add("Why is p99 up?", metadata={"sessionId": "s1", "speaker": "Dana"})["id"]
    )
    fused = [(note, 1.0), (keyed, 0.9), (told, 0.7)]
    assert search.question_damping(fused, weight=0.4) == fused


def test_it_puts_the_reply_before_the_question_that_echoes_the_query(personas, local_embedder, settings):
    api = personas.alice_api
    chat = session_start(api)
    # Told apart by their roles (no speaker named: the speaker boost stays out of this test).
    question = turn(api, chat, "Sam asked: what hobbies do you enjoy these days?")
    reply = turn(api, chat, "Evan replied: watercolour painting and long mountain hikes", role="assistant")
    for n in range(6):
        api.add(f"Invoice {n} for the quarterly office supplies was paid")
    _embedded(personas)
    query = "What hobbies does Evan enjoy?"

    settings.SEARCH_QUESTION_DAMPING = 0.0
    assert ids(hybrid(api, query)["memories"])[:2] == [question["id"], reply["id"]]
    settings.SEARCH_QUESTION_DAMPING = 0.4
    assert ids(hybrid(api, query)["memories"])[:2] == [reply["id"], question["id"]]
    # Charlie's workspace holds none of it.
    assert hybrid(personas.charlie_api, query)["memories"] == []


# --- speaker boost ------------------------------------------------------------------------------------------


def test_it_boosts_the_speakers_the_query_names(personas):
    workspace_id = personal_workspace_id(personas.alice)
    api = personas.alice_api
    chat = session_start(api)
    about = memory_row(
        workspace_id, turn(api, chat, "Caroline: Melanie paints so well", speaker="Caroline")["id"]
    )
    own = memory_row(workspace_id, turn(api, chat, "I paint sunsets", speaker="Melanie")["id"])
    full = memory_row(workspace_id, turn(api, chat, "I paint too", speaker="Mary Ann")["id"])
    # Not a turn: a speaker in its metadata is the caller's own data, not the conversation contract.
    odd = memory_row(workspace_id, api.add("no name", metadata={"speaker": "Melanie"})["id"])
    fused = [(about, 1.0), (own, 0.8), (full, 0.75), (odd, 0.7)]

    boosted = search.speaker_boost(fused, query="What does MELANIE paint?", weight=0.3)
    assert [(m.id, round(s, 4)) for m, s in boosted] == [
        (own.id, 1.1),
        (about.id, 1.0),
        (full.id, 0.75),
        (odd.id, 0.7),
    ]
    # Every word of a speaker's name must be in the query: "Ann" alone is not "Mary Ann".
    assert search.speaker_boost(fused, query="What does Ann paint?", weight=0.3) == fused
    assert search.speaker_boost(fused, query="What does Mary Ann paint?", weight=0.3)[0][0].id == full.id
    assert search.speaker_boost(fused, query="What does Melanie paint?", weight=0.0) == fused


def test_it_ranks_what_the_named_person_said_first(personas, local_embedder, settings):
    api = personas.alice_api
    chat = session_start(api)
    about = turn(api, chat, "Say hi to Melanie for me", speaker="Caroline")
    own = turn(api, chat, "Painting landscapes is what I do on Sundays", speaker="Melanie")
    for n in range(6):
        turn(
            api,
            session_start(api),
            f"Invoice {n} for the quarterly office supplies was paid",
            speaker="Melanie",
        )
    _embedded(personas)
    query = "What does Melanie paint?"
    # The boost alone decides here: with the name out of the query vector, "paint" would already win.
    settings.SEARCH_EMBED_WITHOUT_SPEAKERS = False

    settings.SEARCH_SPEAKER_BOOST = 0.0
    assert ids(hybrid(api, query)["memories"])[:2] == [about["id"], own["id"]]
    settings.SEARCH_SPEAKER_BOOST = 0.3
    assert ids(hybrid(api, query)["memories"])[:2] == [own["id"], about["id"]]
    assert hybrid(personas.charlie_api, query)["memories"] == []


# --- reply lift ---------------------------------------------------------------------------------------------


def test_it_lifts_the_turn_after_a_question_more(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    first, second = session_start(api), session_start(api)
    before, asked, reply, later = (
        turn(api, first, text, speaker=speaker)
        for text, speaker in (
            ("Nice weather", "Sam"),
            ("What do you do on Sundays?", "Sam"),
            ("I paint landscapes", "Evan"),
            ("See you", "Sam"),
        )
    )
    statement = turn(api, second, "I paint on Sundays", speaker="Evan")
    after_statement = turn(api, second, "Cool", speaker="Sam")
    third = session_start(api)
    own_question = turn(api, third, "Anyone up for a hike?", speaker="Sam")
    own_follow_up = turn(api, third, "I am going either way.", speaker="Sam")

    def lift(memory_id: str, reply_weight: float) -> dict[str, float]:
        with workspace_context(workspace_id):
            lifted = search.session_neighbour_lift(
                [(memory_row(workspace_id, memory_id), 1.0)],
                workspace_id=workspace_id,
                scope=MemoryScope(),
                type=None,
                layer=None,
                exclude_rules=False,
                weights=(0.4, 0.1),
                reply_weight=reply_weight,
            )
        return {str(m.id): round(s, 4) for m, s in lifted}

    # The reply after the question gets 0.8; the turn before it only the plain 0.4.
    assert lift(asked["id"], 0.8) == {asked["id"]: 1.0, reply["id"]: 0.8, before["id"]: 0.4, later["id"]: 0.1}
    assert lift(asked["id"], 0.0)[reply["id"]] == 0.4
    # A statement's next turn is a plain neighbour, and so is the asker's own next turn: not a reply.
    assert lift(statement["id"], 0.8) == {statement["id"]: 1.0, after_statement["id"]: 0.4}
    assert lift(own_question["id"], 0.8) == {own_question["id"]: 1.0, own_follow_up["id"]: 0.4}
    # A memory that is not a turn has no neighbours, whatever its metadata says.
    keyed = api.add("What do you do on Sundays?", metadata={"sessionId": "s1"})
    assert lift(keyed["id"], 0.8) == {keyed["id"]: 1.0}


# --- the query vector without the speakers' names -----------------------------------------------------------


def test_it_finds_the_speakers_a_query_names_among_the_candidates(personas):
    workspace_id = personal_workspace_id(personas.alice)
    api = personas.alice_api
    chat = session_start(api)
    memories = [
        memory_row(workspace_id, turn(api, chat, text, speaker=speaker)["id"])
        for text, speaker in (
            ("hi", "Melanie"),
            ("hey", "Mary Ann"),
            ("yo", "Caroline"),
            ("again", "melanie"),
        )
    ]
    memories += [
        memory_row(workspace_id, api.add(text, metadata=metadata)["id"])
        for text, metadata in (("none", {}), ("keyed", {"speaker": "Caroline"}))
    ]
    assert search.named_speakers("What do Melanie's and Mary Ann's kids like?", memories) == [
        "mary ann",
        "melanie",
    ]
    assert search.named_speakers("What does Ann like?", memories) == []
    assert search.named_speakers("What does Caroline like?", memories[4:]) == []


def test_it_takes_the_named_speakers_out_of_the_query_text():
    strip = search.query_without_speakers
    assert strip("What do Melanie's kids like?", speakers=["melanie"]) == "What do kids like?"
    assert (
        strip("Did MARY  ANN\u2019s dog meet Melanie?", speakers=["mary ann", "melanie"]) == "Did dog meet ?"
    )
    # Whole words only, and nothing else goes: "Melanies" and other names stay.
    assert strip("Melanies and Caroline", speakers=["melanie"]) == "Melanies and Caroline"
    # A query that is only the name stays whole: there would be nothing to embed.
    assert strip("Melanie?", speakers=["melanie"]) == "Melanie?"
    assert strip("What does Melanie paint?", speakers=[]) == "What does Melanie paint?"


def _speaker_workspace(personas) -> tuple[dict, dict]:
    # With the name in the query vector, a short turn that is mostly the name (Melanie said, "Haha, yes!")
    # sits closer to the question than the turn that answers it; the name also gives the short turn the
    # better BM25.
    api = personas.alice_api
    # One session per turn: neighbour lifts stay out of what these tests pin.
    generic = turn(api, session_start(api), 'Melanie said, "Haha, yes!"', speaker="Melanie")
    answer = turn(
        api,
        session_start(api),
        'Melanie said, "I go running along the river; it clears my head after a long week at work."',
        speaker="Melanie",
    )
    turn(
        api,
        session_start(api),
        'Melanie said, "The quarterly report for the regional office supplies contract went out to the '
        "finance team on Monday morning, with the vendor list, the delivery schedule, the warehouse "
        "inventory counts, the audit notes from March, the new pricing tables and the signed purchase "
        'orders attached."',
        speaker="Melanie",
    )
    for n in range(5):
        turn(
            api,
            session_start(api),
            f'Caroline said, "Invoice {n} for the quarterly office supplies was paid."',
            speaker="Caroline",
        )
    _embedded(personas)
    return generic, answer


def test_it_embeds_the_query_without_the_named_speaker(personas, local_embedder, settings):
    api = personas.alice_api
    generic, answer = _speaker_workspace(personas)
    query = "What does Melanie do to destress?"

    settings.SEARCH_EMBED_WITHOUT_SPEAKERS = False
    assert ids(hybrid(api, query)["memories"])[:2] == [generic["id"], answer["id"]]
    settings.SEARCH_EMBED_WITHOUT_SPEAKERS = True
    assert ids(hybrid(api, query)["memories"])[:2] == [answer["id"], generic["id"]]
    # Semantic alone has no speaker boost to match the name with: its query keeps the name.
    semantic = api.ok("memories/search", {"query": query, "strategy": "semantic", "limit": 2})
    assert ids(semantic["memories"]) == [generic["id"], answer["id"]]
    assert hybrid(personas.charlie_api, query)["memories"] == []


def test_it_embeds_context_get_queries_without_the_named_speaker(personas, local_embedder, settings):
    api = personas.alice_api
    generic, answer = _speaker_workspace(personas)
    body = {
        "query": "What does Melanie do to destress?",
        "strategy": "hybrid",
        "limit": 2,
        "mode": "long_term",
        "includeRules": False,
        "importanceWeight": 0,
    }

    settings.SEARCH_EMBED_WITHOUT_SPEAKERS = False
    assert ids(api.ok("context/get", body)["memories"]) == [generic["id"], answer["id"]]
    settings.SEARCH_EMBED_WITHOUT_SPEAKERS = True
    assert ids(api.ok("context/get", body)["memories"]) == [answer["id"], generic["id"]]
    assert personas.charlie_api.ok("context/get", body)["memories"] == []
