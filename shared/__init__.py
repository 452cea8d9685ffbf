"""reverie-canary's common code, in two packages whose imports point one way.

- :mod:`reverie_canary.shared.contract`: the wire contract (events, commands, snapshots, subjects,
  ids, codec, bounds, errors, the input table);
- :mod:`reverie_canary.shared.runtime`: the runtime (broker, service shell, streams, settings,
  logging, metrics, tracing, TLS, auth).

The runtime uses the contract, never the reverse; neither imports a service.  The NATS and Redis
configuration templates (``nats/``, ``redis/``) ship with this package.
"""
