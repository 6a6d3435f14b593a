"""job tasks: the outbox a job's tasks are sent from, and the leases their workers hold

Jobs that were unfinished at the upgrade get their tasks, marked sent (their messages went out before):
a lost one is sent again by the reconciler.

Revision ID: 0009
Revises: 0008
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

UNFINISHED = ("queued", "running", "cancelling")
FLOOR = 900.0  # the time limits of tasks made here: BUDGETLAB_TIME_LIMIT_FLOOR_SECONDS's default, plus a day
DAY = 86_400.0


def upgrade() -> None:
    op.create_table('job_task',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('label', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('args', sa.JSON(), nullable=False),
    sa.Column('soft_limit_seconds', sa.Float(), nullable=False),
    sa.Column('hard_limit_seconds', sa.Float(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('sent_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('sends', sa.Integer(), nullable=False),
    sa.Column('claimed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('claims', sa.Integer(), nullable=False),
    sa.Column('losses', sa.Integer(), nullable=False),
    sa.Column('lease_owner', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('lease_expires_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('completed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('completed_by', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['job.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_job_task_job_id'), 'job_task', ['job_id'], unique=False)
    op.create_index(op.f('ix_job_task_sent_at'), 'job_task', ['sent_at'], unique=False)
    op.create_index(op.f('ix_job_task_lease_expires_at'), 'job_task', ['lease_expires_at'], unique=False)
    _tasks_for_unfinished_jobs()


def _tasks_for_unfinished_jobs() -> None:
    bind = op.get_bind()
    now = sa.func.now() if bind.dialect.name == "postgresql" else sa.text("CURRENT_TIMESTAMP")
    unfinished = ", ".join(f"'{status}'" for status in UNFINISHED)
    rows = []
    for probe_id, job_id, shard_index in bind.execute(sa.text(
            "SELECT probe.id, probe.job_id, probe_shard.shard_index FROM probe JOIN job ON job.id = probe.job_id "
            "JOIN probe_shard ON probe_shard.probe_id = probe.id "
            f"WHERE job.status IN ({unfinished}) AND probe_shard.completed_at IS NULL")):
        rows.append((job_id, f"shard {shard_index}", {"probe_id": probe_id, "shard_index": shard_index}))
    for run_id, job_id in bind.execute(sa.text(
            f"SELECT run.id, run.job_id FROM run JOIN job ON job.id = run.job_id WHERE job.status IN ({unfinished})")):
        rows.append((job_id, "the run", {"run_id": run_id}))
    for job_id, action in bind.execute(sa.text(
            "SELECT label_job.job_id, label_job.action FROM label_job JOIN job ON job.id = label_job.job_id "
            f"WHERE job.status IN ({unfinished})")):
        rows.append((job_id, f"the {action}", {}))
    table = sa.table('job_task', sa.column('job_id'), sa.column('label'), sa.column('args', sa.JSON()),
                     sa.column('soft_limit_seconds'), sa.column('hard_limit_seconds'), sa.column('created_at'),
                     sa.column('sent_at'), sa.column('sends'), sa.column('claims'), sa.column('losses'))
    for job_id, label, args in rows:
        bind.execute(table.insert().values(job_id=job_id, label=label, args=args, soft_limit_seconds=FLOOR + DAY,
                                           hard_limit_seconds=FLOOR + DAY + 300, created_at=now, sent_at=now,
                                           sends=1, claims=0, losses=0))


def downgrade() -> None:
    op.drop_index(op.f('ix_job_task_lease_expires_at'), table_name='job_task')
    op.drop_index(op.f('ix_job_task_sent_at'), table_name='job_task')
    op.drop_index(op.f('ix_job_task_job_id'), table_name='job_task')
    op.drop_table('job_task')
