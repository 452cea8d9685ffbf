"""Run the ``canary`` command line as a subprocess, as an operator (or another NATS user) would.

Shared by the integration tests that drive operator commands against servers of
their own (``tests/integration/test_ops_cli.py``, ``test_notifier_service.py``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from tests import waits

ROOT = Path(__file__).resolve().parents[1]


async def run_canary(infra, *args: str, model: str, user: str = "operator",
                     timeout_s: float = 60) -> tuple[int, str, str]:
    """Run ``python -m reverie_canary.canary ARGS`` as NATS user ``user``; returns (exit status, stdout, stderr).

    The environment is this process's without any ``CANARY_*``, ``NATS_*`` or
    ``REDIS_*`` variable, then ``infra``'s servers, namespace and ``user``'s
    password, ``CANARY_MODELS=model``, the actor ``alice`` and WARNING logs.

    Raises:
        tests.waits.WaitTimeout: the command did not exit within ``timeout_s`` (it is killed).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANARY_", "NATS_", "REDIS_"))}
    env.update(NATS_URL=infra.nats_url, NATS_USER=user, NATS_PASSWORD=infra.passwords[user],
               REDIS_URL=infra.redis_url, CANARY_NAMESPACE=infra.namespace, CANARY_MODELS=model,
               CANARY_ACTOR="alice", CANARY_LOG_LEVEL="WARNING")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "reverie_canary.canary", *args, cwd=ROOT, env=env,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = await waits.within(proc.communicate(), timeout_s=timeout_s, what=f"canary {' '.join(args)} to exit")
    except waits.WaitTimeout:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode, out.decode(), err.decode()
