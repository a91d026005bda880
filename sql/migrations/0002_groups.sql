-- Group coordinator bookkeeping (daemon/group/group_coordinator.c, metadata/groups.c).
--
-- state_changed_at: when the group entered its current state (ms since the
-- epoch).  Kafka expires the offsets of a consumer group that stays Empty
-- offsets.retention.minutes after it became Empty, so the time of the
-- transition is a fact worth keeping, distinct from updated_at (last write).
ALTER TABLE consumer_groups ADD COLUMN state_changed_at INTEGER NOT NULL DEFAULT 0;
