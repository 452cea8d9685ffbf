"""The simulated OpenRouter gateway and its scenarios.

An honest stand-in for the real gateway: same HTTP surface and wire format
(OpenRouter's API documentation), a scripted fleet of providers with
faults (:mod:`reverie_canary.simulator.scenario`), served by uvicorn on a real socket
(:mod:`reverie_canary.simulator.server`).  ``python -m reverie_canary.simulator --scenario default``.
"""
