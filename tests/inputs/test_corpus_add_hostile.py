"""`crosstalk corpus add` against hostile files and directories (issue 42).

A 140 MB file peaked at 2.6 GB, /dev/zero grew to 3 GB in 8 s, a FIFO hung, the corpus `.tmp` was written
through a link planted at its name, binary and gzip files passed as text, and without a key the command
wrote a corpus nothing could load and exited 0.
"""

from __future__ import annotations

import gzip
import os
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from detectors.monitor import make_fingerprinter
from detectors.public import PublicSet
from streams.cli.main import main
from streams.inputs.corpus import add_file, empty_for, read
from streams.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
KEY = "corpus-hostile-key"  # a test key, not a secret
WORDS = [f"w{i}" for i in range(5000)] + ["Apache", "License", "Version", "数据", "Größe"]


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROSSTALK_DETECTION__FINGERPRINT_KEY", KEY)
    monkeypatch.delenv("CROSSTALK_CORPUS__PATH", raising=False)


def words(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + ("\n" if rng.random() < 0.05 else "") for _ in range(n))


def corpus(*args: str) -> int:
    try:
        return main(["corpus", *args])
    except SystemExit as exc:  # require_fingerprint_key
        return int(exc.code or 0)


def test_a_file_over_the_limit_is_refused_and_nothing_is_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CROSSTALK_CORPUS__MAX_FILE_BYTES", str(1 << 20))
    big = tmp_path / "big.txt"
    big.write_text(words(400_000))  # ~2.4 MB
    out = tmp_path / "c.ctk"
    assert corpus("add", str(big), "--corpus", str(out)) == 2
    assert not out.exists()


def test_a_large_file_is_fingerprinted_in_bounded_memory(tmp_path: Path) -> None:
    text = tmp_path / "large.txt"
    line = (words(2000, seed=2) + "\n").encode()
    with text.open("wb") as fh:
        for _ in range((32 << 20) // len(line)):  # 32 MiB of text, few distinct k-grams
            fh.write(line)
    out = tmp_path / "c.ctk"
    tracemalloc.start()
    try:
        assert corpus("add", str(text), "--corpus", str(out)) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(read(out, load_settings())) > 1000
    assert peak < 40 << 20, f"peak {peak / 2**20:.1f} MiB while adding a 32 MiB file"


def test_chunks_give_the_fingerprints_of_the_whole_text(tmp_path: Path) -> None:
    text = words(700_000, seed=3)  # ~4 MB: several chunks, cut inside words
    src = tmp_path / "t.txt"
    src.write_text(text)
    settings = load_settings()
    fp = make_fingerprinter(settings.detection)
    whole = PublicSet("s", "k", fp.k, fp.w, fp.kgram_hashes(fp.text_hashes(text)))
    public = empty_for(settings)
    add_file(public, fp, str(src), 1 << 30)
    assert len(public) == len(whole) and (public.hashes() == whole.hashes()).all()


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory"])
def test_a_file_that_is_not_regular_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    if kind == "dev-zero":
        name = "/dev/zero"
    elif kind == "fifo":
        name = str(tmp_path / "fifo")
        os.mkfifo(name)
    else:
        name = str(tmp_path)
    out = tmp_path / "c.ctk"
    env = {**os.environ, "CROSSTALK_DETECTION__FINGERPRINT_KEY": KEY}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "streams.cli", "corpus", "add", name, "--corpus", str(out)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AssertionError(f"corpus add {kind} did not end") from None
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "not a regular file" in proc.stderr or kind == "directory"
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"some text\0\0\0binary\x89PNG" * 100, "binary"),
        (gzip.compress(b"plain words " * 1000), "gzip-compressed"),
        ("Größe".encode("latin-1") * 100, "not UTF-8"),
    ],
    ids=["nul-bytes", "gzip", "latin-1"],
)
def test_binary_gzip_and_non_utf8_files_are_refused(tmp_path: Path, content: bytes, why: str, capsys) -> None:
    src = tmp_path / "f.txt"
    src.write_bytes(content)
    out = tmp_path / "c.ctk"
    assert corpus("add", str(src), "--corpus", str(out)) == 2
    assert why in capsys.readouterr().err and not out.exists()


def test_gzip_is_read_when_asked(tmp_path: Path) -> None:
    text = words(50_000, seed=4)
    plain, packed = tmp_path / "p.txt", tmp_path / "p.txt.gz"
    plain.write_text(text)
    packed.write_bytes(gzip.compress(text.encode()))
    a, b = tmp_path / "a.ctk", tmp_path / "b.ctk"
    assert corpus("add", str(plain), "--corpus", str(a)) == 0
    assert corpus("add", str(packed), "--gunzip", "--corpus", str(b)) == 0
    assert a.read_bytes() == b.read_bytes()


def test_a_link_planted_at_the_tmp_name_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "c.ctk"
    (tmp_path / "c.ctk.tmp").symlink_to(victim)
    src = tmp_path / "t.txt"
    src.write_text(words(5000))
    assert corpus("add", str(src), "--corpus", str(out)) == 0
    assert victim.read_text() == "precious"
    assert len(read(out, load_settings())) > 0 and not out.is_symlink()


def test_without_a_key_nothing_is_written_and_the_exit_code_is_2(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("CROSSTALK_DETECTION__FINGERPRINT_KEY")
    src = tmp_path / "t.txt"
    src.write_text(words(5000))
    out = tmp_path / "c.ctk"
    assert corpus("add", str(src), "--corpus", str(out)) == 2
    assert "no fingerprint key configured" in capsys.readouterr().err and not out.exists()
