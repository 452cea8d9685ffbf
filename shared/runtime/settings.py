"""Settings from defaults, an optional TOML file and the environment.

Precedence, lowest first: the defaults below, the TOML file named by
``CANARY_CONFIG`` (or passed explicitly), the environment, explicit overrides.
Environment names: ``CANARY_<FIELD>`` for every field (``CANARY_MIN_HOSTS=3``),
plus the conventional ``NATS_URL``, ``REDIS_URL``, ``OPENROUTER_BASE_URL`` and
``OPENROUTER_API_KEY``.  An empty variable counts as unset.  Lists are comma-separated (``CANARY_MODELS=a/b,c/d``);
mappings are ``key=value`` pairs (``CANARY_CONTROLS=refusal=acme/strict``).
A ``CANARY_*`` variable that is no setting (a typo: ``CANARY_MIN_HOST``) is warned about once at
load, naming the closest setting (:func:`warn_unknown_variables`); an unknown key in the file is refused.

Units are in the names: ``_s`` seconds, ``_ms`` milliseconds.  Defaults follow
the design (docs/concepts/judge.md): 30-minute cycles, 10 s time to first token, two failed cycles to
suspend, a 1/3/7-day ladder that resets after 14 quiet days, a floor of 2 hosts.

The API key is never printed: ``repr`` and :meth:`Settings.public` mask it.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct, field

from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.contract.events import JUDGED_KINDS, MAX_TASK_CONCURRENCY, PROBE_KINDS, Mode
from reverie_canary.shared.contract.languages import LANGUAGES, CoverageError, coverage

DAY_S = 86400.0
GIB = 1024 ** 3

#: Settings that are credentials: masked by ``Settings.public``, left out of ``Settings.environment``.
SECRET_FIELDS: tuple[str, ...] = ("openrouter_api_key", "nats_password", "redis_password", "webhook_secret", "notify_urls",
                                  "notify_secrets")
#: URLs that are credentials as a whole (a Slack-style webhook carries its token in the path):
#: printed as ``scheme://host/***`` everywhere, left out of ``Settings.environment``.
SECRET_URL_FIELDS: tuple[str, ...] = ("webhook_url",)
#: The notifier's channels: URLs that are credentials and the webhook signing secrets.  Whoever holds
#: them can post to the channels and sign notices, so only the notifier's own environment has them
#: (an operator's env file does not: ``Settings.environment(with_channels=False)``).
CHANNEL_FIELDS: tuple[str, ...] = ("webhook_url", "webhook_secret", "notify_urls", "notify_secrets")
#: URLs that may carry a password (``nats://user:pass@host``): the password is masked wherever printed.
URL_FIELDS: tuple[str, ...] = ("nats_url", "redis_url", "openrouter_base_url")
#: The services, in the order ``canary up`` starts them (and numbers their metrics ports).
SERVICE_NAMES: tuple[str, ...] = ("discovery", "prober", "judge", "router", "notifier")
#: Notice severities, least urgent first (services/notifier/core.py has the table of which is which).
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")


class Settings(Struct, kw_only=True):
    """Every setting of every service.

    Every field is a setting: environment variable ``CANARY_<FIELD>`` (the seven
    connection settings also under their conventional names, ``NATS_URL`` ...), or
    a key of the ``CANARY_CONFIG`` TOML file.  The documentation's settings
    reference is generated from this list (``canary docs --write``), so every
    field has its line here.

    Attributes:
        nats_url: the NATS server, or several comma-separated (the nodes of a
            cluster); ``tls://`` for TLS.  Environment ``NATS_URL``.
        nats_user, nats_password: this process's NATS user and its password
            (``NATS_USER``, ``NATS_PASSWORD``; one user per service, from
            shared/nats/server.conf).
        redis_url: the Redis of discovery, judge, router and notifier state, with
            this service's Redis user (``redis://judge@redis:6379/0``;
            ``rediss://`` for TLS).  Environment ``REDIS_URL``.
        namespace: prefix of every Redis key (``<namespace>:judge:...``) and part of
            every notice's ``webhook-id``: two deployments must not share one.
        openrouter_base_url, openrouter_api_key: the gateway and the canary's key
            (``OPENROUTER_BASE_URL``, ``OPENROUTER_API_KEY``); the key is never
            printed, and one with spaces or control characters is refused.
        http_referer, app_title: the ``HTTP-Referer`` and ``X-Title`` headers the
            gateway attributes the canary's requests by.
        models: the model ids watched (comma-separated in the environment).
        kinds: the probe kinds planned each cycle (ttft, refusal, structured,
            language, echo, tools).
        languages: the languages probed, in rotation order (the 17 by default).
        request_timeout_s: one probe request's limit; a request also ends by its
            task's deadline.
        max_tokens: the output budget of a probe request (at least 16).
        language_confirmations: extra tries of a language probe whose first
            reply showed an anomaly; the majority decides.
        failed_cycles_to_suspend: failed cycles in a row that suspend a provider
            (two: one strange reply is not proof).
        passed_cycles_to_recover: passed cycles in a row that end a suspension
            early (the ladder position is kept).
        unjudgeable_after: frozen cycles in a row after which a provider is
            reported ``unjudgeable`` (once).
        common_mode_share: when more than this share of a model's probed
            providers fail one kind in a cycle, the failure is the canary's or
            the model's, not theirs: that kind is frozen for everyone.
        template_tolerance_tokens, template_tolerance_share: how far a
            provider's ``usage.prompt_tokens`` may be from its peers' for the
            same prompt (same probe kind, language, variant and prompt version
            in one cycle) before it reads as another chat template or tokenizer
            (``template:prompt_tokens_differ``): the larger of this many tokens
            and this share of the peers' count (2 tokens, 2 %: a system prompt
            or template dropped or added moves a count by tens of tokens, a
            different tokenizer by a tenth or more).  The peers' count is the
            median of the providers reporting that prompt, and only counts when
            more than half of them are within the tolerance of it.
        template_min_providers: providers that must report a prompt's count (or
            a reply's ``completion_tokens``) in one cycle before any of them is
            compared with its peers (3); ``max_tokens_ignored`` (more
            ``completion_tokens`` than the request's ``max_tokens``) is judged
            on at least as many and only when at most half of them exceed it.
        slow_vs_peers_k, slow_vs_peers_window_cycles, slow_vs_peers_min_providers, slow_vs_peers_min_spread_ms:
            a provider whose median time to first token over its last
            ``slow_vs_peers_window_cycles`` cycles (the ttft probe's, 6 cycles:
            3 hours at the default interval; at least half of them measured)
            is above the median of the model's providers' medians plus ``k``
            times their median absolute deviation (``k`` = 5; a deviation below
            ``slow_vs_peers_min_spread_ms``, 200 ms, counts as that much, so that
            peers within milliseconds of each other do not flag one a little
            slower) is ``slow_vs_peers``, judged only with at least
            ``slow_vs_peers_min_providers`` (4) providers measured.  It is shown
            (``canary status``, the dashboard, the ``provider_slow_vs_peers``
            gauge) and never suspends anyone: the first-token bar
            (``ttft_threshold_s``) stays the contract.
        exclusions_file: the reviewed exclusions (TOML; the router reloads it when
            it changes); empty: none.
        prober_id: this prober's name in its results (default: host, process id
            and a random suffix).
        max_deliver: deliveries of one message before it is dead-lettered
            (``gave_up``).
        retry_delay_s: the base of the redelivery delay of a message nak'ed on a
            transient error (times its delivery count, +-25 %).
        duplicate_window_s: JetStream's duplicate window of the streams: a
            message republished with the same ``Nats-Msg-Id`` within it is dropped.
        notify_timeout_s: one delivery attempt's limit.
        notify_poll_s: how often a channel's loop looks for notices that came due.
        notify_concurrency: deliveries in flight per channel (one while the
            channel is failing).
        metrics_host, metrics_port, metrics_ports: where ``/metrics``, ``/healthz``
            and ``/readyz`` listen: the address (loopback by default), the port of
            the one service ``canary run`` runs (0: the standard ports 9471-9475;
            -1: no endpoint), and per service ``name=port`` (0: any free port).
        log_format, log_level: ``console`` (readable ``key=value``) or ``json``
            (one object a line, for collectors); DEBUG, INFO, WARNING or ERROR.
        event_loop: ``auto`` (the default: uvloop when it can be imported,
            except in a process that runs the prober; else asyncio's loop),
            ``uvloop`` (the prober too; refused at start without it) or
            ``asyncio``: the loop ``canary run`` / ``canary up`` run the services
            on (canary/loops.py says why; the start line says which).
        traces: ``off`` (the default) or ``otlp``: export OpenTelemetry spans
            with OTLP over HTTP, one trace per probe (the ``[otel]`` extra;
            shared/runtime/tracing.py; ``OTEL_EXPORTER_OTLP_ENDPOINT`` says where).
        nats_ca_file, nats_cert_file, nats_key_file: TLS to NATS (a ``tls://``
            ``nats_url``): the CA's PEM file the server's certificate must chain to
            (empty: the system's trust store) and this client's certificate and key
            (mutual TLS; both or neither).  Set with a ``nats://`` URL: refused.
        redis_ca_file, redis_cert_file, redis_key_file: the same for Redis (a
            ``rediss://`` ``redis_url``).
        redis_password: the Redis user's password when ``redis_url`` names only the
            user (``redis://judge@redis:6379/0``), so that the password can come from a
            file (``REDIS_PASSWORD_FILE``, Docker secrets); a password in the URL wins.
        cycle_interval_s: time between cycle starts (30 min).
        time_scale: how many times faster than real time the clock-driven settings
            run: 1 in production; the demo compresses a 30-minute cycle into a few
            seconds and says so here (1,800 s / its cycle), so that a figure per day
            (``canary status``'s spend) is projected per real day, not per demo day.
        probe_window_s: a cycle's deadline after its start; results later than
            this are late.  Must be below ``cycle_interval_s``.
        ttft_threshold_s: time to first token above which the latency probe
            fails (the latency contract, docs/concepts/probes.md: 10 s).
        ladder_s: suspension lengths, in order (the ladder: 1, 3, 7 days).
        ladder_reset_s: quiet time after which the ladder starts again (14 d).
        min_hosts: capacity floor, usable production hosts that must remain.
        controls: probe kind -> positive-control provider tag.
        webhook_url, webhook_secret, webhook_min_severity: the ``webhook``
            channel (a JSON POST signed per Standard Webhooks with the
            ``whsec_...`` secret); the same as ``notify_urls["webhook"]``.
        notify_urls: channel name -> URL: ``http(s)://`` is a signed JSON
            webhook (its secret in ``notify_secrets``), anything else an
            apprise URL (``slack://``, ``discord://``, ``mailto://``, ``ntfy://``,
            ``pagerduty://``, ``json://`` ...).  Secrets: never printed.
        notify_secrets: channel name -> the ``whsec_...`` signing secret of a
            webhook channel (24-64 random bytes, base64).  Never printed.
        notify_severity: channel name -> least severity it gets
            (``info`` | ``warning`` | ``critical``; default ``info``).
        notify_remind_s: a persisting state (floor held, pin violated ...)
            is told when it starts, again every this long while it lasts
            (6 h: often enough to stay in view, seldom enough not to be muted),
            and when it ends.
        notify_retry_base_s, notify_retry_max_s, notify_give_up_s: the
            delivery schedule of one notice on one channel: exponential
            backoff with full jitter from the base up to the max delay,
            dead-lettered once the first attempt is this long ago (24 h).
        mode: ``observe`` (announce only) or ``enforce`` (change routing).
        kind_modes: per-kind override of ``mode`` (a new kind runs in shadow).
        new_kind_default_modes: the mode a new probe kind runs in until an
            operator switches that kind (a ``canary mode --kind`` command, or
            the kind in ``kind_modes``), whatever mode the model is in: a new
            automatic cut starts in observe (docs/concepts/probes.md, the tool-call contract).  Drop a
            kind from it once its calls have been scored.
        log_max_age_s, log_max_bytes: how long and how much the event log
            (``CANARY_LOG``) keeps; past either the oldest messages go (35 days,
            24 GiB).  JetStream counts the byte limit in uncompressed bytes, also
            with S2: about 3.4 kB of messages a probe result (``benchmarks/soak.py``),
            so 24 GiB holds about 9 days of a 2,000-endpoint fleet, and 35 days
            need about 100 GiB (about 20 GB on disk with S2; benchmarks/README.md).
        deadletter_max_bytes, tasks_max_bytes: byte bounds of the dead
            letters and of the probe-task work queue.
        stream_compression: ``s2`` (JetStream file-store compression of the
            streams, the default) or ``none``.
        stream_replicas: copies of every stream and of the KV bucket (1, or
            3 / 5 on a JetStream cluster; docs/deployment/scaling.md).
        prober_concurrency: the ceiling of the probes one prober runs at once
            (it holds at most this many tasks: it fetches one only when a
            worker is free).  How many it runs is derived each cycle by
            discovery from the plan, the measured probe times and the window
            (``probe_fill_share``; the tasks carry it, ``CycleSized`` says it);
            before anything was measured, every prober runs at this ceiling.
        probe_fill_share: the share of ``probe_window_s`` a cycle's probes are
            sized to take (0.25: 150 s of the default 600 s window), the rest
            room for slow providers, retries and a lost prober
            (services/discovery/sizing.py).
        task_ack_wait_s: seconds the task consumer waits for word from a
            prober before it gives the task to another; 0 (default): an eighth
            of ``probe_window_s``, between 2 and 30 s
            (:func:`reverie_canary.shared.runtime.streams.task_ack_wait_s`).  A prober
            says each task it holds is in progress four times per ``ack_wait``.
        reply_max_bytes: text plus reasoning a probe keeps of one reply (UTF-8
            bytes); a reply past it ignored its budget and fails
            ``reply_too_large``.  At least 256 bytes per ``max_tokens``.
        response_max_bytes: bytes a probe reads from the network per response
            (stream or body); past it: ``transport_error`` /
            ``response_too_large``.
        sse_line_max_bytes: bytes of one SSE line; past it: ``transport_error``
            / ``line_too_long`` (a hostile gateway cannot grow a line without
            end).
        language_coverage_cycles: the bound on the time to detect a
            one-language defect: every language of every provider
            is probed at least once in every this many consecutive cycles
            (default 4: two hours at 30-minute cycles).
        languages_per_cycle: language probes per provider per cycle; 0 (the
            default) derives the least the bound needs, ``ceil(languages /
            language_coverage_cycles)`` (17 languages in 4 cycles: 5); a
            smaller number is refused, a larger one probes more.
        language_weights: language -> its share of traffic (any positive
            numbers; ``pt=0.4,en=0.3``).  The language probes above the least
            the bound needs go to languages drawn by weight, so that
            languages_per_cycle must then be above that least.  Empty: all
            language probes walk the rotation.
        max_retests_per_cycle: at most this many retest languages (the judge's
            RetestRequested) per provider per cycle, on top of the rotation; a
            provider failing in many languages takes turns instead of adding one
            language probe per cycle without end.
        confirm_window_s: discovery sums the chat backends' live counts
            (``canary.live.<model>``) over the last this many seconds to find a
            provider whose live failures stand out from its peers'
            (:mod:`reverie_canary.services.discovery.confirm`); 0: no
            confirmation probes at all (default 600 s).
        confirm_min_served: a provider takes part in that comparison with at
            least this many live replies in the window (default 20).
        confirm_min_failures: a reason singles a provider out with at least
            this many failing live replies in the window (default 5).
        confirm_min_providers: nobody is singled out with fewer providers
            with traffic than this: a failure every provider shows is the
            model's or the prompt's (default 3).
        confirm_k: how far above its peers a provider's share of a reason must
            be: above their median plus this many scaled median absolute
            deviations (at least ``confirm_min_spread``; default 3).
        confirm_min_spread: the least spread (a share of replies, 0..1) that
            ``confirm_k`` multiplies, so identical peers do not make any
            failure stand out (default 0.02).
        confirm_max_per_provider: at most this many confirmation probes per
            provider per cycle, whatever the counts say, so forged counts cost
            a bounded number of probes (default 2; 0: none).
        judge_snapshot_events: the judge writes a snapshot of its fold (every
            model's state at a stream position, to the object store
            ``canary-judge-snapshots``) every this many events it applied, so a
            rebuild after Redis lost its state folds the log from there, not
            from its start; 0: never (default 200,000: about 8 hours of 2,000
            endpoints).
    """

    nats_url: str = "nats://127.0.0.1:4222"
    nats_user: str = ""
    nats_password: str = ""
    nats_ca_file: str = ""
    nats_cert_file: str = ""
    nats_key_file: str = ""
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_password: str = ""
    redis_ca_file: str = ""
    redis_cert_file: str = ""
    redis_key_file: str = ""
    namespace: str = "canary"

    openrouter_base_url: str = "https://openrouter.ai/api/v1"
    openrouter_api_key: str = ""
    http_referer: str = "https://github.com/reverie/reverie-canary"
    app_title: str = "reverie-canary"

    models: list[str] = field(default_factory=lambda: ["deepseek/deepseek-chat-v3.1"])
    kinds: list[str] = field(default_factory=lambda: list(PROBE_KINDS))
    languages: list[str] = field(default_factory=lambda: list(LANGUAGES))
    language_coverage_cycles: int = 4
    languages_per_cycle: int = 0
    language_weights: dict[str, float] = {}
    max_retests_per_cycle: int = 2
    controls: dict[str, str] = {}
    confirm_window_s: float = 600.0
    confirm_min_served: int = 20
    confirm_min_failures: int = 5
    confirm_min_providers: int = 3
    confirm_k: float = 3.0
    confirm_min_spread: float = 0.02
    confirm_max_per_provider: int = 2

    cycle_interval_s: float = 1800.0
    time_scale: float = 1.0
    probe_window_s: float = 600.0
    ttft_threshold_s: float = 10.0
    request_timeout_s: float = 60.0
    max_tokens: int = 320
    language_confirmations: int = 2
    reply_max_bytes: int = 256 * 1024
    response_max_bytes: int = 8 * 1024 * 1024
    sse_line_max_bytes: int = 1024 * 1024

    failed_cycles_to_suspend: int = 2
    passed_cycles_to_recover: int = 2
    ladder_s: list[float] = field(default_factory=lambda: [1 * DAY_S, 3 * DAY_S, 7 * DAY_S])
    ladder_reset_s: float = 14 * DAY_S
    min_hosts: int = 2
    unjudgeable_after: int = 6
    common_mode_share: float = 0.5
    template_tolerance_tokens: int = 2
    template_tolerance_share: float = 0.02
    template_min_providers: int = 3
    slow_vs_peers_k: float = 5.0
    slow_vs_peers_window_cycles: int = 6
    slow_vs_peers_min_providers: int = 4
    slow_vs_peers_min_spread_ms: float = 200.0
    mode: Mode = "observe"
    kind_modes: dict[str, Mode] = {}
    new_kind_default_modes: dict[str, Mode] = field(default_factory=lambda: {"tools": "observe", "template": "observe"})
    judge_snapshot_events: int = 200_000

    exclusions_file: str = ""
    prober_concurrency: int = 64
    probe_fill_share: float = 0.25
    prober_id: str = ""
    task_ack_wait_s: float = 0.0
    max_deliver: int = 5
    retry_delay_s: float = 2.0
    duplicate_window_s: float = 1200.0
    log_max_age_s: float = 35 * DAY_S
    log_max_bytes: int = 24 * GIB
    deadletter_max_bytes: int = 1 * GIB
    tasks_max_bytes: int = 1 * GIB
    stream_compression: str = "s2"
    stream_replicas: int = 1
    webhook_url: str = ""
    webhook_secret: str = ""
    webhook_min_severity: str = "info"
    notify_urls: dict[str, str] = {}
    notify_severity: dict[str, str] = {}
    notify_secrets: dict[str, str] = {}
    notify_remind_s: float = 6 * 3600.0
    notify_retry_base_s: float = 5.0
    notify_retry_max_s: float = 600.0
    notify_give_up_s: float = DAY_S
    notify_timeout_s: float = 10.0
    notify_poll_s: float = 1.0
    notify_concurrency: int = 4
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    metrics_ports: dict[str, int] = {}
    log_format: str = "console"
    log_level: str = "INFO"
    traces: str = "off"
    event_loop: str = "auto"

    def __post_init__(self) -> None:
        self.openrouter_api_key = self.openrouter_api_key.strip()
        problems = _problems(self)
        if problems:
            raise ConfigError("invalid settings: " + "; ".join(problems))
        from reverie_canary.shared.runtime.logging import redact, redact_url

        redact(self.openrouter_api_key, self.nats_password, self.redis_password, self.webhook_secret, *self.notify_secrets.values())
        for name in URL_FIELDS:
            redact_url(getattr(self, name))
        for url in (*(getattr(self, name) for name in SECRET_URL_FIELDS), *self.notify_urls.values()):
            redact_url(url, whole=True)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.public().items())
        return f"Settings({inner})"

    __str__ = __repr__

    def public(self) -> dict[str, Any]:
        """All settings as a dict, secrets masked (safe to log or print).

        Credentials are ``***``, a secret URL is ``scheme://host/***``, and a
        password inside any URL is ``***``.
        """
        from reverie_canary.shared.runtime.logging import masked_url

        data = msgspec.structs.asdict(self)
        for key in SECRET_FIELDS:
            if isinstance(data.get(key), dict):
                data[key] = dict.fromkeys(data[key], "***")
            elif data.get(key):
                data[key] = "***"
        for key in SECRET_URL_FIELDS:
            data[key] = masked_url(data[key], whole=True)
        for key in URL_FIELDS:
            data[key] = masked_url(data[key])
        return data

    def environment(self, *, with_secrets: bool = False, with_channels: bool | None = None) -> dict[str, str]:
        """These settings as the environment variables :meth:`load` reads back to the same values.

        Lists are comma-separated, dicts ``k=v`` pairs (the forms ``load``
        parses).  Without ``with_secrets`` the credentials (NATS password,
        API key, webhook and channel secrets) and the secret URLs are left out
        and a password inside a URL is masked.  ``with_channels=False`` leaves
        out the notifier's channels (:data:`CHANNEL_FIELDS`: their URLs and
        signing secrets) even with secrets, as an operator's env file must
        (its holder must not be able to sign notices); the default follows
        ``with_secrets``.
        """
        from reverie_canary.shared.runtime.logging import masked_url

        channels = with_secrets if with_channels is None else with_channels
        out: dict[str, str] = {}
        bare = {field_name: name for name, field_name in _BARE_ENV.items()}
        for field_name, value in msgspec.structs.asdict(self).items():
            if field_name in (*SECRET_FIELDS, *SECRET_URL_FIELDS) and not with_secrets:
                continue
            if field_name in CHANNEL_FIELDS and not channels:
                continue
            if field_name in URL_FIELDS and not with_secrets:
                value = masked_url(value)
            if isinstance(value, list):
                text = ",".join(str(v) for v in value)
            elif isinstance(value, dict):
                text = ",".join(f"{k}={v}" for k, v in value.items())
            else:
                text = str(value)
            out[bare.get(field_name, f"CANARY_{field_name.upper()}")] = text
        out["CANARY_CONFIG"] = ""
        return out

    def mode_for(self, kind: str) -> Mode:
        """Observe or enforce for one probe kind (``kind_modes``, then ``new_kind_default_modes``, then ``mode``)."""
        return self.kind_modes.get(kind, self.new_kind_default_modes.get(kind, self.mode))

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied and validated.

        Raises:
            ConfigError: when the result is invalid.
        """
        return _convert({**msgspec.structs.asdict(self), **changes})

    @classmethod
    def load(
        cls,
        env: Mapping[str, str] | None = None,
        config_path: str | os.PathLike[str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Build settings from defaults, TOML file, environment and overrides.

        Args:
            env: the environment (default ``os.environ``).
            config_path: a TOML file; default ``$CANARY_CONFIG`` when set.
            **overrides: final values, e.g. from command-line flags.

        Raises:
            ConfigError: when the file is unreadable or a value is invalid; the
                message names the field.
        """
        warn_unknown_variables(os.environ if env is None else env)
        env = with_secret_files(os.environ if env is None else env)
        data: dict[str, Any] = {}
        path = config_path or env.get("CANARY_CONFIG")
        if path:
            data.update(read_toml(path))
        data.update(_from_env(env))
        data.update({k: v for k, v in overrides.items() if v is not None})
        return _convert(data)


#: ``CANARY_*`` variables that are legitimately not settings (:func:`unknown_variables` leaves them be),
#: each with who reads it.  The passwords of the NATS and Redis users (``CANARY_<USER>_PASSWORD``,
#: ``CANARY_REDIS_<USER>_PASSWORD``, and their ``_FILE``) come from :mod:`reverie_canary.shared.runtime.auth`'s user lists.
NOT_SETTINGS: dict[str, str] = {
    "CANARY_CONFIG": "the settings TOML file (Settings.load)",
    "CANARY_DEBUG": "canary: print the traceback of an unexpected error (canary/cli.py)",
    "CANARY_ACTOR": "operator commands: who asks (canary/cli_ops.py)",
    "CANARY_WEB_CONFIG": "canary dashboard: its web configuration file, TLS and readers (--web-config)",
    "CANARY_NATS_CONFIG": "compose: the NATS server's configuration file (compose.yaml)",
    "CANARY_NATS_SERVER_NAME": "compose: a NATS cluster node's name (shared/nats/cluster.conf)",
    "CANARY_SCENARIO": "compose: the simulated gateway's scenario (compose.yaml)",
    "CANARY_SHARED_DIR": "tests: where shared/ is (tests/conftest.py)",
    "CANARY_SOAK_CLOCK_OFFSET_S": "the soak: the wall-clock shift of a service that jumps a cycle (tests/soak.py)",
    "CANARY_REQUIRE_BROWSER": "tests: fail, not skip, without a browser (.ci/run)",
    "CANARY_REQUIRE_SHARED": "tests: fail, not skip, without the shared data folder (.ci/run)",
    "CANARY_REQUIRE_PROMTOOL": "tests: fail, not skip, without promtool (.ci/run)",
    "CANARY_REQUIRE_MKDOCS": "tests: fail, not skip, without MkDocs (.ci/run)",
    "CANARY_WRITE_DOCS": "tests: refresh the documentation's dashboard screenshot",
    "CANARY_ARTEFACTS": "tests: where the browser tests save screenshots",
}

_warned_variables: set[str] = set()


def setting_variables() -> list[str]:
    """Every ``CANARY_*`` variable :meth:`Settings.load` reads: ``CANARY_<FIELD>``, and ``<NAME>_FILE`` of secrets."""
    return sorted({f"CANARY_{name.upper()}" for name in _FIELDS}
                  | {f"{name}_FILE" for name in _secret_variables() if name.startswith("CANARY_")})


def unknown_variables(env: Mapping[str, str]) -> dict[str, str | None]:
    """The ``CANARY_*`` variables of ``env`` that are neither a setting nor in :data:`NOT_SETTINGS`.

    Returns:
        variable -> the closest setting variable (``difflib``; ``None`` when none is close), by name.
    """
    import difflib

    from reverie_canary.shared.runtime.auth import REDIS_USERS, USERS, redis_password_variable

    settings = setting_variables()
    passwords = [*(f"CANARY_{user.upper()}_PASSWORD" for user in USERS), *map(redis_password_variable, REDIS_USERS)]
    known = {*settings, *NOT_SETTINGS, *passwords, *(f"{name}_FILE" for name in passwords)}
    out: dict[str, str | None] = {}
    for name in sorted(env):
        if name.startswith("CANARY_") and name not in known:
            # compared without the common CANARY_ prefix, which would make every name look close
            close = difflib.get_close_matches(name.removeprefix("CANARY_"), [v.removeprefix("CANARY_") for v in settings],
                                              n=1, cutoff=0.6)
            out[name] = f"CANARY_{close[0]}" if close else None
    return out


def warn_unknown_variables(env: Mapping[str, str]) -> None:
    """Warn once per process for each unknown ``CANARY_*`` variable (:func:`unknown_variables`), naming the closest setting.

    A misspelt setting in the environment (``CANARY_MIN_HOST=5``) would otherwise be silently
    ignored, while the same typo in a TOML file is refused (:func:`read_toml`).  Only a warning:
    other tools may set ``CANARY_`` variables of their own.
    """
    fresh = {name: close for name, close in unknown_variables(env).items() if name not in _warned_variables}
    if not fresh:
        return
    import logging

    from reverie_canary.shared.runtime import logging as canary_logging

    if not canary_logging._configured:  # before the service configured its logs: in the format it will use
        fmt = env.get("CANARY_LOG_FORMAT") if env.get("CANARY_LOG_FORMAT") in ("json", "console") else "console"
        canary_logging.configure(fmt, root_handler=not logging.getLogger().handlers)
    log = canary_logging.get("settings")
    for name, close in fresh.items():
        _warned_variables.add(name)
        log.warning("unknown_setting_variable", variable=name, closest=close,
                    hint=(f"{name} is not a setting and is ignored" + (f"; did you mean {close}?" if close else "")))


def sources(env: Mapping[str, str] | None = None, config_path: str | os.PathLike[str] | None = None,
            **overrides: Any) -> dict[str, str]:
    """Where each setting of ``Settings.load(env, config_path, **overrides)`` comes from.

    Returns:
        Field name -> ``default``, ``file <path>`` (the TOML file: ``config_path``
        or ``$CANARY_CONFIG``), ``environment <VARIABLE>`` or ``argument``; the
        last source that sets a value wins, as in :meth:`Settings.load`.

    Raises:
        ConfigError: when the file is unreadable or has unknown keys.
    """
    env = os.environ if env is None else env
    from_files = {name for name in _secret_variables() if env.get(f"{name}_FILE")}
    env = with_secret_files(env)
    out = dict.fromkeys(_FIELDS, "default")
    path = config_path or env.get("CANARY_CONFIG")
    if path:
        for name in read_toml(path):
            out[name] = f"file {path}"
    for name, field_name in _BARE_ENV.items():
        if env.get(name):
            out[field_name] = f"environment {name}_FILE" if name in from_files else f"environment {name}"
    for field_name in _FIELDS:
        key = f"CANARY_{field_name.upper()}"
        if env.get(key, "") != "":
            out[field_name] = f"environment {key}_FILE" if key in from_files else f"environment {key}"
    for name, value in overrides.items():
        if value is not None:
            out[name] = "argument"
    return out


def nats_servers(url: str) -> list[str]:
    """The NATS servers of ``NATS_URL``: one URL, or several comma-separated (the nodes of a cluster).

    >>> nats_servers("nats://n1:4222, nats://n2:4222")
    ['nats://n1:4222', 'nats://n2:4222']

    A client connects to one of them and learns the cluster's other nodes from
    the server; listing them all lets it start when one is down (docs/deployment/scaling.md).
    """
    return [part.strip() for part in url.split(",") if part.strip()]


_URL_SCHEMES = {
    "nats_url": ("nats://", "tls://", "ws://", "wss://"),
    "redis_url": ("redis://", "rediss://", "unix://"),
    "openrouter_base_url": ("http://", "https://"),
}
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

# The simple bounds, as tables: :func:`_problems` checks them and the settings reference
# (``canary docs``) prints them, so the two cannot drift apart.  Rules between settings
# (``probe_window_s`` below ``cycle_interval_s`` ...) are checked in :func:`_problems` and
# said in each setting's line of the :class:`Settings` docstring; :data:`RELATIONS` names them.

#: Numbers that must be above zero.
POSITIVE: tuple[str, ...] = ("cycle_interval_s", "ttft_threshold_s", "request_timeout_s", "retry_delay_s",
                             "duplicate_window_s", "log_max_age_s", "notify_remind_s", "notify_retry_base_s",
                             "notify_retry_max_s", "notify_give_up_s", "notify_timeout_s", "notify_poll_s")
#: The least value of a count.
AT_LEAST: dict[str, int] = {"min_hosts": 0, "failed_cycles_to_suspend": 1, "passed_cycles_to_recover": 1,
                            "language_coverage_cycles": 1, "languages_per_cycle": 0, "max_retests_per_cycle": 0,
                            "prober_concurrency": 1, "max_deliver": 1, "language_confirmations": 0,
                            "unjudgeable_after": 1, "max_tokens": 16, "judge_snapshot_events": 0,
                            "notify_concurrency": 1, "confirm_min_served": 1, "confirm_min_failures": 1,
                            "confirm_min_providers": 2, "confirm_max_per_provider": 0,
                            "template_tolerance_tokens": 0, "template_min_providers": 3,
                            "slow_vs_peers_window_cycles": 1, "slow_vs_peers_min_providers": 4}
#: The least size of a stream's byte bound (a stream smaller than this holds too little to be useful).
AT_LEAST_BYTES: dict[str, int] = {"log_max_bytes": 64 * 1024 ** 2, "deadletter_max_bytes": 16 * 1024 ** 2,
                                  "tasks_max_bytes": 16 * 1024 ** 2}
#: The values a setting may take (``log_level`` in any case).
CHOICES: dict[str, tuple[Any, ...]] = {
    "stream_compression": ("s2", "none"),
    "stream_replicas": (1, 3, 5),
    "log_format": ("console", "json"),
    "log_level": _LOG_LEVELS,
    "event_loop": ("auto", "uvloop", "asyncio"),
    "traces": ("off", "otlp"),
    "mode": ("observe", "enforce"),
    "webhook_min_severity": SEVERITIES,
}
#: The other rules :func:`_problems` checks, in words, by setting (the reference prints them).
RELATIONS: dict[str, str] = {
    "models": "at least one non-empty model id",
    "probe_window_s": "> 0 and below `cycle_interval_s`",
    "time_scale": ">= 1 (1: real time; the demo's compression above it)",
    "probe_fill_share": "> 0 and <= 1",
    "confirm_window_s": ">= 0 (0: no confirmation probes)",
    "confirm_k": "> 0",
    "confirm_min_spread": ">= 0 and <= 1",
    "prober_concurrency": f"<= {MAX_TASK_CONCURRENCY}",
    "ladder_s": "at least one length, each > 0",
    "reply_max_bytes": "at least 256 bytes per `max_tokens`",
    "response_max_bytes": ">= `reply_max_bytes`",
    "sse_line_max_bytes": ">= 65536 and <= `response_max_bytes`",
    "kinds": "known probe kinds, at least one",
    "languages": "known languages, each once, at least one",
    "languages_per_cycle": "0, or at least `ceil(languages / language_coverage_cycles)` (more when weighted)",
    "language_weights": "configured languages, finite shares >= 0",
    "controls": "keys are probe kinds",
    "kind_modes": "keys are probe kinds or template; values observe or enforce",
    "common_mode_share": "> 0 and <= 1",
    "template_tolerance_share": ">= 0 and < 1",
    "slow_vs_peers_k": "> 0",
    "slow_vs_peers_min_spread_ms": ">= 0",
    "metrics_port": "-1 to 65535",
    "metrics_ports": "keys are services; ports -1 to 65535",
    "metrics_host": "an address to bind",
    "notify_retry_max_s": ">= `notify_retry_base_s`",
    "notify_urls": "channel names of 1-32 of `[a-z0-9_-]`; `webhook` only when `webhook_url` is unset",
    "notify_severity": "keys are channels; values info, warning or critical",
    "notify_secrets": "keys are channels",
    "nats_url": "each of the list starts with nats://, tls://, ws:// or wss://",
    "redis_url": "starts with redis://, rediss:// or unix://",
    "openrouter_base_url": "starts with http:// or https://",
    "nats_cert_file": "with `nats_key_file`; any NATS TLS file needs a TLS URL",
    "redis_cert_file": "with `redis_key_file`",
}


def _problems(s: Settings) -> list[str]:
    """Every reason ``s`` is unusable, each naming its field (empty: valid)."""
    problems: list[str] = []
    for f in msgspec.structs.fields(Settings):
        value = getattr(s, f.name)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, float) and not math.isfinite(v) for v in values):
            problems.append(f"{f.name} must be a finite number")
    if not s.models or any(not m.strip() for m in s.models):
        problems.append("models: at least one non-empty model id is needed")
    if s.cycle_interval_s <= 0:
        problems.append("cycle_interval_s must be > 0")
    if not s.time_scale >= 1:
        problems.append("time_scale must be >= 1 (1: real time; the demo's compression above it)")
    if not 0 < s.probe_window_s < s.cycle_interval_s:
        problems.append("probe_window_s must be > 0 and below cycle_interval_s")
    for name in POSITIVE:
        if getattr(s, name) <= 0:
            problems.append(f"{name} must be > 0")
    if not (math.isfinite(s.confirm_window_s) and s.confirm_window_s >= 0):
        problems.append("confirm_window_s must be >= 0 seconds (0: no confirmation probes)")
    if not (math.isfinite(s.confirm_k) and s.confirm_k > 0):
        problems.append("confirm_k must be > 0 (scaled deviations above the peers' median)")
    if not (math.isfinite(s.confirm_min_spread) and 0 <= s.confirm_min_spread <= 1):
        problems.append("confirm_min_spread must be between 0 and 1 (a share of replies)")
    if not 0 < s.probe_fill_share <= 1:
        problems.append("probe_fill_share must be > 0 and at most 1 (the share of probe_window_s a cycle's probes "
                        "are sized to take)")
    if s.prober_concurrency > MAX_TASK_CONCURRENCY:
        problems.append(f"prober_concurrency must be <= {MAX_TASK_CONCURRENCY}")
    if not s.ladder_s or any(x <= 0 for x in s.ladder_s):
        problems.append("ladder_s needs at least one positive length")
    for name, least in AT_LEAST.items():
        if getattr(s, name) < least:
            problems.append(f"{name} must be >= {least}")
    for name, least in AT_LEAST_BYTES.items():
        if getattr(s, name) < least:
            problems.append(f"{name} must be >= {least} bytes")
    if s.stream_compression not in CHOICES["stream_compression"]:
        problems.append("stream_compression must be s2 or none")
    if s.stream_replicas not in CHOICES["stream_replicas"]:
        problems.append("stream_replicas must be 1, 3 or 5 (a JetStream cluster of that many servers or more)")
    if s.reply_max_bytes < 256 * s.max_tokens:
        problems.append(f"reply_max_bytes must be >= 256 bytes per max_tokens ({256 * s.max_tokens})")
    if s.response_max_bytes < s.reply_max_bytes:
        problems.append("response_max_bytes must be >= reply_max_bytes")
    if not 64 * 1024 <= s.sse_line_max_bytes <= s.response_max_bytes:
        problems.append("sse_line_max_bytes must be >= 65536 and <= response_max_bytes")
    unknown = sorted(set(s.kinds) - set(PROBE_KINDS))
    if unknown or not s.kinds:
        problems.append(f"kinds: unknown or none {unknown}; known: {list(PROBE_KINDS)}")
    bad_languages = sorted(set(s.languages) - set(LANGUAGES))
    if bad_languages or not s.languages or len(set(s.languages)) != len(s.languages):
        problems.append(f"languages: unknown, repeated or none {bad_languages}; known: {list(LANGUAGES)}")
    problems.extend(_language_problems(s))
    bad = sorted(set(s.controls) - set(PROBE_KINDS))
    if bad:
        problems.append(f"controls: unknown probe kinds {bad}")
    for name, mapping in (("kind_modes", s.kind_modes), ("new_kind_default_modes", s.new_kind_default_modes)):
        bad = sorted(set(mapping) - set(JUDGED_KINDS))  # a fact kind (template) has a mode too
        if bad:
            problems.append(f"{name}: unknown probe kinds {bad}; known: {list(JUDGED_KINDS)}")
    if not 0 < s.common_mode_share <= 1:
        problems.append("common_mode_share must be in (0, 1]")
    if not 0 <= s.template_tolerance_share < 1:
        problems.append("template_tolerance_share must be >= 0 and below 1")
    if s.slow_vs_peers_k <= 0:
        problems.append("slow_vs_peers_k must be > 0")
    if s.slow_vs_peers_min_spread_ms < 0:
        problems.append("slow_vs_peers_min_spread_ms must be >= 0")
    if not -1 <= s.metrics_port <= 65535:
        problems.append("metrics_port must be a TCP port (0: the standard ports, -1: no endpoint)")
    for name, port in s.metrics_ports.items():
        if name not in SERVICE_NAMES:
            problems.append(f"metrics_ports: unknown service {name!r}; services: {', '.join(SERVICE_NAMES)}")
        elif not -1 <= port <= 65535:
            problems.append(f"metrics_ports: {name} must have a TCP port (0: any free port, -1: no endpoint)")
    if not s.metrics_host.strip():
        problems.append("metrics_host must be an address to bind (127.0.0.1, 0.0.0.0, ::)")
    problems.extend(_notify_problems(s))
    if s.log_level.upper() not in CHOICES["log_level"]:
        problems.append(f"log_level must be one of {list(_LOG_LEVELS)}")
    if s.log_format not in CHOICES["log_format"]:
        problems.append("log_format must be console or json")
    if s.event_loop not in CHOICES["event_loop"]:
        problems.append("event_loop must be auto, uvloop or asyncio (canary/loops.py)")
    if s.traces not in CHOICES["traces"]:
        problems.append("traces must be off or otlp (OTLP over HTTP, the [otel] extra; shared/runtime/tracing.py)")
    for name, schemes in _URL_SCHEMES.items():
        urls = nats_servers(s.nats_url) if name == "nats_url" else [getattr(s, name)]
        if not urls or not all(url.startswith(schemes) for url in urls):
            problems.append(f"{name} must start with one of {list(schemes)}"
                            + (" (each of a comma-separated list)" if name == "nats_url" else ""))
    problems.extend(_tls_problems(s))
    key = s.openrouter_api_key
    if key and (not key.isascii() or not key.isprintable() or any(c.isspace() for c in key)):
        # never echo the value: it is a secret
        problems.append("OPENROUTER_API_KEY contains spaces, control or non-ASCII characters")
    return problems


#: The URL schemes that mean TLS, per connection.
TLS_SCHEMES = {"nats": ("tls://", "wss://"), "redis": ("rediss://",)}


def _tls_problems(s: Settings) -> list[str]:
    """TLS files: readable, a certificate with its key, and NATS's only with a URL that uses TLS.

    (Redis's files with a plain ``redis://`` URL are refused where a Redis connection is made,
    :func:`reverie_canary.shared.runtime.tls.redis_tls`: every service but the prober.)
    """
    problems: list[str] = []
    for system in ("nats", "redis"):
        url = getattr(s, f"{system}_url")
        files = {kind: getattr(s, f"{system}_{kind}_file") for kind in ("ca", "cert", "key")}
        for kind, path in files.items():
            if path and not os.path.isfile(path):
                problems.append(f"{system}_{kind}_file: no readable file at {path}")
        if bool(files["cert"]) != bool(files["key"]):
            problems.append(f"{system}_cert_file and {system}_key_file: a client certificate needs both")
        if system == "nats" and any(files.values()) and not url.startswith(TLS_SCHEMES[system]):
            problems.append(f"{system}_ca_file / _cert_file / _key_file are set but {system}_url does not use TLS "
                            f"(start it with {' or '.join(TLS_SCHEMES[system])}): the connection would be plain text")
    return problems


def _language_problems(s: Settings) -> list[str]:
    """The language coverage: weights of configured languages, a spread that keeps the bound."""
    problems = []
    unknown = sorted(set(s.language_weights) - set(s.languages))
    if unknown:
        problems.append(f"language_weights: languages not configured {unknown}")
    if any(not math.isfinite(w) or w < 0 for w in s.language_weights.values()):
        problems.append("language_weights must be finite shares >= 0")
    if s.language_coverage_cycles >= 1 and s.languages_per_cycle >= 0 and s.languages:
        try:
            coverage(len(s.languages), s.language_coverage_cycles, s.languages_per_cycle,
                     weighted=any(w > 0 for w in s.language_weights.values()))
        except CoverageError as exc:
            problems.append(str(exc))
    return problems


_CHANNEL_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


def _notify_problems(s: Settings) -> list[str]:
    """The notifier's settings: channel names, severities, the schedule (URLs and secrets never echoed)."""
    problems: list[str] = []
    if s.notify_retry_max_s < s.notify_retry_base_s:
        problems.append("notify_retry_max_s must be >= notify_retry_base_s")
    if s.webhook_min_severity not in SEVERITIES:
        problems.append(f"webhook_min_severity must be one of {list(SEVERITIES)}")
    bad = sorted(n for n in s.notify_urls if not _CHANNEL_NAME.match(n))
    if bad:
        problems.append(f"notify_urls: channel names must be 1-32 of [a-z0-9_-]: {bad}")
    if s.webhook_url and "webhook" in s.notify_urls:
        problems.append("webhook_url and notify_urls['webhook'] name the same channel: set one")
    channels = set(s.notify_urls) | ({"webhook"} if s.webhook_url else set())
    for name, mapping in (("notify_severity", s.notify_severity), ("notify_secrets", s.notify_secrets)):
        unknown = sorted(set(mapping) - channels)
        if unknown:
            problems.append(f"{name}: no channel named {unknown} in notify_urls")
    wrong = sorted(k for k, v in s.notify_severity.items() if v not in SEVERITIES)
    if wrong:
        problems.append(f"notify_severity: {wrong} must be one of {list(SEVERITIES)}")
    return problems


_FIELDS = {f.name: f for f in msgspec.structs.fields(Settings)}
_BARE_ENV = {
    "NATS_URL": "nats_url",
    "NATS_USER": "nats_user",
    "NATS_PASSWORD": "nats_password",
    "REDIS_URL": "redis_url",
    "REDIS_PASSWORD": "redis_password",
    "OPENROUTER_BASE_URL": "openrouter_base_url",
    "OPENROUTER_API_KEY": "openrouter_api_key",
}


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a settings TOML file (top-level keys, or a ``[canary]`` table).

    Raises:
        ConfigError: when the file is missing, not TOML, or has unknown keys.
    """
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read settings file {path}: {exc}") from exc
    table = raw.get("canary", raw)
    unknown = sorted(set(table) - set(_FIELDS))
    if unknown:
        raise ConfigError(f"{path}: unknown settings {unknown}")
    return dict(table)


#: Largest secret file read (a password, a key, a URL or a few channel URLs; Docker and Kubernetes
#: secrets are files of about that size).
SECRET_FILE_MAX_BYTES = 64 * 1024


def _secret_variables() -> list[str]:
    """Environment variables that also accept ``<NAME>_FILE``: every credential and every URL that may carry one."""
    fields = (*SECRET_FIELDS, *SECRET_URL_FIELDS, *URL_FIELDS)
    bare = [name for name, field_name in _BARE_ENV.items() if field_name in fields]
    return [*bare, *(f"CANARY_{name.upper()}" for name in fields)]


def with_secret_files(env: Mapping[str, str]) -> Mapping[str, str]:
    """``env`` with every ``<NAME>_FILE`` of a secret setting read into ``<NAME>``.

    The Docker / Kubernetes secrets convention: ``OPENROUTER_API_KEY_FILE=/run/secrets/openrouter``
    stands for ``OPENROUTER_API_KEY`` set to the file's content, read once (at start) with one
    trailing newline (``\\n`` or ``\\r\\n``) stripped.  The names that accept it are
    :func:`_secret_variables`: ``NATS_URL``, ``NATS_PASSWORD``, ``REDIS_URL``, ``OPENROUTER_BASE_URL``,
    ``OPENROUTER_API_KEY`` and ``CANARY_<FIELD>`` of every credential or URL field.  The content is
    never printed, not even in an error.

    Raises:
        ConfigError: when both ``<NAME>`` and ``<NAME>_FILE`` are set, or the file is missing,
            unreadable, larger than :data:`SECRET_FILE_MAX_BYTES` or not UTF-8 (the message names
            the variable and the path).
    """
    changes: dict[str, str] = {}
    for name in _secret_variables():
        path = env.get(f"{name}_FILE", "")
        if not path:
            continue
        if env.get(name, ""):
            raise ConfigError(f"{name} and {name}_FILE are both set: set one of them")
        changes[name] = read_secret_file(name, path)
    return {**env, **changes} if changes else env


def read_secret_file(name: str, path: str) -> str:
    """The content of the secret file ``path`` given as ``<name>_FILE``, one trailing newline stripped.

    Raises:
        ConfigError: when the file is missing, unreadable, larger than :data:`SECRET_FILE_MAX_BYTES`
            or not UTF-8 (the message names the variable and the path, never the content).
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read(SECRET_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{name}_FILE: cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > SECRET_FILE_MAX_BYTES:
        raise ConfigError(f"{name}_FILE: {path} is larger than {SECRET_FILE_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{name}_FILE: {path} is not UTF-8 text") from None
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    return text


def _split_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field_name in _BARE_ENV.items():
        if env.get(name):
            out[field_name] = env[name]
    for field_name, fld in _FIELDS.items():
        key = f"CANARY_{field_name.upper()}"
        value = env.get(key, "")
        if value == "":  # unset and empty mean the same: the default (compose writes ${X:-})
            continue
        default = fld.default
        if default is msgspec.NODEFAULT and fld.default_factory is not msgspec.NODEFAULT:
            default = fld.default_factory()
        if isinstance(default, list):
            out[field_name] = _split_list(value)
        elif isinstance(default, dict):
            pairs = {}
            for item in _split_list(value):
                k, sep, v = item.partition("=")
                if not sep:
                    raise ConfigError(f"{key}: expected key=value pairs, got {item!r}")
                pairs[k.strip()] = v.strip()
            out[field_name] = pairs
        else:
            out[field_name] = value
    return out


def _convert(data: dict[str, Any]) -> Settings:
    try:
        return msgspec.convert(data, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid settings: {exc}") from exc
