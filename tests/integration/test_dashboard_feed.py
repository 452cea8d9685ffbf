"""The dashboard's readers and the quality feed over real HTTP (httpx), against a running demo.

The demo's dashboard (``canary demo`` starts it with a generated reader) is
read on its socket: without credentials every page and API answers 401; with
them the feed answers per its committed OpenAPI document, agrees with the
demo's own summary, carries an ETag that a second read confirms with a 304,
and the positive control shows on /metrics.  A second dashboard over the same
servers is started with TLS (a throwaway CA from ``trustme``).
"""

from __future__ import annotations

import json

import httpx
import pytest

from reverie_canary.services.dashboard.auth import WebConfigSource, token_digest
from reverie_canary.services.dashboard.web import serve_dashboard
from tests.unit.test_dashboard_feed import validator_for

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"
SUSPENDED = ("lambda/fp8", "baseten/fp8")
CONTROL = "control-filter/strict"


@pytest.fixture(scope="module")
def demo(default_demo):
    running = default_demo
    for n in range(4, 12):  # two failed cycles suspend each of SUSPENDED; a loaded machine may lose a cycle
        assert running.call(running.p.wait_cycles(n), timeout_s=90), "the demo stopped closing cycles"
        if set(SUSPENDED) <= set(running.call(running.p.summary())["ignore"]):
            break
    return running


def auth_of(demo) -> tuple[str, str]:
    login = demo.p.dashboard_login
    return login.user, login.password


async def test_without_credentials_the_pages_the_feed_and_the_metrics_answer_401(demo):
    """Every page, the event stream, the JSON APIs, /metrics and the static files: 401 and a Basic challenge."""
    base = demo.p.dashboard_url
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        for path in ("/", "/provider?model=x&provider=y", "/notices", "/lookback", "/events", "/api/fleet",
                     "/api/v1/quality", "/api/v1/openapi.json", "/metrics", "/static/dashboard.css"):
            r = await http.get(path)
            assert r.status_code == 401, path
            assert r.headers["www-authenticate"].startswith('Basic realm="reverie-canary"'), path
            assert "provider" not in r.text.lower() or "credentials" in r.text
            bad = await http.get(path, auth=(demo.p.dashboard_login.user, "not-the-password"))
            assert bad.status_code == 401, path
        health = await http.get("/healthz")
        assert health.status_code == 200 and set(health.json()) == {"ok", "problem", "version"}
        page = await http.get("/", auth=auth_of(demo))
        assert page.status_code == 200 and 'data-provider="deepinfra/fp8"' in page.text
        assert page.headers["x-frame-options"] == "deny"


async def test_the_feed_answers_per_its_openapi_document_and_agrees_with_the_demo(demo):
    """The body validates against the committed schema; states, layers, kinds and controls are the demo's."""
    summary = demo.call(demo.p.summary())
    async with httpx.AsyncClient(base_url=demo.p.dashboard_url, auth=auth_of(demo), timeout=30) as http:
        doc = (await http.get("/api/v1/openapi.json")).json()
        r = await http.get("/api/v1/quality", params={"model": MODEL})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert doc["paths"]["/api/v1/quality"]["get"]["operationId"] == "getQuality"
    body = r.json()
    validator_for("Feed").validate(body)
    (model,) = body["models"]
    assert model["model"] == MODEL and model["last_cycle_no"] >= 3
    rows = {p["provider"]: p for p in model["providers"]}
    assert set(rows) == set(summary["providers"])  # the control is not a provider
    for name in set(summary["ignore"]) - set(summary["excluded"]):  # the excluded control has no row
        assert (rows[name]["state"], rows[name]["layer"], rows[name]["ignored"]) == ("suspended", "suspension", True)
    # each kind's last result is the judge's verdict of that cycle as the log holds it
    verdicts = demo.call(logged_verdicts(demo))
    for name in ("lambda/fp8", "baseten/fp8", "deepinfra/fp8"):
        for k in rows[name]["kinds"]:
            refs = [r for r in verdicts[k["cycle_no"]][name].results if r.kind == k["kind"]]
            outcomes = {r.outcome for r in refs}
            # a probe with no result by the close is "missing": the verdict names it by task, not by result
            assert k["outcome"] in outcomes | {"missing"} and k["probes"] >= len(refs), (name, k, refs)
            assert set(k["reasons"]) == {(r.reason or r.outcome) + (f" ({r.language})" if k["kind"] == "language"
                                                                    and r.language else "")
                                         for r in refs if r.outcome != "pass"}, (name, k, refs)
    slow = {k["kind"]: k for k in rows["lambda/fp8"]["kinds"]}
    assert slow["ttft"]["outcome"] != "pass"  # the slow provider never passes its first-token probe
    healthy = rows["deepinfra/fp8"]
    assert healthy["state"] == "active" and healthy["layer"] is None and healthy["streaks"]["passed"] >= 1
    assert healthy["last_probe_at"].endswith("Z") and healthy["quantization"] == "fp8"
    assert {k["kind"] for k in healthy["kinds"]} >= {"ttft", "structured"}
    assert all(k["outcome"] == "pass" for k in healthy["kinds"] if k["kind"] in ("ttft", "structured"))
    (control,) = [c for c in model["controls"] if c["kind"] == "refusal"]
    assert control["provider"] == CONTROL and control["last"] in ("failed", "passed", "not_probed")


async def logged_verdicts(demo) -> dict:
    """Cycle number -> provider -> its ProviderVerdict, from the CycleVerdicts on the log."""
    from reverie_canary.services.judge.replay import read_log
    from reverie_canary.shared.contract.events import CycleVerdict
    from reverie_canary.shared.runtime.service import nats_connect

    nc = await nats_connect(demo.p.settings)
    try:
        events = [e.event for e in await read_log(nc.jetstream(), judge_only=False)]
    finally:
        await nc.close()
    return {e.cycle_no: {v.provider: v for v in e.verdicts} for e in events if isinstance(e, CycleVerdict)}


async def test_an_etag_read_back_gives_304_and_an_unknown_model_404(demo):
    """If-None-Match with the current ETag: 304 without a body; a stale one: 200; a model not watched: 404."""
    async with httpx.AsyncClient(base_url=demo.p.dashboard_url, auth=auth_of(demo), timeout=30) as http:
        first = await http.get("/api/v1/quality")
        etag = first.headers["etag"]
        assert etag.startswith('"') and first.headers["cache-control"].startswith("private, max-age=")
        again = await http.get("/api/v1/quality", headers={"If-None-Match": etag})
        if again.status_code == 200:  # a cycle closed between the two reads: the new body has a new tag
            assert again.headers["etag"] != etag
            etag = again.headers["etag"]
            again = await http.get("/api/v1/quality", headers={"If-None-Match": f'W/{etag}, "other"'})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
        stale = await http.get("/api/v1/quality", headers={"If-None-Match": '"0000"'})
        assert stale.status_code == 200 and json.loads(stale.content)["models"]
        missing = await http.get("/api/v1/quality", params={"model": "nobody/none"})
        assert missing.status_code == 404 and "not a watched model" in missing.json()["error"]


async def test_the_metrics_carry_the_positive_control_per_kind(demo):
    """canary_control_result has one series per result, 1 for the last; the count of cycles without a failure."""
    from prometheus_client.parser import text_string_to_metric_families

    async with httpx.AsyncClient(base_url=demo.p.dashboard_url, auth=auth_of(demo), timeout=30) as http:
        text = (await http.get("/metrics")).text
        feed = (await http.get("/api/v1/quality")).json()
    samples = {(s.name, s.labels.get("result")): s.value for f in text_string_to_metric_families(text)
               for s in f.samples if s.labels.get("kind") == "refusal" and s.labels.get("model") == MODEL}
    (control,) = [c for m in feed["models"] for c in m["controls"] if c["kind"] == "refusal"]
    results = {r: v for (name, r), v in samples.items() if name == "canary_control_result"}
    assert set(results) == {"failed", "passed", "not_probed"} and sum(results.values()) == 1
    assert results[control["last"]] == 1
    # the feed and the scrape may straddle a cycle's close: the count is the feed's or one more (or reset to 0)
    count = samples[("canary_control_cycles_without_failure", None)]
    assert count in (control["cycles_without_failure"], control["cycles_without_failure"] + 1, 0)


async def test_a_dashboard_with_tls_serves_https_to_readers_with_a_token_or_a_password(demo, tmp_path):
    """A throwaway CA's certificate: HTTPS verified against the CA; 401 without credentials, 200 with a token;
    a client that does not trust the CA cannot connect."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    token = "reader-token-" + "x" * 40
    (tmp_path / "web.yml").write_text(
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.pem\n"
        f"bearer_tokens:\n  feed-reader: {token_digest(token)}\n")
    settings = demo.p.settings_for("dashboard")

    async def exercise() -> None:
        async with serve_dashboard(settings, host="127.0.0.1", port=0, web=WebConfigSource(tmp_path / "web.yml"),
                                   poll_s=0.5) as url:
            assert url.startswith("https://127.0.0.1:")
            async with httpx.AsyncClient(base_url=url, verify=str(tmp_path / "ca.pem"), timeout=30) as http:
                assert (await http.get("/api/v1/quality")).status_code == 401
                r = await http.get("/api/v1/quality", headers={"Authorization": f"Bearer {token}"})
                assert r.status_code == 200 and r.json()["models"][0]["model"] == MODEL
                assert (await http.get("/", headers={"Authorization": f"Bearer {token}"})).status_code == 200
            async with httpx.AsyncClient(base_url=url, timeout=30) as untrusting:
                with pytest.raises(httpx.ConnectError):
                    await untrusting.get("/healthz")
            async with httpx.AsyncClient(base_url=url.replace("https://", "http://"), timeout=30) as plain:
                with pytest.raises(httpx.HTTPError):
                    await plain.get("/healthz")

    await demo.run(exercise(), timeout_s=120)


async def test_beyond_loopback_the_dashboard_does_not_start_without_tls_and_readers(demo):
    """0.0.0.0 without a web configuration: refused before anything is read or bound, naming the flag."""
    from reverie_canary.services.dashboard.auth import WebConfigError

    async def start() -> None:
        async with serve_dashboard(demo.p.settings_for("dashboard"), host="0.0.0.0", port=0):
            raise AssertionError("it started")

    with pytest.raises(WebConfigError, match="--insecure-beyond-loopback"):
        await demo.run(start(), timeout_s=60)
