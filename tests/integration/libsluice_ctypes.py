"""libsluice's public API through ctypes, for integration tests that need
more than the command-line tools offer (callbacks, timing of polls).

Only the calls the tests use are declared.  A sanitizer build of
libsluice.so loads into python only with the ASan runtime preloaded
(it must come first in the process); without it the tests that need it
skip."""
import ctypes as C
import os
import subprocess

import pytest

from conftest import sluiced_path

TOOLS = os.path.dirname(sluiced_path())

SL_REBALANCE_ASSIGN = 1
SL_REBALANCE_REVOKE = 2
SL_OFFSET_BEGINNING = -2
SL_OFFSET_INVALID = -1001
SL_E_MAX_POLL_EXCEEDED = -214


class TP(C.Structure):
    _fields_ = [("topic", C.c_char_p), ("partition", C.c_int32), ("offset", C.c_int64),
                ("err", C.c_int)]


class Entry(C.Structure):
    _fields_ = [("name", C.c_char_p), ("value", C.c_char_p), ("read_only", C.c_int),
                ("is_default", C.c_int), ("is_sensitive", C.c_int)]


class Message(C.Structure):
    _fields_ = [("err", C.c_int), ("errstr", C.c_char_p), ("topic", C.c_char_p),
                ("partition", C.c_int32), ("offset", C.c_int64), ("timestamp", C.c_int64),
                ("timestamp_type", C.c_int), ("key", C.c_void_p), ("key_len", C.c_int32),
                ("value", C.c_void_p), ("value_len", C.c_int32), ("headers", C.c_void_p),
                ("header_count", C.c_int)]


REBALANCE_CB = C.CFUNCTYPE(None, C.c_void_p, C.c_int, C.POINTER(TP), C.c_int, C.c_void_p)


def lib():
    path = os.path.join(TOOLS, "libsluice.so")
    if not os.path.exists(path):
        pytest.fail("%s not built" % path)
    needed = subprocess.run(["ldd", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    if b"libasan" in needed and "libasan" not in os.environ.get("LD_PRELOAD", ""):
        # Or run with LD_PRELOAD=$(gcc -print-file-name=libasan.so)
        # ASAN_OPTIONS=detect_leaks=0 (python itself "leaks" at exit).
        pytest.skip("sanitizer build: %s cannot be loaded into python without "
                    "LD_PRELOAD of libasan" % path)
    L = C.CDLL(path)
    L.sl_conf_new.restype = C.c_void_p
    L.sl_conf_set.argtypes = [C.c_void_p, C.c_char_p, C.c_char_p, C.c_char_p, C.c_size_t]
    L.sl_conf_destroy.argtypes = [C.c_void_p]
    L.sl_conf_set_rebalance_cb.argtypes = [C.c_void_p, REBALANCE_CB]
    L.sl_admin_new.restype = C.c_void_p
    L.sl_admin_new.argtypes = [C.c_void_p, C.c_char_p, C.c_size_t]
    L.sl_admin_destroy.argtypes = [C.c_void_p]
    L.sl_admin_create_topic.argtypes = [C.c_void_p, C.c_char_p, C.c_int32, C.c_int16,
                                        C.POINTER(C.c_char_p), C.c_int, C.c_char_p, C.c_size_t]
    L.sl_admin_delete_topic.argtypes = [C.c_void_p, C.c_char_p, C.c_int, C.c_char_p, C.c_size_t]
    L.sl_admin_partition_count.argtypes = [C.c_void_p, C.c_char_p, C.c_int]
    L.sl_admin_alter_configs.argtypes = [C.c_void_p, C.c_int, C.c_char_p,
                                         C.POINTER(C.c_char_p), C.c_int, C.c_char_p, C.c_size_t]
    L.sl_admin_describe_configs.argtypes = [C.c_void_p, C.c_int, C.c_char_p,
                                            C.POINTER(C.POINTER(Entry)), C.POINTER(C.c_int),
                                            C.c_int, C.c_char_p, C.c_size_t]
    L.sl_admin_list_groups.argtypes = [C.c_void_p, C.POINTER(C.POINTER(C.c_char_p)),
                                       C.POINTER(C.c_int), C.c_int, C.c_char_p, C.c_size_t]
    L.sl_admin_list_topics.argtypes = [C.c_void_p, C.POINTER(C.POINTER(C.c_char_p)),
                                       C.POINTER(C.c_int), C.c_int, C.c_char_p, C.c_size_t]
    L.sl_admin_groups_free.argtypes = [C.POINTER(C.c_char_p), C.c_int]
    L.sl_admin_list_group_offsets.argtypes = [C.c_void_p, C.c_char_p, C.POINTER(C.POINTER(TP)),
                                              C.POINTER(C.c_int), C.c_int, C.c_char_p, C.c_size_t]
    L.sl_consumer_new.restype = C.c_void_p
    L.sl_consumer_new.argtypes = [C.c_void_p, C.c_char_p, C.c_size_t]
    L.sl_consumer_subscribe.argtypes = [C.c_void_p, C.POINTER(C.c_char_p), C.c_int]
    L.sl_consumer_assign.argtypes = [C.c_void_p, C.POINTER(TP), C.c_int]
    L.sl_consumer_poll.argtypes = [C.c_void_p, C.c_int, C.POINTER(Message)]
    L.sl_consumer_committed.argtypes = [C.c_void_p, C.POINTER(TP), C.c_int, C.c_int]
    L.sl_consumer_close.argtypes = [C.c_void_p]
    L.sl_consumer_destroy.argtypes = [C.c_void_p]
    L.sl_err_name.restype = C.c_char_p
    return L


def kv(*items):
    """A NULL-terminated char *[] of the given strings."""
    arr = (C.c_char_p * (len(items) + 1))()
    for i, s in enumerate(items):
        arr[i] = s.encode()
    arr[len(items)] = None
    return arr


def conf(L, settings):
    err = C.create_string_buffer(512)
    c = L.sl_conf_new()
    for k, v in settings.items():
        assert L.sl_conf_set(c, k.encode(), str(v).encode(), err, 512) == 0, err.value
    return c


class Consumer:
    """A libsluice consumer; rebalance events are recorded in .events as
    (event, [(topic, partition)]), and on_rebalance(event, parts) runs
    first when set."""

    def __init__(self, L, settings, on_rebalance=None):
        self.L = L
        self.events = []
        self.on_rebalance = on_rebalance
        self._cb = REBALANCE_CB(self._rebalance)       # kept alive with self
        c = conf(L, settings)
        L.sl_conf_set_rebalance_cb(c, self._cb)
        err = C.create_string_buffer(512)
        self.h = L.sl_consumer_new(c, err, 512)
        L.sl_conf_destroy(c)
        assert self.h, err.value

    def _rebalance(self, h, event, parts, n, opaque):
        tps = [(parts[i].topic.decode(), parts[i].partition) for i in range(n)]
        if self.on_rebalance:
            self.on_rebalance(event, tps)
        self.events.append((event, tps))

    def subscribe(self, topics):
        arr = kv(*topics)
        return self.L.sl_consumer_subscribe(self.h, arr, len(topics))

    def assign(self, tps):
        arr = (TP * len(tps))()
        for i, (t, p, off) in enumerate(tps):
            arr[i] = TP(t.encode(), p, off, 0)
        return self.L.sl_consumer_assign(self.h, arr, len(tps))

    def poll(self, timeout_ms):
        """None on timeout, else (err, topic, partition, offset, value)."""
        m = Message()
        rc = self.L.sl_consumer_poll(self.h, timeout_ms, C.byref(m))
        assert rc >= 0, "poll: %d" % rc
        if rc == 0:
            return None
        value = C.string_at(m.value, m.value_len) if m.value else None
        return (m.err, m.topic.decode() if m.topic else None, m.partition, m.offset, value)

    def committed(self, tps, timeout_ms=10000):
        arr = (TP * len(tps))()
        for i, (t, p) in enumerate(tps):
            arr[i] = TP(t.encode(), p, SL_OFFSET_INVALID, 0)
        rc = self.L.sl_consumer_committed(self.h, arr, len(tps), timeout_ms)
        assert rc == 0, "committed: %d" % rc
        return [arr[i].offset for i in range(len(tps))]

    def assignment(self):
        """The partitions of the last ASSIGN minus those revoked since."""
        cur = set()
        for ev, tps in self.events:
            cur = set(tps) if ev == SL_REBALANCE_ASSIGN else cur - set(tps)
        return cur

    def close(self):
        if self.h:
            self.L.sl_consumer_close(self.h)
            self.L.sl_consumer_destroy(self.h)
            self.h = None
