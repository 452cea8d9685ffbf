"""reverie-canary's chat-backend side: follow a model's ignore list and guard its replies, no heavier than that.

``pip install reverie-canary-client`` (built from the ``client/`` folder of the
reverie-canary repository) installs this package only, with nats-py and msgspec:

    from reverie_canary.client import IgnoreListClient

    client = IgnoreListClient(nats_url, "deepseek/deepseek-chat-v3.1", user="backend", password=...)
    # over TLS: IgnoreListClient("tls://nats:4222", ..., tls=tls_context("ca.pem", "backend.pem", "backend.key"))
    await client.start()
    body["provider"] = client.provider({"sort": "latency"})

    guard = ReplyGuard(client)            # the reply guard: verdicts, one retry elsewhere, live counts
    attempt = guard.attempt(body)

The wire types here (:class:`IgnoreSnapshot` and its entries, the slug encoding
of subjects and KV keys) are the ones the canary's services use: they are
defined once, in this distribution, and the main one depends on it.
"""

from reverie_canary.client.guard import Attempt, GuardPolicy, ReplyGuard, StreamGuard, Verdict
from reverie_canary.client.ignore_list import ClientHealth, IgnoreListClient, snapshot_bytes
from reverie_canary.client.served import (
    LiveCounts,
    LiveOutcomes,
    LiveRecorder,
    ServedCounts,
    ServedRecorder,
    decode_counts,
    decode_live,
)
from reverie_canary.client.subjects import (
    ROUTING_BUCKET,
    SubjectError,
    decode_token,
    encode_token,
    kv_key,
    live,
    routing,
    served,
)
from reverie_canary.client.tls import tls_context
from reverie_canary.client.wire import (
    IgnoreEntry,
    IgnoreReason,
    IgnoreSnapshot,
    SnapshotUndecodable,
    decode_snapshot,
)

__all__ = [
    "ReplyGuard", "Attempt", "StreamGuard", "Verdict", "GuardPolicy", "ClientHealth",
    "LiveCounts", "LiveOutcomes", "LiveRecorder", "decode_live", "live",
    "IgnoreListClient", "snapshot_bytes", "tls_context", "ServedCounts", "ServedRecorder", "decode_counts", "served",
    "IgnoreEntry", "IgnoreReason", "IgnoreSnapshot", "SnapshotUndecodable", "decode_snapshot",
    "ROUTING_BUCKET", "SubjectError", "decode_token", "encode_token", "kv_key", "routing",
]
