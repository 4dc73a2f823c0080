import os
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError

from config.errors import ApiError
from config.schemas import ScopeIn
from mcp_server.server import McpSettings, build_server, caller_for_key, is_loopback
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Serve Cairn's memory tools over the Model Context Protocol: get_context, add_memory, "
        "search_memories, forget_memory, graph_facts, graph_traverse. stdio by default (for an agent that "
        "starts this command); --http serves streamable HTTP at http://HOST:PORT/mcp."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--api-key",
            default=os.environ.get("CAIRN_API_KEY"),
            help="API key (mem_…) the tools act with; default $CAIRN_API_KEY. Over HTTP a request's own "
            "'Authorization: Bearer mem_…' header takes precedence, and the key may be omitted.",
        )
        parser.add_argument("--http", action="store_true", help="Serve streamable HTTP instead of stdio.")
        parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765).")
        parser.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp).")
        parser.add_argument(
            "--allowed-hosts",
            default=",".join(settings.MCP_ALLOWED_HOSTS),
            help="Host headers the HTTP server answers (DNS-rebinding protection, always on), "
            "comma-separated, 'host:*' for any port; default MCP_ALLOWED_HOSTS.",
        )
        parser.add_argument(
            "--allowed-origins",
            default=",".join(settings.MCP_ALLOWED_ORIGINS),
            help="Origin headers the HTTP server accepts from browsers, comma-separated; default "
            "MCP_ALLOWED_ORIGINS.",
        )
        parser.add_argument(
            "--tenant-id", default=os.environ.get("CAIRN_TENANT_ID"), help="Default scope.tenantId."
        )
        parser.add_argument(
            "--user-id", default=os.environ.get("CAIRN_USER_ID"), help="Default scope.userId."
        )
        parser.add_argument(
            "--project-id", default=os.environ.get("CAIRN_PROJECT_ID"), help="Default scope.projectId."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        api_key = (options["api_key"] or "").strip() or None
        if api_key is None and not options["http"]:
            raise CommandError("Give the API key the tools act with: --api-key mem_… or CAIRN_API_KEY.")
        if api_key is not None:
            try:
                caller_for_key(api_key)  # refuse to start with a key every tool call would reject
            except ApiError as exc:
                raise CommandError(f"{exc.code}: {exc.message}") from None
        try:
            scope = ScopeIn(
                tenantId=options["tenant_id"], userId=options["user_id"], projectId=options["project_id"]
            )
        except ValidationError as exc:
            raise CommandError(f"Invalid default scope: {exc}") from None
        loopback = is_loopback(options["host"])
        if options["http"] and api_key is not None and not loopback:
            self.stderr.write(
                f"Bound to {options['host']}: requests must bring their own 'Authorization: Bearer mem_…'; "
                "the startup key is used for none of them."
            )
        server = build_server(
            McpSettings(
                api_key=api_key,
                default_scope=scope.model_dump(exclude_none=True),
                startup_key_for_anonymous=not options["http"] or loopback,
            )
        )
        if options["http"]:
            # DNS-rebinding protection stays on whatever the bind address: only the listed Host headers pass.
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=_listed(options["allowed_hosts"]),
                allowed_origins=_listed(options["allowed_origins"]),
            )
            server.run(
                "streamable-http",
                host=options["host"],
                port=options["port"],
                streamable_http_path=options["path"],
                transport_security=security,
            )
        else:
            server.run("stdio")


def _listed(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]
