"""Cluster links to a secured source (issue 33, Deliver 1: "Kafka's client
property names, security included"; daemon/link/link_conn.c C7): the link
speaks TLS (security.protocol SSL / SASL_SSL, ssl.ca.location, the host
name checked) and logs in with SCRAM (sasl.mechanism SCRAM-SHA-512).

One source broker listens on PLAINTEXT (the harness's, used here only to
fill and read topics), SASL_SSL and SSL; each test's destination is a
standalone broker whose link goes to one of the secured listeners.  What a
user checks: over SASL_SSL with SCRAM-SHA-512, and over SSL with a client
certificate, every mirror partition holds exactly the source's batches at
the same offsets (offsets, CRCs and bytes equal); a wrong SCRAM password
is in cluster_links.last_error and the log once, with few attempts at the
source (backoff, no retry storm), and the right one then mirrors; a source
whose certificate the link's CA does not sign is refused with the
certificate's problem named in last_error, and a plaintext listener as
"TLS handshake: connection closed by the source before it finished", never
as "error:00000005:lib(0)";
an unreadable file or an unknown mechanism or a JKS store is refused at
the INSERT, a FIFO or a device as a certificate file at once (never read:
it held the thread reading it); such a file after a restart stalls no
thread and the link recovers once it is a certificate again; with the
source's connections.max.reauth.ms the link logs in again on the same
connections (KIP-368) and no session expires.
"""
import base64
import errno
import os
import re
import shutil
import socket
import ssl
import struct
import tempfile
import threading
import time
from types import SimpleNamespace

import pytest

import kafka_raw as kr
from conftest import Broker, finish_broker, free_port
from sasl_support import add_user
from support import ck_producer, create_topic, produce, topic_name
from test_link import (assert_same, batches, fill, link_source, mirror, rows, sql, sql_ok,
                       until)
from tls_support import _issue, certs, read_frame, rss_mib, ssl_overrides  # noqa: F401

USER, PASSWORD = "linker", "link-pw"


def secure_source(certs, d, **extra):  # noqa: F811
    """A broker listening on PLAINTEXT, SASL_SSL and SSL (client
    certificates requested), with the SCRAM user the links log in as."""
    o = ssl_overrides(certs, client_auth="requested")
    o["admin.listeners"] = "http://127.0.0.1:%d" % free_port()
    o.update(extra)
    b = Broker(d, o)
    b.ports = {name: free_port() for name in ("SASL_SSL", "SSL")}
    lst = ",".join(["PLAINTEXT://127.0.0.1:%d" % b.port] +
                   ["%s://127.0.0.1:%d" % (n, p) for n, p in b.ports.items()])
    b.overrides["listeners"] = lst
    b.overrides["advertised.listeners"] = lst
    b.start()
    add_user(b, USER, PASSWORD, mechanisms=("SCRAM-SHA-512",))
    return b


def stop_source(b, d):
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


@pytest.fixture(scope="module")
def source(certs):  # noqa: F811
    d = tempfile.mkdtemp(prefix="sluice-it-link-sec-")
    b = secure_source(certs, d)
    yield b
    stop_source(b, d)


def on(b, listener):
    """The source as link_source sees it: bootstrapping from listener."""
    return SimpleNamespace(bootstrap="127.0.0.1:%d" % b.ports[listener])


def conf(**kw):
    return "\n".join("%s=%s" % (k.replace("_", "."), v) for k, v in kw.items())


def sasl_ssl(certs, password=PASSWORD, **extra):  # noqa: F811
    return conf(**{"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                   "sasl_username": USER, "sasl_password": password,
                   "ssl_ca_location": certs.ca.crt}, **extra)


def last_error(dest, name):
    got = rows(sql_ok(dest, "SELECT last_error FROM cluster_links WHERE name = '%s'" % name))
    return got[0][0] if got else None


def mirrored_over(source, dest, listener, config, name, partitions=3, n=300):
    t = topic_name(name)
    create_topic(source, t, partitions=partitions)
    fill(source, t, partitions, n)
    link_source(dest, on(source, listener), name=name, config=config)
    assert mirror(dest, t, link=name)[0] == 200
    assert_same(source, dest, t, partitions)
    assert last_error(dest, name) is None
    return t


def test_sasl_ssl_scram_link_mirrors_byte_for_byte(source, start_broker, certs):  # noqa: F811
    dest = start_broker()
    t = mirrored_over(source, dest, "SASL_SSL", sasl_ssl(certs), "scram")
    # the source's log says who logged in, and how
    assert "SASL SCRAM-SHA-512 authentication as User:%s succeeded" % USER in dest.log_text()
    # more messages follow, and the password never shows
    fill(source, t, 3, 120, start=300)
    assert_same(source, dest, t, 3)
    assert PASSWORD not in dest.log_text()
    got = rows(sql_ok(dest, "SELECT config FROM cluster_links WHERE name = 'scram'"))
    assert PASSWORD not in str(got) and "[hidden]" in got[0][0]


def test_ssl_link_with_a_client_certificate_mirrors_byte_for_byte(source, start_broker,
                                                                  certs):  # noqa: F811
    dest = start_broker()
    mirrored_over(source, dest, "SSL", conf(**{
        "security_protocol": "SSL", "ssl_ca_location": certs.ca.crt,
        "ssl_certificate_location": certs.client.crt, "ssl_key_location": certs.client.key,
        "ssl_endpoint_identification_algorithm": "https"}), "tls", partitions=2, n=200)


def test_wrong_scram_password_is_reported_once_with_backoff(source, start_broker,
                                                            certs):  # noqa: F811
    dest = start_broker()
    t = topic_name("wrongpw")
    create_topic(source, t, partitions=1)
    fill(source, t, 1, 20)
    before = source.log_text().count("authentication from")
    link_source(dest, on(source, "SASL_SSL"), name="bad", config=sasl_ssl(
        certs, password="wrong", reconnect_backoff_ms=200, reconnect_backoff_max_ms=2000))
    assert mirror(dest, t, link="bad")[0] == 200
    until(lambda: last_error(dest, "bad"), 15, "last_error")
    err = last_error(dest, "bad")
    assert "SASL SCRAM-SHA-512 authentication as User:%s failed" % USER in err, err
    time.sleep(6)
    log = dest.log_text()
    assert len(re.findall(r"cluster link bad: .*SASL SCRAM-SHA-512 authentication", log)) == 1, \
        log[-3000:]
    # backoff doubling to 2 s: a handful of logins in 6 s, not hundreds
    tries = source.log_text().count("authentication from") - before
    print("logins refused at the source in about 6 s: %d" % tries)
    assert 2 <= tries <= 12, tries
    assert batches(dest, t, 0)[1] <= 0                 # nothing mirrored
    # the right password (Kafka's sasl.jaas.config form) mirrors
    link_source(dest, on(source, "SASL_SSL"), name="good", config=conf(**{
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "ssl_ca_location": certs.ca.crt}) + "\nsasl.jaas.config=org.apache.kafka.common."
        "security.scram.ScramLoginModule required username=\"%s\" password=\"%s\";"
        % (USER, PASSWORD))
    t2 = topic_name("rightpw")
    create_topic(source, t2, partitions=1)
    fill(source, t2, 1, 20)
    assert mirror(dest, t2, link="good")[0] == 200
    assert_same(source, dest, t2, 1)


def test_untrusted_source_certificate_is_reported_with_its_problem(source, start_broker,
                                                                   certs):  # noqa: F811
    dest = start_broker()
    other_ca = os.path.join(certs.dir, "otherca.crt")     # tls_support: another CA
    t = topic_name("untrusted")
    create_topic(source, t, partitions=1)
    link_source(dest, on(source, "SSL"), name="untrusted", config=conf(**{
        "security_protocol": "SSL", "ssl_ca_location": other_ca,
        "reconnect_backoff_ms": 200, "reconnect_backoff_max_ms": 2000}))
    assert mirror(dest, t, link="untrusted")[0] == 200
    until(lambda: last_error(dest, "untrusted"), 15, "last_error")
    err = last_error(dest, "untrusted")
    print("last_error: %s" % err)
    assert "certificate verify failed" in err, err
    assert "the server's certificate: " in err and \
        re.search(r"issuer|self.signed", err), err            # which problem
    time.sleep(4)
    assert len(re.findall(r"cluster link untrusted: .*certificate verify failed",
                          dest.log_text())) == 1


def test_bad_security_settings_are_refused_at_insert(source, start_broker, certs):  # noqa: F811
    dest = start_broker()
    boot = on(source, "SSL").bootstrap

    def insert(config):
        return sql(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES "
                         "('x', '%s', '%s')" % (boot, config.replace("'", "''")))
    st, text = insert(conf(security_protocol="SSL", ssl_ca_location="/no/such/ca.pem"))
    assert st != 200 and "ssl.ca.location /no/such/ca.pem" in str(text), text
    st, text = insert(conf(security_protocol="SSL", ssl_ca_location=certs.ca.crt,
                           ssl_certificate_location=certs.client.crt,
                           ssl_key_location=certs.untrusted.key))
    assert st != 200 and "ssl.key.location" in str(text), text
    st, text = insert(conf(security_protocol="SASL_SSL", sasl_mechanism="GSSAPI",
                           sasl_username="u", sasl_password="p"))
    assert st != 200 and "sasl.mechanism=GSSAPI is not supported" in str(text), text
    st, text = insert(conf(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256"))
    assert st != 200 and "sasl.username and sasl.password" in str(text), text
    st, text = insert(conf(security_protocol="SSL", ssl_truststore_location="/no/such.pem"))
    assert st != 200 and "ssl.truststore.location /no/such.pem" in str(text), text
    st, text = insert(conf(security_protocol="SSL", ssl_ca_location=certs.ca.crt,
                           ssl_keystore_location="/no/such/ks.pem"))
    assert st != 200 and "ssl.keystore.location /no/such/ks.pem" in str(text), text
    st, text = insert(conf(security_protocol="SSL", ssl_truststore_type="JKS"))
    assert st != 200 and "PEM files only" in str(text), text
    st, text = insert(conf(security_protocol="SSL", ssl_endpoint_identification_algorithm="x"))
    assert st != 200 and "ssl.endpoint.identification.algorithm" in str(text), text
    assert rows(sql_ok(dest, "SELECT name FROM cluster_links")) == []


BAD_BLOCK = "-----BEGIN CERTIFICATE-----\nMIIB!!not*base64!!\n-----END CERTIFICATE-----\n"
ENCRYPTED_BLOCK = ("-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n"
                   "DEK-Info: AES-128-CBC,00112233445566778899AABBCCDDEEFF\n\n"
                   + base64.b64encode(bytes(range(48))).decode() + "\n-----END CERTIFICATE-----\n")


def test_damaged_certificate_files_are_refused_with_their_cause(source, start_broker,
                                                                certs):  # noqa: F811
    """sec_tls.c T6: a chain whose intermediate does not read, a CA bundle
    with one damaged block, an encrypted certificate block: each INSERT
    refused naming the file and the cause (a damaged intermediate was once
    dropped silently: the source saw the leaf alone), never a password
    prompt (sec_tls.c T3: every read names the callback)."""
    dest = start_broker()
    boot = on(source, "SSL").bootstrap
    d = tempfile.mkdtemp(prefix="sluice-it-badpem-")
    try:
        def pem(name, *parts):
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write("".join(parts))
            return path
        crt, ca = open(certs.client.crt).read(), open(certs.ca.crt).read()
        cases = {
            "chain": (dict(ssl_ca_location=certs.ca.crt, ssl_key_location=certs.client.key,
                           ssl_certificate_location=pem("chain.pem", crt, BAD_BLOCK)),
                      "a certificate of its chain: bad base64 decode"),
            "bundle": (dict(ssl_ca_location=pem("bundle.pem", ca, BAD_BLOCK)),
                       "bundle.pem: bad base64 decode"),
            "enc": (dict(ssl_ca_location=pem("enc.pem", ENCRYPTED_BLOCK)), "enc.pem: "),
        }
        for name, (settings, want) in cases.items():
            st, text = sql(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) "
                                 "VALUES ('%s', '%s', '%s')"
                           % (name, boot, conf(security_protocol="SSL", **settings)))
            print(name, st, text)
            assert st != 200 and want in str(text), text
            assert "no PEM certificate in it" not in str(text), text
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert rows(sql_ok(dest, "SELECT name FROM cluster_links")) == []


def test_sasl_sessions_are_renewed_on_the_same_connections(start_broker, certs):  # noqa: F811
    """connections.max.reauth.ms=2000 at the source (KIP-368): the link logs
    in again before each session ends, so mirroring goes on for 8 s with no
    connection closed and no error."""
    d = tempfile.mkdtemp(prefix="sluice-it-link-reauth-")
    src = secure_source(certs, os.path.join(d, "src"),
                        **{"connections.max.reauth.ms": "2000"})
    try:
        dest = start_broker()
        t = topic_name("reauth")
        create_topic(src, t, partitions=2)
        link_source(dest, on(src, "SASL_SSL"), name="renew", config=sasl_ssl(certs))
        assert mirror(dest, t, link="renew")[0] == 200
        for i in range(8):
            fill(src, t, 2, 20, start=20 * i)
            time.sleep(1)
        assert_same(src, dest, t, 2)
        log = src.log_text()
        renewed = len(re.findall(r"SASL SCRAM-SHA-512 re-authentication of User:%s" % USER, log))
        expired = log.count("without re-authentication; closing")
        print("re-authentications: %d, sessions expired: %d" % (renewed, expired))
        assert renewed >= 3 and expired == 0, (renewed, expired)
        assert last_error(dest, "renew") is None
    finally:
        stop_source(src, d)


def test_an_update_of_a_tls_link_checks_its_files_and_keeps_a_hidden_key(
        source, start_broker, certs):  # noqa: F811
    """UPDATE cluster_links (link.c K16) of a link with a client certificate:
    the config written back as SELECT shows it (ssl.key.location=[hidden])
    with another CA file is refused (the key must be given again); given,
    a CA file that cannot be read is refused with INSERT's text (the files
    read off the loop) and the link runs on; with a
    setting added instead, the key is kept and mirroring goes on byte for
    byte at the same offsets."""
    dest = start_broker()
    cfg = conf(**{"security_protocol": "SSL", "ssl_ca_location": certs.ca.crt,
                  "ssl_certificate_location": certs.client.crt,
                  "ssl_key_location": certs.client.key})
    t = mirrored_over(source, dest, "SSL", cfg, "tlsupd", partitions=1, n=50)
    shown = rows(sql_ok(dest, "SELECT config FROM cluster_links WHERE name = 'tlsupd'"))[0][0]
    assert "ssl.key.location=[hidden]" in shown, shown
    no_ca = os.path.join(certs.dir, "no-such-ca.pem")

    def refused(stmt):
        st, text = sql(dest, stmt)
        assert st != 200, text
        return re.search(r"cluster_links\.config: [^\"]*", str(text)).group(0)
    # the key kept, the CA changed: refused (a kept secret only while the
    # settings that say where it goes stay, link.c K16)
    st, text = sql(dest, "UPDATE cluster_links SET config = '%s' WHERE name = 'tlsupd'"
                   % shown.replace(certs.ca.crt, no_ca))
    assert st != 200 and "ssl.key.location must be given again" in str(text) and \
        "(ssl.ca.location changes here)" in str(text), text
    upd = refused("UPDATE cluster_links SET config = '%s' WHERE name = 'tlsupd'"
                  % shown.replace(certs.ca.crt, no_ca).replace(
                      "ssl.key.location=[hidden]", "ssl.key.location=" + certs.client.key))
    ins = refused("INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES "
                  "('other', '%s', '%s')" % (on(source, "SSL").bootstrap,
                                             cfg.replace(certs.ca.crt, no_ca)))
    assert upd == ins and "no-such-ca.pem" in upd, (upd, ins)
    sql_ok(dest, "UPDATE cluster_links SET config = '%s' WHERE name = 'tlsupd'"
           % (shown + "\nfetch.max.wait.ms=100"))
    fill(source, t, 1, 30, start=50)
    assert_same(source, dest, t, 1)
    assert last_error(dest, "tlsupd") is None


def test_ssl_link_with_keystore_and_truststore_locations_mirrors(source, start_broker,
                                                                 certs):  # noqa: F811
    """Kafka's ssl.keystore.location (one PEM: certificate and key) and
    ssl.truststore.location, the source asking for a client certificate."""
    dest = start_broker()
    ks = os.path.join(certs.dir, "client.pem")
    with open(ks, "w") as out:
        for p in (certs.client.crt, certs.client.key):
            with open(p) as f:
                out.write(f.read())
    mirrored_over(source, dest, "SSL", conf(**{
        "security_protocol": "SSL", "ssl_truststore_location": certs.ca.crt,
        "ssl_keystore_location": ks, "ssl_keystore_type": "PEM",
        "ssl_truststore_type": "PEM"}), "keystore", partitions=2, n=100)


def ssl_linked_topic(src, dest, certs, name, n, **settings):  # noqa: F811
    """A one-partition topic of n messages at src, mirrored by link name
    over SSL (the test CA trusted, settings added)."""
    t = topic_name(name)
    create_topic(src, t, partitions=1)
    fill(src, t, 1, n)
    link_source(dest, on(src, "SSL"), name=name, config=conf(
        security_protocol="SSL", ssl_ca_location=certs.ca.crt, **settings))
    assert mirror(dest, t, link=name)[0] == 200
    return t


def test_source_certificate_for_another_host_is_refused_by_default(start_broker,
                                                                   certs):  # noqa: F811
    """Host name checked by default (https): a certificate of the right CA
    for other.example is refused with its problem named; with
    ssl.endpoint.identification.algorithm= (off) the same source mirrors."""
    d = tempfile.mkdtemp(prefix="sluice-it-link-host-")
    other = _issue(certs.dir, "othername", "/O=Sluice/CN=other.example", certs.ca,
                   ext="subjectAltName=DNS:other.example")
    pem = os.path.join(certs.dir, "othername.pem")
    with open(pem, "w") as out:
        for p in (other.crt, other.key):
            with open(p) as f:
                out.write(f.read())
    src = secure_source(certs, d, **{"ssl.keystore.location": pem})
    try:
        dest = start_broker()
        t = ssl_linked_topic(src, dest, certs, "hc", 30, reconnect_backoff_ms=200,
                             reconnect_backoff_max_ms=1000)
        until(lambda: last_error(dest, "hc"), 15, "last_error")
        err = last_error(dest, "hc")
        print("host name checked: %s" % err)
        assert "certificate verify failed" in err and "address mismatch" in err, err
        assert batches(dest, t, 0)[1] <= 0                 # nothing mirrored
        sql_ok(dest, "DELETE FROM mirror_topics WHERE topic = '%s'" % t)
        sql_ok(dest, "DELETE FROM cluster_links WHERE name = 'hc'")
        link_source(dest, on(src, "SSL"), name="hc2", config=conf(**{
            "security_protocol": "SSL", "ssl_ca_location": certs.ca.crt}) +
            "\nssl.endpoint.identification.algorithm=")
        assert mirror(dest, t, link="hc2")[0] == 200
        assert_same(src, dest, t, 1)
        assert last_error(dest, "hc2") is None
    finally:
        stop_source(src, d)


def _fake_tls_source(certs, then):  # noqa: F811
    """A TLS listener that answers the link's requests (Metadata v8: the
    first at connect, link_conn.c C8; another when the mirror is added)
    with an empty Metadata v8 answer until the link is idle (1.5 s without
    one), then calls then(tls_socket, state).  Returns (port, state,
    thread, close)."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.server.crt, certs.server.key)
    state = {"apis": []}

    def serve():
        lsock.settimeout(20)
        raw, _ = lsock.accept()
        raw.settimeout(20)
        s = ctx.wrap_socket(raw, server_side=True)
        try:
            while len(state["apis"]) < 8:
                s.settimeout(1.5 if state["apis"] else 20)
                try:
                    body = read_frame(s)
                except TimeoutError:
                    break                                 # the link idle
                api, ver, corr = struct.unpack(">hhi", body[:8])
                state["apis"].append((api, ver))
                # throttle, no brokers, null cluster id, controller, no topics, ops
                resp = struct.pack(">iiihiii", corr, 0, 0, -1, -1, 0, 0)
                s.sendall(struct.pack(">i", len(resp)) + resp)
            s.settimeout(20)
            then(s, state)
        except Exception as e:  # noqa: BLE001 -- reported by the test
            state["err"] = repr(e)
        finally:
            raw.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    return lsock.getsockname()[1], state, th, lsock.close


def test_tls_source_sending_unasked_bytes_is_cut_off(start_broker, certs):  # noqa: F811
    """repl_frame.h RF5: a TLS source that sends 300 MiB while no request is out (the
    link idle after its Metadata) has its connection failed at the first
    bytes, as on plaintext; the destination does not store them."""
    dest = start_broker()

    def flood(s, state):
        time.sleep(1.0)                                   # the link idle
        state["flooded"] = 0
        chunk = b"\x7f" * (1 << 20)
        for _ in range(300):
            s.sendall(chunk)
            state["flooded"] += 1

    port, state, th, close = _fake_tls_source(certs, flood)
    try:
        r0 = rss_mib(dest.proc.pid)
        link_source(dest, SimpleNamespace(bootstrap="127.0.0.1:%d" % port), name="fl",
                    config=conf(**{"security_protocol": "SSL", "ssl_ca_location": certs.ca.crt,
                                   "metadata_max_age_ms": "60000"}))
        mirror(dest, topic_name("fake"), link="fl")
        th.join(60)
        r1 = rss_mib(dest.proc.pid)
        log = [x for x in dest.log_text().splitlines() if "cluster link fl" in x]
        print("first request %r; flooded %s MiB (%s); destination RSS %d -> %d MiB; %s" % (
            state["apis"], state.get("flooded"), state.get("err"), r0, r1, log[-2:]))
        assert not th.is_alive()
        assert state.get("flooded", 0) < 300, "the destination read 300 MiB nobody asked for"
        assert r1 - r0 < 64, (r0, r1)
        assert any("bytes with no request out" in x for x in log), log
    finally:
        close()


def test_tls_source_closing_without_close_notify_is_not_an_error(start_broker,
                                                                 certs):  # noqa: F811
    """sec_tls.c T5: a source closing an idle TLS connection without close_notify (a
    bare TCP close) is an idle close, not "unexpected eof while reading":
    no last_error, nothing logged as an error."""
    dest = start_broker()

    def bare_close(s, state):
        time.sleep(1.0)
        state["closed"] = True                            # raw.close(): no close_notify

    port, state, th, close = _fake_tls_source(certs, bare_close)
    try:
        link_source(dest, SimpleNamespace(bootstrap="127.0.0.1:%d" % port), name="bare",
                    config=conf(**{"security_protocol": "SSL", "ssl_ca_location": certs.ca.crt,
                                   "metadata_max_age_ms": "60000"}))
        mirror(dest, topic_name("fake"), link="bare")
        th.join(30)
        assert state.get("closed"), state
        time.sleep(2)
        log = [x for x in dest.log_text().splitlines() if "cluster link bare" in x]
        print(state, log[-3:])
        assert last_error(dest, "bare") is None, last_error(dest, "bare")
        assert not any("eof" in x for x in log), log
    finally:
        close()


def test_idle_close_by_a_sluice_source_is_not_an_error(start_broker, certs):  # noqa: F811
    """sec_tls.c T5: the source's connections.max.idle.ms closes the link's idle TLS
    connections (with close_notify now); the link connects again when it
    has something to ask, with no error recorded, and goes on mirroring."""
    d = tempfile.mkdtemp(prefix="sluice-it-link-idle-")
    src = secure_source(certs, os.path.join(d, "src"), **{"connections.max.idle.ms": "3000"})
    try:
        dest = start_broker()
        t = ssl_linked_topic(src, dest, certs, "idle", 20, metadata_max_age_ms=20000)
        assert_same(src, dest, t, 1)
        time.sleep(8)
        assert last_error(dest, "idle") is None, last_error(dest, "idle")
        assert "unexpected eof" not in dest.log_text()
        fill(src, t, 1, 20, start=20)
        assert_same(src, dest, t, 1)
    finally:
        stop_source(src, d)


def release_fifo(fifo):
    """A line that is no certificate into fifo, for whoever reads it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:                    # no reader yet
                raise
            time.sleep(0.1)
            continue
        os.write(fd, b"x\n")
        os.close(fd)
        return


def metadata_answered_in(b):
    """Seconds b took to answer a Metadata request, None if not in 5 s."""
    t0 = time.monotonic()
    try:
        with kr.Conn(b.port, timeout=5) as c:
            c.request(kr.API_METADATA, 4, kr.metadata_body(4, []))
        return time.monotonic() - t0
    except (OSError, kr.Timeout, kr.Closed) as e:
        print("Metadata not answered in %.1f s: %r" % (time.monotonic() - t0, e))
        return None


def produce_answered_in(b, t):
    """Seconds b took to acknowledge one message to topic t, None if not in 5 s."""
    p = ck_producer(b, **{"message.timeout.ms": 5000})
    t0 = time.monotonic()
    reports = produce(p, t, [{"value": b"alive"}], timeout=5)
    ok = all(e is None for e, _ in reports)
    return time.monotonic() - t0 if ok else None


def fifo_held(path):
    """path becomes a FIFO nobody writes; a second name of it is kept so
    release_fifo can still wake a reader after path is replaced."""
    os.mkfifo(path)
    held = path + ".held"
    os.link(path, held)
    return held


def test_certificate_fifos_and_devices_are_refused_at_insert_at_once(start_broker,
                                                                     certs):  # noqa: F811
    """sec_tls.c T6: an INSERT whose ssl.ca.location (or client
    certificate) is a FIFO nobody writes, or a device, is refused at once
    naming the setting, the path and why ("is not a regular file"), never
    read: it held the SQL worker until someone wrote the FIFO; the broker
    answers Metadata meanwhile."""
    dest = start_broker()
    d = tempfile.mkdtemp(prefix="sluice-it-link-fifo-")
    fifo = os.path.join(d, "ca.fifo")
    held = fifo_held(fifo)
    res = {}

    def insert(name, **settings):
        res[name] = sql(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) "
                              "VALUES ('%s', '127.0.0.1:1', '%s')" % (name, conf(**settings)))
    cases = {"f": dict(security_protocol="SSL", ssl_ca_location=fifo),
             "c": dict(security_protocol="SSL", ssl_ca_location=certs.ca.crt,
                       ssl_certificate_location=fifo, ssl_key_location=certs.client.key),
             "z": dict(security_protocol="SSL", ssl_truststore_location="/dev/zero")}
    try:
        t0 = time.monotonic()
        for name, settings in cases.items():
            th = threading.Thread(target=insert, args=(name,), kwargs=settings, daemon=True)
            th.start()
            th.join(3)
            if th.is_alive():
                break                                     # the worker waits on the FIFO
        took = time.monotonic() - t0
        answered = metadata_answered_in(dest)
    finally:
        release_fifo(held)
        release_fifo(held)
        time.sleep(0.5)
        shutil.rmtree(d, ignore_errors=True)
    print("INSERTs answered in %.1f s: %r; Metadata in %s s" % (took, res, answered))
    assert set(res) == set(cases), "an INSERT waited on a FIFO: %r" % res
    assert took < 3.0, took
    assert answered is not None and answered < 1.0, "the loop waited"
    for name, want in (("f", "ssl.ca.location %s is not a regular file (a FIFO)" % fifo),
                       ("c", "ssl.certificate.location %s is not a regular file" % fifo),
                       ("z", "ssl.truststore.location /dev/zero is not a regular file")):
        st, text = res[name]
        assert st != 200 and want in str(text), (name, text)
    assert rows(sql_ok(dest, "SELECT name FROM cluster_links")) == []


def test_a_fifo_certificate_after_a_restart_stalls_no_thread_and_the_link_recovers(
        source, start_broker, certs):  # noqa: F811
    """link_conn.c C7, sec_tls.c T6: a link's ssl.ca.location replaced by a
    FIFO nobody writes while the destination is down: after the restart
    the broker answers Metadata and produce at once, last_error names the
    file and why, and once the file is a certificate again the link
    recovers and mirrors what the source got meanwhile.  (Before: the
    janitor's thread, which makes the context, read the FIFO forever, so
    the link never recovered and nothing else queued there ran.)"""
    dest = start_broker()
    d = tempfile.mkdtemp(prefix="sluice-it-link-fifo2-")
    ca = os.path.join(d, "ca.pem")
    shutil.copy(certs.ca.crt, ca)
    held = None
    t = topic_name("fifo")
    create_topic(source, t, partitions=1)
    fill(source, t, 1, 30)
    try:
        link_source(dest, on(source, "SSL"), name="r", config=conf(**{
            "security_protocol": "SSL", "ssl_ca_location": ca,
            "reconnect_backoff_ms": 200, "reconnect_backoff_max_ms": 1000}))
        assert mirror(dest, t, link="r")[0] == 200
        assert_same(source, dest, t, 1)
        dest.stop()
        os.unlink(ca)
        held = fifo_held(ca)
        dest.start()
        local = topic_name("alive")
        create_topic(dest, local, partitions=1)
        err = until(lambda: "ssl.ca.location" in (last_error(dest, "r") or "") and
                    last_error(dest, "r"), 10, "last_error naming ssl.ca.location")
        answered = metadata_answered_in(dest)
        produced = produce_answered_in(dest, local)
        fill(source, t, 1, 30, start=30)
        tmp = ca + ".new"
        shutil.copy(certs.ca.crt, tmp)
        os.replace(tmp, ca)                               # a certificate again
        assert_same(source, dest, t, 1)
        until(lambda: last_error(dest, "r") is None, 10, "last_error cleared")
    finally:
        if held:
            release_fifo(held)
        shutil.rmtree(d, ignore_errors=True)
    print("last_error %r; Metadata answered in %s s, produce in %s s" % (err, answered,
                                                                         produced))
    assert answered is not None and answered < 1.0, "the loop waited for the FIFO"
    assert produced is not None and produced < 2.0, "produce waited for the FIFO"
    assert "ssl.ca.location %s is not a regular file (a FIFO)" % ca in err, err


def test_tls_refusals_say_what_happened(source, start_broker, certs):  # noqa: F811
    """sec_tls.c sec_tls_event_why: a refused TLS connection's last_error
    reads as its cause, not "error:00000005:lib(0)...": the certificate's
    problem for an untrusted source, and that the source closed the
    connection during the handshake for a plaintext listener."""
    dest = start_broker()
    other_ca = os.path.join(certs.dir, "otherca.crt")     # tls_support: another CA
    quick = {"reconnect_backoff_ms": 200, "reconnect_backoff_max_ms": 1000}
    link_source(dest, on(source, "SSL"), name="untrusted", config=conf(**dict(
        quick, security_protocol="SSL", ssl_ca_location=other_ca)))
    plain = SimpleNamespace(bootstrap="127.0.0.1:%d" % source.port)
    link_source(dest, plain, name="plain", config=conf(**dict(
        quick, security_protocol="SSL", ssl_ca_location=certs.ca.crt)))
    untrusted = until(lambda: last_error(dest, "untrusted"), 15, "last_error")
    plaintext = until(lambda: last_error(dest, "plain"), 15, "last_error")
    print("untrusted: %r\nplaintext: %r" % (untrusted, plaintext))
    for err in (untrusted, plaintext):
        assert not re.search(r"error:[0-9A-F]{8}|lib\(0\)|reason\(", err), err
    assert "certificate verify failed" in untrusted, untrusted
    assert re.search(r"the server's certificate: .*(issuer|self.signed)", untrusted), untrusted
    assert "TLS handshake: connection closed by the source before it finished" in plaintext, \
        plaintext
