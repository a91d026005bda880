"""OffsetForLeaderEpoch (API 23) v0-v4 in raw frames, on a standalone
broker (leader epoch 0): where an epoch ends in the log, and Kafka's
answers for an epoch the log does not know, a CurrentLeaderEpoch newer
than the broker's, a partition that does not exist.  The cluster side
(FENCED_LEADER_EPOCH after a failover, the end of an older epoch) is in
test_replication_epochs.py."""
import os

import kafka_raw as kr
from support import ck_producer, produce_ok, topic_name

NONE, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_LEADER_EPOCH = 0, 3, 75


def test_offset_for_leader_epoch_answers_every_version(broker):
    t = topic_name("oe")
    produce_ok(ck_producer(broker), t, [{"value": b"v%d" % i, "partition": 0}
                                        for i in range(7)])
    for v in range(5):
        got = kr.offset_for_leader_epoch(broker.port, v, [(t, [(0, -1, 0)])])
        # The current epoch (0) ends at the log end; v0 has no LeaderEpoch.
        assert got == {(t, 0): (NONE, 0 if v >= 1 else None, 7)}, (v, got)
        # An epoch newer than any known: -1 / -1, no error (Kafka's UNDEFINED).
        got = kr.offset_for_leader_epoch(broker.port, v, [(t, [(0, -1, 3)])])
        assert got == {(t, 0): (NONE, -1 if v >= 1 else None, -1)}, (v, got)
        # No such partition / topic.
        got = kr.offset_for_leader_epoch(broker.port, v, [(t, [(5, -1, 0)]),
                                                          ("no-such-" + t, [(0, -1, 0)])])
        assert got[(t, 5)][0] == UNKNOWN_TOPIC_OR_PARTITION, (v, got)
        assert got[("no-such-" + t, 0)][0] == UNKNOWN_TOPIC_OR_PARTITION, (v, got)
    for v in (2, 3, 4):
        # CurrentLeaderEpoch newer than the broker's: UNKNOWN_LEADER_EPOCH;
        # equal to it: answered.
        got = kr.offset_for_leader_epoch(broker.port, v, [(t, [(0, 1, 0)])])
        assert got == {(t, 0): (UNKNOWN_LEADER_EPOCH, -1, -1)}, (v, got)
        got = kr.offset_for_leader_epoch(broker.port, v, [(t, [(0, 0, 0)])], replica_id=-1)
        assert got == {(t, 0): (NONE, 0, 7)}, (v, got)


def test_epoch_history_is_kafkas_checkpoint_file_and_survives_a_restart(broker):
    t = topic_name("oe_restart")
    produce_ok(ck_producer(broker), t, [{"value": b"x", "partition": 0}])
    broker.restart()
    got = kr.offset_for_leader_epoch(broker.port, 3, [(t, [(0, 0, 0)])])
    assert got == {(t, 0): (NONE, 0, 1)}, got
    path = os.path.join(broker.partition_dir(t, 0), "leader-epoch-checkpoint")
    with open(path) as f:
        assert f.read() == "0\n1\n0 0\n"      # version, count, "epoch startOffset"
