"""CSV exports a spreadsheet will not execute, and a guarded sheet that comes back still matches its ids."""

import csv
import io
import json

from backend.csv_cells import safe_cell, unguard_cell
from backend.labels.formats import LabelingRow, parse_labels, template_csv
from backend.subsets.export import COLUMNS, csv_chunks, jsonl_chunks

FORMULAS = ["=1+2", "+SUM(A1)", "-3 + 4 = ?", "@cmd", "\tx=1"]


def test_cells_that_start_a_formula_are_quoted_and_nothing_else_changes():
    for text in FORMULAS:
        assert safe_cell(text) == "'" + text and unguard_cell(safe_cell(text)) == text
    for kept in ["What is 3 + 4?", "", "'quoted already", 5, -3.5, None, "-3", "+2.5", "-1e3"]:
        assert safe_cell(kept) == kept and unguard_cell(kept) == kept


def test_the_labeling_template_is_guarded_and_reads_back_with_its_ids():
    rows = [LabelingRow(f"@{i}", text) for i, text in enumerate(FORMULAS)]
    sheet = list(csv.reader(io.StringIO(template_csv(rows).decode())))
    assert sheet[1][:2] == ["'@0", "'=1+2"] and all(cell[0] == "'" for row in sheet[1:] for cell in row[:2])
    filled = "\n".join([",".join(sheet[0])] + [f"{row[0]},x,{i}" for i, row in enumerate(sheet[1:])])
    parsed = parse_labels("to-label.csv", filled.encode())
    assert [(a.external_id, a.answer) for a in parsed.annotations] == [(f"@{i}", str(i)) for i in range(5)]
    negative = template_csv([LabelingRow("-7", "What is 2 - 9?")]).decode().splitlines()[1]
    assert negative.startswith("-7,")  # a negative id is a number, not a formula


def test_subset_csv_guards_prompt_text_but_jsonl_keeps_it():
    row = {column: None for column in COLUMNS} | {"prompt": "=HYPERLINK(\"http://x\")", "id": "@7"}
    exported = b"".join(csv_chunks(iter([[row]]))).decode()
    read = next(csv.DictReader(io.StringIO(exported)))
    assert read["prompt"] == "'" + row["prompt"] and read["id"] == "'@7"
    assert json.loads(b"".join(jsonl_chunks(iter([[row]]))))["prompt"] == row["prompt"]
