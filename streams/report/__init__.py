"""The incident report: `crosstalk report` (HTML page, per-tenant notifications)."""
