"""The sample browser's inline stylesheet and script (`probe.viz.samples` writes the page).

The script reads the records (`<script id="data">`, gzip + base64) and the run list
(`<script id="meta">`), builds the filters, applies those named in the URL fragment, and lists
the matching prompts (`PAGE` at a time); a click shows one prompt beside its letter
probabilities, answer and verdicts. Every text is set with `textContent`. After each filtering it
records `data-rows`, `data-matching`, `data-shown` and `data-ready="1"` on `<body>` (the render
test reads them from the dumped DOM).
"""

from __future__ import annotations

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1400px; margin: 1em auto;
       padding: 0 1em; color: #222; font-size: 14px; }
h1 { font-size: 1.3em; margin: 0.3em 0; }
#filters { display: flex; flex-wrap: wrap; gap: 0.4em 1em; align-items: end; margin: 0.6em 0;
           padding: 0.5em; background: #f6f6f6; border: 1px solid #ddd; }
#filters label { display: flex; flex-direction: column; font-size: 0.85em; color: #444; }
#filters select, #filters input { font-size: 1em; max-width: 16em; }
#filters input[type=number] { width: 6em; }
#count { margin: 0.4em 0; color: #444; }
#list { max-height: 42vh; overflow: auto; border: 1px solid #ddd; }
table { border-collapse: collapse; }
#list table { width: 100%; font-size: 0.9em; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
#list th { position: sticky; top: 0; }
tr.sample { cursor: pointer; }
tr.sample:hover { background: #f3f7ff; }
tr.sample.selected { background: #dde8ff; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.clip { max-width: 22em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
#more { margin: 0.4em 0; }
#detail { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1em; margin-top: 1em; }
#detail h2 { grid-column: 1 / -1; font-size: 1.1em; margin: 0; }
#detail h3 { font-size: 1em; margin: 0.8em 0 0.3em; }
pre { background: #f4f4f4; padding: 0.6em; white-space: pre-wrap; word-break: break-word; margin: 0;
      max-height: 60vh; overflow: auto; font-size: 0.9em; }
.bar { display: inline-block; height: 0.8em; background: #4a7bd0; vertical-align: middle; }
tr.pick td { font-weight: bold; }
.note { color: #666; font-size: 0.9em; }
#detail td { overflow-wrap: anywhere; }
"""

SCRIPT = r"""
"use strict";
(function () {
  var PAGE = 500;
  var body = document.body, status = document.getElementById("status");
  var meta = JSON.parse(document.getElementById("meta").textContent);
  var rows = [], matching = [], shown = 0, selected = null, controls = {}, hasVariants = false;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmt(x) { return x === null || x === undefined ? "–" : Number(x).toFixed(3); }
  function uniq(values) {
    var seen = {}, out = [];
    values.forEach(function (v) { if (v !== null && v !== undefined && !seen[v]) { seen[v] = 1; out.push(v); } });
    return out.sort();
  }
  function field(row, name) {
    for (var i = 0; i < row.f.length; i++) if (row.f[i][0] === name) return row.f[i][1];
    return null;
  }
  function inflate(b64) {
    var bin = atob(b64.trim()), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }

  var TESTS = {
    run: function (r, v) { return meta.runs[r.r].label === v; },
    bench: function (r, v) { return meta.runs[r.r].bench === v; },
    condition: function (r, v) { return r.cond === v; },
    variant: function (r, v) { return r.vi !== null && String(r.vi) === v; },
    group: function (r, v) { return (r.groups !== null && r.groups.indexOf(v) >= 0) || r.target === v; },
    verdict: function (r, v) { return v === "(no verdict)" ? r.vl.length === 0 : r.vl.indexOf(v) >= 0; },
    mass_min: function (r, v) { return r.mass !== null && r.mass >= Number(v); },
    mass_max: function (r, v) { return r.mass !== null && r.mass <= Number(v); }
  };

  function addSelect(form, name, label, values, texts) {
    var box = el("label", label), select = el("select");
    select.id = "f-" + name;
    select.appendChild(el("option", "all")).value = "";
    values.forEach(function (v, i) { select.appendChild(el("option", texts ? texts[i] : v)).value = v; });
    select.disabled = values.length === 0;
    select.addEventListener("change", function () { apply(true); });
    box.appendChild(select);
    form.appendChild(box);
    controls[name] = select;
  }
  function addNumber(form, name, label) {
    var box = el("label", label), input = el("input");
    input.id = "f-" + name;
    input.type = "number"; input.min = "0"; input.max = "1"; input.step = "0.05";
    input.addEventListener("change", function () { apply(true); });
    box.appendChild(input);
    form.appendChild(box);
    controls[name] = input;
  }

  function buildFilters() {
    var form = el("form");
    form.id = "filters";
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    var groups = [];
    rows.forEach(function (r) { (r.groups || []).forEach(function (g) { groups.push(g); }); groups.push(r.target); });
    var verdicts = [];
    rows.forEach(function (r) { r.vl.forEach(function (v) { verdicts.push(v); }); });
    if (meta.runs.length > 1) addSelect(form, "run", "run", uniq(meta.runs.map(function (m) { return m.label; })));
    addSelect(form, "bench", "bench", uniq(meta.runs.map(function (m) { return m.bench; })));
    addSelect(form, "condition", "condition", uniq(rows.map(function (r) { return r.cond; })));
    var variants = {};
    rows.forEach(function (r) { if (r.vi !== null) variants[r.vi] = r["var"]; });
    var indices = Object.keys(variants).sort(function (a, b) { return a - b; });
    if (indices.length) addSelect(form, "variant", "variant (index · levels)", indices,
                                  indices.map(function (i) { return variants[i]; }));
    var keys = {};  // a JSON-object field's keys (e.g. the groups with answer shares)
    rows.forEach(function (r) { r.obj.forEach(function (o) {
      keys[o[0]] = keys[o[0]] || []; o[1].forEach(function (kv) { keys[o[0]].push(kv[0]); }); }); });
    Object.keys(keys).forEach(function (name) {
      TESTS[name] = function (r, v) {
        return r.obj.some(function (o) { return o[0] === name && o[1].some(function (kv) { return kv[0] === v; }); });
      };
      addSelect(form, name, name + " has", uniq(keys[name]));
    });
    addSelect(form, "group", "group (shown or target)", uniq(groups));
    addSelect(form, "verdict", "verdict or check", uniq(verdicts).concat(["(no verdict)"]));
    addNumber(form, "mass_min", "letter mass ≥");
    addNumber(form, "mass_max", "letter mass ≤");
    meta.facets.forEach(function (f) {
      TESTS[f.name] = function (r, v) { return field(r, f.name) === v; };
      addSelect(form, f.name, f.name, f.values);
    });
    status.replaceWith(form);
    form.after(el("div", null), el("div", null), el("section", null));
    var count = form.nextSibling, list = count.nextSibling, detail = list.nextSibling;
    count.id = "count"; list.id = "list"; detail.id = "detail";
  }

  function readHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    Object.keys(controls).forEach(function (name) {
      var control = controls[name];
      control.value = params.get(name) || "";
      if (control.tagName === "SELECT" && control.selectedIndex < 0) control.value = "";  // a value not offered
    });
    var sel = params.get("sel");
    return sel === null ? null : sel;
  }
  function writeHash() {
    var params = new URLSearchParams();
    Object.keys(controls).forEach(function (name) { if (controls[name].value) params.set(name, controls[name].value); });
    if (selected) params.set("sel", selected.r + ":" + selected.id);
    history.replaceState(null, "", "#" + params.toString());
  }

  function apply(record) {
    var active = Object.keys(controls).filter(function (n) { return controls[n].value !== ""; });
    matching = rows.filter(function (r) {
      return active.every(function (n) { return TESTS[n](r, controls[n].value); });
    });
    shown = 0;
    var list = document.getElementById("list");
    list.textContent = "";
    var table = el("table"), head = el("tr");
    hasVariants = rows.some(function (r) { return r.vi !== null; });
    ["run", "prompt", "condition"].concat(hasVariants ? ["variant"] : []).concat(["target", "pick", "P(pick)", "letter mass", "argmax token", "answer",
     "verdicts, checks"]).forEach(function (h) { head.appendChild(el("th", h)); });
    table.appendChild(el("thead")).appendChild(head);
    table.appendChild(el("tbody"));
    list.appendChild(table);
    more();
    if (matching.indexOf(selected) < 0) selected = matching.length ? matching[0] : null;
    show(selected);
    if (record) writeHash();
  }

  function more() {
    var tbody = document.querySelector("#list tbody"), end = Math.min(matching.length, shown + PAGE);
    for (; shown < end; shown++) tbody.appendChild(rowElement(matching[shown]));
    var count = document.getElementById("count");
    count.textContent = matching.length + " of " + rows.length + " prompts match; " + shown + " listed. ";
    if (shown < matching.length) {
      var button = el("button", "show " + Math.min(PAGE, matching.length - shown) + " more");
      button.id = "more";
      button.addEventListener("click", more);
      count.appendChild(button);
    }
    body.dataset.rows = String(rows.length);
    body.dataset.matching = String(matching.length);
    body.dataset.shown = String(shown);
  }

  function pickProb(r) {
    if (r.p === null || r.pick === null) return null;
    var k = meta.runs[r.r].letters.indexOf(r.pick);
    return k < 0 ? null : r.p[k];
  }
  function shownLabel(r, letter) {  // the label the prompt showed at a letter's position
    var k = meta.runs[r.r].letters.indexOf(letter);
    return r.labels && k >= 0 && r.labels[k] !== null ? r.labels[k] : letter;
  }
  function rowElement(r) {
    var tr = el("tr", null, "sample");
    tr.dataset.run = String(r.r); tr.dataset.id = String(r.id);
    var pick = r.pick === null ? "–" : shownLabel(r, r.pick) + (r.pg ? " · " + r.pg : "");
    var argmax = r.ai === null ? "–" : JSON.stringify(r.at === null ? "#" + r.ai : r.at) + " " + fmt(r.ap);
    [meta.runs[r.r].label, r.id, r.cond || "–"].concat(hasVariants ? [r["var"] || "–"] : [])
      .concat([r.target || "–", pick]).forEach(function (v) { tr.appendChild(el("td", v)); });
    tr.appendChild(el("td", fmt(pickProb(r)), "num"));
    tr.appendChild(el("td", fmt(r.mass), "num"));
    tr.appendChild(el("td", argmax, "clip"));
    tr.appendChild(el("td", r.gen === null ? "–" : r.gen, "clip"));
    tr.appendChild(el("td", r.vl.join("; ") || "–", "clip"));
    tr.addEventListener("click", function () { show(r); writeHash(); });
    if (r === selected) tr.classList.add("selected");
    return tr;
  }

  function keyValues(pairs) {
    var table = el("table");
    pairs.forEach(function (p) {
      var tr = table.appendChild(el("tr"));
      tr.appendChild(el("th", p[0])); tr.appendChild(el("td", p[1]));
    });
    return table;
  }
  function letterTable(r) {
    var letters = meta.runs[r.r].letters, table = el("table"), head = el("tr");
    [r.labels ? "label (letter)" : "letter", "group", "option", "P (T = " + meta.runs[r.r].temperature + ")", ""].forEach(function (h) { head.appendChild(el("th", h)); });
    table.appendChild(head);
    letters.forEach(function (L, k) {
      var tr = table.appendChild(el("tr", null, L === r.pick ? "pick" : null));
      var label = shownLabel(r, L);
      tr.appendChild(el("td", label === L ? L : label + " (" + L + ")"));
      tr.appendChild(el("td", r.groups ? r.groups[k] : "–"));
      tr.appendChild(el("td", r.opts ? r.opts[k] : "–", "num"));
      var p = r.p ? r.p[k] : null;
      tr.appendChild(el("td", fmt(p), "num"));
      var bar = el("span", null, "bar");
      bar.style.width = (p === null ? 0 : Math.round(120 * p)) + "px";
      tr.appendChild(el("td")).appendChild(bar);
    });
    return table;
  }

  function show(r) {
    selected = r;
    document.querySelectorAll("tr.sample.selected").forEach(function (t) { t.classList.remove("selected"); });
    var detail = document.getElementById("detail");
    detail.textContent = "";
    if (r === null) { detail.appendChild(el("h2", "No prompt matches these filters.")); return; }
    var row = document.querySelector('tr.sample[data-run="' + r.r + '"][data-id="' + r.id + '"]');
    if (row) row.classList.add("selected");
    var run = meta.runs[r.r];
    detail.appendChild(el("h2", run.label + " — prompt " + r.id + " (" + run.bench + ", " + run.model + ")"));
    var left = detail.appendChild(el("div")), right = detail.appendChild(el("div"));
    left.appendChild(el("h3", "Prompt (as the model saw it)"));
    left.appendChild(el("pre", r.prompt));
    if (run.letters.length && (r.p || r.groups)) {
      right.appendChild(el("h3", "Letters"));
      right.appendChild(letterTable(r));
    }
    var answer = run.letters.length ? [["pick", r.pick === null ? "–" : shownLabel(r, r.pick) +
                                        (r.pg ? " (" + r.pg + ")" : "")]] : [];
    if (r.mass !== null) answer.push(["letter mass", fmt(r.mass)]);
    if (r.ai !== null) answer.push(["full-vocabulary argmax", JSON.stringify(r.at === null ? "" : r.at) + " (id " +
                                    r.ai + "), p = " + fmt(r.ap) + (r.valid ? "; a letter" : "; not a letter")]);
    else if (r.mass !== null) answer.push(["full-vocabulary argmax", "not stored (run scored before probe kept it)"]);
    if (answer.length) { right.appendChild(el("h3", "Answer")); right.appendChild(keyValues(answer)); }
    if (r.gen !== null) { right.appendChild(el("h3", "Generation")); right.appendChild(el("pre", r.gen)); }
    right.appendChild(el("h3", "Verdicts"));
    right.appendChild(r.v.length ? keyValues(r.v) : el("p", "none stored for this prompt", "note"));
    right.appendChild(el("h3", "Fields"));
    var fields = [["condition", r.cond || "–"]].concat(r.vi !== null ? [["variant", r["var"]], ["levels", r.lv]] : []);
    right.appendChild(keyValues(fields.concat([["target", r.target || "–"]]).concat(r.f)));
    r.obj.forEach(function (o) { right.appendChild(el("h3", o[0])); right.appendChild(keyValues(o[1])); });
  }

  inflate(document.getElementById("data").textContent).then(function (data) {
    rows = data;
    buildFilters();
    var sel = readHash();
    if (sel !== null) {
      var parts = sel.split(":");
      selected = rows.filter(function (r) { return String(r.r) === parts[0] && String(r.id) === parts[1]; })[0] || null;
    }
    apply(false);
    window.addEventListener("hashchange", function () { readHash(); apply(false); });
    body.dataset.ready = "1";
  }).catch(function (e) {
    status.textContent = "Could not read the samples (" + e + "); this page needs a browser with " +
      "DecompressionStream (Chrome 80+, Firefox 113+, Safari 16.4+).";
    body.dataset.ready = "error";
  });
})();
"""
