#!/usr/bin/python3
"""bench/link_lag.py — mirror lag (issue 33, "Performance"), run by
bench/link_bench.sh: a confluent_kafka producer sends RATE records/s of
SIZE bytes to SOURCE's TOPIC for SECS seconds (acks=1, paced every
millisecond), while a consumer reads the mirror topic on DEST as it comes
(fetch.wait.max.ms 5), once a warm-up record went through.  A record's lag is its arrival at that consumer
minus its timestamp (CreateTime, set by the producer at produce()): the
time to be copied into the mirror, plus the consumer's own fetch.

    link_lag.py SOURCE DEST TOPIC RATE SIZE SECS

Prints `lag: N records … p50 … p99 …` and exits 1 when records are
missing or differ from what was produced."""
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def main():
    src, dst, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    rate, size, secs = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    total = int(rate * secs)
    lags, bad = [], [0]
    done, warm = threading.Event(), threading.Event()

    c = Consumer({"bootstrap.servers": dst, "group.id": "link-lag", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 5, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, 0)])

    def consume():
        seen = 0
        deadline = None
        while seen < total:
            if done.is_set():
                deadline = deadline or time.time() + 30
                if time.time() > deadline:
                    break
            # poll, not consume(n, timeout): a batch waits for its n-th
            # record or the timeout, and its first records' lag with it
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            if m.key() == b"warm":
                warm.set()
                continue
            now = time.time() * 1000
            if len(m.value()) != size or int(m.key()) != seen:
                bad[0] += 1
            lags.append(now - m.timestamp()[1])
            seen += 1

    t = threading.Thread(target=consume)
    t.start()
    p = Producer({"bootstrap.servers": src, "acks": 1, "linger.ms": 1,
                  "enable.idempotence": False})
    value = b"x" * size
    # A first record through the mirror before the clock: the consumer's
    # start (its first Fetch of a partition just created) is not lag.
    for _ in range(300):
        p.produce(topic, b"", key=b"warm", partition=0)
        p.flush(5)
        if warm.wait(0.1):
            break
    if not warm.is_set():
        print("lag: FAILED: the warm-up record never reached the mirror's consumer")
        done.set()
        t.join()
        return 1
    t0 = time.time()
    for i in range(total):
        # paced: record i leaves at t0 + i/rate
        ahead = t0 + i / rate - time.time()
        if ahead > 0.001:
            time.sleep(ahead)
        while True:
            try:
                p.produce(topic, value, key=str(i).encode(), partition=0)
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    p.flush(30)
    sent_s = time.time() - t0
    done.set()
    t.join()
    c.close()
    lags.sort()
    n = len(lags)
    if n == 0:
        print("lag: FAILED: nothing arrived in the mirror")
        return 1
    q = lambda f: lags[min(n - 1, int(f * n))]
    print("lag: %d of %d records (%d B) at %.0f/s for %.1f s through the mirror: p50 %.1f ms, "
          "p99 %.1f ms, max %.1f ms (target p99 <= 500 ms)%s"
          % (n, total, size, total / sent_s, sent_s, q(0.5), q(0.99), lags[-1],
             "" if n == total and not bad[0] else "  FAILED: %d missing, %d differ"
             % (total - n, bad[0])))
    return 0 if n == total and not bad[0] else 1


sys.exit(main())
