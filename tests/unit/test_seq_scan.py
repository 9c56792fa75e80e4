"""scan_seq: a shard's seq from framing and wire format, checked against the exact reader."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pyarrow as pa
import pytest

from seqline.pipeline.blocks import SEQ, seq_of
from seqline.pipeline.tfrecord import (
    CorruptRecord,
    decode,
    encode,
    frame,
    framing,
    iter_records,
    normalize,
    seq_scan,
)
from seqline.pipeline.tfrecord.seq_scan import scan_seq

_SEQ_ONLY = pa.schema([pa.field(SEQ, pa.int64())])


def _exact(data: bytes, compression: str) -> np.ndarray:
    records = [r for chunk in iter_records(io.BytesIO(data), "shard", compression)
               for r in chunk]
    return seq_of(decode(records, _SEQ_ONLY))


def _records(n: int, first: int = 0, upper: bool = True) -> list[bytes]:
    """Examples of every feature kind seqline writes: ints, floats, text, lists, nulls; with
    `upper`, a feature whose name sorts before `__seq__`, so that seq is not the first."""
    if not n:
        return []
    rng = np.random.default_rng(first)
    columns = {
        "a": pa.array(rng.normal(size=n)),
        "name": pa.array([None if i % 7 == 3 else "x" * (i % 200) for i in range(n)]),
        "count": pa.array(rng.integers(-(2 ** 62), 2 ** 62, n)),
        "tags": pa.array([[f"t{j}" for j in range(i % 4)] for i in range(n)],
                         pa.list_(pa.string())),
        "zeta": pa.array([float(i) for i in range(n)]),
        SEQ: pa.array(np.arange(first, first + n) * 3, pa.int64())}
    if upper:
        columns["A_upper"] = pa.array(range(n))
    return encode(normalize(pa.record_batch(columns))).to_pylist()


def _shard(records: list[bytes], compression: str) -> bytes:
    framed = frame(records) if records else b""
    return gzip.compress(framed, mtime=0) if compression == "gzip" else framed


@pytest.mark.parametrize("compression", ["gzip", "none", "auto"])
@pytest.mark.parametrize(("n", "first"), [(0, 0), (1, 0), (300, 0), (50, 2 ** 40)])
def test_seq_scan_gives_the_exact_readers_seq(compression, n, first):
    data = _shard(_records(n, first), "none" if compression == "none" else "gzip")
    found = scan_seq(data, compression)
    assert found is not None
    assert found.dtype == np.int64
    np.testing.assert_array_equal(found, _exact(data, compression))


def test_seq_scan_of_a_shard_of_similar_records_reads_each_length_and_seq():
    """A shard as a stage writes it: thousands of records whose lengths span a narrow range
    (length CRCs looked up per length), at every byte alignment, seq past 16,384 (three-byte
    varints in every row) and a few one-byte ones first."""
    n = 5000
    columns = {"x": pa.array(np.arange(n) % 37),
               "note": pa.array(["y" * (i % 3) for i in range(n)]),
               SEQ: pa.array(np.arange(n) + np.where(np.arange(n) < 3, 0, 20_000), pa.int64())}
    records = encode(normalize(pa.record_batch(columns))).to_pylist()
    assert len({len(r) for r in records}) > 3
    for compression in ("none", "gzip"):
        data = _shard(records, compression)
        for vouched in (False, True):
            found = scan_seq(data, compression, vouched=vouched)
            assert found is not None
            np.testing.assert_array_equal(found, _exact(data, compression))
    damaged = bytearray(_shard(records, "none"))
    damaged[len(frame(records[:4000])) + 8] ^= 1  # the length CRC of record 4000
    assert scan_seq(bytes(damaged), "none") is None


@pytest.mark.parametrize("upper", [False, True], ids=["seq first", "seq second"])
@pytest.mark.parametrize(("n", "first"), [(1, 0), (300, 0), (50, 2 ** 40)])
def test_seq_scan_of_vouched_bytes_gives_the_exact_readers_seq(n, first, upper):
    data = _shard(_records(n, first, upper), "gzip")
    np.testing.assert_array_equal(scan_seq(data, "gzip", vouched=True), _exact(data, "gzip"))


def test_seq_scan_reads_concatenated_gzip_members_like_the_exact_reader():
    records = _records(40)
    data = _shard(records[:25], "gzip") + _shard(records[25:], "gzip")
    np.testing.assert_array_equal(scan_seq(data, "gzip"), _exact(data, "gzip"))


def _flip(data: bytes, at: int) -> bytes:
    damaged = bytearray(data)
    damaged[at] ^= 0x01
    return bytes(damaged)


def _example(features: bytes) -> bytes:
    return b"\x0a" + bytes([len(features)]) + features


def _entry(key: bytes, feature: bytes) -> bytes:
    body = b"\x0a" + bytes([len(key)]) + key + b"\x12" + bytes([len(feature)]) + feature
    return b"\x0a" + bytes([len(body)]) + body


_SEQ_5 = _entry(SEQ.encode(), b"\x1a\x03\x0a\x01\x05")  # int64_list [5], packed

# Raw bytes the scanner leaves to the exact reader: a damaged frame or gzip stream, or Examples
# it does not vouch for, framed with correct CRCs.
REFUSED = [
    ("a flipped length byte", lambda: _flip(frame(_records(5)), 0)),
    ("a flipped length CRC", lambda: _flip(frame(_records(5)), 8)),
    ("a flipped data byte", lambda: _flip(frame(_records(5)), 30)),
    ("a flipped data CRC", lambda: _flip(frame(_records(5)), 12 + len(_records(5)[0]) + 3)),
    ("a truncated record", lambda: frame(_records(5))[:-3]),
    ("bytes after the last record", lambda: frame(_records(5)) + b"\x00" * 5),
    ("a truncated gzip stream", lambda: gzip.compress(frame(_records(50)), mtime=0)[:-40]),
    ("not an Example", lambda: frame([b"\xff\xfe garbage"])),
    ("an empty Example", lambda: frame([b""])),
    ("no seq feature", lambda: frame([_example(_entry(b"x", b"\x1a\x03\x0a\x01\x05"))])),
    ("seq twice", lambda: frame([_example(_SEQ_5 + _SEQ_5)])),
    ("seq with two values", lambda: frame(
        [_example(_entry(SEQ.encode(), b"\x1a\x04\x0a\x02\x05\x06"))])),
    ("seq with no value", lambda: frame([_example(_entry(SEQ.encode(), b"\x1a\x00"))])),
    ("seq as a float", lambda: frame(
        [_example(_entry(SEQ.encode(), b"\x12\x06\x0a\x04\x00\x00\x80\x3f"))])),
    ("seq unpacked", lambda: frame([_example(_entry(SEQ.encode(), b"\x1a\x02\x08\x05"))])),
    ("a Feature longer than its entry", lambda: frame(
        [_example(_entry(SEQ.encode(), b"\x1a\x09\x0a\x01\x05"))])),
]


@pytest.mark.parametrize("make", [r[1] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_seq_scan_leaves_what_it_does_not_vouch_for_to_the_exact_reader(make):
    data = make()
    assert scan_seq(data, "auto") is None


# What bytes whose SHA-256 their writer vouches for skip: the CRCs (the writer computed them
# over these very bytes; integrity is the SHA-256's to prove) and the map entries after a first
# `__seq__` (seqline's encoder writes each key once).
SKIPPED_WHEN_VOUCHED = {"a flipped data byte", "a flipped data CRC", "a flipped length CRC",
                        "seq twice"}


@pytest.mark.parametrize("make", [r[1] for r in REFUSED if r[0] not in SKIPPED_WHEN_VOUCHED],
                         ids=[r[0] for r in REFUSED if r[0] not in SKIPPED_WHEN_VOUCHED])
def test_seq_scan_of_vouched_bytes_still_checks_framing_and_the_seq_itself(make):
    assert scan_seq(make(), "auto", vouched=True) is None


def test_seq_scan_accepts_a_handmade_example_in_seqlines_layout():
    data = frame([_example(_entry(b"a", b"\x0a\x03\x0a\x01z") + _SEQ_5)])
    np.testing.assert_array_equal(scan_seq(data, "none"), [5])
    np.testing.assert_array_equal(_exact(data, "none"), [5])


def test_seq_scan_refuses_every_single_flipped_byte_of_a_small_shard():
    """Framing, CRCs and the Example layout: no one-bit change gets past all of them."""
    data = frame(_records(3))
    for at in range(len(data)):
        damaged = _flip(data, at)
        assert scan_seq(damaged, "none") is None, at
        with pytest.raises(CorruptRecord):
            _exact(damaged, "none")


def _seq_first_records(n: int, first: int, text: int) -> list[bytes]:
    """Examples whose first feature is `__seq__` (it sorts before `zz`), `text` bytes long."""
    columns = {SEQ: pa.array(np.arange(first, first + n), pa.int64()),
               "zz": pa.array(["z" * text] * n)}
    return encode(normalize(pa.record_batch(columns))).to_pylist()


@pytest.mark.parametrize(("first", "text"), [(0, 40), (120, 40), (-5, 40), (2 ** 40, 40),
                                              (100, 20_000)],
                         ids=["one-byte seq", "seq across 128", "negative seq", "six-byte seq",
                              "an Example over 16 KiB"])
def test_seq_scan_reads_a_first_seq_in_one_window_a_record(first, text):
    data = _shard(_seq_first_records(20, first, text), "gzip")
    np.testing.assert_array_equal(scan_seq(data, "gzip", vouched=True), _exact(data, "gzip"))
    framed = _shard(_seq_first_records(20, first, text), "none")
    starts = np.cumsum([0, *(len(r) + 16 for r in _seq_first_records(20, first, text))])[:-1]
    lengths = np.array([len(r) for r in _seq_first_records(20, first, text)])
    # the one-window read itself takes them (a None would leave them to the full scan)
    window = seq_scan._seq_first(np.frombuffer(framed, np.uint8), starts + 12, lengths)
    np.testing.assert_array_equal(window, np.arange(first, first + 20))


def test_seq_scan_of_vouched_bytes_never_differs_from_the_exact_reader_on_a_changed_byte():
    """Each byte the vouched scan reads of an Example (its tag and length, its seq entry: 21
    bytes for seq 300; the entries after it are what the SHA-256 vouches for) changed three
    ways, framed again with its CRCs (as a writer framing a wrong Example would): the vouched
    scan gives the exact reader's seq or None (the exact reader then reads it), never another."""
    records = _seq_first_records(3, first=300, text=40)
    for at in range(21):
        for mask in (0x01, 0x80, 0xFF):
            damaged = bytearray(records[1])
            damaged[at] ^= mask
            data = frame([records[0], bytes(damaged), records[2]])
            found = scan_seq(data, "none", vouched=True)
            if found is None:
                continue
            try:
                exact = _exact(data, "none")
            except Exception:  # noqa: BLE001 - any refusal of the exact reader
                exact = None
            assert exact is not None and np.array_equal(found, exact), (at, mask)


def test_seq_scan_takes_the_writers_lengths_only_as_the_length_fields_say():
    """The writer's lengths (Written.framed) place the records at once; lengths that do not
    match the bytes' own length fields leave the walk to find them, with the same seq."""
    records = _records(40)
    lengths = np.array([len(r) for r in records])
    data = frame(records)
    walked, _ = framing._walk(data)
    np.testing.assert_array_equal(seq_scan._starts_as_framed(data, lengths), walked)
    swapped = lengths.copy()
    swapped[[3, 4]] = swapped[[4, 3]]  # the same total, other places
    assert lengths[3] != lengths[4]
    for wrong in (swapped, lengths[:-1], lengths + 1, np.r_[lengths, 0], lengths[::-1]):
        assert seq_scan._starts_as_framed(data, wrong) is None
        for compression, shard in (("none", data), ("gzip", gzip.compress(data, mtime=0))):
            for vouched in (False, True):
                np.testing.assert_array_equal(
                    scan_seq(shard, compression, vouched=vouched, framed=wrong),
                    _exact(shard, compression))
    np.testing.assert_array_equal(scan_seq(data, "none", framed=lengths), _exact(data, "none"))
    # a damaged length field is found with the lengths given too
    assert scan_seq(_flip(data, 0), "none", vouched=True, framed=lengths) is None
