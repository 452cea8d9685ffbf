"""Settings as environment variables: what ``Settings.environment`` writes, ``Settings.load`` reads back."""

from __future__ import annotations

import pytest

from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime.settings import Settings


def test_environment_round_trips_every_setting():
    """Lists, dicts, floats and the bare NATS/Redis/gateway names come back as the same settings."""
    settings = Settings.load(env={}, nats_url="nats://10.0.0.5:4222", nats_user="operator",
                             nats_password="s3cretpass", redis_url="redis://10.0.0.6:6379/2",
                             models=["a/b", "c/d:free"], controls={"refusal": "ctl/strict", "ttft": "ctl/slow"},
                             kind_modes={"echo": "observe"}, ladder_s=[60.0, 180.0], languages=["en", "pt"],
                             cycle_interval_s=20.0, probe_window_s=14.0, mode="enforce")
    env = settings.environment(with_secrets=True)
    assert env["NATS_URL"] == "nats://10.0.0.5:4222" and env["CANARY_MODELS"] == "a/b,c/d:free"
    assert env["CANARY_CONTROLS"] == "refusal=ctl/strict,ttft=ctl/slow"
    assert env["CANARY_CONFIG"] == ""  # a stray config file must not override what was written
    assert Settings.load(env=env) == settings


def test_environment_leaves_secrets_out_unless_asked():
    settings = Settings.load(env={}, nats_password="s3cretpass", openrouter_api_key="sk-or-abcdef123")
    env = settings.environment()
    assert "NATS_PASSWORD" not in env and "OPENROUTER_API_KEY" not in env
    assert "s3cretpass" not in str(env) and "sk-or-abcdef123" not in str(env)


def test_nats_url_may_list_the_nodes_of_a_cluster():
    """NATS_URL takes several comma-separated URLs (a cluster's nodes); each must have a NATS scheme."""
    from reverie_canary.shared.runtime.settings import nats_servers

    s = Settings.load(env={"NATS_URL": "nats://n1:4222, nats://n2:4222,nats://n3:4222"})
    assert nats_servers(s.nats_url) == ["nats://n1:4222", "nats://n2:4222", "nats://n3:4222"]
    with pytest.raises(ConfigError, match="nats_url must start with"):
        Settings.load(env={"NATS_URL": "nats://n1:4222,http://n2:4222"})
    with pytest.raises(ConfigError, match="nats_url must start with"):
        Settings.load(env={"NATS_URL": " , "})


def test_an_environment_without_channels_keeps_every_other_secret():
    """with_channels=False leaves out the notifier's channel URLs and signing secrets, and nothing else."""
    from reverie_canary.shared.runtime.settings import Settings

    secret = "whsec_" + "A" * 40
    s = Settings.load(env={}, nats_password="pw", notify_urls={"hook": "https://h.example/x"},
                      notify_secrets={"hook": secret}, webhook_url="https://w.example/y", webhook_secret=secret)
    full, operator = s.environment(with_secrets=True), s.environment(with_secrets=True, with_channels=False)
    gone = {"CANARY_NOTIFY_URLS", "CANARY_NOTIFY_SECRETS", "CANARY_WEBHOOK_URL", "CANARY_WEBHOOK_SECRET"}
    assert gone <= set(full) and full["CANARY_NOTIFY_SECRETS"] == f"hook={secret}"
    assert set(full) - set(operator) == gone and secret not in "".join(operator.values())
    assert operator["NATS_PASSWORD"] == "pw"
    assert Settings.load(env=operator).notify_urls == {} and Settings.load(env=operator).nats_password == "pw"


def test_an_unknown_canary_variable_is_named_with_the_closest_setting_and_legitimate_ones_are_left_be():
    """CANARY_MIN_HOST -> CANARY_MIN_HOSTS; the non-settings (actor, debug, users' passwords, test switches) pass."""
    from reverie_canary.shared.runtime.settings import NOT_SETTINGS, unknown_variables

    env = {"CANARY_MIN_HOST": "5", "CANARY_FAILED_CYCLE_TO_SUSPEND": "3", "CANARY_ZZZQ": "1", "CANARY_MIN_HOSTS": "3",
           "CANARY_WEBHOOK_SECRET_FILE": "/run/s", "CANARY_JUDGE_PASSWORD": "p", "CANARY_REDIS_READER_PASSWORD": "p",
           "CANARY_REDIS_JUDGE_PASSWORD_FILE": "/run/p", "NATS_URL": "nats://x", **dict.fromkeys(NOT_SETTINGS, "1")}
    assert unknown_variables(env) == {"CANARY_FAILED_CYCLE_TO_SUSPEND": "CANARY_FAILED_CYCLES_TO_SUSPEND",
                                      "CANARY_MIN_HOST": "CANARY_MIN_HOSTS", "CANARY_ZZZQ": None}


def test_every_canary_variable_the_code_reads_is_a_setting_or_a_listed_exception():
    """grep of the code's os.environ reads of CANARY_ names: none would be warned about as unknown."""
    import re
    from pathlib import Path

    from reverie_canary.shared.runtime.settings import unknown_variables

    root = Path(__file__).resolve().parents[2]
    read = set()
    for path in [*root.glob("canary/*.py"), *root.glob("shared/*.py"), *root.glob("services/**/*.py"),
                 *root.glob("tests/*.py"), *root.glob("tests/conftest.py")]:
        read |= set(re.findall(r"(?:\.get\(|getenv\(|environ\[)\s*[\"'](CANARY_[A-Z0-9_]+)[\"']",
                               path.read_text(encoding="utf-8")))
    assert "CANARY_DEBUG" in read and "CANARY_ACTOR" in read
    assert unknown_variables(dict.fromkeys(read, "1")) == {}


def test_a_misspelt_setting_in_the_environment_is_warned_about_once_at_start(tmp_path):
    """CANARY_MIN_HOST=5: one warning naming CANARY_MIN_HOSTS (JSON when the logs are), the command still runs."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("CANARY_")}
    env.update(CANARY_MIN_HOST="5", CANARY_LOG_FORMAT="json", CANARY_MODELS="acme/chat-1", CANARY_CONFIG="")
    proc = subprocess.run([sys.executable, "-m", "reverie_canary.canary", "status", "--model", "nosuch/m"], env=env,
                          capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    warned = [line for line in lines if line.get("event") == "unknown_setting_variable"]
    assert [(w["variable"], w["closest"], w["level"]) for w in warned] == [
        ("CANARY_MIN_HOST", "CANARY_MIN_HOSTS", "warning")], proc.stderr
    assert "did you mean CANARY_MIN_HOSTS?" in warned[0]["hint"]
    assert proc.returncode == 2  # not refused for the variable: the command went on (to its own check)
