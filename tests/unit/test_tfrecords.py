"""TFRecord shards: golden bytes, Arrow round trips, determinism, and tf.data reading them."""

import gzip
import io
import subprocess
import sys
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute below
import pytest

from seqline.pipeline import tfrecord
from seqline.pipeline.blocks import SEQ
from seqline.pipeline.tfrecord import coding, framing
from seqline.pipeline.tfrecord.compression import DEFAULT_LEVEL, MAX_LEVEL, gzip_compress
from tests.conftest import REPO
from tests.golden.make_golden import (
    GOLDEN,
    GOLDEN_GZIP,
    golden_bytes,
    golden_gzip_bytes,
    shard_batch,
    tiny_batch,
)


def test_tfrecords_golden_bytes_match_the_recipe():
    assert golden_bytes() == GOLDEN.read_bytes()


def test_tfrecords_encoding_is_the_same_in_a_fresh_process():
    """tfx-bsl orders an Example's features by hash, differently per call; seqline must not."""
    code = "from tests.golden.make_golden import golden_bytes; import sys; " \
           "sys.stdout.buffer.write(golden_bytes())"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, check=True)
    assert out.stdout == GOLDEN.read_bytes()


def test_tfrecords_framing_is_byte_identical_to_tensorflows_writer(tmp_path):
    tf = pytest.importorskip("tensorflow")
    records = tfrecord.encode(tfrecord.normalize(tiny_batch())).to_pylist()
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    assert (tmp_path / "tf.tfrecord").read_bytes() == tfrecord.frame(records)


def test_tfrecords_gzip_golden_bytes_match_the_recipe_and_the_sink(tmp_path):
    """libdeflate's output pinned: the same on every machine for one version (decision 51)."""
    assert golden_gzip_bytes() == GOLDEN_GZIP.read_bytes()
    shard = tfrecord.ShardSink(str(tmp_path), "gzip")(0, shard_batch()).shard
    assert (tmp_path / shard["path"]).read_bytes() == GOLDEN_GZIP.read_bytes()


@pytest.mark.parametrize("level", [0, DEFAULT_LEVEL, 6, MAX_LEVEL])
def test_tfrecords_tf_data_parses_a_gzip_shard_with_seq_in_order(tmp_path, level):
    tf = pytest.importorskip("tensorflow")
    batch = pa.record_batch({"x": np.arange(500, dtype=np.float64), SEQ: np.arange(500) + 7})
    shard = tfrecord.ShardSink(str(tmp_path), "gzip", level)(3, batch).shard
    assert shard["path"] == "shard-000003.tfrecord.gz"
    assert (shard["records"], shard["seq_first"], shard["seq_last"]) == (500, 7, 506)
    spec = {SEQ: tf.io.FixedLenFeature([], tf.int64), "x": tf.io.FixedLenFeature([], tf.float32)}
    dataset = tf.data.TFRecordDataset(str(tmp_path / shard["path"]), compression_type="GZIP")
    parsed = next(iter(dataset.batch(1000).map(lambda r: tf.io.parse_example(r, spec))))
    np.testing.assert_array_equal(parsed[SEQ].numpy(), np.arange(500) + 7)
    np.testing.assert_array_equal(parsed["x"].numpy(), np.arange(500, dtype=np.float32))


def test_tfrecords_round_trip_keeps_every_value_of_a_normalized_batch():
    batch = tfrecord.normalize(tiny_batch())
    assert batch.schema.field("temp").type == pa.float32()  # Example floats are 32-bit
    assert batch.schema.field("day").type == pa.int64()
    records = tfrecord.encode(batch).to_pylist()
    assert tfrecord.decode(records, batch.schema).equals(batch)


def test_tfrecords_dates_and_timestamps_come_back_as_themselves():
    import datetime as dt

    batch = tfrecord.normalize(pa.record_batch({
        "d": pa.array([dt.date(2012, 1, 1), None]),
        "t": pa.array([dt.datetime(2012, 1, 1, 3, 4, 5), None], pa.timestamp("s")),
    }))
    assert tfrecord.decode(tfrecord.encode(batch).to_pylist(), batch.schema).equals(batch)


def test_tfrecords_refuse_a_type_example_cannot_hold_naming_the_column():
    batch = pa.record_batch({"s": pa.array([{"a": 1}])})
    with pytest.raises(TypeError, match=r"column 's' has type struct.*Convert it in a preprocess"):
        tfrecord.normalize(batch)


@pytest.mark.parametrize(("damage", "message"), [
    (lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], r"record 0 at byte 0 is corrupt"),
    (lambda b: b[:-3], r"truncated record 2 at byte \d+"),
    (lambda b: b"\x05" + b[1:], r"record 0 at byte 0 has a corrupt length"),
])
def test_tfrecords_reading_damaged_bytes_names_the_record_and_offset(damage, message):
    with pytest.raises(tfrecord.CorruptRecord, match=message):
        list(tfrecord.iter_records(io.BytesIO(damage(GOLDEN.read_bytes())), "tiny"))


def _zlib6(data: bytes) -> bytes:
    """A shard as seqline wrote it before decision 51: zlib level 6, wbits 31."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    return deflate.compress(data) + deflate.flush()


@pytest.mark.parametrize("compression", ["gzip", "auto"])
@pytest.mark.parametrize("packed", [
    lambda b: gzip_compress(b),  # as the sink writes: inflated whole by libdeflate
    _zlib6,  # a shard from before decision 51
    lambda b: gzip_compress(b[:150]) + gzip_compress(b[150:]),  # two members: zlib streams
    lambda b: gzip.compress(b, mtime=0) + gzip_compress(b"", 6),  # an empty member after
], ids=["libdeflate", "zlib-6", "two-members", "empty-member-after"])
def test_tfrecords_reading_a_gzip_stream_gives_its_records(packed, compression):
    data = GOLDEN.read_bytes()
    records = [r for chunk in tfrecord.iter_records(io.BytesIO(packed(data)), "tiny",
                                                    compression) for r in chunk]
    assert tfrecord.frame(records) == data


def test_tfrecords_reading_a_gzip_stream_longer_than_a_chunk_streams_it(monkeypatch):
    monkeypatch.setattr(framing, "_READ_CHUNK", 64)  # the stream no longer fits one read
    packed = gzip_compress(GOLDEN.read_bytes())
    records = [r for chunk in tfrecord.iter_records(io.BytesIO(packed), "tiny", "gzip")
               for r in chunk]
    assert tfrecord.frame(records) == GOLDEN.read_bytes()


@pytest.mark.parametrize("damage", [
    lambda b: b[:30] + bytes([b[30] ^ 0x55]) + b[31:],  # inside the deflate data
    lambda b: b[:-6] + bytes([b[-6] ^ 1]) + b[-5:],  # the CRC in the trailer
    lambda b: b + b"junk after the member",
], ids=["deflate-data", "trailer-crc", "trailing-bytes"])
def test_tfrecords_reading_damaged_gzip_says_it_is_not_readable(damage):
    packed = damage(gzip_compress(GOLDEN.read_bytes()))
    with pytest.raises(tfrecord.CorruptRecord, match="not a readable gzip stream"):
        list(tfrecord.iter_records(io.BytesIO(packed), "tiny", "gzip"))


def test_tfrecords_reading_in_small_chunks_gives_the_same_records(monkeypatch):
    monkeypatch.setattr(framing, "_READ_CHUNK", 7)  # records straddle every chunk boundary
    records = [r for chunk in tfrecord.iter_records(io.BytesIO(GOLDEN.read_bytes()), "tiny")
               for r in chunk]
    assert tfrecord.frame(records) == GOLDEN.read_bytes()


def test_tfrecords_reordering_one_encoding_gives_the_column_by_column_bytes():
    """The fast path (one encode, entries re-ordered by name) against the slow, obvious one
    (each column encoded alone, joined in name order), on names that look alike, nulls,
    lists and values long enough for multi-byte lengths."""
    from seqline.pipeline.tfrecord.example_order import in_name_order

    rng = np.random.default_rng(1)
    n = 2000
    batch = tfrecord.normalize(pa.record_batch({
        "temp_max": rng.random(n), "temp_min": rng.random(n), "a": rng.integers(-5, 5, n),
        "feature_alpha_000_x": pa.array([("x" * int(k)) if k % 7 else None
                                         for k in rng.integers(0, 300, n)]),
        "feature_beta__000_x": rng.random(n),
        "tags": pa.array([list(range(int(k))) for k in rng.integers(0, 40, n)]),
        "blob": pa.array([b"z" * int(k) for k in rng.integers(0, 40_000, n)], pa.binary()),
        SEQ: np.arange(n),
    }))
    whole = pa.RecordBatch.from_arrays([coding._as_feature(c) for c in batch.columns],
                                       names=batch.schema.names)
    fast = in_name_order(pa.array(coding._encoder().encode(whole), pa.binary()),
                         batch.schema.names)
    slow = []
    for name in sorted(batch.schema.names):
        one = pa.RecordBatch.from_arrays([coding._as_feature(batch.column(name))],
                                         names=[name])
        slow.append(coding._strip_tag(pa.array(coding._encoder().encode(one), pa.binary())))
    joined = pa.compute.binary_join_element_wise(*slow, b"")
    expected = pa.compute.binary_join_element_wise(coding._tagged_lengths(joined), joined, b"")
    assert fast is not None and fast.equals(expected)
    # rows whose entries come in different orders (odd rows backwards), and a slice of them
    backwards = pa.compute.binary_join_element_wise(*slow[::-1], b"")
    backwards = pa.compute.binary_join_element_wise(coding._tagged_lengths(backwards),
                                                    backwards, b"")
    mixed = pa.array([b if i % 2 else e for i, (e, b) in
                      enumerate(zip(expected.to_pylist(), backwards.to_pylist(), strict=True))],
                     pa.binary())
    assert in_name_order(mixed, batch.schema.names).equals(expected)
    assert in_name_order(mixed.slice(3), batch.schema.names).equals(expected.slice(3))


def _by_tfx_bsl(batch: pa.RecordBatch) -> pa.BinaryArray:
    """tfx-bsl's encoding of a normalized batch, its entries put in name order."""
    from seqline.pipeline.tfrecord.example_order import in_name_order

    whole = pa.RecordBatch.from_arrays([coding._as_feature(c) for c in batch.columns],
                                       names=batch.schema.names)
    ordered = in_name_order(pa.array(coding._encoder().encode(whole), pa.binary()),
                            batch.schema.names)
    assert ordered is not None
    return ordered


def _every_scalar_kind() -> pa.RecordBatch:
    """Nulls (an all-null column too), negative and 64-bit ints, NaN, strings of multi-byte
    lengths and characters, dates, timestamps, booleans, a name longer than 127 bytes."""
    import datetime

    rng = np.random.default_rng(2)
    n = 3000
    every = range(n)
    return tfrecord.normalize(pa.record_batch({
        "i": pa.array([None if k % 11 == 0 else int(v) for k, v in
                       zip(every, rng.integers(-2 ** 63, 2 ** 63 - 1, n), strict=True)]),
        "small": rng.integers(0, 300, n),
        "f": pa.array([None if k % 7 == 0 else float(v) for k, v in
                       zip(every, rng.normal(size=n), strict=True)]),
        "nan": np.where(rng.random(n) < 0.1, np.nan, rng.random(n)),
        "s": pa.array([None if k % 5 == 0 else "é" * int(v) for k, v in
                       zip(every, rng.integers(0, 9000, n), strict=True)]),
        "b": pa.array([bytes(int(v)) for v in rng.integers(0, 200, n)], pa.binary()),
        "d": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=int(v))
                       for v in rng.integers(0, 900, n)]),
        "t": pa.array(rng.integers(0, 10 ** 12, n).astype("datetime64[ms]")),
        "flag": rng.random(n) < 0.5,
        "n" * 150: rng.integers(0, 5, n),
        "nothing": pa.array([None] * n, pa.int64()),
        SEQ: np.arange(n) * 1000}))


def test_tfrecords_scalar_encoder_writes_tfx_bsls_bytes():
    """The NumPy encoder of scalar batches against tfx-bsl's, byte for byte, on every scalar
    kind (_every_scalar_kind), a slice and no rows."""
    from seqline.pipeline.tfrecord.scalar_encoder import encode_scalars

    batch = _every_scalar_kind()
    assert encode_scalars(batch).equals(_by_tfx_bsl(batch))
    assert encode_scalars(batch.slice(5, 100)).equals(_by_tfx_bsl(batch.slice(5, 100)))
    assert len(encode_scalars(batch.slice(0, 0))) == 0
    assert tfrecord.encode(batch).equals(_by_tfx_bsl(batch))  # the path encode takes
    lists = tfrecord.normalize(pa.record_batch({"l": pa.array([[1], [2, 3]]), SEQ: [0, 1]}))
    assert encode_scalars(lists) is None  # lists: tfx-bsl's
    assert encode_scalars(tiny_batch()) is None  # not normalized (list_, int32): not read
    assert tfrecord.encode(lists).equals(_by_tfx_bsl(lists))


def _chunk(examples: list[bytes] | pa.BinaryArray) -> tfrecord.Records:
    """Framed Examples read back, as a reader gets them (in 8 MiB chunks: joined)."""
    stream = io.BytesIO(tfrecord.frame(examples))
    return tfrecord.Records.joined(list(tfrecord.iter_record_chunks(stream, "t", "none")))


def test_tfrecords_scalar_decoder_reads_what_tfx_bsl_reads():
    """Examples of every scalar kind read in place (scalar_decoder.py) give tfx-bsl's batch
    (and the batch written), whole and in part; what it does not read (a list column, a
    feature missing, features in another order, an empty list) goes to tfx-bsl, which gives
    the same batch or the same error."""
    from seqline.pipeline.tfrecord.scalar_decoder import decode_scalars

    def in_place(records: tfrecord.Records, schema: pa.Schema) -> bool:
        view = np.frombuffer(records.buffer, np.uint8)
        return decode_scalars(view, records.starts, records.starts + records.lengths,
                              schema) is not None

    def same(a: pa.RecordBatch, b: pa.RecordBatch) -> bool:  # NaN too: as encoded bytes
        return a.schema == b.schema and tfrecord.encode(a).equals(tfrecord.encode(b))

    batch = _every_scalar_kind()
    records = _chunk(tfrecord.encode(batch))
    assert in_place(records, batch.schema)
    decoded = tfrecord.decode(records, batch.schema)
    assert same(decoded, tfrecord.decode(records.as_list(), batch.schema))
    assert same(decoded, batch)
    part = tfrecord.Records(records.buffer, records.starts[7:40], records.lengths[7:40])
    assert same(tfrecord.decode(part, batch.schema), batch.slice(7, 33))

    more = batch.schema.append(pa.field("zz", pa.int64()))  # a feature no record has
    unordered = _chunk(coding._encoder().encode(pa.RecordBatch.from_arrays(  # tfx-bsl's
        [coding._as_feature(c) for c in batch.columns], names=batch.schema.names)))  # order
    lists = tfrecord.normalize(pa.record_batch({"l": pa.array([[1], [2, 3]]), SEQ: [0, 1]}))
    for chunk, schema in [(records, more), (unordered, batch.schema),
                          (_chunk(tfrecord.encode(lists)), lists.schema)]:
        if schema is not batch.schema:  # (a hash order may happen to be name order)
            assert not in_place(chunk, schema)
        assert same(tfrecord.decode(chunk, schema), tfrecord.decode(chunk.as_list(), schema))
    empty = _chunk(tfrecord.encode(tfrecord.normalize(pa.record_batch(
        {"x": pa.array([[1], []]), SEQ: [0, 1]}))))
    scalar = pa.schema([pa.field("x", pa.int64()), pa.field(SEQ, pa.int64())])
    assert not in_place(empty, scalar)
    for given in (empty, empty.as_list()):
        with pytest.raises(tfrecord.CorruptRecord, match="several values"):
            tfrecord.decode(given, scalar)


def test_tfrecords_records_joined_are_the_chunks_records_in_order():
    chunks = [_chunk(tfrecord.encode(tfrecord.normalize(b)))
              for b in (tiny_batch(), shard_batch())]
    joined = tfrecord.Records.joined(chunks)
    assert joined.as_list() == chunks[0].as_list() + chunks[1].as_list() == list(joined)
    assert (joined[0], joined[-1], joined[1:3]) == (list(joined)[0], list(joined)[-1],
                                                    list(joined)[1:3])
    assert tfrecord.Records.joined(chunks[:1]) is chunks[0]
    assert len(tfrecord.Records.joined([])) == 0
