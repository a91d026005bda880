"""libsluice's consumer-group duties against a real sluiced, as librdkafka
performs them: max.poll.interval.ms enforced (leave, error on the next
poll, rejoin), heartbeats kept up while the application's revoke callback
runs, auto commit of a manual assignment, and regex subscriptions that
follow topics created later."""
import contextlib
import time

from support import ck_consumer, ck_producer, create_topic, produce_ok, topic_name
import libsluice_ctypes as lsc

# No initial rebalance delay and short sessions, so the tests take seconds.
GROUP_BROKER = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def settings(b, group, **kw):
    s = {"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "heartbeat.interval.ms": 200, "session.timeout.ms": 3000, "log_level": 5}
    s.update(kw)
    return s


def poll_until(cond, consumers, timeout, out=None, ck=None):
    """Polls the libsluice consumers (and a confluent one) until cond()."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(50)
            if m is not None and out is not None:
                out.append(m)
        if ck is not None:
            ck.poll(0.05)
        if cond():
            return True
    return False


@contextlib.contextmanager
def two_members(b, prefix, a_settings, on_rebalance=None):
    """A libsluice member alone with both partitions of a new topic, then a
    confluent one joining; yields (libsluice, confluent, topic) once each
    holds one partition."""
    L = lsc.lib()
    t = topic_name(prefix)
    create_topic(b, t, 2)
    group = "g-" + t
    a = lsc.Consumer(L, settings(b, group, **a_settings), on_rebalance)
    ck = ck_consumer(b, **{"group.id": group, "session.timeout.ms": 3000,
                           "heartbeat.interval.ms": 200})
    try:
        assert a.subscribe([t]) == 0
        assert poll_until(lambda: len(a.assignment()) == 2, [a], 15), a.events
        ck.subscribe([t])
        assert poll_until(lambda: len(a.assignment()) == 1 and len(ck.assignment()) == 1,
                          [a], 30, ck=ck), (a.events, ck.assignment())
        yield a, ck, t
    finally:
        ck.close()
        a.close()


def test_max_poll_interval_exceeded_leaves_group_errors_then_rejoins(start_broker):
    b = start_broker(GROUP_BROKER)
    with two_members(b, "lsmp", {"max.poll.interval.ms": 1500}) as (a, ck, t):
        # The application stops polling: after max.poll.interval.ms the
        # member leaves and the other one takes over both partitions.
        left = poll_until(lambda: len(ck.assignment()) == 2, [], 8, ck=ck)
        assert left, "libsluice consumer stayed in the group without polling"
        got = []
        assert poll_until(lambda: any(m[0] == lsc.SL_E_MAX_POLL_EXCEEDED for m in got), [a], 5,
                          out=got), got
        assert a.assignment() == set(), a.events          # partitions revoked
        # Polling again rejoins the group.
        assert poll_until(lambda: len(a.assignment()) == 1 and len(ck.assignment()) == 1,
                          [a], 20, ck=ck), (a.events, ck.assignment())


def test_heartbeats_continue_while_revoke_callback_runs(start_broker):
    b = start_broker(GROUP_BROKER)
    slow = {"done": False}

    def on_rebalance(event, tps):
        # The first revoke (when the confluent member joins) takes more
        # than twice the session timeout.
        if event == lsc.SL_REBALANCE_REVOKE and not slow["done"]:
            slow["done"] = True
            time.sleep(4.5)

    a_settings = {"session.timeout.ms": 2000, "max.poll.interval.ms": 30000}
    with two_members(b, "lshb", a_settings, on_rebalance) as (a, ck, t):
        assert slow["done"]
        log = b.log_text()
        assert "has failed" not in log, "member evicted while its revoke callback ran:\n" + \
            "\n".join(l for l in log.splitlines() if "has failed" in l)
        # One revoke and one assignment: the member kept its place.
        assert [e for e, _ in a.events] == [lsc.SL_REBALANCE_ASSIGN, lsc.SL_REBALANCE_REVOKE,
                                            lsc.SL_REBALANCE_ASSIGN], a.events


def test_auto_commit_with_manual_assign_commits_positions(start_broker):
    b = start_broker(GROUP_BROKER)
    L = lsc.lib()
    t = topic_name("lsac")
    create_topic(b, t, 1)
    p = ck_producer(b)
    produce_ok(p, t, [{"value": b"v%d" % i, "partition": 0} for i in range(20)])
    a = lsc.Consumer(L, settings(b, "g-" + t, **{"enable.auto.commit": "true",
                                                 "auto.commit.interval.ms": 200}))
    try:
        assert a.assign([(t, 0, lsc.SL_OFFSET_BEGINNING)]) == 0
        got = []
        assert poll_until(lambda: len(got) == 20, [a], 15, out=got), got
        assert [m[3] for m in got] == list(range(20))
        # Still open, still assigned: the periodic commit alone must do it.
        assert poll_until(lambda: a.committed([(t, 0)])[0] == 20, [a], 5), \
            a.committed([(t, 0)])
    finally:
        a.close()


def test_regex_subscription_follows_matching_topics_including_new_ones(start_broker):
    b = start_broker(GROUP_BROKER)
    L = lsc.lib()
    prefix = topic_name("lsrx").replace("-", "_")
    ta, tb, tc, other = prefix + "_a", prefix + "_b", prefix + "_c", "x" + prefix
    for t in (ta, tb, other):
        create_topic(b, t, 1)
    p = ck_producer(b)
    for t in (ta, tb, other):
        produce_ok(p, t, [{"value": b"%s-%d" % (t.encode(), i)} for i in range(5)])
    a = lsc.Consumer(L, settings(b, "g-" + prefix, **{"metadata.max.age.ms": 500}))
    try:
        assert a.subscribe(["^" + prefix + "_.*"]) == 0
        got = []

        def topics():
            return sorted({m[1] for m in got if m[0] == 0})
        assert poll_until(lambda: topics() == [ta, tb] and len(got) >= 10, [a], 20, out=got), got
        create_topic(b, tc, 1)
        produce_ok(p, tc, [{"value": b"c-%d" % i} for i in range(5)])
        assert poll_until(lambda: tc in topics() and len(got) >= 15, [a], 20, out=got), got
        assert other not in topics()
        assert len([m for m in got if m[0] == 0]) == 15, got
        assert a.subscribe(["^(bad"]) != 0                 # not a regex
    finally:
        a.close()
