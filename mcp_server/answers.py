"""What each MCP tool says to the model: the answer as compact text, the full JSON left to the structured
content.

An agent pays for a tool's text in tokens on every turn it is in the conversation. The JSON of context/get
repeats every memory three times (memories, workingMemories, longTermMemories) and carries the trace and
pipeline states; the text here is what a model reads: the context itself, each memory's id and why it is
there, and one line per fact, node or entity. Every value from the JSON goes through
memories.prompt_text.prompt_line (the one rule of every model-facing text), so no stored value can start a
line, open or close a tag, or forge the untrusted marker; memories with injection flags carry that marker.
"""

from __future__ import annotations

from typing import Any

from memories.prompt_text import UNTRUSTED_MARKER, prompt_bracketed, prompt_line, prompt_list

LINE_CHARS = 160
SUMMARY_CHARS = 300
NAME_CHARS = 200


def _line(text: Any, limit: int = LINE_CHARS) -> str:
    return prompt_line(text, limit=limit)


def _name(text: Any) -> str:
    return prompt_line(text, limit=NAME_CHARS)


def _marked(memory: dict[str, Any]) -> str:
    return UNTRUSTED_MARKER + " " if memory.get("injectionFlags") else ""


def _why(memory: dict[str, Any]) -> str:
    graph = memory.get("graph")
    if graph:
        hops = graph.get("hopCount", 1)
        return (
            f"graph: via {_line(graph.get('linkedViaNode'), 60)} ({_name(graph.get('edgeType'))}, {hops} hop"
            f"{'' if hops == 1 else 's'})"
        )
    return "matches the query"


def context_text(data: dict[str, Any]) -> str:
    """The context text, then the ids of the rules and memories it lists, in its order, and why each is
    there."""
    parts = [data.get("context") or "No rules or memories matched."]
    rules = data.get("rules") or []
    memories = data.get("memories") or []
    if rules:
        parts.append("Rule ids, in order: " + prompt_list(r["id"] for r in rules))
    if memories:
        lines = [f"- {_name(m['id'])} {prompt_bracketed([m.get('layer')])} {_why(m)}" for m in memories]
        parts.append("Memory ids, in the order listed (why each is here):\n" + "\n".join(lines))
    communities = data.get("communities") or []
    if communities:
        parts.append(
            "Community ids: "
            + ", ".join(
                f"{_name(c['id'])} ({len(c.get('memberIds') or [])} member ids in the JSON)"
                for c in communities
            )
        )
    return "\n\n".join(parts)


def added_text(data: dict[str, Any]) -> str:
    return f"{_line(data.get('message'))} id {_name(data.get('id'))}"


def forgotten_text(data: dict[str, Any]) -> str:
    return f"{_line(data.get('message'))} id {_name(data.get('id'))}"


def resolved_text(data: dict[str, Any]) -> str:
    decision = data.get("decision")
    reverted = len(data.get("reverted") or [])
    if not decision:
        return f"Reverted {reverted} decision(s) on the pair."
    if decision.get("decision") == "supersedes":
        head = f"{decision.get('newerMemoryId')} is current; {decision.get('olderMemoryId')} is superseded."
    elif decision.get("decision") == "not_conflict":
        head = "Both memories stand (not in conflict)."
    else:
        head = "Recorded: the two memories restate each other."
    return f"{head} Decision {decision.get('id')}; {reverted} earlier decision(s) reverted."


def search_text(data: dict[str, Any]) -> str:
    memories = data.get("memories") or []
    trace = data.get("trace") or {}
    head = f"{len(memories)} memories ({_name(trace.get('appliedStrategy', 'search'))}), best first:"
    lines = [
        f"- {_name(m['id'])} {prompt_bracketed([m.get('type'), m.get('layer')], limit=NAME_CHARS)} "
        f"{_marked(m)}"
        f"{_line(m.get('content'))}"
        + (f" tags: {prompt_list(m['tags'], limit=LINE_CHARS)}" if m.get("tags") else "")
        for m in memories
    ]
    return "\n".join([head, *lines]) if lines else "No memory matched."


def facts_text(data: dict[str, Any]) -> str:
    facts = data.get("facts") or []
    seeds = prompt_list((s["name"] for s in data.get("seeds") or []), limit=NAME_CHARS) or "none"
    head = f"{len(facts)} facts; seed entities: {seeds}."
    if data.get("timedOut"):
        head += " Spreading activation ran out of time: no facts."
    # In parentheses, not square brackets: a name that starts with "untrusted" must not read as the marker.
    lines = [
        f"- {_line(f['fact'])} ({_name(f['source'])} -{_line(f['relation'], 80)}-> {_name(f['target'])}; "
        f"confidence {f['confidence']:.2f}; hop {f['hop']}"
        + (f"; until {_name(f['validTo'])}" if f.get("validTo") else "")
        + ")"
        for f in facts
    ]
    return "\n".join([head, *lines])


def traverse_text(data: dict[str, Any]) -> str:
    start = data.get("start") or {}
    nodes = data.get("nodes") or []
    lines = [f"From {_name(start.get('name'))} (id {_name(start.get('id'))}), {len(nodes)} entities reached:"]
    for node in nodes:
        # The arrow is ours: each part of a step goes through the rule, not the step as a whole.
        path = "; ".join(
            f"{_name(step['source'])} -{_line(step['relation'], 80)}-> {_name(step['target'])}"
            for step in node.get("path") or []
        )
        lines.append(
            f"- {_name(node['name'])} (id {_name(node['id'])}, hop {node['hop']}, "
            f"score {node['score']:.2f}): {path}"
        )
    return "\n".join(lines)


def _entity_line(entity: dict[str, Any]) -> str:
    confidence = entity.get("confidence")
    sure = f", confidence {confidence:.2f}" if isinstance(confidence, int | float) else ""
    summary = f": {_line(entity['summary'], SUMMARY_CHARS)}" if entity.get("summary") else ""
    return (
        f"- {_name(entity['name'])} {prompt_bracketed([entity['type']], limit=NAME_CHARS)} "
        f"id {_name(entity['id'])}, "
        f"{entity['mentionCount']} mentions{sure}"
        f"{summary}"
    )


def entities_text(data: dict[str, Any]) -> str:
    entities = data.get("entities") or []
    if not entities:
        return "No entity matched."
    lines = [_entity_line(e) for e in entities]
    detail = entities[0] if len(entities) == 1 and entities[0].get("facts") is not None else None
    if detail is not None:
        if detail.get("aliases"):
            lines.append("Aliases: " + prompt_list(detail["aliases"], limit=NAME_CHARS))
        for fact in detail.get("facts") or []:
            state = "" if fact.get("retrievable") else " (ended or faded)"
            lines.append(f"- fact {_name(fact['id'])}: {_line(fact['fact'])}{state}")
        for merge in detail.get("merges") or []:
            undone = " (undone)" if merge.get("undoneAt") else ""
            lines.append(
                f"- {_name(merge['kind'])} {_name(merge['id'])}: {_name(merge['mergedName'])}{undone}"
            )
    elif data.get("nextCursor"):
        lines.append(f"More: cursor {_name(data['nextCursor'])}")
    return "\n".join(lines)


def communities_text(data: dict[str, Any]) -> str:
    communities = data.get("communities") or []
    if not communities:
        return "No communities yet."
    return "\n".join(
        f"- {_name(c['name'])} ({c['size']} members: {prompt_list(c.get('members'), limit=NAME_CHARS)})"
        + (f": {_line(c['summary'], SUMMARY_CHARS)}" if c.get("summary") else "")
        for c in communities
    )


def stats_text(data: dict[str, Any]) -> str:
    by_type = ", ".join(
        f"{_name(kind)} {count}" for kind, count in (data.get("entitiesByType") or {}).items()
    )
    relations = ", ".join(
        f"{_name(name)} {count}" for name, count in (data.get("topRelations") or {}).items()
    )
    return (
        f"{data.get('entities', 0)} entities ({by_type or 'none'}), {data.get('aliases', 0)} aliases; "
        f"facts: {data.get('activeFacts', 0)} current, {data.get('invalidatedFacts', 0)} ended, "
        f"{data.get('belowFloorFacts', 0)} faded; {data.get('communities', 0)} communities. "
        f"Top relations: {relations or 'none'}."
    )


def session_started_text(data: dict[str, Any]) -> str:
    return f"Session started: id {data.get('sessionId')}. Record its turns with record_turn."


def turn_text(data: dict[str, Any]) -> str:
    event = data.get("event") or {}
    where = f"turn {event.get('turnIndex')} of session {data.get('sessionId')}"
    return f"{_line(data.get('message'))} {where}, id {data.get('eventId')}"


def session_ended_text(data: dict[str, Any]) -> str:
    summary = data.get("summary") or {}
    text = f"{_line(data.get('message'))} id {data.get('sessionId')}"
    if summary:
        text += f"\nSummary ({summary.get('method')}): {_line(summary.get('content'), 2000)}"
    return text


def transcript_text(data: dict[str, Any]) -> str:
    snapshot = data.get("snapshot") or {}
    return str(snapshot.get("transcriptMd") or "")


def skill_file_text(data: dict[str, Any]) -> str:
    skill_file = data.get("skillFile") or {}
    return f"{_line(data.get('message'))} {skill_file.get('path')}\n\n{skill_file.get('content', '')}"


def skill_files_text(data: dict[str, Any]) -> str:
    files = data.get("skillFiles") or []
    lines = [f"- {f['path']} ({len(f.get('content') or '')} chars)" for f in files]
    return "\n".join([f"{len(files)} skill files:", *lines]) if lines else "No skill file."
