"""The simulated OpenRouter gateway and its scenarios.

An honest stand-in for the real gateway: same HTTP surface and wire format
(OpenRouter's API documentation), a scripted fleet of providers with
faults (:mod:`reverie_canary.simulator.scenario`), served by uvicorn on a real socket
(:mod:`reverie_canary.simulator.server`).  ``python -m reverie_canary.simulator --scenario default``.
"""

#: The API key the canary sends to the simulated gateway (``canary demo``, ``canary probe
#: --simulate``, the tests): the gateway answers 401 to chat completions without a Bearer key
#: (``require_key``, on in every packaged scenario) and accepts any key.  Not a secret.
SIMULATED_KEY = "sk-or-v1-simulated-gateway-key"
