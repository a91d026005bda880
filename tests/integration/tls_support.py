"""TLS for the integration tests: certificates made with the `openssl`
command in a temporary directory, and brokers with an SSL listener next to
their PLAINTEXT one.

    certs = make_certs(dir)      # .ca .server .client .expired .untrusted (.crt/.key)
    add_ssl_listener(b, certs)   # before b.start(): b.ssl_port, b.ssl_bootstrap
    port, accepted, close = serve(handler)   # a raw loopback peer for clients
"""
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
from types import SimpleNamespace

import pytest

from conftest import free_port

OPENSSL = "openssl"


def _run(*args, cwd):
    subprocess.run([OPENSSL] + list(args), cwd=cwd, check=True, timeout=60,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _issue(d, name, subj, ca, days=2, ext=None):
    """A key and a certificate for subj signed by ca ("" = self-signed)."""
    key, crt = os.path.join(d, name + ".key"), os.path.join(d, name + ".crt")
    if not ca:
        _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
             "-days", str(days), "-subj", subj, cwd=d)
        return SimpleNamespace(key=key, crt=crt)
    csr = os.path.join(d, name + ".csr")
    _run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", subj,
         cwd=d)
    args = ["x509", "-req", "-in", csr, "-CA", ca.crt, "-CAkey", ca.key, "-CAcreateserial",
            "-out", crt, "-days", str(days)]
    if ext:
        extfile = os.path.join(d, name + ".ext")
        with open(extfile, "w") as f:
            f.write(ext + "\n")
        args += ["-extfile", extfile]
    _run(*args, cwd=d)
    return SimpleNamespace(key=key, crt=crt)


def make_certs(d):
    """A CA; the broker's certificate (for 127.0.0.1 and localhost, also
    used as the brokers' client certificate to each other); a client
    "CN=alice,O=Acme" of the CA; the same subject expired (-days -1: its
    notAfter is before its notBefore, a day ago); and one from another CA."""
    os.makedirs(d, exist_ok=True)
    ca = _issue(d, "ca", "/CN=Sluice Test CA", None)
    server = _issue(d, "server", "/O=Sluice/CN=localhost", ca,
                    ext="subjectAltName=DNS:localhost,IP:127.0.0.1")
    keystore = os.path.join(d, "server.pem")       # chain + key in one PEM
    with open(keystore, "w") as out:
        for p in (server.crt, server.key):
            with open(p) as f:
                out.write(f.read())
    server.pem = keystore
    client = _issue(d, "client", "/O=Acme/CN=alice", ca)
    expired = _issue(d, "expired", "/O=Acme/CN=alice", ca, days=-1)
    other = _issue(d, "otherca", "/CN=Someone Else CA", None)
    untrusted = _issue(d, "untrusted", "/O=Acme/CN=mallory", other)
    return SimpleNamespace(dir=d, ca=ca, server=server, client=client, expired=expired,
                           untrusted=untrusted)


@pytest.fixture(scope="module")
def certs():
    """make_certs in a scratch directory, one set per test module."""
    d = tempfile.mkdtemp(prefix="sluice-certs-")
    try:
        yield make_certs(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def ssl_overrides(certs, client_auth="requested"):
    return {"ssl.keystore.location": certs.server.pem,
            "ssl.truststore.location": certs.ca.crt,
            "ssl.client.auth": client_auth}


def add_ssl_listener(b, certs, name="SSL"):
    """Before b.start(): b listens on PLAINTEXT (b.port, what the harness
    waits for) and on an SSL listener called name (b.ssl_port)."""
    b.ssl_port = free_port()
    b.ssl_bootstrap = "127.0.0.1:%d" % b.ssl_port
    lst = "PLAINTEXT://127.0.0.1:%d,%s://127.0.0.1:%d" % (b.port, name, b.ssl_port)
    b.overrides["listeners"] = lst
    b.overrides["advertised.listeners"] = lst
    return b


def ck_ssl(certs, cert=None, **kw):
    """confluent-kafka settings for an SSL connection with cert (a
    certificate from make_certs) or none."""
    conf = {"security.protocol": "SSL", "ssl.ca.location": certs.ca.crt}
    if cert:
        conf.update({"ssl.certificate.location": cert.crt, "ssl.key.location": cert.key})
    conf.update(kw)
    return conf


def kp_ssl(certs, cert=None):
    conf = dict(security_protocol="SSL", ssl_cafile=certs.ca.crt, ssl_check_hostname=True)
    if cert:
        conf.update(ssl_certfile=cert.crt, ssl_keyfile=cert.key)
    return conf


def kcat_ssl(certs, cert=None):
    args = ["-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + certs.ca.crt]
    if cert:
        args += ["-X", "ssl.certificate.location=" + cert.crt,
                 "-X", "ssl.key.location=" + cert.key]
    return args


def on_ssl(b):
    """b as the support helpers see a broker, bootstrapping from its SSL
    listener."""
    return SimpleNamespace(bootstrap=b.ssl_bootstrap, host=b.host, port=b.ssl_port)


def serve(handler):
    """A loopback TCP peer: handler(conn) runs on a thread for each accepted
    connection.  Returns (port, the accepted sockets, close())."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    accepted, stop = [], threading.Event()

    def loop():
        while not stop.is_set():
            try:
                c = srv.accept()[0]
            except socket.timeout:
                continue
            accepted.append(c)
            threading.Thread(target=handler, args=(c,), daemon=True).start()
    th = threading.Thread(target=loop, daemon=True)
    th.start()

    def close():
        stop.set()
        th.join(5)
        for c in accepted:
            try:
                c.close()
            except OSError:
                pass
        srv.close()
    return srv.getsockname()[1], accepted, close


def read_frame(s):
    """One Kafka frame's body (after its 4-byte length) from socket s, None
    at EOF: what a fake TLS peer reads of a broker's request."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        got = s.recv(65536)
        if not got:
            return None
        data += got
    return data[4:]


def rss_mib(pid):
    """The resident memory of process pid, MiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0
