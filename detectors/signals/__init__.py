"""One small detector per signal. Each is fed one thing at a time and keeps bounded state."""
