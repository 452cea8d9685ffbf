"""Transport: was there a reply to judge at all? (DESIGN.md, contract 1).

No response headers, connection errors, 408/429/5xx, an error body, an in-band
error chunk, ``finish_reason: error`` or an error in ``native_finish_reason``
are transport errors, never quality failures (cases FC-26, FC-27, FC-28).
"""

from __future__ import annotations

from services.prober.reply import Reply
from shared.events import CheckResult

_ERROR_NATIVE = ("error", "network_error", "provider_error", "upstream_error", "timeout")


def check_transport(reply: Reply) -> CheckResult:
    """Return ``transport_error`` with a reason when the exchange itself broke, else ``pass``."""
    name = "transport"
    if reply.transport_error:
        return CheckResult(check=name, outcome="transport_error", reason=reply.transport_error)
    status = reply.http_status
    if status is not None and status != 200:
        return CheckResult(check=name, outcome="transport_error", reason=f"http_{status}",
                           evidence={"http_status": status, "error": reply.error})
    if reply.error is not None:
        return CheckResult(check=name, outcome="transport_error", reason="in_band_error", evidence={"error": reply.error})
    if reply.finish_reason == "error":
        return CheckResult(check=name, outcome="transport_error", reason="finish_reason_error")
    native = (reply.native_finish_reason or "").lower()
    if any(marker in native for marker in _ERROR_NATIVE):
        return CheckResult(check=name, outcome="transport_error", reason="native_finish_reason_error",
                           evidence={"native_finish_reason": reply.native_finish_reason})
    return CheckResult(check=name, outcome="pass")
