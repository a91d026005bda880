"""Every codec round-trips byte for byte, and what the broker stores is
really the compressed batch the client sent (segment files hold batches
as received: DESIGN.md, "Data path")."""
import importlib

import pytest

import kafka_raw as kr
from support import ck_producer, consume, create_topic, kp_consume, produce_ok, topic_name

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# What kafka-python 2.0.2 needs to (de)compress each codec.
KP_MODULE = {"gzip": None, "snappy": "snappy", "lz4": "lz4", "zstd": "zstandard"}

N = 400


def values():
    # ~2 KB each, highly compressible, yet every one distinct and with
    # some binary bytes, so a byte-for-byte check means something.
    return [b"%05d\x00\xff" % i + bytes([i & 0xFF]) * 16 + b"sluice-compression " * 100 for i in range(N)]


def kp_can(codec):
    mod = KP_MODULE.get(codec)
    if mod is None:
        return True
    try:
        importlib.import_module(mod)
        return True
    except ImportError:
        return False


def stored_batches(b, topic, partition=0):
    """[kafka_raw.Batch] of every batch in the partition's segment files,
    read straight from disk; each must be magic 2."""
    out = kr.segment_batches(b.partition_dir(topic, partition))
    for x in out:
        assert x.magic == 2, "stored batch at offset %d has magic %d" % (x.base, x.magic)
    return out


def librdkafka_hint(b, codec):
    """librdkafka silently sends uncompressed batches when the broker's
    ApiVersions turn its codec feature off (protocol/README.md §7.1)."""
    with kr.Conn(b.port) as c:
        _, apis = kr.parse_api_versions_v0(c.request(kr.API_API_VERSIONS, 0))
    if codec == "lz4" and 10 not in apis:
        return ("; librdkafka enables lz4 only when the broker advertises FindCoordinator v0 "
                "(API key 10), and this broker's ApiVersions lacks it: %s" % sorted(apis))
    if codec in ("gzip", "snappy", "lz4") and apis.get(0, (1,))[0] != 0:
        return "; librdkafka uses %s only when Produce v0 is advertised (min is %d)" % (codec, apis[0][0])
    return ""


def check_stored(b, topic, codec):
    batches = stored_batches(b, topic)
    assert batches, "no batches in %s" % b.partition_dir(topic)
    codecs = {x.attrs & 7 for x in batches}
    assert codecs == {CODEC_ID[codec]}, \
        "stored batches have codecs %s, the producer used %s (%d)%s" % (
            codecs, codec, CODEC_ID[codec], librdkafka_hint(b, codec))
    raw = sum(len(v) for v in values())
    stored = sum(len(x.raw) for x in batches)
    if codec == "none":
        assert stored >= raw
    else:
        assert stored < raw / 5, "%s batches take %d bytes for %d bytes of values" % (codec, stored, raw)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_codec_round_trips_and_is_stored_compressed(broker, codec):
    t = topic_name("ck-" + codec)
    create_topic(broker, t, 1)
    vals = values()
    p = ck_producer(broker, **{"compression.type": codec, "linger.ms": 100,
                               "batch.num.messages": 100})
    msgs = produce_ok(p, t, [{"key": b"k%d" % i, "value": v} for i, v in enumerate(vals)])
    assert [m.offset() for m in msgs] == list(range(N))
    got = consume(broker, t, [0], N)
    assert [(m.offset(), m.key(), m.value()) for m in got] == \
        [(i, b"k%d" % i, v) for i, v in enumerate(vals)]
    check_stored(broker, t, codec)
    if kp_can(codec):
        recs = kp_consume(broker, t, [0], N)
        assert [(r.offset, r.value) for r in recs] == list(enumerate(vals))


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_codec_round_trips_and_is_stored_compressed(broker, codec):
    if not kp_can(codec):
        pytest.skip("kafka-python needs the %s module for %s (python3-%s not installed)"
                    % (KP_MODULE[codec], codec, KP_MODULE[codec]))
    from support import kp_producer
    t = topic_name("kp-" + codec)
    create_topic(broker, t, 1)
    vals = values()
    p = kp_producer(broker, compression_type=None if codec == "none" else codec,
                    linger_ms=100, batch_size=256 * 1024)
    try:
        fs = [p.send(t, key=b"k%d" % i, value=v, partition=0) for i, v in enumerate(vals)]
        p.flush(timeout=30)
        assert [f.get(timeout=10).offset for f in fs] == list(range(N))
    finally:
        p.close(timeout=10)
    got = consume(broker, t, [0], N)
    assert [(m.offset(), m.key(), m.value()) for m in got] == \
        [(i, b"k%d" % i, v) for i, v in enumerate(vals)]
    check_stored(broker, t, codec)
    recs = kp_consume(broker, t, [0], N)
    assert [(r.offset, r.value) for r in recs] == list(enumerate(vals))
