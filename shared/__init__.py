"""reverie-canary common code: the wire (events, commands, snapshots), subjects, streams, settings and the service shell."""

