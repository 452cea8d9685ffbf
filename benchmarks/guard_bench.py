#!/usr/bin/env python
"""The reply guard's CPU per reply on a 300-token reply, beside reading the same stream without it.

Usage::

    python benchmarks/guard_bench.py [--runs N]

A chat backend runs :class:`reverie_canary.client.ReplyGuard` on every reply, so its
cost must stay small: the goal is 0.1 ms median for a 300-token reply of the checks
the guard adds (the any-reply checks took about 0.06 ms before the guard existed).
Rows, each timed in the same process on the same replies (the token scan's caches
emptied before every call: a backend sees each reply once):

- ``read the stream (no guard)``: the SSE lines of the reply through the one wire
  reader (:class:`~reverie_canary.client.chunks.ChunkReader`): what parsing costs anyway;
- ``guard: judge a finished reply``: the any-reply checks on the assembled reply
  (:func:`reverie_canary.client.guard.judge`);
- ``guard: the whole stream``: :class:`~reverie_canary.client.guard.StreamGuard` over
  the same lines (parsing, the early checks per chunk, the verdict at the end, the
  counts); minus the first row, the guard's own cost;
- ``guard: a junk first chunk``: a broken reply decided at its first chunk (the
  backend stops reading there);
- ``guard: the stream as parsed chunks``: the same reply handed over as the chunks a
  backend's HTTP library or SDK already decoded (:meth:`StreamGuard.chunk`, dicts
  here): the guard without its own SSE parse.

The replies are ``checks_bench``'s: English and Portuguese roleplay of about 300
tokens, streamed 4 characters a chunk (about 330 chunks, OpenRouter's envelope).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.checks_bench import EN, PT  # noqa: E402
from benchmarks.checks_bench import _time as timed  # noqa: E402
from benchmarks.checks_bench import _uncached as fresh  # noqa: E402
from reverie_canary.client import IgnoreListClient, ReplyGuard  # noqa: E402
from reverie_canary.client.chunks import ChunkReader  # noqa: E402
from reverie_canary.client.guard import judge, spec_for  # noqa: E402

BODY = {"model": "m/x", "stream": True, "provider": {"sort": "latency"}}


def sse(text: str, piece: int = 4, provider: str = "DeepInfra") -> list[bytes]:
    """``text`` as OpenRouter streams it: a keep-alive, ``piece``-character chunks, the finish, ``[DONE]``."""
    def line(content: str | None, finish: str | None = None) -> bytes:
        return b"data: " + json.dumps({"id": "gen-1", "object": "chat.completion.chunk", "model": "m/x",
                                       "provider": provider, "choices": [
                                           {"index": 0, "delta": {} if content is None else {"content": content},
                                            "finish_reason": finish, "native_finish_reason": finish}]},
                                      ensure_ascii=False).encode()
    return ([b": OPENROUTER PROCESSING"] + [line(text[i:i + piece]) for i in range(0, len(text), piece)]
            + [line(None, "stop"), b"data: [DONE]"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400, help="timed calls per row (default 400)")
    args = parser.parse_args(argv)

    guard = ReplyGuard(IgnoreListClient("nats://127.0.0.1:1", "m/x"), policy=None)
    spec = spec_for(BODY)
    rows = []
    for lang, text in (("en", EN), ("pt", PT)):
        lines = sse(text)
        words = len(text.split())

        def read(lines=lines) -> object:
            reader = ChunkReader(reply_max_bytes=256 * 1024)
            for raw in lines:
                reader.line(raw, 1.0)
            return reader.reply(http_status=200)

        reply = read()
        assert judge(reply, spec).outcome == "pass", judge(reply, spec)

        def whole(lines=lines) -> object:
            stream = guard.attempt(BODY).stream()
            for raw in lines:
                if stream.line(raw, 1.0) is not None:
                    break
            return stream.finish(t_ms=2.0)

        assert whole().outcome == "pass"
        chunks = [json.loads(raw[6:]) for raw in lines if raw.startswith(b"data: {")]  # the backend parsed them

        def parsed(chunks=chunks) -> object:
            stream = guard.attempt(BODY).stream()
            for c in chunks:
                if stream.chunk(c, 1.0) is not None:
                    break
            return stream.finish(t_ms=2.0)

        assert parsed().outcome == "pass"
        junk_lines = sse(": " + text)

        def junk(lines=junk_lines) -> object:
            stream = guard.attempt(BODY).stream()
            for raw in lines:
                verdict = stream.line(raw, 1.0)
                if verdict is not None:
                    return verdict
            raise AssertionError("junk not decided early")

        assert junk().reason == "leading_junk"
        base, base95 = timed(read, args.runs)
        checks, checks95 = timed(fresh(lambda reply=reply: judge(reply, spec)), args.runs)
        stream_med, stream95 = timed(fresh(whole), args.runs)
        junk_med, junk95 = timed(fresh(junk), args.runs)
        parsed_med, parsed95 = timed(fresh(parsed), args.runs)
        rows += [(f"{lang}: read the stream (no guard), {len(lines)} lines, {words} words", base, base95, ""),
                 (f"{lang}: guard: judge a finished reply", checks, checks95, f"{checks / base:.2f}× reading"),
                 (f"{lang}: guard: the whole stream", stream_med, stream95,
                  f"guard's own: {stream_med - base:.0f} µs"),
                 (f"{lang}: guard: a junk first chunk (decided early)", junk_med, junk95, ""),
                 (f"{lang}: guard: the stream as parsed chunks ({len(chunks)} dicts)", parsed_med, parsed95,
                  f"{parsed_med / stream_med:.2f}× the whole stream")]
        guard.live.take()

    header = ("row", "median µs", "p95 µs", "note")
    table = [header] + [(name, f"{m:.1f}", f"{p:.1f}", note) for name, m, p, note in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for i, row in enumerate(table):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    en_checks = rows[1][1]
    print(f"\ngoal: the guard's checks on a 300-token reply at most 100 µs median: {en_checks:.0f} µs (en), "
          f"{rows[6][1]:.0f} µs (pt): {'met' if max(en_checks, rows[6][1]) <= 100 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
