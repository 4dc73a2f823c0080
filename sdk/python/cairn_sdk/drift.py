"""Compare this SDK's models with a server's OpenAPI document, so the two cannot drift apart unnoticed.

For every operation in `OPERATIONS` it checks the request body (or query parameters) and the `data` of each
success envelope (each status against its own model: graph/communities answers a list or a started job): the
same fields, the same required fields, the same types (string/integer/number/boolean, date-time, arrays,
objects, maps, nullability) and, for requests, the same enumerations. Where a JSON Lines file travels instead
(the export download's answer, workspace import's body) it checks the media type. It does
not compare limits (maxLength, maximum): the server enforces those and its errors name the field.

    from cairn_sdk.drift import schema_drift
    report = schema_drift(httpx.get(f"{base}/api/sdk/v1/openapi.json").json())
    assert report.ok, report.describe()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from cairn_sdk._core import API_PREFIX, NDJSON
from cairn_sdk.operations import OPERATIONS, Operation


@dataclass
class DriftReport:
    checked: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # SDK operations the server does not offer
    problems: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No operation differs and none is missing: an SDK method the server does not serve is drift too."""
        return not self.problems and not self.missing

    def describe(self) -> str:
        lines = [f"{name}: not served by the server" for name in self.missing]
        lines += [f"{name}: {problem}" for name, problems in self.problems.items() for problem in problems]
        return "\n".join(lines) or "no drift"


def schema_drift(openapi: dict[str, Any]) -> DriftReport:
    report = DriftReport()
    for operation in OPERATIONS.values():
        spec = _operation_spec(openapi, operation)
        if spec is None:
            report.missing.append(operation.name)
            continue
        report.checked.append(operation.name)
        problems: list[str] = []
        _check_request(openapi, operation, spec, problems)
        _check_responses(openapi, operation, spec, problems)
        if problems:
            report.problems[operation.name] = problems
    return report


def _operation_spec(openapi: dict[str, Any], operation: Operation) -> dict[str, Any] | None:
    path = openapi.get("paths", {}).get(f"{API_PREFIX}/{operation.path}")
    if path is None:
        return None
    return path.get(operation.method.lower())


def _check_request(
    openapi: dict[str, Any], operation: Operation, spec: dict[str, Any], problems: list[str]
) -> None:
    if operation.request is None:
        if spec.get("requestBody") or any(p.get("in") == "query" for p in spec.get("parameters", [])):
            problems.append("the server takes input, the SDK sends none")
        return
    if operation.request_body == "ndjson":
        # The body is a JSON Lines file, versioned by its own header line; OpenAPI can only give its
        # media type.
        content = spec.get("requestBody", {}).get("content", {})
        if NDJSON not in content:
            problems.append(f"request body: server takes {sorted(content) or 'none'}, SDK sends {NDJSON}")
    sdk = _model_shape(operation.request)
    if operation.query_params:
        parameters = [p for p in spec.get("parameters", []) if p.get("in") == "query"]
        server = {
            "kind": "object",
            "nullable": False,
            "props": {p["name"]: _shape(openapi, p.get("schema", {})) for p in parameters},
            "required": {p["name"] for p in parameters if p.get("required")},
        }
        _diff("query", server, sdk, request=True, problems=problems)
        return
    schema = spec.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        problems.append("the server takes no JSON body, the SDK sends one")
        return
    _diff("request", _shape(openapi, schema), sdk, request=True, problems=problems)


def _check_responses(
    openapi: dict[str, Any], operation: Operation, spec: dict[str, Any], problems: list[str]
) -> None:
    responses = spec.get("responses", {})
    server_success = {int(code) for code in responses if str(code).isdigit() and 200 <= int(code) < 300}
    if server_success != set(operation.success_status):
        problems.append(
            f"success statuses: server {sorted(server_success)}, SDK {sorted(operation.success_status)}"
        )
    if operation.response_body == "ndjson":
        for status in sorted(server_success):
            content = responses[str(status)].get("content", {})
            if NDJSON not in content:
                problems.append(
                    f"response {status}: server answers {sorted(content) or 'no body'}, SDK reads {NDJSON}"
                )
        return
    for status in sorted(server_success):
        sdk = _model_shape(operation.response_for(status))
        schema = responses[str(status)].get("content", {}).get("application/json", {}).get("schema")
        envelope = _shape(openapi, schema or {})
        data = envelope.get("props", {}).get("data")
        if data is None:
            problems.append(f"response {status}: no envelope with a data field")
            continue
        # The envelope's data is null on errors; the SDK model describes the success payload.
        _diff(f"response {status}", {**data, "nullable": False}, sdk, request=False, problems=problems)


# --- schema shapes ------------------------------------------------------------------------------------------


def _model_shape(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    return _shape(schema, schema)


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    node: Any = root
    for part in ref.lstrip("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _shape(root: dict[str, Any], schema: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """Reduce a JSON schema to what the check compares, resolving $ref, allOf of one and nullable anyOf."""
    if depth > 40:
        return {"kind": "any", "nullable": False}
    if "$ref" in schema:
        return _shape(root, _resolve(root, schema["$ref"]), depth + 1)
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _shape(root, schema["allOf"][0], depth + 1)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        nullable = any(option.get("type") == "null" for option in options)
        rest = [_shape(root, option, depth + 1) for option in options if option.get("type") != "null"]
        if len(rest) == 1:
            return {**rest[0], "nullable": nullable or rest[0]["nullable"]}
        return {"kind": "union", "nullable": nullable, "options": sorted(repr(option) for option in rest)}
    kind = schema.get("type")
    if isinstance(kind, list):  # {"type": ["string", "null"]}
        nullable = "null" in kind
        others = [k for k in kind if k != "null"]
        inner = _shape(root, {**schema, "type": others[0] if len(others) == 1 else None}, depth + 1)
        return {**inner, "nullable": nullable}
    if kind == "object" or "properties" in schema:
        if "properties" in schema:
            return {
                "kind": "object",
                "nullable": False,
                "props": {name: _shape(root, prop, depth + 1) for name, prop in schema["properties"].items()},
                "required": set(schema.get("required", [])),
            }
        extra = schema.get("additionalProperties")
        values = (
            _shape(root, extra, depth + 1) if isinstance(extra, dict) else {"kind": "any", "nullable": False}
        )
        return {"kind": "map", "nullable": False, "values": values}
    if kind == "array":
        return {"kind": "array", "nullable": False, "items": _shape(root, schema.get("items", {}), depth + 1)}
    if kind in {"string", "integer", "number", "boolean"} or "const" in schema or "enum" in schema:
        enum = schema.get("enum", [schema["const"]] if "const" in schema else None)
        return {
            "kind": "scalar",
            "nullable": False,
            "type": kind or type(enum[0]).__name__.replace("str", "string"),
            "format": schema.get("format"),
            "enum": sorted(enum) if enum is not None else None,
        }
    if kind == "null":
        return {"kind": "null", "nullable": True}
    return {"kind": "any", "nullable": False}


def _describe(shape: dict[str, Any]) -> str:
    kind = shape["kind"]
    text = kind
    if kind == "scalar":
        text = shape["type"] + (f" ({shape['format']})" if shape.get("format") else "")
    elif kind == "array":
        text = f"array of {_describe(shape['items'])}"
    elif kind == "map":
        text = f"map of {_describe(shape['values'])}"
    return text + (" or null" if shape.get("nullable") else "")


def _diff(
    path: str, server: dict[str, Any], sdk: dict[str, Any], *, request: bool, problems: list[str]
) -> None:
    if server["kind"] == "any" or (
        server["kind"] == "map" and server["values"]["kind"] == "any" and sdk["kind"] == "map"
    ):
        if sdk["kind"] not in {"any", "map"}:
            problems.append(f"{path}: server {_describe(server)}, SDK {_describe(sdk)}")
        return
    if server["kind"] != sdk["kind"]:
        problems.append(f"{path}: server {_describe(server)}, SDK {_describe(sdk)}")
        return
    if server["nullable"] != sdk["nullable"]:
        problems.append(f"{path}: server {_describe(server)}, SDK {_describe(sdk)}")
    kind = server["kind"]
    if kind == "object":
        server_props, sdk_props = server["props"], sdk["props"]
        for name in sorted(set(server_props) - set(sdk_props)):
            problems.append(f"{path}.{name}: the server has this field, the SDK does not")
        for name in sorted(set(sdk_props) - set(server_props)):
            problems.append(f"{path}.{name}: the SDK has this field, the server does not")
        for name in sorted(server["required"] ^ sdk["required"]):
            if name in server_props and name in sdk_props:
                where = "server" if name in server["required"] else "SDK"
                problems.append(f"{path}.{name}: required only on the {where} side")
        for name in sorted(set(server_props) & set(sdk_props)):
            left, right = server_props[name], sdk_props[name]
            if request and name not in server["required"]:
                # An optional request field is simply not sent when unset, so whether it also accepts null
                # does not matter to the SDK.
                left, right = {**left, "nullable": False}, {**right, "nullable": False}
            _diff(f"{path}.{name}", left, right, request=request, problems=problems)
    elif kind == "array":
        _diff(f"{path}[]", server["items"], sdk["items"], request=request, problems=problems)
    elif kind == "map":
        _diff(f"{path}{{}}", server["values"], sdk["values"], request=request, problems=problems)
    elif kind == "scalar":
        if (server["type"], server["format"]) != (sdk["type"], sdk["format"]):
            problems.append(f"{path}: server {_describe(server)}, SDK {_describe(sdk)}")
        elif request and server["enum"] != sdk["enum"]:
            problems.append(f"{path}: server accepts {server['enum']}, SDK sends {sdk['enum']}")
    elif kind == "union" and server["options"] != sdk["options"]:
        problems.append(f"{path}: server {server['options']}, SDK {sdk['options']}")
