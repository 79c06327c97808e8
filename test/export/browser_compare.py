#!/usr/bin/env python3
"""Loads a comparison's html export (ferrotrace:export({A, B}, html, File)) from disk in
Debian's chromium, headless, and checks it (run by ferrotrace_compare_SUITE; browser.py
has the machinery and checks the single-session page):

  - no console message at all, no network request made by the page;
  - the page's own account of what it drew (body's data-rendered): a table row per
    function, the flame graph's frame and the legend;
  - the differential flame graph holds frames coloured red (more own time in B) and blue
    (less), as inferno colours a differential graph, and the functions' names;
  - the table sorts by a click on a header: in a copy driven over the DevTools pipe, a
    click on each numeric header orders the rows by it (largest first), a second click on
    the same header reverses it;
  - a screenshot that is not blank.

Usage: browser_compare.py FILE --rows N --names a,b [--screenshot OUT.png]
"""
import argparse
import base64
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import chromium, devtools_poll, fail, png_colours, run  # noqa: E402

SORTS = """(function () {
  var t = document.querySelector("table.compare"), out = [];
  if (!document.body.hasAttribute("data-rendered") || !t) return null;
  var ths = t.querySelectorAll("thead th");
  function rows(i) { return Array.prototype.map.call(t.tBodies[0].rows, function (r) { return r.cells[i].getAttribute("data-v"); }); }
  Array.prototype.forEach.call(ths, function (th, i) {
    if (th.getAttribute("data-type") !== "num") return;
    th.click(); var first = rows(i); th.click(); out.push({i: i, desc: first, asc: rows(i)});
  });
  return JSON.stringify(out);
})()"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--names", required=True)
    parser.add_argument("--screenshot")
    args = parser.parse_args()
    browser = chromium()
    work = tempfile.mkdtemp(prefix="ferrotrace-compare-browser-")
    try:
        check(args, browser, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check(args, browser, work):
    url = "file://" + os.path.abspath(args.file)
    dom, console, requests, wall = run(browser, url, work, ["--dump-dom"])
    if console:
        fail("console messages:\n" + "\n".join(console))
    if requests:
        fail("the page made network requests: %r" % requests)
    m = re.search(r'data-rendered="([^"]*)"', dom)
    if not m:
        fail("the page did not say what it drew (no data-rendered)")
    drawn = json.loads(m.group(1).replace("&quot;", '"'))
    if drawn != {"rows": args.rows, "flames": 1, "legend": 1}:
        fail("drawn %r, expected %d rows, a flame graph and a legend" % (drawn, args.rows))
    with open(args.file, encoding="utf-8") as f:
        page = f.read()
    svg = base64.b64decode(re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', page).group(1)).decode()
    fills = re.findall(r'fill="rgb\((\d+),(\d+),(\d+)\)"', svg)
    red = [c for c in fills if int(c[0]) > int(c[2]) + 20]
    blue = [c for c in fills if int(c[2]) > int(c[0]) + 20]
    if not red or not blue:
        fail("the flame graph has no red (%d) or no blue (%d) frame: not a differential graph" % (len(red), len(blue)))
    for name in args.names.split(","):
        if name not in svg:
            fail("the flame graph does not name %s" % name)
    found, console = devtools_poll(browser, url, work, SORTS)
    if console:
        fail("console messages after clicks on the headers:\n" + "\n".join(console))
    if not found:
        fail("the table could not be sorted (no answer from the page)")
    for sort in json.loads(found):
        for order, reverse in (("desc", True), ("asc", False)):
            values = [float(v) if v else None for v in sort[order]]
            known = [v for v in values if v is not None]
            if values[:len(known)] != known or known != sorted(known, reverse=reverse):
                fail("column %d is not in %s order after a click: %r" % (sort["i"], order, values))
    shot = args.screenshot or os.path.join(work, "shot.png")
    run(browser, url, work, ["--screenshot=" + shot, "--window-size=1400,1600"])
    colours = png_colours(shot)
    if colours < 20:
        fail("the screenshot is nearly blank: %d colours" % colours)
    print("compare page: %d rows, %d red and %d blue frames, %d colours, chromium %.1f s"
          % (drawn["rows"], len(red), len(blue), colours, wall))


if __name__ == "__main__":
    main()
