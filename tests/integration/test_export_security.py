"""libsluice speaks TLS and SASL (issue 32, "security included"): sluice-export,
sluice-produce and sluice-consume reach a secured sluiced with librdkafka's
-X security.protocol / sasl.* / ssl.* settings.  One broker listens on
PLAINTEXT (the harness), SASL_SSL, SASL_PLAINTEXT and SSL, with the ACL
authorizer on: the exporter's user may READ and DESCRIBE its topics and READ
its group, nothing more, so a login that did not happen (or happened as
someone else) cannot read.  What a user checks: every record back byte for
byte through each listener; a refused login or an untrusted broker stops the
tool at once with a nonzero exit and the cause, after one attempt."""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import Broker, finish_broker, free_port
from sasl_support import add_user, sql
from support import ck_producer, topic_name
from test_export import (TOOLS, assert_exact, exporter, expected_of, mixed_records, read_tree,
                         send, wait_exported)
from test_sasl_acls import AUTHZ, grant
from tls_support import certs, serve, ssl_overrides  # noqa: F401

CLIENT_PRINCIPAL = "User:CN=alice,O=Acme"        # tls_support's client certificate


@pytest.fixture(scope="module")
def sec_broker(certs):  # noqa: F811
    d = tempfile.mkdtemp(prefix="sluice-it-export-sec-")
    o = dict(ssl_overrides(certs, client_auth="requested"), **AUTHZ)
    o["admin.listeners"] = "http://127.0.0.1:%d" % free_port()
    b = Broker(d, o)
    b.ports = {name: free_port() for name in ("SASL_SSL", "SASL_PLAINTEXT", "SSL")}
    lst = ",".join(["PLAINTEXT://127.0.0.1:%d" % b.port] +
                   ["%s://127.0.0.1:%d" % (n, p) for n, p in b.ports.items()])
    b.overrides["listeners"] = lst
    b.overrides["advertised.listeners"] = lst
    b.start()
    add_user(b, "exporter", "exporter-pw")
    add_user(b, "admin", "admin-pw")
    grant(b, "GROUP", "*", "READ", "User:exporter")
    grant(b, "GROUP", "*", "READ", CLIENT_PRINCIPAL)
    yield b
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


def boot(b, listener):
    return "127.0.0.1:%d" % b.ports[listener]


def sasl_ssl(certs, user="exporter", pw="exporter-pw", mech="SCRAM-SHA-512"):  # noqa: F811
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": mech, "sasl.username": user,
            "sasl.password": pw, "ssl.ca.location": certs.ca.crt}


def xargs(conf):
    out = []
    for k, v in conf.items():
        out += ["-X", "%s=%s" % (k, v)]
    return out


def topic_for(b, certs, prefix, partitions=3, n=300, principal="User:exporter"):  # noqa: F811
    """A topic the principal may READ and DESCRIBE (nothing else), filled
    by the super-user over SASL_SSL; (topic, expected)."""
    t = topic_name(prefix)
    st, body = sql(b, "INSERT INTO topics (name, partitions) VALUES ('%s', %d)" % (t, partitions))
    assert st == 200, body
    for op in ("READ", "DESCRIBE"):
        grant(b, "TOPIC", t, op, principal)
    admin = dict(sasl_ssl(certs, "admin", "admin-pw"), **{"bootstrap.servers": boot(b, "SASL_SSL")})
    admin_b = type("B", (), {"bootstrap": boot(b, "SASL_SSL")})
    sent = send(ck_producer(admin_b, **{k: v for k, v in admin.items()
                                        if k != "bootstrap.servers"}),
                t, mixed_records(n, partitions=partitions, seed=len(t)))
    return t, expected_of(sent)


def export(bootstrap, topic, root, conf, *args, timeout=60):
    argv = ([exporter(), "--bootstrap", bootstrap, "--topic", topic, "--to", str(root)] +
            xargs(conf) + list(args))
    t0 = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"), \
        time.monotonic() - t0


def test_until_end_over_sasl_ssl_scram_sha_512_under_acls(sec_broker, certs, tmp_path):  # noqa: F811
    b = sec_broker
    t, exp = topic_for(b, certs, "xsec")
    rc, out, err, _ = export(boot(b, "SASL_SSL"), t, tmp_path, sasl_ssl(certs), "--until-end",
                             "--max-records", "40")
    assert rc == 0, out + err
    assert_exact(exp, read_tree(tmp_path, t))
    assert " 300 record(s)" in out, out


def test_group_mode_over_sasl_ssl(sec_broker, certs, tmp_path):  # noqa: F811
    b = sec_broker
    t, exp = topic_for(b, certs, "xsecgrp", n=240)
    argv = ([exporter(), "--bootstrap", boot(b, "SASL_SSL"), "--topic", t, "--to",
             str(tmp_path), "--group", "grp-" + t, "--max-records", "30", "--max-interval",
             "300"] + xargs(sasl_ssl(certs, mech="SCRAM-SHA-256")))
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_exported(tmp_path, t, 240, timeout=60) == 240
    finally:
        p.terminate()
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out + err).decode(errors="replace")
    assert_exact(exp, read_tree(tmp_path, t))


def test_until_end_over_sasl_plaintext_plain(sec_broker, certs, tmp_path):  # noqa: F811
    b = sec_broker
    t, exp = topic_for(b, certs, "xplain", n=150)
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": "exporter", "sasl.password": "exporter-pw"}
    rc, out, err, _ = export(boot(b, "SASL_PLAINTEXT"), t, tmp_path, conf, "--until-end")
    assert rc == 0, out + err
    assert_exact(exp, read_tree(tmp_path, t))


def test_until_end_over_ssl_with_a_client_certificate(sec_broker, certs, tmp_path):  # noqa: F811
    """The ACLs name the certificate's subject: without the certificate the
    same export is ANONYMOUS and reads nothing."""
    b = sec_broker
    t, exp = topic_for(b, certs, "xcert", n=120, principal=CLIENT_PRINCIPAL)
    conf = {"security.protocol": "SSL", "ssl.ca.location": certs.ca.crt,
            "ssl.certificate.location": certs.client.crt, "ssl.key.location": certs.client.key}
    rc, out, err, _ = export(boot(b, "SSL"), t, tmp_path, conf, "--until-end")
    assert rc == 0, out + err
    assert_exact(exp, read_tree(tmp_path, t))
    anon = {"security.protocol": "SSL", "ssl.ca.location": certs.ca.crt}
    rc, out, err, _ = export(boot(b, "SSL"), t, tmp_path / "anon", anon, "--until-end",
                             timeout=90)
    assert rc != 0, out + err
    assert not os.path.exists(tmp_path / "anon" / t) or not os.listdir(tmp_path / "anon" / t)


def test_wrong_password_stops_at_once_naming_the_cause(sec_broker, certs, tmp_path):  # noqa: F811
    b = sec_broker
    t, _ = topic_for(b, certs, "xbadpw", n=10)
    before = b.log_text().count("failed")
    rc, out, err, took = export(boot(b, "SASL_SSL"), t, tmp_path,
                                sasl_ssl(certs, pw="not-the-password"), "--until-end")
    print("----\n" + err)
    assert rc == 2, (rc, out + err)                        # a runtime error
    assert took < 15, "took %.1f s" % took
    assert "SASL SCRAM-SHA-512 authentication as exporter failed" in err, err
    assert "invalid credentials" in err, err            # the broker's own message
    # One attempt, not a retry storm: the broker logged one failed login.
    time.sleep(1)
    logged = b.log_text().count("failed") - before
    print("----\n%d\n%s" % (logged, b.log_tail()))
    assert 1 <= logged <= 2, b.log_tail()
    assert not os.path.exists(tmp_path / t)
    # The same in --group mode, and for sluice-consume.
    rc, out, err, took = export(boot(b, "SASL_SSL"), t, tmp_path,
                                sasl_ssl(certs, pw="not-the-password"), "--group", "g-" + t)
    print("----\n" + err)
    assert rc == 2 and took < 15 and "invalid credentials" in err, (rc, out + err)
    p = subprocess.run([os.path.join(TOOLS, "sluice-consume"), "-b", boot(b, "SASL_SSL"),
                        "-t", t, "-e"] + xargs(sasl_ssl(certs, pw="not-the-password")),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    print("----\n" + p.stderr.decode())
    assert p.returncode != 0 and b"invalid credentials" in p.stderr, p.stderr
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(TOOLS, "sluice-produce"), "-b", boot(b, "SASL_SSL"),
                        "-t", t] + xargs(sasl_ssl(certs, pw="not-the-password")),
                       input=b"a\nb\n", stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    print(p.stderr.decode())
    assert p.returncode != 0 and b"invalid credentials" in p.stderr, p.stderr
    assert time.monotonic() - t0 < 15


def test_unknown_user_and_untrusted_ca_stop_with_their_cause(sec_broker, certs, tmp_path):  # noqa: F811
    b = sec_broker
    t, _ = topic_for(b, certs, "xbadca", n=10)
    rc, out, err, took = export(boot(b, "SASL_SSL"), t, tmp_path,
                                sasl_ssl(certs, user="nobody", pw="x"), "--until-end")
    assert rc == 2 and took < 15, (rc, out + err)
    assert "authentication as nobody failed" in err, err
    rc, out, err, took = export(boot(b, "SASL_SSL"), t, tmp_path,
                                dict(sasl_ssl(certs), **{"ssl.ca.location": certs.untrusted.crt}),
                                "--until-end")
    print("----\n" + err)
    assert rc == 2 and took < 15, (rc, out + err)
    assert "certificate verify failed" in err, err


def test_bad_security_settings_are_refused_at_creation(sec_broker, certs, tmp_path):  # noqa: F811
    b = sec_broker
    cases = [({"security.protocol": "SASL_TLS"}, "security.protocol"),
             ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
             ({"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "missing.pem")},
              "ssl.ca.location"),
             ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.username"),
             ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"},
              "ssl.endpoint.identification.algorithm")]
    for conf, name in cases:
        rc, out, err, took = export(boot(b, "SSL"), "t", tmp_path, conf, "--until-end")
        print("----\n" + err)
        assert rc == 1 and name in err and took < 10, (conf, rc, err)   # configuration


def exporter_topic(b, prefix):
    """A new one-partition topic that User:exporter may read, describe and write."""
    t = topic_name(prefix)
    st, body = sql(b, "INSERT INTO topics (name, partitions) VALUES ('%s', 1)" % t)
    assert st == 200, body
    for op in ("READ", "DESCRIBE", "WRITE"):
        grant(b, "TOPIC", t, op, "User:exporter")
    return t


def produce_tool(b, t, certs, lines, timeout):
    """sluice-produce writes lines (one message each) to t over SASL_SSL."""
    p = subprocess.run([os.path.join(TOOLS, "sluice-produce"), "-b", boot(b, "SASL_SSL"),
                        "-t", t] + xargs(sasl_ssl(certs)), input=lines,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    assert p.returncode == 0, p.stderr.decode(errors="replace")


def test_produce_and_consume_tools_over_sasl_ssl(sec_broker, certs, tmp_path):  # noqa: F811
    b = sec_broker
    t = exporter_topic(b, "xtools")
    conf = xargs(sasl_ssl(certs))
    lines = b"".join(b"line-%d-\xff\x00x\n" % i for i in range(200))
    produce_tool(b, t, certs, lines, timeout=60)
    p = subprocess.run([os.path.join(TOOLS, "sluice-consume"), "-b", boot(b, "SASL_SSL"),
                        "-t", t, "-o", "beginning", "-c", "200"] + conf,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    assert p.stdout == lines


def test_megabytes_both_ways_through_tls(sec_broker, certs, tmp_path):  # noqa: F811
    """24 MB produced by sluice-produce and exported back over SASL_SSL: TLS
    writes that stop part way (WANT_WRITE) and fetches larger than a TLS
    record or the read buffer, every byte checked."""
    import random
    b = sec_broker
    t = exporter_topic(b, "xbig")
    rnd = random.Random(7)
    values = [rnd.randbytes(rnd.randrange(1, 12000)).replace(b"\n", b"x")
              for _ in range(4000)]
    produce_tool(b, t, certs, b"\n".join(values) + b"\n", timeout=120)
    rc, out, err, took = export(boot(b, "SASL_SSL"), t, tmp_path, sasl_ssl(certs),
                                "--until-end", "-X", "fetch.max.bytes=8388608",
                                "-X", "max.partition.fetch.bytes=4194304", timeout=120)
    assert rc == 0, out + err
    print("exported %d MB through TLS in %.1f s" % (sum(map(len, values)) >> 20, took))
    assert_exact({0: {i: (None, v, []) for i, v in enumerate(values)}}, read_tree(tmp_path, t))


def test_a_silent_tls_port_times_the_handshake_out_and_reconnects(certs, tmp_path):  # noqa: F811
    """A port that accepts and never answers: each TLS handshake gives up
    after request.timeout.ms and the client connects again (with backoff),
    and the export fails with exit 2 instead of hanging."""
    port, accepted, close = serve(lambda c: None)     # accepted keeps c open
    try:
        conf = {"security.protocol": "SSL", "ssl.ca.location": certs.ca.crt,
                "request.timeout.ms": "500", "reconnect.backoff.max.ms": "200"}
        rc, out, err, took = export("127.0.0.1:%d" % port, "t", tmp_path, conf,
                                    "--until-end", "-S", "4000", timeout=60)
    finally:
        close()
    assert rc == 2 and took < 30, (rc, took, err)
    assert len(accepted) >= 3, "%d connections in %.1f s: %s" % (len(accepted), took, err)
