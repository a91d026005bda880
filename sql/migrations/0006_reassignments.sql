-- Partition reassignments (issue 16, online expansion): while a
-- partition moves, ZooKeeper's topic znode lists the replicas being added
-- and removed (Kafka's "adding_replicas" / "removing_replicas"); the
-- mirror keeps them here, one mark per replica row, so SQL shows a
-- reassignment in progress.
--
--   partition_replicas.reassigning  'adding' / 'removing' while the
--                                   partition is reassigned; NULL otherwise
--                                   (always, standalone)
ALTER TABLE partition_replicas ADD COLUMN reassigning TEXT
    CHECK (reassigning IN ('adding', 'removing'));
