"""In/Out schemas of the workspace export/import routes."""

from __future__ import annotations

from typing import Annotated

from ninja import Schema
from pydantic import Field

from config.schemas import ScopeIn, StrictIn, Trimmed, scope_field


class ExportIn(StrictIn):
    scope: ScopeIn = scope_field()
    includeEmbeddings: bool = Field(
        False,
        description="Also export memory and entity vectors (large). Without them the importing server "
        "queues embedding jobs for the imported memories.",
    )


class ExportDownloadIn(StrictIn):
    id: Annotated[str, Trimmed(64)] = Field(description="The jobId workspace/export answered with.")
    scope: ScopeIn = scope_field()


class ImportQuery(Schema):
    tenantId: Annotated[str, Trimmed(120)] | None = Field(
        None, description="As scope.tenantId: the workspace to import into."
    )
    projectId: Annotated[str, Trimmed(240)] | None = Field(
        None, description="As scope.projectId (routing only)."
    )

    def scope(self) -> ScopeIn:
        return ScopeIn(tenantId=self.tenantId, projectId=self.projectId)
