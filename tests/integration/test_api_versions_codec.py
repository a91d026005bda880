"""ApiVersions through the generated codec (protocol/gen_msgs.py): the
response bytes for v0-v3 are exactly the spec's layout, built here by hand
from the advertised table, and the v3 request body is checked as Kafka's
generated parser checks it."""
import struct

import kafka_raw as kr
from support import assert_serves


def advertised(broker):
    with kr.Conn(broker.port) as c:
        err, apis = kr.parse_api_versions_v0(c.request(kr.API_API_VERSIONS, 0))
    assert err == 0
    return apis


def expected_body(version, entries):
    """ErrorCode, ApiKeys[ApiKey, MinVersion, MaxVersion], ThrottleTimeMs (v1+),
    compact array and tagged sections from v3 (the first flexible version)."""
    flex = version >= 3
    out = struct.pack(">h", 0)
    out += kr.uvarint(len(entries) + 1) if flex else struct.pack(">i", len(entries))
    for k, lo, hi in entries:
        out += struct.pack(">hhh", k, lo, hi) + (b"\x00" if flex else b"")
    if version >= 1:
        out += struct.pack(">i", 0)
    if flex:
        out += b"\x00"
    return out


def test_api_versions_v0_to_v4_bytes_follow_the_spec(broker):
    with kr.Conn(broker.port) as c:
        r = c.request(kr.API_API_VERSIONS, 0)
        r.i16()
        entries = r.array(lambda x: (x.i16(), x.i16(), x.i16()))
        assert entries and (kr.API_API_VERSIONS, 0, 4) in entries
        for v in range(5):
            body = kr.api_versions_v3_body() if v >= 3 else b""
            corr = c.send(kr.API_API_VERSIONS, v, body)
            frame = c.recv_frame()
            # header v0 (correlation id only) for every version, then the body
            assert frame[:4] == struct.pack(">i", corr)
            assert frame[4:] == expected_body(v, entries), "ApiVersions v%d" % v


def test_api_versions_v3_null_client_software_name_closes(broker):
    """ClientSoftwareName is a non-nullable string: a null one is a malformed
    request, and the broker closes the connection as it does for any request
    it cannot parse (Kafka's generated parser refuses it the same way)."""
    assert kr.API_API_VERSIONS in advertised(broker)
    with kr.Conn(broker.port) as c:
        c.send(kr.API_API_VERSIONS, 3, b"\x00" + b"\x04" + b"1.0" + b"\x00")
        assert c.wait_closed() == b""
    assert_serves(broker, "ApiVersions v3 with a null ClientSoftwareName")
