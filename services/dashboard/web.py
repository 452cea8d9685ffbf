"""``canary dashboard``: the read-only operator pages, served by a small process of their own.

A Starlette app with server-rendered Jinja2 templates and one server-sent
event stream; every asset (templates, CSS, the few lines of JavaScript that
swap a model's matrix when a cycle closes) ships in the package, nothing comes
from a CDN and nothing is built.  The pages are views of the one read model
(:mod:`reverie_canary.services.dashboard.core` and
:mod:`~reverie_canary.services.dashboard.pages`), read by the same
:class:`~reverie_canary.services.dashboard.sources.FleetReader` as ``canary
status``, with the ``dashboard`` NATS user (subscribe-only: it may read the
log and the bucket, publish nothing; ``shared/nats/server.conf``).

Routes (every one ``GET``; the app changes nothing anywhere):

- ``/``: the fleet, per model (``?cycles=N``, 1..:data:`MAX_CYCLES`);
- ``/fragment/model?model=M``: one model's section (what the live update swaps in);
- ``/provider?model=M&provider=P``: one provider in depth;
- ``/notices``: what operators were told (the notifier's delivery book), newest first;
- ``/lookback?model=M&at=T&window=45m``: the look-back form and its answer;
- ``/events``: the server-sent event stream (``event: cycle`` when a cycle closed,
  a decision or a snapshot arrived);
- ``/api/fleet``, ``/api/lookback``: the same views as JSON (for the pages: their shape may change);
- ``/api/v1/quality``: the quality feed for other systems (``?model=M``, repeatable), versioned, described
  by the OpenAPI document served at ``/api/v1/openapi.json`` (:mod:`~reverie_canary.services.dashboard.openapi`),
  with an ETag (``If-None-Match`` answers 304) and a cache of :data:`FEED_MAX_AGE_S` seconds: many
  readers cost one read of the sources per change or per that many seconds;
- ``/metrics``: the dashboard's Prometheus series (the positive controls per kind);
- ``/healthz``: whether the sources are read (the only path open without credentials).

Who may read them: :mod:`~reverie_canary.services.dashboard.auth` (TLS, basic-auth users and bearer
tokens from a Prometheus-style web configuration file; loopback only without them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
import structlog
import uvicorn
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from reverie_canary.services.dashboard import feed as feeds
from reverie_canary.services.dashboard import pages
from reverie_canary.services.dashboard.auth import WebAuth, WebConfigSource, check_bind
from reverie_canary.services.dashboard.core import (
    LogWindow,
    ModelStatus,
    confirmation_text,
    live_text,
    provider_detail,
    to_builtins,
    to_json,
)
from reverie_canary.services.dashboard.sources import REFRESH_ON, FleetReader, SourceError
from reverie_canary.services.judge.core import Policy
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.timefmt import age_text, utc_text
from reverie_canary.shared.runtime import clock
from reverie_canary.shared.runtime.metrics import ServiceMetrics
from reverie_canary.shared.runtime.retry import REDIS_FAULTS
from reverie_canary.shared.runtime.settings import Settings

log = structlog.get_logger("reverie_canary.dashboard")

#: The default address: loopback only (the pages name every provider and reason; beyond loopback the
#: server needs TLS and readers, :func:`~reverie_canary.services.dashboard.auth.check_bind`).
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8477
#: The most cycles one row may show, and the most server-sent event streams at once (beyond: 503).
MAX_CYCLES = 200
MAX_STREAMS = 32
#: How often the dashboard looks for new log events (s), and sends a keep-alive comment on a quiet stream (s).
POLL_S = 1.0
KEEPALIVE_S = 15.0
#: Rows of the notices page.
NOTICES_LIMIT = 100
#: How long one build of the quality feed is served to every reader (s), unless a cycle closes, a decision or a
#: snapshot arrives first (those build it again at the next request).
FEED_MAX_AGE_S = 5.0
#: Distinct ``?model=`` selections the feed cache keeps (oldest out).
FEED_CACHE_ENTRIES = 64

_PACKAGE = resources.files("reverie_canary.services.dashboard")


def asset_dir(name: str) -> Path:
    """The packaged ``templates`` or ``static`` directory."""
    return Path(str(_PACKAGE / name))


def sparkline(values: list, width: int = 96, height: int = 18) -> str:
    """The ``points`` of an SVG polyline for ``values`` (ms, or cells with a ``ttft_ms``; ``None``: a gap,
    skipped), scaled to the box: the largest value at the top.  A row of cells is cached as :func:`cells_html`."""
    if values and not isinstance(values[0], (int, float, type(None))):
        key = ("spark", tuple(map(id, values)), width, height)
        hit = _ROWS.get(key)
        if hit is None:
            hit = _remember(key, (values, sparkline([c.ttft_ms for c in values], width, height)))
        return hit[1]
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    if not known:
        return ""
    top = max(v for _, v in known) or 1.0
    step = width / max(1, len(values) - 1)
    return " ".join(f"{i * step:.1f},{height - 1 - (v / top) * (height - 2):.1f}" for i, v in known)


#: Rows of cells rendered recently: (provider, the cells' ids) -> (the cells, their HTML).  The cells of
#: closed cycles are memoised objects (pages.model_matrix), so an unchanged row is the same objects; the
#: entry holds them, so their ids cannot be reused while it lives.  Bounded (oldest out).
_ROWS: dict[tuple, tuple[list, Markup]] = {}
ROW_CACHE = 20_000


def cells_html(provider: str, cells: list[pages.CellView]) -> Markup:
    """One row's cells as HTML: focusable, coloured by class, lettered, labelled.

    Every cell has an ``aria-label`` (provider, cycle, verdict, failing kinds
    and reason codes); a cell that did not pass has the same text as its
    ``title`` (hover).  Written here rather than in a template loop, and cached
    per row: the fleet page has one cell per provider and cycle (96,000 for
    2,000 endpoints x 48 cycles), its hot path (``benchmarks/dashboard_bench.py``).
    """
    key = (provider, tuple(map(id, cells)))
    hit = _ROWS.get(key)
    if hit is not None:
        return hit[1]
    who = str(escape(provider))
    parts = []
    for c in cells:  # the row (tr) carries data-provider; the class names the verdict
        if c.verdict == "passed":
            parts.append(f'<td class="cell v-passed" tabindex="0" data-cycle-no="{c.cycle_no}" '
                         f'aria-label="{who}, cycle #{c.cycle_no}: passed">P</td>')
            continue
        # only a failing cell's label holds reason codes (which may hold < & '): escaped
        label = f"{who}, {escape(c.label)}"
        parts.append(f'<td class="cell v-{c.verdict}" tabindex="0" data-cycle-no="{c.cycle_no}" '
                     f'title="{label}" aria-label="{label}">{c.letter}</td>')
    html = Markup("".join(parts))
    _remember(key, (cells, html))
    return html


def _remember(key: tuple, value: tuple) -> tuple:
    """Keep one row's rendering in :data:`_ROWS`, dropping the oldest quarter when it is full."""
    if len(_ROWS) >= ROW_CACHE:
        for old in list(_ROWS)[:ROW_CACHE // 4]:
            del _ROWS[old]
    _ROWS[key] = value
    return value


def _templates() -> Jinja2Templates:
    t = Jinja2Templates(directory=str(asset_dir("templates")))
    env = t.env
    env.filters["utc"] = lambda at: utc_text(at)
    env.filters["incident_command"] = pages.incident_command
    env.filters["age"] = age_text
    env.filters["clock"] = lambda at: utc_text(at, precision="clock", missing="-")
    env.filters["live"] = live_text
    env.filters["confirmation"] = confirmation_text
    env.filters["tojson_pretty"] = lambda v: json.dumps(to_builtins(v), indent=1, ensure_ascii=False, default=str)
    env.globals.update(letters=pages.LETTERS, meanings=pages.MEANINGS, sparkline=sparkline, cells_html=cells_html,
                       control_letters=feeds.CONTROL_LETTERS, control_meanings=feeds.CONTROL_MEANINGS)
    env.trim_blocks = env.lstrip_blocks = True
    return t


class Dashboard:
    """The dashboard's state: one :class:`FleetReader` following the log, and the live streams waiting on it.

    Use as an async context manager (it connects, reads the window, and follows
    the log every :data:`POLL_S` seconds until it exits).

    Args:
        settings: the deployment's settings with the ``dashboard`` credential.
        cycles: cycles per row (the window keeps two more).
        poll_s: how often to look for new log events (s).
    """

    def __init__(self, settings: Settings, *, cycles: int = pages.DEFAULT_CYCLES, poll_s: float = POLL_S) -> None:
        self.settings = settings
        self.cycles = max(1, min(cycles, MAX_CYCLES))
        self.poll_s = poll_s
        self.reader = FleetReader(settings, window=LogWindow(cycle_memory=self.cycles + 2, decision_memory=64))
        self.version = 0
        self.changed = asyncio.Condition()
        self.streams = 0
        self.closing = False
        self.problem: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.feed_cache = FeedCache(FEED_MAX_AGE_S)
        #: the dashboard's own series (``/metrics``): the positive controls, computed at each scrape
        self.metrics = ServiceMetrics("dashboard")
        self.metrics.add_source(self.control_samples)

    async def __aenter__(self) -> Dashboard:
        await self.reader.__aenter__()
        try:
            await self.reader.follow()
            await self.fleet()  # builds the memo of every closed cycle's cells: the first page is a warm one
        except BaseException:
            await self.reader.__aexit__(None, None, None)
            raise
        self.metrics.set("ready", 1)
        self._task = asyncio.create_task(self._follow(), name="dashboard-follow")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.closing = True
        async with self.changed:
            self.changed.notify_all()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.reader.__aexit__(*exc)

    async def _follow(self) -> None:
        while not self.closing:
            await asyncio.sleep(self.poll_s)
            try:
                async with self._lock:
                    events = await self.reader.follow()
                if self.problem:
                    log.info("dashboard_reads_again")
                self.problem = None
                self.metrics.set("ready", 1)
            except SourceError as exc:
                if str(exc) != self.problem:
                    log.warning("dashboard_cannot_read", error=str(exc))
                self.problem = str(exc)
                self.metrics.set("ready", 0)
                continue
            if any(type(e).__name__ in REFRESH_ON for e in events):
                async with self.changed:
                    self.version += 1
                    self.changed.notify_all()

    # -- the views -------------------------------------------------------------------------------------

    async def fleet(self, models: list[str] | None = None, cycles: int | None = None) -> list[pages.ModelMatrix]:
        """One :class:`~reverie_canary.services.dashboard.pages.ModelMatrix` per model (default: every configured)."""
        async with self._lock:
            status = await self.reader.status(models)
            n = cycles or self.cycles
            return [msgspec.structs.replace(pages.model_matrix(m, self.reader.window.models.get(m.model), n),
                                            controls=self.controls(m.model, n))
                    for m in status.models]

    def controls(self, model: str, cycles: int | None = None) -> list[feeds.ControlRow]:
        """The model's positive controls per closed cycle (the last ``cycles``) from the window read so far."""
        return feeds.control_rows(self.reader.window.models.get(model), dict(self.settings.controls), cycles)

    def control_samples(self):
        """The ``canary_control_*`` samples of every configured model (a metrics source: sync, at each scrape)."""
        for model in self.settings.models:
            yield from feeds.control_samples(model, self.controls(model))

    async def feed(self, models: list[str]) -> tuple[bytes, str]:
        """The quality feed of ``models`` as JSON bytes and its ETag, from the cache while it holds.

        Raises:
            SourceError: a source could not be read (nothing is cached then).
        """
        async def build() -> bytes:
            async with self._lock:
                status = await self.reader.status(models)
                views = [feeds.feed_model(m, self.reader.window.models.get(m.model), kinds=list(self.settings.kinds),
                                          controls=dict(self.settings.controls)) for m in status.models]
            return to_json(feeds.Feed(models=views))

        return await self.feed_cache.get(tuple(models), self.version, build)

    async def model_status(self, model: str) -> ModelStatus:
        async with self._lock:
            return (await self.reader.status([model])).models[0]

    async def provider(self, model: str, provider: str) -> pages.ProviderPage:
        """The provider page.

        Raises:
            KeyError: the model has no such provider.
        """
        async with self._lock:
            status = (await self.reader.status([model])).models[0]
            state = await self.reader.judge_state(model)
            snapshot = await self.reader.snapshot(model)
            window = self.reader.window.models.get(model)
            detail = provider_detail(status, provider, state=state, window=window,
                                     policy=Policy.from_settings(self.settings))
            return pages.provider_page(detail, window, now=status.at,
                                       snapshot_entries=list(snapshot.entries) if snapshot else [],
                                       cycles=self.cycles)

    async def notices(self) -> dict[str, Any]:
        """The notifier's delivery book (dead, pending, recent), read as ``canary notices list`` reads it."""
        from reverie_canary.canary.cli_notices import read_book

        return await read_book(self.settings, None, NOTICES_LIMIT)

    async def lookback(self, model: str, at: datetime, window_s: float, kind: str | None = None,
                       language: str | None = None) -> pages.Lookback:
        """The look-back (see :func:`~reverie_canary.services.dashboard.pages.lookback`), read for its own window."""
        return await read_lookback(self.settings, model, at, window_s, kind=kind, language=language)


async def read_lookback(settings: Settings, model: str, at: datetime, window_s: float, *, kind: str | None = None,
                        language: str | None = None, now: datetime | None = None) -> pages.Lookback:
    """Read the log from a little before ``at - window_s`` to now, and the bucket's history; build the look-back.

    The read is its own (not the dashboard's window): a look-back can reach as
    far back as the log keeps.  Bounded: at most :data:`LOOKBACK_CYCLES` cycles
    are kept (the oldest beyond it are dropped and the answer says so).

    Raises:
        SourceError: NATS, the bucket or Redis could not be read.
    """
    now = now or clock.now()
    start = at.timestamp() - window_s - 2 * settings.cycle_interval_s
    span_s = max(now.timestamp() - start, 60.0)
    cycles = min(LOOKBACK_CYCLES, int(span_s / settings.cycle_interval_s) + 4)
    reader = FleetReader(settings, window_s=span_s, window=LogWindow(cycle_memory=cycles, decision_memory=64))
    async with reader:
        await reader.follow()
        await reader.merge_history(model)
    view = pages.lookback(model, at=at, window_s=window_s, now=now, window=reader.window.models.get(model),
                          control_tags=set(settings.controls.values()), kind=kind, language=language,
                          log_since=reader.window.since)
    if int(span_s / settings.cycle_interval_s) + 4 > LOOKBACK_CYCLES:
        view = _with_problem(view, f"the read keeps the last {LOOKBACK_CYCLES} cycles: 'failed since' covers "
                                   "those only")
    return view


def _with_problem(view: pages.Lookback, problem: str) -> pages.Lookback:
    return msgspec.structs.replace(view, problems=[*view.problems, problem])


#: The most cycles one look-back read keeps (a month of 30-minute cycles and then some).
LOOKBACK_CYCLES = 2000


class FeedCache:
    """Builds of the quality feed, shared by every reader: one build per selection, version and ``max_age_s``.

    A build is reused while the dashboard's version (it moves when a cycle
    closes, a decision or a snapshot arrives) is the one it was built at and
    it is younger than ``max_age_s``; readers that ask while a build runs wait
    for that build instead of starting their own.  A failed build is not kept.
    """

    def __init__(self, max_age_s: float, entries: int = FEED_CACHE_ENTRIES) -> None:
        self.max_age_s = max_age_s
        self.entries = entries
        self.builds = 0
        self._done: dict[tuple, tuple[int, float, bytes, str]] = {}
        self._running: dict[tuple, asyncio.Future] = {}

    async def get(self, key: tuple, version: int, build) -> tuple[bytes, str]:
        """The body and ETag for ``key`` at ``version``, built by ``await build()`` when none holds."""
        import time

        hit = self._done.get(key)
        if hit is not None and hit[0] == version and time.monotonic() - hit[1] < self.max_age_s:
            return hit[2], hit[3]
        running = self._running.get(key)
        if running is not None:
            return await asyncio.shield(running)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            body = await build()
            result = body, etag_of(body)
            self.builds += 1
            self._done.pop(key, None)
            self._done[key] = (version, time.monotonic(), *result)
            while len(self._done) > self.entries:
                self._done.pop(next(iter(self._done)))
            future.set_result(result)
            return result
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a build nobody else waited for must not warn
            raise
        finally:
            self._running.pop(key, None)


def etag_of(body: bytes) -> str:
    """A strong ETag of a response body: the first 128 bits of its SHA-256, quoted."""
    import hashlib

    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def none_match(header: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``etag`` (or ``*``): the weak comparison RFC 9110 asks for."""
    if not header:
        return False
    bare = etag.removeprefix("W/")
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == bare:
            return True
    return False


def create_app(dashboard: Dashboard, web: WebConfigSource | None = None) -> Any:
    """The app of a started :class:`Dashboard` (read-only: every route is a GET), behind
    :class:`~reverie_canary.services.dashboard.auth.WebAuth` with ``web``'s readers (``None``: no readers)."""
    templates = _templates()
    settings = dashboard.settings

    def cycles_of(request: Request) -> int:
        try:
            return max(1, min(MAX_CYCLES, int(request.query_params.get("cycles", dashboard.cycles))))
        except ValueError:
            return dashboard.cycles

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        context.setdefault("problem", dashboard.problem)
        context.setdefault("models", list(settings.models))
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def error(request: Request, text: str, status_code: int) -> Response:
        return page(request, "error.html", status_code=status_code, message=text)

    def model_of(request: Request) -> str | None:
        model = request.query_params.get("model") or (settings.models[0] if settings.models else None)
        return model if model in settings.models else None

    async def fleet(request: Request) -> Response:
        try:
            matrices = await dashboard.fleet(cycles=cycles_of(request))
        except SourceError as exc:
            return error(request, str(exc), 503)
        return page(request, "fleet.html", matrices=matrices, version=dashboard.version, cycles=cycles_of(request))

    async def fragment(request: Request) -> Response:
        model = model_of(request)
        if model is None:
            return HTMLResponse("unknown model", status_code=404)
        try:
            (matrix,) = await dashboard.fleet([model], cycles=cycles_of(request))
        except SourceError as exc:
            return HTMLResponse(str(exc), status_code=503)
        return templates.TemplateResponse(request, "_model.html", {"m": matrix, "version": dashboard.version})

    async def provider(request: Request) -> Response:
        model, name = model_of(request), request.query_params.get("provider", "")
        if model is None or not name:
            return error(request, "give ?model= (a configured model) and &provider=", 400)
        try:
            view = await dashboard.provider(model, name)
        except KeyError:
            return error(request, f"{name} is not a provider of {model} in what the canary read", 404)
        except SourceError as exc:
            return error(request, str(exc), 503)
        return page(request, "provider.html", p=view)

    async def notices(request: Request) -> Response:
        try:
            book = await dashboard.notices()
        except (*REDIS_FAULTS, Transient) as exc:  # Redis unreachable: said on the page, not a traceback
            return error(request, f"the notifier's delivery book (Redis) could not be read: {exc}", 503)
        rows = sorted([{**r, "section": s} for s in ("dead", "pending", "recent") for r in book[s]],
                      key=lambda r: r.get("delivered_at") or r.get("dead_at") or r.get("last_attempt_at")
                      or r.get("first_attempt_at") or "", reverse=True)
        return page(request, "notices.html", rows=rows, book=book)

    def lookback_args(request: Request) -> tuple[str, datetime, float, str | None, str | None]:
        q = request.query_params
        model = model_of(request)
        if model is None:
            raise ValueError(f"unknown model {q.get('model')!r}; one of {', '.join(settings.models)}")
        at = pages.parse_at(q.get("at", ""), clock.now())
        window_s = pages.parse_window(q.get("window") or "45m")
        return model, at, window_s, q.get("kind") or None, q.get("language") or None

    async def lookback(request: Request) -> Response:
        form = {k: request.query_params.get(k, "") for k in ("model", "at", "window", "kind", "language")}
        if not form["at"]:
            return page(request, "lookback.html", form=form, view=None, message=None)
        try:
            model, at, window_s, kind, language = lookback_args(request)
            view = await dashboard.lookback(model, at, window_s, kind, language)
        except ValueError as exc:
            return page(request, "lookback.html", form=form, view=None, message=str(exc), status_code=400)
        except SourceError as exc:
            return page(request, "lookback.html", form=form, view=None, message=str(exc), status_code=503)
        return page(request, "lookback.html", form=form, view=view, message=None)

    async def api_fleet(request: Request) -> Response:
        try:
            matrices = await dashboard.fleet(cycles=cycles_of(request))
        except SourceError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        return Response(to_json(matrices), media_type="application/json")

    async def api_lookback(request: Request) -> Response:
        try:
            view = await dashboard.lookback(*lookback_args(request))
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except SourceError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        return Response(to_json(view), media_type="application/json")

    async def events(request: Request) -> Response:
        if dashboard.streams >= MAX_STREAMS:
            return Response(f"at most {MAX_STREAMS} live streams at once", status_code=503)

        async def stream():
            dashboard.streams += 1
            try:
                seen = dashboard.version
                yield f"retry: 2000\nevent: hello\ndata: {json.dumps({'version': seen})}\n\n"
                while not dashboard.closing:
                    async with dashboard.changed:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(dashboard.changed.wait_for(
                                lambda: dashboard.version != seen or dashboard.closing),  # noqa: B023 (awaited here)
                                timeout=KEEPALIVE_S)
                    if dashboard.closing:
                        return
                    if dashboard.version == seen:
                        yield ": keep-alive\n\n"
                        continue
                    seen = dashboard.version
                    yield f"event: cycle\ndata: {json.dumps({'version': seen})}\n\n"
            finally:
                dashboard.streams -= 1

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def api_quality(request: Request) -> Response:
        asked = request.query_params.getlist("model")
        unknown = [m for m in asked if m not in settings.models]
        if unknown:
            return JSONResponse({"error": f"not a watched model: {', '.join(unknown)[:400]}; one of "
                                          f"{', '.join(settings.models)}"}, status_code=404)
        models = list(dict.fromkeys(asked)) or list(settings.models)
        try:
            body, etag = await dashboard.feed(models)
        except SourceError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        headers = {"ETag": etag, "Cache-Control": f"private, max-age={FEED_MAX_AGE_S:g}"}
        if none_match(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    async def openapi(request: Request) -> Response:
        from reverie_canary.services.dashboard.openapi import document_bytes

        return Response(document_bytes(), media_type="application/json")

    async def scrape(request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(dashboard.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": dashboard.problem is None, "problem": dashboard.problem,
                             "version": dashboard.version}, status_code=200 if dashboard.problem is None else 503)

    app = Starlette(routes=[
        Route("/", fleet),
        Route("/fragment/model", fragment),
        Route("/provider", provider),
        Route("/notices", notices),
        Route("/lookback", lookback),
        Route("/events", events),
        Route("/api/fleet", api_fleet),
        Route("/api/lookback", api_lookback),
        Route("/api/v1/quality", api_quality),
        Route("/api/v1/openapi.json", openapi),
        Route("/metrics", scrape),
        Route("/healthz", healthz),
        Mount("/static", app=StaticFiles(directory=str(asset_dir("static"))), name="static"),
    ])
    return WebAuth(app, web or WebConfigSource(), on_refused=lambda path: dashboard.metrics.inc("web_refused"))


@contextlib.asynccontextmanager
async def serve_dashboard(settings: Settings, *, host: str = DEFAULT_HOST, port: int = 0,
                          cycles: int = pages.DEFAULT_CYCLES, poll_s: float = POLL_S,
                          web: WebConfigSource | None = None, insecure_beyond_loopback: bool = False):
    """Start the dashboard (reader + HTTP(S) server); yield its URL (``http://host:port/`` or ``https://``).

    Args:
        settings: the deployment's settings (the ``dashboard`` credential).
        host, port: where to listen (port 0: a free one).
        cycles: cycles per row of the fleet matrix.
        poll_s: how often to look for new log events (s).
        web: TLS and readers (``None``: neither; loopback only).
        insecure_beyond_loopback: serve beyond loopback without TLS or readers all the same.

    Raises:
        WebConfigError: ``host`` is beyond loopback without TLS and readers (and
            ``insecure_beyond_loopback`` is not set), or the TLS files cannot be loaded.
        SourceError: NATS, the bucket or Redis could not be read at start.
        OSError: the address cannot be bound.
    """
    web = web or WebConfigSource()
    config = web.current()
    check_bind(host, config, insecure_beyond_loopback=insecure_beyond_loopback)
    context = config.tls.context() if config.tls is not None else None  # a bad certificate: refused before reading
    async with Dashboard(settings, cycles=cycles, poll_s=poll_s) as dashboard:
        async with serve_app(create_app(dashboard, web), host=host, port=port, tls=context) as url:
            try:
                yield url
            finally:  # end the live streams first, or the server waits for them on its way out
                dashboard.closing = True
                async with dashboard.changed:
                    dashboard.changed.notify_all()


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signals to the process: ``canary dashboard`` and ``canary
    demo`` install their own handlers and leave the block (uvicorn's would raise the signal again, once stopped,
    under a handler that may do nothing, and the program would wait forever)."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


@contextlib.asynccontextmanager
async def serve_app(app: Any, *, host: str, port: int, tls: Any = None, shutdown_timeout_s: float = 1.0):
    """Run an ASGI ``app`` with uvicorn on ``host:port`` (HTTPS with the :class:`ssl.SSLContext` ``tls``);
    yield its base URL (``https://127.0.0.1:8477/``).

    Raises:
        OSError: the address cannot be bound.
        RuntimeError: uvicorn stopped during start-up.
    """
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    # log_config=None: uvicorn's records go to the process's logging; its access log has no headers
    config = uvicorn.Config(app, host=host, port=bound, log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=shutdown_timeout_s, log_config=None,
                            ssl_context_factory=(lambda _config, _default: tls) if tls is not None else None)
    server = _QuietServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped during start-up")
            await asyncio.sleep(0.005)
        url_host = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
        yield f"{'https' if tls is not None else 'http'}://{url_host}:{bound}/"
    finally:
        server.should_exit = True
        try:
            await task
        finally:
            sock.close()
