"""Every job kind, registered once. The API, the CLI, the reconciler and the workers import this module;
a new kind is one module of its own and one line here."""

from backend.labels.kind import LABEL_KINDS
from backend.probes.kind import PROBE
from backend.runs.kind import TRAIN

KINDS = (PROBE, TRAIN, *LABEL_KINDS.values())
