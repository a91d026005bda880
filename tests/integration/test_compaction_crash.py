"""Compaction killed with SIGKILL (issue 7): a compacted topic gets a
round of keyed writes (values and some tombstones), the broker is killed
at a random moment while the cleaner is rewriting it (io throttled so a
pass takes a while, segments small so a pass commits several groups), and
restarted.  After every restart, read with raw Fetch v4:
  - every batch whole, its CRC-32C right (no torn batch is served);
  - offsets strictly increasing, every record exactly what was
    acknowledged at that offset (compaction only removes, never moves);
  - every key's newest acknowledged record at its acknowledged offset.
At the end the restarted broker compacts to completion and leaves no
cleaning/ or *.swap behind.  Seeded; 15-25 s."""
import os
import random
import signal
import time

import kafka_raw as kr
from retention_support import fast_broker, metric, wait_for
from support import create_topic, topic_name

SEED = 20261130
ROUNDS = 16
KEYS = 300
PER_ROUND = 1500
TOPIC_CFG = {"cleanup.policy": "compact", "segment.bytes": "65536",
             "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"}
BROKER_CFG = {"log.cleaner.backoff.ms": "50",
              "log.cleaner.io.max.bytes.per.second": "1000000"}


def produce_round(port, t, rng, acked, newest):
    """PER_ROUND records under random keys (5 % tombstones), 50 a batch."""
    with kr.Conn(port, timeout=10) as c:
        for _ in range(PER_ROUND // 50):
            recs = []
            for _ in range(50):
                k = b"key%04d" % rng.randrange(KEYS)
                v = None if rng.random() < 0.05 else b"%s=%08x" % (k, rng.getrandbits(32)) + b"." * 140
                recs.append((k, v, [], 0))
            batch = kr.record_batch(recs, int(time.time() * 1000))
            (res,) = kr.parse_produce_v3(c.request(kr.API_PRODUCE, 3,
                                                   kr.produce_v3_body(t, 0, batch, acks=1)))
            assert res[2] == 0, "produce error %d" % res[2]
            for i, (k, v, _, _) in enumerate(recs):
                acked[res[3] + i] = (k, v)
                newest[k] = res[3] + i


def read_log(port, t):
    """[(offset, key, value)] from 0 to the high watermark; asserts every
    batch is whole with a right CRC and offsets only grow."""
    return [(o, k, v) for o, k, v, _h in kr.fetch_records(port, t, 0)]


def check(port, t, acked, newest):
    got = read_log(port, t)
    at = {}
    for o, k, v in got:
        assert acked.get(o) == (k, v), "offset %d holds %r, acknowledged %r" % (o, (k, v), acked.get(o))
        at[o] = k
    missing = [(k, o) for k, o in newest.items() if at.get(o) != k]
    assert not missing, "newest record of %d keys gone, e.g. %r" % (len(missing), missing[:3])
    return len(got)


def leftovers(d):
    names = os.listdir(d)
    return [n for n in names if n == "cleaning" or n.endswith(".swap")]


def test_sigkill_during_compaction_leaves_a_valid_compacted_log(start_broker):
    rng = random.Random(SEED)
    b = fast_broker(start_broker, **BROKER_CFG)
    t = topic_name("ckill")
    create_topic(b, t, 1, TOPIC_CFG)
    d = b.partition_dir(t, 0)
    acked, newest = {}, {}
    interrupted = 0
    t0 = time.monotonic()
    for rnd in range(ROUNDS):
        produce_round(b.port, t, rng, acked, newest)
        # Kill while a pass is rewriting: wait for its staging dir, then a
        # random moment inside the write (throttled, it takes ~0.3 s and more).
        try:
            wait_for("a compaction to start", lambda: "cleaning" in os.listdir(d),
                     timeout=10, every=0.005)
        except AssertionError:
            pass                                # finished between polls: kill anyway
        time.sleep(rng.uniform(0, 0.2))
        b.stop(signal.SIGKILL)
        interrupted += bool(leftovers(d))
        b.start()
        n = check(b.port, t, acked, newest)
        print("round %d: %d records acknowledged, %d read back, %s" %
              (rnd, len(acked), n, leftovers(d) or "no leftovers"))
    # The broker goes on compacting: a full pass completes after the last kill.
    wait_for("a compaction after restart",
             lambda: (metric(b, "sluice_log_cleaner_runs_total", t) or 0) >= 1, timeout=30)
    n = check(b.port, t, acked, newest)
    assert n < len(acked)                       # older versions went
    b.stop(signal.SIGTERM)
    assert not leftovers(d), leftovers(d)
    print("%d rounds in %.1f s, %d kills inside a pass (cleaning/ or *.swap on disk), "
          "%d acknowledged, %d after compaction"
          % (ROUNDS, time.monotonic() - t0, interrupted, len(acked), n))
    assert interrupted >= ROUNDS // 4, "only %d of %d kills hit a running pass" % (interrupted, ROUNDS)
