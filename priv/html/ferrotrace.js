// The ferrotrace html export's page: reads the session's data (JSON in #ferrotrace-data,
// written by ferrotrace_html.erl) and lays it out. Plots are drawn by uPlot (vendored
// beside this file, MIT); the flame graph is inferno's SVG, shown in a frame from a blob:
// URL so that its own script (zoom, search) runs. Nothing is fetched: the page's
// Content-Security-Policy allows no connection at all.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("ferrotrace-data").textContent);
  var app = document.getElementById("app");
  var started = performance.now();
  var plots = { histogram: 0, over_time: 0, activity: 0 };

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "cls") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }

  // Nanoseconds as the report writes them: 3 significant figures and a unit.
  function ns(v) {
    if (v === null || v === undefined) return "-";
    var units = [[1e9, "s"], [1e6, "ms"], [1e3, "us"]];
    for (var i = 0; i < units.length; i++) {
      if (v >= units[i][0]) return digits(v / units[i][0]) + " " + units[i][1];
    }
    return Math.round(v) + " ns";
  }
  function digits(x) { return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2); }
  function num(v) { return v === null || v === undefined ? "-" : String(v); }
  function section(title, children, id) {
    return el("section", id ? { id: id } : {}, [el("h2", { text: title })].concat(children));
  }
  function pre(text, cls) { return el("pre", { text: text, cls: cls || "" }); }

  // A uPlot chart in `box`, as wide as the box. `at`: the index of the point whose values
  // the legend shows until the pointer moves over the plot (and again when it leaves):
  // figures, not uPlot's "--" placeholders.
  function chart(box, kind, opts, series, at) {
    var width = Math.max(320, Math.floor(box.getBoundingClientRect().width) - 8);
    opts.width = width;
    opts.height = opts.height || 220;
    var showing = false;
    function show(u) {
      if (at === undefined || at === null || at < 0 || showing) return;
      var x = u.valToPos(series[0][at], "x");
      var y = u.valToPos(series[1][at], "y");
      if (isFinite(x) && isFinite(y)) { showing = true; u.setCursor({ left: x, top: y }); showing = false; }
    }
    opts.hooks = { setCursor: [function (u) { if (u.cursor.idx === null || u.cursor.idx === undefined) show(u); }] };
    var u = new uPlot(opts, series, box);
    u.root.classList.add("plot-" + kind);
    setTimeout(function () { show(u); }, 0);   // once drawn (uPlot draws in a microtask)
    return u;
  }

  // A y axis as wide as its longest tick label (uPlot's fixed 50 px let "15,000" run under
  // the axis label).
  function labelsWidth(u, values) {
    var n = 1;
    (values || []).forEach(function (v) { if (v !== null && v !== undefined) n = Math.max(n, String(v).length); });
    return 24 + 8 * n;
  }

  // Power-of-two buckets [[low, count]] as bars, every power from one below the first to one
  // above the last (zeros included), as the text report's quantize does. `what`: the plot's
  // title and what it counts (calls; a series: wakeups, collections, messages...).
  function distribution(box, kind, buckets, unit, what) {
    if (!buckets.length) { box.appendChild(el("p", { cls: "note empty", text: "no completed call" })); return; }
    var counts = {};
    buckets.forEach(function (b) { counts[b[0]] = b[1]; });
    var lows = [];
    for (var low = Math.max(1, Math.floor(buckets[0][0] / 2)); low <= buckets[buckets.length - 1][0] * 2; low *= 2) lows.push(low);
    var xs = lows.map(function (_, i) { return i; });
    var ys = lows.map(function (l) { return counts[l] || 0; });
    var label = function (l) { return unit === "ns" ? ns(l) : String(l); };
    var step = Math.ceil(xs.length / 8);   // at most 8 labels under the bars
    chart(box, kind, {
      title: what.title + ", power-of-two buckets",
      scales: { x: { time: false, range: [-0.5, xs.length - 0.5] } },
      axes: [{ values: function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) && lows[v] !== undefined ? label(lows[v]) : ""; }); },
               splits: function () { return xs.filter(function (x) { return x % step === 0; }); }, size: 40 },
             { label: what.counted, size: labelsWidth }],
      series: [{ label: unit, value: function (u, v) { return v === null ? "-" : label(lows[v]) + " .. " + label(lows[v] * 2 - 1); } },
               { label: what.counted, fill: "rgba(204, 85, 0, 0.6)", stroke: "#c50", paths: uPlot.paths.bars({ size: [0.8, 60] }), points: { show: false } }],
      legend: { show: true }
    }, [xs, ys], ys.indexOf(Math.max.apply(null, ys)));   // the legend at the mode
    plots[kind === "activity" ? "activity" : "histogram"]++;
  }

  // p50, p90 and p99 per interval: [[offsetMs, p50, p90, p99]], log scale.
  function overTime(box, times, intervalMs) {
    if (!times.length) {
      box.appendChild(el("p", { cls: "note empty", text: intervalMs === null
        ? "no percentiles over time: start the session with intervals => Ms"
        : "no call returned in an interval yet" }));
      return;
    }
    var cols = [0, 1, 2, 3].map(function (i) { return times.map(function (t) { return i === 0 ? t[0] / 1000 : Math.max(1, t[i]); }); });
    chart(box, "over_time", {
      title: "p50, p90, p99 per " + intervalMs + " ms (log scale)",
      scales: { x: { time: false },   // y: whole decades, so that the lowest line has a label under it
                y: { distr: 3, range: function (u, min, max) { return uPlot.rangeLog(min, max, 10, true); } } },
      axes: [{ label: "s from the start" }, { values: function (u, vals) { return vals.map(function (v) { return v === null ? "" : ns(v); }); }, size: labelsWidth,
                                               space: 15 }],   // 15 px apart: 1, 2, 5 of each decade labelled where they fit (uPlot's 30: the decades only)
      series: [{ label: "s", value: function (u, v) { return v === null ? "-" : v.toFixed(1) + " s"; } },
               { label: "p50", stroke: "#2a7", width: 2, value: function (u, v) { return ns(v); } },
               { label: "p90", stroke: "#e90", width: 2, value: function (u, v) { return ns(v); } },
               { label: "p99", stroke: "#c22", width: 2, value: function (u, v) { return ns(v); } }]
    }, cols, times.length - 1);   // the legend at the last interval
    plots.over_time++;
  }

  var COLUMNS = [["FUNCTION", "mfa", "name"], ["COUNT", "count", "count"], ["EXC", "exceptions", "count"],
                 ["MEAN", "mean", "time"], ["P50", "p50", "time"], ["P90", "p90", "time"], ["P99", "p99", "time"],
                 ["P99.9", "p999", "time"], ["MAX", "max", "time"], ["TOTAL", "total", "time"], ["OWN", "own", "time"]];

  function functionTable(view, details) {
    var fns = view.functions;
    var state = { key: "total", desc: true };
    var body = el("tbody");
    var head = el("tr", {}, COLUMNS.map(function (c) {
      var th = el("th", { text: c[0], title: "sort by " + c[0], "data-key": c[1], cls: c[2] === "name" ? "" : "num" });
      th.addEventListener("click", function () {
        state = { key: c[1], desc: state.key === c[1] ? !state.desc : c[2] !== "name" };
        fill();
      });
      return th;
    }));
    function fill() {
      var k = state.key, sign = state.desc ? -1 : 1;
      var rows = fns.slice().sort(function (a, b) {
        var x = a[k], y = b[k];
        if (x === y) return 0;
        if (x === null) return 1;           // no figure (counted only): last either way
        if (y === null) return -1;
        return (x < y ? -1 : 1) * sign;
      });
      Array.prototype.forEach.call(head.children, function (th) {
        th.classList.toggle("sorted", th.getAttribute("data-key") === k);
        th.classList.toggle("desc", th.getAttribute("data-key") === k && state.desc);
      });
      var frag = document.createDocumentFragment();
      rows.forEach(function (f) {
        var tr = el("tr", { cls: "fn" }, COLUMNS.map(function (c) {
          var v = f[c[1]];
          return el("td", { text: c[2] === "name" ? v : c[2] === "time" ? ns(v) : num(v), cls: c[2] === "name" ? "name" : "num" });
        }));
        tr.addEventListener("click", function () { details(f); });
        frag.appendChild(tr);
      });
      body.textContent = "";
      body.appendChild(frag);
    }
    fill();
    return el("div", { cls: "scroll" }, [el("table", { cls: "functions" }, [el("thead", {}, [head]), body])]);
  }

  function slowTable(f) {
    if (!f.slow.length) return el("p", { cls: "note empty", text: "no slow call kept (slowest => N keeps N per function)" });
    // Arguments and results where the session copied them (args => true), else no columns.
    var copied = f.slow.some(function (s) { return s.args !== null; });
    var heads = ["DURATION", "STARTED", "PROCESS"].concat(copied ? ["ARGUMENTS", "RESULT"] : []);
    return el("div", {}, [
      el("h3", { text: "slowest calls (" + f.slow.length + " of " + f.slow_kept + " kept)" }),
      el("table", { cls: "slow" }, [
        el("thead", {}, [el("tr", {}, heads.map(function (h) { return el("th", { text: h }); }))]),
        el("tbody", {}, f.slow.map(function (s) {
          return el("tr", {}, [el("td", { text: ns(s.duration), cls: "num" }), el("td", { text: s.at }),
                               el("td", { text: s.pid })].concat(copied ? [el("td", { text: s.args === null ? "-" : s.args, cls: "term" }),
                                                                            el("td", { text: s.result, cls: "term" })] : []));
        }))]),
      copied ? null : el("p", { cls: "note", text: "arguments and results: a session with args => true copies them" })]);
  }

  // inferno's script keeps the zoom and search in the URL (history.replaceState with
  // "?x=..&y=.."), which a blob: document of a sandboxed frame refuses with a SecurityError:
  // each click would end in an uncaught error. This script, run before inferno's, makes
  // replaceState there a no-op when it is refused (the zoom itself is drawn before it).
  var FLAME_GUARD = '<script type="text/ecmascript"><![CDATA[(function (r) { history.replaceState = function () { ' +
                    'try { return r.apply(history, arguments); } catch (e) { return undefined; } }; })(history.replaceState);]]><\/script>';

  function flame(view) {
    if (!view.flame) return [el("p", { cls: "note empty", text: view.flame_note })];
    var m = /<svg[^>]*\sheight="(\d+)"/.exec(view.flame);
    var frame = el("iframe", { cls: "flame", title: "flame graph", sandbox: "allow-scripts" });
    // A deep graph scrolls inside its frame: at most 80% of the window high.
    frame.style.height = Math.min((m ? +m[1] : 400) + 20, Math.max(400, Math.round(window.innerHeight * 0.8))) + "px";
    var at = view.flame.indexOf("<script");
    var svg = at < 0 ? view.flame : view.flame.slice(0, at) + FLAME_GUARD + view.flame.slice(at);
    frame.src = URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" }));
    return [el("p", { cls: "note", text: "click a frame to zoom, Ctrl-F to search; widths are own time (the time in a function less the traced calls it made). " + view.flame_note }), frame];
  }

  function renderView(view, box) {
    var facts = el("table", { cls: "facts" }, view.facts.map(function (f) {
      return el("tr", {}, [el("th", { text: f[0] }), el("td", { text: f[1] })]);
    }));
    var detailBox = el("div", { cls: "details" });
    function details(f) {
      detailBox.textContent = "";
      var hist = el("div", { cls: "plot" }), time = el("div", { cls: "plot" });
      detailBox.appendChild(el("h3", { text: f.mfa, cls: "fname" }));
      detailBox.appendChild(el("div", { cls: "plots" }, [hist, time]));
      detailBox.appendChild(slowTable(f));
      distribution(hist, "histogram", f.buckets, "ns", { title: "latency", counted: "calls" });
      overTime(time, f.times, view.interval_ms);
    }
    box.appendChild(section("Functions (" + view.functions.length + "; click a column to sort, a row for its plots)",
                            view.functions.length ? [functionTable(view, function (f) { details(f); detailBox.scrollIntoView(); })]
                                                  : [el("p", { cls: "note", text: "no traced function" })]));
    if (view.functions.length) {
      box.appendChild(section("Function", [detailBox]));
      details(view.functions[0]);
    }
    // The report's header (what the session traced, its notes) folded away under its facts.
    var lines = view.header.split("\n").filter(function (l) { return l.trim() !== ""; }).length;
    box.appendChild(section("Session", [facts, el("details", { cls: "notes" },
      [el("summary", { text: "the report's header and notes (" + lines + " lines)" }), pre(view.header, "header")])]));
    box.appendChild(section("Flame graph", flame(view)));
    box.appendChild(section("Flight recorder", view.recent
      ? [el("p", { cls: "note", text: "the last " + Math.min(200, view.recent.total) + " of " + view.recent.total + " events recorded" }), pre(view.recent.text)]
      : [el("p", { cls: "note empty", text: "no recorder: start the session with recent => N" })]));
    if (view.trees) {
      box.appendChild(section("Call trees", [el("p", { cls: "note", text: "the slowest kept tree of each root function (trees => #{slower_than => Ns})" }), pre(view.trees)]));
    }
    if (view.activity || view.series.length) {
      var series = el("div", { cls: "plots" });
      box.appendChild(section("Process activity", [series, view.activity ? pre(view.activity)
        : el("p", { cls: "note", text: "the nodes' distributions added; their counts and top processes are in each node's tab" })]));
      // Every box first, then the plots: each is as wide as its box once all are laid out.
      view.series.map(function () {
        var b = el("div", { cls: "plot" });
        series.appendChild(b);
        return b;
      }).forEach(function (b, i) {
        var s = view.series[i];
        distribution(b, "activity", s.buckets, s.unit, { title: s.name, counted: s.counted });
      });
    }
  }

  app.appendChild(el("h1", { text: "ferrotrace session" + (data.views.length > 1 ? ": a cluster (merged, then each node)" : "") }));
  var tabs = el("nav", { cls: "tabs" });
  if (data.views.length > 1) app.appendChild(tabs);
  var boxes = data.views.map(function (view, i) {
    var box = el("div", { cls: "view", "data-view": view.name });
    app.appendChild(box);
    var tab = el("button", { text: view.name });
    tab.addEventListener("click", function () {
      boxes.forEach(function (b, j) { b.hidden = j !== i; tabs.children[j].classList.toggle("active", j === i); });
    });
    tabs.appendChild(tab);
    return box;
  });
  // Every view is drawn at load, each while it is shown (a hidden box has no width to fit
  // a plot to), then all but the first are hidden until their tab is picked.
  boxes.forEach(function (b, i) { b.hidden = false; renderView(data.views[i], b); b.hidden = i !== 0; });
  if (tabs.children.length) tabs.children[0].classList.add("active");
  var done = { rows: document.querySelectorAll("tr.fn").length, histogram: plots.histogram, over_time: plots.over_time,
               activity: plots.activity, flame: document.querySelectorAll("iframe.flame").length,
               views: data.views.length, ms: Math.round(performance.now() - started),
               since_navigation: Math.round(performance.now()) };
  // Once the legends are set (after the plots' first draw): what the page drew empty (the
  // notes of a panel with nothing to show), and legend values left as placeholders ("-",
  // "--", nothing).
  setTimeout(function () {
    done.empty = Array.prototype.map.call(document.querySelectorAll(".note.empty"), function (e) { return e.textContent; });
    done.placeholders = Array.prototype.filter.call(document.querySelectorAll(".u-legend .u-value"),
                                                    function (e) { return /^(-+|)$/.test(e.textContent.trim()); }).length;
    document.body.setAttribute("data-rendered", JSON.stringify(done));
  }, 0);
})();
