"""Reads ferrotrace exports back with independent code (the export suite runs it).

  check.py hdr_log FILE   decodes an HdrHistogram interval log with the `hdrhistogram`
                          package; prints one JSON line per tagged histogram:
                          {"tag", "count", "p50", "p90", "p99", "p999", "max"}
  check.py json FILE      parses a JSON summary and checks the documented schema; prints ok
"""
import json
import sys


def hdr_log(path):
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader
    reader = HistogramLogReader(path, HdrHistogram(1, 3600 * 10**9, 3))
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        print(json.dumps({
            "tag": h.get_tag(), "count": h.get_total_count(),
            "p50": h.get_value_at_percentile(50), "p90": h.get_value_at_percentile(90),
            "p99": h.get_value_at_percentile(99), "p999": h.get_value_at_percentile(99.9),
            "max": h.get_max_value()}))


INT = int
OPT_INT = (int, type(None))
SCHEMA = {
    "format": str, "version": int, "id": int, "status": str, "stop_reason": (str, type(None)),
    "started_at": int, "stopped_at": OPT_INT, "elapsed_ms": int, "loops": list,
    "calls": list, "events": dict, "pairing": dict, "memory": dict, "collector_cpu_ns": int,
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
    e = doc["events"]
    if e["seen"] != e["aggregated"] + e["dropped"] + e["sampled_out"] + e["limited"]:
        raise SystemExit("events do not add up")
    print("ok")


if __name__ == "__main__":
    {"hdr_log": hdr_log, "json": json_summary}[sys.argv[1]](sys.argv[2])
