"""The simulated gateway in a process of its own, for tests that measure the prober against it.

On the test's own event loop the gateway's replies wait behind whatever else the process runs
(the checks' threads hold the GIL): a healthy host's 0.1 s first token can miss a 1 s bar on a busy
machine.  A real gateway is remote; so is this one.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx

from reverie_canary.canary.embedded import free_port
from tests import waits


@contextlib.asynccontextmanager
async def simulator_process(scenario: str, *, start_timeout_s: float = 60.0) -> AsyncIterator[str]:
    """Run ``python -m reverie_canary.simulator --scenario <scenario>``; yield its base URL (``.../api/v1``).

    Raises:
        TimeoutError: the gateway did not answer its models listing within ``start_timeout_s``.
    """
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario", scenario,
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api/v1"
    try:
        async with httpx.AsyncClient(timeout=2.0) as http:
            async def up() -> bool:
                try:
                    return (await http.get(url + "/models")).status_code == 200
                except httpx.HTTPError:
                    return False

            await waits.until(up, timeout_s=start_timeout_s, what=f"the simulated gateway ({scenario}) answers")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
