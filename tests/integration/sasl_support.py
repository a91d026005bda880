"""SASL helpers for the integration tests: a broker whose one listener is
SASL_PLAINTEXT, SCRAM users made through SQL, client settings for kcat,
confluent-kafka and kafka-python, and a raw SaslHandshake v1 +
SaslAuthenticate login (kafka_raw) for the exchanges a client library
hides (re-authentication, requests before authentication)."""
import json
import urllib.request

from kafka.scram import ScramClient

from conftest import Broker, free_port
from support import admin_socket, socket_http
import kafka_raw as kr

API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36


class SaslBroker(Broker):
    """A Broker whose listener (and advertised listener) is SASL_PLAINTEXT."""

    def argv(self):
        return [a.replace("=PLAINTEXT://", "=SASL_PLAINTEXT://") for a in super().argv()]


def start_sasl_broker(workdir, overrides=None):
    port = free_port()
    o = {"admin.listeners": "http://127.0.0.1:%d" % port}
    o.update(overrides or {})
    b = SaslBroker(workdir, o)
    return b.start()


def sql(b, stmt):
    """(status, parsed JSON body) of one /sql statement; with an authorizer
    over the admin socket (as root, the super-user there)."""
    if b.overrides.get("authorizer.class.name"):
        st, text, _ = socket_http(admin_socket(b), "/sql?format=json", stmt)
        return st, json.loads(text or "[]")
    req = urllib.request.Request("http://%s/sql?format=json" % b.admin, data=stmt.encode(),
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read().decode() or "[]")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())


def add_user(b, name, password, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512")):
    for m in mechanisms:
        st, body = sql(b, "INSERT INTO scram_credentials (name, mechanism, password) "
                          "VALUES ('%s', '%s', '%s')" % (name, m, password))
        assert st == 200, body


# ---- client settings -------------------------------------------------------------
def ck_sasl(mechanism, user, password):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password}


def kp_sasl(mechanism, user, password):
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_plain_username=user, sasl_plain_password=password)


def kcat_sasl(mechanism, user, password):
    out = []
    for k, v in ck_sasl(mechanism, user, password).items():
        out += ["-X", "%s=%s" % (k, v)]
    return out


# ---- raw exchanges ------------------------------------------------------------------
def handshake(conn, mechanism, version=1):
    """(ErrorCode, [enabled mechanisms])."""
    r = conn.request(API_SASL_HANDSHAKE, version, kr.string(mechanism))
    return r.i16(), r.array(lambda rr: rr.string())


def authenticate(conn, token, version=1):
    """(ErrorCode, ErrorMessage, AuthBytes, SessionLifetimeMs or None)."""
    r = conn.request(API_SASL_AUTHENTICATE, version, kr.nbytes(token))
    err, msg, auth = r.i16(), r.string(), r.nbytes()
    life = r.i64() if version >= 1 else None
    return err, msg, auth, life


def scram_login(conn, user, password, mechanism="SCRAM-SHA-256", version=1):
    """A whole SCRAM login over SaslHandshake v1 + SaslAuthenticate; returns
    the final SaslAuthenticate answer (checks the server's signature on
    success)."""
    err, mechs = handshake(conn, mechanism)
    assert err == 0, (err, mechs)
    c = ScramClient(user, password, mechanism)
    err, msg, first, _ = authenticate(conn, c.first_message().encode(), version)
    if err:
        return err, msg, first, None
    c.process_server_first_message(first.decode())
    ans = authenticate(conn, c.final_message().encode(), version)
    if ans[0] == 0:
        c.process_server_final_message(ans[2].decode())
    return ans
