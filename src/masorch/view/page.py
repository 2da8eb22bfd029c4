"""The viewer's page: the HTML template with its scripts and styles, linked (served) or inlined (export).

Scripts and styles are package data (``masorch/view/static``): the page works offline, with no CDN.
"""

from __future__ import annotations

import html
from importlib import resources

from masorch.prompts import render

#: The static files the page loads, with their content types.
ASSETS = {
    "echarts.min.js": "text/javascript; charset=utf-8",
    "view.js": "text/javascript; charset=utf-8",
    "view.css": "text/css; charset=utf-8",
}


def asset(name: str) -> bytes:
    """The bytes of one static file of :data:`ASSETS` (a KeyError for any other name)."""
    if name not in ASSETS:
        raise KeyError(name)
    return (resources.files("masorch.view") / "static" / name).read_bytes()


def _script_text(name: str) -> str:
    text = asset(name).decode("utf-8")
    if "</script" in text.lower():  # would end the inline <script> early
        raise ValueError(f"{name} cannot be inlined: it contains '</script'")
    return text


def render_page(title: str, *, data_json: str | None = None) -> str:
    """The page; with ``data_json`` (from :func:`~masorch.view.payload.to_json`) one self-contained file."""
    inline = data_json is not None
    return (
        render(
            "view/page.html.j2",
            title=html.escape(title),
            inline=inline,
            data_json=data_json or "",
            css=asset("view.css").decode("utf-8") if inline else "",
            echarts_js=_script_text("echarts.min.js") if inline else "",
            view_js=_script_text("view.js") if inline else "",
        )
        + "\n"
    )
