#!/usr/bin/env python3
"""Loads an html export (ferrotrace:export(S, html, File)) from disk in Debian's chromium,
headless, and checks it (run by the export and cluster suites; about 7 to 15 s a page):

  - no console message at all (uncaught errors, CSP refusals and failed loads print there);
  - no network request made by the page: chromium's own net log (--log-net-log) lists every
    URL request; those the page starts carry its origin as initiator, the browser's own
    (update checks, clock) carry none. A control page that loads an http image is run
    first, to show that this check sees a page's request;
  - the page's own account of what it drew (body's data-rendered, read from --dump-dom):
    a table row per function, and the plots asked for with --expect; with --full, no panel
    drawn empty (no "no recorder", no "no percentiles over time"...: the page's .note.empty)
    and no legend left with a placeholder ("-", "--") for a value;
  - a screenshot that is not blank: more than --min-colours distinct colours;
  - the flame graph zooms: a copy of the page whose flame graphs carry a probe script
    (appended to inferno's SVG) clicks a frame in each, inside the page's own sandboxed
    blob: frame, and reports back to the page (postMessage) that inferno zoomed it (the
    frame as wide as the graph, "Reset Zoom" shown) with no error; no console message either;
  - the function table sorts by any column: in the same copy, a click on each column's header
    orders the first view's rows by it (numbers largest first, names A to Z, functions with
    no figure last), and a second click on COUNT reverses it.

Usage: browser.py FILE --rows N [--views N] [--expect histogram,over_time,flame,activity]
       [--full] [--screenshot OUT.png]. Needs Debian's chromium (`make export-tools` installs it).
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


# Appended to each flame graph's SVG: tells the page it loaded; on the page's answer (a
# message, not a timer: frames of hidden tabs get their timers throttled), clicks the first
# frame that is not the root and reports what inferno's script made of it.
ZOOM_PROBE = """<script type="text/ecmascript"><![CDATA[
window.addEventListener("error", function (e) { parent.postMessage({error: String(e.message)}, "*"); });
window.addEventListener("load", function () { parent.postMessage({loaded: true}, "*"); });
window.addEventListener("message", function () {
  var frames = document.querySelectorAll("#frames > g"), target = null, r = {};
  for (var i = 0; i < frames.length && !target; i++)
    if (frames[i].querySelector("title").textContent.indexOf("all (") !== 0) target = frames[i];
  if (!target) { parent.postMessage({error: "no frame to click"}, "*"); return; }
  target.querySelector("rect").dispatchEvent(new MouseEvent("click", {bubbles: true}));
  r.width = target.querySelector("rect").getAttribute("width");
  r.reset_shown = !document.getElementById("unzoom").classList.contains("hide");
  parent.postMessage(r, "*");
});
]]></script>"""

LISTENER = ('<script>var probes = []; window.addEventListener("message", function (e) {'
            ' if (e.data && e.data.loaded) { e.source.postMessage("click", "*"); return; } probes.push(e.data);'
            ' document.body.setAttribute("data-probes", JSON.stringify(probes)); });</script>')


def zoom_check(browser, path, work, expected):
    """Clicks a frame of each flame graph in a probed copy of the page (see the docstring)."""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    start = page.index('<script type="application/json" id="ferrotrace-data">')
    start = page.index(">", start) + 1
    end = page.index("</script>", start)
    data = json.loads(page[start:end])
    for view in data["views"]:
        if view.get("flame"):
            at = view["flame"].rindex("</svg>")
            view["flame"] = view["flame"][:at] + ZOOM_PROBE + view["flame"][at:]
    body = json.dumps(data).replace("</", "<\\/").replace("<!--", "\\u003c!--")
    # The listener first in the body: a frame may load while the page's own script still runs.
    at = page.index("<body>") + len("<body>")
    probed = page[:at] + LISTENER + page[at:start] + body + page[end:]
    copy = os.path.join(work, "zoom.html")
    with open(copy, "w", encoding="utf-8") as f:
        f.write(probed)
    # The frames' scripts run in their own process, which --virtual-time-budget does not wait
    # for: the copy is driven over the DevTools pipe instead, polled until every graph reported.
    wait = ("(function () { var b = document.body, p = b && b.getAttribute('data-probes') || '[]';"
            " if (!(b && b.hasAttribute('data-rendered') && JSON.parse(p).length >= %d)) return null;"
            " return JSON.stringify({probes: JSON.parse(p), sorts: %s()}); })()" % (expected, SORT_CLICKS))
    found, console = devtools_poll(browser, "file://" + copy, work, wait)
    if console:
        fail("console messages after clicks on the flame graph and the table:\n" + "\n".join(console))
    found = json.loads(found) if found else {"probes": [], "sorts": []}
    check_sorts(data["views"][0]["functions"], found["sorts"])
    probes, sorts = found["probes"], found["sorts"]
    if len(probes) != expected or any("error" in p or not p["reset_shown"] or not p["width"].startswith("100")
                                      for p in probes):
        fail("the flame graph did not zoom on a click (%d graphs): %r" % (expected, probes))
    return probes, sorts


# Clicks each header of the first function table, then COUNT twice: each time the header's
# key, whether it sorts largest first, and the rows' function names in order.
SORT_CLICKS = """(function () {
  var table = document.querySelector("table.functions"), sorts = [];
  if (!table) return sorts;
  var ths = table.querySelectorAll("thead th");
  function click(th) {
    th.click();
    sorts.push({key: th.getAttribute("data-key"), desc: th.classList.contains("desc"),
                names: Array.prototype.map.call(table.querySelectorAll("tbody tr.fn"), function (tr) { return tr.firstChild.textContent; })});
  }
  Array.prototype.forEach.call(ths, click);
  click(ths[1]);
  click(ths[1]);
  return sorts;
})"""


def check_sorts(functions, sorts):
    """Each click's rows are ordered by its column (see SORT_CLICKS)."""
    if not functions:
        return
    by_name = {f["mfa"]: f for f in functions}
    if len(sorts) < 3 or sorts[-2]["key"] != "count" or not sorts[-2]["desc"] or sorts[-1]["desc"]:
        fail("the function table's headers did not sort as clicked: %r" % [(s["key"], s["desc"]) for s in sorts])
    for sort in sorts:
        if sorted(sort["names"]) != sorted(by_name):
            fail("sorted by %s, the rows are not the functions: %r" % (sort["key"], sort["names"][:5]))
        values = [by_name[n][sort["key"]] for n in sort["names"]]
        known = [v for v in values if v is not None]
        if values[:len(known)] != known or known != sorted(known, reverse=sort["desc"]):
            fail("the rows are not in %s order of %s: %r" % ("descending" if sort["desc"] else "ascending",
                                                              sort["key"], values[:20]))


def devtools_poll(browser, url, work, expression, deadline_s=60):
    """Opens url in chromium driven over --remote-debugging-pipe (fds 3 and 4, messages ending
    in NUL) and evaluates expression every 100 ms until it is truthy or deadline_s passes:
    (its value or None, the console lines chromium logged)."""
    to_chromium, from_us = os.pipe()
    to_us, from_chromium = os.pipe()

    def fds():
        os.dup2(to_chromium, 3)
        os.dup2(from_chromium, 4)
    log = open(os.path.join(work, "devtools-stderr.txt"), "w+b")   # a file: a full pipe would stall chromium
    proc = subprocess.Popen([browser] + FLAGS + ["--user-data-dir=" + tempfile.mkdtemp(dir=work), "--enable-logging=stderr",
                                                 "--v=0", "--remote-debugging-pipe", "about:blank"],
                            preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=log)
    os.close(to_chromium)
    os.close(from_chromium)
    state = {"id": 0, "buf": b""}

    def call(method, params=None, session=None):
        state["id"] += 1
        message = {"id": state["id"], "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(from_us, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" in state["buf"]:
                raw, state["buf"] = state["buf"].split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == state["id"]:
                    return reply.get("result", {})
            chunk = os.read(to_us, 1 << 16)
            if not chunk:
                fail("chromium closed its DevTools pipe")
            state["buf"] += chunk
    value = None
    try:
        page = [t for t in call("Target.getTargets")["targetInfos"] if t["type"] == "page"][0]["targetId"]
        session = call("Target.attachToTarget", {"targetId": page, "flatten": True})["sessionId"]
        call("Page.navigate", {"url": url}, session)
        end = time.monotonic() + deadline_s
        while not value and time.monotonic() < end:
            time.sleep(0.1)
            value = call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                         session).get("result", {}).get("value")
        # No wait for its reply: chromium may close the pipe first.
        os.write(from_us, json.dumps({"id": state["id"] + 1, "method": "Browser.close", "params": {}}).encode() + b"\0")
    finally:
        os.close(from_us)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(to_us)
        log.seek(0)
        err = log.read()
        log.close()
    return value, [l for l in err.decode(errors="replace").splitlines() if ":CONSOLE" in l]


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
    ap.add_argument("--full", action="store_true",
                    help="no panel drawn empty, no legend placeholder (a default calls/2 session)")
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
        if args.full and (rendered.get("empty", ["(not counted)"]) or rendered.get("placeholders", 1)):
            fail("panels drawn empty %r, %r legend values left as placeholders"
                 % (rendered.get("empty"), rendered.get("placeholders")))
        zoomed, sorts = zoom_check(browser, args.file, work, rendered.get("flame", 0))
        shot = args.screenshot or os.path.join(work, "shot.png")
        _, console, requests, wall_shot = run(browser, url, work, ["--screenshot=" + shot, "--window-size=" + args.window])
        if console or requests:
            fail("screenshot run: console %r, requests %r" % (console, requests))
        colours = png_colours(shot)
        if colours <= args.min_colours:
            fail("the screenshot has %d colours, at most %d: blank?" % (colours, args.min_colours))
        size = os.path.getsize(args.file)
        print("html ok: %d bytes, %d rows, %d views, plots %s, empty panels %r, legend placeholders %r, drawn in %d ms (its script; %d ms since navigation start), "
              "chromium %.1f s (dump) %.1f s (screenshot), screenshot %d colours, %d flame graphs zoomed on a click, %d header clicks sorted"
              % (size, rendered["rows"], rendered["views"],
                 {k: rendered.get(k) for k in ("histogram", "over_time", "activity", "flame")},
                 rendered.get("empty"), rendered.get("placeholders"),
                 rendered["ms"], rendered.get("since_navigation", -1), wall_dom, wall_shot, colours, len(zoomed), len(sorts)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
