def test_it_adds_and_searches(alice_api):
    memory = alice_api.add("We deploy with blue-green on Fridays", tags=["deploy"])
    found = alice_api.ok("memories/search", {"query": "deployment"})
    assert [m["id"] for m in found["memories"]] == [memory["id"]]


def test_it_hides_from_charlie(personas):
    memory = personas.alice_api.add("secret plan")
    personas.charlie_api.error("memories/forget", {"id": memory["id"]}, status=404, code="MEMORY_NOT_FOUND")
