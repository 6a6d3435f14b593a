from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Integer
from sqlmodel import Field, SQLModel

from backend.auth.tables import created_by_field
from backend.timeutil import utcnow


class Subset(SQLModel, table=True):
    """A frozen selection: reproducible from (probe, strategy, n, seed, group_size, band)."""

    id: int | None = Field(default=None, primary_key=True)
    name: str
    probe_id: int = Field(sa_column=Column(Integer, ForeignKey("probe.id", ondelete="CASCADE"), index=True,
                                           nullable=False))
    pool_id: int = Field(sa_column=Column(Integer, ForeignKey("pool.id", ondelete="CASCADE"), nullable=False))
    strategy: str
    budget_kind: str = Field(description="count, fraction or money")
    budget_value: float
    cost_per_prompt: float | None = None
    n_requested: int
    n: int
    seed: int
    group_size: int
    band_low: float | None = None
    band_high: float | None = None
    # At step 0, with its 95% interval; None for a label-free probe (agreement is not a pass rate).
    predicted_learnable_share: float | None = None
    predicted_learnable_share_low: float | None = None
    predicted_learnable_share_high: float | None = None
    mean_pass_rate: float | None = None
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = created_by_field()


class SubsetMember(SQLModel, table=True):
    __tablename__ = "subset_member"
    subset_id: int = Field(sa_column=Column(Integer, ForeignKey("subset.id", ondelete="CASCADE"),
                                            primary_key=True))
    rank: int = Field(primary_key=True)
    prompt_id: int = Field(sa_column=Column(BigInteger().with_variant(Integer, "sqlite"),
                                            ForeignKey("prompt.id", ondelete="CASCADE"), nullable=False))
