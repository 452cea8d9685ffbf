"""``canary probe``: send live probes pinned to one provider and print the verdicts.

"Can we isolate the endpoint and reproduce the failure?" in one command: the
same request, checks and pin verification the prober uses, against the real
gateway (``OPENROUTER_BASE_URL``, ``OPENROUTER_API_KEY``) or, with
``--simulate SCENARIO``, against a simulated gateway started in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import Counter
from datetime import timedelta
from typing import Annotated, Any

import typer

from reverie_canary.canary.cli import _settings, app
from reverie_canary.shared.contract.events import KIND_VARIANTS, PROBE_KINDS, ProbeResult, ProbeTask, variants_of
from reverie_canary.shared.runtime.logging import scrub


def _describe(n: int, result: ProbeResult) -> str:
    reply = result.reply
    ttft = f"{reply.ttft_ms:.0f} ms" if reply.ttft_ms is not None else "-"
    variant = f"[{result.variant}] " if result.variant else ""
    head = (f"#{n} {variant}{result.outcome.upper():<15} {result.reason or '':<22} ttft {ttft:<8} "
            f"status {reply.http_status} finish {reply.finish_reason} served_by {reply.served_by}")
    lines = [head]
    if reply.generation_id:
        lines.append(f"   generation {reply.generation_id}")
    if reply.first_bytes:
        lines.append(f"   first bytes: {reply.first_bytes[:120]!r}")
    for check in result.checks:
        if check.outcome != "pass":
            evidence = json.dumps(check.evidence, ensure_ascii=False, default=str)[:300]
            lines.append(f"   {check.check}: {check.outcome} {check.reason} {evidence}")
    for i, attempt in enumerate(result.attempts, 1):
        lines.append(f"   try {i}: {attempt.outcome} {attempt.reason} {attempt.reply.first_bytes[:60]!r}")
    from reverie_canary.shared.runtime.printable import printable

    return printable("\n".join(lines), newlines=True)  # a provider's text and headers: no control character raw


async def _run(settings, provider: str, kind: str, language: str, repeat: int, model: str,
               as_json: bool, variant: str = "") -> int:
    from reverie_canary.services.discovery.core import same_names
    from reverie_canary.services.prober.service import Prober
    from reverie_canary.shared.runtime import clock
    from reverie_canary.shared.runtime.openrouter import list_endpoints, make_client

    async with make_client(settings, timeout_s=30.0) as listing:
        endpoints = await list_endpoints(listing, model)
    by_tag = {e.provider: e for e in endpoints}
    if provider not in by_tag:
        typer.echo(f"error: {provider!r} is not an endpoint of {model}; endpoints: {', '.join(sorted(by_tag))}",
                   err=True)
        return 2
    endpoint = by_tag[provider]
    # the variants a cycle would plan for this endpoint (the tool probe's four where it lists tools and
    # tool_choice; one task, answered not_applicable, where it does not), or the one asked for
    variants = [variant] if variant else list(variants_of(kind, endpoint.supported_parameters))
    prober = Prober(settings, make_client(settings))
    outcomes: Counter[str] = Counter()
    try:
        for n in range(1, repeat + 1):
            for v in variants:
                now = clock.now()
                task = ProbeTask(at=now, task_id=f"cli|{model}|{provider}|{kind}|{language}|{n}" + (f"|{v}" if v else ""),
                                 model=model, provider=provider, provider_name=endpoint.provider_name,
                                 kind=kind, language=language, cycle="cli",  # type: ignore[arg-type]
                                 deadline=now + timedelta(minutes=10),
                                 supported_parameters=list(endpoint.supported_parameters),
                                 max_completion_tokens=endpoint.max_completion_tokens,
                                 same_name=same_names(endpoints).get(provider, []), variant=v)
                result = await prober.probe(task)
                what = f"{result.outcome}:{result.reason}" if result.reason else result.outcome
                outcomes[f"{v} {what}" if v else what] += 1
                if as_json:
                    import msgspec

                    print(json.dumps(msgspec.to_builtins(result), ensure_ascii=False), flush=True)
                else:
                    print(_describe(n, result), flush=True)
    finally:
        await prober.client.aclose()  # type: ignore[union-attr]
    summary = ", ".join(f"{count}x {what}" for what, count in outcomes.most_common())
    passed = sum(count for what, count in outcomes.items() if what.rsplit(" ", 1)[-1] == "pass")
    total = repeat * len(variants)
    if not as_json:
        print(f"\n{provider} / {kind} / {language}: {summary}")
    if passed < total:
        print(f"{total - passed} of {total} probe(s) did not pass", file=sys.stderr, flush=True)
        return 1
    return 0


@app.command()
def probe(
    provider: Annotated[str, typer.Option("--provider", help="endpoint tag to pin, e.g. deepinfra/fp8")],
    kind: Annotated[str, typer.Option("--kind", help=f"probe kind: {', '.join(PROBE_KINDS)}")],
    language: Annotated[str, typer.Option("--language", help="ISO 639-1 code of the request")] = "en",
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="how many probes, one after another")] = 1,
    model: Annotated[str | None, typer.Option(help="model id (default: the first configured)")] = None,
    simulate: Annotated[str | None, typer.Option(help="start a simulated gateway with this scenario "
                                                         "('default', 'full' or a TOML file)")] = None,
    ttft_threshold_s: Annotated[float | None, typer.Option(help="latency bar in s (default: CANARY_TTFT_THRESHOLD_S, else 10)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON ProbeResult per line")] = False,
    variant: Annotated[str, typer.Option(help="the tool probe's variant (call, call_stream, no_tool, second_turn); "
                                              "default: each that a cycle plans")] = "",
) -> None:
    """Send live probes pinned to one provider (fallbacks off) and print verdicts and evidence.

    A kind with variants (``tools``) sends each variant a cycle would plan for the endpoint
    (all four where it lists ``tools`` and ``tool_choice``), ``--repeat`` times, or only ``--variant``.

    Exit status: 0 when every probe passed, 1 when one did not (fail, inconclusive,
    transport error, not applicable) or the gateway could not be reached, 2 for bad input.
    """
    from reverie_canary.services.prober.prompts import LANGUAGE_NAMES

    if kind not in PROBE_KINDS:
        typer.echo(f"error: unknown kind {kind!r}; one of {', '.join(PROBE_KINDS)}", err=True)
        raise typer.Exit(2)
    if variant and variant not in KIND_VARIANTS.get(kind, ()):
        known = ", ".join(KIND_VARIANTS.get(kind, ())) or f"none: {kind} has no variants"
        typer.echo(f"error: unknown variant {variant!r} of {kind}; {known}", err=True)
        raise typer.Exit(2)
    if language not in LANGUAGE_NAMES:
        typer.echo(f"error: unknown language {language!r}; one of {', '.join(LANGUAGE_NAMES)}", err=True)
        raise typer.Exit(2)
    overrides: dict[str, Any] = {}
    if ttft_threshold_s is not None:
        overrides["ttft_threshold_s"] = ttft_threshold_s
    settings = _settings(**overrides)

    async def main() -> int:
        if simulate is None:
            return await _run(settings, provider, kind, language, repeat, model or settings.models[0], as_json,
                              variant)
        from reverie_canary.simulator import SIMULATED_KEY
        from reverie_canary.simulator.gateway import create_app
        from reverie_canary.simulator.scenario import load_scenario
        from reverie_canary.simulator.server import serve

        scenario = load_scenario(simulate)
        async with serve(create_app(scenario)) as url:
            sim = settings.replace(openrouter_base_url=url, openrouter_api_key=SIMULATED_KEY)
            if ttft_threshold_s is None:
                sim = sim.replace(ttft_threshold_s=1.0, request_timeout_s=10.0)
                if not as_json:
                    print(f"simulated gateway at {url} (scenario {simulate}); time-to-first-token bar 1.0 s, "
                          "as in the demo")
            return await _run(sim, provider, kind, language, repeat, model or scenario.models[0].id, as_json,
                              variant)

    try:
        code = asyncio.run(main())
    except Exception as exc:  # network trouble etc.: say what, no traceback
        with contextlib.suppress(Exception):
            typer.echo(f"error: {type(exc).__name__}: {scrub(str(exc))}", err=True)
        raise typer.Exit(1) from exc
    raise typer.Exit(code)
