"""The production security settings, exercised: `manage.py check --deploy` in a subprocess with a
production-like environment (an external database, a secret key, a host name) reports nothing, and nothing in
settings.py switches them off for tests (the suite's own process has secure cookies too)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent.parent


def production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A deployment's environment: only what the process needs to start, nothing from the developer's."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "CAIRN_VAR_DIR": str(tmp_path / "var"),
        # Never connected to: check --deploy reads settings only.
        "DATABASE_URL": "postgres://cairn_owner:pw@db.internal:5432/cairn",
        "DATABASE_APP_URL": "postgres://cairn_app:pw@db.internal:5432/cairn",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "cairn.example.com",
        **extra,
    }
    return {name: value for name, value in env.items() if value != ""}


def manage(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=production_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_passes_the_deploy_check_with_a_production_environment(tmp_path):
    done = manage(
        tmp_path,
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="true",
        SECURE_HSTS_PRELOAD="true",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_it_leaves_only_the_subdomain_and_preload_choices_to_the_operator(tmp_path):
    """Without them the defaults are otherwise production-grade: HTTPS redirect, a year of HSTS, secure
    cookies; only the two HSTS choices that depend on the operator's domain are warned about."""
    done = manage(tmp_path, "check", "--deploy")
    warned = {line.split(")")[0].split("(")[-1] for line in done.stderr.splitlines() if "(security." in line}
    assert warned == {"security.W005", "security.W021"}, done.stderr


def test_it_refuses_to_start_in_production_without_a_secret_key(tmp_path):
    done = manage(tmp_path, "check", SECRET_KEY="")
    assert done.returncode != 0 and "SECRET_KEY is required" in done.stderr


def test_it_weakens_nothing_for_the_tests_themselves():
    source = (ROOT / "config" / "settings.py").read_text()
    assert "pytest" not in source and "TESTING" not in source
    assert settings.SESSION_COOKIE_SECURE and settings.CSRF_COOKIE_SECURE
