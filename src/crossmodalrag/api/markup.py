"""Turning ingested text into HTML that cannot run anything.

Notes and repositories are untrusted input: a note may hold `<script>`, an `onerror=` attribute or a
`javascript:` link. Markdown is rendered with raw HTML disabled (markdown-it escapes it as text) and
the result then passes an allowlist sanitiser (nh3), so both would have to fail at once. Images in
notes are not fetched (the CSP allows only this server): they show as their alt text and address.
"""

from __future__ import annotations

from functools import lru_cache

from markupsafe import Markup, escape

ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li", "strong", "em", "del",
    "code", "pre", "a", "table", "thead", "tbody", "tr", "th", "td", "span",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "td": {"align"}, "th": {"align"}, "ol": {"start"}}


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
    md.disable("image")  # `![alt](src)` stays a link to src: nothing is loaded from outside
    return md


def sanitize(html: str) -> str:
    import nh3

    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def render_markdown(text: str) -> Markup:
    """Markdown → sanitised HTML, safe to put in a page as is."""
    return Markup(sanitize(_markdown().render(text)))


def render_diff(text: str) -> Markup:
    """A diff hunk as lines classed by their first character (added, removed, hunk header), escaped."""
    lines = []
    for line in text.splitlines():
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        if line.startswith(("+++", "---")):
            kind = "file"
        lines.append(f'<span class="diff-{kind}">{escape(line) or " "}</span>')
    # Each span is a block (app.css): a newline between them inside <pre> was a blank line after each.
    return Markup("".join(lines))
