// masorch view: the page. Plain JavaScript (no build step); charts and graphs by Apache ECharts.
// Data comes from the server's /api endpoints, or from the JSON embedded by `masorch view --html`.
(function () {
  "use strict";

  const EMBEDDED = (function () {
    const node = document.getElementById("masorch-data");
    return node ? JSON.parse(node.textContent) : null;
  })();
  const STATUS_COLORS = {
    ok: "#2e9d5b", error: "#d64545", timeout: "#e08a1e", budget: "#8b5cf6", skipped: "#9aa3ad",
    invalid_plan: "#d64545", failed: "#d64545", invalid: "#d64545", running: "#2563eb", "not run": "#cfd4da",
  };
  const KIND_COLORS = ["#1f77b4", "#ff7f0e", "#17becf", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f"];
  const PAGE_SIZE = 50;
  const app = document.getElementById("app");
  const charts = [];
  let runCache = null;
  const tableState = { page: 0, filters: {} };
  const FOLLOW_MS = 3000;
  let followOn = true;
  let followTimer = null;

  // ---- data ---------------------------------------------------------------------------------------

  function dataKey(endpoint, params) {
    return params ? endpoint + "|" + JSON.stringify(params) : endpoint;
  }

  async function api(endpoint, params) {
    if (EMBEDDED) {
      const key = dataKey(endpoint, params);
      if (!(key in EMBEDDED)) throw new Error("not in this exported file (open it with `masorch view`)");
      return EMBEDDED[key];
    }
    const query = params ? "?" + new URLSearchParams(params).toString() : "";
    const response = await fetch(endpoint + query, { cache: "no-store" });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error + (body.hint ? " (" + body.hint + ")" : ""));
    return body;
  }

  // ---- small DOM helpers --------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else if (name === "text") node.textContent = value;
      else node.setAttribute(name, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function badge(status) {
    return el("span", { class: "badge " + String(status).replace(/\s/g, "_") }, String(status));
  }

  function fmt(x, digits) {
    if (x === null || x === undefined || Number.isNaN(x)) return "–";
    return typeof x === "number" ? x.toFixed(digits === undefined ? 2 : digits) : String(x);
  }

  // An interval with no width is marked (`degenerate`: the report's mark and note) and explained
  // under its table, as in report.md.
  function pct(iv, degenerate) {
    if (iv.n === 0) return "n/a";
    return (100 * iv.mean).toFixed(1) + " [" + (100 * iv.low).toFixed(1) + ", " + (100 * iv.high).toFixed(1) + "]"
      + (iv.degenerate ? " " + degenerate.mark : "");
  }

  function degenerateNote(intervals, degenerate) {  // the note under a table with a marked interval
    if (!intervals.some((iv) => iv.degenerate)) return [];
    return [el("p", { class: "muted degenerate-note" }, degenerate.mark + " " + degenerate.note)];
  }

  function kv(pairs) {
    const dl = el("dl", { class: "kv" });
    for (const [k, v] of pairs) {
      if (v === undefined || v === null || v === "") continue;
      dl.append(el("dt", {}, k), el("dd", {}, v));
    }
    return dl;
  }

  function table(head, rows, numeric) {
    const num = new Set(numeric || []);
    return el(
      "table", {},
      el("thead", {}, el("tr", {}, head.map((h, i) => el("th", { class: num.has(i) ? "num" : null }, h)))),
      el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c, i) => el("td", { class: num.has(i) ? "num" : null }, c))))),
    );
  }

  function chart(container, option, renderer, handlers) {
    const instance = echarts.init(container, null, { renderer: renderer || "canvas" });
    // Handlers first: without animation, "finished" fires during setOption.
    for (const [name, handler] of Object.entries(handlers || {})) instance.on(name, handler);
    // No animation: the page shows the final picture at once (and screenshots and tests see it).
    instance.setOption(Object.assign({ animation: false }, option));
    charts.push(instance);
    return instance;
  }

  function clearCharts() {
    while (charts.length) charts.pop().dispose();
  }

  window.addEventListener("resize", () => charts.forEach((c) => c.resize()));

  function setStatus(text) {
    document.getElementById("status").textContent = text;
  }

  // ---- routing ------------------------------------------------------------------------------------

  async function route() {
    clearTimeout(followTimer);
    clearCharts();
    const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
    app.replaceChildren(el("p", { class: "muted" }, "loading…"));
    try {
      const info = await api("/api/info");
      if (parts[0] === "sample") await samplePage(parts[1], parts[2]);
      else if (parts[0] === "compare") await comparePage(parts[1], parts[2]);
      else if (info.kind === "eval") await evalPage(info);
      else if (info.kind === "training") await trainingPage(info);
      else await tracePage(info);
    } catch (error) {
      app.replaceChildren(el("div", { class: "card diag-error", id: "error" }, String(error.message || error)));
    }
  }

  window.addEventListener("hashchange", route);

  // ---- eval run: sample table and report ------------------------------------------------------------

  async function evalPage(info) {
    runCache = await api("/api/run");
    const run = runCache;
    const live = run.done < run.expected;
    setStatus(run.done + " of " + run.expected + " samples" + (live ? " (in progress)" : ""));
    const reload = EMBEDDED ? null : el("button", { onclick: route, id: "reload" }, "reload");
    // A run still being written is read again every few seconds while "follow" stays ticked.
    const follow = live && !EMBEDDED ? el("label", { class: "muted" }, el("input", { type: "checkbox", id: "follow", checked: followOn }), " follow") : null;
    if (follow) follow.firstChild.addEventListener("change", (e) => { followOn = e.target.checked; });
    // The table needs only the log; the report's bootstrap takes longer: it fills in when it comes.
    const holder = el("div", { id: "report-holder" }, el("p", { class: "muted" }, "computing the report…"));
    app.replaceChildren(el("h2", {}, "Report ", reload, " ", follow), holder, el("h2", {}, "Samples"), sampleTable(run));
    if (live && !EMBEDDED) followTimer = setTimeout(() => refollow(info, holder), FOLLOW_MS);
    const report = await api("/api/report");
    if (document.body.contains(holder)) holder.replaceChildren(reportSection(report));
  }

  async function refollow(info, holder) {
    if (!document.body.contains(holder)) return;
    const fresh = followOn ? await api("/api/run") : runCache;
    if (!document.body.contains(holder)) return;
    if (fresh.done === runCache.done) {  // nothing new: keep the page (and the cursor in the search box)
      followTimer = setTimeout(() => refollow(info, holder), FOLLOW_MS);
      return;
    }
    const y = window.scrollY;
    clearCharts();
    await evalPage(info);
    window.scrollTo(0, y);
  }

  function reportSection(report) {
    const box = el("div", { id: "report" });
    const systems = Object.fromEntries(report.systems.map((s) => [s.name, s]));
    box.append(table(
      ["system", "mode", "model", "orchestrator"],
      Object.keys(systems).map((n) => [n, (systems[n].mode || "?") + ":" + (systems[n].variant || "?"), systems[n].model || "", systems[n].orchestrator || ""]),
    ));
    for (const dataset of report.datasets) {
      const cells = report.cells.filter((c) => c.dataset === dataset);
      const top = cells.filter((c) => c.value === null);
      const card = el("div", { class: "card" }, el("h3", {}, dataset));
      card.append(table(
        ["system", "n", "accuracy % [95% CI]", "mean score", "calls", "tokens", "cost $", "wall s", "not ok"],
        top.map((c) => [c.system, c.accuracy.n, pct(c.accuracy, report.degenerate), fmt(c.score, 3), fmt(c.calls, 1), fmt(c.tokens, 0), fmt(c.cost, 4), fmt(c.wall_s, 2),
          Object.entries(c.statuses).filter(([s]) => s !== "ok").map(([s, n]) => s + " " + n)
            .concat(c.undecided ? ["scorer undecided " + c.undecided] : []).join(", ") || "0"]),
        [1, 3, 4, 5, 6, 7],
      ));
      card.append(...degenerateNote(top.map((c) => c.accuracy), report.degenerate));
      const paired = report.paired.filter((p) => p.dataset === dataset && p.value === null);
      if (paired.length) {
        card.append(el("h3", {}, "paired differences (MAS − best SAS)"));
        card.append(table(["MAS", "best SAS", "n paired", "difference, points [95% CI]"],
          paired.map((p) => [p.mas, p.sas, p.diff.n, pct(p.diff, report.degenerate)]), [2]));
        card.append(...degenerateNote(paired.map((p) => p.diff), report.degenerate));
      }
      const plots = el("div", { class: "grid3" });
      const byValue = cells.filter((c) => c.value !== null);
      for (const axis of [...new Set(byValue.map((c) => c.axis))].sort()) {  // a chart per axis
        const div = el("div", { class: "chart", id: "axis-" + dataset + "-" + axis });
        plots.append(div);
        const here = byValue.filter((c) => c.axis === axis);
        requestAnimationFrame(() => axisChart(div, here, axis || "axis"));
      }
      const cdiv = el("div", { class: "chart", id: "cost-" + dataset });
      plots.append(cdiv);
      requestAnimationFrame(() => costChart(cdiv, top.filter((c) => c.accuracy.n > 0)));
      card.append(plots);
      box.append(card);
    }
    return box;
  }

  function axisChart(div, cells, axis) {
    const systems = [...new Set(cells.map((c) => c.system))];
    chart(div, {
      title: { text: "accuracy vs " + axis + " value", textStyle: { fontSize: 13 } },
      tooltip: { trigger: "axis", valueFormatter: (v) => fmt(v, 1) + " %" },
      legend: { top: 22, right: 10, type: "scroll" },
      grid: { top: 60, left: 45, right: 20, bottom: 35 },
      xAxis: { type: "value", name: axis, nameLocation: "middle", nameGap: 24, minInterval: 1, min: (v) => v.min - 1, max: (v) => v.max + 1 },
      yAxis: { type: "value", name: "accuracy %", min: 0, max: 100 },
      series: systems.map((s) => ({
        name: s, type: "line", symbolSize: 7,
        data: cells.filter((c) => c.system === s).sort((a, b) => a.value - b.value).map((c) => [c.value, 100 * c.accuracy.mean]),
      })),
    });
  }

  function costChart(div, cells) {
    const useCost = cells.some((c) => c.cost > 0);
    chart(div, {
      title: { text: "accuracy vs " + (useCost ? "cost" : "tokens") + " per sample", textStyle: { fontSize: 13 } },
      tooltip: { formatter: (p) => escapeHtml(p.data[2]) + ": " + fmt(p.data[1], 1) + " % at " + fmt(p.data[0], useCost ? 4 : 0) },
      grid: { top: 40, left: 45, right: 30, bottom: 35 },
      xAxis: { type: "value", name: useCost ? "$" : "tokens", scale: true },
      yAxis: { type: "value", name: "accuracy %", min: 0, max: 100 },
      series: [{
        type: "scatter", symbolSize: 12,
        label: { show: true, position: "right", formatter: (p) => p.data[2], fontSize: 11 },
        data: cells.map((c) => [useCost ? c.cost : c.tokens, 100 * c.accuracy.mean, c.system]),
      }],
    });
  }

  function sampleTable(run) {
    const C = Object.fromEntries(run.columns.map((n, i) => [n, i]));
    const distinct = (name) => [...new Set(run.rows.map((r) => r[C[name]]))].filter((v) => v !== null && v !== "").sort();
    const box = el("div", { id: "samples" });
    const filters = el("div", { class: "filters" });
    const choices = [["system", distinct("system")], ["dataset", distinct("dataset")], ["value", distinct("value")], ["status", distinct("status")], ["correct", ["yes", "no"]]];
    for (const [name, values] of choices) {
      const select = el("select", { id: "filter-" + name, onchange: (e) => { tableState.filters[name] = e.target.value; tableState.page = 0; draw(); } },
        el("option", { value: "" }, "any"), values.map((v) => el("option", { value: String(v) }, String(v))));
      select.value = tableState.filters[name] || "";
      filters.append(el("label", {}, name, select));
    }
    const search = el("input", { id: "filter-text", type: "search", placeholder: "search id, answer, error…", value: tableState.filters.text || "",
      oninput: (e) => { tableState.filters.text = e.target.value; tableState.page = 0; draw(); } });
    filters.append(search);
    const count = el("span", { class: "muted", id: "match-count" });
    const pager = el("div", { class: "pager" });
    const holder = el("div");
    box.append(filters, pager, holder);

    function matches(r) {
      const f = tableState.filters;
      if (f.system && r[C.system] !== f.system) return false;
      if (f.dataset && r[C.dataset] !== f.dataset) return false;
      if (f.value && String(r[C.value]) !== f.value) return false;
      if (f.status && r[C.status] !== f.status) return false;
      if (f.correct && (r[C.correct] ? "yes" : "no") !== f.correct) return false;
      if (f.text) {
        const needle = f.text.toLowerCase();
        return [C.sample_id, C.answer, C.gold, C.error, C.plan_kinds].some((i) => String(r[i] || "").toLowerCase().includes(needle));
      }
      return true;
    }

    function draw() {
      const rows = run.rows.filter(matches);
      const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
      tableState.page = Math.min(tableState.page, pages - 1);
      const shown = rows.slice(tableState.page * PAGE_SIZE, (tableState.page + 1) * PAGE_SIZE);
      count.textContent = rows.length + " of " + run.rows.length + " samples";
      pager.replaceChildren(
        el("button", { onclick: () => { tableState.page = Math.max(0, tableState.page - 1); draw(); }, disabled: tableState.page === 0 }, "‹ prev"),
        el("span", {}, "page " + (tableState.page + 1) + " of " + pages), 
        el("button", { onclick: () => { tableState.page += 1; draw(); }, disabled: tableState.page >= pages - 1 }, "next ›"),
        count,
      );
      const head = ["system", "dataset", "sample", "value", "status", "correct", "answer", "gold", "calls", "tokens", "cost $", "wall s", "plan"];
      const body = el("tbody", {}, shown.map((r) => el("tr", {
        class: "click sample-row", "data-key": r[C.key],
        onclick: () => { location.hash = "#/sample/key/" + encodeURIComponent(r[C.key]); },
      },
      el("td", {}, r[C.system]), el("td", {}, r[C.dataset]), el("td", {}, r[C.sample_id]), el("td", { class: "num" }, r[C.value] === null ? "" : r[C.value]),
      el("td", {}, badge(r[C.status])), el("td", {}, badge(r[C.correct] ? "yes" : "no")), el("td", {}, r[C.answer] || r[C.error]), el("td", {}, r[C.gold]),
      el("td", { class: "num" }, r[C.calls]), el("td", { class: "num" }, r[C.tokens]), el("td", { class: "num" }, fmt(r[C.cost], 4)), el("td", { class: "num" }, fmt(r[C.wall_s], 2)),
      el("td", {}, r[C.plan_kinds]))));
      holder.replaceChildren(el("table", { id: "sample-table" }, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))), body));
    }
    draw();
    return box;
  }

  // ---- one sample or trace run ---------------------------------------------------------------------

  async function samplePage(by, id) {
    const params = by === "key" ? { key: id } : { run: id };
    const data = await api("/api/sample", params);
    const header = el("div");
    if (by === "key") header.append(await compareLinks(data.record));
    app.replaceChildren(header, sampleView(data, "s0"));
    setStatus(data.record ? data.record.system + " · " + data.record.sample_id : "run " + id);
  }

  async function compareLinks(record) {
    const run = runCache || (runCache = await api("/api/run"));
    const C = Object.fromEntries(run.columns.map((n, i) => [n, i]));
    const others = run.rows.filter((r) => r[C.dataset] === record.dataset && r[C.sample_id] === record.sample_id && r[C.key] !== record.key);
    const box = el("div", { class: "filters" }, el("a", { href: "#/" }, "← all samples"));
    if (others.length) {
      const select = el("select", { id: "compare-with" }, others.map((r) => el("option", { value: r[C.key] }, r[C.system])));
      box.append(el("label", {}, "compare side by side with", select),
        el("button", { id: "compare", onclick: () => { location.hash = "#/compare/" + encodeURIComponent(record.key) + "/" + encodeURIComponent(select.value); } }, "compare"));
    }
    return box;
  }

  async function comparePage(keyA, keyB) {
    const [a, b] = await Promise.all([api("/api/sample", { key: keyA }), api("/api/sample", { key: keyB })]);
    app.replaceChildren(
      el("div", { class: "filters" }, el("a", { href: "#/" }, "← all samples")),
      el("div", { class: "side", id: "compare-view" }, sampleView(a, "s0", true), sampleView(b, "s1", true)),
    );
    setStatus("compare " + (a.record ? a.record.sample_id : ""));
  }

  function sampleView(data, prefix, narrow) {
    const box = el("div", { class: "sample", id: prefix });
    const trace = data.trace;
    const record = data.record;
    const run = trace.run || {};
    const result = trace.result || {};
    box.append(el("h2", {}, record ? record.system + " · " + record.sample_id : "run " + trace.run_id));
    box.append(el("div", { class: "card" },
      el("h3", {}, "Question"), el("pre", { class: "question" }, run.question || "(no trace for this sample)"),
      kv([
        ["status", badge(record ? record.status : result.status || "running")],
        ["correct", record ? badge(record.correct ? "yes" : "no") : null],
        ["answer", record ? record.answer : result.answer],
        ["gold", record ? record.gold : null],
        ["error", (record && record.error) || result.error],
        ["mode", run.mode ? run.mode + (run.dom ? " · DoM " + run.dom : "") + (run.dialect ? " · " + run.dialect : "") : null],
        ["models", run.models ? Object.entries(run.models).map(([k, v]) => k + " " + v).join(", ") : null],
        ["usage", result.usage ? result.usage.calls + " calls · " + (result.usage.prompt_tokens + result.usage.completion_tokens) + " tokens · $" + fmt(result.usage.cost, 4) : null],
        ["wall", trace.found ? fmt(trace.wall_s, 3) + " s" : null],
      ])));
    if (!trace.found) return box;
    const rows = Math.max(1, ...trace.graph.nodes.map((n) => n.row + 1));
    const graphDiv = el("div", { class: "chart", id: prefix + "-graph", style: "height: " + Math.min(560, 140 + rows * 90) + "px" });
    const plans = el("div", { class: "plans" });
    if (!trace.plans.length) plans.append(el("p", { class: "muted" }, "No plan: a single sub-agent ran the question (a SAS baseline)."));
    for (const p of trace.plans) {
      plans.append(el("h3", {}, (trace.rounds.length ? "round " : "attempt ") + p.attempt + " · " + p.dialect + " · ", badge(p.valid ? "ok" : "invalid")));
      plans.append(el("pre", { class: "plan-text" }, p.text));
      for (const d of p.diagnostics) {
        plans.append(el("div", { class: "diag-" + d.severity }, d.severity + " [" + d.code + "] " + (d.where || "") + ": " + d.message + (d.hint ? " — fix: " + d.hint : "")));
      }
    }
    box.append(el("h3", {}, "Plan"), el("div", { class: narrow ? "" : "grid2" }, el("div", { class: "card" }, graphDiv), el("div", { class: "card" }, plans)));
    const timelineDiv = el("div", { class: "chart", id: prefix + "-timeline" });
    box.append(el("h3", {}, "Timeline"), el("div", { class: "card" }, timelineDiv));
    if (trace.rounds.length) box.append(el("h3", {}, "Rounds"), roundsView(trace.rounds));
    box.append(el("h3", {}, "Nodes"), table(["id", "kind", "status", "start s", "end s", "answer / error"],
      trace.graph.nodes.map((n) => [n.id, n.kind, badge(n.status), fmt(n.start, 3), fmt(n.end, 3), n.error || n.answer]), [3, 4]));
    box.append(el("h3", {}, "LLM calls (" + trace.calls.length + ")"), el("div", { id: prefix + "-calls" }, trace.calls.map((c) => callView(c, prefix))));
    requestAnimationFrame(() => {
      graphChart(graphDiv, trace.graph, trace.calls, prefix);
      timelineChart(timelineDiv, trace.timeline, trace.calls, prefix);
    });
    return box;
  }

  function roundsView(rounds) {
    return el("div", { class: "card", id: "rounds" }, rounds.map((r) => el("div", {},
      el("h3", {}, "round " + r.round),
      table(["call", "tool", "task", "status", "answer / error"], r.calls.map((c) => [c.id, c.kind, c.task, badge(c.tool_status || c.status), c.error || c.answer])))));
  }

  function callView(call, prefix) {
    const summary = [call.role, call.node ? "· " + call.node : "", "· " + call.model, "· " + call.prompt_tokens + "+" + call.completion_tokens + " tok",
      "· " + fmt(call.latency_s, 3) + " s", call.cost ? "· $" + fmt(call.cost, 5) : "", call.cached ? "· cached" : "", call.attempts > 1 ? "· " + call.attempts + " attempts" : ""].join(" ");
    const body = el("div", { class: "body" });
    for (const m of call.messages || []) body.append(el("div", { class: "msg-role" }, m.role), el("pre", {}, m.content));
    body.append(el("div", { class: "msg-role" }, "response"), el("pre", {}, call.error ? "error: " + call.error : call.response || "(empty)"));
    for (const t of call.tool_calls || []) body.append(el("pre", {}, "tool call " + t.name + "(" + t.arguments + ")"));
    return el("details", { class: "call", id: prefix + "-call-" + call.index },
      el("summary", {}, "#" + (call.index + 1) + " ", call.error ? badge("error") : badge("ok"), " " + summary), body);
  }

  function openCall(prefix, index) {
    const node = document.getElementById(prefix + "-call-" + index);
    if (!node) return;
    node.open = true;
    node.scrollIntoView({ behavior: "smooth", block: "center" });
    node.classList.add("flash");
    setTimeout(() => node.classList.remove("flash"), 1200);
  }

  function graphChart(div, graph, calls, prefix) {
    const kinds = [...new Set(graph.nodes.map((n) => n.kind))];
    chart(div, {
      tooltip: { formatter: (p) => p.dataType === "node" ? p.data.tip : escapeHtml(p.data.source + " → " + p.data.target) + (p.data.implied ? " (implied by a reference)" : "") },
      series: [{
        type: "graph", layout: "none", roam: true, symbol: "roundRect", symbolSize: [130, 46],
        left: 90, right: 90, top: 50, bottom: 50,
        edgeSymbol: ["none", "arrow"], edgeSymbolSize: 9,
        label: { show: true, color: "#fff", fontSize: 12, lineHeight: 16, formatter: (p) => p.data.name + "\n" + p.data.kind },
        data: graph.nodes.map((n) => ({
          name: n.id, kind: n.kind, x: n.layer * 190, y: n.row * 80,
          tip: "<b>" + escapeHtml(n.id) + "</b> · " + escapeHtml(n.kind) + " · " + escapeHtml(n.status) + "<br>" + escapeHtml(String(n.task || "(the original question)").slice(0, 200)) + (n.task_only ? "<br><i>task only: not shown the original question</i>" : ""),
          itemStyle: { color: STATUS_COLORS[n.status] || "#9aa3ad", borderColor: KIND_COLORS[kinds.indexOf(n.kind) % KIND_COLORS.length], borderWidth: 4 },
        })),
        links: graph.edges.map((e) => ({
          source: e.src, target: e.dst, implied: e.implied,
          lineStyle: { type: e.implied ? "dashed" : "solid", width: e.critical ? 3 : 1.5, color: e.critical ? "#d64545" : "#8a94a3", opacity: 0.9 },
        })),
      }],
    }, "svg", {
      click: (p) => {
        if (p.dataType !== "node") return;
        const call = calls.find((c) => c.node === p.data.name);
        if (call) openCall(prefix, call.index);
      },
      finished: () => {
        div.dataset.nodes = String(graph.nodes.length);
        div.dataset.edges = String(graph.edges.length);
        div.dataset.ready = "1";
      },
    });
  }

  function timelineChart(div, timeline, calls, prefix) {
    let drawn = 0;
    const lanes = timeline.lanes;
    div.style.height = Math.max(160, 70 + lanes.length * 34) + "px";
    chart(div, {
      tooltip: { formatter: (p) => escapeHtml(p.data.label) + " · " + escapeHtml(p.data.status) + "<br>" + fmt(p.value[1], 3) + " – " + fmt(p.value[2], 3) + " s (" + fmt(p.value[2] - p.value[1], 3) + " s)" },
      grid: { top: 20, left: 110, right: 30, bottom: 40 },
      xAxis: { type: "value", name: "seconds from the run's start", nameLocation: "middle", nameGap: 26, min: 0 },
      yAxis: { type: "category", data: lanes, inverse: true, axisTick: { show: false } },
      dataZoom: [{ type: "inside", filterMode: "weakFilter" }],
      series: [{
        type: "custom",
        renderItem: (params, api) => {
          const lane = api.value(0);
          const start = api.coord([api.value(1), lane]);
          const end = api.coord([api.value(2), lane]);
          const band = api.size([0, 1])[1];
          const isNode = api.value(3) === 0;
          // A node's bar above the lane's middle, its calls' thinner bars below: both stay visible.
          const height = band * (isNode ? 0.4 : 0.3);
          const y = isNode ? start[1] - band * 0.42 : start[1] + band * 0.02;
          const shape = echarts.graphic.clipRectByRect(
            { x: start[0], y: y, width: Math.max(2, end[0] - start[0]), height: height },
            { x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height },
          );
          if (!shape) return null;
          drawn += 1;
          return { type: "rect", shape: shape, style: api.style() };
        },
        encode: { x: [1, 2], y: 0 },
        data: timeline.bars.map((b) => ({
          value: [b.lane, b.start, b.end, b.kind === "node" ? 0 : 1], label: b.label, status: b.status, call: b.call,
          itemStyle: { color: STATUS_COLORS[b.status] || "#9aa3ad", opacity: b.kind === "node" ? 0.85 : 1, borderColor: b.critical ? "#111" : null, borderWidth: b.critical ? 2 : 0 },
        })),
      }],
    }, "svg", {
      click: (p) => { if (p.data.call !== undefined && p.data.call !== null) openCall(prefix, p.data.call); },
      finished: () => {
        div.dataset.bars = String(timeline.bars.length);
        div.dataset.drawn = String(drawn);
        div.dataset.lanes = String(lanes.length);
        div.dataset.ready = "1";
      },
    });
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  // ---- a trace file: its runs ----------------------------------------------------------------------

  async function tracePage(info) {
    const data = await api("/api/runs");
    if (data.runs.length === 1) {
      await samplePage("run", data.runs[0].run_id);
      return;
    }
    setStatus(data.runs.length + " runs");
    app.replaceChildren(el("h2", {}, "Runs"), el("table", { id: "runs" },
      el("thead", {}, el("tr", {}, ["run", "mode", "question"].map((h) => el("th", {}, h)))),
      el("tbody", {}, data.runs.map((r) => el("tr", { class: "click", onclick: () => { location.hash = "#/sample/run/" + encodeURIComponent(r.run_id); } },
        el("td", {}, r.run_id), el("td", {}, r.mode), el("td", {}, r.question.slice(0, 200)))))));
  }

  // ---- a training run ------------------------------------------------------------------------------

  async function trainingPage(info) {
    const data = await api("/api/training");
    setStatus(data.steps.length + " steps logged" + (data.report ? "" : " (no report.json yet: still training?)"));
    const grid = el("div", { class: "grid3", id: "training-charts" });
    const names = Object.keys(data.series);
    for (const name of names) {
      const div = el("div", { class: "chart", "data-series": name });
      grid.append(el("div", { class: "card" }, div));
      requestAnimationFrame(() => chart(div, {
        title: { text: name, textStyle: { fontSize: 13 } },
        tooltip: { trigger: "axis" },
        grid: { top: 40, left: 50, right: 20, bottom: 30 },
        xAxis: { type: "value", name: "step", minInterval: 1 },
        yAxis: { type: "value", scale: true },
        series: [{ type: "line", showSymbol: data.steps.length < 60, connectNulls: true, data: data.steps.map((s, i) => [s, data.series[name][i]]) }],
      }));
    }
    const parts = [el("h2", {}, "Training"), grid];
    if (data.report) {
      const r = data.report;
      parts.push(el("h2", {}, "Report"), el("div", { class: "card" }, kv([
        ["steps", r.steps], ["seconds per step", fmt(r.seconds_per_step, 1)], ["wall", fmt(r.wall_s, 0) + " s"], ["final model", r.final_model]])));
      for (const tag of ["eval_before", "eval_after"]) {
        if (r[tag]) parts.push(el("h3", {}, tag), el("pre", {}, JSON.stringify(r[tag], null, 2)));
      }
    }
    if (data.evals.length) {
      parts.push(el("p", { class: "muted" }, "The evaluations are eval run directories: " + data.evals.map((e) => "masorch view " + info.path + "/" + e).join(" · ")));
    }
    if (data.sample_steps.length) parts.push(el("h2", {}, "Sampled plans"), sampledPlans(data.sample_steps));
    if (Object.keys(data.summary).length) parts.push(el("h3", {}, "trainer summary"), el("pre", {}, JSON.stringify(data.summary, null, 2)));
    app.replaceChildren(...parts);
  }

  function sampledPlans(steps) {
    const holder = el("div", { id: "sampled-plans" });
    const select = el("select", { id: "sample-step", onchange: () => show(select.value) },
      steps.map((s) => el("option", { value: String(s) }, "step " + s)));
    select.value = String(steps[steps.length - 1]);
    async function show(step) {
      const data = await api("/api/samples", { step: String(step) });
      holder.replaceChildren(table(["question", "DoM", "plan", "valid", "status", "answer / error", "agents", "calls", "tokens"],
        data.samples.map((s) => [String(s.question).slice(0, 160), s.dom, el("pre", { class: "plan-text" }, s.plan), badge(s.valid ? "yes" : "no"),
          badge(s.status), s.error || s.answer, s.agents, s.calls, s.tokens]), [6, 7, 8]));
    }
    show(select.value);
    return el("div", { class: "card" }, el("div", { class: "filters" }, el("label", {}, "plans the policy sampled at", select)), holder);
  }

  route();
})();
