#!/usr/bin/env python3
"""Loads an html export (ferrotrace:export(S, html, File)) from disk in Debian's chromium,
headless, and checks it (run by the export and cluster suites; about 5 to 10 s):

  - no console message at all (uncaught errors, CSP refusals and failed loads print there);
  - no network request made by the page: chromium's own net log (--log-net-log) lists every
    URL request; those the page starts carry its origin as initiator, the browser's own
    (update checks, clock) carry none. A control page that loads an http image is run
    first, to show that this check sees a page's request;
  - the page's own account of what it drew (body's data-rendered, read from --dump-dom):
    a table row per function, and the plots asked for with --expect;
  - a screenshot that is not blank: more than --min-colours distinct colours.

Usage: browser.py FILE --rows N [--views N] [--expect histogram,over_time,flame,activity]
       [--screenshot OUT.png]. Needs Debian's chromium (`make export-tools` installs it).
Prints the render time the page measured and chromium's wall time for the screenshot.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars"]


def fail(msg):
    print("browser check FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def chromium():
    return shutil.which("chromium") or fail("chromium is missing: make export-tools installs it "
                                             "(Debian's chromium package)")


def run(browser, url, work, extra, timeout=120):
    """Runs chromium on url: (stdout, console lines, page requests, wall seconds)."""
    profile = tempfile.mkdtemp(dir=work)
    netlog = os.path.join(work, "net-%d.json" % len(os.listdir(work)))
    size = [] if any(e.startswith("--window-size") for e in extra) else ["--window-size=1400,2000"]
    cmd = ([browser] + FLAGS + ["--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0",
                                "--log-net-log=" + netlog, "--virtual-time-budget=4000"]
           + size + extra + [url])
    started = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        fail("chromium exited %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")[-2000:]))
    console = [l for l in proc.stderr.decode(errors="replace").splitlines() if ":CONSOLE" in l]
    return proc.stdout.decode(errors="replace"), console, page_requests(netlog), wall


def page_requests(netlog):
    """URL requests started by a page (an initiator that is an origin) in a net log."""
    with open(netlog) as f:
        log = json.load(f)
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    found = []
    for event in log["events"]:
        params = event.get("params") or {}
        if types.get(event["type"]) == "URL_REQUEST_START_JOB" and "url" in params:
            if params.get("initiator", "not an origin") != "not an origin":
                found.append((params["initiator"], params["url"]))
    return found


def png_colours(path):
    """Distinct colours of an 8-bit RGB or RGBA, non-interlaced PNG (what chromium writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, ctype, _, _, interlace = header
    if depth != 8 or ctype not in (2, 6) or interlace:
        fail("unexpected PNG format %r" % (header,))
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    prev, colours, i = bytearray(stride), set(), 0
    for _ in range(height):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if ftype == 1: line[x] = (line[x] + a) & 255
            elif ftype == 2: line[x] = (line[x] + b) & 255
            elif ftype == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        colours.update(bytes(line[x:x + 3]) for x in range(0, stride, bpp))
        prev = line
    return len(colours)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--views", type=int, default=1)
    ap.add_argument("--expect", default="histogram,flame")
    ap.add_argument("--min-colours", type=int, default=64)
    ap.add_argument("--screenshot")
    ap.add_argument("--window", default="1280,900", help="the screenshot's size")
    ap.add_argument("--no-control", action="store_true", help="skip the control page (run once already)")
    args = ap.parse_args()
    browser = chromium()
    work = tempfile.mkdtemp(prefix="ferrotrace-browser-")
    try:
        # The control: a page that loads an http image must show up as a page request.
        if not args.no_control:
            control = os.path.join(work, "control.html")
            with open(control, "w") as f:
                f.write('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/control.png"></body></html>')
            _, _, requests, _ = run(browser, "file://" + control, work, ["--dump-dom"])
            if not any("127.0.0.1:9" in url for _, url in requests):
                fail("the control page's http request was not seen in the net log: the network check is blind")

        url = "file://" + os.path.abspath(args.file)
        dom, console, requests, wall_dom = run(browser, url, work, ["--dump-dom"])
        if console:
            fail("console messages:\n" + "\n".join(console))
        if requests:
            fail("the page made network requests: %r" % requests)
        marker = 'data-rendered="'
        at = dom.find(marker)
        if at < 0:
            fail("the page did not finish drawing (no data-rendered on body)")
        rendered = json.loads(dom[at + len(marker):dom.index('"', at + len(marker))].replace("&quot;", '"'))
        if rendered["rows"] != args.rows:
            fail("%d function rows, expected %d" % (rendered["rows"], args.rows))
        if rendered["views"] != args.views:
            fail("%d views, expected %d" % (rendered["views"], args.views))
        for kind in [k for k in args.expect.split(",") if k]:
            if rendered.get(kind, 0) < 1:
                fail("no %s plot drawn: %r" % (kind, rendered))
        shot = args.screenshot or os.path.join(work, "shot.png")
        _, console, requests, wall_shot = run(browser, url, work, ["--screenshot=" + shot, "--window-size=" + args.window])
        if console or requests:
            fail("screenshot run: console %r, requests %r" % (console, requests))
        colours = png_colours(shot)
        if colours <= args.min_colours:
            fail("the screenshot has %d colours, at most %d: blank?" % (colours, args.min_colours))
        size = os.path.getsize(args.file)
        print("html ok: %d bytes, %d rows, %d views, plots %s, drawn in %d ms (its script; %d ms since navigation start), "
              "chromium %.1f s (dump) %.1f s (screenshot), screenshot %d colours"
              % (size, rendered["rows"], rendered["views"],
                 {k: rendered.get(k) for k in ("histogram", "over_time", "activity", "flame")},
                 rendered["ms"], rendered.get("since_navigation", -1), wall_dom, wall_shot, colours))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
