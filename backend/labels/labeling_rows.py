"""The prompts to send for labeling, in rank order: a frozen subset's, or a planner preview's."""

from sqlmodel import Session, select

from backend.labels.formats import LabelingRow
from backend.pools.tables import Prompt
from backend.subsets.tables import Subset, SubsetMember

_CHUNK = 1000


def subset_rows(session: Session, subset: Subset) -> list[LabelingRow]:
    query = (select(Prompt.external_id, Prompt.text).join(SubsetMember, SubsetMember.prompt_id == Prompt.id)
             .where(SubsetMember.subset_id == subset.id).order_by(SubsetMember.rank))
    return [LabelingRow(external_id=external_id, prompt=text) for external_id, text in session.exec(query)]


def prompt_rows(session: Session, prompt_ids: list[int]) -> list[LabelingRow]:
    """Rows for these prompts, in the order given."""
    found: dict[int, LabelingRow] = {}
    for start in range(0, len(prompt_ids), _CHUNK):
        chunk = prompt_ids[start:start + _CHUNK]
        for prompt_id, external_id, text in session.exec(select(Prompt.id, Prompt.external_id, Prompt.text)
                                                         .where(Prompt.id.in_(chunk))):
            found[prompt_id] = LabelingRow(external_id=external_id, prompt=text)
    return [found[prompt_id] for prompt_id in prompt_ids]
