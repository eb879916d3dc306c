#!/usr/bin/env python3
"""load-report.py turns two counter snapshots of scripts/load.sh into a table
of per-second rates.

    load-report.py BACKEND PHASE BEFORE AFTER TSV
    load-report.py BACKEND PHASE BEFORE AFTER TSV --extra BASE_BEFORE BASE_AFTER CYCLE_SECONDS RUNS

A snapshot holds "name value" lines (see snapshot in load.sh). With --extra
the table shows what the window added over the rates of the base window
(its counts minus the base rates times its length): as a total, as a rate
averaged over CYCLE_SECONDS (how often that extra work recurs) and per run
planned (RUNS). The rows are appended to TSV as well.
"""
import sys


def load(f):
    d = {}
    for line in open(f):
        p = line.split()
        if len(p) == 2:
            try:
                d[p[0]] = float(p[1])
            except ValueError:
                pass
    return d


def deltas(fa, fb):
    a, b = load(fa), load(fb)
    secs = b["time"] - a["time"]
    keys = set(a) | set(b)
    return {k: b.get(k, 0) - a.get(k, 0) for k in keys if k != "time"}, secs, b


def rows_of(backend, r):
    """rows_of returns (name, value, note) for the counts r."""
    g = lambda k: r.get(k, 0.0)
    s = lambda prefix: sum(v for k, v in r.items() if k.startswith(prefix))
    rd = lambda c: g("redis." + c)
    rows = []
    row = lambda name, v, note="": rows.append((name, v, note))
    # A command that a script runs counts in its own cmdstat too: every
    # lock script (extend, unlock, leader select) calls GET once, a range
    # script ZSCORE once, an index add PEXPIREAT twice.
    lock_scripts = rd("get")
    range_scripts = rd("zscore")
    add_scripts = rd("pexpireat") / 2
    row("fires (bench receiver)", g("received"))
    row("fires (nodes' chime_fires_total)", s("fires."))
    row("runs recovered by the sweepers", s("recovered."), "misfires and expired leases: should be 0 in a clean window")
    row("redis: SET NX PX (lock attempts)", rd("set"), "a node trying a slice it does not hold")
    row("redis: lock scripts", lock_scripts, "EVALSHA: failed attempt's extend, extend, unlock, leader")
    row("redis:   of which applied PEXPIRE", rd("pexpire"), "lock extensions that held")
    row("redis: index add scripts", add_scripts, "EVALSHA: %.1f ZADD + %.1f HSET inside" % (rd("zadd"), rd("hset")))
    row("redis: index removes", rd("exec"), "MULTI ZREM HDEL EXEC: %.1f ZREM" % rd("zrem"))
    row("redis: range scripts (reads)", range_scripts, "EVALSHA: ZSCORE, ZRANGEBYSCORE, HMGET")
    writes = rd("set") + lock_scripts + add_scripts + rd("exec")
    row("redis: write commands", writes, "the four lines above the reads")
    row("redis: read commands", range_scripts)
    row("redis: keys changed", g("redis_dirty"), "rdb_changes_since_last_save: writes that changed data")
    row("redis: keys expired", g("redis_expired"))
    if backend == "mysql":
        d = lambda k: g("db." + k)
        row("db: SELECT", d("Com_select"))
        row("db: INSERT", d("Com_insert") + d("Com_insert_select") + d("Com_replace"))
        row("db: UPDATE", d("Com_update") + d("Com_update_multi"))
        row("db: DELETE", d("Com_delete") + d("Com_delete_multi"))
        row("db: BEGIN", d("Com_begin"), "%.1f COMMIT, %.1f ROLLBACK" % (d("Com_commit"), d("Com_rollback")))
        row("db: statements, all", d("Questions"), "Questions, with BEGIN/COMMIT")
        tables = sorted({k.split(".")[1] for k in r if k.startswith("tbl.")})
        row("db: rows changed", sum(g("tbl.%s.changed" % t) for t in tables),
            "TABLE_STATISTICS; " + ", ".join("%s %.1f" % (t, g("tbl.%s.changed" % t)) for t in tables if g("tbl.%s.changed" % t)))
        row("db: rows read", sum(g("tbl.%s.read" % t) for t in tables),
            "TABLE_STATISTICS; " + ", ".join("%s %.1f" % (t, g("tbl.%s.read" % t)) for t in tables if g("tbl.%s.read" % t)))
        row("db: handler writes / updates / deletes", d("Handler_write") + d("Handler_update") + d("Handler_delete"),
            "%.1f / %.1f / %.1f" % (d("Handler_write"), d("Handler_update"), d("Handler_delete")))
        row("db: redo log bytes", d("Innodb_os_log_written"))
        idx = sorted({k[4:-5] for k in r if k.startswith("idx.") and k.endswith(".read")})
        for i in idx:
            if g("idx.%s.read" % i):
                row("db:   rows read by index %s" % i, g("idx.%s.read" % i), "INDEX_STATISTICS")
    else:
        d = lambda k: g("db." + k)
        row("db: transactions committed", d("xact_commit"), "one per statement outside a transaction")
        tables = sorted({k.split(".")[1] for k in r if k.startswith("tbl.")})
        per = lambda c: ", ".join("%s %.1f" % (t, g("tbl.%s.%s" % (t, c))) for t in tables if g("tbl.%s.%s" % (t, c)))
        tsum = lambda c: sum(g("tbl.%s.%s" % (t, c)) for t in tables)
        row("db: rows inserted", tsum("ins"), per("ins"))
        row("db: rows updated", tsum("upd"), per("upd") + ("; HOT: " + per("hot_upd") if per("hot_upd") else ""))
        row("db: rows deleted", tsum("del"), per("del"))
        row("db: table scans (seq + index)", tsum("scans"), per("scans"))
        row("db: rows read", tsum("read"), "seq_tup_read + idx_tup_fetch: " + per("read"))
        idx = sorted({k[4:-6] for k in r if k.startswith("idx.") and k.endswith(".scans")})
        for i in idx:
            if g("idx.%s.scans" % i):
                row("db:   index scans of %s" % i, g("idx.%s.scans" % i), "%.1f index entries read" % g("idx.%s.read" % i))
        row("db: rows ins/upd/del, catalogs too", d("tup_inserted") + d("tup_updated") + d("tup_deleted"),
            "pg_stat_database; %.1f rows returned, %.1f fetched" % (d("tup_returned"), d("tup_fetched")))
        row("db: WAL records", d("wal_records"))
        row("db: WAL bytes", d("wal_bytes"))
    return rows


def main():
    backend, phase, fa, fb, tsv = sys.argv[1:6]
    d, secs, last = deltas(fa, fb)
    extra = len(sys.argv) > 6 and sys.argv[6] == "--extra"
    if extra:
        bd, bsecs, _ = deltas(sys.argv[7], sys.argv[8])
        cycle, runs = float(sys.argv[9]), float(sys.argv[10])
        total = {k: d.get(k, 0) - bd.get(k, 0) / bsecs * secs for k in set(d) | set(bd)}
        rows = rows_of(backend, total)
        print("== %s, %s: %.1f s window, its counts minus the base rates; %d runs planned" % (backend, phase, secs, runs))
        print("  %-46s %12s %10s %10s" % ("", "total", "/s over", "per run"))
        print("  %-46s %12s %10s %10s" % ("", "", "%ds" % cycle, "planned"))
        for name, v, note in rows:
            # The planning pass changes the store and the index adds; the
            # lock and range lines differ between two windows with the
            # minute's phase (how many slices are held), not with planning.
            if name.startswith(("fires", "runs recovered")) or (name.startswith("redis:") and
                    not name.startswith(("redis: index add", "redis: keys changed"))):
                continue
            print("  %-46s %12.0f %10.1f %10.3f  %s" % (name, v, v / cycle, v / runs if runs else 0, note))
        with open(tsv, "a") as f:
            for name, v, note in rows:
                f.write("%s\t%s\t%.2f\t%.2f\t%s\n" % (phase, name, v, v / cycle, note))
        return
    rows = rows_of(backend, {k: v / secs for k, v in d.items()})
    held = [last[k] for k in sorted(last) if k.startswith("held.")]
    running = [last[k] for k in sorted(last) if k.startswith("running.")]
    print("== %s, %s: %.1f s window; slices held per node %s; actions running per node %s" % (
        backend, phase, secs, "/".join("%d" % h for h in held), "/".join("%d" % x for x in running)))
    print("  %-46s %10s" % ("", "per s"))
    for name, v, note in rows:
        print("  %-46s %10.1f  %s" % (name, v, note))
    with open(tsv, "a") as f:
        for name, v, note in rows:
            f.write("%s\t%s\t%.2f\t\t%s\n" % (phase, name, v, note))


main()
