-- Offsets committed inside a transaction (TxnOffsetCommit, issue 30;
-- daemon/group/group_txn.c, metadata/txn_offsets.c).  They are pending
-- until the transaction ends: a commit moves them into committed_offsets,
-- an abort drops them.  Kept apart from committed_offsets so OffsetFetch,
-- the committed_offsets table and the lag view show only committed ones,
-- and durable before TxnOffsetCommit is answered, so a crash between it
-- and the transaction's end loses nothing.  One row per (group, partition,
-- producer): a later TxnOffsetCommit of the same transaction replaces it.
CREATE TABLE pending_txn_offsets (
    group_id       TEXT    NOT NULL,
    topic          TEXT    NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    partition      INTEGER NOT NULL CHECK (partition >= 0),
    producer_id    INTEGER NOT NULL CHECK (producer_id >= 0),
    producer_epoch INTEGER NOT NULL,
    offset         INTEGER NOT NULL,
    leader_epoch   INTEGER NOT NULL DEFAULT -1,
    metadata       TEXT,
    commit_time_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, topic, partition, producer_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX pending_txn_offsets_producer ON pending_txn_offsets (producer_id);
