"""adaptive probing: a probe's stop rule and samples drawn; its shards' rounds and open prompts

Revision ID: 0010
Revises: 0009
"""
import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

# SQLite rebuilds the table to drop a column; keep the probe's AUTOINCREMENT (0004) through the rebuild.
KEEP_AUTOINCREMENT = {"sqlite_autoincrement": True}


def upgrade() -> None:
    with op.batch_alter_table('probe', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.add_column(sa.Column('adaptive', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('samples_drawn', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
                                      nullable=True))
    with op.batch_alter_table('probe_shard') as batch_op:
        batch_op.add_column(sa.Column('round', sa.Integer(), server_default='1', nullable=False))
        batch_op.add_column(sa.Column('prompt_ids', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('probe_shard') as batch_op:
        batch_op.drop_column('prompt_ids')
        batch_op.drop_column('round')
    with op.batch_alter_table('probe', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.drop_column('samples_drawn')
        batch_op.drop_column('adaptive')
