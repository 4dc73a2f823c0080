"""django-q2 entry points: they take ids and call the pipeline (which opens the workspace's RLS context)."""

from __future__ import annotations

from pipeline import background
from pipeline import services as pipeline
from retrieval import vectors


def pipeline_job_run(workspace_id: int, job_id: int) -> int:
    return pipeline.job_run(workspace_id=workspace_id, job_id=job_id)


def pipeline_memory_job_run(workspace_id: int, memory_id: str, kind: str) -> int:
    return pipeline.job_run(workspace_id=workspace_id, memory_id=memory_id, kind=kind)


def vector_index_build(workspace_id: int, dimension: int) -> bool:
    return vectors.hnsw_index_ensure(workspace_id=workspace_id, dimension=dimension)


def pipeline_kind_jobs_run(workspace_id: int, kind: str) -> int:
    return pipeline.job_run(workspace_id=workspace_id, kind=kind)


def background_job_run(workspace_id: int, job_id: str) -> str:
    """One background job (pipeline.background): import, export, or any registered kind."""
    return background.job_run(workspace_id=workspace_id, job_id=job_id)


def background_jobs_sweep() -> int:
    """The hourly `background-jobs-sweep` schedule: each kind's upkeep (old export and upload files)."""
    return background.jobs_sweep()
