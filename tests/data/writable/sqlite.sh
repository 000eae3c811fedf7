#!/bin/sh
# sqlite3 in WAL mode under WORK: one writer committing 100 transactions
# while three readers, other processes, query all along; every snapshot a
# reader sees must be one the writer committed (whole transactions only).
# Usage: sqlite.sh WORK
set -eu
work=$1
mkdir -p "$work"
cd "$work"
sqlite3 db.sqlite <<'SQL'
PRAGMA journal_mode=WAL;
CREATE TABLE t(id INTEGER PRIMARY KEY, batch INTEGER, v TEXT);
CREATE TABLE meta(n INTEGER);
INSERT INTO meta VALUES(0);
.system ls
SQL
# Each transaction adds 10 rows and counts them in meta.
awk 'BEGIN {
    print ".timeout 60000"
    for (b = 1; b <= 100; b++) {
        print "BEGIN;"
        for (i = 1; i <= 10; i++)
            printf "INSERT INTO t(batch, v) VALUES(%d, printf(\"%%0200d\", %d));\n", b, i
        print "UPDATE meta SET n = n + 10;"
        print "COMMIT;"
    }
}' > writer.sql
awk 'BEGIN {
    print ".timeout 60000"
    for (i = 0; i < 200; i++)
        print "SELECT (SELECT count(*) FROM t) = (SELECT n FROM meta) AND (SELECT count(*) FROM t) % 10 = 0;"
}' > reader.sql
sqlite3 db.sqlite < writer.sql > writer.out &
writer=$!
pids=""
for r in 1 2 3; do
    sqlite3 db.sqlite < reader.sql > "reader$r.out" &
    pids="$pids $!"
done
wait "$writer" && echo "writer done" || echo "writer failed: $?"
for p in $pids; do
    wait "$p" && echo "reader done" || echo "reader failed: $?"
done
for r in 1 2 3; do
    echo "reader $r: consistent snapshots (1) and torn ones (0):"
    sort reader$r.out | uniq -c
done
sqlite3 db.sqlite <<'SQL'
SELECT count(*), sum(batch), count(DISTINCT v), (SELECT n FROM meta) FROM t;
PRAGMA integrity_check;
PRAGMA journal_mode;
PRAGMA wal_checkpoint(TRUNCATE);
.system ls db.sqlite*
SQL
echo "after the last connection closed:"
ls db.sqlite*
sqlite3 db.sqlite 'DELETE FROM t WHERE batch > 50; VACUUM; SELECT count(*) FROM t;'
