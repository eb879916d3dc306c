#!/usr/bin/env python3
"""load-statements.py counts the statements of a log sample by what chime
does with them, for scripts/load.sh.

    load-statements.py mysql|postgres LOG SECONDS

LOG is a MariaDB general log (log_output=FILE) or the part of a PostgreSQL
server log written with log_statement=all. Each statement is put in the
first class below whose pattern it matches (the store's queries, see
internal/store/sqlstore); the output gives statements per second by class, and the
unmatched statements, normalised, so that a new query shows.
"""
import collections
import re
import sys

# (class, regex on the statement with whitespace collapsed). Order matters.
CLASSES = [
    ("lease sweep: expired leases (SELECT)", r"FROM runs WHERE status = 'running' AND lease_until <"),
    ("lease sweep: requeue (UPDATE)", r"^UPDATE runs SET status = 'pending', due_at = \S+, lease_until = NULL WHERE"),
    ("lease extension: lock rows (SELECT FOR UPDATE)", r"^SELECT id, attempt FROM runs WHERE node = "),
    ("lease extension (UPDATE)", r"^UPDATE runs SET lease_until = "),
    ("overdue sweep (SELECT)", r"FROM runs WHERE status = 'pending' AND due_at >= \S+ AND due_at < \S+ ORDER BY due_at, id LIMIT"),
    ("overdue sweep: reschedule (UPDATE)", r"^UPDATE runs SET due_at = \S+ WHERE id = \S+ AND status = 'pending'"),
    ("trigger recheck: due runs (SELECT)", r"^SELECT id, timer_id, due_at FROM runs WHERE status = 'pending'"),
    ("claim: lock rows (SELECT FOR UPDATE)", r"^SELECT id FROM runs WHERE id IN .* AND status = 'pending'.*FOR UPDATE"),
    ("claim (UPDATE)", r"^UPDATE runs SET status = 'running', node = "),
    ("claim: read runs (SELECT)", r"^SELECT id, timer_id, .* FROM runs WHERE id IN \(\S+(, \S+)*\)$"),
    ("claim: read timers (SELECT)", r"FROM timers WHERE id IN"),
    ("finish: lock rows (SELECT FOR UPDATE)", r"^SELECT id, node, attempt FROM runs WHERE id IN .*FOR UPDATE"),
    ("finish (UPDATE)", r"^UPDATE runs (AS \w+ )?(JOIN|SET status = (\S+), .*finished_at)"),
    ("heartbeat: upsert node (INSERT)", r"^INSERT INTO nodes"),
    ("heartbeat: list nodes (SELECT)", r"FROM nodes WHERE seen_at"),
    ("heartbeat: store clock (SELECT)", r"(UNIX_TIMESTAMP\(SYSDATE|clock_timestamp\(\))"),
    ("planner: timers to plan (SELECT)", r"FROM timers WHERE enabled"),
    ("planner: insert runs (INSERT)", r"^INSERT (IGNORE )?INTO runs"),
    ("planner: planned until (UPDATE)", r"^UPDATE timers SET planned_until"),
    ("BEGIN", r"^(?i:BEGIN|START TRANSACTION)"),
    ("COMMIT", r"^(?i:COMMIT)"),
    ("ROLLBACK", r"^(?i:ROLLBACK)"),
    ("connection check (ping)", r"^(-- ping|SELECT 1$)"),
    ("session set-up", r"^(SET |SHOW |SELECT @@|select @@|set )"),
]
COMPILED = [(c, re.compile(p)) for c, p in CLASSES]


def mysql_statements(f):
    # Lines: "[date time]\t   id Command\targument", continuation lines of a
    # multi-line statement have no prefix.
    head = re.compile(r"^(\d{6}\s+\d{1,2}:\d{2}:\d{2})?\s+(\d+) (\w+(?: \w+)?)\t(.*)$")
    cur = None
    for line in f:
        line = line.rstrip("\n")
        m = head.match(line)
        if m:
            if cur is not None:
                yield cur
            cur = m.group(4) if m.group(3) == "Query" else None
        elif cur is not None:
            cur += " " + line
    if cur is not None:
        yield cur


def postgres_statements(f):
    # "... LOG:  statement: SQL" or "... LOG:  execute <name>: SQL", with
    # continuation lines (tab-indented) and "DETAIL:  parameters: ..." lines.
    head = re.compile(r"LOG:\s+(?:statement|execute [^:]*):\s(.*)$")
    cur = None
    for line in f:
        line = line.rstrip("\n")
        m = head.search(line)
        if m:
            if cur is not None:
                yield cur
            cur = m.group(1)
        elif cur is not None and (line.startswith("\t") or line.startswith(" ")):
            cur += " " + line
        elif cur is not None:
            yield cur
            cur = None
    if cur is not None:
        yield cur


def normalise(q):
    q = re.sub(r"\s+", " ", q).strip()
    q = re.sub(r"'(?:[^'\\]|\\.|'')*'", "?", q)
    q = re.sub(r"\$\d+", "?", q)
    q = re.sub(r"\b\d+\b", "?", q)
    q = re.sub(r"\?(?:, ?\?)+", "?…", q)
    return q


def main():
    backend, path, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    gen = mysql_statements if backend == "mysql" else postgres_statements
    counts = collections.Counter()
    other = collections.Counter()
    with open(path, errors="replace") as f:
        for q in gen(f):
            s = re.sub(r"\s+", " ", q).strip()
            if ("information_schema" in s or "pg_stat" in s or "GLOBAL STATUS" in s or "general_log" in s
                    or "log_statement" in s or "pg_reload_conf" in s):
                continue  # load.sh's own
            for c, rx in COMPILED:
                if rx.search(s):
                    counts[c] += 1
                    break
            else:
                other[normalise(s)[:150]] += 1
    total = sum(counts.values()) + sum(other.values())
    print("  statements in a %.0f s sample: %.1f/s" % (secs, total / secs))
    for c, _ in CLASSES:
        if counts[c]:
            print("  %-48s %8.1f/s" % (c, counts[c] / secs))
    for q, n in other.most_common(10):
        print("  other: %-41s %8.1f/s" % (q[:120], n / secs))


main()
