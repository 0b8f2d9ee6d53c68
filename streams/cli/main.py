"""The `crosstalk` command line: replay, demo, simulate, evaluate, schema, worker, produce, deliver."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

from streams.io import LazyFile
from streams.settings import Settings, load_settings, with_run_key

# Exit codes (docs/operations.md "Using it"): distinct, so that scripts can tell what went wrong.
EXIT_OK = 0
EXIT_USAGE = 2  # argparse
EXIT_INPUT = 3  # an input file cannot be read at all: missing, a directory, not gzip, no permission
EXIT_OUTPUT = 4  # an output (--alerts-out, --rejects) cannot be written
EXIT_CONFIG = 5  # the settings (TOML file or CROSSTALK_* env) are not valid
EXIT_PARTIAL = 6  # an input ended early (truncated or corrupt gzip): all that was read was processed and written
EXIT_INTERNAL = 7  # a replay job failed (its traceback is printed)
EXIT_INTERRUPTED = 130  # SIGINT: all that was read was processed, flushed and summarised


class CliError(Exception):
    """A problem the user can fix, reported as one line `crosstalk: error: ...` and an exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _writable(path: str, what: str) -> None:
    """Create the parent directories of an output file; CliError(EXIT_OUTPUT) when that cannot work."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(EXIT_OUTPUT, f"{what} {path}: cannot create its directory ({exc.strerror or exc})") from None
    if target.is_dir():
        raise CliError(EXIT_OUTPUT, f"{what} {path}: is a directory")
    if not os.access(target.parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise CliError(EXIT_OUTPUT, f"{what} {path}: not writable")


def data_dir() -> Path:
    """Where crosstalk keeps files a command writes by default: $CROSSTALK_DATA_DIR, else
    $XDG_DATA_HOME/crosstalk, else ~/.local/share/crosstalk (never the working directory: a benchmark's
    rejects file grew to 7 MB in a repository root)."""
    explicit = os.environ.get("CROSSTALK_DATA_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "crosstalk"


def default_rejects_path() -> str:
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return str(data_dir() / "rejects" / f"replay-{stamp}-{os.getpid()}.jsonl")


def _jobs(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of jobs: {value!r}") from None
    if not 0 <= n <= 256:
        raise argparse.ArgumentTypeError("--jobs must be within 0..256 (0: one per CPU)")
    return n


def _settings(args: argparse.Namespace) -> Settings:
    settings = load_settings(getattr(args, "config", None))
    return with_run_key(settings, args.command) if args.command in ("replay", "demo") else settings


def _replay_jobs(jobs: int, files: list[str]) -> int:
    """How many jobs a replay of `files` runs: one when an input can be read only once."""
    from streams.cli.console import err
    from streams.embedded.prepass import not_rereadable

    if jobs > 1 and "-" in files:
        raise CliError(EXIT_USAGE, "--jobs needs files: standard input can be read only once (use --jobs 1)")
    once = not_rereadable(files) if jobs > 1 else None
    if once is not None:
        # A pipe (`<(zcat …)`) is drained by the jobs' pre-pass: one job reads it once, in full (issue 42).
        msg = f"crosstalk: {once} is not a regular file and can be read only once: replaying with one job"
        err.print(msg, style="yellow", markup=False)
        return 1
    return jobs


def _replay_outputs(args: argparse.Namespace) -> tuple[Any, Any]:
    """The alerts' output (stdout unless --alerts-out) and the leads' (None unless --leads-out), opened; the caller
    closes the files."""
    alerts_out: Any = sys.stdout.buffer
    if args.alerts_out not in (None, "-"):
        _writable(args.alerts_out, "--alerts-out")
        alerts_out = Path(args.alerts_out).open("wb")  # noqa: SIM115 - closed by the caller
    leads_out = None
    if args.leads_out is not None:
        _writable(args.leads_out, "--leads-out")
        leads_out = Path(args.leads_out).open("wb")  # noqa: SIM115 - closed by the caller
    return alerts_out, leads_out


def cmd_replay(args: argparse.Namespace) -> int:
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    from streams.cli.console import err, print_alert, print_summary
    from streams.embedded.jobs import Jobs, JobsError, default_jobs
    from streams.embedded.runner import EmbeddedRunner
    from streams.inputs.files import InputError, check_inputs, input_size
    from streams.sinks import build_sinks
    from streams.sinks.base import Sink
    from streams.sinks.jsonl import AlertWriter, LeadWriter

    settings = _settings(args)
    try:
        check_inputs(args.files)
    except InputError as exc:
        raise CliError(EXIT_INPUT, str(exc)) from None
    if args.rejects is None:
        args.rejects = default_rejects_path()
    jobs = _replay_jobs(args.jobs or default_jobs(), args.files)
    _writable(args.rejects, "--rejects")
    alerts_out, leads_out = _replay_outputs(args)
    rejects = LazyFile(args.rejects)
    split = None
    if jobs > 1:
        # Forked before the sinks and the progress bar start their threads.
        split = Jobs(settings, args.files, jobs, args.format)
        split.start(exchanges=settings.otel.enabled or settings.otel.console, leads=args.leads_out is not None)
    sinks: list[Sink] = [AlertWriter(alerts_out), *build_sinks(settings)]
    if leads_out is not None:
        sinks.append(LeadWriter(leads_out))
    total = input_size(args.files)
    show = err.is_terminal and not args.no_progress and total
    progress = Progress(*Progress.get_default_columns()[:-1], DownloadColumn(), TransferSpeedColumn(), console=err)
    # With jobs: the slowest job's position in the input (every job reads all of it).
    task = progress.add_task("replay" if jobs == 1 else f"replay ({jobs} jobs)", total=total or None)
    if args.alerts_out not in (None, "-") and args.verbose:

        class Echo(AlertWriter):
            def on_alert(self, alert: Any) -> None:
                print_alert(alert)

        sinks.append(Echo(None))
    on_progress = (lambda n: progress.update(task, completed=n)) if show else None
    if show:
        progress.start()
    try:
        if split is not None:
            result = split.run(sinks, rejects, on_progress)
        else:
            runner = EmbeddedRunner(settings, sinks, rejects_out=rejects, on_progress=on_progress)
            if leads_out is not None:
                runner.record_leads()
            result = runner.run_files(args.files, format=args.format)
    except JobsError as exc:
        raise CliError(EXIT_INTERNAL, str(exc)) from None
    finally:
        if show:
            progress.stop()
        rejects.close()
        if alerts_out is not sys.stdout.buffer:
            alerts_out.close()
        if leads_out is not None:
            leads_out.close()
    if not args.quiet:
        print_summary(result)
    # Even with --quiet: where the bad lines (and the events kept with a part dropped) went is not a detail.
    counts = (("rejected lines", sum(result.rejects.values())), ("warnings", sum(result.warnings.values())))
    if any(n for _, n in counts):
        what = " and ".join(f"{n:,} {w}" for w, n in counts if n)
        err.print(f"{what} written to {args.rejects} (run id {result.run_id})", style="yellow", markup=False)
    for problem in result.input_errors:
        err.print(f"crosstalk: error: {problem}", style="red", markup=False)
    if result.interrupted:
        err.print("crosstalk: interrupted: the input read so far was processed, flushed and written", style="red")
        return EXIT_INTERRUPTED
    return EXIT_PARTIAL if result.input_errors else EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    if getattr(args, "live", False):
        from streams.cli.live import run_live_demo

        return run_live_demo(_settings(args))
    from streams.cli.demo import run_demo

    return run_demo(_settings(args), seed=args.seed, duration_s=args.duration, fault_at_s=args.fault_at, out=args.out)


def cmd_schema(args: argparse.Namespace) -> int:
    from schemas.export import write_schemas

    for path in write_schemas(Path(args.out)):
        print(path)
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    import orjson

    settings = _settings(args)
    shown = orjson.loads(settings.model_dump_json())
    # The key's mask looked the same whether a key was set or not; say which, never the key.
    key = settings.detection.fingerprint_key
    shown["detection"]["fingerprint_key"] = "set" if key.configured else "not set (a random key for this process)"
    print(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode())
    return 0


# name -> (module with add_arguments/run, help); the shells of other stages live in their own modules.
_DELEGATED = {
    "simulate": (
        "streams.sim.simulate",
        "simulate a multi-tenant inference service, optionally with the incident's fault",
    ),
    "evaluate": ("streams.cli.evaluate", "score alerts against the simulator's ground-truth labels"),
    "worker": ("streams.kafka.worker", "run a Faust worker on Kafka (production mode)"),
    "produce": ("streams.cli.produce", "publish a JSONL file of events into the Kafka input topic"),
    "deliver": ("streams.kafka.deliver", "deliver alerts from the Kafka alerts topic to webhooks (at least once)"),
    "report": (
        "streams.report.command",
        "the incident report: one self-contained HTML page, per-tenant notices (pip install 'crosstalk[report]')",
    ),
    "corpus": ("streams.cli.corpus", "add public text (licences, docs, RAG passages) that is common, never evidence"),
    "probe": ("streams.probe.cli", "probe an OpenAI-compatible endpoint with canaries and a prompt-size ladder"),
    "engine": ("streams.sim.serving.cli", "run the live test engine (OpenAI-compatible, P/D KV pools, bug modes)"),
    "otlp": ("streams.cli.otlp", "receive OTLP GenAI spans (HTTP, or the Collector's Kafka topic) as events"),
    "scrape": ("streams.inputs.scrape", "poll SGLang/vLLM metrics into cache_stats events; serve /limits"),
    "alerts": ("streams.cli.alerts", "alerts as readable lines, from the Kafka alerts topic or a JSONL file; --follow"),
}


def _command_of(argv: list[str]) -> str | None:
    """The subcommand named in argv, so that only its module (maybe heavy: Faust, Kafka) is imported."""
    skip = False
    for tok in argv:
        if skip:
            skip = False
        elif tok == "--config":
            skip = True
        elif not tok.startswith("-"):
            return tok
    return None


_LOCAL = ("replay", "demo", "schema", "settings")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crosstalk", description=__doc__)
    parser.add_argument("--config", help="TOML settings file (default: $CROSSTALK_CONFIG)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("replay", help="run the detectors over JSONL event files in-process (no broker)")
    p.add_argument("files", nargs="+", help="JSON Lines files (.gz ok), or - for stdin")
    p.add_argument("--alerts-out", help="alerts as JSONL (default: stdout)")
    p.add_argument(
        "--rejects",
        help="bad lines with reasons go here (default: a new file under $CROSSTALK_DATA_DIR, else "
        "$XDG_DATA_HOME/crosstalk, else ~/.local/share/crosstalk: rejects/replay-<time>-<pid>.jsonl)",
    )
    p.add_argument(
        "--format", choices=["jsonl", "otlp-json"], default="jsonl", help="otlp-json: OTLP/JSON trace exports"
    )
    p.add_argument(
        "--leads-out",
        help="also write, as JSONL, every response the core judged below an alert with what it found (no text): "
        "an investigation's leads",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no summary table")
    p.add_argument("-v", "--verbose", action="store_true", help="print alerts as they fire (with --alerts-out)")
    p.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        help="processes, split by cache domain (the same alerts as one; files only, not stdin); 0: one per CPU",
    )
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("demo", help="simulate a short GLM-5.3-style incident in-process and watch crosstalk catch it")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--duration", type=float, default=300.0, help="simulated seconds")
    p.add_argument("--fault-at", type=float, default=90.0, help="simulated second at which the fault starts")
    p.add_argument("--out", help="directory for events, labels, alerts of the demo run")
    p.add_argument("--live", action="store_true", help="a real HTTP engine with the bug, tenants, the prober, the fix")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("schema", help="write the JSON Schema of every event type and of the alert")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("settings", help="print the effective settings (defaults < file < env)")
    p.set_defaults(func=cmd_settings)

    for name, (module, help_text) in _DELEGATED.items():
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(module=module)
        if only is not None and only != name:
            continue
        try:
            importlib.import_module(module).add_arguments(p)
        except ImportError as exc:  # an optional stage whose dependencies are missing
            _unavailable(name, p, exc)
    return parser


# A missing module -> the extra that installs it (pyproject.toml [project.optional-dependencies]).
_EXTRA_OF = {"jinja2": "report", "matplotlib": "report", "rocksdict": "rocksdb", "litellm": "litellm"}


def _unavailable(name: str, p: argparse.ArgumentParser, exc: ImportError) -> None:
    """The command stays in the parser, takes any arguments (main) and says which extra installs what it lacks:
    argparse alone answered "unrecognized arguments" and --help showed no options (issue 26)."""
    missing = (exc.name or str(exc)).split(".")[0]
    extra = _EXTRA_OF.get(missing)
    how = f"pip install 'crosstalk[{extra}]'" if extra else f"pip install {missing}"
    msg = f"unavailable: it needs {missing}, which is not installed ({how})"
    p.description = f"crosstalk {name}: {msg}"
    p.formatter_class = argparse.RawDescriptionHelpFormatter  # the install line unbroken
    p.set_defaults(missing=msg)


def _check_settings(args: argparse.Namespace) -> None:
    """Bad settings end every command the same way, before it starts: one line, EXIT_CONFIG."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    path = getattr(args, "config", None) or os.environ.get("CROSSTALK_CONFIG")
    try:
        load_settings(getattr(args, "config", None))
    except FileNotFoundError:
        raise CliError(EXIT_CONFIG, f"settings file {path}: no such file") from None
    except IsADirectoryError:
        raise CliError(EXIT_CONFIG, f"settings file {path}: is a directory") from None
    except tomllib.TOMLDecodeError as exc:
        raise CliError(EXIT_CONFIG, f"settings file {path}: not TOML ({exc})") from None
    except UnicodeDecodeError:
        raise CliError(EXIT_CONFIG, f"settings file {path}: not UTF-8 text") from None
    except SettingsError as exc:
        # Malformed JSON in a list or object CROSSTALK_* variable: pydantic-settings names the field and the
        # source; the JSON error says where (never the value, which may be a secret).
        why = f" ({exc.__cause__})" if isinstance(exc.__cause__, ValueError) else ""
        raise CliError(EXIT_CONFIG, f"settings: {exc}{why}") from None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        source = f"settings file {path}" if path else "settings"
        raise CliError(EXIT_CONFIG, f"{source}: {where}: {first['msg']}{more}") from None
    except OSError as exc:
        raise CliError(EXIT_CONFIG, f"settings file {path}: cannot read ({exc.strerror or exc})") from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = _command_of(argv)
    parser = build_parser(only=command if command in _DELEGATED or command in _LOCAL else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "missing", None):  # an unavailable command takes any arguments
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        _check_settings(args)
        if hasattr(args, "func"):
            return int(args.func(args))
        if getattr(args, "missing", None):
            raise CliError(EXIT_USAGE, f"crosstalk {args.command}: {args.missing}")
        return int(importlib.import_module(args.module).run(args))
    except CliError as exc:
        print(f"crosstalk: error: {exc}", file=sys.stderr)
        return exc.code
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        # A port another process holds is a setting to change, not a crash: one line, as bad settings.
        print(f"crosstalk: error: cannot listen ({exc.strerror or exc}): free the port or set another", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
