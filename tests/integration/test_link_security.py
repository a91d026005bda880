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
certificate's problem named in last_error; an unreadable file or an
unknown mechanism or a JKS store is refused at the INSERT; with the
source's connections.max.reauth.ms the link logs in again on the same
connections (KIP-368) and no session expires.
"""
import os
import re
import shutil
import tempfile
import time
from types import SimpleNamespace

import pytest

from conftest import Broker, finish_broker, free_port
from sasl_support import add_user
from support import create_topic, topic_name
from test_link import (assert_same, batches, fill, link_source, mirror, rows, sql, sql_ok,
                       until)
from tls_support import certs, ssl_overrides  # noqa: F401

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
    st, text = insert(conf(security_protocol="SSL", ssl_truststore_type="JKS"))
    assert st != 200 and "PEM files only" in str(text), text
    st, text = insert(conf(security_protocol="SSL", ssl_endpoint_identification_algorithm="x"))
    assert st != 200 and "ssl.endpoint.identification.algorithm" in str(text), text
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
