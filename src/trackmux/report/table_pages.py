"""Large tables in the report: the first page inline, the rest as small pages beside it.

Paging is plain links (both the report and its ``--static`` form): a table of
10,000 rollouts becomes ``<report>_tables/<run>-<seq>-p2.html`` ... each holding
``MAX_TABLE_ROWS`` rows with links to the previous and next page and back to the report.
The report itself stays small however many rows a step logged.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path

from trackmux.core.delivery.fallbacks import safe_filename
from trackmux.core.events import TableEvent
from trackmux.report.load import RunData
from trackmux.report.sections import MAX_TABLE_ROWS, table_html
from trackmux.report.style import CSS


def pages_dir(report: Path) -> Path:
    return report.with_name(report.stem + "_tables")


def _name(run_id: str, event: TableEvent, page: int) -> str:
    return f"{safe_filename(run_id)}-{event.seq}-p{page}.html"


def _page(run_id: str, label: str, event: TableEvent, page: int, pages: int,
          report: Path) -> str:
    start = (page - 1) * MAX_TABLE_ROWS
    end = min(start + MAX_TABLE_ROWS, len(event.rows))
    back = f"../{report.name}#tables"
    prev = back if page == 2 else _name(run_id, event, page - 1)
    links = [f'<a href="{escape(prev)}">← previous</a>']
    if page < pages:
        links.append(f'<a href="{escape(_name(run_id, event, page + 1))}">next →</a>')
    links.append(f'<a href="{escape(back)}">report</a>')
    title = f"{event.key} · step {event.step} · {label}"
    note = (f'<p class="hint">rows {start + 1}..{end} of {len(event.rows)} · page {page} of '
            f"{pages} · {' · '.join(links)}</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            "style-src 'unsafe-inline'\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"
            f"<h2>{escape(title)}</h2>{note}<div class=\"panel\">"
            f"{table_html(event, start, note)}</div></main></body></html>\n")


def write_table_pages(runs: Sequence[RunData], report: Path) -> dict[tuple[str, int], str]:
    """Write pages 2.. of every table longer than one page; return each one's page-2 link."""
    return write_pages(((run.run_id, run.label, event) for run in runs for event in run.tables),
                       report)


def write_pages(tables: Iterable[tuple[str, str, TableEvent]], report: Path
                ) -> dict[tuple[str, int], str]:
    """Pages 2.. of each (run id, run label, table) longer than one page, in
    ``<report>_tables/`` (emptied first); each one's page-2 link by (run id, seq)."""
    folder = pages_dir(report)
    if folder.exists():
        shutil.rmtree(folder)  # pages of an earlier report of the same name
    links: dict[tuple[str, int], str] = {}
    for run_id, label, event in tables:
        pages = -(-len(event.rows) // MAX_TABLE_ROWS)
        if pages < 2:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for page in range(2, pages + 1):
            (folder / _name(run_id, event, page)).write_text(
                _page(run_id, label, event, page, pages, report), encoding="utf-8")
        links[(run_id, event.seq)] = f"{folder.name}/{_name(run_id, event, 2)}"
    return links
