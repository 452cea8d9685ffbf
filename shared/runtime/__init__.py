"""The runtime every service shares: the way in and out of NATS, settings, logs, metrics, health.

It uses the contract (:mod:`reverie_canary.shared.contract`) and never a service: the broker and
the service shell, stream and consumer declarations, settings, structured logs, metrics and
traces, TLS and credentials, retries and the clock.
"""
