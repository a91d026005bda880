"""libsluice's TLS against peers that misbehave: a Python socket or TLS peer
(closing mid-handshake, a wrong host name), and a proxy in front of a real
broker that starts presenting an untrusted certificate."""
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time

from conftest import Broker, finish_broker, free_port
from sasl_support import sql
from support import topic_name
from test_export import exporter
from tls_support import _issue, certs, serve, ssl_overrides  # noqa: F401


def run_export(port, conf, tmp_path, host="127.0.0.1"):
    argv = [exporter(), "--bootstrap", "%s:%d" % (host, port), "--topic", "t", "--to",
            str(tmp_path), "--until-end", "-S", "4000"]
    for k, v in conf.items():
        argv += ["-X", "%s=%s" % (k, v)]
    t0 = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stderr.decode(errors="replace"), time.monotonic() - t0


def test_peer_closing_mid_handshake_is_a_transport_error(certs, tmp_path):  # noqa: F811
    """client_sec.c inv. 1: 'A connection lost during either step is an
    ordinary transport error (reconnect with backoff)'.  Here the peer reads
    the ClientHello and closes (FIN), as a restarting broker would."""
    def handler(c):
        try:
            c.recv(4096)
        finally:
            c.close()
    port, accepted, close = serve(handler)
    try:
        rc, err, took = run_export(port, {"security.protocol": "SSL",
                                          "ssl.ca.location": certs.ca.crt,
                                          "reconnect.backoff.max.ms": "200"}, tmp_path)
    finally:
        close()
    print(err)
    assert "TLS handshake failed" not in err and "AUTHENTICATION" not in err, err
    assert len(accepted) >= 3, "%d connection(s): %s" % (len(accepted), err)


def tls_server_with(cert, extra=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert.crt, cert.key)

    def handler(c):
        try:
            s = ctx.wrap_socket(c, server_side=True)
            s.settimeout(3)
            s.recv(4096)
            s.close()
        except Exception:
            c.close()
    return serve(handler)


def test_host_name_checked_by_default(certs, tmp_path):  # noqa: F811
    other = _issue(certs.dir, "othername", "/CN=other.example", certs.ca,
                   ext="subjectAltName=DNS:other.example")
    port, accepted, close = tls_server_with(other)
    try:
        rc, err, took = run_export(port, {"security.protocol": "SSL",
                                          "ssl.ca.location": certs.ca.crt}, tmp_path)
        print(err)
        assert rc == 2 and "IP address mismatch" in err, err
        rc, err, took = run_export(port, {"security.protocol": "SSL",
                                          "ssl.ca.location": certs.ca.crt,
                                          "ssl.endpoint.identification.algorithm": "none"},
                                   tmp_path)
        print(err)
        assert "mismatch" not in err and "TLS handshake failed" not in err, err
    finally:
        close()


def test_producer_fails_at_once_after_a_fatal_tls_failure(certs, tmp_path):  # noqa: F811
    """sluice.h: a refused TLS handshake 'ends the handle ... every call
    returns SL_E_AUTHENTICATION'.  The broker advertises a proxy; after one
    delivered record the proxy starts presenting an untrusted certificate
    (a genuine fatal failure).  What happens to the next record?"""
    d = tempfile.mkdtemp(prefix="sluice-tlsfatal-")
    o = dict(ssl_overrides(certs))
    o["admin.listeners"] = "http://127.0.0.1:%d" % free_port()
    b = Broker(d, o)
    sslp, proxyp = free_port(), None
    mode = {"cut": False}
    bad = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    bad.load_cert_chain(certs.untrusted.crt, certs.untrusted.key)
    live = []

    def handler(c):
        if mode["cut"]:
            try:
                s = bad.wrap_socket(c, server_side=True)
                s.recv(10)
            except Exception:
                pass
            c.close()
            return
        up = socket.create_connection(("127.0.0.1", sslp))
        live.extend([c, up])

        def pump(a, z):
            try:
                while True:
                    x = a.recv(65536)
                    if not x:
                        break
                    z.sendall(x)
            except OSError:
                pass
            for s in (a, z):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        threading.Thread(target=pump, args=(up, c), daemon=True).start()
        pump(c, up)
    proxyp, accepted, close = serve(handler)
    b.overrides["listeners"] = "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d" % (b.port, sslp)
    b.overrides["advertised.listeners"] = ("PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d"
                                           % (b.port, proxyp))
    b.start()
    p = None
    try:
        t = topic_name("tlsfatal")
        st, body = sql(b, "INSERT INTO topics (name, partitions) VALUES ('%s', 1)" % t)
        assert st == 200, body
        tools = os.path.dirname(exporter())
        p = subprocess.Popen([os.path.join(tools, "sluice-produce"), "-b",
                              "127.0.0.1:%d" % proxyp, "-t", t, "-X", "security.protocol=SSL",
                              "-X", "ssl.ca.location=" + certs.ca.crt,
                              "-X", "delivery.timeout.ms=10000", "-X", "linger.ms=0"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdin.write(b"first\n")
        p.stdin.flush()
        time.sleep(3)
        mode["cut"] = True
        for s in live:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        time.sleep(2)
        t0 = time.monotonic()
        p.stdin.write(b"second\n")
        p.stdin.close()
        p.wait(timeout=60)
        err = p.stderr.read()
        took = time.monotonic() - t0
        print("rc=%d took=%.1f\n%s" % (p.returncode, took, err.decode(errors="replace")))
        assert p.returncode != 0
        assert b"certificate verify failed" in err
        assert took < 5, "took %.1f s" % took
    finally:
        if p and p.poll() is None:
            p.kill()
        close()
        finish_broker(b)
        shutil.rmtree(d, ignore_errors=True)


def test_client_certificate_refused_after_a_tls13_handshake_is_fatal_once(certs, tmp_path):  # noqa: F811
    """TLS 1.3: SSL_connect returns before the broker has checked the
    client's certificate; its refusal (an unknown_ca alert) comes on the
    first read.  That is the handle's end (client_sec.c inv. 1): one
    connection, the cause said, no reconnecting forever."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(certs.server.crt, certs.server.key)
    ctx.load_verify_locations(certs.ca.crt)
    ctx.verify_mode = ssl.CERT_REQUIRED

    def handler(c):
        s = ctx.wrap_socket(c, server_side=True, do_handshake_on_connect=False)
        try:
            s.settimeout(3)
            s.do_handshake()
            s.recv(10)
        except (OSError, ssl.SSLError):
            pass
        # Read what the client sent after its handshake (its first request)
        # before closing, as a broker does: a close with unread bytes is a
        # reset, which may reach the client before the alert.
        try:
            s.shutdown(socket.SHUT_WR)
            while s.recv(4096):
                pass
        except OSError:
            pass
        s.close()
    port, accepted, close = serve(handler)
    try:
        rc, err, took = run_export(port, {"security.protocol": "SSL",
                                          "ssl.ca.location": certs.ca.crt,
                                          "ssl.certificate.location": certs.untrusted.crt,
                                          "ssl.key.location": certs.untrusted.key,
                                          "reconnect.backoff.max.ms": "200"}, tmp_path)
    finally:
        close()
    print(err)
    assert rc != 0
    assert "refused the client certificate" in err and "unknown ca" in err, err
    assert len(accepted) == 1, "%d connection(s): %s" % (len(accepted), err)
    assert took < 10, "took %.1f s" % took
