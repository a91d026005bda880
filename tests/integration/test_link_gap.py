"""A cluster link mirroring a compacted source after its cleaner ran
(segments/log.c L7, daemon/link/link.c K2): the source's first surviving
batch starts past the mirror's log end (0), and later ones skip offsets.

What a user checks: the mirror holds exactly the source's batches (offset,
CRC, producer id, sequence, every byte), its lag reaches 0, and a consumer
of the mirror reads exactly the records a consumer of the source reads, at
the same offsets.
"""
import time

from retention_support import fast_broker, metric, wait_for, watermarks
from support import ck_producer, consume, create_topic, produce_ok, topic_name
from test_compaction import BASE, KEYS, VERSIONS, roll_active, write_versions
from test_link import assert_same, batches, link_source, mirror, mirror_state, until

MID = 30


def test_a_compacted_source_is_mirrored_across_its_gaps(start_broker):
    src = fast_broker(start_broker)
    dest = start_broker()
    t = topic_name("gap")
    create_topic(src, t, 1, BASE)
    write_versions(src, t)                                # all gone: a gap from 0
    produce_ok(ck_producer(src, **{"linger.ms": 5, "batch.num.messages": 10}), t,
               [{"key": b"mid%d" % i, "value": b"m" * 50} for i in range(MID)])
    write_versions(src, t, tag=b"w")                      # newest kept: a gap inside
    roll_active(src, t)
    wait_for("a compaction", lambda: (metric(src, "sluice_log_cleaner_runs_total", t) or 0) >= 1,
             timeout=30)

    def settled():                   # the first round gone, and nothing more to clean
        a = batches(src, t, 0)
        time.sleep(1.0)
        return a if a[0][0].base == KEYS * VERSIONS and batches(src, t, 0) == a else None
    want, hw = wait_for("the source's cleaner to finish", settled, timeout=40)
    assert hw == 2 * KEYS * VERSIONS + MID + 60 and watermarks(src, t) == (0, hw)
    ends = [w.base + w.last_delta + 1 for w in want]
    assert any(nxt.base > end for nxt, end in zip(want[1:], ends)), "no gap inside the log"

    link_source(dest, src)
    st, got = mirror(dest, t)
    assert st == 200, got
    assert_same(src, dest, t, 1)
    until(lambda: mirror_state(dest, t) == ("active", None, 0), 15, "lag 0, no error")

    n = sum(w.count for w in want)
    a = consume(src, t, [0], n, timeout=20, settle=0.5)
    b = consume(dest, t, [0], n, timeout=20, settle=0.5)
    assert len(a) == n
    assert n < hw                                         # versions are gone at the source
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in b] == \
        [(m.offset(), m.key(), m.value(), m.headers()) for m in a]
