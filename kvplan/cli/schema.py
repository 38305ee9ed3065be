"""`kvplan schema`: print the JSON Schema of every report kvplan writes."""

import typer

from kvplan.cli.options import writing_stdout
from kvplan.report.schema import schema_json

EPILOG = (
    "Examples:\n\n"
    "  kvplan schema > kvplan-report.schema.json\n\n"
    "  kvplan check kvplan.yaml --format json > report.json && "
    "check-jsonschema --schemafile kvplan-report.schema.json report.json"
)


def schema() -> None:
    """Print the JSON Schema (draft 2020-12) that every kvplan report validates against."""
    with writing_stdout():
        typer.echo(schema_json(), nl=False)
