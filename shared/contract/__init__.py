"""The wire contract: what every service and the log agree on.

Events (facts) and commands (operator requests), the IgnoreSnapshot, subjects and their reversible
slug encoding, deterministic message ids, the codec that decodes strictly and bounds every field,
the input table that says which service reads which message, and the one error root.  Pure: no
connection, no settings, no clock; it imports nothing of the runtime or of a service.
"""
