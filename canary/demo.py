"""``canary demo``: the whole system on one machine, with time compressed.

Starts an embedded NATS (JetStream) and Redis on free ports in a temporary
directory, the simulated OpenRouter gateway with a fleet of providers, and all
five services; prints each cycle's verdicts, every decision and every change of
the ignore list as they happen; stops after ``--cycles`` cycles (or Ctrl-C)
and removes what it started.  With ``--json`` the progress goes to stderr and
one JSON summary to stdout.  ``--gateway-fault`` makes the simulated gateway
refuse the canary's key (``auth:N`` 401, ``credit:N`` 402, ``forbidden:N``
403) from the demo's cycle ``N`` on, or refuse connections (``down:N-M``), to
show the canary going blind and seeing again (:mod:`reverie_canary.simulator.faults`).

Beside the canary, a chat backend sends simulated users' chat requests through the
reply guard at a modest rate (:mod:`reverie_canary.canary.traffic`, ``--rpm``): unpinned,
with the canary's ignore list, retried once on a failing reply, its content-free live
counts published for discovery's confirmation probes.  The positive controls are kept
out of that traffic by the reviewed exclusions of ``config/demo-exclusions.toml`` (layer
1 of the ignore list), as production keeps them out.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import secrets
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

import msgspec
from nats.errors import Error as NatsError
from nats.js.errors import KeyNotFoundError
from redis.exceptions import RedisError

from reverie_canary.canary import embedded
from reverie_canary.canary.runtime import SERVICES, running
from reverie_canary.services.discovery.core import facts_lines, listing_facts
from reverie_canary.services.judge.core import ModelState
from reverie_canary.services.judge.store import JudgeRecord, RedisJudgeStore
from reverie_canary.shared.contract import codec, ids, subjects
from reverie_canary.shared.contract.errors import Undecodable
from reverie_canary.shared.contract.events import (
    CycleUnplanned,
    CycleVerdict,
    Decision,
    DroppedEndpoint,
    Endpoint,
    EndpointsDiscovered,
    Notice,
    ProbeResult,
    TimedDecision,
    degraded,
)
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot
from reverie_canary.shared.contract.timefmt import utc_text
from reverie_canary.shared.runtime import clock, metrics
from reverie_canary.shared.runtime.auth import (
    generate_passwords,
    generate_redis_passwords,
    redis_url_for,
    redis_url_without_credential,
    render_redis_acl,
    server_config,
    server_env,
)
from reverie_canary.shared.runtime.broker import drain_or_close
from reverie_canary.shared.runtime.logging import configure as configure_logging
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect, redis_client
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import ROUTING_BUCKET
from reverie_canary.simulator import SIMULATED_KEY

#: Time compression of the demo: one 30-minute cycle becomes CYCLE_S seconds (at least:
#: :func:`demo_cycle_s` gives a larger fleet more).
CYCLE_S = 4.0
REAL_CYCLE_S = 1800.0
SCALE = CYCLE_S / REAL_CYCLE_S
#: Seconds of a demo cycle per probe it plans: a simulated reply streams in pieces for about a
#: second, and one process runs the gateway, the five services and every stream; measured with
#: ``canary demo --scenario full`` (212 probes a cycle at the 5 language probes per provider
#: that the default coverage bound needs) on 2 shared cores.
PROBE_S = 0.06
#: Cycles ``canary demo`` runs unless told (``--cycles``).
DEFAULT_CYCLES = 5
#: The summary shows at most this many cycles' verdicts per provider.
SUMMARY_CYCLES = 30
#: The settings :func:`demo_cycle_s` reads (an override of them changes the demo's cycle).
COVERAGE_FIELDS = ("kinds", "languages", "language_coverage_cycles", "languages_per_cycle", "language_weights")
#: Latency cannot shrink as much as time (hundreds of times) on a loaded laptop: the bar is scaled
#: 10-fold, from the real one (the ``ttft_threshold_s`` default, :data:`REAL_TTFT_THRESHOLD_S`).
TTFT_THRESHOLD_S = 1.0
REAL_TTFT_THRESHOLD_S = 10.0


def compression_text(cycle_interval_s: float) -> str:
    """The banner's line on compressed time: one factor for the cycle and the suspensions, one for the latency bar.

    Args:
        cycle_interval_s: the demo's cycle (s), :func:`demo_cycle_s`.

    Returns:
        ``time is compressed: one 30-minute cycle takes 4.9 s (x367, ...)``: the factor by which time
        shrinks is computed once and said the same wherever it appears.
    """
    factor = REAL_CYCLE_S / cycle_interval_s
    return (f"time is compressed: one {REAL_CYCLE_S / 60:.0f}-minute cycle takes {cycle_interval_s:g} s "
            f"(x{factor:.0f}, {PROBE_S:g} s per probe planned, at least {CYCLE_S:g} s); suspensions scale the same "
            f"(1 day = {86400 / factor:.0f} s); the time-to-first-token bar is {TTFT_THRESHOLD_S:g} s "
            f"({REAL_TTFT_THRESHOLD_S:g} s scaled x{REAL_TTFT_THRESHOLD_S / TTFT_THRESHOLD_S:g}: latency cannot "
            f"shrink x{factor:.0f}).")
#: The demo's chat traffic through the reply guard (requests per minute, both scenarios): modest, so the
#: canary's probes keep the machine; enough that in the full scenario a provider whose replies are broken
#: gets live failures counted before two failed cycles take it out of traffic.
TRAFFIC_RPM = 120.0
#: Discovery's thresholds for a confirmation probe while the demo's traffic runs: the production defaults
#: (20 replies of a provider, 5 failures of a reason in the window) suit a backend's real volume; the
#: demo's few requests spread over a fleet of 30 hosts give each a handful before its suspension.
#: The share rule (median + k MAD over the providers with traffic) and the budget stay.
TRAFFIC_CONFIRM: dict[str, Any] = {"confirm_min_served": 3, "confirm_min_failures": 2}


def demo_exclusions_file() -> str:
    """The reviewed exclusions of the demo's fleets (``config/demo-exclusions.toml``), or ``""`` when absent.

    Looked up beside the package's sources (a clone, an editable install), then in the current
    directory (the image's ``/app``); an installed wheel without either runs without them
    (the banner says so).
    """
    for root in (Path(__file__).resolve().parents[1], Path.cwd()):
        path = root / "config" / "demo-exclusions.toml"
        if path.is_file():
            return str(path)
    return ""


def as_the_demo() -> dict[str, Any]:
    """The :func:`pipeline` arguments that make it run as ``canary demo`` does: the reviewed exclusions that
    keep the positive controls out of live traffic, and the chat traffic through the guard."""
    return {"demo_exclusions": True, "traffic_rpm": TRAFFIC_RPM}


def fleet_exclusions(text: str, tags: set[str]) -> str:
    """The entries of a reviewed-exclusions file (its text) whose provider is one of ``tags``, as a file's text.

    ``config/demo-exclusions.toml`` is reviewed once for every packaged fleet (the full one has five
    controls, the default one); each demo keeps the entries of the hosts its fleet lists, so a fleet's
    ignore list names no host it does not have.  The comments before the first entry are kept.
    """
    import tomllib

    head, *blocks = text.split("\n[[exclusion]]")
    kept = []
    for block in blocks:
        entry = tomllib.loads("[[exclusion]]" + block)["exclusion"][0]
        if entry.get("provider") in tags:
            kept.append("[[exclusion]]" + block.rstrip("\n") + "\n")
    return head.rstrip("\n") + "\n" + "".join("\n" + k for k in kept)


def demo_namespace() -> str:
    """The demo's key namespace in Redis: one per process."""
    return f"demo{os.getpid()}"


def demo_cycle_s(endpoints: int, controls: int, settings: Settings) -> float:
    """The demo's cycle in seconds: :data:`CYCLE_S`, or :data:`PROBE_S` per probe a cycle plans when more.

    ``endpoints`` counts the scenario's endpoints, ``controls`` the positive
    controls among them (one probe each); every other endpoint gets every kind,
    the language probe once per language of the coverage (:func:`reverie_canary.
    services.discovery.core.coverage`), a kind with variants once per variant
    (``KIND_VARIANTS``: the tool probe's four; every simulated endpoint lists tools).
    """
    from reverie_canary.services.discovery.core import coverage
    from reverie_canary.shared.contract.events import KIND_VARIANTS

    kinds = list(settings.kinds)
    per_endpoint = sum(len(KIND_VARIANTS.get(kind, ("",))) for kind in kinds)
    if "language" in kinds:
        cov = coverage(len(settings.languages), settings.language_coverage_cycles, settings.languages_per_cycle,
                       weighted=any(w > 0 for w in settings.language_weights.values()))
        per_endpoint += cov.per_cycle - 1
    probes = (endpoints - controls) * per_endpoint + controls
    return max(CYCLE_S, round(probes * PROBE_S, 1))


def demo_settings(base: Settings, *, nats_url: str, redis_url: str, gateway_url: str, model: str,
                  controls: dict[str, str], cycle_s: float = CYCLE_S) -> Settings:
    """Settings of the demo: compressed time (one cycle in ``cycle_s``), enforce mode, embedded servers."""
    scale = cycle_s / REAL_CYCLE_S
    return base.replace(
        nats_url=nats_url,
        nats_user="",
        nats_password="",
        redis_url=redis_url,
        openrouter_base_url=gateway_url,
        openrouter_api_key=SIMULATED_KEY,  # the simulated gateway refuses chat completions without a key
        models=[model],
        namespace=demo_namespace(),
        cycle_interval_s=cycle_s,
        time_scale=REAL_CYCLE_S / cycle_s,
        probe_window_s=cycle_s * 0.8,
        ttft_threshold_s=TTFT_THRESHOLD_S,
        request_timeout_s=cycle_s * 0.65,
        ladder_s=[x * scale for x in (86400.0, 3 * 86400.0, 7 * 86400.0)],
        ladder_reset_s=14 * 86400.0 * scale,
        mode="enforce",
        controls=controls,
        prober_concurrency=64,
        duplicate_window_s=120.0,
        exclusions_file="",
        log_level="WARNING",
        # the operator's own channels never get demo notices: only the demo's receiver (Pipeline)
        webhook_url="",
        webhook_secret="",
        notify_urls={},
        notify_severity={},
        notify_secrets={},
        notify_remind_s=6 * 3600.0 * scale,
        notify_retry_base_s=0.05,
        notify_retry_max_s=1.0,
        notify_give_up_s=86400.0 * scale,
        notify_timeout_s=2.0,
        notify_poll_s=0.25,
        metrics_host="127.0.0.1",
        metrics_ports=dict.fromkeys(SERVICES, 0),  # free ports: the demo prints where they are
    )


def notice_receiver(secret: str, on_notice):
    """The demo's webhook receiver: verify each POST's Standard Webhooks signature, hand the notice on.

    Answers 401 to a request whose signature does not verify (it is not recorded).
    """
    from standardwebhooks import Webhook, WebhookVerificationError
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    verifier = Webhook(secret)
    decoder = msgspec.json.Decoder(Notice)

    async def hook(request) -> Response:
        body = await request.body()
        try:
            data = verifier.verify(body, dict(request.headers))
        except (WebhookVerificationError, ValueError):
            return Response(status_code=401)
        await on_notice(decoder.decode(msgspec.json.encode({**data["data"], "notice_id": data["data"]["id"]})))
        return Response(status_code=204)

    return Starlette(routes=[Route("/notices", hook, methods=["POST"])])


class Observer:
    """Follows verdicts, decisions and snapshots on the bus and prints them.

    It also counts each cycle's planned probes and the results each prober
    published (``ProbeResult.prober``), and prints the split per cycle when
    more than one prober shares the work queue.
    """

    def __init__(self, out: TextIO, model: str, probers: int = 1) -> None:
        self.out = out
        self.model = model
        self.probers = probers
        self.planned: dict[str, dict[int, int]] = {}  # cycle id -> listing part -> planned probes
        self.results: dict[str, dict[str, str]] = {}  # cycle id -> task id -> prober id
        self.cycle_ids: list[tuple[str, int]] = []  # (cycle id, cycle no) of the closed cycles, in order
        self.verdicts: dict[str, list[str]] = {}
        self.cycles: list[int] = []
        self.decisions: list[Decision] = []
        self.snapshot: IgnoreSnapshot | None = None
        self.closed = asyncio.Event()
        self.first_cycle_at: float | None = None
        self.cycle_times: list[float] = []
        self.notices: list[Notice] = []
        self.cycle_nos: set[int] = set()
        self.first_seen = asyncio.Event()  # the first cycle of the demo has a number (for --gateway-fault)
        self.unplanned: dict[int, CycleUnplanned] = {}
        #: cycle id -> (its listing's endpoints by tag, the entries dropped, how many more were dropped)
        self.listings: dict[str, tuple[dict[str, Endpoint], list[DroppedEndpoint], int]] = {}
        self.said_facts: list[str] = []  # the listing facts printed last (printed again only when they change)
        self.lost_at: float | None = None  # when the demo's own connection to NATS was lost (None: connected)
        self.closing = False  # the demo closes its connection: that is no outage

    async def on_disconnected(self) -> None:
        """nats-py's callback: the demo's connection to NATS is lost; said once, however long it lasts."""
        if self.lost_at is None and not self.closing:
            self.lost_at = time.monotonic()
            self.print("   !! the connection to NATS was lost: waiting for it to come back (the services "
                       "reconnect on their own; cycles that close meanwhile are not shown)")

    async def on_reconnected(self) -> None:
        """nats-py's callback: NATS is back; said once, with how long it was gone."""
        if self.lost_at is not None:
            self.print(f"   !! NATS is back after {time.monotonic() - self.lost_at:.1f} s: following the cycles again")
            self.lost_at = None

    def on_traffic(self, traffic: Any) -> None:
        """The demo's chat users start (the backend's client has its first ignore list)."""
        ignored = traffic.client.ignore()
        self.print(f"   >> chat traffic: {traffic.rpm:g} requests/min, unpinned, through the reply guard; "
                   f"provider.ignore {json.dumps(ignored)}")

    async def first_cycle_no(self) -> int:
        """The cycle number (``epoch // interval``) of the demo's cycle 1, once discovery said it."""
        await self.first_seen.wait()
        return min(self.cycle_nos)

    def print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    async def on_notice(self, notice: Notice) -> None:
        """A notice the demo's receiver got (signature verified)."""
        from reverie_canary.services.notifier.core import label

        if any(n.notice_id == notice.notice_id for n in self.notices):
            return
        self.notices.append(notice)
        who = notice.provider or notice.model
        self.print(f"   >> notice [{notice.severity}] {label(notice)} {who}: {notice.title}")

    def notice_entries(self, interval_s: float) -> list[dict[str, Any]]:
        """``{cycle, severity, action, provider}`` per notice; cycle 1 is the demo's first cycle."""
        from reverie_canary.services.notifier.core import label

        first = min(self.cycle_nos | set(self.cycles), default=None)
        out = []
        for n in self.notices:
            number = ids.cycle_no(n.at.timestamp(), interval_s)
            out.append({"cycle": max(1, number - first + 1) if first is not None else None,
                        "severity": n.severity, "action": label(n), "provider": n.provider or None})
        return out

    async def on_verdict(self, msg) -> None:
        v: CycleVerdict = codec.VERDICT.decode(msg.data)
        self.cycle_nos.add(v.cycle_no)
        if v.cycle_no in self.cycles:
            return
        self.cycles.append(v.cycle_no)
        self.cycle_times.append(time.monotonic())
        n = len(self.cycles)
        extra = []
        if v.unproven:
            extra.append(f"unproven kinds: {', '.join(v.unproven)}")
        if v.common_mode:
            extra.append(f"common-mode frozen: {', '.join(v.common_mode)}")
        self.cycle_ids.append((v.cycle, v.cycle_no))
        gone = self.unplanned.get(v.cycle_no)
        if gone is not None:
            extra.append(f"not planned: {gone.cause}" + (f" (HTTP {gone.http_status})" if gone.http_status else ""))
        self.print(f"\n-- cycle {n} (#{v.cycle_no}) closed {utc_text(v.at, precision='clock')}"
                   + (f"  [{'; '.join(extra)}]" if extra else ""))
        endpoints, dropped, cut = self.listings.get(v.cycle, ({}, [], 0))
        facts = facts_lines(listing_facts(endpoints.values(), dropped, cut))
        if facts != self.said_facts:  # the listing's facts when they change, not every cycle
            for line in facts or ["listing: clean again (every entry read, none marked degraded, no provider name shared)"]:
                self.print(f"   .. {line}")
            self.said_facts = facts
        if self.probers > 1:
            split = self.split(v.cycle)
            counts = ", ".join(f"{prober} {count}" for prober, count in split["by_prober"].items()) or "none"
            self.print(f"   probes: {split['probes']} of {split['planned']} planned, by prober: {counts}")
        for pv in v.verdicts:
            self.verdicts.setdefault(pv.provider, []).append(pv.verdict)
            why = ", ".join(pv.reasons) if pv.reasons else ""
            mark = {"passed": "pass  ", "failed": "FAILED", "frozen": "frozen", "blind": "BLIND "}[pv.verdict]
            listed = endpoints.get(pv.provider)
            gateway = f"  [the gateway marks it degraded: status {listed.status}]" \
                if listed is not None and degraded(listed) else ""
            self.print(f"   {pv.provider:<28} {mark}  {why}{gateway}")
        self.closed.set()

    async def on_discovery(self, msg) -> None:
        event = codec.ENDPOINTS_OR_CLOSE.decode(msg.data)
        self.cycle_nos.add(event.cycle_no)  # numbers the demo's cycles for the notices
        self.first_seen.set()
        if isinstance(event, EndpointsDiscovered):  # a large listing comes in parts
            self.planned.setdefault(event.cycle, {})[event.part] = len(event.planned)
            endpoints, _, _ = self.listings.get(event.cycle, ({}, [], 0))
            self.listings[event.cycle] = ({**endpoints, **{e.provider: e for e in event.endpoints}},
                                          list(event.dropped), event.dropped_cut)  # every part repeats them
        elif isinstance(event, CycleUnplanned):
            self.unplanned[event.cycle_no] = event
            self.print(f"   >> cycle #{event.cycle_no} could not be planned: {event.cause} - {event.detail[:160]}")

    async def on_result(self, msg) -> None:
        r: ProbeResult = codec.PROBE_RESULT.decode(msg.data)
        self.results.setdefault(r.cycle, {})[r.task_id] = r.prober or "?"  # a redelivered result counts once

    def split(self, cycle: str) -> dict[str, Any]:
        """One cycle's probes: planned, results received, and how many each prober did (most first)."""
        done = self.results.get(cycle, {})
        counts = sorted(Counter(done.values()).items(), key=lambda kv: (-kv[1], kv[0]))
        return {"planned": sum(self.planned.get(cycle, {}).values()), "probes": len(done),
                "by_prober": dict(counts)}

    async def on_decision(self, msg) -> None:
        d: Decision = codec.DECISION.decode(msg.data)
        if any(x.decision_id == d.decision_id for x in self.decisions):
            return
        self.decisions.append(d)
        until = f" until {utc_text(d.until, precision='clock')}" if isinstance(d, TimedDecision) else ""
        who = d.provider or "(model-wide)"
        self.print(f"   >> decision: {d.action.upper()} [{d.mode}] {who}{until} - {d.reason}: {d.detail}")

    async def on_snapshot(self, msg) -> None:
        s: IgnoreSnapshot = codec.SNAPSHOT.decode(msg.data)
        if self.snapshot is not None and s.version <= self.snapshot.version:
            return
        self.snapshot = s
        ignore = s.ignore_at(s.at)
        self.print(f"   >> ignore list v{s.version}: {json.dumps({'ignore': ignore})}")


def _state_label(state: ModelState, provider: str) -> dict[str, Any]:
    ps = state.providers.get(provider)
    if ps is None:
        return {"state": "unknown"}
    if ps.suspension is not None and ps.suspension.enforced:
        label = "suspended"
    elif ps.blind_since is not None:
        label = "blind"
    elif ps.failed_streak:
        label = "failing"
    elif ps.frozen_streak:
        label = "frozen"
    elif ps.passed_streak:
        label = "passing"
    else:
        label = "new"
    return {
        "state": label,
        "failed_streak": ps.failed_streak,
        "passed_streak": ps.passed_streak,
        "frozen_streak": ps.frozen_streak,
        "ladder_level": ps.ladder_level,
        "until": ps.suspension.until.isoformat() if ps.suspension else None,
        "blind": ps.blind_since is not None,
        "held": ps.suspension is not None and ps.suspension.due is not None,
    }


class Pipeline:
    """A running system: embedded servers, simulated gateway, five services, an observer."""

    def __init__(self, settings: Settings, observer: Observer, gateway_url: str, scenario,
                 passwords: dict[str, str], metrics_urls: dict[str, str] | None = None,
                 dashboard_url: str | None = None, redis_passwords: dict[str, str] | None = None, *,
                 gateway: Any = None, faults: tuple[Any, ...] = (), dashboard_login: DashboardLogin | None = None,
                 nats_server: Any = None, traffic: Any = None) -> None:
        self.settings = settings
        #: the embedded NATS (:class:`reverie_canary.canary.embedded.RunningServer`: stop, start_again)
        self.nats_server = nats_server
        #: the chat backend's simulated traffic (:class:`reverie_canary.canary.traffic.ChatTraffic`; ``None``: none)
        self.traffic = traffic
        #: the read-only dashboard's URL (``None``: not started)
        self.dashboard_url = dashboard_url
        #: the dashboard's generated reader (``None``: not started)
        self.dashboard_login = dashboard_login
        self.observer = observer
        self.gateway_url = gateway_url
        self.scenario = scenario
        self.passwords = passwords
        #: Redis user -> password (``shared/redis/users.acl``); ``settings`` connects as admin
        self.redis_passwords = redis_passwords or {}
        #: service -> its /metrics URL (``/healthz`` and ``/readyz`` beside it)
        self.metrics_urls = metrics_urls or {}
        #: the simulated gateway (:class:`reverie_canary.simulator.gateway.Gateway`): ``outage`` refuses the key
        self.gateway = gateway
        #: the gateway faults the demo plays (``--gateway-fault``)
        self.faults = faults

    def settings_for(self, user: str) -> Settings:
        """The demo's settings with ``user``'s NATS and Redis credentials (operator, backend, a service).

        Redis: a service its own user, the operator and the dashboard the read-only ``reader``
        (status, explain, replay, report, the pages), the chat backend none (it never reads Redis).
        """
        own = self.settings.replace(nats_user=user, nats_password=self.passwords[user])
        redis_user = "reader" if user in ("operator", "dashboard") else user
        if redis_user in self.redis_passwords:
            return own.replace(redis_url=redis_url_for(self.settings.redis_url, redis_user,
                                                       self.redis_passwords[redis_user]))
        if self.redis_passwords:
            return own.replace(redis_url=redis_url_without_credential(self.settings.redis_url))
        return own

    async def wait_cycles(self, n: int, stop: asyncio.Event | None = None) -> bool:
        """Wait until ``n`` cycles closed; ``False`` if stopped or stuck (no cycle for 6 intervals)."""
        stop = stop or asyncio.Event()
        while len(self.observer.cycles) < n and not stop.is_set():
            self.observer.closed.clear()
            waiter = asyncio.create_task(self.observer.closed.wait())
            stopper = asyncio.create_task(stop.wait())
            done, pending = await asyncio.wait({waiter, stopper}, timeout=self.settings.cycle_interval_s * 6,
                                               return_when=asyncio.FIRST_COMPLETED)
            for t in pending:
                t.cancel()
            if not done:
                self.observer.print("no cycle closed for a while: is the pipeline stuck?")
                return False
        return len(self.observer.cycles) >= n

    async def summary(self) -> dict[str, Any]:
        """The machine-readable summary (see ``canary demo --json``)."""
        return {**await _summary(self.settings, self.observer, self.settings.models[0]),
                "metrics": dict(self.metrics_urls), "gateway_faults": [str(f) for f in self.faults],
                "traffic": self.traffic.figures() if self.traffic is not None else None}

    async def judge_record(self) -> JudgeRecord:
        """The judge's stored record of the demo's model."""
        return await judge_record(self.settings, self.settings.models[0])


class DashboardLogin(msgspec.Struct, frozen=True, kw_only=True):
    """The demo dashboard's one reader: its user name, and the files with its password and the web configuration.

    The password is random (24 bytes), written only to ``password_file``
    (mode 0600) and kept in this object for the tests' browser; the output
    names the file, never the password.
    """

    user: str
    password_file: Path
    web_config: Path

    @property
    def password(self) -> str:
        """The password, read from its file."""
        return self.password_file.read_text("utf-8").strip()


#: The demo dashboard's user name.
DEMO_DASHBOARD_USER = "demo"


def write_dashboard_login(directory: Path, user: str = DEMO_DASHBOARD_USER) -> DashboardLogin:
    """Make the demo dashboard's reader: a random password in ``dashboard.password`` and a web configuration
    (``dashboard-web.yml``, Prometheus's format) with its bcrypt hash, both mode 0600 in ``directory``."""
    from reverie_canary.services.dashboard.auth import hash_password

    password = secrets.token_urlsafe(24)
    files = {"dashboard.password": password + "\n",
             "dashboard-web.yml": "# the demo dashboard's reader (canary demo); its password is in dashboard.password\n"
                                  f"basic_auth_users:\n  {json.dumps(user)}: {json.dumps(hash_password(password))}\n"}
    for name, text in files.items():
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    return DashboardLogin(user=user, password_file=directory / "dashboard.password",
                          web_config=directory / "dashboard-web.yml")


def _readable(handler):
    """``handler`` as a core-NATS callback that skips bytes that are not a message of its type.

    Core NATS delivers what JetStream refuses to store too: each service's start
    check publishes empty bodies to the subjects it may write, with an expected
    stream that does not exist (``shared/runtime/preflight.py``), and a malformed message
    is the services' to dead-letter, not the demo's to print.  Before, each of
    those reached nats-py's error callback as one "Undecodable ... Input data was
    truncated" line a run.
    """
    async def cb(msg) -> None:
        try:
            await handler(msg)
        except Undecodable:
            return

    return cb


@contextlib.asynccontextmanager
async def pipeline(*, workdir: Path, scenario: str = "default", sentences: str | None = None, probers: int = 1,
                   out: TextIO | None = None, base: Settings | None = None, dashboard: bool = False,
                   gateway_faults: tuple[Any, ...] = (), tls: embedded.ServerTls | None = None,
                   cycle_s: float | None = None, traffic_rpm: float = 0.0, demo_exclusions: bool = False,
                   **overrides: Any):
    """Start everything the demo runs; yield a :class:`Pipeline`; tear it all down.

    Args:
        workdir: where the embedded servers keep their files.
        scenario: simulated fleet (name or TOML path).
        sentences: directory of real sentences for healthy replies.
        probers: prober replicas.
        out: where progress lines go (default: nowhere).
        base: settings to start from (default: from the environment).
        dashboard: start the read-only dashboard too (on a free loopback port, as the ``dashboard`` user).
        gateway_faults: :class:`reverie_canary.simulator.faults.GatewayFault` s to play, switched at the
            demo's cycle boundaries (the first that holds in a cycle wins).
        tls: run NATS and Redis with TLS only (``tls://``, ``rediss://``); give the
            clients' CA and certificate files in ``overrides`` (``nats_ca_file`` ...).
        cycle_s: one cycle in seconds, every time of the demo scaled to it (default: sized
            to the probes the scenario plans, :func:`demo_cycle_s`).
        traffic_rpm: simulated chat requests per minute through the reply guard, as the chat
            backend (:func:`reverie_canary.canary.traffic.demo_traffic`; ``0``: none).  With traffic,
            discovery's confirmation thresholds are the demo's (:data:`TRAFFIC_CONFIRM`) unless
            ``overrides`` say otherwise.  Not with ``tls``.
        demo_exclusions: the reviewed exclusions of ``config/demo-exclusions.toml`` for this fleet's
            hosts (:func:`fleet_exclusions`, written into ``workdir``) as the router's exclusions file.
        **overrides: settings that replace the demo's.
    """
    from reverie_canary.services.notifier.channels import SECRET_BYTES
    from reverie_canary.simulator.gateway import create_app as create_gateway
    from reverie_canary.simulator.scenario import load_scenario
    from reverie_canary.simulator.server import serve

    if traffic_rpm and tls is not None:
        raise ValueError("the demo's chat traffic runs without TLS (traffic_rpm with tls)")
    loaded = load_scenario(scenario)
    model = loaded.models[0].id
    controls = dict(getattr(loaded, "controls", {}) or {})
    reviewed = demo_exclusions_file() if demo_exclusions else ""
    if reviewed:
        fleet_file = workdir / "demo-exclusions.toml"
        fleet_file.write_text(fleet_exclusions(Path(reviewed).read_text("utf-8"),
                                               {e.tag for e in loaded.models[0].endpoints}), "utf-8")
        overrides = {"exclusions_file": str(fleet_file), **overrides}
    sink = out or open(os.devnull, "w")  # noqa: SIM115
    passwords = generate_passwords()
    redis_passwords = generate_redis_passwords()
    namespace = overrides.get("namespace") or demo_namespace()
    acl = render_redis_acl(redis_passwords, namespace)
    try:
        async with embedded.aservers(workdir, server_config(), server_env(passwords),
                                     redis_acl=acl, tls=tls) as (nats_server, redis_server):
            gateway = create_gateway(loaded, sentences_dir=sentences)
            observer = Observer(sink, model, probers)
            notice_secret = "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES[0])).decode()
            async with serve(gateway) as served_url, \
                    serve(notice_receiver(notice_secret, observer.on_notice)) as receiver_url, \
                    _faulty_front(served_url, gateway_faults) as gateway_url:
                admin_redis = redis_url_for(redis_server.url, "admin", redis_passwords["admin"])
                base = base or Settings.load()
                if cycle_s is None:
                    cycle_s = demo_cycle_s(len(loaded.models[0].endpoints), len(controls),
                                           base.replace(**{k: v for k, v in overrides.items()
                                                           if k in COVERAGE_FIELDS}))
                settings = demo_settings(base, nats_url=nats_server.url,
                                         redis_url=admin_redis, gateway_url=gateway_url, model=model,
                                         controls=controls, cycle_s=cycle_s)
                settings = settings.replace(nats_user="admin", nats_password=passwords["admin"],
                                            notify_urls={"demo": receiver_url.removesuffix("/api/v1") + "/notices"},
                                            notify_secrets={"demo": notice_secret},
                                            **{**(TRAFFIC_CONFIRM if traffic_rpm else {}), **overrides})
                if out is not None:
                    _banner(out, settings, loaded, nats_server.url, redis_server.url, gateway_url, traffic_rpm)
                await ensure_streams(settings)
                # the demo follows the bus for as long as it runs: through a NATS restart too (nats-py
                # subscribes again on reconnection), however long it takes
                nc = await nats_connect(settings, max_reconnect_attempts=-1, reconnect_time_wait=0.5,
                                        disconnected_cb=observer.on_disconnected,
                                        reconnected_cb=observer.on_reconnected)
                await nc.subscribe(subjects.ALL_DISCOVERY, cb=_readable(observer.on_discovery))
                await nc.subscribe(subjects.ALL_RESULTS, cb=_readable(observer.on_result))
                await nc.subscribe(subjects.ALL_VERDICTS, cb=_readable(observer.on_verdict))
                await nc.subscribe(subjects.ALL_DECISIONS, cb=_readable(observer.on_decision))
                await nc.subscribe(subjects.ALL_ROUTING, cb=_readable(observer.on_snapshot))
                started = time.monotonic()
                driver = None
                if gateway_faults:
                    driver = asyncio.create_task(_drive_faults(gateway_faults, observer, gateway.state.gateway,
                                                               _FRONTS.get(gateway_url), settings.cycle_interval_s))
                try:
                    async with running(settings, probers=probers, passwords=passwords,
                                       redis_passwords=redis_passwords):
                        urls = {name: url for name, url in metrics.urls().items() if name in SERVICES}
                        observer.print(f"all five services up in {time.monotonic() - started:.1f} s, each with "
                                       "its own NATS and Redis credential; waiting for cycle 1 ...")
                        if urls:
                            observer.print("metrics (/healthz and /readyz beside each): "
                                           + "  ".join(f"{name} {url}" for name, url in urls.items()))
                        async with contextlib.AsyncExitStack() as stack:
                            dashboard_url = login = None
                            if dashboard:
                                from reverie_canary.services.dashboard.auth import WebConfigSource
                                from reverie_canary.services.dashboard.web import serve_dashboard

                                login = write_dashboard_login(workdir)
                                dashboard_url = await stack.enter_async_context(serve_dashboard(
                                    settings.replace(nats_user="dashboard", nats_password=passwords["dashboard"],
                                                     redis_url=redis_url_for(redis_server.url, "reader",
                                                                             redis_passwords["reader"])),
                                    poll_s=0.5, web=WebConfigSource(login.web_config)))
                                observer.print(f"dashboard (read-only, live): {dashboard_url}")
                                observer.print(f"dashboard login: user {login.user}, password in "
                                               f"{login.password_file}")
                            traffic = None
                            if traffic_rpm:
                                from reverie_canary.canary.traffic import demo_traffic

                                traffic = await stack.enter_async_context(demo_traffic(
                                    settings.nats_url, passwords["backend"], gateway_url, SIMULATED_KEY, model,
                                    rpm=traffic_rpm, on_ready=observer.on_traffic,
                                    ready=_has_exclusions if settings.exclusions_file else None))
                            yield Pipeline(settings, observer, gateway_url, loaded, passwords, urls, dashboard_url,
                                           redis_passwords, gateway=gateway.state.gateway,
                                           faults=tuple(gateway_faults), dashboard_login=login,
                                           nats_server=nats_server, traffic=traffic)
                finally:
                    if driver is not None:
                        driver.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await driver
                    observer.closing = True
                    await drain_or_close(nc)  # NATS away (Ctrl-C in an outage): closed, no traceback
    finally:
        if out is None:
            sink.close()


def _has_exclusions(snapshot: IgnoreSnapshot) -> bool:
    """Whether the router's snapshot holds the reviewed exclusions yet (its first has none: they load after)."""
    return any(r.layer == "exclusion" for e in snapshot.entries for r in e.reasons)


#: Fronts that refuse connections for a ``down`` fault, by the URL the services use.
_FRONTS: dict[str, Any] = {}


@contextlib.asynccontextmanager
async def _faulty_front(url: str, faults: tuple[Any, ...]):
    """The gateway's URL as the services see it: behind a :class:`~reverie_canary.simulator.faults.Front`
    that can refuse connections when a ``down`` fault is played, else the gateway's own."""
    if not any(f.kind == "down" for f in faults):
        yield url
        return
    import httpx

    from reverie_canary.simulator.faults import Front

    target = httpx.URL(url)
    front = Front(target.host, target.port)
    port = await front.up()
    front_url = f"http://127.0.0.1:{port}/api/v1"
    _FRONTS[front_url] = front
    try:
        yield front_url
    finally:
        _FRONTS.pop(front_url, None)
        await front.down()


async def _drive_faults(faults: tuple[Any, ...], observer: Observer, gateway: Any, front: Any,
                        interval_s: float) -> None:
    """Play the gateway faults at the demo's cycle boundaries (:func:`reverie_canary.simulator.faults.drive`)."""
    from reverie_canary.simulator.faults import drive

    async def switch(fault) -> None:
        gateway.outage, gateway.outage_scope = (fault.status if fault is not None else None), "all"
        if front is not None:
            await (front.down() if fault is not None and fault.kind == "down" else front.up())
        observer.print(f"   >> simulated gateway: {('fault ' + str(fault)) if fault is not None else 'serving again'}")

    await drive(faults, observer.first_cycle_no, interval_s, switch)


async def run_demo(cycles: int, as_json: bool, scenario: str = "default", sentences: str | None = None,
                   probers: int = 1, keep: bool = False, gateway_faults: tuple[Any, ...] = (),
                   rpm: float | None = None) -> int:
    """Run the demo; returns the process exit code.

    ``rpm``: the chat traffic's requests per minute (default :data:`TRAFFIC_RPM`; ``0``: none).

    With ``keep``, after the cycles everything keeps running until Ctrl-C, and
    the operator's and the chat backend's environments are written (mode
    0600) into the temporary directory for the operator commands in another
    terminal (:func:`write_env_files`).
    """
    out = sys.stderr if as_json else sys.stdout
    configure_logging("console", "WARNING", stream=sys.stderr)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def on_signal(sig: int) -> None:
        received.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal closed
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, on_signal, sig)
    with tempfile.TemporaryDirectory(prefix="canary-demo-") as tmp:
        print(f"canary demo: starting NATS (JetStream) and Redis in {tmp} ...", file=out, flush=True)
        print(f"running {cycles} cycles; Ctrl-C stops early", file=out, flush=True)
        async with pipeline(workdir=Path(tmp), scenario=scenario, sentences=sentences, probers=probers,
                            out=out, dashboard=True, gateway_faults=gateway_faults,
                            **{**as_the_demo(), **({"traffic_rpm": rpm} if rpm is not None else {})}) as p:
            completed = await p.wait_cycles(cycles, stop)
            if keep and completed and not stop.is_set():
                files = write_env_files(p, Path(tmp))
                _print_keep(out, files, p.metrics_urls, p.dashboard_url, p.settings.models[0], p.dashboard_login)
                await stop.wait()
                stop.clear()
            await asyncio.sleep(0.5)  # let the last decisions reach the router
            summary, unread = await _summary_or_why(p)
    if summary is None:  # stopped during a NATS or Redis outage: one line, no traceback
        print(f"canary demo: stopped without a summary: {unread}", file=out, flush=True)
    else:
        _print_summary(out, summary)
        if as_json:
            print(json.dumps(summary, indent=2, sort_keys=True))
    if completed:
        return 0
    return 128 + received[0] if received else 1  # 130 after Ctrl-C, 129 after SIGHUP, 143 after SIGTERM


#: Longest wait for the summary's reads of NATS and Redis at the end (seconds).
SUMMARY_READ_S = 10.0


async def _summary_or_why(p: Pipeline) -> tuple[dict[str, Any] | None, str]:
    """The demo's summary, or ``None`` and why it cannot be read (NATS or Redis away, or no answer in
    :data:`SUMMARY_READ_S`): a demo stopped during an outage ends with one line, not a traceback."""
    try:
        async with asyncio.timeout(SUMMARY_READ_S):
            return await p.summary(), ""
    except TimeoutError:
        return None, f"NATS and Redis did not answer within {SUMMARY_READ_S:g} s"
    except (NatsError, RedisError, OSError) as exc:
        return None, f"{type(exc).__name__}: {exc}".rstrip(": ")


def write_env_files(p: Pipeline, directory: Path) -> dict[str, Path]:
    """Write ``operator.env`` and ``backend.env`` (``export K=V`` lines, mode 0600) for a running demo.

    Each holds the demo's settings (:meth:`Settings.environment`) with that
    NATS user's generated password, so that ``canary override|lift|mode|explain|
    replay|report`` (operator) and ``canary watch`` (backend) reach this
    demo's servers.  The passwords live only there and in the server's
    environment; they are not printed.

    ``dashboard.env`` holds the read-only ``dashboard`` user's (``canary
    dashboard``, ``canary incident``).

    None of them holds the notifier's channels (``CANARY_NOTIFY_URLS``,
    ``CANARY_NOTIFY_SECRETS``, the webhook's URL and secret): whoever holds
    the signing secret can sign notices, so only the notifier's own
    environment has it.

    Returns:
        ``{"operator": path, "backend": path, "dashboard": path}``.
    """
    out = {}
    for user in ("operator", "backend", "dashboard"):
        env = p.settings_for(user).environment(with_secrets=True, with_channels=False)
        path = directory / f"{user}.env"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items())))
        out[user] = path
    return out


def _print_keep(out: TextIO, files: dict[str, Path], metrics_urls: dict[str, str] | None = None,
                dashboard_url: str | None = None, model: str = "MODEL", login: DashboardLogin | None = None) -> None:
    from datetime import datetime, timezone

    exe = sys.argv[0] if Path(sys.argv[0]).name == "canary" else "canary"  # as this demo was started
    now = datetime.now(timezone.utc).strftime("%H:%M")  # a time the look-back accepts as printed (UTC)
    lines = [
        "",
        "the system keeps running (--keep); Ctrl-C stops it and removes everything. In another terminal:",
        f"  . {files['operator']}        # the operator's credential and this demo's settings",
        f"  {exe} override add fireworks --reason 'trying it' --for 2m",
        f"  {exe} status;  {exe} override list;  {exe} explain lambda/fp8;  {exe} replay;  {exe} report",
        f"  . {files['backend']}; {exe} watch      # as the chat backend",
        f"  . {files['dashboard']}; {exe} incident --model {shlex.quote(model)} --at {now}   "
        "# the look-back, as the dashboard user",
    ]
    if dashboard_url:
        lines.insert(1, f"dashboard (read-only, live): {dashboard_url}")
        if login is not None:
            lines.insert(2, f"  user {login.user}, password in {login.password_file}; the quality feed: "
                            f"curl -su {login.user}:\"$(cat {login.password_file})\" {dashboard_url}api/v1/quality")
    for name, url in (metrics_urls or {}).items():
        lines.append(f"  curl -s {url} | grep ^canary_      # {name}; /healthz and /readyz beside it")
    print("\n".join(lines), file=out, flush=True)


async def judge_record(settings: Settings, model: str) -> JudgeRecord:
    """The judge's stored record of ``model`` (state, position, outbox)."""
    client = redis_client(settings)
    try:
        return await RedisJudgeStore(client, settings.namespace).load(model)
    finally:
        await client.aclose()


async def current_snapshot(settings: Settings, model: str) -> IgnoreSnapshot | None:
    """The IgnoreSnapshot in the KV bucket for ``model``, or ``None`` when the router wrote none."""
    nc = await nats_connect(settings)
    try:
        kv = await nc.jetstream().key_value(ROUTING_BUCKET)
        try:
            entry = await kv.get(subjects.kv_key(model))
        except KeyNotFoundError:
            return None
        return codec.SNAPSHOT.decode(entry.value) if entry.value else None
    finally:
        await nc.close()


async def _summary(settings: Settings, observer: Observer, model: str) -> dict[str, Any]:
    record = await judge_record(settings, model)
    snapshot = await current_snapshot(settings, model)
    now = clock.now()
    ignore = snapshot.ignore_at(now) if snapshot else []
    live_entries = [e for e in (x.active_at(now) for x in (snapshot.entries if snapshot else [])) if e is not None]
    # the reviewed exclusions' part of the ignore list (the positive controls in the demo's fleets)
    excluded = sorted(e.provider for e in live_entries if any(r.layer == "exclusion" for r in e.reasons))
    providers = {}
    for provider in sorted(observer.verdicts):
        info = _state_label(record.state, provider)
        providers[provider] = {
            "verdicts": list(observer.verdicts[provider]),  # a copy: the summary is the state at its time
            "state": info.pop("state"),
            "suspended": provider in ignore,
            **info,
        }
    times = observer.cycle_times
    cycle_s = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None
    return {
        "model": model,
        "cycles": len(observer.cycles),
        "cycle_seconds": round(cycle_s, 2) if cycle_s else None,
        "providers": providers,
        "ignore": ignore,
        "excluded": excluded,
        "snapshot_version": snapshot.version if snapshot else 0,
        "probes": [{"cycle": n, "cycle_no": cycle_no, **observer.split(cycle)}
                   for n, (cycle, cycle_no) in enumerate(observer.cycle_ids, 1)],
        "decisions": [{"action": d.action, "provider": d.provider, "reason": d.reason,
                       "until": d.until.isoformat() if isinstance(d, TimedDecision) else None}
                      for d in observer.decisions],
        "notices": observer.notice_entries(settings.cycle_interval_s),
        "canary": {"blind": record.state.blind_since is not None, "cause": record.state.blind_cause or None,
                   "since": record.state.blind_since.isoformat() if record.state.blind_since else None,
                   "unplanned": sorted(observer.unplanned)},
    }


def _banner(out: TextIO, settings: Settings, scenario, nats_url: str, redis_url: str, gateway: str,
            traffic_rpm: float = 0.0) -> None:
    endpoints = scenario.models[0].endpoints
    print(f"NATS {nats_url}   Redis {redis_url}   simulated gateway {gateway}", file=out)
    print(f"model {settings.models[0]}: {len(endpoints)} simulated endpoints; probe kinds: {', '.join(settings.kinds)}",
          file=out)
    print(compression_text(settings.cycle_interval_s), file=out)
    if "language" in settings.kinds:
        from reverie_canary.services.discovery.core import coverage

        cov = coverage(len(settings.languages), settings.language_coverage_cycles, settings.languages_per_cycle,
                       weighted=any(w > 0 for w in settings.language_weights.values()))
        print(f"language coverage: every language of every provider probed at least once every "
              f"{cov.bound_cycles} cycles ({cov.per_cycle} of {cov.languages} languages a cycle; "
              "CANARY_LANGUAGE_COVERAGE_CYCLES).", file=out)
    controls = ", ".join(f"{tag} ({kind})" for kind, tag in sorted(settings.controls.items()))
    if controls:
        print(f"positive controls, hosts known to fail a probe kind (probed, never judged, not production "
              f"hosts): {controls}", file=out)
    if settings.exclusions_file:
        print(f"reviewed exclusions (ignore-list layer 1): config/demo-exclusions.toml, this fleet's entries "
              f"({settings.exclusions_file}), keeps the positive controls out of live traffic.", file=out)
    elif controls:
        print("no reviewed exclusions file (config/demo-exclusions.toml not found): live traffic can reach the "
              "positive controls.", file=out)
    if traffic_rpm:
        print(f"chat traffic: {traffic_rpm:g} simulated requests/min through the reply guard (one retry with the "
              "serving provider ignored); its live counts can ask for a pinned confirmation probe "
              f"({settings.confirm_min_failures} failures of a reason in {settings.confirm_min_served}+ replies, well "
              "above the peers'); live counts never suspend anyone.", file=out)
    observing = sorted(k for k in settings.new_kind_default_modes if settings.mode_for(k) == "observe")
    print(f"enforce mode; capacity floor {settings.min_hosts} hosts."
          + (f" New probe kinds observe until an operator enforces them ({', '.join(observing)}: "
             "WOULD_SUSPEND, still in traffic; canary mode enforce --kind KIND)." if observing else ""), file=out)
    print("each cycle: pass = every probe passed; FAILED = a quality failure (two in a row suspend); "
          "frozen = transport errors, inconclusive or missing results (the streak neither grows nor resets).",
          file=out, flush=True)


def _print_summary(out: TextIO, summary: dict[str, Any]) -> None:
    print("\n== summary (verdict per cycle: p passed, F failed, f frozen, b blind) ==", file=out)
    for provider, info in summary["providers"].items():
        marks = [v[0].upper() if v == "failed" else v[0] for v in info["verdicts"]]
        if len(marks) > SUMMARY_CYCLES:  # a long --keep run: the last cycles only (--json has them all)
            marks = [f"(+{len(marks) - SUMMARY_CYCLES})", *marks[-SUMMARY_CYCLES:]]
        verdicts = " ".join(marks)
        flag = "SUSPENDED" if info["suspended"] else info["state"]
        print(f"   {provider:<28} {verdicts:<20} {flag}", file=out)
    print(f"   ignore list: {json.dumps({'ignore': summary['ignore']})}", file=out)
    canary = summary.get("canary") or {}
    if canary.get("blind"):
        print(f"   the canary is BLIND ({canary['cause']}) since {canary['since']}: nothing is judged, "
              "suspensions that come due are held", file=out)
    totals: Counter[str] = Counter()
    for cycle in summary.get("probes", []):
        totals.update(cycle["by_prober"])
    if len(totals) > 1:
        split = ", ".join(f"{prober} {count}" for prober, count in totals.most_common())
        print(f"   probes by prober over {len(summary['probes'])} cycles: {split}", file=out)
    by_severity = {s: sum(1 for n in summary["notices"] if n["severity"] == s) for s in ("critical", "warning", "info")}
    print(f"   notices delivered (signed webhook, verified): {len(summary['notices'])} "
          f"({', '.join(f'{v} {k}' for k, v in by_severity.items())})", file=out)
    traffic = summary.get("traffic")
    if traffic:
        held = sum(traffic["held"].values())
        print(f"   chat traffic through the reply guard: {traffic['replies']} replies, "
              f"{traffic['broken_delivered']} broken delivered, {traffic['retried']} retried"
              + (f", {held} failing not retried ({', '.join(f'{k} {v}' for k, v in traffic['held'].items())})"
                 if held else "")
              + (f", {traffic['errors']} without a reply" if traffic["errors"] else "")
              + f"; live counts published {traffic['live_published']} times", file=out)
    if summary.get("cycle_seconds"):
        print(f"   one cycle took {summary['cycle_seconds']} s on average", file=out)
    out.flush()
