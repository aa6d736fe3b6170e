"""The report as a document: a list of blocks (headings, paragraphs, tables, figures) built once and
rendered twice, as Markdown that links the PNGs in ``figures/`` and as one self-contained HTML page that
embeds them as base64 data URIs."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field


@dataclass
class Doc:
    blocks: list[tuple] = field(default_factory=list)
    figures: list[tuple[str, bytes]] = field(default_factory=list)  # (file name, PNG bytes)

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, columns: list[str], rows: list[list[str]], right: list[bool]) -> None:
        self.blocks.append(("table", columns, rows, right))

    def figure(self, name: str, png: bytes, alt: str, caption: str) -> None:
        self.figures.append((name, png))
        self.blocks.append(("fig", name, alt, caption))


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|")


def render_md(doc: Doc) -> str:
    out: list[str] = []
    for b in doc.blocks:
        if b[0] == "h":
            out.append("#" * b[1] + " " + b[2])
        elif b[0] == "p":
            out.append(b[1])
        elif b[0] == "table":
            _, cols, rows, right = b
            out.append("| " + " | ".join(_md_cell(c) for c in cols) + " |")
            out.append("|" + "|".join("---:" if r else "---" for r in right) + "|")
            out.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows)
        elif b[0] == "fig":
            _, name, alt, caption = b
            out.append(f"![{alt}](figures/{name})\n\n*{caption}*")
        out.append("")
    return "\n".join(out)


_CODE = re.compile(r"`([^`]+)`")


_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _inline(text: str) -> str:
    s = html.escape(text)
    s = _CODE.sub(r"<code>\1</code>", s)
    return _BOLD.sub(r"<strong>\1</strong>", s)


_CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;"
    "padding:0 1em;color:#222;line-height:1.45}table{border-collapse:collapse;margin:1em 0;font-size:.9em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em}th{background:#f2f2f2}td.r{text-align:right}"
    "figure{margin:1.5em 0}img{max-width:100%;height:auto}figcaption{font-style:italic;color:#444}"
    "code{background:#f4f4f4;padding:0 .2em}"
)


def render_html(doc: Doc, title: str) -> str:
    pngs = dict(doc.figures)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
    ]
    for b in doc.blocks:
        if b[0] == "h":
            out.append(f"<h{b[1]}>{_inline(b[2])}</h{b[1]}>")
        elif b[0] == "p":
            text = b[1]
            if len(text) > 2 and text[0] == text[-1] == "_":  # a note in Markdown italics: the same here
                out.append(f"<p><em>{_inline(text[1:-1])}</em></p>")
            else:
                out.append(f"<p>{_inline(text)}</p>")
        elif b[0] == "table":
            _, cols, rows, right = b
            out.append(
                "<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in cols) + "</tr></thead>"
            )
            out.append("<tbody>")
            for row in rows:
                cells = "".join(
                    f'<td class="r">{_inline(c)}</td>' if r else f"<td>{_inline(c)}</td>"
                    for c, r in zip(row, right, strict=True)
                )
                out.append(f"<tr>{cells}</tr>")
            out.append("</tbody></table>")
        elif b[0] == "fig":
            _, name, alt, caption = b
            data = base64.b64encode(pngs[name]).decode("ascii")
            out.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'
                f"<figcaption>{_inline(caption)}</figcaption></figure>"
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"
