"""Read-path ranking quality: BM25 over the lexeme postings, score fusion in hybrid, and the lift a memory
gets from its session neighbours. Real PostgreSQL, the real write flow, the real local embedding model."""

from __future__ import annotations

from django.db import connections

from memories.selectors import MemoryScope
from pipeline import services as pipeline
from retrieval import embeddings, search
from retrieval import lexical as lexical_search
from tenancy.rls import workspace_context
from tests.memories.helpers import ids, memory_row, personal_workspace_id, session_start, turn


def lexical(api, query, **fields):
    # BM25 alone: the importance blend would reorder close scores by its own length heuristic.
    return api.ok("memories/search", {"query": query, "strategy": "lexical", "importanceWeight": 0, **fields})


def postings(workspace_id: int, memory_id: str) -> dict[str, float]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute("SELECT lexeme, tf FROM memory_lexemes WHERE memory_id = %s", [memory_id])
        return dict(cursor.fetchall())


def session_turns(api, session: str, lines: list[str], **fields) -> list[dict]:
    """One conversation (`session` names it for the reader): a new session and its turns in order, recorded
    through sessions/checkpoint."""
    session_id = session_start(api, title=session, **fields)
    return [turn(api, session_id, line, **fields) for line in lines]


# --- BM25 ---------------------------------------------------------------------------------------------------


def test_it_answers_a_question_that_shares_only_some_words(alice_api):
    answer = alice_api.add("The payments service is deployed with blue-green releases")
    alice_api.add("Lunch is at noon on Fridays")
    found = lexical(alice_api, "How do we deploy the payments service these days?")
    assert ids(found["memories"]) == [answer["id"]]


def test_it_weighs_rare_words_above_common_ones(alice_api):
    for n in range(6):
        alice_api.add(f"Standup notes {n}: the project is on track")
    rare = alice_api.add("The project uses kubernetes")
    found = lexical(alice_api, "kubernetes project")["memories"]
    assert found[0]["id"] == rare["id"]
    assert len(found) == 7  # any word matches: the common one still finds the others


def test_it_damps_a_word_repeated_in_a_long_memory(alice_api):
    short = alice_api.add("Postgres backups run nightly")
    alice_api.add("Backups: " + " ".join(f"topic{n}" for n in range(40)) + " postgres postgres")
    assert ids(lexical(alice_api, "postgres backups")["memories"])[0] == short["id"]


def test_it_keeps_the_postings_in_step_with_the_memory(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    memory = api.add("Deploy with helm", tags=["kubernetes"])
    assert postings(workspace_id, memory["id"]) == {"deploy": 1.0, "helm": 1.0, "kubernet": 0.5}

    api.ok("memories/edit", {"id": memory["id"], "content": "Deploy with argo"})
    assert set(postings(workspace_id, memory["id"])) == {"deploy", "argo", "kubernet"}
    assert lexical(api, "helm")["memories"] == []
    assert ids(lexical(api, "argo")["memories"]) == [memory["id"]]

    api.ok("memories/forget", {"id": memory["id"]})
    assert lexical(api, "argo")["memories"] == []
    api.ok("memories/vacuum", {})
    assert postings(workspace_id, memory["id"]) == {}


def test_it_reads_a_bounded_head_of_each_words_postings(alice_api, settings):
    # Per word, the postings of its shortest memories come first: with a budget of 1, each word finds one.
    settings.SEARCH_BM25_POSTINGS_PER_TERM = 1
    for n in range(3):
        alice_api.add(f"common note number {n} with more words")
    short = alice_api.add("common")
    rare = alice_api.add("rare but common, in a longer memory")
    assert ids(lexical(alice_api, "rare common")["memories"]) == [rare["id"], short["id"]]
    settings.SEARCH_BM25_POSTINGS_PER_TERM = 2000
    assert len(lexical(alice_api, "rare common")["memories"]) == 5


def test_it_scores_everything_when_the_scope_hides_the_best(alice_api, monkeypatch):
    # Only the best `pool` memories are joined to the scope filter; when it hides them all, search scores
    # the rest.
    monkeypatch.setattr(lexical_search, "BM25_POOL_MIN", 1)
    monkeypatch.setattr(lexical_search, "BM25_POOL_FACTOR", 1)
    for n in range(3):
        alice_api.add(f"deploy deploy deploy private {n}", scope={"userId": "u1"})
    shared = alice_api.add("we deploy sometimes, with a long sentence around the word")
    assert ids(lexical(alice_api, "deploy", limit=1)["memories"]) == [shared["id"]]


def test_it_keeps_search_syntax_exact(alice_api):
    both = alice_api.add("deploy the api on fridays")
    alice_api.add("deploy the web")
    assert ids(lexical(alice_api, '"the api"')["memories"]) == [both["id"]]
    assert ids(lexical(alice_api, "deploy -web")["memories"]) == [both["id"]]


def test_it_never_counts_another_workspace(personas):
    # Bob's workspace is full of "kubernetes": that must not lower the word's weight in Alice's, nor show up.
    for n in range(5):
        personas.bob_api.add(f"kubernetes cluster {n}")
    mine = personas.alice_api.add("kubernetes upgrade friday")
    assert ids(lexical(personas.alice_api, "kubernetes")["memories"]) == [mine["id"]]
    assert ids(lexical(personas.charlie_api, "kubernetes")["memories"]) == []
    assert postings(personal_workspace_id(personas.bob), mine["id"]) == {}


# --- hybrid: fusion and session neighbours ------------------------------------------------------------------


def test_it_fuses_scores_not_ranks(personas):
    workspace_id = personal_workspace_id(personas.alice)
    a, b, c, d, e = (memory_row(workspace_id, personas.alice_api.add(text)["id"]) for text in "abcde")
    # a holds the query's rare words (BM25 10 against 1); semantically a, b and c are about as close.
    a.lexical_rank, b.lexical_rank, d.lexical_rank = 10.0, 1.0, 0.9
    cosine = {b.id: 0.600, c.id: 0.599, a.id: 0.598, e.id: 0.1}
    lexical, semantic = [a, b, d], [b, c, a, e]
    fused = search.hybrid_fusion(lexical=lexical, semantic=semantic, cosine=cosine, lexical_weight=0.5)
    assert [m.id for m, _ in fused][:3] == [a.id, b.id, c.id]
    # RRF sees only the ranks: b is 2nd and 1st, a 1st and 3rd, so b would win.
    assert search.reciprocal_rank_fusion([lexical, semantic])[0][0].id == b.id
    semantic_only = search.hybrid_fusion(
        lexical=lexical, semantic=semantic, cosine=cosine, lexical_weight=0.0
    )
    assert [m.id for m, _ in semantic_only][:3] == [b.id, c.id, a.id]


def test_it_lifts_the_neighbours_of_a_match_in_its_session(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    turns = session_turns(api, "s1", ["t0", "t1", "t2", "t3", "t4", "t5"])
    other = session_turns(api, "s2", ["o0"])[0]
    loose = api.add("no session")
    match = memory_row(workspace_id, turns[2]["id"])
    with workspace_context(workspace_id):
        lifted = search.session_neighbour_lift(
            [(match, 1.0)],
            workspace_id=workspace_id,
            scope=MemoryScope(),
            type=None,
            layer=None,
            exclude_rules=False,
            weights=(0.4, 0.1),
        )
    scores = {str(m.id): round(score, 4) for m, score in lifted}
    assert scores == {
        turns[2]["id"]: 1.0,
        turns[1]["id"]: 0.4,
        turns[3]["id"]: 0.4,
        turns[0]["id"]: 0.1,
        turns[4]["id"]: 0.1,
    }
    assert other["id"] not in scores and loose["id"] not in scores and turns[5]["id"] not in scores


def test_it_lifts_two_matches_next_to_each_other(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    first, second = (memory_row(workspace_id, t["id"]) for t in session_turns(api, "s1", ["q", "a"]))
    with workspace_context(workspace_id):
        lifted = search.session_neighbour_lift(
            [(first, 1.0), (second, 0.5)],
            workspace_id=workspace_id,
            scope=MemoryScope(),
            type=None,
            layer=None,
            exclude_rules=False,
            weights=(0.4,),
        )
    assert {m.id: round(s, 4) for m, s in lifted} == {first.id: 1.2, second.id: 0.9}


def test_it_lifts_only_neighbours_the_caller_may_read(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    before, forgotten, match = session_turns(api, "s1", ["turn before", "forgotten turn", "match"])
    api.ok("memories/forget", {"id": forgotten["id"]})
    with workspace_context(workspace_id):
        lifted = search.session_neighbour_lift(
            [(memory_row(workspace_id, match["id"]), 1.0)],
            workspace_id=workspace_id,
            scope=MemoryScope(),
            type=None,
            layer=None,
            exclude_rules=False,
            weights=(0.4,),
        )
    # The forgotten turn is skipped: the nearest readable turn is the neighbour.
    assert [str(m.id) for m, _ in lifted] == [match["id"], before["id"]]
    assert forgotten["id"] not in {str(m.id) for m, _ in lifted}


def test_it_finds_the_reply_next_to_the_question_in_hybrid_search(personas, local_embedder):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    question, reply, _ = session_turns(
        api,
        "chat-1",
        [
            "Melanie asked when Caroline started volunteering at the animal shelter",
            "Caroline said: since 2016, every Saturday morning",
            "Melanie said the weather is nice today",
        ],
    )
    for n in range(8):
        api.add(f"Unrelated note {n} about quarterly budgets and invoices")
    with workspace_context(workspace_id):
        pipeline.jobs_run_pending(workspace_id=workspace_id)
    body = {"query": "When did Caroline start volunteering at the shelter?", "strategy": "hybrid", "limit": 3}
    data = api.ok("memories/search", body)
    assert data["trace"]["appliedStrategy"] == "hybrid"
    assert ids(data["memories"])[:2] == [question["id"], reply["id"]]
    # Charlie asks the same in his own workspace: Alice's conversation is not there to lift.
    assert personas.charlie_api.ok("memories/search", body)["memories"] == []


# --- query vectors ------------------------------------------------------------------------------------------


class CountingEmbedder:
    """The real local model, counting the texts it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.texts = inner, []

    def ready(self, **kwargs):
        return True

    def embed(self, texts):
        self.texts += texts
        return self.inner.embed(texts)


def test_it_embeds_a_repeated_query_once(local_embedder, monkeypatch, settings):
    counting = CountingEmbedder(local_embedder)
    monkeypatch.setattr(embeddings, "get_embedder", lambda: counting)
    monkeypatch.setattr(embeddings, "_query_vectors", type(embeddings._query_vectors)())
    settings.SEARCH_QUERY_VECTOR_CACHE_SIZE = 2
    first = embeddings.embed_query("how do we deploy")
    again = embeddings.embed_query("how do we deploy")
    assert counting.texts == ["how do we deploy"] and (first == again).all()
    embeddings.embed_query("b")
    embeddings.embed_query("c")  # the cache holds 2: "how do we deploy" is the least recently used and goes
    embeddings.embed_query("how do we deploy")
    assert counting.texts == ["how do we deploy", "b", "c", "how do we deploy"]
    settings.SEARCH_QUERY_VECTOR_CACHE_SIZE = 0
    embeddings.embed_query("c")
    assert counting.texts[-1] == "c"


def test_it_finds_a_new_word_at_once_after_searching_for_it(alice_api):
    # Word frequencies are cached per process, but never a word's absence.
    assert lexical(alice_api, "zanzibar")["memories"] == []
    memory = alice_api.add("Offsite in zanzibar")
    assert ids(lexical(alice_api, "zanzibar")["memories"]) == [memory["id"]]
