"""compose.yaml is valid against the Compose Specification and runs what the project ships."""

from __future__ import annotations

import json

import jsonschema
import yaml

from reverie_canary.canary.runtime import SERVICES
from tests.conftest import ROOT, shared_path


def _compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_compose_validates_against_the_compose_spec_schema():
    """The whole file (merge keys resolved) passes the compose-spec JSON schema."""
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
        assert env["NATS_URL"] == "nats://nats:4222" and env["REDIS_URL"].startswith("redis://redis:")
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
