"""The one LLM client: litellm, structured JSON answers validated with pydantic, bounded retries, usage and budget.

Every call is recorded in `llm_usage` (tokens, cost, outcome) for its workspace, memory and job; a workspace with a
daily token budget stops calling once today's tokens reach it (LlmBudgetExhausted), and nothing else is affected.
No model configured (GRAPH_LLM_MODEL empty) means extraction is off: `llm_enabled()` is False and callers skip.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import re2
from django.conf import settings
from django.db import connections
from pydantic import BaseModel, ValidationError

from memories.scrubber import scrub_secrets
from ops import metrics
from tenancy.rls import workspace_context

logger = logging.getLogger("cairn.llm")

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


def llm_enabled() -> bool:
    return bool(settings.GRAPH_LLM_MODEL)


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
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", cleaned, re.DOTALL)
    if fenced:
        cleaned = fenced.group(1)
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError:
        start, end = cleaned.find("{"), cleaned.rfind("}")
        if start == -1 or end <= start:
            raise
        return json.loads(cleaned[start : end + 1])


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


def _escape_fence_tag(match: re2._Match) -> str:
    # Only the `<` changes: the content still reads as written, and the tag neither closes the fence nor
    # opens another one.
    return "&lt;" + match.group(0)[1:]


def _escape_fence_tags(text: str) -> str:
    try:
        return _FENCE_TAG.sub(_escape_fence_tag, text)
    except UnicodeEncodeError:
        # Lone surrogates (JSON escapes in a model's answer can make them) are not UTF-8, the only text RE2
        # reads; in a prompt they are noise, so they become U+FFFD.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return _FENCE_TAG.sub(_escape_fence_tag, text)


def external(text: str, *, limit: int | None = None) -> str:
    """Memory text is data, never instructions: fence it, and keep a forged fence tag from ending the fence.

    Secrets are scrubbed first (memories.scrubber), then the text is cut to `limit`: cutting first could leave
    half a key that no pattern recognises any more. Fence tags in the text are escaped last, so that nothing
    after it can rebuild one.
    """
    text = scrub_secrets(text)
    if limit is not None:
        text = text[:limit]
    return FENCE_OPEN + _escape_fence_tags(text) + FENCE_CLOSE


def tokens_used_today(*, workspace_id: int) -> int:
    day_start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) FROM llm_usage "
            "WHERE workspace_id = %s AND created_at >= %s",
            [workspace_id, day_start],
        )
        return int(cursor.fetchone()[0])


def daily_token_budget(*, workspace_id: int) -> int | None:
    from graphsvc.models import GraphSettings

    with workspace_context(workspace_id):
        row = (
            GraphSettings.objects.filter(workspace_id=workspace_id)
            .values_list("llm_daily_token_budget", flat=True)
            .first()
        )
    return row if row is not None else settings.GRAPH_LLM_DAILY_TOKEN_BUDGET


def budget_check(*, workspace_id: int) -> None:
    budget = daily_token_budget(workspace_id=workspace_id)
    if budget is None:
        return
    used = tokens_used_today(workspace_id=workspace_id)
    if used >= budget:
        raise LlmBudgetExhausted(f"{used} of {budget} tokens used today (UTC); extraction resumes tomorrow")


def next_budget_reset() -> datetime:
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)


def _usage_record(
    *,
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
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO llm_usage (workspace_id, memory_id, job_id, purpose, model, prompt_tokens, completion_tokens,
                                   cost_usd, ok, error_code, duration_ms, created_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())
            """,
            [
                workspace_id,
                memory_id,
                job_id,
                purpose,
                model,
                prompt_tokens,
                completion_tokens,
                cost,
                ok,
                error_code,
                duration_ms,
            ],
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
    if not llm_enabled():
        raise LlmError(LLM_REQUEST_REJECTED, "no GRAPH_LLM_MODEL configured", retryable=False)
    budget_check(workspace_id=workspace_id)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    model = settings.GRAPH_LLM_MODEL
    asked = schema_model or answer_model
    schema_name = asked.__name__.lower()[:64]
    attempts = settings.GRAPH_LLM_MAX_RETRIES + 1
    last_error: LlmError | None = None
    for attempt in range(attempts):
        started = time.monotonic()
        try:
            response = litellm.completion(
                model=model,
                # Scrubbed again as a whole: a caller that built its prompt without external() still sends no
                # secret (scrubbing is idempotent, so fenced text is unchanged).
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": scrub_secrets(user)},
                ],
                temperature=0,
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": schema_name, "schema": strict_json_schema(asked), "strict": True},
                },
                api_base=settings.GRAPH_LLM_API_BASE or None,
                api_key=settings.GRAPH_LLM_API_KEY or None,
                timeout=settings.GRAPH_LLM_TIMEOUT_SECONDS,
                num_retries=0,
                max_retries=0,
                drop_params=True,
            )
        except Exception as exc:  # noqa: BLE001 - every provider failure is classified, recorded and reported
            code, retryable, retry_after = _classify_exception(exc)
            duration_ms = int((time.monotonic() - started) * 1000)
            _usage_record(
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
            last_error = LlmError(code, f"{type(exc).__name__}: {str(exc)[:300]}", retryable=retryable)
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
        try:
            content = response.choices[0].message.content
            if isinstance(content, list):
                content = "".join(
                    part.get("text", "") if isinstance(part, dict) else str(part) for part in content
                )
            answer = answer_model.model_validate(parse_json_answer(content or ""))
        except (ValidationError, ValueError, TypeError, AttributeError, IndexError) as exc:
            _usage_record(
                workspace_id=workspace_id,
                memory_id=memory_id,
                job_id=job_id,
                purpose=purpose,
                model=model,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost=cost,
                ok=False,
                error_code=LLM_OUTPUT_INVALID,
                duration_ms=duration_ms,
            )
            # The same prompt at temperature 0 gives the same answer: not worth a retry.
            raise LlmError(
                LLM_OUTPUT_INVALID, f"answer does not match the schema: {str(exc)[:300]}", retryable=False
            ) from exc
        _usage_record(
            workspace_id=workspace_id,
            memory_id=memory_id,
            job_id=job_id,
            purpose=purpose,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=cost,
            ok=True,
            error_code=None,
            duration_ms=duration_ms,
        )
        return answer
    raise last_error or LlmError(LLM_UNAVAILABLE, "no attempt made", retryable=True)  # pragma: no cover
