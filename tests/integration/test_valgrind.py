"""A produce/consume smoke test with sluiced under valgrind (issue 8):
memcheck must report no invalid access and no definite or indirect leak
over a run that creates a topic, produces with two clients, consumes in a
group with commits, fetches raw, and stops with SIGTERM.  Skipped for
sanitizer builds (ASan and valgrind do not mix) or without valgrind."""
import json
import os
import shutil
import signal
import tempfile
import urllib.request

import pytest

import kafka_raw as kr
from conftest import Broker, free_port, sluiced_path
from support import ck_consumer, ck_producer, consume, create_topic, produce_ok, topic_name

# sluiced under valgrind is 20-50x slower: given the machine to itself (conftest.py X2).
pytestmark = pytest.mark.serial

VALGRIND_EXIT = 99


def is_sanitized(path):
    with open(path, "rb") as f:
        return b"__asan_init" in f.read()


class ValgrindBroker(Broker):
    def __init__(self, workdir, overrides=None):
        super().__init__(workdir, overrides)
        self.vg_log = os.path.join(workdir, "valgrind.log")

    def argv(self):
        return ["valgrind", "--tool=memcheck", "--leak-check=full",
                "--errors-for-leak-kinds=definite,indirect", "--show-leak-kinds=definite,indirect",
                "--error-exitcode=%d" % VALGRIND_EXIT, "--log-file=" + self.vg_log] + super().argv()


def test_produce_consume_under_valgrind_has_no_invalid_access_or_leak():
    if not shutil.which("valgrind"):
        pytest.skip("valgrind not installed (make deps)")
    if is_sanitized(sluiced_path()):
        pytest.skip("sanitizer build: valgrind cannot run an ASan binary")
    import conftest
    old = conftest.START_TIMEOUT_S
    conftest.START_TIMEOUT_S = 60.0
    tmp = tempfile.mkdtemp(prefix="sluice-vg-")
    b = ValgrindBroker(tmp, {"group.initial.rebalance.delay.ms": "0",
                             "admin.listeners": "http://127.0.0.1:%d" % free_port()})
    try:
        b.start()
        t = topic_name("vg")
        create_topic(b, t, 2, timeout=60)
        msgs = [{"key": b"k%d" % i, "value": b"value %d" % i * (i % 5 + 1), "partition": i % 2}
                for i in range(200)]
        produce_ok(ck_producer(b, **{"compression.codec": "lz4"}), t, msgs, timeout=60)
        got = consume(b, t, [0, 1], 200, timeout=60)
        assert len(got) == 200
        c = ck_consumer(b, **{"group.id": "vg-group", "session.timeout.ms": 10000})
        try:
            c.subscribe([t])
            n, last = 0, None
            while n < 50:
                m = c.poll(5)
                assert m is not None, "group consumer got nothing"
                if not m.error():
                    n, last = n + 1, m
            c.commit(message=last, asynchronous=False)
        finally:
            c.close()
        with kr.Conn(b.port, timeout=30) as conn:
            (res,) = kr.parse_fetch_v4(conn.request(kr.API_FETCH, 4, kr.fetch_v4_body(t, 0, 0, 100),
                                                    timeout=30))
            assert res[2] == 0
            # The coordinator's deferred writes: DeleteGroups (the group is
            # Empty once its consumer left), then an operator's offset write
            # and group delete through /sql, each answered when durable.
            r = conn.request(42, 1, kr.array([kr.string("vg-group"), kr.string("vg-none")]),
                             timeout=30)
            r.i32()
            assert dict(r.array(lambda x: (x.string(), x.i16()))) == {"vg-group": 0, "vg-none": 69}

        def sql(stmt):
            req = urllib.request.Request("http://%s/sql?format=json" % b.admin, data=stmt.encode(),
                                         method="POST")
            with urllib.request.urlopen(req, timeout=60) as resp:
                return json.loads(resp.read().decode())
        sql("INSERT INTO committed_offsets(group_id, topic, partition, offset) "
            "VALUES('vg-sql', '%s', 1, 42)" % t)
        assert sql("SELECT offset FROM committed_offsets WHERE group_id='vg-sql'") == [{"offset": 42}]
        sql("DELETE FROM consumer_groups WHERE group_id='vg-sql'")
        assert sql("SELECT * FROM committed_offsets WHERE group_id='vg-sql'") == []
        b.__dict__.pop("_ck_admin", None)
        rc = b.stop(signal.SIGTERM, timeout=60)
        with open(b.vg_log) as f:
            report = f.read()
        summary = [l for l in report.splitlines() if "ERROR SUMMARY" in l or "definitely lost" in l
                   or "indirectly lost" in l]
        print("valgrind: exit %s; %s" % (rc, "; ".join(s.split("== ", 1)[-1] for s in summary)))
        assert rc == 0, "sluiced under valgrind exited %s\n%s" % (rc, report[-4000:])
        assert "ERROR SUMMARY: 0 errors" in report, report[-4000:]
    finally:
        conftest.START_TIMEOUT_S = old
        b.kill()
        if os.environ.get("SLUICE_IT_KEEP") != "1":
            shutil.rmtree(tmp, ignore_errors=True)
