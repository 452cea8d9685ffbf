"""The OpenAPI document of the quality feed (``/api/v1/quality``), built from the feed's own types.

The document is committed beside this module (``openapi.json``, shipped in the
package) and served as it is at ``/api/v1/openapi.json``; a test builds it again
from the code and fails on any difference, so the document cannot drift from
what the server sends.  Write it again with
``python -m reverie_canary.services.dashboard.openapi --write``.

The schemas come from the msgspec types of
:mod:`~reverie_canary.services.dashboard.feed` (``msgspec.json.schema_components``:
JSON Schema 2020-12, which OpenAPI 3.1 uses as it is), so a field added to a
view is in the document at the next build.  The path is versioned (``/api/v1``):
fields are only ever added within it (readers must ignore fields they do not
know); removing or changing one is a ``/api/v2``.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from reverie_canary.services.dashboard.feed import CONTROL_MEANINGS, Feed

#: Where the committed document lives (in the package).
DOCUMENT = "openapi.json"
#: The feed's API version (the path's ``v1``) and the document's own version.
API_VERSION = "1.0.0"


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True):
    """A refused request: what was wrong, in one line."""

    error: str


def _responses() -> dict[str, Any]:
    etag = {"description": "the body's entity tag: send it back in If-None-Match", "schema": {"type": "string"}}
    cache_control = {"description": "private, max-age=N: the same body is served to every reader for N seconds",
                     "schema": {"type": "string"}}
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    return {
        "200": {"description": "the feed", "headers": {"ETag": etag, "Cache-Control": cache_control},
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Feed"}}}},
        "304": {"description": "not modified: the If-None-Match header named the current ETag (no body)",
                "headers": {"ETag": etag, "Cache-Control": cache_control}},
        "401": {"description": "no valid credentials (basic user and password, or a bearer token); "
                               "WWW-Authenticate names both schemes",
                "content": {"text/plain": {"schema": {"type": "string"}}}},
        "404": {"description": "a model asked for is not one the canary watches", "content": error},
        "503": {"description": "a source (NATS, the KV bucket, Redis) could not be read; the error says which",
                "content": error},
    }


def build() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the feed, as a JSON-ready dict (deterministic: sorted schema names)."""
    _, components = msgspec.json.schema_components([Feed, ErrorBody], ref_template="#/components/schemas/{name}")
    controls = "; ".join(CONTROL_MEANINGS.values())
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "reverie-canary quality feed",
            "version": API_VERSION,
            "summary": "Per model and provider: what the canary's probes found and what routing does about it.",
            "description": (
                "Read-only. Per model: the canary's health, the mode of each probe kind, the last closed cycle, "
                "the positive controls (" + controls + "), and per provider the state and the ignore-list layer "
                "behind it, the last result of every probe kind with its reason codes, the streaks, the "
                "quantization the gateway lists, the time of the last probe, the chat backends' served "
                "counts and their content-free live counts (replies, failing share, top reasons, replies served "
                "although the ignore list excluded the provider), and the last answer of a pinned confirmation "
                "probe to those live failures (shown beside the verdicts: live counts never suspend anyone). Every time is UTC (RFC 3339). Within /api/v1 fields are only added: ignore the ones "
                "you do not know. The body holds no time of the answer, so an unchanged view keeps its ETag: "
                "poll with If-None-Match and a 304 costs nothing."),
        },
        "security": [{"basicAuth": []}, {"bearerAuth": []}],
        "paths": {
            "/api/v1/quality": {
                "get": {
                    "operationId": "getQuality",
                    "summary": "The quality feed of every watched model, or of the models asked for",
                    "parameters": [
                        {"name": "model", "in": "query", "required": False, "explode": True,
                         "description": "a watched model id (repeat for several); none: every watched model",
                         "schema": {"type": "array", "items": {"type": "string"}}},
                        {"name": "If-None-Match", "in": "header", "required": False,
                         "description": "the ETag of a body you hold: 304 when it is still current",
                         "schema": {"type": "string"}},
                    ],
                    "responses": _responses(),
                },
            },
            "/api/v1/openapi.json": {
                "get": {
                    "operationId": "getOpenAPI",
                    "summary": "This document",
                    "responses": {"200": {"description": "the OpenAPI document",
                                          "content": {"application/json": {"schema": {"type": "object"}}}},
                                  "401": {"description": "no valid credentials"}},
                },
            },
        },
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {
                "basicAuth": {"type": "http", "scheme": "basic",
                              "description": "a user of the web configuration's basic_auth_users (bcrypt)"},
                "bearerAuth": {"type": "http", "scheme": "bearer",
                               "description": "a reader's token of the web configuration's bearer_tokens"},
            },
        },
    }


def render() -> str:
    """The document as the committed text (indented JSON, a final newline)."""
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


@cache
def document_bytes() -> bytes:
    """The committed document as served (read once from the package)."""
    return (resources.files("reverie_canary.services.dashboard") / DOCUMENT).read_bytes()


def main(argv: list[str] | None = None) -> int:
    """``--write``: write the document beside this module; else exit 1 when the committed one differs."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(__file__).with_name(DOCUMENT)
    if "--write" in args:
        path.write_text(render(), "utf-8")
        return 0
    current = path.read_text("utf-8") if path.exists() else ""
    if current != render():
        print(f"{path} is stale: run python -m reverie_canary.services.dashboard.openapi --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
