-- The ZooKeeper mirror (issue 15): what cluster mode copies from
-- ZooKeeper into every broker's SQLite, so SQL on any broker shows the
-- whole cluster.  Standalone databases get the columns with values that
-- mean "no ZooKeeper" and no controller row.
--
--   partitions.controller_epoch  epoch of the controller that wrote the
--                                state znode (0: none, standalone)
--   partitions.zk_version        that znode's version, for conditional
--                                writes (-1: unknown, standalone)
--   brokers.endpoints            "PLAINTEXT://h:p,…" from /brokers/ids/<id>
--   brokers.alive                1 while its ephemeral znode exists; rows of
--                                brokers that went away are kept with 0
--   controller                   one row (id 0): the broker holding
--                                /controller (-1: none right now) and
--                                /controller_epoch.  No row: standalone.
ALTER TABLE partitions ADD COLUMN controller_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE partitions ADD COLUMN zk_version INTEGER NOT NULL DEFAULT -1;

ALTER TABLE brokers ADD COLUMN endpoints TEXT;
ALTER TABLE brokers ADD COLUMN alive INTEGER NOT NULL DEFAULT 1
    CHECK (alive IN (0, 1));

CREATE TABLE controller (
    id         INTEGER PRIMARY KEY CHECK (id = 0),
    broker_id  INTEGER NOT NULL CHECK (broker_id >= -1),
    epoch      INTEGER NOT NULL CHECK (epoch >= 0),
    changed_at INTEGER NOT NULL
) STRICT;
