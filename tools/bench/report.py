#!/usr/bin/env python3
"""report.py - turn the harness's raw results into docs/BENCHMARKS.md + charts.

usage: report.py RAWDIR DOCSDIR

RAWDIR holds results.tsv (target, workload, metric, value, unit, run),
status.tsv (target, ran|skipped, text, run) and meta.env, written by run.sh.
Writes DOCSDIR/BENCHMARKS.md and DOCSDIR/bench-*.png (gnuplot, pngcairo; the
plotted numbers go to RAWDIR/*.dat).

Every cell is the median over the runs with the min-max range beside it.
"Share of the raw server": each run of a target is set against the raw
PUT/GET probes taken right before and after it (target "probe", workloads
before-T / after-T: their mean), so the machine's drift during a long run
cancels: throughput as a fraction of the probes' best PUT (writes) or GET
(reads) MB/s, latency as a multiple of the probes' 4 KiB PUT round trip.

Sections of an existing BENCHMARKS.md whose heading ends in "(engine)" (the
engine's own benchmarks) or "(notes)" (hand-written reading of a run) are
carried over unchanged: "(notes)" after the losses, "(engine)" at the end.
The churn section ("... (churn)", chart bench-churn.png) is written from
RAWDIR/churn.*.tsv when the run has them and carried over otherwise;
`report.py --churn-only RAWDIR DOCSDIR` rewrites only that section (run.sh
does so when churn is its only workload).  The same for the regions section
("... (regions)", issue 39's rows) with `--regions-only`.

Latency profiles (run.sh --rtt): a target run with the server MS ms away
(through tools/bench/rttproxy) has results under the name "TARGET@MSms", and
its probes are before-TARGET@MSms / after-TARGET@MSms, so that its share of
the raw server is taken against probes of the same profile.  A name without
"@" is the local server (all results written before profiles existed).
Every table lists a target's profiles side by side; the ratio columns and
"Where memwalfs loses" compare within one profile.  Target "proxy0" holds the
probes straight and through an rttproxy at 0 ms: the proxy's own cost.
"""
import os
import statistics
import subprocess
import sys
from collections import defaultdict

TARGETS = ["memwalfs-s3", "memwalfs-local", "s3fs", "rclone", "bindfs", "local"]
S3_TARGETS = ["memwalfs-s3", "s3fs", "rclone"]
MW = ("memwalfs-s3", "memwalfs-local")
# Suffixes of the latency profiles in this run ("" first: the local server);
# main() sets them and widens the three lists above with every profile.
PROFILES = [""]

# (workload, title, main metric, unit, higher is better, what it measured, share kind)
# share kind: "put" / "get" (fraction of the raw server's best MB/s), "rtt" (multiple
# of the raw 4 KiB PUT round trip, for the metric named after the colon), None.
WORKLOADS = [
    ("jb-write-big", "juicefs bench: big files, write", "MBps_durable", "MB/s", True,
     "4 threads, each writing its own {JB_BIG_MB} MiB file in 1 MiB I/O, fsync at close "
     "(`juicefs bench -p 4` writes 4 x 1 GiB); MB/s = bytes / (wall time + the time until "
     "the server holds it, for s3fs and rclone)", "put"),
    ("jb-read-big", "juicefs bench: big files, read (cold)", "MBps", "MB/s", True,
     "the 4 files read back by 4 threads in 1 MiB I/O after a remount and drop_caches", "get"),
    ("mp-write", "mountpoint-s3 seq_write: 1 job, 256 KiB, fsync at close", "MBps_durable", "MB/s",
     True, "fio rw=write bs=256k, {SEQ_MB} MiB (mountpoint-s3: 10 s time-based), "
     "fsync_on_close; MB/s = bytes / (wall time incl. the close + the time until the server "
     "holds it, for s3fs and rclone)", "put"),
    ("mp-read-1t", "mountpoint-s3 seq_read: 1 thread (cold)", "MBps", "MB/s", True,
     "fio rw=read bs=256k over the {SEQ_MB} MiB file after a remount and drop_caches; one pass, "
     "capped at {MP_S} s (mountpoint-s3: 30 s over a 100 GiB object)", "get"),
    ("mp-read-4t", "mountpoint-s3 seq_read_4t: 4 threads (cold)", "MBps", "MB/s", True,
     "4 jobs, each reading its own {JB_BIG_MB} MiB file (the juicefs bench files), bs=256k, "
     "after a remount and drop_caches", "get"),
    ("mp-read-direct", "mountpoint-s3 seq_read_direct: 1 thread, O_DIRECT (cold)", "MBps", "MB/s",
     True, "as the 1-thread read with direct=1, after a remount and drop_caches", "get"),
    ("mp-read-4t-direct", "mountpoint-s3 seq_read_4t_direct: 4 threads, O_DIRECT (cold)", "MBps",
     "MB/s", True, "as the 4-thread read with direct=1, after a remount and drop_caches", "get"),
    ("mp-read-warm", "Warm read: page cache kept", "MBps", "MB/s", True,
     "the 1-thread read again right after it, fio invalidate=0: what a user's second read sees "
     "(mostly the kernel's page cache, if the filesystem lets it keep pages)", "get"),
    ("mp-read-dcache", "Daemon-cache read: page cache dropped", "MBps", "MB/s", True,
     "the same read once more with fio invalidate=1 (fio drops the file's page cache first): "
     "the filesystem's own cache as the two reads before left it", "get"),
    ("jb-write-small", "juicefs bench: small files, write", "files_s_durable", "files/s", True,
     "4 threads x {JB_SMALL_N} files of 128 KiB, one write each, close, no fsync "
     "(tools/bench/smallfiles.py); files/s until on the server for s3fs and rclone", None),
    ("jb-read-small", "juicefs bench: small files, read (cold)", "files_s", "files/s", True,
     "the same files read after a remount and drop_caches, 4 threads", None),
    ("jb-stat-small", "juicefs bench: small files, stat", "files_s", "files/s", True,
     "stat of each file, 4 threads, right after the read", None),
    ("gs-cp", "GeeseFS small files: cp -r in", "files_s_durable", "files/s", True,
     "cp -r of {GS_FILES} files (0.5-300 KB, {GS_AVG} B on average, {GS_MB} MiB) in "
     "{GS_DIRS} directories from the local disk; s3fs and rclone: the first {GS_FILES_S3} "
     "files ({GS_AVG_S3} B on average) in {GS_DIRS_S3} directories (column \"entries\"); "
     "files/s until on the server for s3fs and rclone", None),
    ("gs-ls-lR", "GeeseFS small files: ls -lR", "entries_s", "entries/s", True,
     "ls -lR of the copy (files + directories per second)", None),
    ("gs-rm", "GeeseFS small files: rm -r", "files_s", "files/s", True, "rm -r of the copy", None),
    ("dcreate-1", "Durable creates, 1 writer", "files_s_durable", "files/s", True,
     "create + write 4 KiB + fsync + close, {DC_S} s or {DC_MAX} files "
     "(tools/bench/durable_creates.c); files/s until on the server (rclone's fsync returns "
     "before its upload: its latency columns are not durable ones)", "rtt:p50_ms"),
    ("dcreate-32", "Durable creates, 32 writers", "files_s_durable", "files/s", True,
     "the same with 32 threads in one directory", "rtt:p50_ms"),
    ("randread-4k", "Random 4 KiB reads", "iops", "IOPS", True,
     "fio randread 4 KiB, 1 job, {RAND_S} s, over a {RAND_MB} MiB file, starting after a remount "
     "and drop_caches", None),
    ("randread-4k-dwarm", "Random 4 KiB reads, disk cache warm", "iops", "IOPS", True,
     "the same again after a remount that keeps what targets cache on local disk (memwalfs' "
     "disk cache, rclone's VFS cache; the kernel's caches dropped)", None),
    ("randwrite-4k", "Random 4 KiB writes", "iops", "IOPS", True,
     "fio randwrite 4 KiB, 1 job, {RAND_S} s, end_fsync=1", None),
    ("fsync-4k", "4 KiB write + fsync (latency)", "fsync_p50_ms", "ms", False,
     "fio write 4 KiB with fsync after each write, {FSYNC_S} s; fsync latency percentiles",
     "rtt:fsync_p50_ms"),
    ("cp-1g", "cp of a {CP_MB} MiB file inside the mount", "s_durable", "s", False,
     "`cp SRC DST && sync DST` of a {CP_MB} MiB file written earlier (fsync at its end) and "
     "cold (a remount in between); seconds until the copy is durable (for rclone: until the "
     "server holds it); run on {CP_TARGETS} only", None),
    ("statbp-idle", "stat of a cold mount, 32 threads, no writer", "cold_p99_ms", "ms", False,
     "tools/bench/stat_backpressure.c on a fresh mount: 32 threads each stat {SBP_FILES} files "
     "of their own directory once (the cold pass: p50/p99/max of those), then force getattrs "
     "(statx AT_STATX_FORCE_SYNC) for {SBP_IDLE_S} s (the hot columns); {SBP_FILES_S3} files "
     "per thread on s3fs and rclone", None),
    ("statbp-write", "stat of a cold mount, 32 threads, while one thread writes", "cold_p99_ms",
     "ms", False,
     "the same on a fresh mount while one thread writes 1 MiB write(2)s without fsync, up to "
     "{SBP_MB} MiB or {SBP_S} s (the stats start once it has written 32 MiB or after 1 s, so a "
     "filesystem with bounded write buffers is already throttling it: memwalfs' "
     "backpressure); issue 13's target: no stat waits for the writer", None),
    # Older workloads (run.sh --workloads tree,list,real).
    ("tree-cp", "Small files: cp -r", "wall_s", "s", False,
     "cp -r of {TREE_N} files ({TREE_MB} MiB: /usr/include padded with 1-64 KiB files)", None),
    ("tree-cat-cold", "Small files: cat all (cold)", "wall_s", "s", False,
     "find -exec cat of every file after a remount and drop_caches", None),
    ("tree-ls-lR", "Small files: ls -lR", "wall_s", "s", False, "ls -lR of the tree", None),
    ("tree-rm", "Small files: rm -r", "wall_s", "s", False, "rm -r of the tree", None),
    ("list-create", "Listing: create the directory", "files_s", "files/s", True,
     "create empty files in one directory ({LIST_N} entries; {LIST_N_S3} on s3fs/rclone)", None),
    ("list-ls-l", "Listing: ls -l (cold)", "entries_s", "entries/s", True,
     "ls -l of that directory after a remount and drop_caches", None),
    ("list-find", "Listing: find", "entries_s", "entries/s", True, "find of it right after", None),
    ("tar-x", "tar -x of a source tarball", "wall_s", "s", False,
     "tar -xzf of {TAR_N} files from /usr/include", None),
    ("git-clone", "git clone of a local repository", "wall_s", "s", False,
     "git clone --no-hardlinks of a 2-commit repository ({GIT_N} files in the clone)", None),
]
SPEC = {s[0]: s for s in WORKLOADS}
MD_PHASES = ["tree-create", "dir-create", "dir-stat", "dir-remove", "file-create", "file-stat",
             "file-read", "file-remove", "tree-remove"]
EXTRA = [("MBps_wall", "MB/s at return"), ("files_s", "files/s at return"), ("MBps", "fio MB/s"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"),
         ("fsync_p99_ms", "fsync p99 ms"), ("max_ms", "max ms"),
         ("entries", "entries"), ("io_MiB", "MiB moved"), ("wall_s", "wall s"),
         ("settle_s", "until on server s"), ("cpu_s", "fs CPU s"), ("peak_mib", "fs peak MiB"),
         ("stored_mib", "stored MiB"), ("growth_MiB", "store growth MiB"),
         ("sent_MiB", "memwalfs sent to store MiB"),
         ("cold_p50_ms", "cold p50 ms"), ("cold_max_ms", "cold max ms"),
         ("hot_n", "hot stats"), ("hot_p50_ms", "hot p50 ms"), ("hot_p99_ms", "hot p99 ms"),
         ("hot_max_ms", "hot max ms"), ("write_MBps", "writer MB/s"),
         ("write_max_ms", "slowest write ms"), ("mw_backpressure_waits", "backpressure waits")]


# ------------------------------------------------------------------ loading

def load(raw):
    res = defaultdict(dict)  # (target, workload, metric) -> {run: value}
    with open(os.path.join(raw, "results.tsv")) as f:
        next(f, None)
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 6:
                continue
            try:
                v = float(p[3])
            except ValueError:
                continue
            res[(p[0], p[1], p[2])][p[5]] = v
    derive_durable(res)
    derive_bytes(res)
    status = defaultdict(list)  # target -> [(run, state, text)]
    path = os.path.join(raw, "status.tsv")
    if os.path.exists(path):
        for line in open(path):
            p = line.rstrip("\n").split("\t")
            if len(p) >= 3:
                status[p[0]].append((p[3] if len(p) > 3 else "1", p[1], p[2]))
    meta = {}
    path = os.path.join(raw, "meta.env")
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if "=" in line:
                k, v = line.split("=", 1)
                meta[k] = v.strip('"')
    return res, status, meta


def derive_durable(res):
    """MBps_durable / files_s_durable: the rate until the data is on the server.
    s3fs and rclone return (rclone: also from fsync) before they upload, and
    memwalfs commits what was not fsynced within its cadence; the harness
    measures the extra time (settle_s: the listing for s3fs and rclone,
    `memwalfs sync` for memwalfs), and these rates count it in.  bindfs and
    local count until the command returns."""
    for (t, w, m), runs in list(res.items()):
        if m not in ("MBps_wall", "files_s"):
            continue
        d = {}
        for run, v in runs.items():
            wall = res.get((t, w, "wall_s"), {}).get(run)
            settle = res.get((t, w, "settle_s"), {}).get(run, 0.0)
            d[run] = v * wall / (wall + settle) if wall and settle else v
        res[(t, w, "MBps_durable" if m == "MBps_wall" else "files_s_durable")] = d


def derive_bytes(res):
    """s_durable (wall_s + settle_s), growth_MiB and sent_MiB (memwalfs:
    store_bytes_sent of `memwalfs stats`) per run."""
    for (t, w, m), runs in list(res.items()):
        if m == "wall_s":
            res[(t, w, "s_durable")] = {
                r: v + res.get((t, w, "settle_s"), {}).get(r, 0.0) for r, v in runs.items()}
        elif m == "growth_B":
            res[(t, w, "growth_MiB")] = {r: v / 1048576 for r, v in runs.items()}
        elif m == "mw_store_bytes_sent":
            res[(t, w, "sent_MiB")] = {r: v / 1048576 for r, v in runs.items()}


def profile_of(name):
    """The latency profile suffix of a target name ("@20ms"), "" for the local server."""
    i = name.find("@")
    return name[i:] if i >= 0 else ""


def profile_ms(sfx):
    try:
        return float(sfx[1:-2]) if sfx else 0.0
    except ValueError:
        return float("inf")


def find_profiles(res, status):
    """The profile suffixes present in the results, "" first, then by round trip."""
    names = {k[0] for k in res} | set(status) | {
        k[1] for k in res if k[0] == "probe"}
    return sorted({profile_of(n) for n in names} | {""}, key=profile_ms)


def widen(targets):
    """TARGETS with each name followed by its other profiles (side by side)."""
    return [t + p for t in targets for p in PROFILES]


def proxy_overhead(meta, res):
    """The header line on rttproxy's own cost at 0 ms, or None: probes straight and
    through the proxy (target proxy0), against the spread of the run's probes of the
    local server."""
    lines = []
    for m, lab in (("put_MBps", "PUT"), ("get_MBps", "GET")):
        d, p = vals(res, "proxy0", "direct", m), vals(res, "proxy0", "proxied", m)
        if not d or not p or not statistics.median(d):
            return None
        x = 100 * (statistics.median(p) / statistics.median(d) - 1)
        allp = [v for k in res if k[0] == "probe" and k[2] == m and not profile_of(k[1])
                for v in res[k].values() if v] + d
        noise = 100 * (max(allp) - min(allp)) / statistics.median(allp)
        lines.append((lab, x, noise))
    rtt = []
    for m, lab in (("put_rtt_ms", "4 KiB PUT"), ("get_rtt_ms", "4 KiB GET")):
        d, p = vals(res, "proxy0", "direct", m), vals(res, "proxy0", "proxied", m)
        if d and p:
            rtt.append("%s %+.2f ms" % (lab, statistics.median(p) - statistics.median(d)))
    return ("proxy overhead at 0 ms: %s%s (MB/s through the proxy against straight, median of "
            "%d probes each, alternating); the run's noise, the min-max of its probes of the "
            "local server over their median: %s; %s" % (
                ", ".join("%s %+.0f%%" % (lab, x) for lab, x, _ in lines),
                "; " + ", ".join(rtt) if rtt else "",
                len(vals(res, "proxy0", "direct", "put_MBps")),
                ", ".join("%s %.0f%%" % (lab, n) for lab, _, n in lines),
                "within the noise" if all(abs(x) <= n for _, x, n in lines)
                else "**beyond the noise**"))


def per_run(res, t, w, num, den, scale=1.0):
    """Per-run NUM / DEN * SCALE of target T, workload W (runs with both)."""
    a, b = res.get((t, w, num), {}), res.get((t, w, den), {})
    return [a[r] / b[r] * scale for r in a if r in b and b[r]]


def vals(res, t, w, m):
    return list(res.get((t, w, m), {}).values())


def med(res, t, w, m):
    v = vals(res, t, w, m)
    return statistics.median(v) if v else None


def fmt(x):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return "%.0f" % x
    if abs(x) >= 100:
        return "%.1f" % x
    if abs(x) >= 1:
        return "%.2f" % x
    if x == 0:
        return "0"
    return "%.3f" % x


def spread(v):
    """median (min-max) of a list of numbers, or "-"."""
    if not v:
        return "-"
    s = fmt(statistics.median(v))
    if len(v) > 1:
        s += " (%s-%s)" % (fmt(min(v)), fmt(max(v)))
    return s


def cell(res, t, w, m):
    return spread(vals(res, t, w, m))


# ------------------------------------------------------- the raw server share

def raw_of(res, t, run, m):
    """Mean of the probes right before and after run RUN of target T for metric M."""
    v = [res.get(("probe", "%s-%s" % (side, t), m), {}).get(run) for side in ("before", "after")]
    v = [x for x in v if x]
    return sum(v) / len(v) if v else None


def shares(res, t, w, m, kind):
    """Per-run shares of the raw server: list of floats."""
    out = []
    if kind is None:
        return out
    if kind.startswith("rtt:"):
        m, pm = kind[4:], "put_rtt_ms"
    else:
        pm = "put_MBps" if kind == "put" else "get_MBps"
    for run, v in res.get((t, w, m), {}).items():
        r = raw_of(res, t, run, pm)
        if r:
            out.append(v / r)
    return out


def share_label(kind):
    if kind is None:
        return None
    if kind.startswith("rtt:"):
        return "%s / raw 4 KiB PUT" % kind[4:].replace("_ms", "").replace("fsync_", "fsync ")
    return "share of raw %s MB/s" % kind.upper()


def share_cell(v, kind):
    if not v:
        return "-"
    if kind.startswith("rtt:"):
        return spread(v) + "x"
    return "%.0f%% (%.0f-%.0f%%)" % (100 * statistics.median(v), 100 * min(v), 100 * max(v)) \
        if len(v) > 1 else "%.0f%%" % (100 * v[0])


# ------------------------------------------------------------------ tables

def requests(res, t, w):
    """Server requests by type: RGW's access log for every bucket target (the
    same method for all); memwalfs also reports its own store counters."""
    parts = []
    for m in ("PUT", "GET", "LIST", "HEAD", "DELETE", "POST"):
        v = med(res, t, w, "req_" + m)
        if v:
            parts.append("%s %d" % (m, v))
    text = ", ".join(parts) if parts else ("0" if (t, w, "req_PUT") in res else "")
    return text or "-"


def ratio(res, mw, t, w, m):
    a, b = med(res, mw, w, m), med(res, t, w, m)
    if a is None or b is None or b == 0 or t == mw:
        return "-"
    return "%.2f" % (a / b)


def fill(text, meta):
    return text.format_map(defaultdict(lambda: "?", meta))


def runs_note(meta):
    n = meta.get("RUNS", "1")
    return "runs: %s%s" % (n, ", cells: median (min-max)" if n != "1" else ", one run: no spread")


def workload_table(out, res, meta, spec):
    w, title, m, unit, hib, what, kind = spec
    targets = [t for t in TARGETS if any(k[0] == t and k[1] == w for k in res)]
    if not targets:
        return
    out.append("### %s\n" % title)
    out.append("Measured: %s. Main figure: %s (%s is better); %s.\n" % (
        fill(what, meta), unit, "higher" if hib else "lower", runs_note(meta)))
    extras = [(k, lab) for k, lab in EXTRA if k != m and any((t, w, k) in res for t in targets)]
    hdr = ["target", "%s (%s)" % (m, unit)]
    if kind:
        hdr.append(share_label(kind))
    hdr += ["memwalfs-s3 / this", "memwalfs-local / this"]
    hdr += [lab for _, lab in extras] + ["server requests", "failed"]
    out.append("| " + " | ".join(hdr) + " |")
    out.append("|" + "---|" * len(hdr))
    for t in targets:
        row = [t, cell(res, t, w, m)]
        if kind:
            row.append(share_cell(shares(res, t, w, m, kind), kind) if t in S3_TARGETS else "n/a")
        p = profile_of(t)
        row += [ratio(res, "memwalfs-s3" + p, t, w, m), ratio(res, "memwalfs-local" + p, t, w, m)]
        row += [cell(res, t, w, k) for k, _ in extras]
        row += [requests(res, t, w), cell(res, t, w, "failed") if (t, w, "failed") in res else ""]
        out.append("| " + " | ".join(row) + " |")
    out.append("")


def md_table(out, res, meta):
    targets = [t for t in TARGETS if any(k[0] == t and k[1].startswith("md-") for k in res)]
    if not targets:
        return
    out.append("### Metadata: mdtest -b 6 -z %s -I 8, 1 and 8 processes\n" % meta.get("MD_Z", "?"))
    out.append(
        "Measured: tools/bench/mdtest_tree.c (how it maps to mdtest: see \"The workloads\"): a tree "
        "of branching 6 and depth %s (depth %s on s3fs and rclone, where every node is a server "
        "PUT), 8 directories and 8 files per node and process; create phases stop after %s s "
        "(%s s on s3fs and rclone; mdtest's stonewall -W) and the stat, read and remove phases work on what was created. "
        "Figures: operations per second (higher is better); %s. JuiceFS publishes, for mdtest "
        "-b 6 -I 8 -z 4 on AWS: 1,410 file creates/s, 5,023 stats/s and 1,417 directory "
        "creates/s against s3fs's 5.7, 69 and 6.0 (their S3 round trips are ~10x ours).\n" % (
            meta.get("MD_Z", "?"), meta.get("MD_Z_S3", "?"), meta.get("MD_W", "?"),
            meta.get("MD_W_S3", meta.get("MD_W", "?")), runs_note(meta)))
    for procs in ("1", "8"):
        phases = [p for p in MD_PHASES if any((t, "md-%s-%s" % (p, procs if not p.startswith("tree")
                                                                   else "1"), "rate") in res
                                              for t in targets)]
        if procs == "8":
            phases = [p for p in phases if not p.startswith("tree")]
        out.append("%s process%s, ops/s:\n" % (procs, "" if procs == "1" else "es"))
        out.append("| target | " + " | ".join(phases) + " | items per phase |")
        out.append("|---|" + "---|" * (len(phases) + 1))
        for t in targets:
            row = [t]
            for p in phases:
                row.append(cell(res, t, "md-%s-%s" % (p, "1" if p.startswith("tree") else procs),
                                "rate"))
            row.append(cell(res, t, "md-file-create-%s" % procs, "items"))
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    mdr = [t for t in targets if (t, "md", "req_PUT") in res]
    if mdr:
        out.append("Server requests of the whole mdtest step (both process counts): " + "; ".join(
            "%s: %s" % (t, requests(res, t, "md")) for t in mdr) + ".\n")


def raw_table(out, res, meta):
    for p in PROFILES:
        raw_table_of(out, res, meta, "s3-raw" + p)


def raw_table_of(out, res, meta, raw):
    ws = sorted({k[1] for k in res if k[0] == raw and k[1].startswith("raw-")},
                key=lambda s: (int(s.split("-")[1][:-1]), s))
    if not ws:
        return
    p = profile_of(raw)
    out.append("### The raw server (no filesystem)%s\n" % (
        ", %s ms away (rttproxy)" % p[1:-2] if p else ""))
    out.append("Measured: PUT then GET of N objects of one size with C connections "
               "(tools/bench/s3raw.sh: one curl --parallel, SigV4, UNSIGNED-PAYLOAD); "
               "MB/s = 10^6 bytes/s; p50 = median request time as curl reports it; %s. The "
               "server shares the 2 cores with the client.\n" % runs_note(meta))
    out.append("| size, connections | PUT MB/s | PUT req/s | PUT p50 ms | GET MB/s | GET req/s | GET p50 ms |")
    out.append("|---|---|---|---|---|---|---|")
    for w in ws:
        out.append("| %s | %s |" % (w[4:], " | ".join(cell(res, raw, w, m) for m in (
            "put_MBps", "put_req_s", "put_p50_ms", "get_MBps", "get_req_s", "get_p50_ms"))))
    out.append("")


def probe_table(out, res, meta):
    keys = [k for k in res if k[0] == "probe" and k[2] == "put_MBps"]
    if not keys:
        return
    out.append("## The raw server beside each target\n")
    out.append(
        "Before and after each target in each run, a short probe (tools/bench/s3raw.sh with %s: "
        "size:objects:connections) measures the server straight with curl: the best PUT and "
        "GET MB/s over the sizes and the median 4 KiB PUT on one connection. Each target's "
        "\"share of the raw server\" uses the mean of its two probes in the same run. The spread "
        "below is the machine's drift over the whole run.\n" % meta.get("PROBE_SPECS", "?"))
    out.append("| target | PUT MB/s | GET MB/s | 4 KiB PUT ms | 4 KiB GET ms | load average |")
    out.append("|---|---|---|---|---|---|")
    for t in TARGETS + widen(["s3-raw"]):
        if ("probe", "before-" + t, "put_MBps") not in res:
            continue
        row = [t]
        for m in ("put_MBps", "get_MBps", "put_rtt_ms", "get_rtt_ms", "load1"):
            v = []
            for run in res.get(("probe", "before-" + t, m), {}):
                r = raw_of(res, t, run, m)
                if r is not None:
                    v.append(r)
            row.append(spread(v))
        out.append("| " + " | ".join(row) + " |")
    for p in PROFILES:
        allv = lambda m: [v for k in res if k[0] == "probe" and k[2] == m and
                          profile_of(k[1]) == p for v in res[k].values()]
        if allv("put_MBps"):
            out.append("| all probes%s | %s | %s | %s | %s | |" % (
                " " + p if p else "", spread(allv("put_MBps")), spread(allv("get_MBps")),
                spread(allv("put_rtt_ms")), spread(allv("get_rtt_ms"))))
    for w in ("direct", "proxied"):
        if ("proxy0", w, "put_MBps") in res:
            out.append("| %s | %s | |" % (
                "straight (proxy check)" if w == "direct" else "through rttproxy at 0 ms",
                " | ".join(cell(res, "proxy0", w, m) for m in
                           ("put_MBps", "get_MBps", "put_rtt_ms", "get_rtt_ms"))))
    out.append("")


# ------------------------------------------------------------ headline + losses

def headline(out, res, meta, present):
    out += ["## Headline", "",
            "Main figure of each workload, median over the runs (the tables below give min-max)." +
            ("" if len(PROFILES) == 1 else " TARGET@MSms: the same target with the server MS ms "
             "away (run.sh --rtt: tools/bench/rttproxy adds MS/2 each way; bandwidth not limited)."),
            "", "| workload | unit | " + " | ".join(present) + " |",
            "|---|---|" + "---|" * len(present)]
    for w, title, m, unit, hib, _, _ in WORKLOADS:
        if any((t, w, m) in res for t in present):
            out.append("| %s | %s %s | %s |" % (title, unit, "(higher better)" if hib else "(lower better)",
                                                " | ".join(fmt(med(res, t, w, m)) for t in present)))
    for p, procs in (("file-create", "1"), ("file-stat", "1"), ("dir-create", "1"),
                     ("file-create", "8"), ("file-stat", "8"), ("dir-create", "8")):
        w = "md-%s-%s" % (p, procs)
        if any((t, w, "rate") in res for t in present):
            out.append("| mdtest %s, %s proc | ops/s (higher better) | %s |" % (
                p, procs, " | ".join(fmt(med(res, t, w, "rate")) for t in present)))
    out.append("")
    rows = [s for s in WORKLOADS if s[6] and any((t, s[0], s[2]) in res for t in S3_TARGETS)]
    if rows:
        s3 = [t for t in S3_TARGETS if t in present]
        out += ["### Share of the raw server", "",
                "Throughput as a fraction of the raw server's best PUT (writes) or GET (reads) MB/s, "
                "latency as a multiple of its 4 KiB PUT round trip, each run against the probes "
                "taken right before and after it%s; median (min-max) over the runs." % (
                    "" if len(PROFILES) == 1 else
                    " (through the same profile's proxy for TARGET@MSms)"), "",
                "| workload | measure | " + " | ".join(s3) + " |", "|---|---|" + "---|" * len(s3)]
        for w, title, m, unit, hib, _, kind in rows:
            out.append("| %s | %s | %s |" % (title, share_label(kind), " | ".join(
                share_cell(shares(res, t, w, m, kind), kind) for t in s3)))
        out.append("")


def losses(out, res):
    """Workloads where a memwalfs target is worse than a peer on the same kind of
    store by more than 10% (median), largest first."""
    pairs = [("memwalfs-s3" + p, ("s3fs" + p, "rclone" + p)) for p in PROFILES]
    pairs.append(("memwalfs-local", ("bindfs",)))
    found = []
    specs = list(WORKLOADS) + [("md-%s-%s" % (p, n), "mdtest %s, %s proc" % (p, n), "rate",
                                "ops/s", True, "", None)
                               for n in ("1", "8") for p in MD_PHASES
                               if not (p.startswith("tree") and n == "8")]
    for w, title, m, unit, hib, _, _ in specs:
        for mw, peers in pairs:
            a = med(res, mw, w, m)
            if a is None or a <= 0:
                continue
            for p in peers:
                b = med(res, p, w, m)
                if b is None or b <= 0:
                    continue
                worse = b / a if hib else a / b
                if worse > 1.1:
                    av, bv = vals(res, mw, w, m), vals(res, p, w, m)
                    overlap = (max(av) >= min(bv)) if hib else (min(av) <= max(bv))
                    found.append((worse, mw, p, w, title, m, unit, a, b, overlap))
    out += ["## Where memwalfs loses", "",
            "Computed from this run: every workload where memwalfs on S3 does worse than s3fs or "
            "rclone, or memwalfs on the local disk worse than bindfs (FUSE alone over the same "
            "disk), by more than 10% (medians); \"overlap\" marks the ones whose min-max ranges "
            "overlap (not a clear loss). Writes count until the data is on the server. The notes "
            "below say why, where we know.", ""]
    if not found:
        out += ["None in this run.", ""]
        return
    out += ["| memwalfs | peer | workload | memwalfs | peer | peer better by | ranges |",
            "|---|---|---|---|---|---|---|"]
    for worse, mw, p, w, title, m, unit, a, b, overlap in sorted(found, key=lambda x: -x[0]):
        out.append("| %s | %s | %s | %s %s | %s %s | %.1fx | %s |" % (
            mw, p, title, fmt(a), unit, fmt(b), unit, worse,
            ("overlap" if overlap else "apart") if len(vals(res, mw, w, m)) > 1 else "one run"))
    out.append("")


# ------------------------------------------------------- bytes to the store

WRITE_ROWS = ["jb-write-big", "mp-write", "jb-write-small", "gs-cp", "dcreate-1", "dcreate-32",
              "randwrite-4k", "fsync-4k", "cp-1g"]
READ_ROWS = ["jb-read-big", "mp-read-1t", "mp-read-4t", "mp-read-direct", "mp-read-4t-direct",
             "mp-read-warm", "mp-read-dcache", "jb-read-small", "randread-4k",
             "randread-4k-dwarm"]


def fetched(res, t, w, per):
    """Bytes fetched from the store per byte read (PER "byte") or per read call
    in KiB (PER "call"): memwalfs' own counter (store_bytes_received), the RGW
    access log's GET bytes for the S3 peers."""
    num = "mw_store_bytes_received" if t in MW else "get_B"
    if t not in MW and t not in S3_TARGETS:
        return []
    if per == "byte":
        return per_run(res, t, w, num, "rbytes")
    if per == "get":
        return per_run(res, t, w, num, "mw_store_requests_get" if t in MW else "req_GET",
                       1 / 1024)
    return per_run(res, t, w, num, "ops", 1 / 1024)


def title_of(w, meta):
    return fill(SPEC[w][1], meta) if w in SPEC else w


def bytes_table(out, res, meta, present):
    rows = []
    for w in WRITE_ROWS:
        rows.append((w, "store bytes sent / byte written",
                     lambda t, w=w: per_run(res, t, w, "mw_store_bytes_sent", "wbytes")
                     if t in MW else []))
        rows.append((w, "store growth / byte written",
                     lambda t, w=w: per_run(res, t, w, "growth_B", "wbytes")))
        if w == "fsync-4k":
            rows.append((w, "store bytes sent per fsync, KiB",
                         lambda t, w=w: per_run(res, t, w, "mw_store_bytes_sent", "ops", 1 / 1024)
                         if t in MW else []))
    for w in READ_ROWS:
        rows.append((w, "fetched / byte read", lambda t, w=w: fetched(res, t, w, "byte")))
        if w in ("randread-4k", "jb-read-small"):
            rows.append((w, "fetched per read call, KiB", lambda t, w=w: fetched(res, t, w, "call")))
            rows.append((w, "fetched per store GET, KiB", lambda t, w=w: fetched(res, t, w, "get")))
    body = []
    for w, label, f in rows:
        cells = [f(t) for t in present]
        if any(cells):
            body.append("| %s | %s | %s |" % (title_of(w, meta), label, " | ".join(
                spread(c) for c in cells)))
    if not body:
        return
    out += ["## Bytes to and from the store", "",
            "Per workload, median (min-max) over the runs. *Store bytes sent*: memwalfs' own "
            "counter `store_bytes_sent` of `memwalfs stats` (every request body it sent: packs, "
            "WAL entries, SSTables, manifests), over the bytes the workload wrote. *Store growth*: "
            "what the bucket (RGW bucket stats) or the backing directory (du) grew by during the "
            "step, before any garbage collection, over the bytes written (s3fs and rclone replace "
            "whole objects: their growth is 0 for an overwrite however much they upload). "
            "*Fetched*: memwalfs' `store_bytes_received`; for s3fs and rclone the bytes RGW's "
            "access log shows it sent in answer to their GETs. Steps that do not fsync (small "
            "files, cp -r) are read when the command returns: memwalfs' last commit may come "
            "after. These counters are the filesystem's or the server's own, not tied to "
            "memwalfs' data layout.", "",
            "| workload | measure | " + " | ".join(present) + " |",
            "|---|---|" + "---|" * len(present)] + body + [""]


def target_cell(v, limit, better_low=True, fmtx=None):
    if not v:
        return "-", "not measured"
    m = statistics.median(v)
    ok = m <= limit if better_low else m >= limit
    return (fmtx or spread)(v), ("met" if ok else "not met")


def issue13_table(out, res, meta):
    """Issue 13's targets as this run measures them."""
    mw, ml = "memwalfs-s3", "memwalfs-local"
    rows = []
    # What an fsync uploads is its commit: the WAL entry and, for a group past
    # the entry's blob budget, the group's pack (pack bytes less flush packs).
    # A MemTable flush that falls into the step writes what earlier workloads
    # wrote (the random writes before it): counted in the row after, not here.
    ops = res.get((mw, "fsync-4k", "ops"), {})
    g, pk, fp = (res.get((mw, "fsync-4k", m), {}) for m in
                 ("mw_group_bytes", "mw_pack_bytes", "mw_flush_pack_bytes"))
    v = [(g[r] + pk.get(r, 0) - fp.get(r, 0)) / ops[r] / 1024 for r in g if ops.get(r)]
    rows.append(("4 KiB write + fsync: uploaded per fsync by its commit, WAL entry and group "
                 "pack (memwalfs-s3)", "<= 16 KiB", *target_cell(v, 16), "KiB"))
    v = per_run(res, mw, "fsync-4k", "mw_store_bytes_sent", "ops", 1 / 1024)
    rows.append(("4 KiB write + fsync: everything uploaded during the step, per fsync "
                 "(memwalfs-s3; includes MemTable flushes of what the workloads before it "
                 "wrote)", "informational", spread(v) if v else "-", "-", "KiB"))
    v = per_run(res, mw, "randwrite-4k", "growth_B", "wbytes")
    rows.append(("random 4 KiB writes: store growth / bytes written (memwalfs-s3, %s MiB file; "
                 "the issue says 1 GiB)" % meta.get("RAND_MB", "?"), "<= 2x",
                 *target_cell(v, 2), "x"))
    a, b = vals(res, ml, "randwrite-4k", "iops"), vals(res, "bindfs", "randwrite-4k", "iops")
    if a and b:
        r = statistics.median(a) / statistics.median(b)
        rows.append(("random 4 KiB writes: memwalfs-local IOPS / bindfs", ">= 0.8",
                     "%.2f (%s / %s)" % (r, spread(a), spread(b)), "met" if r >= 0.8 else "not met",
                     ""))
    v = fetched(res, mw, "randread-4k", "call")
    rows.append(("random 4 KiB reads, cold: fetched per read call, cache hits included "
                 "(memwalfs-s3, %s MiB file)" % meta.get("RAND_MB", "?"), "<= 64 KiB",
                 *target_cell(v, 64), "KiB"))
    v = fetched(res, mw, "randread-4k", "get")
    rows.append(("random 4 KiB reads, cold: fetched per store GET, i.e. per miss (memwalfs-s3; "
                 "issue 15 coalesces a miss into a 1 MiB window on purpose: the aim is the "
                 "row above)", "informational", spread(v) if v else "-", "-", "KiB"))
    v = vals(res, mw, "randread-4k", "iops")
    rows.append(("random 4 KiB reads, cold: IOPS (memwalfs-s3)", ">= 1435 (5x 287)",
                 *target_cell(v, 1435, False), "IOPS"))
    for m, lab in (("cold_p99_ms", "cold pass"), ("hot_p99_ms", "forced getattrs")):
        v = vals(res, mw, "statbp-write", m)
        i = vals(res, mw, "statbp-idle", m)
        rows.append(("stat p99, 32 threads, cold S3 mount, writer under backpressure (%s)" % lab,
                     "no stat waits for the writer", spread(v) if v else "-",
                     "idle: %s" % spread(i) if i else "-", "ms"))
    v = vals(res, mw, "cp-1g", "s_durable")
    rows.append(("cp of a %s MiB file in an S3 mount: time" % meta.get("CP_MB", "?"), "< 1 s",
                 *target_cell(v, 1), "s"))
    v = vals(res, mw, "cp-1g", "sent_MiB")
    rows.append(("cp of a %s MiB file in an S3 mount: uploaded" % meta.get("CP_MB", "?"),
                 "< 1 MiB", *target_cell(v, 1), "MiB"))
    if not any(r[2] != "-" for r in rows):
        return
    out += ["### Issue 13's targets in this run", "",
            "memwalfs on S3 unless said; median (min-max) over the runs; \"uploaded\" is "
            "`store_bytes_sent`, \"fetched\" `store_bytes_received` (see \"Bytes to and from "
            "the store\").", "",
            "| target | aim | this run | state | unit |", "|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s | %s | %s | %s | %s |" % r)
    out.append("")


# ------------------------------------------------------------------ charts

def chart(docs, raw, name, title, ylabel, res, cols, targets=None, logscale=False, value=None,
          ymin=None):
    """Clustered bars with min-max error bars: one cluster per target, one bar
    per (workload, metric).  value(t, w, m) -> list of per-run values."""
    value = value or (lambda t, w, m: vals(res, t, w, m))
    targets = [t for t in (targets or TARGETS) if any(value(t, w, m) for w, m, _ in cols)]
    if not targets:
        return None
    dat = os.path.join(raw, name + ".dat")
    with open(dat, "w") as f:
        f.write("# %s: per target, per series: median min max (? = not measured)\n" % title)
        f.write("target " + " ".join('"%s" lo hi' % lab for _, _, lab in cols) + "\n")
        for t in targets:
            cells = []
            for w, m, _ in cols:
                v = [x for x in value(t, w, m) if not logscale or x > 0]
                cells.append("%g %g %g" % (statistics.median(v), min(v), max(v)) if v else "? ? ?")
            f.write('"%s" %s\n' % (t, " ".join(cells)))
    png = os.path.join(docs, "bench-%s.png" % name)
    gp = ['set terminal pngcairo size 960,480 font "sans,10"',
          'set output "%s"' % png, 'set title "%s (bars: median, whiskers: min-max)"' % title,
          'set ylabel "%s"' % ylabel, 'set style data histograms',
          'set style histogram errorbars gap 1 lw 1', 'set style fill solid 0.85 border -1',
          'set boxwidth 0.9', 'set datafile missing "?"', 'set key top right',
          'set grid ytics', 'set xtics noenhanced', 'set key noenhanced', 'set yrange [0:*]']
    if logscale:
        gp += ['set logscale y', 'set yrange [%s:*]' % (ymin if ymin else "*")]
    plots = ['"%s" using %d:%d:%d:xtic(1) title columnheader(%d)' % (
        dat, 3 * i + 2, 3 * i + 3, 3 * i + 4, 3 * i + 2) for i in range(len(cols))]
    gp.append("plot " + ", ".join(plots))
    try:
        subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.stderr.write("report.py: gnuplot failed for %s: %s\n" % (name, e))
        return None
    return os.path.basename(png)


def charts(docs, raw, res):
    share = lambda t, w, m: shares(res, t, w, m, SPEC[w][6])
    made = [
        chart(docs, raw, "seq", "Sequential I/O (mountpoint-s3, juicefs bench; writes: until on server)",
              "MB/s", res,
              [("jb-write-big", "MBps_durable", "write 4x1MiB"), ("mp-write", "MBps_durable", "write 256k"),
               ("jb-read-big", "MBps", "read 4x1MiB"), ("mp-read-1t", "MBps", "read 1t"),
               ("mp-read-4t", "MBps", "read 4t"), ("mp-read-direct", "MBps", "read O_DIRECT")]),
        chart(docs, raw, "share", "Share of the raw server (same run, probes before and after)",
              "fraction of raw PUT/GET MB/s", res,
              [("jb-write-big", "MBps_durable", "write 4x1MiB"), ("mp-write", "MBps_durable", "write 256k"),
               ("jb-read-big", "MBps", "read 4x1MiB"), ("mp-read-1t", "MBps", "read 1t"),
               ("mp-read-4t", "MBps", "read 4t")], S3_TARGETS, value=share),
        chart(docs, raw, "cache", "Reading a file again: cold, daemon cache, page cache", "MB/s (log)",
              res, [("mp-read-1t", "MBps", "cold"), ("mp-read-dcache", "MBps", "daemon cache"),
                    ("mp-read-warm", "MBps", "page cache kept")], logscale=True),
        chart(docs, raw, "md", "mdtest shape: ops/s", "ops/s (log)", res,
              [("md-file-create-1", "rate", "file create 1p"), ("md-file-stat-1", "rate", "file stat 1p"),
               ("md-dir-create-1", "rate", "dir create 1p"), ("md-file-create-8", "rate", "file create 8p"),
               ("md-file-stat-8", "rate", "file stat 8p"), ("md-dir-create-8", "rate", "dir create 8p")],
              logscale=True),
        chart(docs, raw, "smallfiles", "Small files (GeeseFS set, juicefs bench small files)",
              "files/s (log)", res,
              [("gs-cp", "files_s", "GeeseFS cp -r"), ("gs-rm", "files_s", "GeeseFS rm -r"),
               ("jb-write-small", "files_s", "jb write"), ("jb-read-small", "files_s", "jb read"),
               ("jb-stat-small", "files_s", "jb stat")], logscale=True),
        chart(docs, raw, "dcreate", "Durable creates (create, 4 KiB, fsync, close)", "files/s (log)",
              res, [("dcreate-1", "files_s", "1 writer"), ("dcreate-32", "files_s", "32 writers")],
              logscale=True),
        chart(docs, raw, "fsync", "4 KiB write + fsync: fsync latency", "ms (log)", res,
              [("fsync-4k", "fsync_p50_ms", "p50"), ("fsync-4k", "fsync_p99_ms", "p99")],
              logscale=True),
        chart(docs, raw, "statbp", "stat, 32 threads, cold mount: p99 without and with a writer",
              "ms (log)", res,
              [("statbp-idle", "cold_p99_ms", "cold, idle"), ("statbp-write", "cold_p99_ms",
                                                             "cold, writer"),
               ("statbp-idle", "hot_p99_ms", "getattr, idle"),
               ("statbp-write", "hot_p99_ms", "getattr, writer")], logscale=True),
        chart(docs, raw, "cp", "cp of a big file inside the mount: seconds until durable",
              "s (log)", res, [("cp-1g", "s_durable", "cp + sync")], logscale=True),
        chart(docs, raw, "bytes", "Store bytes sent per byte written (memwalfs' counter)",
              "bytes sent / byte written (log)", res,
              [("mp-write", "x", "seq write"), ("jb-write-big", "x", "4 big files"),
               ("randwrite-4k", "x", "random 4k"), ("fsync-4k", "x", "4k + fsync"),
               ("dcreate-1", "x", "durable create"), ("cp-1g", "x", "cp big file")], list(MW), logscale=True,
              value=lambda t, w, m: per_run(res, t, w, "mw_store_bytes_sent", "wbytes"), ymin=0.1),
    ]
    return [c for c in made if c]


# ------------------------------------------------------------------ churn

def churn_load(raw, only=None):
    """{(target, run): [(t, phase, objects, store_B, live_B, written_B)]} from
    RAWDIR/churn.TARGET.rRUN.tsv (wl_churn's sampler)."""
    series = {}
    for n in sorted(os.listdir(raw)):
        if not (n.startswith("churn.") and n.endswith(".tsv")):
            continue
        t, run = n[len("churn."):-len(".tsv")].rsplit(".r", 1)
        if only is not None and run not in only.get((t, "churn-run", "wall_s"), {}):
            continue  # a leftover of another run
        rows = []
        for line in open(os.path.join(raw, n)):
            p = line.rstrip("\n").split("\t")
            try:
                rows.append((float(p[0]), p[1], int(p[2]), int(p[3]), int(p[4]), int(p[5])))
            except (ValueError, IndexError):
                continue  # a failed listing ("-")
        if rows:
            series[(t, run)] = rows
    return series


def churn_bound(rows, grace):
    """Per churn sample: (t, store_B, allowed_B), allowed = 2 x live bytes + the
    bytes written during the last grace period (the issue-16 target)."""
    out = []
    for i, (t, ph, _, sb, lb, wb) in enumerate(rows):
        if ph != "churn":
            continue
        before = 0
        for u, ph2, _, _, _, w2 in rows[:i + 1]:
            if u <= t - grace and ph2 == "churn":
                before = w2
        out.append((t, sb, 2 * lb + (wb - before)))
    return out


def churn_section(raw, docs, res, meta):
    """The "Space under churn (churn)" section and bench-churn.png, or None
    when this run has no churn samples."""
    series = churn_load(raw, res)
    if not series:
        return None
    mib = 1048576.0
    get = lambda t, run, w, m: res.get((t, w, m), {}).get(run)
    out = ["## Space under churn (churn)", "",
           "Issue 16's target: under a random create/overwrite/delete workload the store holds at "
           "most 2x the live bytes plus what was written during the last GC grace period, and an "
           "emptied filesystem is back near zero (at most %s KiB) within the grace plus two GC "
           "intervals. `tools/bench/churn.py` (seed 1600 + run) for %s s at %s MB/s with at most "
           "%s MiB live, files of 1 KiB - 8 MiB (create, overwrite with O_TRUNC, patch a range "
           "in place, delete); the mount runs with `--gc-grace %s --gc-interval %s` (shorter than "
           "the defaults, 600 s and 60 000 ms, so that a run of minutes spans many grace periods). "
           "Store bytes: the bucket's listing (memwalfs-s3) or the files of the store directory "
           "(memwalfs-local), every %s s; live bytes: the workload's own sum of file sizes (checked "
           "against stat at its end), then the sizes under the emptied directory." % (
               meta.get("CHURN_ZERO_KB", "?"), meta.get("CHURN_S", "?"),
               meta.get("CHURN_MBPS", "?"), meta.get("CHURN_LIVE_MB", "?"),
               meta.get("CHURN_GRACE", "?"), meta.get("CHURN_GC_MS", "?"),
               meta.get("CHURN_SAMPLE_S", "?")), "",
           "| target | run | written GiB | ops | peak live MiB | peak store MiB | worst store / "
           "(2 live + grace writes) | store / live at the end of the churn | emptied: s until "
           "near zero (target) | store at the end |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    try:
        grace = float(meta.get("CHURN_GRACE", "0"))
        target_s = grace + 2 * float(meta.get("CHURN_GC_MS", "0")) / 1000
    except ValueError:
        grace, target_s = 0.0, 0.0
    for (t, run), rows in sorted(series.items()):
        b = churn_bound(rows, grace)
        churn = [r for r in rows if r[1] == "churn"]
        worst = max((sb / al for _, sb, al in b if al > 0), default=0.0)
        last = churn[-1] if churn else None
        drain = get(t, run, "churn-drain", "drain_s")
        failed = get(t, run, "churn-drain", "failed")
        zero = get(t, run, "churn-drain", "zero_B")
        out.append("| %s | %s | %s | %s | %.0f | %.0f | %s | %s | %s | %s |" % (
            t, run, fmt((get(t, run, "churn-run", "written_bytes") or 0) / mib / 1024),
            fmt(get(t, run, "churn-run", "ops")),
            max((r[4] for r in churn), default=0) / mib,
            max((r[3] for r in churn), default=0) / mib,
            "%.2f %s" % (worst, "(met)" if worst <= 1 else "(**missed**)"),
            "%.2f" % (last[3] / last[4]) if last and last[4] else "-",
            "%s (%s)%s" % ("timeout" if failed else fmt(drain), fmt(target_s),
                           "" if failed or drain is None or drain > target_s else " met"),
            "%s KiB" % fmt(zero / 1024) if zero is not None else "-"))
    out.append("")
    png = churn_chart(docs, raw, series, grace)
    if png:
        out += ["![space under churn](%s)" % png, ""]
    return out


def churn_chart(docs, raw, series, grace):
    """bench-churn.png: store, live and allowed bytes over time, one panel per
    target (the first run of each)."""
    targets = sorted({t for t, _ in series})
    dats = []
    for t in targets:
        run = sorted(r for tt, r in series if tt == t)[0]
        rows = series[(t, run)]
        allowed = {tt: al for tt, _, al in churn_bound(rows, grace)}
        dat = os.path.join(raw, "churn-%s.dat" % t)
        with open(dat, "w") as f:
            f.write("# %s run %s: minutes store_MiB live_MiB allowed_MiB (? after the churn)\n" %
                    (t, run))
            for tt, ph, _, sb, lb, _ in rows:
                al = allowed.get(tt)
                f.write("%.3f %.2f %.2f %s\n" % (tt / 60, sb / 1048576, lb / 1048576,
                                                 "%.2f" % (al / 1048576) if al else "?"))
        empty = next((tt / 60 for tt, ph, *_ in rows if ph != "churn"), None)
        dats.append((t, dat, empty))
    png = os.path.join(docs, "bench-churn.png")
    gp = ['set terminal pngcairo size 960,%d font "sans,10"' % (300 * len(dats)),
          'set output "%s"' % png, 'set datafile missing "?"',
          'set multiplot layout %d,1 title "Space under churn: store bytes against live bytes"' %
          len(dats)]
    for t, dat, empty in dats:
        gp += ['set title "%s"' % t, 'set xlabel "minutes"', 'set ylabel "MiB"',
               'set grid', 'set key top left noenhanced', 'set yrange [0:*]', 'unset arrow']
        if empty is not None:
            gp.append('set arrow from %.3f, graph 0 to %.3f, graph 1 nohead dt 3 lc "gray"' %
                      (empty, empty))
        gp.append('plot "%s" using 1:2 with lines lw 2 title "store bytes", '
                  '"" using 1:3 with lines lw 2 title "live bytes", '
                  '"" using 1:4 with lines dt 2 title "target: 2 x live + writes of the last grace"'
                  % dat)
    gp.append("unset multiplot")
    try:
        subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.stderr.write("report.py: gnuplot failed for churn: %s\n" % e)
        return None
    return os.path.basename(png)


# ---------------------------------------------------------------- regions

def regions_section(res, meta):
    """The "Regions: ... (regions)" section (issue 39: N mounts each writing its
    own region, against the raw server with N connections), or None when this
    run has no regions results."""
    ts = sorted({k[0] for k in res if k[1].startswith("regions-")})
    if not ts:
        return None
    ns = sorted({int(k[1].rsplit("-n", 1)[1]) for k in res
                 if k[1].startswith("regions-seq-n") or k[1].startswith("regions-dcreate-n")})
    runs = meta.get("RUNS", "?")
    out = ["## Regions: N mounts, each writing its own region (regions)", "",
           "Written by `%s` (%s, %s; %s run(s); cells: median (min-max) over the runs). "
           "For N = %s: a fresh store, N daemons with their own run directory, machine id and "
           "host name (N machines played by one: only the store is shared), mount K writing "
           "region /dK (made by `memwalfs region create`, taken at its first write, not timed) "
           "and following the others'. Phases, all mounts at once: **durable creates** "
           "(tools/bench/durable_creates.c, 32 writers, %s s or %s files per mount: the "
           "dcreate-32 row's parameters) and **sequential write** (one %s MiB file per mount, "
           "fio bs=256k, fsync at close), each until the last mount's `memwalfs sync` returned. "
           "**Raw**: tools/bench/s3raw.sh with N connections (4 KiB and 4 MiB objects: memwalfs "
           "sends a big file in PUTs of about 4 MiB), right before the mounts, on the same server. "
           "**Follower lag** (tools/bench/regionlag.py, N >= 2, in a third phase of %s s while "
           "every mount runs the durable creates again): every mount writes an fsync'd marker "
           "into its region every %s ms, every other mount stats for it every %s ms; lag = first "
           "seen - the writer's fsync returned (one clock: the mounts share the machine)." % (
               meta.get("CMDLINE", "tools/bench/run.sh --workloads regions"),
               meta.get("DATE", "?"), meta.get("COMMIT", "?"), runs, ", ".join(map(str, ns)),
               meta.get("DC_S", "?"), meta.get("DC_MAX", "?"), meta.get("SEQ_MB", "?"),
               meta.get("REG_LAG_S", "?"), meta.get("REG_LAG_MS", "?"),
               meta.get("REG_POLL_MS", "?")), "",
           "- machine: %s; 1-minute load during the run: %s (other engineers' builds and "
           "tests share the 2 cores); busiest processes: %s" % (
               meta.get("HOST", "?"), meta.get("LOAD", "?"), meta.get("BUSY", "?")),
           "- uptime before: `%s`; after: `%s`" % (meta.get("UPTIME_BEFORE", "?").strip(),
                                                  meta.get("UPTIME_AFTER", "?").strip()),
           "- server: %s" % meta.get("SERVER", "?"), ""]

    def per_n(t, w, m):
        return vals(res, t, w, m)

    def share(t, num_w, num_m, den_w, den_m):
        a, b = res.get((t, num_w, num_m), {}), res.get((t, den_w, den_m), {})
        v = [a[r] / b[r] for r in a if r in b and b[r]]
        return ("%.0f%% (%.0f-%.0f%%)" % (100 * statistics.median(v), 100 * min(v), 100 * max(v))
                if len(v) > 1 else "%.0f%%" % (100 * v[0])) if v else "-"

    def xratio(t, w1, m1, w2, m2):
        """Per run: metric m1 of workload w1 / metric m2 of workload w2."""
        a, b = res.get((t, w1, m1), {}), res.get((t, w2, m2), {})
        return [a[r] / b[r] for r in a if r in b and b[r]]

    def scale(t, w, m, base_w):
        v = xratio(t, w, m, base_w, m)
        return spread(v) + "x" if v else "-"

    out += ["### Throughput against the raw server", "",
            "| target | mounts | durable creates, all mounts (files/s) | x 1 mount | slowest / fastest "
            "mount (files/s) | PUT req/s of the mounts | raw 4 KiB PUT req/s, N conn. | share | "
            "seq. write, all mounts (MB/s) | x 1 mount | raw 4 MiB PUT MB/s, N conn. | share | "
            "load at start |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in ts:
        for n in ns:
            dc, sq = "regions-dcreate-n%d" % n, "regions-seq-n%d" % n
            r4, rb = "regions-raw-4k-c%d" % n, "regions-raw-4096k-c%d" % n
            for r, v in res.get((t, dc, "req_PUT"), {}).items():
                wall = res.get((t, dc, "wall_s"), {}).get(r)
                if wall:
                    res[(t, dc, "put_req_s")][r] = v / wall
            out.append("| %s | %d | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                t, n, cell(res, t, dc, "files_s_durable"),
                scale(t, dc, "files_s_durable", "regions-dcreate-n%d" % ns[0]),
                cell(res, t, dc, "mount_min_files_s"), cell(res, t, dc, "mount_max_files_s"),
                cell(res, t, dc, "put_req_s"), cell(res, t, r4, "put_req_s"),
                share(t, dc, "put_req_s", r4, "put_req_s"),
                cell(res, t, sq, "MBps"), scale(t, sq, "MBps", "regions-seq-n%d" % ns[0]),
                cell(res, t, rb, "put_MBps"), share(t, sq, "MBps", rb, "put_MBps"),
                "%s / %s" % (cell(res, t, dc, "load1"), cell(res, t, sq, "load1"))))
    out += ["", "Durable creates: files/s = all files / the phase's wall time with the sync (a "
            "mount that reached its file limit early counts as if it had kept working: the "
            "figure is the whole phase's); \"PUT req/s of the mounts\" = the server's PUTs for "
            "the bucket during the phase (RGW's log) / its wall time: memwalfs commits groups of "
            "creates, so files/s can exceed it. The share columns set the mounts' PUT rate and "
            "MB/s against the raw server's with as many connections as mounts.", ""]
    verdict = []
    for t in ts:
        n = max(ns)
        v = xratio(t, "regions-seq-n%d" % n, "MBps", "regions-raw-4096k-c%d" % n, "put_MBps")
        if v:
            m = statistics.median(v)
            verdict.append("- %s, %d mounts, sequential write: %.2fx the raw server's %d-connection "
                           "PUT MB/s (issue 39's aim: at least 0.8x): %s." % (
                               t, n, m, n, "reached" if m >= 0.8 else "not reached"))
    out += verdict + ([""] if verdict else [])
    ctl = [n for n in ns if any(k[0] in ts and k[1] == "regions-indep-seq-n%d" % n for k in res)]
    if ctl:
        out += ["### Control: the same N mounts on N stores", "",
                "The same round with every mount on a store of its own (s3://BUCKET/regions-indep"
                "N-K: one region /dK each, made and taken as above; nothing shared, nobody follows "
                "anybody): what this machine and server give N filesystems at once. One store / N "
                "stores near 1 means the regions' sharing (the map, the leases, following the "
                "others' regions) costs nothing more than N separate filesystems.", "",
                "| target | mounts | durable creates, N stores (files/s) | one store / N stores | "
                "seq. write, N stores (MB/s) | one store / N stores |", "|---|---|---|---|---|---|"]
        for t in ts:
            for n in ctl:
                dc, sq = "regions-dcreate-n%d" % n, "regions-seq-n%d" % n
                out.append("| %s | %d | %s | %s | %s | %s |" % (
                    t, n, cell(res, t, "regions-indep-dcreate-n%d" % n, "files_s_durable"),
                    spread(xratio(t, dc, "files_s_durable", "regions-indep-dcreate-n%d" % n,
                                  "files_s_durable")),
                    cell(res, t, "regions-indep-seq-n%d" % n, "MBps"),
                    spread(xratio(t, sq, "MBps", "regions-indep-seq-n%d" % n, "MBps"))))
        out.append("")
    out += ["### Where the time goes", "",
            "CPU seconds over each phase (/proc: the N memwalfs daemons, the server's radosgw and "
            "ceph-osd, every process of the machine), and the machine's busy share: all cores' busy "
            "seconds / (wall x cores). Server requests and the bytes of its GET answers: RGW's "
            "log for the bucket (the followers' GETs are the other mounts' WAL objects).", "",
            "| target | phase | mounts | wall s | memwalfs CPU s | radosgw CPU s | ceph-osd CPU s | "
            "machine busy | server requests | GET MiB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for t in ts:
        for ph, label in (("dcreate", "dcreate"), ("indep-dcreate", "dcreate, N stores"),
                          ("seq", "seq"), ("indep-seq", "seq, N stores"),
                          ("lag", "dcreate + lag markers")):
            for n in ns:
                w = "regions-%s-n%d" % (ph, n)
                if not vals(res, t, w, "wall_s"):
                    continue
                busy = [res[(t, w, "cpu_all_s")][r] / (res[(t, w, "wall_s")][r] * res[(t, w, "cores")][r])
                        for r in res.get((t, w, "cpu_all_s"), {})
                        if res.get((t, w, "wall_s"), {}).get(r) and res.get((t, w, "cores"), {}).get(r)]
                out.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                    t, label, n, cell(res, t, w, "wall_s"), cell(res, t, w, "cpu_mw_s"),
                    cell(res, t, w, "cpu_rgw_s"), cell(res, t, w, "cpu_osd_s"),
                    ("%.0f%%" % (100 * statistics.median(busy))) if busy else "-",
                    requests(res, t, w),
                    spread([v / 1048576 for v in vals(res, t, w, "get_B")])))
    out += ["", "### Follower lag while all write", "",
            "| target | mounts | samples | never seen | p50 ms | p99 ms | max ms | from the create: "
            "p50 / p99 ms | creates meanwhile (files/s) | per pair (writer>observer): p50 / p99 ms |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for t in ts:
        for n in ns:
            w = "regions-lag-n%d" % n
            if not vals(res, t, w, "lag_samples"):
                continue
            pairs = sorted({k[2].split(":")[0] for k in res if k[0] == t and k[1] == w and ":" in k[2]})
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s / %s | %s | %s |" % (
                t, n, "%d" % med(res, t, w, "lag_samples"), "%d" % med(res, t, w, "lag_missing"),
                cell(res, t, w, "lag_p50_ms"), cell(res, t, w, "lag_p99_ms"),
                cell(res, t, w, "lag_max_ms"), cell(res, t, w, "lag_create_p50_ms"),
                cell(res, t, w, "lag_create_p99_ms"),
                cell(res, t, w, "files_s_durable"),
                ", ".join("%s %s / %s" % (p, fmt(med(res, t, w, p + ":p50_ms")),
                                          fmt(med(res, t, w, p + ":p99_ms"))) for p in pairs)))
    out.append("")
    return out


def section_only(raw, docs, suffix, make):
    """--churn-only / --regions-only: replace (or add, before "## Charts") the
    section of DOCSDIR/BENCHMARKS.md whose heading ends in SUFFIX with the one
    make(raw, res, meta) writes, and leave the rest as it is."""
    res, _, meta = load(raw)
    sec = make(raw, res, meta)
    if not sec:
        sys.stderr.write("report.py: no %s results in %s\n" % (suffix, raw))
        return 1
    md = os.path.join(docs, "BENCHMARKS.md")
    text = open(md).read() if os.path.exists(md) else "# memwalfs benchmarks\n"
    parts = ("\n" + text).split("\n## ")
    head, secs = parts[0].lstrip("\n"), ["## " + p.rstrip() + "\n" for p in parts[1:]]
    secs = [p for p in secs if not p.split("\n", 1)[0].rstrip().endswith(suffix)]
    at = next((i for i, p in enumerate(secs) if p.startswith("## Charts")), len(secs))
    secs.insert(at, "\n".join(sec).rstrip() + "\n")
    with open(md, "w") as f:
        f.write(head.rstrip() + "\n\n" + "\n".join(secs).rstrip() + "\n")
    return 0


# ------------------------------------------------------------------ main

def kept_sections(path, suffix):
    """Sections "## ... SUFFIX" of an existing BENCHMARKS.md, carried over."""
    if not os.path.exists(path):
        return []
    text = open(path).read()
    keep = []
    for part in ("\n" + text).split("\n## ")[1:]:
        if part.split("\n", 1)[0].rstrip().endswith(suffix):
            keep.append("## " + part.rstrip() + "\n")
    return keep


WORKLOAD_DOC = """## The workloads

Each is shaped like a benchmark a peer publishes, so that our figures can be set beside theirs
(on their hardware and S3, not ours: compare ratios, not absolute numbers).

- **mountpoint-s3's fio jobs** (`mountpoint-s3/scripts/fio/`): `seq_read` (1 thread),
  `seq_read_4t` (4 jobs, each its own file), their `_direct` variants (O_DIRECT) and `seq_write`
  (1 job, fsync at close), all with 256 KiB blocks and ioengine=sync. Theirs run 30 s (reads) or
  10 s (writes) time-based over 100 GiB objects; ours make one pass over a {SEQ_MB} MiB file
  (4 x {JB_BIG_MB} MiB for 4 threads), capped at {MP_S} s, because a time-based run over a file
  that fits in memory rereads it from the page cache after the first pass. Every read is cold:
  a remount (the daemon's caches empty) and drop_caches first.
- **Warm read vs daemon-cache read**: right after the cold 1-thread read, the same read with
  the page cache kept (fio invalidate=0: what a user's second read sees) and once more with fio
  dropping the file's pages first (invalidate=1: the daemon's own cache, as left by the two reads
  before). The two are different figures and are labelled so.
- **`juicefs bench -p 4`**: 4 threads write then (cold) read 4 big files in 1 MiB I/O
  ({JB_BIG_MB} MiB each instead of 1 GiB, to fit the time), then 4 x {JB_SMALL_N} small files of 128 KiB written, read (cold) and stat'ed
  (tools/bench/smallfiles.py). Big-file writers fsync at close: juicefs' close uploads, and
  every target here is asked for the same durability. Small files are closed without fsync,
  as juicefs bench does: for memwalfs and rclone that is not yet durable when close returns
  (memwalfs commits within its 100 ms cadence; rclone uploads in the background: see "until on
  server").
- **mdtest `-b 6 -z 4 -I 8`** (tools/bench/mdtest_tree.c; mdtest itself is not in Debian):
  mdtest's phases in mdtest's order. *Tree creation*: one process makes the tree, nodes
  numbered breadth first and named `mdtest_tree.N` as mdtest does (1,555 nodes at depth 4).
  Then, with 1 and then 8 processes sharing the tree (mdtest without `-u`; fork()ed processes
  meeting at a barrier between phases instead of MPI ranks): *directory creation* (each process
  makes `dir.mdtest.RANK.I`, I = 0..7, in every node), *directory stat*, *directory removal*,
  *file creation* (`file.mdtest.RANK.I`: creat + close, 0 bytes, mdtest without `-w`), *file stat*,
  *file read* (open, read of 0 bytes, close: mdtest without `-e`), *file removal*; finally *tree
  removal*. A phase's rate is its items over the time from the barrier that starts it until the
  last process ends it, as mdtest computes it. Create phases stop after {MD_W} s ({MD_W_S3} s on
  s3fs and rclone; mdtest's stonewall `-W`) and the later phases handle what was created. Not done: mdtest's rename phase
  and its repeated iterations (`-i`); the 8 processes are one machine's, not 8 clients.
  On s3fs and rclone the tree is depth {MD_Z_S3} ({MD_Z_S3} levels: a node costs server PUTs
  and LISTs there, and depth 4 alone would take minutes per run).
- **GeeseFS's small-file set**: {GS_FILES} files of 0.5-300 KB ({GS_AVG} B on average,
  lognormal sizes with a fixed seed) in {GS_DIRS} directories, `cp -r` in and `rm -r`
  (plus an `ls -lR` between them). On s3fs and rclone, where each file is a PUT (and a DELETE),
  the first {GS_FILES_S3} files in {GS_DIRS_S3} directories: the whole set would take ~4
  minutes per run on s3fs. The tables give files per second, which compare across the two
  sizes (the per-file cost dominates on every target).
- **Durable creates** (tools/bench/durable_creates.c): create, write 4 KiB, fsync, close, with 1
  and 32 threads: the workload group commit is for.
- **Random 4 KiB I/O and fsync latency**: fio randread and randwrite over a {RAND_MB} MiB file,
  {RAND_S} s each; 4 KiB writes with fsync after each for {FSYNC_S} s.
- **cp of a big file** (issue 13's target): a {CP_MB} MiB file written with fio (fsync at the
  end), a remount, then `cp SRC DST && sync DST` timed until the copy is durable; the store's
  growth and, for memwalfs, the bytes sent to the store (`store_bytes_sent`). On {CP_TARGETS}
  only.
- **stat under a busy writer** (tools/bench/stat_backpressure.c, issue 13's target): 32
  directories of {SBP_FILES} empty files ({SBP_FILES_S3} on s3fs and rclone); on a fresh mount
  32 threads stat each file of their directory once (cold: the filesystem answers each lookup
  from its store), then force getattrs with statx(AT_STATX_FORCE_SYNC); once without a writer
  and once, on another fresh mount, while one thread writes 1 MiB blocks without fsync (up to
  {SBP_MB} MiB or {SBP_S} s; on memwalfs the stats start only once the engine holds the writer
  back, and the engine's backpressure waits over the run are recorded). A filesystem that holds
  one lock across a store request or a backpressure wait shows it in these p99s.
- **Bytes to and from the store**: every writing step records the bytes it wrote and every
  reading step the bytes and calls it read; the report divides memwalfs' own store counters
  (`store_bytes_sent`, `store_bytes_received` of `memwalfs stats`), the store's growth (RGW
  bucket stats or du of the backing directory) and RGW's GET bytes by them. None of it depends
  on how memwalfs lays out file data.

Sizes were shrunk from the peers' own to fit 45 minutes; where this was checked, the check is in
"Sizes and their stability (notes)".
"""


def main():
    global WORKLOADS, SPEC, PROFILES, TARGETS, S3_TARGETS, MW
    if len(sys.argv) == 4 and sys.argv[1] == "--churn-only":
        sys.exit(section_only(sys.argv[2], sys.argv[3], "(churn)",
                              lambda raw, res, meta: churn_section(raw, sys.argv[3], res, meta)))
    if len(sys.argv) == 4 and sys.argv[1] == "--regions-only":
        sys.exit(section_only(sys.argv[2], sys.argv[3], "(regions)",
                              lambda raw, res, meta: regions_section(res, meta)))
    raw, docs = sys.argv[1], sys.argv[2]
    res, status, meta = load(raw)
    PROFILES = find_profiles(res, status)
    TARGETS, S3_TARGETS, MW = widen(TARGETS), widen(S3_TARGETS), tuple(widen(MW))
    overhead = proxy_overhead(meta, res)
    WORKLOADS = [(s[0], fill(s[1], meta)) + tuple(s[2:]) for s in WORKLOADS]
    SPEC = {s[0]: s for s in WORKLOADS}
    md = os.path.join(docs, "BENCHMARKS.md")
    engine = kept_sections(md, "(engine)")
    notes = kept_sections(md, "(notes)")
    churn = kept_sections(md, "(churn)")
    regions = kept_sections(md, "(regions)")
    quick = meta.get("MODE") == "quick"
    elapsed = meta.get("RUNS_S")
    out = ["# memwalfs benchmarks", "",
           "Written by `tools/bench/run.sh%s` (do not edit by hand: sections whose heading ends in "
           "\"(notes)\" or \"(engine)\" are kept across runs). Raw results: "
           "`docs/bench-raw/results.tsv`; chart data: `docs/bench-raw/*.dat`." % (
               " --quick" if quick else ""), "",
           "- run: %s, %s runs, %s; the runs took %s s (%s min), %s s in all with build and setup" % (
               meta.get("MODE", "?"), meta.get("RUNS", "?"), meta.get("DATE", "?"), elapsed,
               "%.1f" % (int(elapsed) / 60) if elapsed and elapsed.isdigit() else "?",
               meta.get("ELAPSED_S", "?")),
           "- memwalfs: %s (release build of that commit, from `git archive`)" % meta.get("COMMIT", "?"),
           ] + (["- rerun: %s" % meta["RERUN"]] if meta.get("RERUN") else []) + [
           "- machine: %s, shared with other work during the run: 1-minute load average %s; "
           "busiest processes (mean %%CPU of one core, sampled every 30 s): %s" % (
               meta.get("HOST", "?"), meta.get("LOAD", "?"), meta.get("BUSY", "?")),
           "- uptime before: `%s`; after: `%s`" % (meta.get("UPTIME_BEFORE", "?").strip(),
                                                  meta.get("UPTIME_AFTER", "?").strip()),
           "- server: %s, one Ceph RGW (one OSD) on the same machine, used by this harness only" %
           meta.get("SERVER", "?"),
           ] + (["- latency profiles: the local server%s (run.sh --rtt %s: tools/bench/rttproxy "
                 "in front of the server for the S3 targets and the probes, half of it each way, "
                 "a new connection one round trip more for the handshake; bandwidth not limited)"
                 % ("".join(", %s ms away (TARGET%s)" % (p[1:-2], p) for p in PROFILES if p),
                    ",".join(meta.get("RTTS", "0").split()))]
                if len(PROFILES) > 1 else []) + (
               ["- " + overhead] if overhead else []) + [
           "- order: run 1 does every target, then run 2, then run 3; a raw-server probe sits "
           "between every two targets.",
           "- ratio columns: memwalfs value / this target's value for the main figure (check the "
           "direction: for times and latencies below 1 means memwalfs is faster).",
           "- server requests: RGW's access log, counted per bucket (each target and run has its "
           "own), the same method for every target.",
           "- \"until on server\": s3fs and rclone return before the server holds the data; the harness "
           "polls ListObjectsV2 until the objects and bytes match and reports the extra seconds; "
           "for memwalfs it is the time of `memwalfs sync` after each writing step (what was not "
           "fsynced is committed within memwalfs' 100 ms cadence). Rates \"durable\" count it in.",
           "- CPU and peak memory: the filesystem process (/proc/PID/stat utime+stime; VmHWM after "
           "clear_refs), not the server.", "", "## Targets", "",
           "| target | state | notes |", "|---|---|---|"]
    for t in TARGETS + widen(["s3-raw"]):
        st = status.get(t)
        if not st and profile_of(t):
            continue
        if not st:
            out.append("| %s | not run | not selected in this run |" % t)
            continue
        states = sorted({s for _, s, _ in st})
        skipped = ["run %s: %s" % (r, x) for r, s, x in st if s != "ran"]
        text = st[0][2] if not skipped else "; ".join(skipped)
        out.append("| %s | %s | %s |" % (t, "/".join(states) + (" (%d runs)" % len(st)),
                                         text.replace("|", "/")))
    out.append("")
    present = [t for t in TARGETS if any(k[0] == t for k in res)]
    if present:
        headline(out, res, meta, present)
        issue13_table(out, res, meta)
    losses(out, res)
    out += notes
    out += churn_section(raw, docs, res, meta) or churn
    out += regions_section(res, meta) or regions
    made = charts(docs, raw, res)
    if made:
        out += ["## Charts", ""] + ["![%s](%s)" % (c[6:-4], c) for c in made] + [""]
    out += [fill(WORKLOAD_DOC, meta)]
    probe_table(out, res, meta)
    if present:
        bytes_table(out, res, meta, present)
    out += ["## Per workload", ""]
    for spec in WORKLOADS:
        workload_table(out, res, meta, spec)
    md_table(out, res, meta)
    raw_table(out, res, meta)
    out += ["## How to reproduce", "",
            "    tools/bench/run.sh --quick          # one run, small sizes (aim: 5 minutes on 2 cores)",
            "    tools/bench/run.sh                  # full sizes, 3 runs (aim: 45 minutes on 2 cores)",
            "    tools/bench/run.sh --targets s3fs,local --workloads md,gs --runs 3",
            "    tools/bench/run.sh --targets s3fs --workloads gs --set GS_FILES_S3=800  # a size check",
            "    tools/bench/run.sh --rtt 0,20       # each run twice: the local server, then 20 ms away",
            "    tools/bench/run.sh --targets memwalfs-s3 --workloads regions --runs 3  # issue 39's rows: "
            "their section only",
            "",
            "The server is started by run.sh (its own Ceph RGW on port 7680 under "
            "/var/tmp/memwalfs-bench-rgw) unless S3_ENDPOINT names one.", "",
            "Sizes of this run: " + ", ".join(
                "%s=%s" % (k, meta[k]) for k in (
                    "SEQ_MB", "JB_BIG_MB", "MP_S", "JB_SMALL_N", "RAND_MB", "RAND_S", "FSYNC_S",
                    "MD_Z", "MD_Z_S3", "MD_W", "MD_W_S3", "GS_FILES", "GS_DIRS", "GS_FILES_S3", "GS_DIRS_S3",
                    "DC_S", "DC_MAX", "CP_MB", "SBP_FILES", "SBP_FILES_S3", "SBP_IDLE_S", "SBP_S",
                    "SBP_MB")
                if k in meta) + ".", ""]
    out += engine
    with open(md, "w") as f:
        f.write("\n".join(out).rstrip() + "\n")


if __name__ == "__main__":
    main()
