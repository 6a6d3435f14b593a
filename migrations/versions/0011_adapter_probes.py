"""adapter probes: a run's trained policy probed (the adapter on the probe), linked to the base probe it is
compared with

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


# SQLite rebuilds the table to drop a column; keep the probe's AUTOINCREMENT (0004) through the rebuild.
KEEP_AUTOINCREMENT = {"sqlite_autoincrement": True}


def upgrade() -> None:
    with op.batch_alter_table('probe', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.add_column(sa.Column('adapter_path', sa.Text(), nullable=True))
    op.create_table('adapter_probe',
    sa.Column('probe_id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('baseline_probe_id', sa.Integer(), nullable=True),
    sa.Column('scope', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.ForeignKeyConstraint(['baseline_probe_id'], ['probe.id'], ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['probe_id'], ['probe.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('probe_id')
    )
    op.create_index(op.f('ix_adapter_probe_run_id'), 'adapter_probe', ['run_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_adapter_probe_run_id'), table_name='adapter_probe')
    op.drop_table('adapter_probe')
    with op.batch_alter_table('probe', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.drop_column('adapter_path')
