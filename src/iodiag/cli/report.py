"""`iodiag report` (placeholder until the report command lands)."""
