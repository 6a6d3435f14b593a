"""worker beats: which worker processes are alive (for /api/health and the pages' banner)

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'worker_beat',
        sa.Column('name', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('hostname', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('pid', sa.Integer(), nullable=False),
        sa.Column('queues', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('started_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('seen_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )
    op.create_index(op.f('ix_worker_beat_seen_at'), 'worker_beat', ['seen_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_worker_beat_seen_at'), table_name='worker_beat')
    op.drop_table('worker_beat')
