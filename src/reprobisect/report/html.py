"""The report as one self-contained HTML page: it must open from a mail attachment or a CI artifact.

No network and no CDN: the CSS and the small sorting script are inline, plots are ``data:`` URIs, and each
run's traceback and the tail of its log sit in a ``<details>`` element one click from the matrix. Every
piece of text from a record or a log is HTML-escaped: logs are written by code under test.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from reprobisect.model.outcome import Outcome
from reprobisect.model.verdict import SEVERITY
from reprobisect.report.load import Bisect
from reprobisect.report.markdown import LEGEND, environment_line, transition_lines
from reprobisect.report.verdicts import KEY, verdicts
from reprobisect.report.views import (
    OUTCOME_COLOURS,
    WARM_UP_NOTE,
    ReportData,
    cell_labels,
    env_errors,
    fix_order,
    reproduce_command,
    sorted_cells,
    step_stats,
    varying_axes,
)

__all__ = ["LOG_TAIL_LINES", "log_tail", "report_html", "traceback_text"]

LOG_TAIL_LINES = 200
_MAX_LOG_BYTES = 2_000_000  # read only the end of a runaway log
_TRACEBACK_HEAD = "Traceback (most recent call last):"


def _blank(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _e(value: object) -> str:
    return html.escape("" if _blank(value) else str(value))


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> tuple[str, int]:
    """The last ``lines`` lines of a log and how many it has; a readable note when it is missing."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - _MAX_LOG_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(log not readable: {exc})", 0
    all_lines = text.splitlines()
    return "\n".join(all_lines[-lines:]), len(all_lines)


def traceback_text(log: str, max_lines: int = 80) -> str:
    """The last Python traceback in a log, from its header through the exception line(s)."""
    lines = log.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip().endswith(_TRACEBACK_HEAD)]
    if not heads:
        return ""
    block: list[str] = []
    for line in lines[heads[-1] :]:
        block.append(line)
        body = line.split("]: ", 1)[-1] if line.startswith("[rank") else line
        if len(block) > 1 and body and not body.startswith((" ", "\t", "^", "~")):
            break  # the unindented exception line ends the traceback
    return "\n".join(block[:max_lines])


def _table(head: Sequence[str], rows: Iterable[str], *, cls: str = "sortable") -> str:
    ths = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f'<table class="{cls}"><thead><tr>{ths}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _td(value: object, *, sort: object = None, cls: str = "") -> str:
    attrs = f' data-sort="{_e(sort)}"' if sort is not None else ""
    attrs += f' class="{cls}"' if cls else ""
    text = f"{value:.1f}" if isinstance(value, float) and not _blank(value) else value
    return f"<td{attrs}>{'–' if _blank(text) else _e(text)}</td>"


def _matrix(data: ReportData, repro: str, form: str) -> str:
    frame = data.frame
    part = frame[(frame["repro"] == repro) & (frame["form"] == form)]
    folded, labels = verdicts(part), cell_labels(frame)
    fixes = fix_order(part["fix"])
    rows = []
    for cell in sorted_cells(part):
        tds = [f'<th scope="row" data-sort="{_e(cell)}" title="{_e(cell)}">{_e(labels[cell])}</th>']
        for fix in fixes:
            verdict = folded.get((repro, cell, form, fix))
            if verdict is None:
                tds.append('<td class="empty">·</td>')
                continue
            more = "".join(f' <a class="rep" href="#run-{_e(r)}">r{i}</a>' for i, r in enumerate(verdict.run_ids))
            flaky = " flaky" if verdict.flaky else ""
            tds.append(
                f'<td class="o o-{verdict.outcome}{flaky}" data-sort="{SEVERITY[verdict.outcome]}" '
                f'title="{_e(verdict.outcome)}"><a href="#run-{_e(verdict.run_ids[0])}">{_e(verdict.label)}'
                f"</a>{more if len(verdict.run_ids) > 1 else ''}</td>"
            )
        rows.append(f"<tr>{''.join(tds)}</tr>")
    head = [" · ".join(varying_axes(frame)) or "cell", *fixes]
    return _table(head, rows, cls="sortable matrix")


def _signatures(part: pd.DataFrame) -> str:
    sigs = part[part["signature_id"] != ""].drop_duplicates("signature_id")
    items = []
    for row in sigs.to_dict("records"):
        known = f" — known <code>{_e(row['known_signature'])}</code>" if row["known_signature"] else ""
        upstream = f" ({_e(row['upstream'])})" if row["upstream"] else ""
        items.append(
            f'<li><code class="o-{_e(row["outcome"])}">{_e(row["signature_id"])}</code> '
            f"{_e(row['signature'])}{known}{upstream}</li>"
        )
    return f"<ul class=sigs>{''.join(items)}</ul>" if items else ""


def _matrices(data: ReportData) -> str:
    out = []
    for (repro, form), part in data.frame.groupby(["repro", "form"], sort=True):
        precision = ", ".join(sorted(set(part["precision"])))
        out.append(
            f'<section><h2 id="m-{_e(repro)}-{_e(form)}">{_e(repro)} · {_e(form)} ({_e(precision)})</h2>'
            f"{_matrix(data, str(repro), str(form))}<p class=legend>{_e(LEGEND)}</p>{_signatures(part)}"
            "</section>"
        )
    return "".join(out)


def _comparison(data: ReportData) -> str:
    comp = data.comparison
    if comp is None:
        return ""
    flagged = ", ".join(f"{n} {k}" for k, n in comp.counts().items() if n) or "nothing"
    labels = cell_labels(data.frame)
    rows = [
        f'<tr class="ch-{_e(r["kind"])}">{_td(r["kind"])}{_td(labels.get(r["cell"], r["cell"]))}{_td(r["form"])}'
        f"{_td(r['fix'])}{_td(r['baseline'])}{_td(r['current'])}{_td(r['detail'])}</tr>"
        for r in comp.changes.to_dict("records")
    ]
    timing = [
        f'<tr class="{"regression" if r["regression"] else ""}">{_td(labels.get(r["cell"], r["cell"]))}'
        f"{_td(r['form'])}{_td(r['fix'])}{_td(r['baseline_ms'])}{_td(r['current_ms'])}"
        f"{_td(round(r['ratio'], 3))}{_td(r['step_noise_ms'])}{_td(r['repeat_noise_ms'])}{_td(r['band_ms'])}"
        f"{_td('yes' if r['regression'] else 'no')}</tr>"
        for r in comp.timings.to_dict("records")
    ]
    overall = comp.overall_ratio
    moved = (
        f"<p class=warn>Every timed run moved: median ratio ×{overall:.2f}. A busier or different machine "
        "slows every run alike; compare timings made under the same conditions.</p>"
        if overall is not None and not 1 / comp.threshold <= overall <= comp.threshold
        else ""
    )
    return (
        f'<section><h2 id="comparison">Compared with baseline <code>{_e(data.baseline)}</code></h2>'
        f"<p>Flagged: <strong>{_e(flagged)}</strong>. A slow-down counts when the median step time ratio "
        f"&gt; {comp.threshold:.2f} and the difference &gt; {comp.k:g} × (step noise + repeat noise). "
        f"Not compared: {len(comp.only_baseline)} only in the baseline, {len(comp.only_current)} only now.</p>"
        + moved
        + (_table(["change", "cell", "form", "fix", "baseline", "current", "detail"], rows) if rows else "")
        + "<details><summary>Every timing compared</summary>"
        + _table(
            [
                "cell",
                "form",
                "fix",
                "baseline ms",
                "current ms",
                "ratio",
                "step noise ms",
                "repeat noise ms",
                "band ms",
                "regression",
            ],
            timing,
        )
        + "</details></section>"
    )


def _plots(data: ReportData) -> str:
    figures = [
        f'<figure><img alt="{_e(name)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        f"<figcaption>{_e(name)}</figcaption></figure>"
        for name, png in data.plots.items()
    ]
    return f'<section><h2 id="plots">Plots</h2>{"".join(figures)}</section>' if figures else ""


def _steps(data: ReportData) -> str:
    stats = step_stats(data.frame)
    stats = stats[stats["steps"] > 0]
    if stats.empty:
        return ""
    labels = cell_labels(data.frame)
    rows = [
        f"<tr>{_td(labels[r['cell']], sort=r['cell'])}{_td(r['form'])}{_td(r['fix'])}{_td(r['runs'])}"
        f"{_td(r['steps'])}{_td(r['median_ms'])}{_td(r['p10_ms'])}{_td(r['p90_ms'])}{_td(r['runs_cv_pct'])}"
        f"{_td(r['first_step_ms'])}{_td(r['peak_mem_mib'])}</tr>"
        for r in stats.to_dict("records")
    ]
    head = [
        "cell",
        "form",
        "fix",
        "runs",
        "steps",
        "median ms",
        "p10 ms",
        "p90 ms",
        "runs' CV %",
        "first step ms",
        "peak MiB",
    ]
    return f'<section><h2 id="steps">Step times ({WARM_UP_NOTE})</h2>{_table(head, rows)}</section>'


def _side(side: Any) -> str:
    """One end of a transition as a coloured chip: outcome and signature id."""
    if not isinstance(side, dict):
        return _e(side)
    outcome = str(side.get("outcome", "?"))
    glyph = Outcome(outcome).glyph + " " if outcome in Outcome.__members__ else ""
    return (
        f'<span class="o o-{_e(outcome)}" title="{_e(side.get("signature") or "")}">{_e(glyph)}{_e(outcome)} '
        f"<code>{_e(side.get('signature_id') or '')}</code></span>"
    )


def _bisect(bisect: Bisect) -> str:
    """A bisect's range and each transition as ``last → first: from → to``."""
    head, *_ = transition_lines(bisect)
    summary = head.removeprefix("- ").replace("**", "").replace("`", "")
    rows = "".join(
        f"<li>last <strong>{_e(t.get('last'))}</strong> → first <strong>{_e(t.get('first'))}</strong>: "
        f"{_side(t.get('from'))} → {_side(t.get('to'))}</li>"
        for t in bisect.data["transitions"]
    )
    return f"<li>{_e(summary)}<ul>{rows or '<li>no transition: one outcome over the whole range</li>'}</ul></li>"


def _extras(data: ReportData) -> str:
    out = []
    if data.bisects:
        items = "".join(_bisect(b) for b in data.bisects)
        out.append(f'<section><h2 id="transitions">Transitions (bisect)</h2><ul class=bisects>{items}</ul></section>')
    errors = env_errors(data.frame)
    if not errors.empty:
        items = "".join(
            f"<li>{_e(r['cell'])} · {_e(r['form'])} · {_e(r['fix'])}: {_e(r['known_signature'] or r['signature'])}</li>"
            for r in errors.to_dict("records")
        )
        out.append(f'<section><h2 id="env-errors">Cells that could not run (ENV_ERROR)</h2><ul>{items}</ul></section>')
    if data.skipped:
        items = "".join(f"<li>{_e(s)}</li>" for s in data.skipped)
        out.append(f'<section><h2 id="skipped">Skipped files</h2><ul>{items}</ul></section>')
    return "".join(out)


def _runs(frame: pd.DataFrame) -> str:
    labels = cell_labels(frame)
    rows = []
    for r in frame.sort_values([*KEY, "repeat"]).to_dict("records"):
        rows.append(
            f"<tr>{_td(r['run_id'])}{_td(labels[r['cell']], sort=r['cell'])}{_td(r['form'])}{_td(r['fix'])}"
            f'{_td(r["repeat"])}<td class="o o-{_e(r["outcome"])}" data-sort="{SEVERITY[r["outcome"]]}">'
            f'<a href="#run-{_e(r["run_id"])}">{_e(r["glyph"])} {_e(r["outcome"])}</a></td>'
            f"{_td(r['signature_id'])}{_td(r['failing_step'])}{_td(r['median_step_ms'])}"
            f"{_td(r['p90_step_ms'])}{_td(r['first_step_ms'])}{_td(r['peak_mem_mib'])}{_td(r['wall_s'])}</tr>"
        )
    head = [
        "run",
        "cell",
        "form",
        "fix",
        "repeat",
        "outcome",
        "signature",
        "failing step",
        "median ms",
        "p90 ms",
        "first step ms",
        "peak MiB",
        "wall s",
    ]
    return f'<section><h2 id="runs">Runs</h2>{_table(head, rows)}</section>'


def _run_details(r: dict[str, Any]) -> str:
    tail, total = log_tail(Path(r["log_file"]))
    traceback = traceback_text(tail) or "(no Python traceback in the log)"
    command = reproduce_command(r["repro"], r, r["form"], r["fix"])
    shown = min(total, LOG_TAIL_LINES)
    return (
        f'<details id="run-{_e(r["run_id"])}" class="run"><summary><span class="o o-{_e(r["outcome"])}">'
        f"{_e(r['glyph'])} {_e(r['outcome'])}</span> {_e(r['cell'])} · {_e(r['form'])} · {_e(r['fix'])} · "
        f"r{_e(r['repeat'])} <code>{_e(r['signature_id'])}</code></summary>"
        f"<p>Reproduce: <code>{_e(command)}</code></p>"
        f"<p>Signature: {_e(r['signature'] or 'none')}</p><p>Record: <code>{_e(r['record_file'])}</code>; "
        f"log: <code>{_e(r['log_file'])}</code></p>"
        f"<h4>Traceback</h4><pre>{_e(traceback)}</pre>"
        f"<h4>Log (last {shown} of {total} lines)</h4><pre class=log>{_e(tail)}</pre></details>"
    )


def _details(frame: pd.DataFrame) -> str:
    runs: list[dict[str, Any]] = [
        {str(k): v for k, v in r.items()} for r in frame.sort_values([*KEY, "repeat"]).to_dict("records")
    ]
    return f'<section><h2 id="details">Tracebacks and logs</h2>{"".join(_run_details(r) for r in runs)}</section>'


def report_html(data: ReportData, *, title: str | None = None) -> str:
    """The whole page; opens offline, sorts on a click, and opens a run's details from its link."""
    frame = data.frame
    title = title or f"reprobisect report: {', '.join(sorted(set(frame['repro']))) or 'no runs'}"
    if frame.empty:
        body = "<p>No readable records were found.</p>" + _extras(data)
    else:
        sections = (
            _matrices(data)
            + _comparison(data)
            + _extras(data)
            + _plots(data)
            + _steps(data)
            + _runs(frame)
            + _details(frame)
        )
        body = (
            f"<p class=env><strong>Environment</strong>: {_e(environment_line(frame))}</p>"
            f"<p>{len(frame)} runs in {frame['cell'].nunique()} cell(s) from "
            f"{_e(', '.join(str(s) for s in data.sources))}.</p>" + _nav(sections) + sections
        )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_css()}</style></head>'
        f"<body><h1>{_e(title)}</h1>{body}<script>{_JS}</script></body></html>\n"
    )


def _nav(sections: str) -> str:
    """Links to the sections this page has (a report without a baseline has no comparison)."""
    names = {
        "comparison": "comparison",
        "transitions": "transitions",
        "env-errors": "ENV_ERROR",
        "skipped": "skipped files",
        "plots": "plots",
        "steps": "step times",
        "runs": "runs",
        "details": "tracebacks and logs",
    }
    links = " · ".join(f'<a href="#{k}">{v}</a>' for k, v in names.items() if f'id="{k}"' in sections)
    return f"<nav>{links}</nav>"


def _css() -> str:
    colours = "".join(
        f".o-{o}{{background:{light};border-left:4px solid {strong}}}" for o, (strong, light) in OUTCOME_COLOURS.items()
    )
    return _CSS + colours


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1400px;
padding:0 16px;color:#1f2328}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
h4{margin:10px 0 4px}table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
thead th{background:#f6f8fa;cursor:pointer;user-select:none;white-space:nowrap}
thead th[data-dir=asc]::after{content:" ▲"}thead th[data-dir=desc]::after{content:" ▼"}
table.matrix td.o{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;white-space:nowrap;min-width:110px}
table.matrix th[scope=row]{white-space:nowrap;background:#f6f8fa}td.empty{color:#8c959f;text-align:center}
td.flaky{outline:2px dashed #8250df;outline-offset:-3px}
a{color:inherit}td.o a{text-decoration:none}td.o a:hover{text-decoration:underline}a.rep{font-size:11px;color:#57606a}
.legend{color:#57606a;font-size:12px}ul.sigs{padding-left:18px}code{font-size:12px}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:8px;overflow:auto;max-height:420px;font-size:12px}
details.run{margin:4px 0;border:1px solid #d0d7de;border-radius:4px;padding:2px 8px}
details.run[open]{background:#fcfcfd}details.run summary{cursor:pointer}span.o{padding:0 6px}
figure{display:inline-block;margin:8px 16px 8px 0}figure img{max-width:100%;border:1px solid #d0d7de}
figcaption{font-size:12px;color:#57606a}tr.regression td,tr.ch-timing-regression td{background:#fff4e5}
tr.ch-new-failure td{background:#fbdada}tr.ch-fixed td{background:#dcf0dc}
nav{font-size:13px;color:#57606a;margin:4px 0 0}nav a{color:#0969da}ul.bisects li{margin:3px 0}
ul.bisects span.o{padding:1px 6px;border-radius:2px;white-space:nowrap}
p.warn{background:#fff8c5;border-left:4px solid #d4a72c;padding:4px 8px}
"""

_JS = """
(function () {
  function key(row, i) {
    var c = row.children[i];
    var v = c ? (c.dataset.sort !== undefined ? c.dataset.sort : c.textContent.trim()) : "";
    return /^-?\\d+(\\.\\d+)?$/.test(v) ? parseFloat(v) : (v === "–" ? null : v);
  }
  function cmp(x, y) {
    if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
    if (typeof x === "number" && typeof y === "number") { return x - y; }
    return String(x).localeCompare(String(y), undefined, {numeric: true});
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, i) {
      th.title = "sort";
      th.addEventListener("click", function () {
        var dir = th.dataset.dir === "asc" ? "desc" : "asc";
        Array.prototype.forEach.call(heads, function (h) { delete h.dataset.dir; });
        th.dataset.dir = dir;
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) { var c = cmp(key(a, i), key(b, i)); return dir === "asc" ? c : -c; });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
    table.dataset.sortable = "ready";
  });
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (el && el.tagName === "DETAILS") { el.open = true; el.scrollIntoView(); }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.documentElement.dataset.ready = "1";
})();
"""
