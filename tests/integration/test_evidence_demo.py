"""``canary evidence`` on a demo suspension: the bundle, rerun through ``canary check``, gives exactly
the verdicts the judge used."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.services.prober.evidence import probe_verdict
from reverie_canary.shared.contract.events import Decision, ProbeResult
from reverie_canary.shared.runtime.eventlog import read_log
from reverie_canary.shared.runtime.service import nats_connect

pytestmark = pytest.mark.integration


def _env(settings) -> dict[str, str]:
    """The operator's environment for the CLI against the running demo."""
    return {**settings.environment(with_secrets=True), "CANARY_CONFIG": ""}


def _cli(args: list[str], env: dict[str, str]):
    return CliRunner().invoke(app, args, env=env)


async def test_a_suspensions_bundle_reruns_to_the_verdicts_the_judge_used(tmp_path, default_demo):
    """Every probe a demo suspension rests on: rerun by ``canary check``, each try and each probe as logged."""
    p = default_demo.p  # the default demo the reading modules share (tests/demo_run.py)
    assert await default_demo.run(p.wait_cycles(2))
    operator = p.settings_for("operator")
    nc = await nats_connect(p.settings)
    try:
        log = [e.event for e in await read_log(nc.jetstream())]
    finally:
        await nc.close()
    suspends = [e for e in log if isinstance(e, Decision) and e.action == "suspend"]
    assert suspends, "the default demo suspends its broken providers at cycle 2"
    env = _env(operator)
    bundles = {}
    for decision in suspends:
        out = tmp_path / f"{decision.provider.replace('/', '_')}.jsonl"
        written = await asyncio.to_thread(_cli, ["evidence", decision.decision_id, "--out", str(out)], env)
        assert written.exit_code == 0, written.output
        bundles[decision.decision_id] = out
    narrow = min(suspends, key=lambda d: len(d.evidence))  # baseten: its structured probe only
    by_cycle = await asyncio.to_thread(
        _cli, ["evidence", "--provider", narrow.provider, "--cycle", narrow.cycles[-1]], env)
    missing = await asyncio.to_thread(_cli, ["evidence", "no-such-decision"], env)

    results = {e.task_id: e for e in log if isinstance(e, ProbeResult)}
    for decision in suspends:
        checked = await asyncio.to_thread(_cli, ["check", str(bundles[decision.decision_id])], {})
        assert checked.exit_code == 0, checked.output
        verdicts = [json.loads(line) for line in checked.stdout.splitlines() if line.strip()]
        cases = [json.loads(line) for line in Path(bundles[decision.decision_id]).read_text().splitlines()]
        assert len(verdicts) == len(cases) > 0
        assert all(v["ok"] for v in verdicts), [v for v in verdicts if not v["ok"]]
        tries: dict[str, list[tuple[str, str]]] = {}
        for case, verdict in zip(cases, verdicts, strict=False):
            probe = case["meta"]["probe"]
            tries.setdefault(probe["task_id"], []).append((verdict["outcome"], verdict["reason"]))
            # check by check, as the prober's checks said it
            assert [[c["check"], c["outcome"], c["reason"]] for c in verdict["checks"]] == probe["checks"]
            assert probe["checks_version"] and probe["quantization"] and probe["generation_id"]
        # the verdicts the judge used: the decision's evidence, probe by probe
        used = {ref.task_id: (ref.outcome, ref.reason) for ref in decision.evidence}
        assert used and set(tries) == set(used)
        assert {task: probe_verdict(t) for task, t in tries.items()} == used
        assert all((results[task].outcome, results[task].reason) == used[task] for task in used)
    assert by_cycle.exit_code == 0, by_cycle.output
    listed = {json.loads(line)["meta"]["probe"]["task_id"] for line in by_cycle.stdout.splitlines() if line.strip()}
    # --provider --cycle: every probe of that cycle, more than the failing ones the decision rests on
    assert len(listed) > len({r.task_id for r in narrow.evidence if r.cycle == narrow.cycles[-1]})
    assert missing.exit_code == 1 and "no decision 'no-such-decision'" in missing.output
