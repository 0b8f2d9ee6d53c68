"""The shell in rooms with one direction, read statically from the imports of every module of streams/.

A room is a top-level part of streams/: a package (cli/, inputs/, ...) or a module (producer.py, ...).
Each room sits on a layer. A module may import modules of its own layer or of a lower one, never of a
higher one; and neither the modules nor the rooms import one another in a loop. Every import counts: at
module level, inside a function (deferred for start-up time, it is still a dependency) and under
TYPE_CHECKING (a type is a dependency too).

Where an adapter needs what a higher room builds (the embedded runner as an output, a command's exit
codes), the command in cli/ builds it and hands it down; helpers that commands and adapters share live on
the ground floor (streams/io.py, streams/terminal.py, streams/routing.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Highest first. A new room is placed here on purpose (test_every_room_has_a_layer), not by accident.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),  # the commands: parse arguments, build the adapters and wire them together
    ("embedded", "kafka"),  # the runners: the detectors in-process, or as Faust workers on Kafka
    ("inputs", "sinks", "probe", "report", "integrations", "sim"),  # the adapters
    ("outputs",),  # where produced events go: a JSONL file or stdout, the input topic, a function
    ("producer",),  # the gateway's publishing library (and the light Kafka clients)
    ("settings", "io", "routing", "terminal", "redact", "heap"),  # the ground: shared by everything above
)


@dataclass(frozen=True)
class Edge:
    src: str  # module that imports
    dst: str  # module imported
    path: str  # file of `src`, relative to the root
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.src} imports {self.dst}"


def modules_of(root: Path, package: str = "streams") -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package) for every .py file under root/package."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def import_graph(root: Path, package: str = "streams") -> list[Edge]:
    """Every import of one module of `package` by another, with the line it is written on."""
    mods = modules_of(root, package)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: set[Edge] = set()
    for mod, (path, is_package) in mods.items():
        here = mod if is_package else mod.rpartition(".")[0]
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                # `from pkg import name`: the submodule pkg.name when there is one, else pkg itself.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base for alias in node.names]
            for target in targets:
                if target != package and not target.startswith(package + "."):
                    continue
                dst = resolve(target)
                if dst is not None and dst not in (mod, package):
                    edges.add(Edge(mod, dst, rel, node.lineno))
    return sorted(edges, key=lambda e: (e.path, e.line, e.dst))


def room_of(module: str) -> str:
    return module.split(".")[1]


def loops(nodes: Iterable[str], pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in pairs:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(succ[node]):
                work.append((node, i + 1))
                nxt = succ[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:  # returning to the caller: it inherits this node's low-link
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def layer_of(room: str) -> int:
    """0 for the top layer; a higher number is a lower layer."""
    for depth, rooms in enumerate(LAYERS):
        if room in rooms:
            return depth
    raise KeyError(room)


def upward(edges: Iterable[Edge]) -> list[Edge]:
    return [e for e in edges if layer_of(room_of(e.src)) > layer_of(room_of(e.dst))]


@pytest.fixture(scope="module")
def graph() -> list[Edge]:
    return import_graph(ROOT)


def test_every_room_has_a_layer() -> None:
    rooms = {room_of(m) for m in modules_of(ROOT) if m != "streams"}
    declared = {r for layer in LAYERS for r in layer}
    assert rooms - declared == set(), "rooms of streams/ on no layer: place them in LAYERS"
    assert declared - rooms == set(), "LAYERS names rooms that streams/ does not have"


def test_no_import_loop_among_modules(graph: list[Edge]) -> None:
    components = loops(modules_of(ROOT), ((e.src, e.dst) for e in graph))
    detail = [str(e) for c in components for e in graph if e.src in c and e.dst in c]
    assert components == [], "modules that import one another in a loop:\n" + "\n".join(detail)


def test_no_import_loop_among_rooms(graph: list[Edge]) -> None:
    between = [e for e in graph if room_of(e.src) != room_of(e.dst)]
    components = loops({room_of(e.src) for e in graph}, ((room_of(e.src), room_of(e.dst)) for e in between))
    detail = [str(e) for c in components for e in between if room_of(e.src) in c and room_of(e.dst) in c]
    assert components == [], f"rooms that import one another: {components}\n" + "\n".join(detail)


def test_no_import_points_up(graph: list[Edge]) -> None:
    bad = upward(graph)
    assert bad == [], "imports from a lower layer to a higher one:\n" + "\n".join(map(str, bad))


def test_the_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The checks above pass vacuously if the reader misses imports; on a small tree it must see them all."""
    files = {
        "__init__.py": "",
        "producer.py": "from streams.cli.main import CliError  # up\n",
        "cli/__init__.py": "from streams.cli.main import main\n",
        "cli/main.py": "def main():\n    from streams import producer\n    return producer\n",
        "sinks/__init__.py": "from .base import Sink\n",
        "sinks/base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from streams.sinks import Sink\n",
        "inputs/__init__.py": "",
        "inputs/files.py": "import streams.sinks.base\nfrom streams.inputs import otlp\n",
        "inputs/otlp.py": "",
    }
    for name, text in files.items():
        (tmp_path / "streams" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "streams" / name).write_text(text)
    edges = import_graph(tmp_path)
    pairs = {(e.src, e.dst) for e in edges}
    assert pairs == {
        ("streams.producer", "streams.cli.main"),
        ("streams.cli", "streams.cli.main"),
        ("streams.cli.main", "streams.producer"),  # inside a function, `from package import module`
        ("streams.sinks", "streams.sinks.base"),  # relative
        ("streams.sinks.base", "streams.sinks"),  # under TYPE_CHECKING
        ("streams.inputs.files", "streams.sinks.base"),
        ("streams.inputs.files", "streams.inputs.otlp"),
    }
    mods = modules_of(tmp_path)
    assert loops(mods, pairs) == [["streams.cli.main", "streams.producer"], ["streams.sinks", "streams.sinks.base"]]
    assert [str(e) for e in upward(edges)] == ["streams/producer.py:1: streams.producer imports streams.cli.main"]


# A domain's detectors are the core's: the shell copies, restores and sizes them through DomainMonitor
# (`pieces()`, `attach()`, `state_size()`), so that a new stateful signal never has to touch streams/.


def core_reaches(root: Path) -> list[str]:
    """Every `<something>.overlap` (or another detector's insides) read in streams/, as path:line."""
    found = []
    for path in sorted((root / "streams").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "overlap":
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_the_shell_never_reaches_into_a_domains_detectors() -> None:
    assert core_reaches(ROOT) == []


def test_the_reach_check_sees_a_reach(tmp_path: Path) -> None:
    (tmp_path / "streams" / "kafka").mkdir(parents=True)
    (tmp_path / "streams" / "kafka" / "x.py").write_text("def f(dm):\n    return dm.overlap.index\n")
    assert core_reaches(tmp_path) == ["streams/kafka/x.py:2"]


# The core composes itself once (detectors/front.py, detectors/back.py): a runner hands events to a Front and
# exchanges to a Back (or to the Monitor, which is both), and never calls the pieces those halves compose. The staged
# topology cuts the back at its routing (`route_exchange` picks the domain partition an exchange is sent to): that
# cut is the topology itself, not a second composition.
PIECES = frozenset({"observe_request", "observe_response", "observe_exchange", "observe_stats"})


def recompositions(root: Path) -> list[str]:
    """Every call in streams/ of a piece the core's halves compose, as path:line name: a joiner's or a domain's
    observe_*, or the bare `admit` function (`Front.admit` and an event clock's `admit` are methods of their own)."""
    found = []
    for path in sorted((root / "streams").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name in PIECES or (isinstance(f, ast.Name) and f.id == "admit"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    return found


def test_no_runner_composes_the_core_again() -> None:
    assert recompositions(ROOT) == []


def test_the_composition_check_sees_a_piece(tmp_path: Path) -> None:
    (tmp_path / "streams" / "kafka").mkdir(parents=True)
    (tmp_path / "streams" / "kafka" / "x.py").write_text("def f(j, e, dm, ex):\n    j.observe_request(e)\n")
    (tmp_path / "streams" / "kafka" / "y.py").write_text("from detectors.front import admit\nadmit(1, 2, 3)\n")
    assert recompositions(tmp_path) == ["streams/kafka/x.py:2 observe_request", "streams/kafka/y.py:2 admit"]
