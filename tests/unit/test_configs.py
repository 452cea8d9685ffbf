"""Per-service configs: every setting is some consumer's, every config field is a setting of the same type."""

from __future__ import annotations

import typing

import msgspec
import pytest

from reverie_canary.shared.runtime.config import CONFIGS, DiscoveryConfig, ProberConfig, config_of
from reverie_canary.shared.runtime.settings import Settings


def _types(kind: type) -> dict[str, object]:
    return typing.get_type_hints(kind)


def test_every_setting_is_read_by_some_config_and_every_field_is_a_setting_of_its_type():
    """The table of the config module is complete and true: no orphan setting, no field of another type or name."""
    settings = _types(Settings)
    covered: set[str] = set()
    for name, kind in CONFIGS.items():
        for field, annotation in _types(kind).items():
            assert field in settings, (name, field)
            assert annotation == settings[field], (name, field, annotation, settings[field])
            covered.add(field)
    assert set(settings) - covered == set()


def test_a_config_carries_the_loaded_values_and_is_frozen():
    """config_of copies the loaded settings' values by name; a config cannot be changed afterwards."""
    settings = Settings.load(env={}, models=["acme/chat-1"], prober_concurrency=12, probe_window_s=300.0,
                             cycle_interval_s=900.0)
    discovery = config_of(settings, DiscoveryConfig)
    assert (discovery.models, discovery.prober_concurrency, discovery.probe_window_s) == (["acme/chat-1"], 12, 300.0)
    prober = config_of(settings, ProberConfig)
    assert prober.request_timeout_s == settings.request_timeout_s
    with pytest.raises(AttributeError):
        prober.max_tokens = 1  # type: ignore[misc]
    assert len(msgspec.structs.fields(prober)) < len(msgspec.structs.fields(settings)) / 4
