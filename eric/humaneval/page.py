"""The offline annotation page: one HTML file, no server, no network.

The study (items and texts) is embedded as JSON; answers are saved to the browser's
localStorage under the study id and the annotator's name on every click, so closing
the tab loses nothing; "Export answers" downloads them as JSON (and shows the same
JSON for copying), which `eric humaneval score` reads.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from eric.humaneval.questions import DEFINITIONS, GUIDANCE, PREFERENCE_LABELS, QUESTIONS, TASK
from eric.humaneval.study import Study, public_items

ANSWERS_FORMAT = "eric-humaneval-answers"


def instructions_html() -> str:
    """The instructions block, also used by the MTurk template."""
    terms = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in DEFINITIONS)
    tips = "".join(f"<li>{html.escape(tip)}</li>" for tip in GUIDANCE)
    return f"<p>{html.escape(TASK)}</p><dl>{terms}</dl><ul>{tips}</ul>"


def render_page(study: Study, title: str = "Story continuation study") -> str:
    data = {
        "format": ANSWERS_FORMAT,
        "study_id": study.key.study_id,
        "items": [{k: v for k, v in item.items() if k != "study_id"} for item in public_items(study)],
        "questions": QUESTIONS,
        "labels": PREFERENCE_LABELS,
    }
    # "</" cannot end the script element early once escaped
    blob = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return (_TEMPLATE.replace("__TITLE__", html.escape(title))
            .replace("__STUDY_ID__", html.escape(study.key.study_id))
            .replace("__INSTRUCTIONS__", instructions_html())
            .replace("__DATA__", blob))


def write_page(study: Study, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(study), encoding="utf-8")
    return path


_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;background:#f6f7f9;margin:0}
main{max-width:74em;margin:0 auto;padding:1em 1.5em 3em}
header{display:flex;flex-wrap:wrap;gap:.5em 1.5em;align-items:center;justify-content:space-between}
h1{font-size:1.35em;margin:.3em 0}.muted{color:#777;font-size:.85em}
.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:1em 1.2em;margin:1em 0}
details summary{cursor:pointer;font-weight:600}dt{font-weight:600;margin-top:.5em}dd{margin:0 0 0 1em}
.progress{flex:1;min-width:14em}.bar{height:8px;background:#e3e6ea;border-radius:4px;overflow:hidden}
.bar div{height:100%;background:#2f7d4f;width:0}
.input{background:#f0f3f7;border-left:4px solid #8a9bb0;padding:.6em .9em;margin:.4em 0 1em}
.texts{display:flex;gap:1em}.texts>div{flex:1;border:1px solid #dde1e6;border-radius:6px;padding:.6em .9em}
.texts h3{margin:.1em 0 .4em;font-size:1em}
@media (max-width:800px){.texts{flex-direction:column}}
fieldset{border:none;padding:0;margin:.8em 0}legend{font-weight:600;padding:0}
label.opt{display:inline-block;margin:.25em .4em .25em 0;padding:.3em .8em;border:1px solid #c5ccd4;border-radius:4px;background:#fff;cursor:pointer}
label.opt:has(input:checked){background:#dbeee2;border-color:#2f7d4f}
.issues{display:flex;gap:2em;flex-wrap:wrap}
nav{display:flex;gap:.5em;flex-wrap:wrap;align-items:center}
button{font:inherit;padding:.35em .9em;border-radius:4px;border:1px solid #9aa5b1;background:#fff;cursor:pointer}
button.primary{background:#2f7d4f;color:#fff;border-color:#2f7d4f}button:disabled{opacity:.45;cursor:default}
.grid{display:flex;flex-wrap:wrap;gap:3px;margin-top:.6em}
.grid button{width:2.6em;padding:.1em 0;font-size:.75em}.grid button.done{background:#dbeee2}
.grid button.part{background:#fdf1d6}.grid button.here{outline:2px solid #234}
#message{min-height:1.4em;color:#a33}textarea{width:100%;height:7em;font:12px monospace}
</style></head>
<body><main>
<header><div><h1>__TITLE__</h1><div class="muted">study <span id="study-id">__STUDY_ID__</span></div></div>
<div class="progress"><div id="progress-text">0 of 0 items answered</div><div class="bar"><div id="progress-bar"></div></div></div>
<label>Your name or worker id: <input id="annotator" size="16" autocomplete="off"></label>
<button id="start">Start</button></header>
<details class="card" open><summary>Instructions</summary>__INSTRUCTIONS__
<p class="muted">Your answers are saved in this browser as you go. When you are done, press
<b>Export answers</b> and send the downloaded file back.</p></details>
<section class="card" id="item">
<div class="muted" id="position"></div>
<h2 style="font-size:1.05em;margin:.4em 0 0">Input</h2><div class="input" id="input"></div>
<div class="texts"><div><h3>Text 1</h3><div id="left"></div></div><div><h3>Text 2</h3><div id="right"></div></div></div>
<form id="form" onsubmit="return false">
<fieldset id="q-informativeness"></fieldset><fieldset id="q-coherence"></fieldset>
<fieldset><legend>Do the texts have entity issues?</legend><div class="issues">
<div id="q-entity_issue_left"></div><div id="q-entity_issue_right"></div></div></fieldset>
</form>
<nav><button id="prev">&larr; Previous</button><button id="next" class="primary">Next &rarr;</button>
<button id="next-open">Next unanswered</button><span id="message"></span></nav>
<div class="grid" id="grid"></div>
</section>
<section class="card"><nav><button id="export" class="primary">Export answers</button>
<span class="muted" id="export-note"></span></nav>
<textarea id="export-text" readonly hidden></textarea></section>
</main>
<script type="application/json" id="study-data">__DATA__</script>
<script>
"use strict";
const S = JSON.parse(document.getElementById("study-data").textContent);
const FIELDS = ["informativeness", "coherence", "entity_issue_left", "entity_issue_right"];
const PREFS = ["left", "right", "tie"];
const $ = (id) => document.getElementById(id);
const prefix = "eric-humaneval/" + S.study_id + "/";
let annotator = "", answers = {}, index = 0;

function storageKey() { return prefix + "answers/" + annotator; }
function save() {
  localStorage.setItem(storageKey(), JSON.stringify(answers));
  localStorage.setItem(prefix + "position/" + annotator, String(index));
}
function complete(id) { const a = answers[id] || {}; return FIELDS.every((f) => a[f]); }
function started(id) { const a = answers[id] || {}; return FIELDS.some((f) => a[f]); }

function radio(field, value, text) {
  const label = document.createElement("label"); label.className = "opt";
  const input = document.createElement("input");
  input.type = "radio"; input.name = field; input.value = value;
  input.dataset.field = field;
  input.addEventListener("change", () => {
    const id = S.items[index].item_id;
    answers[id] = Object.assign({}, answers[id], {[field]: value});
    save(); refresh();
  });
  label.append(input, " " + text); return label;
}
function buildQuestions() {
  for (const field of ["informativeness", "coherence"]) {
    const box = $("q-" + field), legend = document.createElement("legend");
    legend.textContent = S.questions[field]; box.append(legend);
    for (const p of PREFS) box.append(radio(field, p, S.labels[p]));
  }
  for (const field of ["entity_issue_left", "entity_issue_right"]) {
    const box = $("q-" + field);
    box.append(field === "entity_issue_left" ? "Text 1: " : "Text 2: ");
    box.append(radio(field, "yes", "Yes, issues"), radio(field, "no", "No issues"));
  }
  S.items.forEach((item, i) => {
    const b = document.createElement("button"); b.textContent = item.item_id; b.title = "item " + item.item_id;
    b.addEventListener("click", () => show(i)); $("grid").append(b);
  });
}
function show(i) {
  index = Math.max(0, Math.min(S.items.length - 1, i));
  const item = S.items[index];
  $("input").textContent = item.input; $("left").textContent = item.left; $("right").textContent = item.right;
  const a = answers[item.item_id] || {};
  for (const input of $("form").querySelectorAll("input")) input.checked = a[input.dataset.field] === input.value;
  $("position").textContent = "Item " + (index + 1) + " of " + S.items.length + " (id " + item.item_id + ")";
  $("message").textContent = "";
  if (annotator) save();
  refresh(); window.scrollTo(0, 0);
}
function refresh() {
  const done = S.items.filter((it) => complete(it.item_id)).length;
  $("progress-text").textContent = done + " of " + S.items.length + " items answered";
  $("progress-bar").style.width = (100 * done / Math.max(1, S.items.length)) + "%";
  const buttons = $("grid").children;
  S.items.forEach((it, i) => {
    buttons[i].className = (complete(it.item_id) ? "done" : started(it.item_id) ? "part" : "") + (i === index ? " here" : "");
  });
  $("prev").disabled = index === 0; $("next").disabled = index === S.items.length - 1;
  for (const input of $("form").querySelectorAll("input")) input.disabled = !annotator;
}
function begin() {
  const name = $("annotator").value.trim();
  if (!name) { $("message").textContent = "Enter your name or worker id first."; $("annotator").focus(); return; }
  annotator = name; localStorage.setItem(prefix + "annotator", name);
  answers = JSON.parse(localStorage.getItem(storageKey()) || "{}");
  show(parseInt(localStorage.getItem(prefix + "position/" + name) || "0", 10) || 0);
}
function exportAnswers() {
  if (!annotator) { $("export-note").textContent = "Enter your name and press Start first."; return; }
  const rows = S.items.filter((it) => started(it.item_id))
    .map((it) => Object.assign({item_id: it.item_id}, answers[it.item_id]));
  const out = {format: S.format, version: 1, study_id: S.study_id, annotator: annotator,
               exported: new Date().toISOString(), answers: rows};
  const text = JSON.stringify(out, null, 1);
  $("export-text").value = text; $("export-text").hidden = false;
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text], {type: "application/json"}));
  link.download = "answers-" + S.study_id + "-" + annotator.replace(/[^A-Za-z0-9_-]+/g, "_") + ".json";
  document.body.append(link); link.click(); link.remove();
  const open = S.items.length - S.items.filter((it) => complete(it.item_id)).length;
  $("export-note").textContent = "Exported " + rows.length + " answered items" +
    (open ? " (" + open + " not finished yet)." : ", all finished. Thank you!");
}
$("start").addEventListener("click", begin);
$("annotator").addEventListener("keydown", (e) => { if (e.key === "Enter") begin(); });
$("prev").addEventListener("click", () => show(index - 1));
$("next").addEventListener("click", () => show(index + 1));
$("next-open").addEventListener("click", () => {
  for (let k = 1; k <= S.items.length; k++) {
    const i = (index + k) % S.items.length;
    if (!complete(S.items[i].item_id)) { show(i); return; }
  }
  $("message").textContent = "All items are answered.";
});
$("export").addEventListener("click", exportAnswers);
buildQuestions();
$("annotator").value = localStorage.getItem(prefix + "annotator") || "";
if ($("annotator").value) begin(); else show(0);
</script>
</body></html>
"""
