"""Who may use the admin endpoint (/sql, /metrics), in each configuration.

  default        no authorizer, no admin.token: the loopback listener serves
                 anyone on the machine with full rights (documented, tested);
                 an https listener with ssl.client.auth=required serves
                 whoever has a certificate its CA signed
  token          admin.token: Bearer <token> or 401
  authorizer     every request is a principal: Basic (a SCRAM user), the
                 https listener's client certificate (User:CN=...), or
                 User:ANONYMOUS without credentials (401 unless an ACL
                 grants it); cluster DESCRIBE reads, ALTER writes; the
                 token stays a super-user credential
  admin socket   <data dir>/admin.sock, mode 0600: root and the broker's
                 own uid get everything, the kernel keeps others out
                 (EACCES) and SO_PEERCRED refuses them (403) if the mode
                 was loosened

and sluice-sql logging in each way (--user with the password from
$SLUICE_PASSWORD, a file or a prompt on a terminal; --token from the
command line, $SLUICE_TOKEN or a file; --socket; https with a client
certificate)."""
import base64
import json
import os
import pty
import select
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import tempfile
import urllib.error
import urllib.request

import pytest

from conftest import Broker, free_port, finish_broker
from sasl_support import ck_sasl, start_sasl_broker
from support import admin_socket, ck_producer, produce_ok, socket_http, topic_name
from test_sluice_sql import shell_path
from tls_support import certs, ssl_overrides  # noqa: F401 (fixture)

TOKEN = "s3cret-admin-token"
AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
         "super.users": "User:admin", "auto.create.topics.enable": "false",
         "admin.token": TOKEN}
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def call(b, path, body=None, user=None, password=None, token=None, cert=None, ca=None):
    """(status, text, headers) of one request to b's admin listener (http or
    https: then verified against ca, presenting cert if given)."""
    https = b.overrides["admin.listeners"].startswith("https://")
    req = urllib.request.Request("%s://%s%s" % ("https" if https else "http", b.admin, path),
                                 data=body.encode() if body is not None else None,
                                 method="POST" if body is not None else "GET")
    if user is not None:
        cred = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        req.add_header("Authorization", "Basic " + cred)
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    ctx = None
    if https:
        ctx = ssl.create_default_context(cafile=ca.crt)
        if cert:
            ctx.load_cert_chain(cert.crt, cert.key)
    try:
        with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def rows(text):
    return json.loads(text)


def shell(args, env=None, prefix=(), timeout=30, cwd=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    e.update(env or {})
    return subprocess.run(list(prefix) + [shell_path()] + args, capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=cwd)


def as_root_via_socket(b, stmt):
    st, text, _ = socket_http(admin_socket(b), "/sql?format=json", stmt)
    assert st == 200, text
    return rows(text)


def as_token(b, certs, stmt):  # noqa: F811
    st, text, _ = call(b, "/sql?format=json", stmt, token=TOKEN, ca=certs.ca)
    assert st == 200, text
    return rows(text)


def loosened(path):
    """Make the socket reachable by any uid (chmod 0666, parents 0711), as an
    operator might by mistake: then only SO_PEERCRED stands in the way."""
    changed = []
    p = path
    while p != "/":
        mode = stat.S_IMODE(os.stat(p).st_mode)
        want = 0o666 if p == path else mode | 0o711
        if mode != want:
            changed.append((p, mode))
            os.chmod(p, want)
        p = os.path.dirname(p)
    return changed


def restore(changed):
    for p, mode in changed:
        os.chmod(p, mode)


def assert_socket_guarded(b):
    """Root gets everything; nobody is kept out by the mode, then by
    SO_PEERCRED once the mode is loosened."""
    path = admin_socket(b)
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    r = shell(["--socket", path, "--format", "json", "-c", "SELECT count(*) AS n FROM brokers"])
    assert r.returncode == 0 and rows(r.stdout) == [{"n": 1}], r.stderr
    r = shell(["--socket", path, "-c", "SELECT 1"], prefix=NOBODY)
    assert r.returncode == 1 and "Permission denied" in r.stderr, (r.stdout, r.stderr)
    changed = loosened(path)
    try:
        r = shell(["--socket", path, "-c", "SELECT 1"], prefix=NOBODY)
        assert r.returncode == 1 and "uid 65534 may not use the admin socket" in r.stderr, \
            (r.stdout, r.stderr)
        # With credentials too: the socket goes by the uid alone.
        r = shell(["--socket", path, "--token", TOKEN, "-c", "SELECT 1"], prefix=NOBODY)
        assert r.returncode == 1 and "may not use the admin socket" in r.stderr, r.stderr
    finally:
        restore(changed)
    assert "refused uid 65534 on the admin socket" in b.log_text()


# ---- default: no authorizer ----------------------------------------------------------
@pytest.fixture
def plain(start_broker):
    return start_broker({"admin.listeners": "http://127.0.0.1:%d" % free_port()})


def test_default_loopback_serves_any_local_caller_everything(plain):
    b = plain
    t = topic_name("open")
    st, text, _ = call(b, "/sql?format=json", "INSERT INTO topics (name, partitions) "
                       "VALUES ('%s', 1)" % t)
    assert st == 200, text
    # Credentials change nothing: there is nobody to check them against.
    st, text, _ = call(b, "/sql?format=json", "SELECT name FROM topics WHERE name = '%s'" % t,
                       user="who", password="ever")
    assert st == 200 and rows(text) == [{"name": t}], text
    assert call(b, "/metrics")[0] == 200
    assert_socket_guarded(b)


def test_default_with_token_needs_it(start_broker):
    b = start_broker({"admin.listeners": "http://127.0.0.1:%d" % free_port(),
                      "admin.token": TOKEN})
    st, text, hdrs = call(b, "/sql", "SELECT 1")
    assert st == 401 and "Bearer" in hdrs.get("WWW-Authenticate", ""), text
    assert call(b, "/sql", "SELECT 1", token="wrong")[0] == 401
    assert call(b, "/sql", "SELECT 1", token=TOKEN[:-1])[0] == 401
    assert call(b, "/metrics", token=TOKEN)[0] == 200
    assert call(b, "/healthz")[0] == 200                       # stays open
    q = ["-b", b.admin, "--format", "csv", "--headers", "off", "-c", "SELECT 6 * 7"]
    assert shell(q).returncode == 1
    assert shell(q + ["--token", TOKEN]).stdout.split() == ["42"]
    assert shell(q, env={"SLUICE_TOKEN": TOKEN}).stdout.split() == ["42"]
    tf = os.path.join(b.workdir, "token")
    with open(tf, "w") as f:
        f.write(TOKEN + "\n")
    assert shell(q + ["--token-file", tf]).stdout.split() == ["42"]
    # The socket needs no token: the kernel vouches for root.
    r = shell(["--socket", admin_socket(b), "--format", "csv", "--headers", "off",
               "-c", "SELECT 6 * 7"])
    assert r.stdout.split() == ["42"], r.stderr
    r = shell(["-c", "SELECT 6 * 7", "--format", "csv", "--headers", "off"],
              env={"SLUICE_SOCKET": admin_socket(b)})
    assert r.stdout.split() == ["42"], r.stderr


def test_default_https_with_required_client_certificates(start_broker, certs):  # noqa: F811
    """No authorizer, an https admin listener requiring client certificates:
    a caller with a certificate the broker's CA signed can do everything
    (there are no ACLs to ask); one without gets no TLS session at all."""
    o = ssl_overrides(certs, "required")
    o["admin.listeners"] = "https://127.0.0.1:%d" % free_port()
    b = start_broker(o)
    st, text, _ = call(b, "/sql?format=json", "SELECT 6 * 7 AS x", cert=certs.client, ca=certs.ca)
    assert st == 200 and rows(text) == [{"x": 42}], text
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        call(b, "/sql?format=json", "SELECT 6 * 7 AS x", ca=certs.ca)
    r = shell(["-b", "https://" + b.admin, "--cacert", certs.ca.crt, "--cert", certs.client.crt,
               "--key", certs.client.key, "--format", "csv", "--headers", "off", "-c", "SELECT 6 * 7"])
    assert r.returncode == 0 and r.stdout.split() == ["42"], r.stderr
    r = shell(["-b", "https://" + b.admin, "--cacert", certs.ca.crt, "-c", "SELECT 6 * 7"])
    assert r.returncode == 1 and "TLS" in r.stderr, (r.stdout, r.stderr)
    b.assert_alive()


def test_socket_stale_replaced_removed_at_stop_and_can_be_off(start_broker):
    b = start_broker({"admin.listeners": "none"})
    path = admin_socket(b)
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    b.stop(signal.SIGKILL)                 # a crash leaves the file behind
    assert os.path.exists(path)
    b.start()
    assert as_root_via_socket(b, "SELECT 1 AS one") == [{"one": 1}]
    b.stop(signal.SIGTERM)                 # a clean stop removes it
    assert not os.path.exists(path)
    b.overrides["admin.socket"] = "none"
    b.start()
    assert not os.path.exists(path)
    own = os.path.join(b.workdir, "adm.sock")
    b.stop(signal.SIGTERM)
    b.overrides["admin.socket"] = own
    b.start()
    assert stat.S_IMODE(os.stat(own).st_mode) == 0o600
    assert socket_http(own, "/healthz")[0] == 200


# ---- with an authorizer ----------------------------------------------------------------
@pytest.fixture(scope="module")
def secured(certs):  # noqa: F811
    """A SASL broker with the authorizer, an https admin listener that asks
    for (but does not require) a client certificate, and admin.token."""
    d = tempfile.mkdtemp(prefix="sluice-it-admin-access-")
    o = dict(AUTHZ)
    o.update(ssl_overrides(certs, "requested"))
    o["admin.listeners"] = "https://127.0.0.1:%d" % free_port()
    b = start_sasl_broker(d, o)
    # Set up with the token (not the socket), so that the no-credentials
    # case fails on its assertion against a broker without the fix.
    for user in ("admin", "carol", "dave", "erin"):
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            as_token(b, certs, "INSERT INTO scram_credentials (name, mechanism, password) "
                               "VALUES ('%s', '%s', '%s-pw')" % (user, m, user))
    for principal, op in (("User:carol", "DESCRIBE"), ("User:erin", "ALTER")):
        as_token(b, certs, "INSERT INTO acls (resource_type, resource_name, principal, "
                           "operation, permission) VALUES ('CLUSTER', 'kafka-cluster', "
                           "'%s', '%s', 'ALLOW')" % (principal, op))
    for t in ("seen", "hidden"):
        as_token(b, certs, "INSERT INTO topics (name, partitions) VALUES ('%s', 1)" % t)
        produce_ok(ck_producer(b, **ck_sasl("SCRAM-SHA-256", "admin", "admin-pw")), t,
                   [{"value": ("%s-%d" % (t, i)).encode()} for i in range(2)])
    as_token(b, certs, "INSERT INTO acls (resource_type, resource_name, principal, operation, "
                       "permission) VALUES ('TOPIC', 'seen', 'User:carol', 'READ', 'ALLOW')")
    yield b
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


def test_authz_no_credentials_is_anonymous_and_refused(secured, certs):  # noqa: F811
    b = secured
    for path, body in (("/sql?format=json", "SELECT name FROM topics"), ("/metrics", None),
                       ("/sql?format=json", "INSERT INTO topics (name, partitions) "
                                            "VALUES ('anon', 1)")):
        st, text, hdrs = call(b, path, body, ca=certs.ca)
        assert st == 401, (path, st, text)
        assert "Basic" in hdrs.get("WWW-Authenticate", ""), hdrs
    assert call(b, "/healthz", ca=certs.ca)[0] == 200
    assert "anon" not in [r["name"] for r in as_token(b, certs, "SELECT name FROM topics")]


def test_authz_without_token_no_credentials_writes_nothing(start_broker):
    """The issue's case: authorizer, no admin.token, loopback listener; a
    request without credentials created a topic (200).  Now 401."""
    o = {k: v for k, v in AUTHZ.items() if k != "admin.token"}
    o["admin.listeners"] = "http://127.0.0.1:%d" % free_port()
    b = start_broker(o)
    for stmt in ("INSERT INTO topics (name, partitions) VALUES ('anon', 1)",
                 "INSERT INTO scram_credentials (name, mechanism, password) "
                 "VALUES ('anon', 'SCRAM-SHA-256', 'pw')",
                 "INSERT INTO acls (resource_type, resource_name, principal, operation, "
                 "permission) VALUES ('TOPIC', '*', 'User:ANONYMOUS', 'ALL', 'ALLOW')",
                 "SELECT * FROM messages"):
        st, text, _ = call(b, "/sql?format=json", stmt)
        assert st == 401, (stmt, st, text)
    assert as_root_via_socket(b, "SELECT (SELECT count(*) FROM topics) + "
                                 "(SELECT count(*) FROM scram_credentials) + "
                                 "(SELECT count(*) FROM acls) AS n") == [{"n": 0}]


def test_authz_anonymous_gets_what_its_acls_grant(secured, certs):  # noqa: F811
    b = secured
    acl = ("('CLUSTER', 'kafka-cluster', 'User:ANONYMOUS', 'DESCRIBE', 'ALLOW')")
    as_root_via_socket(b, "INSERT INTO acls (resource_type, resource_name, principal, "
                          "operation, permission) VALUES " + acl)
    try:
        st, text, _ = call(b, "/sql?format=json", "SELECT name FROM topics WHERE name = 'seen'",
                           ca=certs.ca)
        assert st == 200 and rows(text) == [{"name": "seen"}], text
        st, text, _ = call(b, "/sql?format=json", "INSERT INTO topics (name, partitions) "
                           "VALUES ('anon', 1)", ca=certs.ca)
        assert st == 400 and "needs ALTER" in text, text
        # the schema registry's SQL writes are checked by the registry on
        # SUBJECT ACLs (test_registry_acl.py), not by the cluster's ALTER:
        # this broker has no registry to ask
        st, text, _ = call(b, "/sql?format=json", "INSERT INTO subjects (subject, schema) "
                           "VALUES ('s', '\"int\"')", ca=certs.ca)
        assert st == 400 and "the schema registry is not running" in text, text
    finally:
        as_root_via_socket(b, "DELETE FROM acls WHERE principal = 'User:ANONYMOUS'")
    assert call(b, "/metrics", ca=certs.ca)[0] == 401


def test_authz_basic_users_by_their_rights(secured, certs):  # noqa: F811
    b = secured
    q = "SELECT name FROM topics WHERE name = 'seen'"
    st, text, hdrs = call(b, "/sql?format=json", q, "carol", "wrong", ca=certs.ca)
    assert st == 401 and "Basic" in hdrs.get("WWW-Authenticate", ""), text
    assert call(b, "/sql", q, "nosuch", "x", ca=certs.ca)[0] == 401
    st, text, _ = call(b, "/sql", q, "dave", "dave-pw", ca=certs.ca)     # no rights
    assert st == 403 and "User:dave may not use this endpoint" in text, text
    # DESCRIBE: reads, is refused writes.
    st, text, _ = call(b, "/sql?format=json", q, "carol", "carol-pw", ca=certs.ca)
    assert st == 200 and rows(text) == [{"name": "seen"}], text
    assert call(b, "/metrics", None, "carol", "carol-pw", ca=certs.ca)[0] == 200
    st, text, _ = call(b, "/sql?format=json", "INSERT INTO topics (name, partitions) "
                       "VALUES ('by-carol', 1)", "carol", "carol-pw", ca=certs.ca)
    assert st == 400 and "needs ALTER" in text, text
    # Records: of the topics carol may READ only, as a consumer would get.
    m = "SELECT topic, value FROM messages ORDER BY topic, offset"
    st, text, _ = call(b, "/sql?format=json", m, "carol", "carol-pw", ca=certs.ca)
    assert st == 200 and rows(text) == [{"topic": "seen", "value": "seen-0"},
                                        {"topic": "seen", "value": "seen-1"}], text
    st, text, _ = call(b, "/sql?format=json", "SELECT value FROM messages WHERE topic = 'hidden'",
                       "carol", "carol-pw", ca=certs.ca)
    assert st == 400 and "TOPIC_AUTHORIZATION_FAILED" in text, text
    st, text, _ = call(b, "/sql?format=json", m, token=TOKEN, ca=certs.ca)
    assert st == 200 and [r["topic"] for r in rows(text)] == ["hidden"] * 2 + ["seen"] * 2, text
    # ALTER: creates a topic and a user.
    t = topic_name("erin")
    st, text, _ = call(b, "/sql?format=json", "INSERT INTO topics (name, partitions) "
                       "VALUES ('%s', 1)" % t, "erin", "erin-pw", ca=certs.ca)
    assert st == 200, text
    st, text, _ = call(b, "/sql?format=json", "INSERT INTO scram_credentials (name, mechanism, "
                       "password) VALUES ('frank', 'SCRAM-SHA-256', 'frank-pw')",
                       "erin", "erin-pw", ca=certs.ca)
    assert st == 200, text
    names = [r["name"] for r in as_root_via_socket(b, "SELECT name FROM topics")]
    assert t in names and "by-carol" not in names
    # The token is a super-user credential; a wrong one is refused.
    st, text, _ = call(b, "/sql?format=json", "SELECT count(*) AS n FROM scram_credentials "
                       "WHERE name = 'frank'", token=TOKEN, ca=certs.ca)
    assert st == 200 and rows(text) == [{"n": 1}], text
    assert call(b, "/sql", q, token="nope", ca=certs.ca)[0] == 401


def test_authz_client_certificate_is_the_principal(secured, certs):  # noqa: F811
    b = secured
    q = "SELECT name FROM topics WHERE name = 'seen'"
    st, text, _ = call(b, "/sql?format=json", q, cert=certs.client, ca=certs.ca)
    assert st == 403 and "User:CN=alice,O=Acme may not use" in text, text
    as_root_via_socket(b, "INSERT INTO acls (resource_type, resource_name, principal, operation, "
                          "permission) VALUES ('CLUSTER', 'kafka-cluster', "
                          "'User:CN=alice,O=Acme', 'DESCRIBE', 'ALLOW')")
    st, text, _ = call(b, "/sql?format=json", q, cert=certs.client, ca=certs.ca)
    assert st == 200 and rows(text) == [{"name": "seen"}], text
    # sluice-sql over https with the same certificate.
    r = shell(["-b", "https://" + b.admin, "--cacert", certs.ca.crt, "--cert", certs.client.crt,
               "--key", certs.client.key, "--format", "json", "-c", q])
    assert r.returncode == 0 and rows(r.stdout) == [{"name": "seen"}], r.stderr
    r = shell(["-b", "https://" + b.admin, "--cacert", certs.ca.crt, "-c", q])
    assert r.returncode == 1 and "needs credentials" in r.stderr, r.stderr
    r = shell(["-b", "https://" + b.admin, "-c", q])     # the broker's CA is not the system's
    assert r.returncode == 1 and "TLS" in r.stderr, r.stderr


def test_authz_sluice_sql_logins(secured, certs):  # noqa: F811
    b = secured
    base = ["-b", "https://" + b.admin, "--cacert", certs.ca.crt, "--format", "csv",
            "--headers", "off", "-c", "SELECT name FROM topics WHERE name = 'seen'"]
    r = shell(base + ["--user", "carol"], env={"SLUICE_PASSWORD": "carol-pw"})
    assert r.returncode == 0 and r.stdout.split() == ["seen"], r.stderr
    pf = os.path.join(b.workdir, "carol.pw")
    with open(pf, "w") as f:
        f.write("carol-pw\n")
    r = shell(base + ["--user", "carol", "--password-file", pf])
    assert r.returncode == 0 and r.stdout.split() == ["seen"], r.stderr
    r = shell(base + ["--user", "carol"], env={"SLUICE_PASSWORD": "bad"})
    assert r.returncode == 1 and "invalid user name or password" in r.stderr, r.stderr
    r = shell(base + ["--user", "carol"])                  # no terminal, no password
    assert r.returncode == 2 and "needs a password" in r.stderr, r.stderr
    r = shell(base, env={"SLUICE_TOKEN": TOKEN})
    assert r.returncode == 0 and r.stdout.split() == ["seen"], r.stderr
    r = shell(base + ["--token", TOKEN])
    assert r.returncode == 0 and r.stdout.split() == ["seen"], r.stderr
    r = shell(["--socket", admin_socket(b)] + base[4:])
    assert r.returncode == 0 and r.stdout.split() == ["seen"], r.stderr
    # From the broker's directory (log.dirs=./data there) with no target:
    # its socket, not 127.0.0.1:9644.
    assert admin_socket(b) == os.path.join(b.workdir, "data", "admin.sock")
    r = shell(base[4:], cwd=b.workdir)
    assert r.returncode == 0 and r.stdout.split() == ["seen"], r.stderr
    # The prompt: typed on a terminal, not echoed.
    out = prompt_login([shell_path()] + base + ["--user", "carol"], "carol-pw")
    assert "Password for carol:" in out and "seen" in out and "carol-pw" not in out, out


def prompt_login(argv, password, timeout=20):
    """Runs argv on a pseudo-terminal, types password at the prompt; all
    the terminal showed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, env)
    out, sent = b"", False
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                break
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not sent and b"Password for" in out:
                os.write(fd, password.encode() + b"\n")
                sent = True
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return out.decode(errors="replace")


def test_authz_socket_is_the_operators_way_in(secured):
    assert_socket_guarded(secured)
    r = shell(["--socket", admin_socket(secured), "--format", "csv", "--headers", "off", "-c",
               "INSERT INTO topics (name, partitions) VALUES ('by-root', 1)"])
    assert r.returncode == 0, r.stderr
    assert {"name": "by-root"} in as_root_via_socket(secured, "SELECT name FROM topics")


def test_authz_non_loopback_listener_needs_no_token(start_broker):
    """With the authorizer every request is a principal: a wildcard address
    is allowed without admin.token (and ANONYMOUS gets 401 there)."""
    o = {k: v for k, v in AUTHZ.items() if k != "admin.token"}
    o["admin.listeners"] = "http://0.0.0.0:%d" % free_port()
    b = start_broker(o)
    port = b.admin_port
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass
    try:
        urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10)
        raise AssertionError("served without credentials")
    except urllib.error.HTTPError as e:
        assert e.code == 401


def test_authz_plain_only_jaas_user_has_no_basic_login(tmp_path):
    """Basic checks SCRAM credentials (as PLAIN does on a listener without
    user_ options): a user known only from a PlainLoginModule line cannot
    log in to the admin endpoint, even with cluster ALTER, until it has a
    SCRAM credential."""
    o = {k: v for k, v in AUTHZ.items() if k != "admin.token"}
    o["sasl.jaas.config"] = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                             'user_paula="paula-pw";')
    b = start_sasl_broker(str(tmp_path), o)
    try:
        as_root_via_socket(b, "INSERT INTO acls (resource_type, resource_name, principal, "
                              "operation, permission) VALUES ('CLUSTER', 'kafka-cluster', "
                              "'User:paula', 'ALTER', 'ALLOW')")
        st, text, _ = call(b, "/sql", "SELECT 1", "paula", "paula-pw")
        assert st == 401 and "invalid user name or password" in text, text
        as_root_via_socket(b, "INSERT INTO scram_credentials (name, mechanism, password) "
                              "VALUES ('paula', 'SCRAM-SHA-256', 'paula-scram')")
        assert call(b, "/sql", "SELECT 1", "paula", "paula-scram")[0] == 200
    finally:
        problems = finish_broker(b)
    assert not problems, problems


class NobodyBroker(Broker):
    """A broker run as nobody (uid 65534), its data dir nobody's."""

    def argv(self):
        return NOBODY + super().argv()


def test_socket_admits_the_brokers_own_user():
    """Run as nobody, the broker lets nobody in on its socket (its own
    uid), and root; another uid (65533) is kept out by the mode, and gets
    403 once the mode is loosened."""
    wd = tempfile.mkdtemp(prefix="sluice-it-nobody-")
    os.chmod(wd, 0o755)
    b = NobodyBroker(wd, {"admin.listeners": "none"})
    os.chown(b.data_dir, 65534, 65534)
    try:
        b.start()
        path = admin_socket(b)
        st = os.stat(path)
        assert st.st_uid == 65534 and stat.S_IMODE(st.st_mode) == 0o600
        q = ["--socket", path, "--format", "csv", "--headers", "off", "-c", "SELECT 6 * 7"]
        for who in (NOBODY, ()):                    # its own user, root
            r = shell(q, prefix=who)
            assert r.returncode == 0 and r.stdout.split() == ["42"], (who, r.stderr)
        other = ["setpriv", "--reuid=65533", "--regid=65533", "--clear-groups"]
        r = shell(q, prefix=other)
        assert r.returncode == 1 and "Permission denied" in r.stderr, r.stderr
        os.chmod(path, 0o666)
        r = shell(q, prefix=other)
        assert r.returncode == 1 and "uid 65533 may not use the admin socket" in r.stderr, \
            r.stderr
    finally:
        problems = finish_broker(b)
        shutil.rmtree(wd, ignore_errors=True)
    assert not problems, problems


def test_a_default_socket_that_cannot_be_made_is_no_reason_to_stop(start_broker):
    """A data dir whose path is too long for a Unix socket (or full, or
    read-only): the broker runs without the socket and says so; a socket
    named by admin.socket that cannot be made stops it."""
    tail = "d" * 120
    b = start_broker({"admin.listeners": "none"})
    b.stop()
    b.data_dir = os.path.join(b.workdir, tail)
    os.makedirs(b.data_dir)
    b.start()
    assert not os.path.exists(admin_socket(b))
    assert "the path is too long for a Unix socket; running without it" in b.log_text()
    b.stop()
    b.overrides["admin.socket"] = os.path.join(b.data_dir, "admin.sock")
    with pytest.raises(Exception):
        b.start()
    assert "admin.socket=%s: the path is too long" % b.overrides["admin.socket"] in b.log_text()
    del b.overrides["admin.socket"]
    b.start()


def test_sluice_sql_trusts_no_planted_socket_and_sends_no_secret_over_one(tmp_path):
    """sluice-sql's default ./data/admin.sock is used only when root or the
    caller owns it, and no credential goes over a socket (its peer's uid is
    what counts there): a socket planted in a shared directory collects no
    token.  A header too long for its buffer is refused, not overrun."""
    import re
    import select
    import socket
    import threading
    os.makedirs(tmp_path / "data")
    path = str(tmp_path / "data" / "admin.sock")
    got = []

    def plant(owner):
        if os.path.exists(path):
            os.unlink(path)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        os.chown(path, owner, owner)
        os.chmod(path, 0o666)
        s.listen(4)
        stop_r, stop_w = os.pipe()

        def serve():
            # Until a connection, or the test says none is coming (stop_w).
            ready, _, _ = select.select([s, stop_r], [], [], 30)
            if s not in ready:
                return
            c, _ = s.accept()
            with c:
                c.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                # and the body: answered and closed before it came, the
                # client's write of it would die of SIGPIPE
                head, _, body = data.partition(b"\r\n\r\n")
                m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                while m and len(body) < int(m.group(1)):
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    body += chunk
                    data += chunk
                got.append(data)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\n42\n")
        th = threading.Thread(target=serve, daemon=True)
        th.start()
        return s, th, stop_r, stop_w

    def unplant(s, th, stop_r, stop_w):
        os.write(stop_w, b"x")
        th.join(15)
        for fd in (stop_r, stop_w):
            os.close(fd)
        s.close()

    q = ["--token", TOKEN, "--format", "csv", "--headers", "off", "-c", "SELECT 6 * 7"]
    # Owned by another uid: not used (the default HTTP address is tried instead).
    planted = plant(65534)
    shell(q, cwd=str(tmp_path), timeout=30)
    # sluice-sql has exited: a connection of its is being served by now (the
    # socket is checked before the stop pipe), so the plant can go.
    unplant(*planted)
    assert got == [], "sluice-sql talked to a socket uid 65534 planted: %r" % got
    # Owned by root (us): used, and the token stays home.
    planted = plant(0)
    r = shell(q, cwd=str(tmp_path), timeout=30)
    unplant(*planted)
    assert r.stdout.split() == ["42"], r.stderr
    assert len(got) == 1 and b"POST /sql" in got[0], got
    assert b"Authorization" not in got[0] and TOKEN.encode() not in got[0], got[0]
    # A token longer than the request header's buffer: said, not sent.
    with socket.socket() as ls:                  # connects (backlog), never answers
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        r = shell(["-b", "127.0.0.1:%d" % ls.getsockname()[1], "--token", "t" * 3000,
                   "-c", "SELECT 1"], timeout=30)
    assert r.returncode != 0 and "request header is over" in r.stderr, r.stderr[:300]
