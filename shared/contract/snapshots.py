"""The IgnoreSnapshot: the merged ``provider.ignore`` list of one model.

Defined in the chat backend's client distribution (:mod:`reverie_canary.client.wire`),
which the main one depends on, so that the wire type exists once; re-exported here
for the services.  Written by the router to the KV bucket ``canary-routing`` (key:
the encoded model id) and published on ``canary.routing.<model>`` (docs/concepts/routing.md).
"""

from reverie_canary.client.wire import IgnoreEntry, IgnoreReason, IgnoreSnapshot  # noqa: F401  (re-exported)
