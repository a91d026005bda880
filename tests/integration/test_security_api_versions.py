"""The security APIs at the lowest and the highest version Kafka defines, in
raw frames written here, every field of each answer checked (issue 17):
CreateAcls, DescribeAcls, DeleteAcls v0 (LITERAL implied) and v3
(flexible); SaslHandshake v0 (raw tokens after it) and v1; SaslAuthenticate
v0, v1 (SessionLifetimeMs) and v2 (flexible, a failure with Kafka's
message); DescribeUserScramCredentials and AlterUserScramCredentials v0
(their only version, flexible)."""
import hashlib
import os
import shutil
import tempfile
import time

import pytest
from kafka.scram import ScramClient

from conftest import finish_broker
import kafka_raw as kr
from sasl_support import start_sasl_broker, add_user
from test_acls import secured  # noqa: F401  (authorizer on, ANONYMOUS manages ACLs)

CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS = 30, 29, 31
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
FIRST_FLEX = {CREATE_ACLS: 2, DESCRIBE_ACLS: 2, DELETE_ACLS: 2, SASL_HANDSHAKE: 99,
              SASL_AUTHENTICATE: 2, DESCRIBE_SCRAM: 0, ALTER_SCRAM: 0}
NONE, ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM = 0, 34, 33
INVALID_REQUEST, SECURITY_DISABLED, SASL_AUTHENTICATION_FAILED = 42, 54, 58
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE = 91, 92
# Kafka's enums: resource, pattern, operation, permission types
ANY, TOPIC, GROUP, CLUSTER = 1, 2, 3, 4
MATCH, LITERAL, PREFIXED = 2, 3, 4
READ, WRITE, ALTER, DESCRIBE = 3, 4, 7, 8
DENY, ALLOW = 2, 3
MECHS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SHA256, SHA512 = 1, 2


def call(c, api, v, body):
    return c.request_v(api, v, body, FIRST_FLEX[api])


def done(r, flex):
    r.vtags(flex)
    assert r.remaining() == 0


# ---- ACLs ---------------------------------------------------------------------------
def create_acls(c, v, creations):
    """creations: [(rtype, name, pattern, principal, host, op, perm)]; the
    pattern goes out from v1.  [(ErrorCode, ErrorMessage)]."""
    f = v >= 2

    def one(a):
        rtype, name, pat, principal, host, op, perm = a
        return (kr.i8(rtype) + kr.vstring(name, f) + (kr.i8(pat) if v >= 1 else b"")
                + kr.vstring(principal, f) + kr.vstring(host, f) + kr.i8(op) + kr.i8(perm)
                + kr.vtags(f))
    r = call(c, CREATE_ACLS, v, kr.varray(creations, f, one) + kr.vtags(f))
    assert r.i32() == 0
    got = r.vstructs(lambda x: (x.i16(), x.vstring(f)), f)
    done(r, f)
    return got


def acl_filter(v, rtype, name, pat, principal, host, op, perm):
    f = v >= 2
    return (kr.i8(rtype) + kr.vstring(name, f) + (kr.i8(pat) if v >= 1 else b"")
            + kr.vstring(principal, f) + kr.vstring(host, f) + kr.i8(op) + kr.i8(perm))


def describe_acls(c, v, *flt):
    """(ErrorCode, ErrorMessage, [(rtype, name, pattern or None, [(principal,
    host, op, perm)])])."""
    f = v >= 2
    r = call(c, DESCRIBE_ACLS, v, acl_filter(v, *flt) + kr.vtags(f))
    assert r.i32() == 0
    err, msg = r.i16(), r.vstring(f)

    def res(x):
        return (x.i8(), x.vstring(f), x.i8() if v >= 1 else None,
                x.vstructs(lambda y: (y.vstring(f), y.vstring(f), y.i8(), y.i8()), f))
    resources = r.vstructs(res, f)
    done(r, f)
    return err, msg, resources


def delete_acls(c, v, filters):
    """[(ErrorCode, ErrorMessage, [(err, msg, rtype, name, pattern or None,
    principal, host, op, perm)])] per filter."""
    f = v >= 2
    r = call(c, DELETE_ACLS, v, kr.varray(filters, f, lambda t: acl_filter(v, *t) + kr.vtags(f))
             + kr.vtags(f))
    assert r.i32() == 0

    def match(x):
        return (x.i16(), x.vstring(f), x.i8(), x.vstring(f), x.i8() if v >= 1 else None,
                x.vstring(f), x.vstring(f), x.i8(), x.i8())
    got = r.vstructs(lambda x: (x.i16(), x.vstring(f), x.vstructs(match, f)), f)
    done(r, f)
    return got


def test_acls_v0_and_v3(secured):
    with kr.Conn(secured.port) as c:
        # v0: no pattern type on the wire, LITERAL implied; an invalid
        # creation fails alone
        assert create_acls(c, 0, [(TOPIC, "sec-lit", None, "User:alice", "*", READ, ALLOW),
                                  (TOPIC, "", None, "User:alice", "*", READ, ALLOW),
                                  (GROUP, "g0", None, "alice", "*", READ, ALLOW)]) == [
            (NONE, None), (INVALID_REQUEST, "Resource name must not be empty"),
            (INVALID_REQUEST, "Invalid principal: expected type:name, e.g. User:alice")]
        # v3: PREFIXED; MATCH cannot be created
        assert create_acls(c, 3, [(TOPIC, "sec-", PREFIXED, "User:bob", "10.0.0.1", WRITE, DENY),
                                  (TOPIC, "sec-m", MATCH, "User:bob", "*", WRITE, DENY)]) == [
            (NONE, None),
            (INVALID_REQUEST, "Invalid pattern type: only LITERAL and PREFIXED ACLs can be created")]

        # DescribeAcls v0: the filter is LITERAL, so bob's PREFIXED ACL is not seen
        assert describe_acls(c, 0, TOPIC, None, None, None, None, ANY, ANY) == (
            NONE, None, [(TOPIC, "sec-lit", None, [("User:alice", "*", READ, ALLOW)])])
        assert describe_acls(c, 0, TOPIC, None, None, "User:bob", None, ANY, ANY) == (
            NONE, None, [])
        assert describe_acls(c, 0, CLUSTER, "kafka-cluster", None, "User:ANONYMOUS", "*", ANY,
                             ALLOW)[2] == [(CLUSTER, "kafka-cluster", None,
                                            [("User:ANONYMOUS", "*", ALTER, ALLOW),
                                             ("User:ANONYMOUS", "*", DESCRIBE, ALLOW)])]
        # v3: ANY pattern sees both; MATCH on a name finds the prefix that covers it
        err, msg, res = describe_acls(c, 3, TOPIC, None, ANY, None, None, ANY, ANY)
        assert (err, msg) == (NONE, None)
        assert sorted(res) == [(TOPIC, "sec-", PREFIXED, [("User:bob", "10.0.0.1", WRITE, DENY)]),
                               (TOPIC, "sec-lit", LITERAL, [("User:alice", "*", READ, ALLOW)])]
        assert describe_acls(c, 3, TOPIC, "sec-x", MATCH, None, None, ANY, ANY) == (
            NONE, None, [(TOPIC, "sec-", PREFIXED, [("User:bob", "10.0.0.1", WRITE, DENY)])])
        assert describe_acls(c, 3, TOPIC, None, ANY, None, "10.0.0.2", ANY, ANY) == (
            NONE, None, [])

        # DeleteAcls v0: LITERAL filters; one matching nothing has no error
        assert delete_acls(c, 0, [(TOPIC, "sec-lit", None, None, None, ANY, ANY),
                                  (TOPIC, "sec-", None, None, None, ANY, ANY)]) == [
            (NONE, None, [(NONE, None, TOPIC, "sec-lit", None, "User:alice", "*", READ, ALLOW)]),
            (NONE, None, [])]
        # v3: the PREFIXED one by principal, operation and permission
        assert delete_acls(c, 3, [(TOPIC, None, PREFIXED, "User:bob", None, WRITE, DENY)]) == [
            (NONE, None, [(NONE, None, TOPIC, "sec-", PREFIXED, "User:bob", "10.0.0.1", WRITE,
                           DENY)])]
        assert describe_acls(c, 3, TOPIC, None, ANY, None, None, ANY, ANY) == (NONE, None, [])
        # an ACL two filters match is listed by both, and deleted once
        assert create_acls(c, 3, [(GROUP, "g3", LITERAL, "User:carl", "*", READ, ALLOW)]) == [
            (NONE, None)]
        carl = (NONE, None, GROUP, "g3", LITERAL, "User:carl", "*", READ, ALLOW)
        assert delete_acls(c, 3, [(GROUP, "g3", LITERAL, None, None, ANY, ANY),
                                  (ANY, None, ANY, "User:carl", None, READ, ANY)]) == [
            (NONE, None, [carl]), (NONE, None, [carl])]
        assert describe_acls(c, 3, GROUP, None, ANY, None, None, ANY, ANY) == (NONE, None, [])
        assert delete_acls(c, 3, [(TOPIC, None, ANY, None, None, ANY, ANY)]) == [
            (NONE, None, [])]


def test_acls_v3_without_an_authorizer(broker):
    msg = "No Authorizer is configured on the broker"
    with kr.Conn(broker.port) as c:
        assert create_acls(c, 3, [(TOPIC, "t", LITERAL, "User:a", "*", READ, ALLOW)]) == [
            (SECURITY_DISABLED, msg)]
        assert describe_acls(c, 3, ANY, None, ANY, None, None, ANY, ANY) == (
            SECURITY_DISABLED, msg, [])
        assert delete_acls(c, 3, [(ANY, None, ANY, None, None, ANY, ANY)]) == [
            (SECURITY_DISABLED, msg, [])]


# ---- SASL -----------------------------------------------------------------------------
REAUTH_MS = 60000


@pytest.fixture(scope="module")
def sb():
    d = tempfile.mkdtemp(prefix="sluice-it-secraw-")
    b = start_sasl_broker(d, {"connections.max.reauth.ms": str(REAUTH_MS)})
    add_user(b, "alice", "alice-secret")
    yield b
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems)


def handshake(c, v, mech):
    r = call(c, SASL_HANDSHAKE, v, kr.string(mech))
    got = (r.i16(), r.array(lambda x: x.string()))
    assert r.remaining() == 0
    return got


def authenticate(c, v, token):
    """(ErrorCode, ErrorMessage, AuthBytes, SessionLifetimeMs or None)."""
    f = v >= 2
    r = call(c, SASL_AUTHENTICATE, v, kr.vbytes(token, f) + kr.vtags(f))
    got = (r.i16(), r.vstring(f), r.vbytes(f), r.i64() if v >= 1 else None)
    done(r, f)
    return got


def served(c):
    """An authenticated connection answers Metadata."""
    r = c.request(kr.API_METADATA, 1, kr.metadata_body(1, []))
    assert kr.parse_metadata(r, 1)["topics"] == {}


def raw_token(c, token):
    """SaslHandshake v0's way: a length and the bytes, the answer alike."""
    c.send_raw(kr.nbytes(token))
    deadline = time.monotonic() + 5
    c._fill(4, deadline)
    n = int.from_bytes(c.buf[:4], "big", signed=True)
    c._fill(4 + n, deadline)
    out, c.buf = c.buf[4:4 + n], c.buf[4 + n:]
    return out


PLAIN_OK = b"\0alice\0alice-secret"


def test_sasl_handshake_v0_then_raw_tokens(sb):
    with kr.Conn(sb.port) as c:
        assert handshake(c, 0, "PLAIN") == (NONE, MECHS)
        assert raw_token(c, PLAIN_OK) == b""          # PLAIN: an empty answer, as Kafka's
        served(c)
        # v0 cannot re-authenticate: refused, closed
        assert handshake(c, 0, "PLAIN") == (ILLEGAL_SASL_STATE, MECHS)
        c.wait_closed(5)
    with kr.Conn(sb.port) as c:
        assert handshake(c, 0, "SCRAM-SHA-512") == (NONE, MECHS)
        sc = ScramClient("alice", "alice-secret", "SCRAM-SHA-512")
        sc.process_server_first_message(raw_token(c, sc.first_message().encode()).decode())
        sc.process_server_final_message(raw_token(c, sc.final_message().encode()).decode())
        served(c)
    with kr.Conn(sb.port) as c:                        # not enabled, at v0 too
        assert handshake(c, 0, "GSSAPI") == (UNSUPPORTED_SASL_MECHANISM, MECHS)
        c.wait_closed(5)


def test_sasl_authenticate_v0_v1_v2(sb):
    with kr.Conn(sb.port) as c:
        assert handshake(c, 1, "PLAIN") == (NONE, MECHS)
        assert authenticate(c, 0, PLAIN_OK) == (NONE, "", b"", None)
        served(c)
    with kr.Conn(sb.port) as c:
        assert handshake(c, 1, "PLAIN") == (NONE, MECHS)
        assert authenticate(c, 1, PLAIN_OK) == (NONE, "", b"", REAUTH_MS)
        served(c)
        # re-authentication (KIP-368) at the flexible version
        assert handshake(c, 1, "PLAIN") == (NONE, MECHS)
        assert authenticate(c, 2, PLAIN_OK) == (NONE, "", b"", REAUTH_MS)
        served(c)
    with kr.Conn(sb.port) as c:
        # SCRAM at v2: no session lifetime until the exchange is complete
        assert handshake(c, 1, "SCRAM-SHA-256") == (NONE, MECHS)
        sc = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
        err, msg, first, life = authenticate(c, 2, sc.first_message().encode())
        assert (err, msg, life) == (NONE, "", 0)
        sc.process_server_first_message(first.decode())
        assert ",i=4096" in first.decode()
        err, msg, final, life = authenticate(c, 2, sc.final_message().encode())
        assert (err, msg, life) == (NONE, "", REAUTH_MS)
        sc.process_server_final_message(final.decode())
        served(c)
    for mech, token, want in (
            ("PLAIN", b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
            ("SCRAM-SHA-512", b"n,,n=nobody,r=abcdefgh",
             "Authentication failed during authentication due to invalid credentials "
             "with SASL mechanism SCRAM-SHA-512")):
        with kr.Conn(sb.port) as c:
            assert handshake(c, 1, mech) == (NONE, MECHS)
            assert authenticate(c, 2, token) == (SASL_AUTHENTICATION_FAILED, want, b"", 0)
            c.wait_closed(5)
    with kr.Conn(sb.port) as c:                        # no handshake before it
        err, msg, auth, life = authenticate(c, 2, PLAIN_OK)
        assert (err, msg, auth, life) == (
            ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request: no SaslHandshake v1 before it",
            b"", 0)
        c.wait_closed(5)


# ---- SCRAM credentials -------------------------------------------------------------------
def login(c):
    assert handshake(c, 1, "PLAIN") == (NONE, MECHS)
    assert authenticate(c, 2, PLAIN_OK)[0] == NONE


def describe_scram(c, users):
    """(ErrorCode, ErrorMessage, [(user, err, msg, [(mechanism, iterations)])])."""
    body = kr.varray(None if users is None else [kr.cstring(u) + kr.tags() for u in users], True)
    r = call(c, DESCRIBE_SCRAM, 0, body + kr.tags())
    assert r.i32() == 0
    err, msg = r.i16(), r.cstring()
    res = r.vstructs(lambda x: (x.cstring(), x.i16(), x.cstring(),
                                x.vstructs(lambda y: (y.i8(), y.i32()), True)), True)
    done(r, True)
    return err, msg, res


def alter_scram(c, deletions, upsertions):
    """[(user, ErrorCode, ErrorMessage)]."""
    body = kr.carray([kr.cstring(n) + kr.i8(m) + kr.tags() for n, m in deletions])
    body += kr.carray([kr.cstring(n) + kr.i8(m) + kr.i32(it) + kr.cbytes(s) + kr.cbytes(sp)
                       + kr.tags() for n, m, it, s, sp in upsertions])
    r = call(c, ALTER_SCRAM, 0, body + kr.tags())
    assert r.i32() == 0
    got = r.vstructs(lambda x: (x.cstring(), x.i16(), x.cstring()), True)
    done(r, True)
    return got


def test_user_scram_credentials_v0(sb):
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha512", b"frank-pw", salt, 4096)
    with kr.Conn(sb.port) as c:
        login(c)
        # Kafka leaves the messages of a success at their default, ""
        alice = ("alice", NONE, "", [(SHA256, 4096), (SHA512, 4096)])
        err, msg, res = describe_scram(c, None)
        assert (err, msg) == (NONE, "") and alice in res
        assert describe_scram(c, []) == (err, msg, res)      # empty is every user, too
        assert describe_scram(c, ["nobody", "alice"]) == (NONE, "", [
            ("nobody", RESOURCE_NOT_FOUND,
             "Attempt to describe a user credential that does not exist: nobody", []), alice])
        assert describe_scram(c, ["alice", "alice"]) == (NONE, "", [
            ("alice", DUPLICATE_RESOURCE,
             "Cannot describe SCRAM credentials for the same user twice in a single request: "
             "alice", [])])
        # upsertion: the client's salt and salted password
        assert alter_scram(c, [], [("frank", SHA512, 4096, salt, salted),
                                   ("gina", 0, 4096, salt, salted)]) == [
            ("frank", NONE, None), ("gina", UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")]
        assert describe_scram(c, ["frank"]) == (NONE, "",
                                                [("frank", NONE, "", [(SHA512, 4096)])])
    with kr.Conn(sb.port) as c:                        # frank logs in with that password
        assert handshake(c, 1, "SCRAM-SHA-512") == (NONE, MECHS)
        sc = ScramClient("frank", "frank-pw", "SCRAM-SHA-512")
        _, _, first, _ = authenticate(c, 2, sc.first_message().encode())
        sc.process_server_first_message(first.decode())
        err, _, final, _ = authenticate(c, 2, sc.final_message().encode())
        assert err == NONE
        sc.process_server_final_message(final.decode())
        # deletion, then again: nothing left to delete
        assert alter_scram(c, [("frank", SHA512)], []) == [("frank", NONE, None)]
        assert alter_scram(c, [("frank", SHA512)], []) == [
            ("frank", RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")]
        assert describe_scram(c, ["frank"])[2][0][1] == RESOURCE_NOT_FOUND
