"""Eight hostile providers beside eight healthy ones for ten cycles, on real processes.

The gateway and the prober run in processes of their own (``tests/hostile_fleet.py``),
discovery and the judge here, on a real NATS and Redis.  What must hold whatever
the machine's load: the prober's memory stays bounded, every hostile provider is
probed every cycle and every result it gets is published by its task's deadline
with a defined outcome, every hostile kind is caught for what it is, no result
comes near NATS's ``max_payload``, and no healthy provider is ever failed.  How
close the healthy providers' times to first token come to the injected delays,
and the share of tasks probed before their deadline, are figures of
``benchmarks/hostile_bench.py`` (measured, not asserted: docs/development.md, "Speed
is measured in benchmarks").
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.hostile_fleet import run_fleet

pytestmark = [pytest.mark.integration, pytest.mark.drill]

CYCLES = 10
#: Far below NATS's 1 MiB max_payload, whatever a reply's size (a 20 MB reply included).
#: A result keeps the reply as the prober assembled it for evidence bundles: at most 8,192 characters of
#: text and 2,048 of reasoning (JSON-escaped junk up to 6 bytes each), whatever the reply's size.
RESULT_MAX_BYTES = 64 * 1024
#: The prober's peak RSS (``VmHWM``, MB).  Measured (10 cycles, 96 in flight): about 221 MB once the
#: checks are warm, 314-316 MB at the peak.  Most of the rise is non-stream bodies: a body is held whole
#: until ``response_max_bytes`` (8 MiB), and two endpoints answer 20 MB bodies; the tool probe (four
#: variants a task, ``call`` unstreamed) raised the cycle from 82 to 146 tasks and the bodies read at
#: once with it, so the peak went from 284 MB to 323 MB (316 since a cut body is not joined into a
#: second copy: services/prober/http.py).  The bound leaves about 25 MB above what was measured.
RSS_MAX_MB = 340.0
#: The reason that names each hostile kind (some probes of a kind may end otherwise under load:
#: a task whose deadline came first is transport_error / task_deadline, never a quality failure).
CAUGHT_AS = {
    "keepalive_forever": {"ttft_exceeded"},
    "silent_after_headers": {"ttft_exceeded"},
    # a block of prose repeated without end: the repeat ranks above the size it reaches (checks/__init__)
    "tokens_forever": {"reply_too_large", "repetition", "duplicated_text"},
    "html_200": {"body_parse"},
    "bad_utf8": {"encoding_broken"},
    "huge_reply": {"reply_too_large", "response_too_large"},
}
#: Hostile kinds whose content is fine: judged by it, so they may pass (no_done: a finished stream held open).
MAY_PASS = {"no_done"}
#: Hostile kinds the simulated gateway plays on a stream only: the tool probe's one unstreamed variant
#: (``call``) gets an answer of the healthy kind and rightly passes them.
STREAM_ONLY = {"tokens_forever"}
#: Hostile kinds that damage a reply's text: the tool probe's call variants are answered with a tool call and
#: no text, and rightly pass them.
TEXT_ONLY = {"bad_utf8"}
TOOL_CALL_VARIANTS = {"call", "call_stream"}


async def test_a_hostile_gateway_holds_no_probe_past_its_deadline_and_no_memory(infra):
    """10 cycles: RSS < 340 MB, every hostile provider probed each cycle, each result by its deadline, each kind caught."""
    run = await run_fleet(nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                          cycles=CYCLES, cycle_s=4.0)
    counted = set(run.cycles(CYCLES))
    assert len(counted) == CYCLES

    assert run.prober_peak_rss_mb < RSS_MAX_MB, run.prober_peak_rss_mb
    assert run.results and max(o.size for o in run.results) <= RESULT_MAX_BYTES

    answered = {o.result.task_id for o in run.results}
    hostile_tasks = [t for t, p in run.task_provider.items() if p in run.hostile and run.task_cycle[t] in counted]
    # every hostile provider is probed every cycle (a task the prober reaches too late is dropped
    # unprobed: a capacity figure of benchmarks/hostile_bench.py, not a bound of one probe)
    for cycle in counted:
        probed = {run.task_provider[t] for t in hostile_tasks if t in answered and run.task_cycle[t] == cycle}
        assert probed == set(run.hostile), (cycle, set(run.hostile) - probed)
    reasons: dict[str, set[str]] = defaultdict(set)
    for obs in run.results:
        r = obs.result
        if r.cycle not in counted:
            continue
        assert obs.deadline is not None and r.at <= obs.deadline, (r.task_id, r.at, obs.deadline)
        kind = run.hostile.get(r.provider)
        if kind is None:
            assert r.outcome != "fail", (r.provider, r.kind, r.reason)  # a healthy provider is never failed
            continue
        reasons[kind].add(r.reason)
        if kind not in MAY_PASS and not (kind in STREAM_ONLY and r.variant == "call") \
                and not (kind in TEXT_ONLY and r.variant in TOOL_CALL_VARIANTS):
            assert r.outcome != "pass", (r.provider, r.kind, r.variant)
    for kind, expected in CAUGHT_AS.items():
        assert reasons[kind] & expected, (kind, reasons[kind])
    assert set(reasons) == set(run.hostile.values())

    for verdict in run.verdicts:
        if verdict.cycle in counted:
            for pv in verdict.verdicts:
                if pv.provider in run.injected_ms:
                    assert pv.verdict != "failed", (verdict.cycle, pv)
