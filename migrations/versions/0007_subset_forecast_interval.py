"""subset forecast: nullable (label-free probes have none) and its 95% interval

Revision ID: 0007
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


# SQLite rebuilds the table for alter_column; keep its AUTOINCREMENT (0004) through the rebuild.
KEEP_AUTOINCREMENT = {"sqlite_autoincrement": True}


def upgrade() -> None:
    with op.batch_alter_table('subset', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.alter_column('predicted_learnable_share', existing_type=sa.Float(), nullable=True)
        batch_op.add_column(sa.Column('predicted_learnable_share_low', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('predicted_learnable_share_high', sa.Float(), nullable=True))
    # Label-free subsets stored 0.0 as a placeholder for "no forecast".
    op.execute("UPDATE subset SET predicted_learnable_share = NULL WHERE probe_id IN "
               "(SELECT id FROM probe WHERE label_free)")


def downgrade() -> None:
    op.execute("UPDATE subset SET predicted_learnable_share = 0 WHERE predicted_learnable_share IS NULL")
    with op.batch_alter_table('subset', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.drop_column('predicted_learnable_share_high')
        batch_op.drop_column('predicted_learnable_share_low')
        batch_op.alter_column('predicted_learnable_share', existing_type=sa.Float(), nullable=False)
