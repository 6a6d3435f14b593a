"""A frozen subset of a probed pool (with or without answers), written straight to the database."""

from sqlalchemy import insert

from backend.database import session_scope
from backend.probes.tables import Probe
from backend.subsets.tables import Subset, SubsetMember
from tests.subsets.conftest import make_probed_pool
from tests.worker.model_fixtures import service_tiny_model, tiny_artifacts, use_artifacts  # noqa: F401


def make_subset(size: int = 6, *, label_free: bool = False, **probe_fields) -> int:
    """``probe_fields`` set on the probe (model, template, chat_template_options, grading_policy)."""
    probed = make_probed_pool(size, label_free=label_free)
    with session_scope() as session:
        probe = session.get(Probe, probed.probe_id)
        for name, value in probe_fields.items():
            setattr(probe, name, value)
        subset = Subset(name="train me", probe_id=probed.probe_id, pool_id=probed.pool_id, strategy="random",
                        budget_kind="count", budget_value=size, n_requested=size, n=size, seed=0, group_size=2,
                        predicted_learnable_share=0.5)
        session.add(subset)
        session.flush()
        session.execute(insert(SubsetMember), [{"subset_id": subset.id, "rank": rank, "prompt_id": pid}
                                               for rank, pid in enumerate(probed.prompt_ids)])
        return subset.id
