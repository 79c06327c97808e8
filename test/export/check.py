"""Reads ferrotrace exports back with independent code (the export suite runs it).

  check.py hdr_log FILE   decodes an HdrHistogram interval log with the `hdrhistogram`
                          package; prints one JSON line per tagged histogram:
                          {"tag", "count", "p50", "p90", "p99", "p999", "max", "start_ms",
                          "end_ms"} (interval start and end, ms since the epoch)
  check.py hdr_sum FILE...  adds the histograms of the same tag over several logs (one per
                          node) and prints "tag count p50 p90 p99 p999 max" per tag
  check.py json FILE      parses a JSON summary and checks the documented schema; prints ok
  check.py chrome_trace FILE  validates a Chrome trace (the trace-event format's JSON Object
                          Format, with the `jsonschema` package) and that complete events nest
                          per thread as the viewers need; prints one JSON line per name
                          {"name", "spans", "duration_ns", "open"} and one per thread
                          {"thread", "spans"}
"""
import json
import math
import sys


def at(h, percentile):
    """The value at `percentile`, by the rank rule of ferrotrace's hdrhistogram crate: the
    first value whose cumulative count reaches ceil(q * total) (the Python package rounds the
    rank instead, which differs on small counts). Values come from the package's own
    decoding and iteration."""
    total = h.get_total_count()
    target = max(1, math.ceil(percentile / 100.0 * total))
    seen = 0
    for item in h.get_recorded_iterator():
        seen += item.count_at_value_iterated_to
        if seen >= target:
            return h.get_highest_equivalent_value(item.value_iterated_to)
    return h.get_max_value()


def new_histogram():
    """An empty histogram of ferrotrace's range (1 ns to an hour) and precision (2
    significant digits, as each histogram's header says): the log reader decodes every
    histogram into one like it."""
    from hdrh.histogram import HdrHistogram
    return HdrHistogram(1, 3600 * 10**9, 2)


def read_all(path):
    """The histograms of an interval log, in order."""
    from hdrh.log import HistogramLogReader
    reader = HistogramLogReader(path, new_histogram())
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            return
        yield h


def hdr_log(path):
    for h in read_all(path):
        print(json.dumps({
            "tag": h.get_tag(), "count": h.get_total_count(),
            "p50": at(h, 50), "p90": at(h, 90), "p99": at(h, 99), "p999": at(h, 99.9),
            "max": h.get_max_value(), "start_ms": round(h.get_start_time_stamp()),
            "end_ms": round(h.get_end_time_stamp())}))


def hdr_sum(*paths):
    sums = {}
    for path in paths:
        for h in read_all(path):
            sums.setdefault(h.get_tag(), new_histogram()).add(h)
    for tag, h in sorted(sums.items()):
        print(tag, h.get_total_count(), *(at(h, p) for p in (50, 90, 99, 99.9)),
              h.get_max_value())


INT = int
OPT_INT = (int, type(None))
SCHEMA = {
    "format": str, "version": int, "id": int, "status": str, "stop_reason": (str, type(None)),
    "started_at": int, "stopped_at": OPT_INT, "elapsed_ms": int, "loops": list,
    "calls": list, "events": dict, "pairing": dict, "memory": dict, "collector_cpu_ns": int,
    "stacks": dict, "backlog": dict,
}
CALL = {"mfa": str, "count": INT, "returns": INT, "exceptions": INT, "total": INT,
        "mean": OPT_INT, "p50": OPT_INT, "p90": OPT_INT, "p99": OPT_INT, "p999": OPT_INT,
        "max": OPT_INT}
EVENTS = {"seen": INT, "aggregated": INT, "dropped": INT, "sampled_out": INT, "limited": INT}


def check(obj, schema, where):
    for key, kind in schema.items():
        if key not in obj:
            raise SystemExit(f"{where}: missing {key}")
        if isinstance(obj[key], bool) or not isinstance(obj[key], kind):
            raise SystemExit(f"{where}.{key}: {obj[key]!r} is not {kind}")


def json_summary(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    check(doc, SCHEMA, "summary")
    if doc["format"] != "ferrotrace.summary" or doc["version"] != 1:
        raise SystemExit("format/version")
    for i, call in enumerate(doc["calls"]):
        check(call, CALL, f"calls[{i}]")
        if ":" not in call["mfa"] or "/" not in call["mfa"]:
            raise SystemExit(f"calls[{i}].mfa: {call['mfa']!r} is not m:f/a")
    check(doc["events"], EVENTS, "events")
    check(doc["stacks"], {"paths": INT, "overflow": INT, "too_deep": INT}, "stacks")
    check(doc["backlog"], {"ring_peak": INT, "ring_size": INT, "longest_gap_us": INT}, "backlog")
    if doc["backlog"]["ring_peak"] > doc["backlog"]["ring_size"]:
        raise SystemExit("backlog: a ring held more than its size")
    e = doc["events"]
    if e["seen"] != e["aggregated"] + e["dropped"] + e["sampled_out"] + e["limited"]:
        raise SystemExit("events do not add up")
    print("ok")


# The trace-event format (Google's "Trace Event Format" document): the JSON Object Format,
# the fields of the event phases ferrotrace writes (X complete, B begin, M metadata).
NUM = {"type": "number"}
TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "otherData": {"type": "object"},
        "traceEvents": {"type": "array", "items": {
            "type": "object",
            "required": ["ph", "name", "pid", "tid"],
            "properties": {"ph": {"type": "string", "minLength": 1}, "name": {"type": "string"},
                           "cat": {"type": "string"}, "pid": {"type": "integer"},
                           "tid": {"type": "integer"}, "ts": NUM, "dur": NUM,
                           "args": {"type": "object"}},
            "allOf": [
                {"if": {"properties": {"ph": {"const": "X"}}},
                 "then": {"required": ["ts", "dur"],
                          "properties": {"dur": {"type": "number", "minimum": 0}}}},
                {"if": {"properties": {"ph": {"enum": ["B", "E"]}}}, "then": {"required": ["ts"]}},
                {"if": {"properties": {"ph": {"const": "M"}}},
                 "then": {"properties": {
                     "name": {"enum": ["process_name", "thread_name", "process_sort_index",
                                       "thread_sort_index", "process_labels"]},
                     "args": {"type": "object", "required": ["name"]}}}},
                {"properties": {"ph": {"enum": ["X", "B", "E", "M", "i", "I", "C"]}}},
            ]}},
    },
}


def chrome_trace(path):
    import jsonschema
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    jsonschema.validate(doc, TRACE_SCHEMA)
    events = doc["traceEvents"]
    names = {}
    threads = {}
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                    if e["ph"] == "M" and e["name"] == "thread_name"}
    process_names = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    for e in events:
        if e["ph"] in ("X", "B"):
            key = (e["pid"], e["tid"])
            if key not in thread_names or e["pid"] not in process_names:
                raise SystemExit(f"no thread_name/process_name for {key}")
            n = names.setdefault(e["name"], {"name": e["name"], "spans": 0, "duration_ns": 0, "open": 0})
            if e["ph"] == "X":
                n["spans"] += 1
                n["duration_ns"] += e["args"]["duration_ns"]
                threads.setdefault(key, []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
            else:
                n["open"] += 1
    # Complete events on one thread must nest (a callee within its caller) or follow.
    for key, spans in threads.items():
        stack = []
        for start, end, name in sorted(spans, key=lambda s: (s[0], -(s[1] - s[0]))):
            while stack and stack[-1][1] <= start and not (stack[-1][0] == start == end):
                stack.pop()
            if stack and end > stack[-1][1]:
                raise SystemExit(f"{key}: {name} [{start}, {end}] overlaps {stack[-1]}")
            stack.append((start, end, name))
    for n in sorted(names.values(), key=lambda n: n["name"]):
        print(json.dumps(n))
    for key, spans in sorted(threads.items()):
        print(json.dumps({"thread": thread_names[key], "spans": len(spans)}))


if __name__ == "__main__":
    {"hdr_log": hdr_log, "hdr_sum": hdr_sum, "json": json_summary, "chrome_trace": chrome_trace}[sys.argv[1]](*sys.argv[2:])
