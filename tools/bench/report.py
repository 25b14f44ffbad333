#!/usr/bin/env python3
"""report.py - turn the harness's raw results into docs/BENCHMARKS.md + charts.

usage: report.py RAWDIR DOCSDIR

RAWDIR holds results.tsv (target, workload, metric, value, unit, run),
status.tsv (target, ran|skipped, text) and meta.env, written by run.sh.
Writes DOCSDIR/BENCHMARKS.md (a table per workload with the ratio
memwalfs/peer) and DOCSDIR/bench-*.png (gnuplot, pngcairo).  The section
"## KV seed protocol (engine)" of an existing BENCHMARKS.md belongs to the
engine's benchmark and is carried over unchanged.
"""
import os
import statistics
import subprocess
import sys
from collections import defaultdict

TARGETS = ["memwalfs-s3", "memwalfs-local", "s3fs", "rclone", "bindfs", "local"]
MW = ("memwalfs-s3", "memwalfs-local")
KV_HEADING = "## KV seed protocol (engine)"

# (workload, title, main metric, unit, higher is better, what it measured)
WORKLOADS = [
    ("seqwrite-1j", "Sequential write, 1 job", "MBps_wall", "MB/s", True,
     "fio, 1 MiB blocks, {SEQ_MB} MiB, psync, end_fsync=1; MB/s = bytes / wall time incl. the final fsync"),
    ("seqwrite-4j", "Sequential write, 4 jobs", "MBps_wall", "MB/s", True,
     "fio, 4 jobs x {SEQ_MB}/4 MiB, 1 MiB blocks, end_fsync=1; MB/s = bytes / wall time"),
    ("seqread-cold", "Sequential read, cold", "MBps", "MB/s", True,
     "fio read 1 MiB blocks of the 1-job file after a remount and drop_caches"),
    ("seqread-warm", "Sequential read, warm", "MBps", "MB/s", True,
     "the same read again, same mount"),
    ("randread-4k", "Random 4 KiB reads", "iops", "IOPS", True,
     "fio randread 4 KiB, 1 job, {RAND_S} s, over the {SEQ_MB} MiB file"),
    ("randwrite-4k", "Random 4 KiB writes", "iops", "IOPS", True,
     "fio randwrite 4 KiB, 1 job, {RAND_S} s, end_fsync=1"),
    ("fsync-4k", "4 KiB write + fsync (latency)", "fsync_p50_ms", "ms", False,
     "fio write 4 KiB with fsync after each write, {FSYNC_S} s; fsync latency percentiles"),
    ("tree-cp", "Small files: cp -r", "wall_s", "s", False,
     "cp -r of {TREE_N} files ({TREE_MB} MiB: /usr/include padded with 1-64 KiB files)"),
    ("tree-cat-cold", "Small files: cat all (cold)", "wall_s", "s", False,
     "find -exec cat of every file after a remount and drop_caches"),
    ("tree-ls-lR", "Small files: ls -lR", "wall_s", "s", False, "ls -lR of the tree, after the cat"),
    ("tree-rm", "Small files: rm -r", "wall_s", "s", False, "rm -r of the tree"),
    ("dcreate-1", "Durable creates, 1 writer", "files_s", "files/s", True,
     "create + write 4 KiB + fsync + close, {DC_S} s or {DC_MAX} files (tools/bench/durable_creates.c)"),
    ("dcreate-32", "Durable creates, 32 writers", "files_s", "files/s", True,
     "the same with 32 threads in one directory"),
    ("list-create", "Listing: create the directory", "files_s", "files/s", True,
     "create empty files in one directory ({LIST_N} entries; {LIST_N_S3} on s3fs/rclone)"),
    ("list-ls-l", "Listing: ls -l (cold)", "entries_s", "entries/s", True,
     "ls -l of that directory after a remount and drop_caches"),
    ("list-find", "Listing: find", "entries_s", "entries/s", True, "find of it right after"),
    ("tar-x", "tar -x of a source tarball", "wall_s", "s", False,
     "tar -xzf of {TAR_N} files from /usr/include"),
    ("git-clone", "git clone of a local repository", "wall_s", "s", False,
     "git clone --no-hardlinks of a 2-commit repository ({GIT_N} files in the clone)"),
]
EXTRA = [("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("fsync_p99_ms", "fsync p99 ms"),
         ("max_ms", "max ms"), ("entries", "entries"), ("wall_s", "wall s"),
         ("settle_s", "until on server s"), ("cpu_s", "fs CPU s"), ("peak_mib", "fs peak MiB"),
         ("stored_mib", "stored MiB")]


def load(raw):
    res = defaultdict(list)  # (target, workload, metric) -> [values]
    with open(os.path.join(raw, "results.tsv")) as f:
        next(f, None)
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 6:
                continue
            try:
                v = float(p[3])
            except ValueError:
                v = p[3]
            res[(p[0], p[1], p[2])].append(v)
    status = {}
    if os.path.exists(os.path.join(raw, "status.tsv")):
        for line in open(os.path.join(raw, "status.tsv")):
            p = line.rstrip("\n").split("\t")
            if len(p) >= 3:
                status[p[0]] = (p[1], p[2])
    meta = {}
    if os.path.exists(os.path.join(raw, "meta.env")):
        for line in open(os.path.join(raw, "meta.env")):
            for part in line.strip().split(" ") if not line.startswith(("HOST", "SERVER", "RAW")) else [line.strip()]:
                if "=" in part:
                    k, v = part.split("=", 1)
                    meta[k] = v.strip('"')
    return res, status, meta


def num(vals):
    return [v for v in vals if isinstance(v, float)]


def med(res, t, w, m):
    v = num(res.get((t, w, m), []))
    return statistics.median(v) if v else None


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if abs(x) >= 1000:
        return "%.0f" % x
    if abs(x) >= 100:
        return "%.1f" % x
    if abs(x) >= 1:
        return "%.2f" % x
    return "%.3f" % x


def cell(res, t, w, m):
    vals = res.get((t, w, m), [])
    if not vals:
        return "-"
    n = num(vals)
    if not n:
        return str(vals[0])
    s = fmt(statistics.median(n))
    if len(n) > 1:
        s += " (%s-%s)" % (fmt(min(n)), fmt(max(n)))
    return s


def requests(res, t, w):
    """Server requests by type: RGW's access log for every bucket target (the
    same method for all); memwalfs also reports its own store counters."""
    parts = []
    for m in ("PUT", "GET", "LIST", "HEAD", "DELETE", "POST"):
        v = med(res, t, w, "req_" + m)
        if v:
            parts.append("%s %d" % (m, v))
    text = ", ".join(parts) if parts else ("0" if (t, w, "req_PUT") in res else "")
    if t.startswith("memwalfs"):
        keys = sorted(k[2] for k in res if k[0] == t and k[1] == w and
                      k[2].startswith("mw_store_requests_"))
        own = ["%s %s" % (k[len("mw_store_requests_"):], fmt(med(res, t, w, k)))
               for k in keys if med(res, t, w, k)]
        if own:
            text = (text + "; " if text else "") + "own stats: " + ", ".join(own)
    return text or "-"


def ratio(res, mw, t, w, m):
    a, b = med(res, mw, w, m), med(res, t, w, m)
    if a is None or b is None or b == 0 or t == mw:
        return "-"
    return "%.2f" % (a / b)


def workload_table(out, res, status, meta, spec):
    w, title, m, unit, hib, what = spec
    targets = [t for t in TARGETS if any(k[0] == t and k[1] == w for k in res)]
    if not targets:
        return
    out.append("### %s\n" % title)
    out.append("Measured: %s. Main figure: %s (%s is better); runs: %s%s.\n" % (
        what.format(**defaultdict(str, meta)), unit, "higher" if hib else "lower",
        meta.get("RUNS", "1"),
        ", cells show median (min-max)" if meta.get("RUNS", "1") != "1" else ", one run: no spread"))
    extras = [(k, lab) for k, lab in EXTRA if k != m and any((t, w, k) in res for t in targets)]
    hdr = ["target", "%s (%s)" % (m, unit), "memwalfs-s3 / this", "memwalfs-local / this"]
    hdr += [lab for _, lab in extras] + ["server requests", "failed"]
    out.append("| " + " | ".join(hdr) + " |")
    out.append("|" + "---|" * len(hdr))
    for t in targets:
        row = [t, cell(res, t, w, m), ratio(res, "memwalfs-s3", t, w, m),
               ratio(res, "memwalfs-local", t, w, m)]
        row += [cell(res, t, w, k) for k, _ in extras]
        row += [requests(res, t, w), cell(res, t, w, "failed") if (t, w, "failed") in res else ""]
        out.append("| " + " | ".join(row) + " |")
    out.append("")


def raw_table(out, res, meta):
    ws = sorted({k[1] for k in res if k[0] == "s3-raw"},
                key=lambda s: (int(s.split("-")[1][:-1]), s))
    if not ws:
        return
    out.append("### The raw server (no filesystem)\n")
    out.append("Measured: PUT then GET of N objects of one size with C connections "
               "(tools/bench/s3raw.sh: one curl --parallel, SigV4, UNSIGNED-PAYLOAD); "
               "MB/s = 10^6 bytes/s; runs: %s. This is the ceiling for the S3 targets "
               "on this machine (the server shares the 2 cores with the client).\n" % meta.get("RUNS", "1"))
    out.append("| size, connections | PUT MB/s | PUT req/s | GET MB/s | GET req/s | wall s |")
    out.append("|---|---|---|---|---|---|")
    for w in ws:
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            w[4:], cell(res, "s3-raw", w, "put_MBps"), cell(res, "s3-raw", w, "put_req_s"),
            cell(res, "s3-raw", w, "get_MBps"), cell(res, "s3-raw", w, "get_req_s"),
            cell(res, "s3-raw", w, "wall_s")))
    out.append("")


def chart(docs, name, title, ylabel, res, cols, logscale=False):
    """Clustered bars: one cluster per target, one bar per (workload, metric)."""
    targets = [t for t in TARGETS if any(med(res, t, w, m) is not None for w, m, _ in cols)]
    if not targets:
        return None
    dat = os.path.join(docs, "bench-raw", name + ".dat")
    with open(dat, "w") as f:
        f.write("target " + " ".join('"%s"' % lab for _, _, lab in cols) + "\n")
        for t in targets:
            vals = []
            for w, m, _ in cols:
                v = med(res, t, w, m)
                vals.append("?" if v is None or (logscale and v <= 0) else "%g" % v)
            f.write('"%s" %s\n' % (t, " ".join(vals)))
    png = os.path.join(docs, "bench-%s.png" % name)
    gp = ['set terminal pngcairo size 900,480 font "sans,10"',
          'set output "%s"' % png, 'set title "%s"' % title,
          'set ylabel "%s"' % ylabel, 'set style data histograms',
          'set style histogram clustered gap 1', 'set style fill solid 0.85 border -1',
          'set boxwidth 0.9', 'set datafile missing "?"', 'set key top right',
          'set grid ytics', 'set xtics noenhanced', 'set key noenhanced', 'set yrange [0:*]']
    if logscale:
        gp += ['set logscale y', 'set yrange [*:*]']
    plots = ['"%s" using %d:xtic(1) title columnheader(%d)' % (dat, i + 2, i + 2)
             for i in range(len(cols))]
    gp.append("plot " + ", ".join(plots))
    try:
        subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.stderr.write("report.py: gnuplot failed for %s: %s\n" % (name, e))
        return None
    return os.path.basename(png)


def kv_section(path):
    """The engine sections of an existing BENCHMARKS.md ("## ... (engine)", written by
    kvbench and the engine's space test, not by this harness), kept across runs."""
    if not os.path.exists(path):
        return None
    text = open(path).read()
    keep = []
    for part in ("\n" + text).split("\n## ")[1:]:
        if part.split("\n", 1)[0].rstrip().endswith("(engine)"):
            keep.append("## " + part.rstrip() + "\n")
    return "\n".join(keep) if keep else None


def main():
    raw, docs = sys.argv[1], sys.argv[2]
    res, status, meta = load(raw)
    md = os.path.join(docs, "BENCHMARKS.md")
    kv = kv_section(md)
    out = ["# memwalfs benchmarks", "",
           "Written by `tools/bench/run.sh%s` (do not edit by hand; the sections marked "
           "\"(engine)\" are kept across runs). Raw results: `docs/bench-raw/results.tsv`." % (
               " --quick" if meta.get("MODE") == "quick" else ""), "",
           "- run: %s, %s, %s s in all" % (meta.get("MODE", "?"), meta.get("DATE", "?"),
                                           meta.get("ELAPSED_S", "?")),
           "- machine: %s" % meta.get("HOST", "?"),
           "- server: %s, one Ceph RGW on the same machine, shared by all targets" % meta.get("SERVER", "?"),
           "- ratio columns: memwalfs value / this target's value for the main figure "
           "(check the column's direction: for times and latencies below 1 means memwalfs is faster).",
           "- server requests: peers from RGW's access log (its beast frontend logs one line per request "
           "at debug_rgw 1; each target has its own bucket, so lines are counted per bucket; background "
           "uploads that finish before the next step are included); memwalfs from `memwalfs stats`.",
           "- \"until on server\": s3fs and rclone return before the server holds the data; the harness "
           "polls ListObjectsV2 until the objects and bytes match and reports the extra seconds.",
           "- CPU and peak memory: the filesystem process (/proc/PID/stat utime+stime; VmHWM after "
           "clear_refs), not the server.", "", "## Targets", "",
           "| target | state | notes |", "|---|---|---|"]
    for t in TARGETS + ["s3-raw"]:
        st, text = status.get(t, ("not run", "not selected in this run"))
        out.append("| %s | %s | %s |" % (t, st, text.replace("|", "/")))
    out.append("")
    # Headline: the main figure of each workload per target.
    present = [t for t in TARGETS if any(k[0] == t for k in res)]
    if present:
        out += ["## Headline", "", "Main figure of each workload (median over runs).", "",
                "| workload | unit | " + " | ".join(present) + " |",
                "|---|---|" + "---|" * len(present)]
        for w, title, m, unit, hib, _ in WORKLOADS:
            if any((t, w, m) in res for t in present):
                out.append("| %s | %s %s | %s |" % (title, unit, "(higher better)" if hib else "(lower better)",
                                                    " | ".join(fmt(med(res, t, w, m)) for t in present)))
        out.append("")
    charts = [
        chart(docs, "seq", "Sequential I/O, 1 MiB blocks", "MB/s", res,
              [("seqwrite-1j", "MBps_wall", "write 1 job"), ("seqwrite-4j", "MBps_wall", "write 4 jobs"),
               ("seqread-cold", "MBps", "read cold"), ("seqread-warm", "MBps", "read warm")]),
        chart(docs, "fsync", "4 KiB write + fsync: fsync latency", "ms (log)", res,
              [("fsync-4k", "fsync_p50_ms", "p50"), ("fsync-4k", "fsync_p99_ms", "p99")], True),
        chart(docs, "smallfiles", "Small files (lower is better)", "seconds (log)", res,
              [("tree-cp", "wall_s", "cp -r"), ("tree-cat-cold", "wall_s", "cat all"),
               ("tree-ls-lR", "wall_s", "ls -lR"), ("tree-rm", "wall_s", "rm -r"),
               ("tar-x", "wall_s", "tar -x"), ("git-clone", "wall_s", "git clone")], True),
        chart(docs, "dcreate", "Durable creates (create, 4 KiB, fsync, close)", "files/s (log)", res,
              [("dcreate-1", "files_s", "1 writer"), ("dcreate-32", "files_s", "32 writers")], True),
        chart(docs, "list", "Large directory", "entries/s (log)", res,
              [("list-create", "files_s", "create"), ("list-ls-l", "entries_s", "ls -l cold"),
               ("list-find", "entries_s", "find")], True),
    ]
    charts = [c for c in charts if c]
    if charts:
        out += ["## Charts", ""] + ["![%s](%s)" % (c[6:-4], c) for c in charts] + [""]
    out += ["## Per workload", ""]
    for spec in WORKLOADS:
        workload_table(out, res, status, meta, spec)
    raw_table(out, res, meta)
    out += ["## How to reproduce", "",
            "    tools/bench/run.sh --quick          # a few minutes, small sizes",
            "    tools/bench/run.sh                  # full sizes, at most ~25 minutes on 2 cores",
            "    tools/bench/run.sh --targets s3fs,local --workloads fio,dcreate --runs 3", "",
            "Sizes of this run: " + ", ".join("%s=%s" % (k, meta[k]) for k in
                                             ("SEQ_MB", "RAND_S", "FSYNC_S", "TREE_N", "DC_S", "DC_MAX",
                                              "LIST_N", "LIST_N_S3", "TAR_N", "GIT_N") if k in meta) + ".", ""]
    if kv:
        out += [kv]
    with open(md, "w") as f:
        f.write("\n".join(out).rstrip() + "\n")


if __name__ == "__main__":
    main()
