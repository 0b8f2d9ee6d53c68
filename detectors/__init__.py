"""The functional core: signals, fingerprint index, correlation and scoring. No I/O, no clock."""
