#!/usr/bin/env python3
"""regionlag.py - follower lag between mounts that each write their own region.

usage: regionlag.py OUT INTERVAL_MS POLL_MS STOPFILE GRACE_S MNT1:DIR1 MNT2:DIR2 ...

Mount i (MNTi) writes region DIRi (a directory under every mount's root).
Writer i, every INTERVAL_MS: creates MNTi/DIRi/lag/mK, writes its own clock
in it, fsyncs, closes; K counts from 0.  Observer i, for each other writer j:
stats MNTi/DIRj/lag/mK every POLL_MS until it shows, then waits for mK+1 (a
marker still not shown when the next one shows, checked every SKIP_S, counts
as never seen: one lost marker does not hide the later ones).
Lag of a sample = time the observer first saw the marker - time the writer's
fsync returned (the marker durable in the store: what is left is the
follower's poll and apply), also from the writer's create (the commit
included).  All on one machine: one monotonic clock for every mount, so the
two times compare (two daemons on one machine stand for two machines).

The writers stop when STOPFILE exists; the observers then wait up to GRACE_S
for the markers still missing.  Writes every sample to OUT (observer, writer,
k, lag_ms, lag_from_create_ms; -1 when never seen) and prints the summary:

    samples=N missing=M p50_ms=.. p99_ms=.. max_ms=.. create_p50_ms=.. create_p99_ms=..
    pair=I>J samples=.. missing=.. p50_ms=.. p99_ms=.. max_ms=..   (one line per pair)

Percentiles are nearest-rank.  Exit status 0 when every pair has a sample, 1 otherwise,
2 on bad usage.
"""
import os
import sys
import threading
import time

SKIP_S = 0.1  # how often an observer checks whether the marker it waits for was skipped


def pct(v, p):
    """Nearest-rank percentile p (0-100) of the sorted list v; 0 when empty."""
    if not v:
        return 0.0
    return v[max(0, min(len(v) - 1, int(-(-len(v) * p // 100)) - 1))]


class Writer:
    """One mount's marker writer: t_create[k], t_durable[k] (monotonic seconds)."""

    def __init__(self, mnt, d):
        self.path = os.path.join(mnt, d, "lag")
        self.t_create = []
        self.t_durable = []
        self.errors = 0
        self.lock = threading.Lock()

    def run(self, interval, stopfile):
        k = 0
        nxt = time.monotonic()
        while not os.path.exists(stopfile):
            t0 = time.monotonic()
            try:
                fd = os.open(os.path.join(self.path, "m%d" % k), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             0o644)
                os.write(fd, b"%.6f\n" % t0)
                os.fsync(fd)
                os.close(fd)
            except OSError as e:
                self.errors += 1
                sys.stderr.write("regionlag: writer %s m%d: %s\n" % (self.path, k, e))
                time.sleep(interval)
                continue
            with self.lock:
                self.t_create.append(t0)
                self.t_durable.append(time.monotonic())
            k += 1
            nxt += interval
            time.sleep(max(0.0, nxt - time.monotonic()))

    def written(self):
        with self.lock:
            return len(self.t_durable)


def visible(mnt, d, k):
    try:
        os.stat(os.path.join(mnt, d, "lag", "m%d" % k))
        return True
    except OSError:
        return False


def observe(mnt, d, w, poll, stopfile, grace, out):
    """Observer at mount mnt of writer w (region directory d): appends (k, seen).  It
    polls for the oldest marker not seen yet; every SKIP_S it also looks at the one
    after it, and when that one shows while the oldest still does not (a marker lost,
    or shown out of order), the oldest counts as never seen and the next is polled
    for, so that one lost marker does not hide all later ones."""
    k = 0
    deadline = None
    skip_at = time.monotonic() + SKIP_S
    while True:
        if deadline is None and os.path.exists(stopfile):
            deadline = time.monotonic() + grace
        n = w.written()
        if k >= n:
            if deadline is not None:
                return
            time.sleep(poll)
            continue
        if visible(mnt, d, k):
            out.append((k, time.monotonic()))
            k += 1
            skip_at = time.monotonic() + SKIP_S
            continue
        if time.monotonic() >= skip_at:
            skip_at = time.monotonic() + SKIP_S
            if n - 1 > k and visible(mnt, d, k + 1) and not visible(mnt, d, k):
                k += 1
                continue
        if deadline is not None and time.monotonic() > deadline:
            return
        time.sleep(poll)


def main():
    if len(sys.argv) < 8:
        sys.stderr.write(__doc__)
        return 2
    out, interval, poll = sys.argv[1], float(sys.argv[2]) / 1000, float(sys.argv[3]) / 1000
    stopfile, grace = sys.argv[4], float(sys.argv[5])
    mounts = [a.split(":", 1) for a in sys.argv[6:]]
    for m, d in mounts:
        os.makedirs(os.path.join(m, d, "lag"), exist_ok=True)
    writers = [Writer(m, d) for m, d in mounts]
    seen = {}
    threads = [threading.Thread(target=w.run, args=(interval, stopfile)) for w in writers]
    for i, (m, _) in enumerate(mounts):
        for j, (_, dj) in enumerate(mounts):
            if i != j:
                seen[i, j] = []
                threads.append(threading.Thread(target=observe, args=(
                    m, dj, writers[j], poll, stopfile, grace, seen[i, j])))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lag_all, create_all, missing_all, ok = [], [], 0, True
    lines = []
    with open(out, "w") as f:
        f.write("observer\twriter\tk\tlag_ms\tlag_from_create_ms\n")
        for (i, j), s in sorted(seen.items()):
            w = writers[j]
            got = dict(s)
            lag = []
            for k in range(len(w.t_durable)):
                if k in got:
                    v = (got[k] - w.t_durable[k]) * 1000
                    c = (got[k] - w.t_create[k]) * 1000
                    lag.append(v)
                    create_all.append(c)
                    f.write("%d\t%d\t%d\t%.1f\t%.1f\n" % (i + 1, j + 1, k, v, c))
                else:
                    f.write("%d\t%d\t%d\t-1\t-1\n" % (i + 1, j + 1, k))
            missing = len(w.t_durable) - len(lag)
            missing_all += missing
            lag.sort()
            lag_all += lag
            ok = ok and bool(lag)
            lines.append("pair=%d>%d samples=%d missing=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f" % (
                j + 1, i + 1, len(lag), missing, pct(lag, 50), pct(lag, 99), lag[-1] if lag else 0))
    lag_all.sort()
    create_all.sort()
    print("samples=%d missing=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f create_p50_ms=%.1f "
          "create_p99_ms=%.1f writer_errors=%d" % (
              len(lag_all), missing_all, pct(lag_all, 50), pct(lag_all, 99),
              lag_all[-1] if lag_all else 0, pct(create_all, 50), pct(create_all, 99),
              sum(w.errors for w in writers)))
    for ln in lines:
        print(ln)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
