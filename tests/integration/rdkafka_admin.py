"""librdkafka's consumer-group admin calls through ctypes, for the calls
Debian's confluent-kafka 1.7 does not wrap (librdkafka 2.0.2 has them):
ListConsumerGroupOffsets, ListConsumerGroups, DescribeConsumerGroups,
DeleteConsumerGroupOffsets.  Every call has a deadline; the handle is
destroyed by close()."""
import ctypes
import time

_lib = ctypes.CDLL("librdkafka.so.1")
_p = ctypes.c_void_p


class _TopicPartition(ctypes.Structure):
    _fields_ = [("topic", ctypes.c_char_p), ("partition", ctypes.c_int32),
                ("offset", ctypes.c_int64), ("metadata", _p), ("metadata_size", ctypes.c_size_t),
                ("opaque", _p), ("err", ctypes.c_int), ("_private", _p)]


class _TopicPartitionList(ctypes.Structure):
    _fields_ = [("cnt", ctypes.c_int), ("size", ctypes.c_int),
                ("elems", ctypes.POINTER(_TopicPartition))]


def _fn(name, res, *args):
    f = getattr(_lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


_conf_new = _fn("rd_kafka_conf_new", _p)
_conf_set = _fn("rd_kafka_conf_set", ctypes.c_int, _p, ctypes.c_char_p, ctypes.c_char_p,
                ctypes.c_char_p, ctypes.c_size_t)
_new = _fn("rd_kafka_new", _p, ctypes.c_int, _p, ctypes.c_char_p, ctypes.c_size_t)
_destroy = _fn("rd_kafka_destroy", None, _p)
_queue_new = _fn("rd_kafka_queue_new", _p, _p)
_queue_destroy = _fn("rd_kafka_queue_destroy", None, _p)
_queue_poll = _fn("rd_kafka_queue_poll", _p, _p, ctypes.c_int)
_event_type = _fn("rd_kafka_event_type", ctypes.c_int, _p)
_event_error = _fn("rd_kafka_event_error", ctypes.c_int, _p)
_event_error_string = _fn("rd_kafka_event_error_string", ctypes.c_char_p, _p)
_event_destroy = _fn("rd_kafka_event_destroy", None, _p)
_tpl_new = _fn("rd_kafka_topic_partition_list_new", ctypes.POINTER(_TopicPartitionList),
               ctypes.c_int)
_tpl_add = _fn("rd_kafka_topic_partition_list_add", _p, ctypes.POINTER(_TopicPartitionList),
               ctypes.c_char_p, ctypes.c_int32)
_tpl_destroy = _fn("rd_kafka_topic_partition_list_destroy", None,
                   ctypes.POINTER(_TopicPartitionList))
_error_code = _fn("rd_kafka_error_code", ctypes.c_int, _p)
_group_result_name = _fn("rd_kafka_group_result_name", ctypes.c_char_p, _p)
_group_result_error = _fn("rd_kafka_group_result_error", _p, _p)
_group_result_partitions = _fn("rd_kafka_group_result_partitions",
                               ctypes.POINTER(_TopicPartitionList), _p)

_lcgo_new = _fn("rd_kafka_ListConsumerGroupOffsets_new", _p, ctypes.c_char_p,
                ctypes.POINTER(_TopicPartitionList))
_lcgo_destroy = _fn("rd_kafka_ListConsumerGroupOffsets_destroy", None, _p)
_lcgo = _fn("rd_kafka_ListConsumerGroupOffsets", None, _p, ctypes.POINTER(_p), ctypes.c_size_t,
            _p, _p)
_lcgo_result = _fn("rd_kafka_event_ListConsumerGroupOffsets_result", _p, _p)
_lcgo_groups = _fn("rd_kafka_ListConsumerGroupOffsets_result_groups", ctypes.POINTER(_p), _p,
                   ctypes.POINTER(ctypes.c_size_t))

_dcgo_new = _fn("rd_kafka_DeleteConsumerGroupOffsets_new", _p, ctypes.c_char_p,
                ctypes.POINTER(_TopicPartitionList))
_dcgo_destroy = _fn("rd_kafka_DeleteConsumerGroupOffsets_destroy", None, _p)
_dcgo = _fn("rd_kafka_DeleteConsumerGroupOffsets", None, _p, ctypes.POINTER(_p),
            ctypes.c_size_t, _p, _p)
_dcgo_result = _fn("rd_kafka_event_DeleteConsumerGroupOffsets_result", _p, _p)
_dcgo_groups = _fn("rd_kafka_DeleteConsumerGroupOffsets_result_groups", ctypes.POINTER(_p), _p,
                   ctypes.POINTER(ctypes.c_size_t))

_lcg = _fn("rd_kafka_ListConsumerGroups", None, _p, _p, _p)
_lcg_result = _fn("rd_kafka_event_ListConsumerGroups_result", _p, _p)
_lcg_valid = _fn("rd_kafka_ListConsumerGroups_result_valid", ctypes.POINTER(_p), _p,
                 ctypes.POINTER(ctypes.c_size_t))
_lcg_errors = _fn("rd_kafka_ListConsumerGroups_result_errors", ctypes.POINTER(_p), _p,
                  ctypes.POINTER(ctypes.c_size_t))
_listing_id = _fn("rd_kafka_ConsumerGroupListing_group_id", ctypes.c_char_p, _p)
_listing_state = _fn("rd_kafka_ConsumerGroupListing_state", ctypes.c_int, _p)
_listing_simple = _fn("rd_kafka_ConsumerGroupListing_is_simple_consumer_group", ctypes.c_int, _p)

_dcg = _fn("rd_kafka_DescribeConsumerGroups", None, _p, ctypes.POINTER(ctypes.c_char_p),
           ctypes.c_size_t, _p, _p)
_dcg_result = _fn("rd_kafka_event_DescribeConsumerGroups_result", _p, _p)
_dcg_groups = _fn("rd_kafka_DescribeConsumerGroups_result_groups", ctypes.POINTER(_p), _p,
                  ctypes.POINTER(ctypes.c_size_t))
_desc_id = _fn("rd_kafka_ConsumerGroupDescription_group_id", ctypes.c_char_p, _p)
_desc_error = _fn("rd_kafka_ConsumerGroupDescription_error", _p, _p)
_desc_state = _fn("rd_kafka_ConsumerGroupDescription_state", ctypes.c_int, _p)
_desc_members = _fn("rd_kafka_ConsumerGroupDescription_member_count", ctypes.c_size_t, _p)
_desc_assignor = _fn("rd_kafka_ConsumerGroupDescription_partition_assignor", ctypes.c_char_p, _p)

# rd_kafka_consumer_group_state_t
STATES = {0: "Unknown", 1: "PreparingRebalance", 2: "CompletingRebalance", 3: "Stable",
          4: "Dead", 5: "Empty"}


def _partitions(tpl):
    if not tpl:
        return []
    t = tpl.contents
    return sorted((t.elems[i].topic.decode(), t.elems[i].partition, t.elems[i].offset,
                   t.elems[i].err) for i in range(t.cnt))


def _tpl(parts):
    tpl = _tpl_new(max(1, len(parts)))
    for topic, partition in parts:
        _tpl_add(tpl, topic.encode(), partition)
    return tpl


class Admin:
    def __init__(self, bootstrap, timeout=20.0):
        self.timeout = timeout
        conf = _conf_new()
        err = ctypes.create_string_buffer(512)
        for k, v in (("bootstrap.servers", bootstrap), ("broker.address.family", "v4"),
                     ("log.connection.close", "false")):
            if _conf_set(conf, k.encode(), v.encode(), err, len(err)) != 0:
                raise RuntimeError(err.value.decode())
        self.rk = _new(0, conf, err, len(err))              # RD_KAFKA_PRODUCER
        if not self.rk:
            raise RuntimeError(err.value.decode())
        self.q = _queue_new(self.rk)

    def close(self):
        if self.rk:
            _queue_destroy(self.q)
            _destroy(self.rk)
            self.rk = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _wait(self):
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            ev = _queue_poll(self.q, 200)
            if ev:
                if _event_error(ev):
                    msg = _event_error_string(ev)
                    _event_destroy(ev)
                    raise RuntimeError("admin call failed: %s" % (msg or b"").decode())
                return ev
        raise TimeoutError("no admin result within %.0f s" % self.timeout)

    def _group_results(self, ev, result_fn, groups_fn):
        n = ctypes.c_size_t()
        arr = groups_fn(result_fn(ev), ctypes.byref(n))
        out = {}
        for i in range(n.value):
            g = arr[i]
            e = _group_result_error(g)
            out[_group_result_name(g).decode()] = (_error_code(e) if e else 0,
                                                   _partitions(_group_result_partitions(g)))
        return out

    def list_group_offsets(self, group, parts=None):
        """{group: (error, [(topic, partition, offset, err)])}; parts None: all."""
        tpl = _tpl(parts) if parts is not None else None
        req = _lcgo_new(group.encode(), tpl)
        if tpl:
            _tpl_destroy(tpl)
        arr = (_p * 1)(req)
        _lcgo(self.rk, arr, 1, None, self.q)
        _lcgo_destroy(req)
        ev = self._wait()
        try:
            return self._group_results(ev, _lcgo_result, _lcgo_groups)
        finally:
            _event_destroy(ev)

    def delete_group_offsets(self, group, parts):
        tpl = _tpl(parts)
        req = _dcgo_new(group.encode(), tpl)
        _tpl_destroy(tpl)
        arr = (_p * 1)(req)
        _dcgo(self.rk, arr, 1, None, self.q)
        _dcgo_destroy(req)
        ev = self._wait()
        try:
            return self._group_results(ev, _dcgo_result, _dcgo_groups)
        finally:
            _event_destroy(ev)

    def list_groups(self):
        """({group: (state name, is simple)}, number of errors)."""
        _lcg(self.rk, None, self.q)
        ev = self._wait()
        try:
            res = _lcg_result(ev)
            n = ctypes.c_size_t()
            arr = _lcg_valid(res, ctypes.byref(n))
            out = {_listing_id(arr[i]).decode(): (STATES[_listing_state(arr[i])],
                                                  bool(_listing_simple(arr[i])))
                   for i in range(n.value)}
            ne = ctypes.c_size_t()
            _lcg_errors(res, ctypes.byref(ne))
            return out, ne.value
        finally:
            _event_destroy(ev)

    def describe_groups(self, groups):
        """{group: (error, state name, member count, assignor)}."""
        names = (ctypes.c_char_p * len(groups))(*[g.encode() for g in groups])
        _dcg(self.rk, names, len(groups), None, self.q)
        ev = self._wait()
        try:
            n = ctypes.c_size_t()
            arr = _dcg_groups(_dcg_result(ev), ctypes.byref(n))
            out = {}
            for i in range(n.value):
                d = arr[i]
                e = _desc_error(d)
                out[_desc_id(d).decode()] = (_error_code(e) if e else 0, STATES[_desc_state(d)],
                                             _desc_members(d),
                                             (_desc_assignor(d) or b"").decode())
            return out
        finally:
            _event_destroy(ev)
