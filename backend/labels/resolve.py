"""Turn annotations into one answer per prompt, and say what could not be used (pure).

Answers are compared as the grader sees them (``parse_gold``), so "72" and "72.0" agree on a numeric
pool. Several annotators of one prompt are settled by majority; a tie is left for the manager."""

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from backend.curation.grading import TaskType, parse_gold

EXAMPLES = 20  # of each kind of problem, listed by id in the report
# The report's kinds of problem, in words (the API's messages and the CLI).
PROBLEMS = {"unknown_ids": "ids not in this pool", "empty_answers": "empty answers",
            "ungradeable": "answers the task type cannot grade", "disagreements": "prompts settled by majority",
            "ties": "ties left for you to settle"}


@dataclass(frozen=True)
class ResolvedAnswer:
    answer: str  # as an annotator wrote it (the most common spelling of the winning answer)
    gold: str  # normalised for grading
    annotations: int  # gradable annotations of this prompt
    agreeing: int  # of those, how many gave the kept answer


@dataclass
class Resolution:
    answers: dict[str, ResolvedAnswer] = field(default_factory=dict)
    annotation_count: int = 0
    unknown_ids: list[str] = field(default_factory=list)
    empty: list[dict] = field(default_factory=list)  # {"id", "line"}
    ungradeable: list[dict] = field(default_factory=list)  # {"id", "answer", "line"}
    disagreements: list[dict] = field(default_factory=list)  # {"id", "answer", "agreeing", "annotations"}
    ties: list[dict] = field(default_factory=list)  # {"id", "answers": {answer: count}}

    def report(self) -> dict:
        """Counts, and up to EXAMPLES of each problem, for the import report."""
        return {
            "annotations": self.annotation_count,
            "matched": len(self.answers),
            "unknown_ids": {"count": len(self.unknown_ids), "examples": self.unknown_ids[:EXAMPLES]},
            "empty_answers": {"count": len(self.empty), "examples": self.empty[:EXAMPLES]},
            "ungradeable": {"count": len(self.ungradeable), "examples": self.ungradeable[:EXAMPLES]},
            "disagreements": {"count": len(self.disagreements), "examples": self.disagreements[:EXAMPLES]},
            "ties": {"count": len(self.ties), "examples": self.ties[:EXAMPLES]},
        }


def resolve(annotations: Iterable, known_ids: set[str], task_type: TaskType) -> Resolution:
    """One answer per known prompt from `annotations` (objects with external_id, answer and line).

    Unknown ids, empty answers and answers the task type cannot grade are listed, not used; a prompt
    whose gradable answers tie is listed in `ties` and gets no answer."""
    result = Resolution()
    votes: dict[str, Counter] = defaultdict(Counter)  # id -> gold -> count
    spellings: dict[tuple[str, str], Counter] = defaultdict(Counter)  # (id, gold) -> raw answer -> count
    unknown: dict[str, None] = {}
    for note in annotations:
        result.annotation_count += 1
        if note.external_id not in known_ids:
            unknown.setdefault(note.external_id)
            continue
        answer = (note.answer or "").strip()
        if not answer:
            result.empty.append({"id": note.external_id, "line": note.line})
            continue
        gold = None if "\x00" in answer else parse_gold(answer, task_type)  # Postgres text cannot hold NUL
        if gold is None:
            result.ungradeable.append({"id": note.external_id, "answer": answer[:200].replace("\x00", "\ufffd"),
                                       "line": note.line})
            continue
        votes[note.external_id][gold] += 1
        spellings[note.external_id, gold][answer] += 1
    result.unknown_ids = list(unknown)
    for external_id, counts in votes.items():
        ranked = counts.most_common()
        total = sum(counts.values())
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            top = ranked[0][1]
            result.ties.append({"id": external_id, "answers": {
                spellings[external_id, gold].most_common(1)[0][0]: count for gold, count in ranked if count == top}})
            continue
        gold, agreeing = ranked[0]
        answer = spellings[external_id, gold].most_common(1)[0][0]
        result.answers[external_id] = ResolvedAnswer(answer=answer, gold=gold, annotations=total, agreeing=agreeing)
        if agreeing < total:
            result.disagreements.append({"id": external_id, "answer": answer, "agreeing": agreeing,
                                         "annotations": total})
    return result
