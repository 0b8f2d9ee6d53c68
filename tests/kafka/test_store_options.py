"""Each table partition's RocksDB is bounded by the settings, not by Faust's defaults (3 x 64 MB write buffers and a
2 GB block cache per database), which let a worker's memory grow for the first half hour of a soak (issue 42)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.kafka.app import KafkaPipeline
from streams.settings import Settings


def pipeline(tmp_path: Path, topology: str, **kafka: object) -> KafkaPipeline:
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key"},
        kafka={"data_dir": str(tmp_path), "topology": topology, "store": "rocksdb://", **kafka},
    )
    return KafkaPipeline(s)


@pytest.mark.parametrize("topology", ["direct", "staged"])
def test_every_table_store_takes_the_bounds_of_the_settings(tmp_path: Path, topology: str) -> None:
    pipe = pipeline(tmp_path, topology, store_write_buffer_mb=4, store_block_cache_mb=12)
    tables = [pipe.direct_table] if topology == "direct" else [pipe.join_table, pipe.domain_table]
    for table in tables:
        options = table.data.rocksdb_options
        assert options.write_buffer_size == 4 << 20
        assert options.max_write_buffer_number == 2
        assert options.block_cache_size == 12 << 20


def test_the_database_rocksdb_opens_has_them(tmp_path: Path) -> None:
    pipe = pipeline(tmp_path, "direct", store_write_buffer_mb=4)
    db_path = tmp_path / "probe.db"
    db = pipe.direct_table.data.rocksdb_options.open(db_path)
    try:
        written = "".join(p.read_text() for p in db_path.glob("OPTIONS-*"))
    finally:
        db.close()
    assert f"write_buffer_size={4 << 20}" in written
    assert "max_write_buffer_number=2" in written
