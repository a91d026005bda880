-- A pending transactional offset that an ordinary OffsetCommit of the same
-- (group, topic, partition) wrote over after it (issue 30, review fix):
-- Kafka keeps whichever was written later (GroupMetadata's olderThan, the
-- commit record's place in the log), so the transaction's commit must not
-- move the newer committed offset back.  Set by the ordinary commit
-- (metadata/groups.c), cleared by a later TxnOffsetCommit of the row
-- (written after it again), read by md_txn_offsets_complete.  The row
-- stays pending: RequireStable still waits for its transaction, as Kafka's
-- pendingTransactionalOffsetCommits does.
ALTER TABLE pending_txn_offsets
    ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0 CHECK (superseded IN (0, 1));
