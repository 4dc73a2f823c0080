"""Import and export as background jobs (pipeline.background): the files they read and write, and the job
kinds `workspace_import` and `workspace_export`.

An upload is streamed to `<EXPORT_IMPORT_DIR>/uploads/<id>.jsonl` by the web process and deleted by its job
when the job ends. An export is written to `<EXPORT_IMPORT_DIR>/exports/<workspace>/<job>.jsonl` (under a
`.part` name until it is complete) and kept EXPORT_RETENTION_HOURS for workspace/export/download; the hourly
sweep deletes what is older, uploads a job never picked up included.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings

from config.embedded_db import var_dir
from config.errors import ApiError
from pipeline.background import JobRun
from transfer import export, services

logger = logging.getLogger("cairn.transfer")

IMPORT_KIND = "workspace_import"
EXPORT_KIND = "workspace_export"
CHUNK_BYTES = 1 << 16


def transfer_dir() -> Path:
    configured = settings.EXPORT_IMPORT_DIR
    return Path(configured) if configured else var_dir() / "transfer"


def _uploads() -> Path:
    path = transfer_dir() / "uploads"
    path.mkdir(parents=True, exist_ok=True)
    return path


def export_path(*, workspace_id: int, job_id: uuid.UUID | str) -> Path:
    return transfer_dir() / "exports" / str(int(workspace_id)) / f"{uuid.UUID(str(job_id))}.jsonl"


@dataclass(frozen=True)
class Upload:
    name: str  # the file's name under uploads/, what the job's params carry
    size: int
    lines: int


def upload_receive(*, stream: BinaryIO) -> Upload:
    """Stream a request body to a new upload file, at most EXPORT_IMPORT_MAX_UPLOAD_BYTES (413 beyond), and
    check its first line is an export header (422 IMPORT_FILE_INVALID otherwise). Nothing is left behind on a
    refusal."""
    limit = settings.EXPORT_IMPORT_MAX_UPLOAD_BYTES
    name = f"{uuid.uuid4()}.jsonl"
    path = _uploads() / name
    size = lines = 0
    try:
        with path.open("xb") as target:
            while chunk := stream.read(CHUNK_BYTES):
                size += len(chunk)
                if size > limit:
                    raise ApiError(
                        413,
                        "PAYLOAD_TOO_LARGE",
                        f"The file is larger than {limit} bytes (EXPORT_IMPORT_MAX_UPLOAD_BYTES). Import it "
                        "with `manage.py workspace_import`, which has no size limit.",
                        details={"maxBytes": limit},
                    )
                lines += chunk.count(b"\n")
                target.write(chunk)
        with path.open("rb") as source:
            first = b""
            for _ in range(1000):  # blank lines before the header are skipped, as the import skips them
                first = source.readline(settings.EXPORT_IMPORT_MAX_LINE_BYTES + 1)
                if first.strip():
                    break
            services.header_check(first)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return Upload(name=name, size=size, lines=lines)


def upload_discard(upload: Upload) -> None:
    (_uploads() / upload.name).unlink(missing_ok=True)


def _upload_path(job: JobRun) -> Path:
    name = str(job.params.get("file", ""))
    # Only a name this module made: a job's params never point elsewhere on disk.
    try:
        uuid.UUID(name.removesuffix(".jsonl"))
    except ValueError:
        raise ApiError(500, "IMPORT_FILE_MISSING", "The uploaded file of this job is gone.") from None
    return _uploads() / name


def workspace_import_run(job: JobRun) -> dict[str, Any]:
    """The workspace_import job: the uploaded file in one transaction, all or nothing, progress by line."""
    path = _upload_path(job)
    if not path.exists():
        raise ApiError(
            410,
            "IMPORT_FILE_MISSING",
            "The uploaded file of this import is gone (deleted after EXPORT_RETENTION_HOURS); upload it "
            "again.",
            error_type="not_found_error",
        )
    total = job.params.get("lines")
    try:
        with path.open("rb") as source:
            report = services.workspace_import(
                workspace_id=job.workspace_id,
                lines=source,
                progress=lambda line: job.progress(
                    done=line, total=total if isinstance(total, int) else None, phase="importing"
                ),
            )
    finally:
        path.unlink(missing_ok=True)
    return {"workspaceId": job.workspace_id, **report.as_dict()}


def workspace_export_run(job: JobRun) -> dict[str, Any]:
    """The workspace_export job: the JSON Lines file of the workspace, written under a temporary name and
    renamed when complete, so a download never serves half a file."""
    include_embeddings = bool(job.params.get("includeEmbeddings", False))
    target = export_path(workspace_id=job.workspace_id, job_id=job.id)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".jsonl.part")
    total = export.workspace_export_count(workspace_id=job.workspace_id) + 2
    job.progress(done=0, total=total, phase="exporting", force=True)
    lines = size = 0
    try:
        with partial.open("wb") as out:
            for line in export.workspace_export_lines(
                workspace_id=job.workspace_id, include_embeddings=include_embeddings
            ):
                out.write(line)
                lines += 1
                size += len(line)
                job.progress(done=lines, total=max(total, lines), phase="exporting")
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    expires = time.time() + settings.EXPORT_RETENTION_HOURS * 3600
    return {
        "lines": lines,
        "bytes": size,
        "includesEmbeddings": include_embeddings,
        "expiresAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
    }


def export_file(*, workspace_id: int, job_id: uuid.UUID) -> Path | None:
    path = export_path(workspace_id=workspace_id, job_id=job_id)
    return path if path.is_file() else None


def export_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as source:
        while chunk := source.read(CHUNK_BYTES):
            yield chunk


def transfer_files_sweep(*, now: float | None = None) -> int:
    """Delete export files and uploads older than EXPORT_RETENTION_HOURS; returns how many."""
    cutoff = (time.time() if now is None else now) - settings.EXPORT_RETENTION_HOURS * 3600
    removed = 0
    root = transfer_dir()
    for pattern in ("uploads/*.jsonl", "exports/*/*.jsonl", "exports/*/*.jsonl.part"):
        for path in root.glob(pattern):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue
    if removed:
        logger.info(
            "deleted %s export and upload files older than %s hours", removed, settings.EXPORT_RETENTION_HOURS
        )
    return removed
