"""The client's health: ``connected`` and ``problem`` never contradict each other.

The callbacks are nats-py's (disconnected, reconnected, error): called here in the
order an outage calls them, without a server.
"""

from __future__ import annotations

import asyncio

from reverie_canary.client import IgnoreListClient

URL = "nats://127.0.0.1:4222"


def test_after_a_reconnect_the_problem_no_longer_says_the_connection_is_lost():
    """lost -> connected=False and 'lost'; reconnected -> connected=True and a problem that says so (until a read)."""
    client = IgnoreListClient(URL, "acme/chat-1")

    async def outage():
        client.connected = True
        await client._disconnected()
        lost = (client.connected, client.problem)
        await client._error(OSError("connection refused"))
        refused = (client.connected, client.problem)
        await client._reconnected()
        return lost, refused, (client.connected, client.problem)

    lost, refused, back = asyncio.run(outage())
    assert lost[0] is False and "lost" in lost[1]
    assert refused[0] is False and "unreachable" in refused[1]
    assert back[0] is True and "lost" not in back[1] and "unreachable" not in back[1]
    assert back[1].startswith("connected to NATS at nats://127.0.0.1:4222; reading the current snapshot again")


def test_a_problem_that_is_not_the_connections_stays_after_a_reconnect():
    """A missing bucket is still missing when the connection returns: only the connection's own problem changes."""
    client = IgnoreListClient(URL, "acme/chat-1")
    client._set_problem("the KV bucket canary-routing does not exist yet (`canary init` creates it)")
    asyncio.run(client._reconnected())
    assert client.connected and client.problem.startswith("the KV bucket")


def test_a_setting_no_reconnect_heals_is_said_in_health_and_never_with_the_password(monkeypatch, caplog):
    """nats.connect raising what is not a NATS or socket error (a bad TLS or URL setting): the follower
    stops, and health says it will get no newer snapshot -- never a silent task death with problem None."""
    import nats

    async def refuse(*args, **kwargs):
        raise ValueError("bad option for nats://alice:s3cret@127.0.0.1:4222")

    monkeypatch.setattr(nats, "connect", refuse)
    client = IgnoreListClient("nats://alice:s3cret@127.0.0.1:4222", "acme/chat-1", user="alice", password="s3cret")

    async def follow():
        await client.start()
        for _ in range(100):  # bounded: at most 2 s
            if client.problem is not None and "cannot follow" in client.problem:
                break
            await asyncio.sleep(0.02)
        health = client.health()
        await client.stop()
        return health

    health = asyncio.run(follow())
    assert health.connected is False and health.problem is not None
    assert "no newer one will come" in health.problem and "ValueError" in health.problem
    assert "s3cret" not in health.problem and "s3cret" not in caplog.text


def test_before_the_bus_first_answers_health_says_the_list_is_not_known_current():
    """Started, NATS not answering yet: problem says so at once (a health endpoint polled at boot is not told
    all is well for the 2 s of the first connect attempt); found by a fresh tester."""
    import socket

    holder = socket.socket()  # a port that accepts nothing: the connect attempt hangs until its timeout
    holder.bind(("127.0.0.1", 0))
    holder.listen(0)
    url = f"nats://127.0.0.1:{holder.getsockname()[1]}"
    client = IgnoreListClient(url, "acme/chat-1")

    async def boot():
        await client.start()
        early = client.health()
        await client.stop()
        return early

    try:
        early = asyncio.run(boot())
    finally:
        holder.close()
    assert early.connected is False and early.problem is not None
    assert "not answered yet" in early.problem and "no snapshot" in early.problem
