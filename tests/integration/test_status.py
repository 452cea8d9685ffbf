"""``canary status`` (and the ``--json`` forms of explain and override list) against a running demo.

The demo runs with two probers, as ``canary demo --probers 2`` (the default demo the
reading modules share, ``tests/demo_run.py``); the operator's
commands run with the environment ``canary demo --keep`` writes, as an
operator would run them in another terminal.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.canary.demo import write_env_files
from reverie_canary.services.judge.replay import read_log
from reverie_canary.shared.contract.events import ProbeResult
from reverie_canary.shared.runtime.service import nats_connect
from tests.integration.test_demo_keep import read_env

pytestmark = pytest.mark.integration

SLOW, BROKEN = "lambda/fp8", "baseten/fp8"


def run_cli(env: dict[str, str], *args: str):
    return CliRunner().invoke(app, list(args), env=env)


async def cli(env: dict[str, str], *args: str, timeout_s: float = 60.0):
    """Run one canary command in a thread, as an operator would in another terminal; bounded."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(run_cli, env, *args), timeout=timeout_s)
    except TimeoutError:
        raise AssertionError(f"canary {' '.join(args)} did not end within {timeout_s:g} s") from None


async def routed(p, timeout_s: float = 5.0) -> bool:
    """Wait (bounded) until the demo saw the verdict of the judge's last closed cycle and the router applied
    every enforced suspension the judge holds (the judge saves its state before it publishes)."""
    deadline = time.monotonic() + timeout_s
    while True:
        record = await p.judge_record()
        summary = await p.summary()
        held = {n for n, ps in record.state.providers.items() if ps.suspension is not None and ps.suspension.enforced}
        seen = p.observer.cycle_ids[-1][0] if p.observer.cycle_ids else None
        # the reviewed exclusions' entries (the refusal control) are no suspensions the judge holds
        if held == set(summary["ignore"]) - set(summary["excluded"]) and record.state.closed and record.state.closed[-1] == seen:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.1)


async def consistent_reads(p, env, attempts: int = 4):
    """The demo's summary and ``canary status --json`` read between the same two cycle closes (bounded retries)."""
    for _ in range(attempts):
        assert await routed(p), "the router did not apply the judge's suspensions within 5 s"
        before = len(p.observer.cycles)
        summary = await p.summary()
        result = await cli(env, "status", "--json")
        if len(p.observer.cycles) == before and await routed(p, 0.0):
            return summary, result
    raise AssertionError(f"a cycle closed during each of {attempts} reads")


async def interrupt_watch(env: dict[str, str]) -> tuple[int | None, str, str]:
    """Start ``canary status --watch`` as a process, Ctrl-C it after its first table; (exit status, out, err)."""
    import os
    import signal
    import subprocess
    import sys

    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "reverie_canary.canary", "status", "--watch",
                                                env={**os.environ, **env}, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
    first = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
    proc.send_signal(signal.SIGINT)
    rest, err = await asyncio.wait_for(proc.communicate(), timeout=10)
    return proc.returncode, (first + rest).decode(), err.decode()


async def test_status_agrees_with_the_demo_summary_and_the_probers_split_the_cycles(tmp_path, default_demo):
    """status --json names every provider with the summary's state, streaks and ladder; two probers shared the work."""
    # the default demo the reading modules share (tests/demo_run.py), as ``canary demo --probers 2`` runs it;
    # everything that reads it runs on its loop
    assert default_demo.kwargs["probers"] == 2
    p = default_demo.p

    async def read_the_demo():
        for n in range(3, 9):  # on a loaded machine a cycle can lose its probes: wait for both suspensions
            assert await p.wait_cycles(n)
            if await routed(p) and {SLOW, BROKEN} <= set((await p.summary())["ignore"]):
                break
        env = read_env(write_env_files(p, tmp_path)["operator"])
        summary, status = await consistent_reads(p, env)
        table = await cli(env, "status")
        watched = await cli(env, "status", "--watch", "--json", "--count", "2", "--interval", "8")
        interrupted = await interrupt_watch(env)
        explained = await cli(env, "explain", SLOW, "--json")
        listed = await cli(env, "override", "list", "--json")
        alt, bad = tmp_path / "alt.toml", tmp_path / "bad.toml"
        alt.write_text("failed_cycles_to_suspend = 4\n")
        bad.write_text('failed_cycles_to_suspend = "four"\n')
        backtested = await cli(env, "replay", "--config", str(alt))
        refused = await cli(env, "replay", "--config", str(bad))
        nc = await nats_connect(p.settings)
        try:
            logged = await read_log(nc.jetstream(), judge_only=False)
        finally:
            await nc.close()
        return summary, status, table, watched, interrupted, explained, listed, alt, backtested, refused, logged

    (summary, status, table, watched, interrupted, explained, listed, alt, backtested, refused,
     logged) = await default_demo.run(read_the_demo(), timeout_s=300)
    assert status.exit_code == 0, status.output
    fleet = json.loads(status.stdout)
    (model,) = fleet["models"]
    rows = {row["provider"]: row for row in model["providers"]}
    assert set(rows) == set(summary["providers"])
    for provider, info in summary["providers"].items():
        row = rows[provider]
        assert (row["state"] == "suspended") is info["suspended"], (provider, row["state"], info)
        if not info["suspended"]:
            assert row["state"] == "active", (provider, row)
        assert row["ignored"] is info["suspended"]
        assert (row["failed_streak"], row["passed_streak"], row["frozen_streak"], row["ladder_step"]) == (
            info["failed_streak"], info["passed_streak"], info["frozen_streak"], info["ladder_level"]), provider
        assert row["last_verdict"] == info["verdicts"][-1], (provider, row["last_cycle_no"], row["last_reasons"], info, [(c["cycle_no"]) for c in summary["probes"]])
    assert {SLOW, BROKEN} <= {p for p, i in summary["providers"].items() if i["suspended"]}
    assert model["ignore_list"]["ignored"] == summary["ignore"]
    assert model["ignore_list"]["version"] == summary["snapshot_version"]
    # every probe kind enforced but the new ones (tools; template, a fact kind): they observe until switched
    new_kinds = {k: model["modes"].pop(k) for k in ("tools", "template") if k in model["modes"]}
    assert set(new_kinds.values()) == {"observe"} and set(model["modes"].values()) == {"enforce"}, model["modes"]
    assert model["health"]["state"] == "sees"
    assert model["last_cycle_no"] is not None and model["last_cycle_age_s"] < 3 * p.settings.cycle_interval_s
    by_kind = {r["kind"]: r for r in rows[SLOW]["results"]}
    assert by_kind["ttft"]["outcome"] == "fail" and by_kind["ttft"]["reasons"] == ["ttft_exceeded"]
    assert {r["kind"]: r["outcome"] for r in rows[BROKEN]["results"]}["structured"] == "fail"
    # the simulator lists every endpoint's price: the canary's spend is all priced
    spend = model["spend"]["total"]
    assert spend["tokens"] > 0 and spend["usd"] > 0 and spend["unpriced_tokens"] == 0

    # the rich table: one row per provider, the header with the mode and the ignore list
    assert table.exit_code == 0, table.output
    assert "modes: enforce for ttft, " in table.stdout and "; observe for tools, template" in table.stdout, table.stdout
    assert f"ignore list v{summary['snapshot_version']}" in table.stdout
    for provider in summary["providers"]:
        assert provider in table.stdout

    # --watch: a new print on the next cycle, bounded by --count; Ctrl-C ends it at once, exit 0, no traceback
    assert watched.exit_code == 0, watched.output
    first, second = (json.loads(line) for line in watched.stdout.splitlines())
    assert second["at"] > first["at"]
    code, out, err = interrupted
    assert code == 0 and "ignore list v" in out and "Traceback" not in err, (code, err)

    assert explained.exit_code == 0, explained.output
    detail = json.loads(explained.stdout)
    assert detail["status"]["state"] == "suspended" and detail["status"]["provider"] == SLOW
    assert [(d["action"], d["mode"]) for d in detail["decisions"] if d["action"] == "suspend"] == [
        ("suspend", "enforce")]
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout)["models"][0]["ignored"] == summary["ignore"]

    # the backtest under the demo's environment: "other" is the file on the defaults, every difference named
    assert backtested.exit_code == 0, backtested.output
    lines = backtested.stdout.splitlines()
    assert any(line.split()[:1] == ["failed_cycles_to_suspend"] and "current 2 (environment "
               "CANARY_FAILED_CYCLES_TO_SUSPEND)" in line and f"other 4 (file {alt})" in line for line in lines)
    assert any(line.split()[:1] == ["ladder_s"] and "(environment CANARY_LADDER_S)" in line and "(default)" in line
               for line in lines), backtested.stdout
    assert refused.exit_code == 2 and "$.failed_cycles_to_suspend" in refused.stderr

    # two probers: per cycle, each one's count, adding up to the results the log holds for that cycle
    in_log = Counter(e.event.cycle for e in logged if isinstance(e.event, ProbeResult))
    cycles = summary["probes"]
    assert [c["cycle"] for c in cycles] == list(range(1, len(cycles) + 1)) and len(cycles) >= 3
    for c in cycles:
        assert sum(c["by_prober"].values()) == c["probes"]
    shared = [c for c in cycles if len(c["by_prober"]) == 2 and min(c["by_prober"].values()) > 0]
    assert shared, cycles
    probers = {prober for c in cycles for prober in c["by_prober"]}
    assert len(probers) == 2
    verdict_cycles = {e.event.cycle_no: e.event.cycle for e in logged if type(e.event).__name__ == "CycleVerdict"}
    for c in cycles[:-1]:  # the last cycle's late results may still be arriving
        assert c["probes"] == in_log[verdict_cycles[c["cycle_no"]]], c


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def status_in_a_terminal(env: dict[str, str], cols: int, *args: str, rows: int = 60,
                         timeout_s: float = 60.0) -> tuple[int, list[str], str]:
    """Run ``canary status`` with its standard output on a pseudo-terminal of ``cols`` x ``rows`` (TIOCSWINSZ), its
    standard error on a pipe; (exit status, the terminal's lines without colour codes, standard error). Bounded."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import subprocess
    import sys
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    clean = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "reverie_canary.canary", "status", *args], stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=subprocess.PIPE, env={**clean, **env, "TERM": "xterm-256color"})
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        else:
            raise AssertionError(f"canary status did not end within {timeout_s:g} s")
        code = proc.wait(timeout=10)
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        proc.stderr.close()
    text = ANSI.sub("", out.decode("utf-8", "replace")).replace("\r\n", "\n")
    return code, text.splitlines(), err


async def test_status_is_readable_in_80_and_100_columns_and_logs_nothing_on_stdout(tmp_path, default_demo):
    """In a terminal of 80 and of 100 columns: no line wider, no cell cut to '…', every provider with its state, the
    suspended ones' failing kind named; the model comes first (no log line on standard output); --wide every kind."""
    p = default_demo.p

    async def read_it():
        for n in range(3, 9):
            assert await p.wait_cycles(n)
            if await routed(p) and {SLOW, BROKEN} <= set((await p.summary())["ignore"]):
                break
        env = read_env(write_env_files(p, tmp_path)["operator"])
        shown = {}
        for cols in (80, 100):
            shown[cols] = await asyncio.to_thread(status_in_a_terminal, env, cols)
        shown["wide"] = await asyncio.to_thread(status_in_a_terminal, env, 100, "--wide")
        return await p.summary(), shown

    summary, shown = await default_demo.run(read_it(), timeout_s=300)
    for cols in (80, 100):
        code, lines, err = shown[cols]
        assert code == 0, err
        assert lines[0].startswith(p.settings.models[0]), lines[:3]
        assert all(len(line.rstrip()) <= cols for line in lines), "\n".join(lines)
        assert not any("…" in line for line in lines), "\n".join(lines)
        table = [line for line in lines if "│" in line]
        for provider, info in summary["providers"].items():
            [row] = [line for line in table if line.split("│")[0].strip() == provider]
            state = row.split("│")[1].strip()
            assert state.startswith("suspended" if info["suspended"] else "active"), (cols, row)
        for provider, kind in ((SLOW, "ttft"), (BROKEN, "structured")):
            [row] = [line for line in table if line.split("│")[0].strip() == provider]
            assert f"{kind} FAIL" in row, (cols, row)
    code, lines, err = shown["wide"]
    assert code == 0, err
    header = next(line for line in lines if line.startswith("provider"))
    assert all(kind in header for kind in ("ttft", "refusal", "structured", "language", "echo")), header
