"""The one LLM client: litellm, structured JSON answers validated with pydantic, bounded retries, usage and
budget.

Every call is recorded in `llm_usage` (tokens, cost, outcome) for its workspace, memory and job; a workspace
with a daily token budget stops calling once today's tokens reach it (LlmBudgetExhausted), and nothing else is
affected. No model configured (GRAPH_LLM_MODEL empty) means extraction is off: `llm_enabled()` is False and
callers skip. Each task may have its own model (model_for: extraction, community summaries, memory scores).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
import unicodedata
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import re2
from django.conf import settings
from django.db import connections
from pydantic import BaseModel, ValidationError

from config import tracing
from memories.scrubber import scrub_secrets
from ops import metrics
from tenancy.rls import workspace_context

logger = logging.getLogger("cairn.llm")
# Sent when the operator configured no key, so that litellm never looks for one in the environment.
NO_KEY = "no-key-configured"

T = TypeVar("T", bound=BaseModel)

LLM_BUDGET_EXHAUSTED = "LLM_BUDGET_EXHAUSTED"
LLM_TIMEOUT = "LLM_TIMEOUT"
LLM_RATE_LIMITED = "LLM_RATE_LIMITED"
LLM_UNAVAILABLE = "LLM_UNAVAILABLE"
LLM_REQUEST_REJECTED = "LLM_REQUEST_REJECTED"
LLM_OUTPUT_INVALID = "LLM_OUTPUT_INVALID"
RETRY_AFTER_CAP_SECONDS = 10.0


class LlmError(Exception):
    """A failed LLM call. `retryable` errors (timeouts, 429, 5xx, connection) are worth a later job retry."""

    def __init__(self, code: str, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


class LlmBudgetExhausted(LlmError):
    def __init__(self, message: str) -> None:
        super().__init__(LLM_BUDGET_EXHAUSTED, message, retryable=True)


# Which task each call's purpose belongs to, and so which model it uses (model_for). A purpose missing here is
# an extraction call.
PURPOSE_TASKS = {
    "entity_extraction": "extraction",
    "entity_disambiguation": "extraction",
    "pairwise": "extraction",
    "semantic": "extraction",
    "community_summary": "summary",
    "importance": "scoring",
    "admission": "scoring",
}
TASK_SETTINGS = {
    "extraction": "GRAPH_LLM_MODEL_EXTRACTION",
    "summary": "GRAPH_LLM_MODEL_SUMMARY",
    "scoring": "GRAPH_LLM_MODEL_SCORING",
}


def model_for(purpose: str | None = None) -> str:
    """The model a call of `purpose` uses: its task's own model (GRAPH_LLM_MODEL_EXTRACTION, _SUMMARY,
    _SCORING), else GRAPH_LLM_MODEL; empty when neither is set. No purpose: the extraction model."""
    task = PURPOSE_TASKS.get(purpose or "", "extraction")
    return str(getattr(settings, TASK_SETTINGS[task], "") or settings.GRAPH_LLM_MODEL or "")


def llm_enabled(purpose: str | None = None) -> bool:
    """Whether calls of `purpose` have a model (no purpose: the extraction steps of the pipeline)."""
    return bool(model_for(purpose))


def strict_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The pydantic schema in the shape strict structured output wants: every property required, no extras."""
    schema = model.model_json_schema()

    def tighten(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            node.pop("default", None)
            node.pop("title", None)
            for value in node.values():
                tighten(value)
        elif isinstance(node, list):
            for value in node:
                tighten(value)

    tighten(schema)
    return schema


def parse_json_answer(text: str) -> Any:
    """Models wrap JSON in prose or ``` fences now and then; take the outermost object."""
    cleaned = text.strip()
    # Plain string tests, not a regex: model output can echo memory text, and a lazy group between two
    # unbounded whitespace runs backtracks cubically on a long run of spaces.
    if len(cleaned) >= 6 and cleaned.startswith("```") and cleaned.endswith("```"):
        inner = cleaned[3:-3]
        cleaned = (inner[4:] if inner.startswith("json") else inner).strip()
    try:
        return json.loads(cleaned, parse_constant=_refuse_constant)
    except json.JSONDecodeError:
        start, end = cleaned.find("{"), cleaned.rfind("}")
        if start == -1 or end <= start:
            raise
        return json.loads(cleaned[start : end + 1], parse_constant=_refuse_constant)


def _refuse_constant(name: str) -> Any:
    # NaN and ±Infinity are not JSON; Python's parser accepts them, and a non-finite confidence or weight from
    # a model must never reach a stored row.
    raise ValueError(f"{name} is not a JSON number")


FENCE_OPEN = "<external-data>"
FENCE_CLOSE = "</external-data>"


def _either_width(ch: str) -> str:
    """A class for `ch` or its full-width form (U+FF01..U+FF5E), which NFKC folds to it."""
    return "[" + re2.escape(ch) + chr(ord(ch) + 0xFEE0) + "]"


# What a reader skips or stacks on a neighbour (controls, zero-width and bidi format characters, combining
# marks) may sit between the letters; spaces and punctuation may also sit around the words.
_UNSEEN = r"[\p{Cc}\p{Cf}\p{M}]*"
_GAP = r"[\s\p{Z}\p{P}\p{Cc}\p{Cf}\p{M}]*"
# Any tag an LLM could take for the fence's, opening or closing: either case, full-width forms, any spaces
# and punctuation (a slash, a backslash) after the `<` and between the two words, unseen characters between
# letters, attributes after the name. RE2 keeps the scan linear in the text however the gaps are stuffed.
_FENCE_TAG = re2.compile(
    r"(?i)[<\x{FE64}\x{FF1C}]"
    + _GAP
    + _UNSEEN.join(_either_width(ch) for ch in "external")
    + _GAP
    + _UNSEEN.join(_either_width(ch) for ch in "data")
)


# Characters a reader takes for `<` or for a Latin letter of the tag, one character each, so that the folded
# text keeps every position of the original: angle brackets of other blocks, and letters of other scripts
# that look like Latin ones (Cyrillic, Greek, Armenian; `I`, `1` and `|` for the `l`). Compatibility forms
# (mathematical letters, circled and full-width ones) are added from NFKC in _fold_table.
_LOOKALIKE_BRACKETS = "\u2039\u2329\u3008\u27e8\u276e\u276c\u29fc\u02c2\u1438\u27ea\u300a\u227a\u2282\u22d6"
_LOOKALIKE_LETTERS = {
    "a": "\u0430\u0410\u03b1\u0391\u0251\u237a",
    "d": "\u0501\u0500\u13a0\u146f\u2146",
    "e": "\u0435\u0415\u03b5\u0395\u04bd\u212e\u0454\u0404\u1971",
    "l": "I1|\u01c0\u0399\u0406\u04cf\u04c0\u05c0\u07ca\u2d4f\u0196\u217c\u2223",
    "n": "\u0578\u057c\u03b7\u039d\u0274\u043f",
    "r": "\u0433\u0280\u1d26\u2c85",
    "t": "\u0442\u0422\u03c4\u03a4\u1d1b",
    "x": "\u0445\u0425\u03c7\u03a7\u00d7\u2179\u166e\u2a2f",
}


@functools.cache
def _fold_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for start, end in ((0x80, 0x3400), (0xF900, 0x10000), (0x1D400, 0x1D800), (0x1F100, 0x1F200)):
        for point in range(start, end):
            folded = unicodedata.normalize("NFKC", chr(point))
            if len(folded) == 1 and folded.isascii() and (folded.isalpha() or folded == "<"):
                table[point] = folded
    for bracket in _LOOKALIKE_BRACKETS:
        table[ord(bracket)] = "<"
    for letter, lookalikes in _LOOKALIKE_LETTERS.items():
        for lookalike in lookalikes:
            table[ord(lookalike)] = letter
    return table


def _escape_fence_tags(text: str) -> str:
    try:
        return _escape_folded(text)
    except UnicodeEncodeError:
        # Lone surrogates (JSON escapes in a model's answer can make them) are not UTF-8, the only text RE2
        # reads; in a prompt they are noise, so they become U+FFFD.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return _escape_folded(text)


def _escape_folded(text: str) -> str:
    """Each tag found in the folded text (look-alikes read as what they look like) has its opening bracket
    in the original text escaped. Only that bracket changes: the content still reads as written, and the tag
    neither closes the fence nor opens another one."""
    folded = text.translate(_fold_table())
    starts = [match.start() for match in _FENCE_TAG.finditer(folded)]
    if not starts:
        return text
    parts, previous = [], 0
    for start in starts:
        parts.append(text[previous:start])
        parts.append("&lt;")
        previous = start + 1
    parts.append(text[previous:])
    return "".join(parts)


def scrubbed(text: str, *, limit: int | None = None) -> str:
    """Memory text as every model outside the server receives it (LLM prompts inside a fence, the reranker's
    documents as they are). Secrets are scrubbed first (memories.scrubber), then the text is cut to `limit`:
    cutting first could leave half a key that no pattern recognises any more. Fence tags in the text are
    escaped last, so that nothing after it can rebuild one."""
    text = scrub_secrets(text)
    if limit is not None:
        text = text[:limit]
    return _escape_fence_tags(text)


def external(text: str, *, limit: int | None = None) -> str:
    """Memory text is data, never instructions: fence it (scrubbed), and keep a forged fence tag from ending
    the fence."""
    return FENCE_OPEN + scrubbed(text, limit=limit) + FENCE_CLOSE


def tokens_used_today(*, workspace_id: int) -> int:
    """Today's tokens (UTC), calls in flight counted at their reservation."""
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(_SPENT_TODAY_SQL, {"ws": workspace_id, "day": _day_start()})
        return int(cursor.fetchone()[0])


_SPENT_TODAY_SQL = (
    "SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) FROM llm_usage "
    "WHERE workspace_id = %(ws)s AND created_at >= %(day)s"
)


def _day_start() -> datetime:
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def daily_token_budget(*, workspace_id: int) -> int | None:
    """The workspace's daily budget: its own setting, else the server default; never above the operator's
    ceiling GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX (None: no limit)."""
    from graphsvc.models import GraphSettings

    with workspace_context(workspace_id):
        row = (
            GraphSettings.objects.filter(workspace_id=workspace_id)
            .values_list("llm_daily_token_budget", flat=True)
            .first()
        )
    budget = row if row is not None else settings.GRAPH_LLM_DAILY_TOKEN_BUDGET
    ceiling = settings.GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX
    if ceiling:
        budget = ceiling if budget is None else min(budget, ceiling)
    return budget


def budget_reserve(*, workspace_id: int, budget: int | None, tokens: int, purpose: str, model: str) -> int:
    """Reserve a call's most possible tokens before it is made, atomically per workspace: the check and the
    reservation happen under one lock, so parallel jobs are admitted only while today's spend (reservations
    included) is under the budget, and the budget is overspent by at most the one call that crosses it. The
    reservation is a usage row the call's outcome then corrects (_usage_record). Returns its id."""
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        if budget is not None:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('llm-budget:' || %s::text, 0))", [workspace_id]
            )
            cursor.execute(_SPENT_TODAY_SQL, {"ws": workspace_id, "day": _day_start()})
            used = int(cursor.fetchone()[0])
            if used >= budget:
                raise LlmBudgetExhausted(
                    f"{used} of {budget} tokens used today (UTC); extraction resumes tomorrow"
                )
        cursor.execute(
            """
            INSERT INTO llm_usage (workspace_id, purpose, model, prompt_tokens, completion_tokens, cost_usd,
                                   ok, error_code, duration_ms, created_at)
            VALUES (%s, %s, %s, %s, 0, 0, false, 'IN_FLIGHT', 0, now()) RETURNING id
            """,
            [workspace_id, purpose, model, tokens],
        )
        return int(cursor.fetchone()[0])


def call_token_ceiling(*, model: str, messages: list[dict[str, str]]) -> int:
    """The most tokens a call can cost: its prompt (counted by the model's tokenizer when litellm knows it,
    else one token per character, which no tokenizer exceeds) plus the completion cap."""
    import litellm

    text_chars = sum(len(m["content"]) for m in messages)
    try:
        prompt = int(litellm.token_counter(model=model, messages=messages) * 1.1) + 16
    except Exception:  # noqa: BLE001 - an unknown tokenizer: the character count bounds it
        prompt = text_chars
    return min(prompt, text_chars + 16) + settings.GRAPH_LLM_MAX_OUTPUT_TOKENS


def next_budget_reset() -> datetime:
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)


def _usage_record(
    *,
    reservation: int | None = None,
    workspace_id: int,
    memory_id: uuid.UUID | None,
    job_id: int | None,
    purpose: str,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    cost: float,
    ok: bool,
    error_code: str | None,
    duration_ms: int,
) -> None:
    values = [memory_id, job_id, purpose, model, prompt_tokens, completion_tokens, cost, ok, error_code]
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        # The call's reservation becomes its record (real tokens replace the reserved ceiling).
        cursor.execute(
            """
            UPDATE llm_usage SET memory_id = %s, job_id = %s, purpose = %s, model = %s, prompt_tokens = %s,
                completion_tokens = %s, cost_usd = %s, ok = %s, error_code = %s, duration_ms = %s
            WHERE workspace_id = %s AND id = %s
            """,
            [*values, duration_ms, workspace_id, reservation],
        )
        if cursor.rowcount == 0:
            cursor.execute(
                """
                INSERT INTO llm_usage (memory_id, job_id, purpose, model, prompt_tokens, completion_tokens,
                                       cost_usd, ok, error_code, duration_ms, workspace_id, created_at)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())
                """,
                [*values, duration_ms, workspace_id],
            )
        # The same numbers, summed over all workspaces, for /metrics (ops_metric_counters holds no workspace).
        metrics.counters_add(
            rows=[
                (metrics.LLM_TOKENS, {"model": model, "direction": "prompt"}, prompt_tokens),
                (metrics.LLM_TOKENS, {"model": model, "direction": "completion"}, completion_tokens),
                (metrics.LLM_COST, {"model": model}, cost),
                (metrics.LLM_CALLS, {"model": model, "outcome": "ok" if ok else "error"}, 1),
            ]
        )


def _classify_exception(exc: Exception) -> tuple[str, bool, float | None]:
    """(code, retryable, retry-after seconds) for a litellm/provider exception."""
    import litellm

    retry_after = None
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is not None:
        try:
            retry_after = float(headers.get("retry-after"))
        except (TypeError, ValueError):
            retry_after = None
    if isinstance(exc, litellm.Timeout):
        return LLM_TIMEOUT, True, None
    if isinstance(exc, litellm.RateLimitError):
        return LLM_RATE_LIMITED, True, retry_after
    if isinstance(
        exc, litellm.APIConnectionError | litellm.ServiceUnavailableError | litellm.InternalServerError
    ):
        return LLM_UNAVAILABLE, True, retry_after
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 500:
        return LLM_UNAVAILABLE, True, retry_after
    return LLM_REQUEST_REJECTED, False, None


def _cost_of(response: Any) -> float:
    import litellm

    hidden = getattr(response, "_hidden_params", None) or {}
    if isinstance(hidden.get("response_cost"), int | float):
        return float(hidden["response_cost"])
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # noqa: BLE001 - a model missing from the local cost map costs "unknown", recorded as 0
        return 0.0


def llm_structured(
    *,
    workspace_id: int,
    purpose: str,
    system: str,
    user: str,
    answer_model: type[T],
    schema_model: type[BaseModel] | None = None,
    memory_id: uuid.UUID | None = None,
    job_id: int | None = None,
) -> T:
    """One structured call: temperature 0, JSON schema, validated answer. Raises LlmError (code, retryable).

    `schema_model` is what the model is asked for when `answer_model` (what is accepted) is looser on purpose.
    Transient provider errors are retried in place (GRAPH_LLM_MAX_RETRIES, honouring Retry-After up to 10 s);
    what remains failing is left to the job's own backoff.
    """
    model = model_for(purpose)
    if not model:
        raise LlmError(LLM_REQUEST_REJECTED, f"no model configured for {purpose}", retryable=False)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    asked = schema_model or answer_model
    schema_name = asked.__name__.lower()[:64]
    attempts = settings.GRAPH_LLM_MAX_RETRIES + 1
    last_error: LlmError | None = None
    # Scrubbed again as a whole: a caller that built its prompt without external() still sends no secret
    # (scrubbing is idempotent, so fenced text is unchanged).
    messages = [{"role": "system", "content": system}, {"role": "user", "content": scrub_secrets(user)}]
    budget = daily_token_budget(workspace_id=workspace_id)
    ceiling = call_token_ceiling(model=model, messages=messages)
    for attempt in range(attempts):
        reservation = budget_reserve(
            workspace_id=workspace_id, budget=budget, tokens=ceiling, purpose=purpose, model=model
        )
        started = time.monotonic()
        try:
            with tracing.llm_span("chat", model=model) as span:
                tracing.span_set(span, {"cairn.llm.purpose": purpose})
                response = litellm.completion(
                    model=model,
                    messages=messages,
                    max_tokens=settings.GRAPH_LLM_MAX_OUTPUT_TOKENS,
                    temperature=0,
                    response_format={
                        "type": "json_schema",
                        "json_schema": {
                            "name": schema_name,
                            "schema": strict_json_schema(asked),
                            "strict": True,
                        },
                    },
                    # Always the operator's key, never litellm's fallback to keys in the environment: an unset
                    # key is sent as a placeholder a provider refuses (litellm treats an empty one as absent).
                    api_base=settings.GRAPH_LLM_API_BASE or None,
                    api_key=settings.GRAPH_LLM_API_KEY or NO_KEY,
                    timeout=settings.GRAPH_LLM_TIMEOUT_SECONDS,
                    num_retries=0,
                    max_retries=0,
                    drop_params=True,
                )
                tracing.llm_usage(span, response)
        except Exception as exc:  # noqa: BLE001 - every provider failure is classified, recorded and reported
            code, retryable, retry_after = _classify_exception(exc)
            duration_ms = int((time.monotonic() - started) * 1000)
            _usage_record(
                reservation=reservation,
                workspace_id=workspace_id,
                memory_id=memory_id,
                job_id=job_id,
                purpose=purpose,
                model=model,
                prompt_tokens=0,
                completion_tokens=0,
                cost=0.0,
                ok=False,
                error_code=code,
                duration_ms=duration_ms,
            )
            # The provider's own words stay in the server log: they may name hosts, accounts or keys.
            logger.warning("LLM call failed (%s, %s): %s", code, type(exc).__name__, str(exc)[:1000])
            last_error = LlmError(code, f"{code} ({type(exc).__name__})", retryable=retryable)
            if not retryable or attempt + 1 >= attempts:
                raise last_error from exc
            time.sleep(
                min(RETRY_AFTER_CAP_SECONDS, retry_after if retry_after is not None else 0.5 * 2**attempt)
            )
            continue
        duration_ms = int((time.monotonic() - started) * 1000)
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = _cost_of(response)
        answered = functools.partial(
            _usage_record,
            reservation=reservation,
            workspace_id=workspace_id,
            memory_id=memory_id,
            job_id=job_id,
            purpose=purpose,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=cost,
            duration_ms=duration_ms,
        )
        try:
            content = response.choices[0].message.content
            if isinstance(content, list):
                content = "".join(
                    part.get("text", "") if isinstance(part, dict) else str(part) for part in content
                )
            answer = answer_model.model_validate(parse_json_answer(content or ""))
        except (ValidationError, ValueError, TypeError, AttributeError, IndexError) as exc:
            answered(ok=False, error_code=LLM_OUTPUT_INVALID)
            # The same prompt at temperature 0 gives the same answer: not worth a retry.
            logger.warning("LLM answer did not match the schema: %s", str(exc)[:1000])
            raise LlmError(
                LLM_OUTPUT_INVALID,
                f"answer does not match the schema ({type(exc).__name__})",
                retryable=False,
            ) from exc
        answered(ok=True, error_code=None)
        return answer
    raise last_error or LlmError(LLM_UNAVAILABLE, "no attempt made", retryable=True)  # pragma: no cover
