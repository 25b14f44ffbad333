#!/usr/bin/python3
"""tests/fs/metrics_check.py STATS BEFORE AFTER [REQUIRE_GET] - check two scrapes of a memwalfs
metrics endpoint with the Prometheus client's own parser of the text format:

- both parse; every family has a known type and HELP; every line of `memwalfs stats` (file
  STATS) is a metric (NAME, NAME_total, or memwalfs_store_requests_total{op=}; a region's
  line region.RID.FIELD memwalfs_region_FIELD{region="RID"} and the like, docs/METRICS.md);
- the families the daemon promises are there with their types (docs/METRICS.md);
- counters never go down from BEFORE to AFTER, and the workload made the ones it must grow;
- every histogram has increasing bounds, cumulative buckets that never decrease, a +Inf bucket
  equal to _count, and a _sum; commit, fsync and store put histograms counted observations
  (and store get ones, with REQUIRE_GET).
Exits 1 with FAIL lines on the first problems, else prints a summary."""
import sys
from prometheus_client.parser import text_string_to_metric_families

fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL: " + msg)


def parse(path):
    text = open(path).read()
    fams = {}
    for f in text_string_to_metric_families(text):
        fams[f.name] = f
    return fams


def samples(fams):
    out = {}
    for f in fams.values():
        for s in f.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


stats_path, before_path, after_path = sys.argv[1:4]
require_get = len(sys.argv) > 4 and sys.argv[4] == "get"
before, after = parse(before_path), parse(after_path)
sb, sa = samples(before), samples(after)
names = {k[0] for k in sa}

for f in after.values():
    if f.type not in ("counter", "gauge", "histogram"):
        fail("%s has type %s" % (f.name, f.type))
    if not f.documentation:
        fail("%s has no HELP" % f.name)

for line in open(stats_path):
    parts = line.split()
    if len(parts) != 2:
        continue
    n = parts[0]
    if n.startswith("region."):  # region.<rid>.<field>: a sample labelled region="<rid>"
        _, rid, field = n.split(".", 2)
        if field == "path":
            ok = ("memwalfs_region_info", (("path", parts[1]), ("region", rid))) in sa
        elif field.startswith("store_requests_"):
            ok = ("memwalfs_region_store_requests_total",
                  (("op", field[len("store_requests_"):]), ("region", rid))) in sa
        else:
            ok = any((m, (("region", rid),)) in sa
                     for m in ("memwalfs_region_" + field, "memwalfs_region_" + field + "_total"))
        if not ok:
            fail("stats line %s has no metric" % n)
        continue
    if n.startswith("store_requests_"):
        key = ("memwalfs_store_requests_total", (("op", n[len("store_requests_"):]),))
        if key not in sa:
            fail("stats line %s has no metric" % n)
        continue
    if not ({"memwalfs_" + n, "memwalfs_" + n + "_total"} & names):
        fail("stats line %s has no metric" % n)

want = {
    "memwalfs_info": "gauge", "memwalfs_serving": "gauge",
    "memwalfs_open_progress_entries": "gauge",
    "memwalfs_puts": "counter", "memwalfs_groups_committed": "counter",
    "memwalfs_store_requests": "counter", "memwalfs_blob_cache_hits": "counter",
    "memwalfs_blob_cache_misses": "counter", "memwalfs_blob_cache_hit_ratio": "gauge",
    "memwalfs_block_cache_hit_ratio": "gauge", "memwalfs_pending_bytes": "gauge",
    "memwalfs_replay_entries": "gauge", "memwalfs_follower_lag_entries": "gauge",
    "memwalfs_commit_duration_seconds": "histogram",
    "memwalfs_fsync_duration_seconds": "histogram",
    "memwalfs_store_request_duration_seconds": "histogram",
}
for n, t in want.items():
    if n not in after:
        fail("no family %s (families: %s)" % (n, " ".join(sorted(after))))
    elif after[n].type != t:
        fail("%s is a %s, not a %s" % (n, after[n].type, t))

for f in after.values():
    if f.type != "counter":
        continue
    for s in f.samples:
        key = (s.name, tuple(sorted(s.labels.items())))
        if key in sb and s.value < sb[key]:
            fail("counter %s%s went down: %s -> %s" % (s.name, s.labels, sb[key], s.value))
for n, labels in [("memwalfs_puts_total", ()), ("memwalfs_groups_committed_total", ()),
                  ("memwalfs_store_requests_total", (("op", "put"),)),
                  ("memwalfs_fsync_duration_seconds_count", ()),
                  ("memwalfs_commit_duration_seconds_count", ())]:
    k = (n, labels)
    if sa.get(k, 0) <= sb.get(k, 0):
        fail("%s%s did not grow: %s -> %s" % (n, dict(labels), sb.get(k), sa.get(k)))

nh = 0
for f in after.values():
    if f.type != "histogram":
        continue
    series = {}
    for s in f.samples:
        base = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        series.setdefault(base, {"buckets": [], "sum": None, "count": None})
        if s.name.endswith("_bucket"):
            series[base]["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_sum"):
            series[base]["sum"] = s.value
        elif s.name.endswith("_count"):
            series[base]["count"] = s.value
    for base, h in series.items():
        nh += 1
        b = h["buckets"]
        les = [x[0] for x in b]
        if les != sorted(les) or len(set(les)) != len(les) or les[-1] != float("inf"):
            fail("%s%s: bounds not increasing to +Inf: %s" % (f.name, base, les))
        if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
            fail("%s%s: buckets not cumulative: %s" % (f.name, base, b))
        if h["count"] is None or h["sum"] is None or b[-1][1] != h["count"]:
            fail("%s%s: +Inf %s != count %s (sum %s)" % (f.name, base, b[-1][1], h["count"], h["sum"]))
        if h["count"] and h["sum"] < 0:
            fail("%s%s: negative sum" % (f.name, base))
must = [("memwalfs_commit_duration_seconds_count", ()), ("memwalfs_fsync_duration_seconds_count", ()),
        ("memwalfs_store_request_duration_seconds_count", (("op", "put"),))]
if require_get:
    must.append(("memwalfs_store_request_duration_seconds_count", (("op", "get"),)))
for k in must:
    if not sa.get(k):
        fail("%s%s counted nothing" % (k[0], dict(k[1])))
if fails:
    sys.exit(1)
print("   ok: %d families, %d samples, %d histogram series; puts %d -> %d, fsyncs %d, commits %d, store puts %d, gets %d"
      % (len(after), len(sa), nh, sb.get(("memwalfs_puts_total", ()), 0), sa[("memwalfs_puts_total", ())],
         sa[("memwalfs_fsync_duration_seconds_count", ())], sa[("memwalfs_commit_duration_seconds_count", ())],
         sa[("memwalfs_store_request_duration_seconds_count", (("op", "put"),))],
         sa.get(("memwalfs_store_request_duration_seconds_count", (("op", "get"),)), 0)))
