"""The report package's HTML pages, rendered from the Jinja2 templates shipped in it.

The templates live in `report/templates/` and are loaded as package data, so
an installed wheel renders the same pages as a source checkout.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from trainjob_conformance.report.words import every_word


@cache
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("trainjob_conformance.report", "templates"),
        # Reasons, titles, profiles and paths come from result files, possibly
        # from elsewhere: every value is escaped unless a template says otherwise.
        autoescape=True,
        # A misspelt name fails the render instead of leaving a hole in the page.
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    # Every page paints the words from the one table (report/words.py).
    environment.globals["words"] = every_word()
    return environment


def render_page(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(**context)
