#!/bin/sh
# Runs the Debian package's ZooKeeper server in the foreground:
#   sh examples/cluster/zookeeper-server.sh ZOO_CFG LOG_DIR
# Logs go to stdout (log4j's console appender, through the package's slf4j
# binding: without it the server logs nothing).  The server replaces this
# shell (exec), so its PID is the one the caller started; make run-cluster
# and the cluster tests (tests/integration/cluster_support.py) both start
# ZooKeeper here.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 zoo.cfg log-dir" >&2; exit 2; }
jars=/usr/share/java
for j in zookeeper.jar slf4j-log4j12.jar log4j-1.2.jar; do
    [ -r "$jars/$j" ] || { echo "$0: $jars/$j missing (make deps installs zookeeper)" >&2; exit 1; }
done
command -v java >/dev/null || { echo "$0: java not found (the zookeeper package needs default-jre)" >&2; exit 1; }
# A small heap and a quick-starting JIT: one test server, not a production one.
exec java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -cp "$jars/zookeeper.jar:$jars/slf4j-log4j12.jar:$jars/log4j-1.2.jar:/etc/zookeeper/conf" \
    -Dzookeeper.log.dir="$2" -Dzookeeper.root.logger=INFO,CONSOLE \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$1"
