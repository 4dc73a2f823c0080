#!/usr/bin/env node
// Writes src/openapi.ts from Cairn's OpenAPI document: one interface per schema and a `Paths` map from each
// operation to its request and the `data` of its success envelopes. The client's signatures are built on
// `Paths`, so a field the server adds, renames or drops reaches every call at the next generation, and the
// drift test (which runs this against the served document) fails until the committed file is regenerated.
//
//   node scripts/generate-types.mjs http://127.0.0.1:8000/api/sdk/v1/openapi.json > src/openapi.ts
//   node scripts/generate-types.mjs openapi.json > src/openapi.ts
import { readFile } from "node:fs/promises";

const PREFIX = "/api/sdk/v1/";
const NDJSON = "application/x-ndjson";

async function load(source) {
  if (/^https?:\/\//.test(source)) {
    const answer = await fetch(source);
    if (!answer.ok) throw new Error(`GET ${source}: HTTP ${answer.status}`);
    return answer.json();
  }
  return JSON.parse(await readFile(source, "utf8"));
}

const refName = (ref) => ref.slice(ref.lastIndexOf("/") + 1);
const isEnvelope = (name) => name.startsWith("Envelope_");
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (name) => (IDENTIFIER.test(name) ? name : JSON.stringify(name));

function doc(text, indent) {
  if (!text) return "";
  const lines = String(text).replaceAll("*/", "*\\/").split("\n");
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((line) => `${indent} * ${line}`.trimEnd()).join("\n")}\n${indent} */\n`;
}

function union(parts) {
  const unique = [...new Set(parts)];
  return unique.length ? unique.join(" | ") : "unknown";
}

function typeOf(schema, indent) {
  if (!schema || Object.keys(schema).length === 0) return "unknown";
  if (schema.$ref) return refName(schema.$ref);
  if ("const" in schema) return JSON.stringify(schema.const);
  if (schema.enum) return union(schema.enum.map((value) => JSON.stringify(value)));
  if (schema.anyOf) return union(schema.anyOf.map((part) => typeOf(part, indent)));
  if (schema.oneOf) return union(schema.oneOf.map((part) => typeOf(part, indent)));
  if (schema.allOf) {
    const parts = schema.allOf.map((part) => typeOf(part, indent));
    return parts.length === 1 ? parts[0] : parts.map((part) => `(${part})`).join(" & ");
  }
  if (Array.isArray(schema.type)) return union(schema.type.map((type) => typeOf({ ...schema, type }, indent)));
  switch (schema.type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array":
      return `Array<${typeOf(schema.items, indent)}>`;
    case "object":
    case undefined:
      return objectType(schema, indent);
    default:
      return "unknown";
  }
}

function objectType(schema, indent) {
  const properties = Object.entries(schema.properties ?? {});
  const extra = schema.additionalProperties;
  if (!properties.length) {
    if (extra === false) return "Record<string, never>";
    return `Record<string, ${extra && extra !== true ? typeOf(extra, indent) : "unknown"}>`;
  }
  const required = new Set(schema.required ?? []);
  const inner = `${indent}  `;
  const lines = properties.map(
    ([name, property]) =>
      `${doc(property.description, inner)}${inner}${key(name)}${required.has(name) ? "" : "?"}: ${typeOf(property, inner)};`,
  );
  if (extra && extra !== false) {
    lines.push(`${inner}[field: string]: ${extra === true ? "unknown" : typeOf(extra, inner)};`);
  }
  return `{\n${lines.join("\n")}\n${indent}}`;
}

function envelopeData(schemas, response) {
  const content = response.content ?? {};
  if (content[NDJSON]) return "string";
  const ref = content["application/json"]?.schema?.$ref;
  if (!ref) return "unknown";
  const envelope = schemas[refName(ref)];
  const data = envelope?.properties?.data;
  if (!data) return refName(ref);
  const concrete = (data.anyOf ?? data.allOf ?? [data]).filter((part) => part.type !== "null");
  return union(concrete.map((part) => typeOf(part, "      ")));
}

function requestOf(spec) {
  const query = (spec.parameters ?? []).filter((parameter) => parameter.in === "query");
  if (query.length) {
    const schema = {
      type: "object",
      properties: Object.fromEntries(query.map((parameter) => [parameter.name, { ...parameter.schema, description: parameter.description }])),
      required: query.filter((parameter) => parameter.required).map((parameter) => parameter.name),
    };
    return { where: "query", type: typeOf(schema, "      ") };
  }
  const content = spec.requestBody?.content ?? {};
  if (content["application/json"]) return { where: "body", type: typeOf(content["application/json"].schema, "      ") };
  if (content[NDJSON]) return { where: "ndjson", type: "string" };
  return { where: "none", type: "never" };
}

export function generate(openapi) {
  const schemas = openapi.components?.schemas ?? {};
  const out = [
    "// Generated by scripts/generate-types.mjs from Cairn's OpenAPI document; do not edit.",
    `// Server API version ${openapi.info?.version ?? "unknown"}. Regenerate: npm run generate -- <openapi.json or its URL>`,
    "/* eslint-disable */",
    "",
  ];
  for (const name of Object.keys(schemas).sort()) {
    if (isEnvelope(name)) continue;
    const schema = schemas[name];
    out.push(`${doc(schema.description, "")}export type ${name} = ${typeOf(schema, "")};`, "");
  }
  out.push("/** Every operation under /api/sdk/v1: its request (body or query) and the data of each success status. */");
  out.push("export interface Paths {");
  for (const path of Object.keys(openapi.paths ?? {}).sort()) {
    if (!path.startsWith(PREFIX)) continue;
    out.push(`  ${JSON.stringify(path.slice(PREFIX.length))}: {`);
    for (const method of Object.keys(openapi.paths[path]).sort()) {
      const spec = openapi.paths[path][method];
      const request = requestOf(spec);
      const successes = Object.entries(spec.responses ?? {}).filter(([status]) => /^2\d\d$/.test(status)).sort();
      out.push(`${doc(spec.summary, "    ")}    ${method}: {`);
      out.push(`      in: ${JSON.stringify(request.where)};`);
      out.push(`      request: ${request.type};`);
      out.push("      responses: {");
      for (const [status, response] of successes) out.push(`        ${status}: ${envelopeData(schemas, response)};`);
      out.push("      };");
      out.push("    };");
    }
    out.push("  };");
  }
  out.push("}", "");
  return out.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const source = process.argv[2];
  if (!source) {
    console.error("usage: generate-types.mjs <openapi.json path or URL>");
    process.exit(2);
  }
  process.stdout.write(generate(await load(source)));
}
