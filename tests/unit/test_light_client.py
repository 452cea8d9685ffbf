"""The chat backend's light install: the client, its reply guard and every any-reply check run on msgspec alone.

A subprocess blocks numpy, ftfy, the language detectors and jsonschema at import
(a meta-path finder that refuses them), imports the client distribution and runs
the any-reply checks on replies that must fail and on ones that must pass: what a
backend with ``pip install reverie-canary-client`` gets (docs/chat-backend.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

#: What the light install must not need: the optional extras' packages.
HEAVY = ("numpy", "ftfy", "langdetect", "py3langid", "jsonschema")

BLOCKER = textwrap.dedent(f"""
    import importlib.abc, sys

    class Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {HEAVY!r}:
                raise ModuleNotFoundError(f"{{name}} is blocked: the light install has no optional extra")
            return None

    sys.meta_path.insert(0, Blocked())
    for name in list(sys.modules):
        if name.split(".")[0] in {HEAVY!r}:
            del sys.modules[name]
""")


def run_light(program: str) -> dict:
    """Run ``program`` behind the blocker; it prints one JSON object, returned here."""
    out = subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(program)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_any_reply_checks_run_without_the_optional_extras():
    """Every any-reply check imports and judges without numpy, ftfy, the detectors or jsonschema."""
    result = run_light("""
        import json, sys
        from reverie_canary.client.checks import fold
        from reverie_canary.client.checks.behaviour import BEHAVIOUR_CHECKS
        from reverie_canary.client.checks.encoding import check_encoding
        from reverie_canary.client.checks.refusal import check_empty, check_finish
        from reverie_canary.client.checks.salad import check_word_salad
        from reverie_canary.client.reply import ProbeSpec, Reply

        checks = (check_finish, check_empty, check_encoding, check_word_salad, *BEHAVIOUR_CHECKS)
        spec = ProbeSpec(kind="chat")
        story = ("Mira climbs the spiral stairs and checks the great lamp one more time. Outside, the sea is grey "
                 "and restless, and the wind pulls at the shutters. ")
        replies = {
            "clean": Reply(text=story * 3, finish_reason="stop"),
            "clean_pt": Reply(text="O farol ergue-se sobre as rochas; a luz varre o mar à noite, é verdade.",
                              finish_reason="stop"),
            "junk": Reply(text=": *Mira lifts the lamp.*", finish_reason="stop"),
            "mojibake": Reply(text="A soluÃ§Ã£o Ã© simples, basta reiniciar o serviÃ§o.", finish_reason="stop"),
            "loop": Reply(text=story + "and the sea and the sea " * 200, finish_reason="length"),
            "token": Reply(text="Mira lifts the lamp.<|im_end|>", finish_reason="stop"),
            "empty": Reply(text="", finish_reason="stop"),
            "filter": Reply(text="", finish_reason="content_filter"),
        }
        out = {name: fold([c(r, spec) for c in checks]).reason or "pass" for name, r in replies.items()}
        out["heavy_loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in
                                     ("numpy", "ftfy", "langdetect", "py3langid", "jsonschema"))
        print(json.dumps(out))
    """)
    assert result == {"clean": "pass", "clean_pt": "pass", "junk": "leading_junk", "mojibake": "encoding_broken",
                      "loop": "repetition", "token": "control_tokens", "empty": "empty_output",
                      "filter": "content_filter", "heavy_loaded": []}


def test_the_reply_guard_judges_and_retries_without_the_optional_extras():
    """The guard on a stream, its retry body and its counts: all on the light install."""
    result = run_light("""
        import json, sys
        from reverie_canary.client import IgnoreListClient, ReplyGuard

        client = IgnoreListClient("nats://127.0.0.1:1", "m/x")  # never started: the bus is down
        guard = ReplyGuard(client)
        attempt = guard.attempt({"model": "m/x", "stream": True, "provider": {"sort": "price"}})
        stream = attempt.stream()
        line = 'data: {"provider":"DeepInfra","choices":[{"index":0,"delta":{"content":"assistant\\\\n*Hi*"}}]}'
        verdict = stream.line(line.encode())
        retry = attempt.retry(verdict)
        assert retry is not None, (verdict, attempt.held)
        print(json.dumps({"reason": verdict.reason, "early": verdict.early, "ignore": retry.body["provider"]["ignore"],
                          "counted": guard.live.take().providers["DeepInfra"].reasons,
                          "heavy": sorted(m for m in sys.modules if m.split(".")[0] in
                                          ("numpy", "ftfy", "langdetect", "py3langid", "jsonschema"))}))
    """)
    assert result == {"reason": "leading_junk", "early": True, "ignore": ["DeepInfra", "deepinfra"],
                      "counted": {"leading_junk": 1}, "heavy": []}


def test_the_blocker_blocks():
    """The light runs prove something: behind the blocker, numpy does not import."""
    result = run_light("""
        import json
        try:
            import numpy  # noqa: F401
            print(json.dumps({"numpy": "imported"}))
        except ModuleNotFoundError as exc:
            print(json.dumps({"numpy": str(exc)}))
    """)
    assert result == {"numpy": "numpy is blocked: the light install has no optional extra"}


def test_the_example_with_only_the_client_and_no_nats_url_says_what_is_missing_in_one_line():
    """examples/chat_backend.py without NATS_URL and without the main distribution: one line, exit 2, no traceback."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "chat_backend.py"
    program = BLOCKER + textwrap.dedent(f"""
        import importlib.abc, os, runpy, sys

        class NoMain(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "reverie_canary.canary" or name.startswith("reverie_canary.canary."):
                    raise ModuleNotFoundError(f"No module named {{name!r}}")
                return None

        sys.meta_path.insert(0, NoMain())
        os.environ.pop("NATS_URL", None)
        sys.argv = ["chat_backend.py"]
        runpy.run_path({str(example)!r}, run_name="__main__")
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k != "NATS_URL"}
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("NATS_URL is not set, and the demo system needs the main distribution")
