"""CSV cells a spreadsheet will not run: text starting with =, +, -, @ (or a tab or carriage return, which
some spreadsheets skip before looking) is prefixed with a single quote, as OWASP advises. Numbers, negative
ones included, stay numbers.

Only CSV, the format people open in spreadsheets, is guarded: JSONL and Parquet carry the exact text. A sheet
that comes back (a labeling template filled in) is read with `unguard_cell`, so its ids still match.
"""

_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def safe_cell(value):
    """A negative or signed number ("-3", "+2.5") is data a spreadsheet reads as a number: left as it is."""
    if isinstance(value, str) and value.startswith(_TRIGGERS) and not _is_number(value):
        return "'" + value
    return value


def safe_row(values):
    return [safe_cell(v) for v in values]


def unguard_cell(value):
    """The text `safe_cell` guarded, as it was."""
    if isinstance(value, str) and value.startswith("'") and value[1:].startswith(_TRIGGERS) \
            and not _is_number(value[1:]):
        return value[1:]
    return value
