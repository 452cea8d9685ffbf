"""The reviewed exclusions file on disk: read it, and notice when it changes.

The router reads the file at start (an invalid file stops it, naming the line),
for ``ReloadExclusions``, and whenever its ``(inode, size, mtime)`` changes
(polled every ``EXCLUSIONS_POLL_S``).  A file being saved in place is first
truncated, then written: a change is read only once the signature held still
for ``EXCLUSIONS_SETTLE_S``, so that a half-written file that happens to be
valid TOML (empty, or cut between two entries) never drops reviewed
exclusions.  What to do with what was read is the core's (an invalid file is
refused and the old exclusions stay): this module only reads.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

from reverie_canary.services.router.core import ExclusionsRead, parse_exclusions
from reverie_canary.shared.contract.commands import ReloadExclusions
from reverie_canary.shared.contract.errors import ConfigError

#: How often the router looks at the exclusions file for a change (seconds).
EXCLUSIONS_POLL_S = 2.0
#: A changed exclusions file must keep its (inode, size, mtime) this long before it is read.
EXCLUSIONS_SETTLE_S = 0.25

FileSignature = tuple[int, int, int] | None


def file_signature(path: str) -> FileSignature:
    """``(inode, size, mtime_ns)`` of ``path``, or ``None`` when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class ExclusionsFile:
    """One exclusions file (``path`` empty: none configured, which reads as no exclusions)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.signature: FileSignature = None

    def read(self, trigger: str, command: ReloadExclusions | None = None) -> ExclusionsRead:
        """Read and parse the file now.

        Returns:
            The exclusions and a digest of the bytes, or the error naming the file and line.
        """
        if not self.path:
            return ExclusionsRead(path="", exclusions=[], digest="", trigger=trigger, command=command)
        signature = file_signature(self.path)
        self.signature = signature
        try:
            raw = Path(self.path).read_bytes()
        except OSError as exc:
            return ExclusionsRead(path=self.path, error=f"cannot read exclusions file {self.path}: {exc}",
                                  trigger="file_missing" if signature is None and command is None else trigger,
                                  command=command)
        try:
            exclusions = parse_exclusions(raw.decode("utf-8"), self.path)
        except UnicodeDecodeError as exc:
            return ExclusionsRead(path=self.path, error=f"{self.path}: not UTF-8: {exc}", trigger=trigger,
                                  command=command)
        except ConfigError as exc:
            return ExclusionsRead(path=self.path, error=str(exc), trigger=trigger, command=command)
        return ExclusionsRead(path=self.path, exclusions=exclusions, digest=hashlib.sha256(raw).hexdigest(),
                              trigger=trigger, command=command)

    def read_at_start(self) -> ExclusionsRead:
        """:meth:`read` for the router's start.

        Raises:
            ConfigError: the file is unreadable or invalid (the router does not start).
        """
        read = self.read("start")
        if read.exclusions is None:
            raise ConfigError(read.error)
        return read

    async def poll(self) -> ExclusionsRead | None:
        """The file as read, if it changed since the last read and then held still; else ``None``."""
        if not self.path:
            return None
        signature = file_signature(self.path)
        if signature == self.signature:
            return None
        if signature is None:
            self.signature = None
            return ExclusionsRead(path=self.path, error=f"{self.path} is gone", trigger="file_missing")
        await asyncio.sleep(EXCLUSIONS_SETTLE_S)
        if file_signature(self.path) != signature:
            return None  # still changing: the next poll looks again
        return self.read("file_changed")
