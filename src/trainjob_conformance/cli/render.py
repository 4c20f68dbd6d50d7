"""`render`: one template, rendered for an override shape, to stdout."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainjob_conformance.errors import ConformanceError
from trainjob_conformance.paths import suite


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    render = sub.add_parser("render", help="render a template to stdout")
    render.add_argument("template", help="template name, e.g. trainjob")
    render.add_argument("--values", help='parameters as JSON, e.g. \'{"name": "a"}\'')
    render.add_argument(
        "--shape",
        default="runtimePatches",
        choices=["podSpecOverrides", "podTemplateOverrides", "runtimePatches"],
        help="override field of the target Trainer release (default: %(default)s)",
    )
    render.add_argument(
        "--templates",
        help="template directory (default: the suite's templates/, in the package or checkout)",
    )
    render.set_defaults(func=run_render)


def _values(text: str | None) -> dict[str, object]:
    try:
        values = json.loads(text) if text else {}
    except ValueError as error:
        raise ConformanceError(
            f'--values is not JSON ({error}); e.g. \'{{"name": "a"}}\''
        ) from None
    if not isinstance(values, dict):
        raise ConformanceError("--values must be a JSON object")
    return values


def run_render(args: argparse.Namespace) -> int:
    from trainjob_conformance.render.overrides import OverrideShape
    from trainjob_conformance.render.templates import TemplateSet

    values = _values(args.values)
    templates = TemplateSet(
        Path(args.templates) if args.templates else suite().templates, OverrideShape(args.shape)
    )
    sys.stdout.write(templates.render_text(args.template, values))
    return 0
