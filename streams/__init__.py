"""The shell: Faust app, embedded runner, sinks, simulator and CLI."""
