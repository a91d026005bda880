-- Dynamic broker configs (issue 17): what AlterConfigs and
-- IncrementalAlterConfigs set on a BROKER resource, kept across restarts
-- and applied live (daemon/view/view_broker_configs.c).
--
--   broker  the broker id as text, or '' for the cluster-wide default
--           (Kafka's <default> entity: DYNAMIC_DEFAULT_BROKER_CONFIG)
--   name    the broker key, Kafka's ("log.retention.ms")
--   value   as given, validated before it is stored
CREATE TABLE broker_configs (
    broker TEXT NOT NULL,
    name   TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (broker, name)
) STRICT, WITHOUT ROWID;
