"""A Redis user per service (shared/redis/users.acl), on a real redis-server.

Each service's user reaches its own keys with its own store and nothing of another
service's (nor of another namespace); the operators' reader reads all and writes none;
the default user is off; a service whose Redis credential is refused stops at start
with one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, NoPermissionError

from reverie_canary.canary.embedded import start_nats, start_redis
from reverie_canary.canary.runtime import running
from reverie_canary.services.judge.core import initial
from reverie_canary.services.judge.store import JudgeRecord, RedisJudgeStore
from reverie_canary.services.router.store import RedisRouterStore, RouterRecord
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime.auth import (
    REDIS_SERVICE_USERS,
    generate_redis_passwords,
    redis_url_for,
    render_redis_acl,
)
from reverie_canary.shared.runtime.settings import Settings

pytestmark = pytest.mark.integration

CANARY = Path(sys.executable).parent / "canary"
MODEL = "deepseek/deepseek-chat-v3.1"


class AclRedis:
    """A redis-server running the rendered ACL of one namespace."""

    def __init__(self, tmp_path: Path) -> None:
        self.namespace = f"t{uuid.uuid4().hex[:8]}"
        self.passwords = generate_redis_passwords()
        self.server = start_redis(tmp_path / "redis", acl=render_redis_acl(self.passwords, self.namespace))

    def url(self, user: str, password: str | None = None) -> str:
        return redis_url_for(self.server.url, user, self.passwords[user] if password is None else password)

    def client(self, user: str) -> aioredis.Redis:
        return aioredis.from_url(self.url(user), driver_info=None)

    def own_key(self, user: str) -> str:
        """A key each service owns, as its store names it."""
        return {"discovery": f"{self.namespace}:retest:m:1", "judge": f"{self.namespace}:judge:m",
                "router": f"{self.namespace}:router:record", "notifier": f"{self.namespace}:notifier:state"}[user]


@pytest.fixture
def acl(tmp_path):
    server = AclRedis(tmp_path)
    try:
        yield server
    finally:
        server.server.stop()


async def _refused(call) -> bool:
    try:
        await call
    except NoPermissionError:
        return True
    return False


async def test_no_service_user_reads_or_writes_another_services_keys(acl):
    """For every ordered pair of services, A may neither read nor write B's key, directly or in a script."""
    admin = acl.client("admin")
    for user in REDIS_SERVICE_USERS:
        await admin.hset(acl.own_key(user), "doc", f"{user}'s") if user != "discovery" \
            else await admin.sadd(acl.own_key(user), "p\nen")
    allowed = []
    try:
        for user in REDIS_SERVICE_USERS:
            client = acl.client(user)
            try:
                for other in REDIS_SERVICE_USERS:
                    if other == user:
                        continue
                    key = acl.own_key(other)
                    for name, call in (("GET", client.get(key)), ("HGET", client.hget(key, "doc")),
                                       ("SMEMBERS", client.smembers(key)), ("SET", client.set(key, "x")),
                                       ("HSET", client.hset(key, "doc", "x")), ("SADD", client.sadd(key, "x")),
                                       ("EXPIRE", client.expire(key, 1)),
                                       ("DEL", client.delete(key)),
                                       ("EVAL", client.eval("return redis.call('HSET', KEYS[1], 'doc', 'x')", 1, key))):
                        if not await _refused(call):
                            allowed.append((user, name, other))
            finally:
                await client.aclose()
        # nothing changed: every other service's key still holds what admin wrote
        for user in REDIS_SERVICE_USERS:
            if user == "discovery":
                assert await admin.smembers(acl.own_key(user)) == {b"p\nen"}
            else:
                assert await admin.hget(acl.own_key(user), "doc") == f"{user}'s".encode()
    finally:
        await admin.aclose()
    assert allowed == []


async def test_each_service_user_works_its_own_keys_with_its_store_and_no_other_namespace(acl):
    """The judge and router stores save and load as their users; the same keys of another namespace are refused."""
    judge = acl.client("judge")
    router = acl.client("router")
    try:
        store = RedisJudgeStore(judge, acl.namespace)
        await store.save(MODEL, JudgeRecord(state=initial(MODEL), revision=1), expected_revision=0)
        assert (await store.load(MODEL)).revision == 1
        assert await store.models() == [MODEL]
        await store.mark_initialized()
        assert await store.initialized() is True
        rstore = RedisRouterStore(router, acl.namespace)
        await rstore.save(RouterRecord(revision=1), expected_revision=0)
        assert (await rstore.load()).revision == 1
        # the same prefixes under another namespace are someone else's
        assert await _refused(judge.hget(f"x{acl.namespace}:judge:m", "doc"))
        assert await _refused(router.hget("other:router:record", "doc"))
        # the judge's own store but the router's key: refused inside the compare-and-set script too
        assert await _refused(RedisJudgeStore(router, acl.namespace).client.hget(store.key(MODEL), "doc"))
        # no service may run an administrative command
        for client in (judge, router):
            assert await _refused(client.flushall())
            assert await _refused(client.keys("*"))
            assert await _refused(client.config_get("requirepass"))
    finally:
        await judge.aclose()
        await router.aclose()


async def test_the_reader_reads_every_services_keys_and_writes_none(acl):
    """Operators' tools (status, replay, report) read all of the namespace; any write is refused."""
    admin = acl.client("admin")
    reader = acl.client("reader")
    try:
        await admin.hset(acl.own_key("judge"), "doc", "state")
        await admin.hset(acl.own_key("router"), "doc", "record")
        await admin.zadd(f"{acl.namespace}:notifier:due:ops", {"n1": 1.0})
        assert await reader.hget(acl.own_key("judge"), "doc") == b"state"
        assert await reader.hget(acl.own_key("router"), "doc") == b"record"
        assert await reader.zrange(f"{acl.namespace}:notifier:due:ops", 0, -1) == [b"n1"]
        assert [k async for k in reader.scan_iter(match=f"{acl.namespace}:judge:*")] == [acl.own_key("judge").encode()]
        for call in (reader.hset(acl.own_key("judge"), "doc", "x"), reader.set(acl.own_key("router"), "x"),
                     reader.delete(acl.own_key("judge")), reader.zadd(f"{acl.namespace}:notifier:due:ops", {"n2": 2.0}),
                     reader.eval("return 1", 0)):
            assert await _refused(call)
        assert await admin.hget(acl.own_key("judge"), "doc") == b"state"
    finally:
        await admin.aclose()
        await reader.aclose()


async def test_no_credential_and_a_wrong_password_are_refused(acl):
    """The default user is off: a client without a user, or with a wrong password, is not let in."""
    for url in (acl.server.url, acl.url("judge", "wrong")):
        client = aioredis.from_url(url, driver_info=None)
        try:
            with pytest.raises(AuthenticationError):
                await client.ping()
        finally:
            await client.aclose()


async def test_a_service_started_in_process_with_a_wrong_redis_password_refuses_to_start(acl, tmp_path):
    """``running`` raises ConfigError naming Redis and the user, without the password."""
    nats_server = start_nats(tmp_path / "nats")
    try:
        settings = Settings.load(env={}, nats_url=nats_server.url, redis_url=acl.url("judge", "wrongpassword"),
                                 namespace=acl.namespace, models=[MODEL], metrics_port=-1)
        with pytest.raises(ConfigError) as caught:
            async with running(settings, ["judge"]):
                pytest.fail("the judge started with a wrong Redis password")
        message = str(caught.value)
        assert "Redis" in message and "refused user judge" in message and "\n" not in message
        assert "wrongpassword" not in message
    finally:
        nats_server.stop()


def test_canary_run_with_a_wrong_redis_password_exits_2_with_one_line(acl, tmp_path):
    """``canary run router`` with a wrong REDIS_URL password stops at once: exit 2, one line on stderr, no secret."""
    nats_server = start_nats(tmp_path / "nats")
    try:
        env = {**os.environ, "NATS_URL": nats_server.url, "REDIS_URL": acl.url("router", "wrongpassword"),
               "CANARY_NAMESPACE": acl.namespace, "CANARY_MODELS": MODEL, "CANARY_CONFIG": "",
               "CANARY_METRICS_PORT": "-1", "CANARY_LOG_FORMAT": "console"}
        done = subprocess.run([str(CANARY), "run", "router"], env=env, capture_output=True, text=True, timeout=60)
    finally:
        nats_server.stop()
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: router: Redis at redis://router:***@127.0.0.1:") and "refused user router" in lines[0]
    assert "wrongpassword" not in done.stderr + done.stdout


async def test_a_user_in_the_url_and_its_password_from_a_file_are_let_in(acl, tmp_path):
    """compose's Docker secrets: ``REDIS_URL=redis://judge@host`` and ``REDIS_PASSWORD_FILE``."""
    from reverie_canary.shared.runtime.service import redis_client, redis_watch_client

    secret = tmp_path / "redis_judge_password"
    secret.write_text(acl.passwords["judge"] + "\n")
    user_only = acl.server.url.replace("redis://", "redis://judge@", 1)
    settings = Settings.load(env={"REDIS_URL": user_only, "REDIS_PASSWORD_FILE": str(secret)})
    assert settings.redis_password == acl.passwords["judge"]
    assert acl.passwords["judge"] not in repr(settings) and acl.passwords["judge"] not in repr(settings.public())
    for make in (redis_client, redis_watch_client):
        client = make(settings)
        try:
            assert await client.set(acl.own_key("judge"), b"1") is True
            assert await _refused(client.get(acl.own_key("router")))
        finally:
            await client.aclose()
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password\n")
    client = redis_client(Settings.load(env={"REDIS_URL": user_only, "REDIS_PASSWORD_FILE": str(wrong)}))
    try:
        with pytest.raises(AuthenticationError):
            await client.ping()
    finally:
        await client.aclose()
