"""Files for annotators, in each format a manager can pick: the bytes and the file name."""

import io
import json
import zipfile

from backend.labels import formats
from backend.labels.formats import LabelingRow

MEDIA = {"label-studio": "application/json", "label-studio-config": "application/xml", "argilla": "application/zip",
         "csv": "text/csv", "jsonl": "application/x-ndjson"}
SUFFIX = {"label-studio": "label-studio-tasks.json", "label-studio-config": "label-studio-config.xml",
          "argilla": "argilla.zip", "csv": "to-label.csv", "jsonl": "to-label.jsonl"}


def export_file(task_type: str, pool_id: int, rows: list[LabelingRow], format: str, stem: str) -> tuple[bytes, str]:
    """(content, file name) of `rows` in `format`, one of MEDIA's keys."""
    if format == "label-studio":
        body = json.dumps(formats.label_studio_tasks(rows, pool_id), ensure_ascii=False, indent=1).encode()
    elif format == "label-studio-config":
        body = formats.label_studio_config(task_type, [row.prompt for row in rows]).encode()
    elif format == "argilla":  # the folder rg.Dataset.from_disk reads, zipped
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, content in formats.argilla_dataset(rows, task_type, pool_id).items():
                archive.writestr(f"{stem}-argilla/{name}", content)
        body = buffer.getvalue()
    elif format in ("csv", "jsonl"):
        body = formats.template_csv(rows) if format == "csv" else formats.template_jsonl(rows)
    else:
        raise ValueError(f"Unknown labeling format '{format}'; use one of: {', '.join(MEDIA)}.")
    return body, f"{stem}-{SUFFIX[format]}"
