"""kafkajs's transactions against a standalone broker (issue 30): a
transactional producer commits one transaction and aborts another, and
sends a consumer group's offsets inside a committed one; a read_committed
kafkajs consumer (its default) gets exactly the committed records, in
order, byte for byte, and a read_uncommitted one gets the aborted ones too.
"""
from support import create_topic, kafkajs, topic_name

SCRIPT = r"""
const { Kafka, logLevel } = require("kafkajs");
const kafka = new Kafka({ clientId: "txn-js", brokers: [process.env.BOOTSTRAP],
                          logLevel: logLevel.NOTHING, retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 } });
const topic = process.env.TOPIC, group = process.env.GROUP;

async function readAll(readUncommitted, want) {
  const c = kafka.consumer({ groupId: group + (readUncommitted ? "-ru" : "-rc"),
                             readUncommitted, maxWaitTimeInMs: 200 });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  const got = [];
  await c.run({ eachMessage: async ({ partition, message }) => {
    got.push([partition, message.key.toString(), message.value.toString()]);
  }});
  const deadline = Date.now() + 20000;
  while (got.length < want && Date.now() < deadline)
    await new Promise(r => setTimeout(r, 100));
  await new Promise(r => setTimeout(r, 1500));   // anything more would come now
  await c.disconnect();
  return got;
}

(async () => {
  const p = kafka.producer({ transactionalId: "js-" + topic, idempotent: true,
                             maxInFlightRequests: 1 });
  await p.connect();
  let t = await p.transaction();
  await t.send({ topic, messages: [0, 1, 2].map(i => ({ key: "c" + i, value: "committed-" + i,
                                                        partition: i % 2 })) });
  await t.commit();
  t = await p.transaction();
  await t.send({ topic, messages: [0, 1].map(i => ({ key: "a" + i, value: "aborted-" + i,
                                                     partition: i % 2 })) });
  await t.abort();
  t = await p.transaction();
  await t.send({ topic, messages: [{ key: "c3", value: "committed-3", partition: 1 }] });
  await t.sendOffsets({ consumerGroupId: group,
                        topics: [{ topic, partitions: [{ partition: 0, offset: "2" }] }] });
  await t.commit();
  await p.disconnect();
  const rc = await readAll(false, 4);
  const ru = await readAll(true, 6);
  const admin = kafka.admin();
  await admin.connect();
  const offs = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  await admin.disconnect();
  console.log(JSON.stringify({ rc, ru, offsets: offs[0].partitions }));
})().catch(e => { console.error(e); process.exit(1); });
"""


def test_kafkajs_commit_abort_and_offsets_in_a_transaction(broker):
    t = topic_name("txnjs")
    create_topic(broker, t, 2)
    g = topic_name("txnjs-group")
    r = kafkajs(broker, SCRIPT, timeout=90, TOPIC=t, GROUP=g)
    committed = {(0, "c0", "committed-0"), (1, "c1", "committed-1"), (0, "c2", "committed-2"),
                 (1, "c3", "committed-3")}
    rc = [tuple(x) for x in r["rc"]]
    ru = [tuple(x) for x in r["ru"]]
    print("kafkajs: read_committed got %d (want 4), read_uncommitted got %d (want 6)"
          % (len(rc), len(ru)))
    assert sorted(rc) == sorted(committed) and len(rc) == len(set(rc)), rc
    for part in (0, 1):      # in order within a partition
        vals = [v for p, _, v in rc if p == part]
        assert vals == sorted(vals), rc
    assert sorted(ru) == sorted(committed | {(0, "a0", "aborted-0"), (1, "a1", "aborted-1")}), ru
    offs = {int(x["partition"]): int(x["offset"]) for x in r["offsets"]}
    assert offs.get(0) == 2, r["offsets"]
