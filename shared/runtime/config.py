"""Each service's settings as a small typed config of its own, read from the one loader.

:meth:`reverie_canary.shared.runtime.settings.Settings.load` is the one loader (environment,
``CANARY_*`` variables, secret files, a config file; every value checked at once, one line
per problem); :func:`config_of` takes from it the fields one consumer reads, by name, into
that consumer's frozen Struct.  A config's fields have the names (and meanings, documented
with the settings) of the settings they come from, so a service reads ``config.models``
where it read ``settings.models``.  Which consumer reads which setting is this table, checked
by ``tests/unit/test_configs.py`` (every setting is some config's, every config field is a
setting of the same type):

================= =============================================================================
config            reads
================= =============================================================================
RuntimeConfig     every service's runtime: NATS and Redis (URLs, credentials, TLS files), the
                  namespace, the models, the settle table's budget, metrics, logs, traces, loop
StreamsConfig     the streams and consumers (``canary init``; every service's best effort)
DiscoveryConfig   the cycle clock, the plan (kinds, languages, controls, retests), the sizing,
                  the gateway's listing
ProberConfig      the probe requests (gateway, timeouts, read bounds), confirmations, ceiling
JudgeConfig       the policy (streaks, ladder, floor, common mode, modes), snapshots
RouterConfig      the capacity floor, the reviewed exclusions file
NotifierConfig    channels, severities, schedule, concurrency
================= =============================================================================
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import msgspec
from msgspec import Struct

from reverie_canary.shared.runtime.settings import Settings

Mode = Literal["observe", "enforce"]
C = TypeVar("C", bound=Struct)


class RuntimeConfig(Struct, frozen=True, kw_only=True):
    """What the shell of every service reads: its connections, the models, the settle table, observability."""

    nats_url: str
    nats_user: str
    nats_password: str
    nats_ca_file: str
    nats_cert_file: str
    nats_key_file: str
    redis_url: str
    redis_password: str
    redis_ca_file: str
    redis_cert_file: str
    redis_key_file: str
    namespace: str
    models: list[str]
    time_scale: float  # read by the read model (canary status, the dashboard): its figures per day
    max_deliver: int
    retry_delay_s: float
    metrics_host: str
    metrics_port: int
    metrics_ports: dict[str, int]
    log_format: str
    log_level: str
    traces: str
    event_loop: str


class StreamsConfig(Struct, frozen=True, kw_only=True):
    """The streams' limits and the consumers' timing (:mod:`reverie_canary.shared.runtime.streams`)."""

    cycle_interval_s: float
    probe_window_s: float
    task_ack_wait_s: float
    max_deliver: int
    duplicate_window_s: float
    log_max_age_s: float
    log_max_bytes: int
    deadletter_max_bytes: int
    tasks_max_bytes: int
    stream_compression: str
    stream_replicas: int


class DiscoveryConfig(Struct, frozen=True, kw_only=True):
    """The cycle clock, the plan of each cycle and its sizing, the gateway's listing."""

    models: list[str]
    openrouter_base_url: str
    openrouter_api_key: str
    http_referer: str
    app_title: str
    kinds: list[str]
    languages: list[str]
    language_coverage_cycles: int
    languages_per_cycle: int
    language_weights: dict[str, float]
    max_retests_per_cycle: int
    controls: dict[str, str]
    cycle_interval_s: float
    probe_window_s: float
    prober_concurrency: int
    probe_fill_share: float
    confirm_window_s: float
    confirm_min_served: int
    confirm_min_failures: int
    confirm_min_providers: int
    confirm_k: float
    confirm_min_spread: float
    confirm_max_per_provider: int


class ProberConfig(Struct, frozen=True, kw_only=True):
    """The probe requests and what a prober runs at once."""

    openrouter_base_url: str
    openrouter_api_key: str
    http_referer: str
    app_title: str
    kinds: list[str]
    ttft_threshold_s: float
    request_timeout_s: float
    max_tokens: int
    language_confirmations: int
    reply_max_bytes: int
    response_max_bytes: int
    sse_line_max_bytes: int
    prober_concurrency: int
    prober_id: str


class JudgeConfig(Struct, frozen=True, kw_only=True):
    """The judge's policy and its snapshots."""

    models: list[str]
    kinds: list[str]
    cycle_interval_s: float
    failed_cycles_to_suspend: int
    passed_cycles_to_recover: int
    ladder_s: list[float]
    ladder_reset_s: float
    min_hosts: int
    unjudgeable_after: int
    common_mode_share: float
    mode: Mode
    kind_modes: dict[str, Mode]
    new_kind_default_modes: dict[str, Mode]
    judge_snapshot_events: int
    template_tolerance_tokens: int
    template_tolerance_share: float
    template_min_providers: int
    slow_vs_peers_k: float
    slow_vs_peers_window_cycles: int
    slow_vs_peers_min_providers: int
    slow_vs_peers_min_spread_ms: float


class RouterConfig(Struct, frozen=True, kw_only=True):
    """The router's guard rails and its reviewed exclusions."""

    models: list[str]
    min_hosts: int
    exclusions_file: str


class NotifierConfig(Struct, frozen=True, kw_only=True):
    """The notifier's channels and delivery schedule (URLs and secrets: never printed)."""

    webhook_url: str
    webhook_secret: str
    webhook_min_severity: str
    notify_urls: dict[str, str]
    notify_severity: dict[str, str]
    notify_secrets: dict[str, str]
    notify_remind_s: float
    notify_retry_base_s: float
    notify_retry_max_s: float
    notify_give_up_s: float
    notify_timeout_s: float
    notify_poll_s: float
    notify_concurrency: int


#: Every config, by who reads it.
CONFIGS: dict[str, type[Struct]] = {
    "runtime": RuntimeConfig,
    "streams": StreamsConfig,
    "discovery": DiscoveryConfig,
    "prober": ProberConfig,
    "judge": JudgeConfig,
    "router": RouterConfig,
    "notifier": NotifierConfig,
}


def config_of(settings: Settings, kind: type[C]) -> C:
    """The config ``kind`` with its fields taken, by name, from ``settings`` (loaded and checked already)."""
    values: dict[str, Any] = {f.name: getattr(settings, f.name) for f in msgspec.structs.fields(kind)}
    return kind(**values)
