"""ShardFeed: shards in order as they are written, waiting readers, held records, failure."""

import threading

import pyarrow as pa
import pytest

from seqline.pipeline.errors import StageError
from seqline.pipeline.feed import ShardFeed


def _batch(n: int) -> pa.RecordBatch:
    return pa.record_batch({"__seq__": pa.array(range(n), pa.int64())})


def test_a_reader_waits_for_the_next_shard_and_sees_the_end(tmp_path):
    feed = ShardFeed("features", tmp_path)
    seen = []

    def read():
        known = 0
        while True:
            shards, done = feed.wait(known)
            seen.extend(s["path"] for s in shards[known:])
            known = len(shards)
            if done:
                return

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(3):
        feed.add({"path": f"shard-{i}", "records": 1}, _batch(1).schema)
    feed.close(tmp_path / "final")
    reader.join(timeout=5)
    assert seen == ["shard-0", "shard-1", "shard-2"]
    assert feed.path({"path": "shard-0"}) == tmp_path / "final" / "shard-0"


def test_held_records_only_once_followed_bounded_and_taken_once(tmp_path):
    batch = _batch(1000)  # 8,000 bytes
    feed = ShardFeed("features", tmp_path, hold_bytes=20_000)
    feed.add({"path": "a"}, batch.schema, batch)
    assert feed.take({"path": "a"}) is None  # nobody followed yet: nothing held
    feed.follow()
    for name in "bcd":
        feed.add({"path": name}, batch.schema, batch)
    assert feed.take({"path": "b"}) is None  # the oldest went when d passed 20,000 bytes
    assert feed.take({"path": "c"}).equals(batch) and feed.take({"path": "c"}) is None
    feed.release()
    assert feed.take({"path": "d"}) is None and feed.taken == 1


def test_a_failed_stage_wakes_its_readers_with_the_cause(tmp_path):
    feed = ShardFeed("features", tmp_path)
    errors = []

    def read():
        try:
            feed.wait(0)
        except StageError as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    feed.fail(ValueError("disk full"))
    reader.join(timeout=5)
    assert "stage 'features' stopped" in str(errors[0]) and "disk full" in str(errors[0])
    with pytest.raises(StageError):
        feed.schema()


def test_a_shard_read_while_its_stage_commits_is_found_in_the_committed_folder(tmp_path):
    """The commit renames the folder before the feed learns the new one: a reader in that
    gap waits for it instead of failing."""
    import time

    from seqline.pipeline.tfrecord import ShardSink, read_fed_shard

    tmp, final = tmp_path / ".features.tmp-1", tmp_path / "features"
    tmp.mkdir()
    batch, shard, _ = ShardSink(str(tmp))(0, _batch(5))
    feed = ShardFeed("features", tmp)
    feed.add(shard, batch.schema)
    tmp.rename(final)  # committed, and the feed does not know yet

    def tell_later():
        time.sleep(0.3)
        feed.close(final)

    threading.Thread(target=tell_later).start()
    assert read_fed_shard(feed, shard).column("__seq__").to_pylist() == [0, 1, 2, 3, 4]
