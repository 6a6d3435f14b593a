"""CSV cells a spreadsheet will not run: text starting with =, +, -, @ (or a tab or carriage return, which
some spreadsheets skip before looking) is prefixed with a single quote, as OWASP advises. Numbers stay numbers.

Only CSV, the format people open in spreadsheets, is guarded: JSONL and Parquet carry the exact text. A sheet
that comes back (a labeling template filled in) is read with `unguard_cell`, so its ids still match.
"""

_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value):
    if isinstance(value, str) and value.startswith(_TRIGGERS):
        return "'" + value
    return value


def safe_row(values):
    return [safe_cell(v) for v in values]


def unguard_cell(value):
    """The text `safe_cell` guarded, as it was."""
    if isinstance(value, str) and value.startswith("'") and value[1:].startswith(_TRIGGERS):
        return value[1:]
    return value
