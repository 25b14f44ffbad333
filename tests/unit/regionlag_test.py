#!/usr/bin/env python3
"""regionlag_test.py REGIONLAG - tools/bench/regionlag.py (the follower lag of the benchmark's
regions workload) measures what it says, on plain directories (no FUSE, no store):

  - percentiles are nearest-rank (pct());
  - two "mounts" that are one directory (a follower never behind): every marker is seen, none
    missing, the lag small (under the 500 ms bound; the figures are printed);
  - two directories and a copier thread standing for the followers, which copies each marker
    to the other "mount" 300 ms after it appears and never copies writer 1's m3: the lag is at
    least 300 ms and under 300 + 250 ms (copier and poll periods), exactly one marker is
    missing, it is m3 of pair 1>2, the markers after it are seen on time (every lag under
    300 + 400 ms), the exit status is 0 (every pair has samples), and the per-sample file has
    a row per marker.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

TOOL = sys.argv[1]


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


def summary(out):
    """The key=value fields of regionlag's first line, and its pair lines."""
    lines = out.strip().split("\n")
    first = dict(f.split("=", 1) for f in lines[0].split())
    pairs = [dict(f.split("=", 1) for f in ln.split()) for ln in lines[1:]]
    return first, pairs


def run(tmp, mounts, seconds, extra=None):
    """regionlag on MOUNTS for SECONDS (interval 50 ms, poll 10 ms, grace 2 s); extra(): a
    callable run in a thread meanwhile, given the stop event."""
    stop = os.path.join(tmp, "stop")
    out = os.path.join(tmp, "lag.tsv")
    p = subprocess.Popen([sys.executable, TOOL, out, "50", "10", stop, "2"] +
                         ["%s:%s" % m for m in mounts], stdout=subprocess.PIPE, text=True)
    ev = threading.Event()
    th = threading.Thread(target=extra, args=(ev,)) if extra else None
    if th:
        th.start()
    time.sleep(seconds)
    open(stop, "w").close()
    so, _ = p.communicate(timeout=30)
    ev.set()
    if th:
        th.join()
    print(so.strip())
    rows = open(out).read().strip().split("\n")[1:]
    return p.returncode, so, rows


def test_pct():
    spec = importlib.util.spec_from_file_location("regionlag", TOOL)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    v = list(range(1, 101))
    check(m.pct(v, 50) == 50 and m.pct(v, 99) == 99 and m.pct(v, 100) == 100, "pct of 1..100")
    check(m.pct([5.0], 99) == 5.0 and m.pct([], 50) == 0.0, "pct of one value and of none")
    check(m.pct([1, 2, 3, 4], 50) == 2, "pct: nearest rank, not interpolated")


def test_same_dir(tmp):
    root = os.path.join(tmp, "same")
    os.makedirs(os.path.join(root, "d1"))
    os.makedirs(os.path.join(root, "d2"))
    rc, out, rows = run(tmp, [(root, "d1"), (root, "d2")], 1.0)
    first, pairs = summary(out)
    check(rc == 0, "exit status %d with every marker visible" % rc)
    check(int(first["samples"]) >= 20, "%s samples in 1 s at 50 ms, 2 pairs" % first["samples"])
    check(first["missing"] == "0", "markers missing in one directory")
    check(float(first["p99_ms"]) < 500, "p99 %s ms for a follower never behind" % first["p99_ms"])
    check(len(pairs) == 2 and {p["pair"] for p in pairs} == {"1>2", "2>1"}, "pair lines")
    check(len(rows) == int(first["samples"]), "a row per sample")


def test_delayed(tmp):
    a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    for m in (a, b):
        for d in ("d1", "d2"):
            os.makedirs(os.path.join(m, d, "lag"))
    delay = 0.3
    # (from, to): writer 1 writes a/d1, seen by mount 2 at b/d1; writer 2 writes b/d2
    routes = [(os.path.join(a, "d1", "lag"), os.path.join(b, "d1", "lag"), "1"),
              (os.path.join(b, "d2", "lag"), os.path.join(a, "d2", "lag"), "2")]

    def copier(ev):
        first_seen = {}
        while not ev.is_set():
            now = time.monotonic()
            for src, dst, w in routes:
                for name in os.listdir(src):
                    k = (w, name)
                    first_seen.setdefault(k, now)
                    if now - first_seen[k] >= delay and not (w == "1" and name == "m3"):
                        if not os.path.exists(os.path.join(dst, name)):
                            shutil.copy(os.path.join(src, name), os.path.join(dst, name))
            time.sleep(0.005)

    rc, out, rows = run(tmp, [(a, "d1"), (b, "d2")], 1.5, copier)
    first, pairs = summary(out)
    check(rc == 0, "exit status %d" % rc)
    check(first["missing"] == "1", "%s missing, not 1 (m3 of writer 1 never copied)" % first["missing"])
    missing = [r.split("\t") for r in rows if r.split("\t")[3] == "-1"]
    check(len(missing) == 1 and missing[0][:3] == ["2", "1", "3"], "the missing one: %s" % missing)
    p50 = float(first["p50_ms"])
    lags = sorted(float(r.split("\t")[3]) for r in rows if r.split("\t")[3] != "-1")
    check(lags[0] >= delay * 1000 - 20, "lag %.1f ms below the %d ms delay" % (lags[0], delay * 1000))
    check(p50 < delay * 1000 + 250, "p50 %.1f ms, over the delay + 250 ms" % p50)
    # the markers after the lost one are seen on time, not when the writers stop
    check(lags[-1] < delay * 1000 + 400, "max %.1f ms, over the delay + 400 ms" % lags[-1])
    check(len(rows) == int(first["samples"]) + 1, "a row per marker")


def main():
    test_pct()
    with tempfile.TemporaryDirectory(prefix="regionlag-test.") as tmp:
        test_same_dir(tmp)
    with tempfile.TemporaryDirectory(prefix="regionlag-test.") as tmp:
        test_delayed(tmp)
    print("ok")


if __name__ == "__main__":
    main()
