"""labels: label sets with history, labeling exports, label jobs, the Label Studio connection;
pool cost per label; probe scores revision (labels re-grade stored samples)

Revision ID: 0008
Revises: 0007
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

# Should SQLite rebuild a table, keep its AUTOINCREMENT (0004) through the rebuild.
KEEP_AUTOINCREMENT = {"sqlite_autoincrement": True}


def upgrade() -> None:
    op.create_table('label_studio_connection',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('url', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('api_key', sa.Text(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('updated_by', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sqlite_autoincrement=True
    )
    op.create_table('label_set',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('pool_id', sa.Integer(), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('format', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('token_name', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('label_count', sa.Integer(), nullable=False),
    sa.Column('changed_count', sa.Integer(), nullable=False),
    sa.Column('report', sa.JSON(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('undone_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('undone_by', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.ForeignKeyConstraint(['pool_id'], ['pool.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('label_set', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_label_set_pool_id'), ['pool_id'], unique=False)

    op.create_table('prompt_label',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('label_set_id', sa.Integer(), nullable=False),
    sa.Column('prompt_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('answer', sa.Text(), nullable=False),
    sa.Column('gold', sa.Text(), nullable=False),
    sa.Column('previous_answer', sa.Text(), nullable=True),
    sa.Column('previous_gold', sa.Text(), nullable=True),
    sa.Column('annotations', sa.Integer(), nullable=False),
    sa.Column('agreeing', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['label_set_id'], ['label_set.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['prompt_id'], ['prompt.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('prompt_label', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_prompt_label_label_set_id'), ['label_set_id'], unique=False)
        batch_op.create_index('ix_prompt_label_prompt', ['prompt_id', 'id'], unique=False)

    op.create_table('label_job',
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('action', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('pool_id', sa.Integer(), nullable=False),
    sa.Column('subset_id', sa.Integer(), nullable=True),
    sa.Column('prompt_ids', sa.JSON(), nullable=True),
    sa.Column('token_name', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['job.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['pool_id'], ['pool.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['subset_id'], ['subset.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id')
    )
    op.create_table('labeling_export',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('pool_id', sa.Integer(), nullable=False),
    sa.Column('subset_id', sa.Integer(), nullable=True),
    sa.Column('format', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('prompt_count', sa.Integer(), nullable=False),
    sa.Column('label_studio_project_id', sa.Integer(), nullable=True),
    sa.Column('label_studio_url', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('job_id', sa.Integer(), nullable=True),
    sa.Column('token_name', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['job.id'], ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['pool_id'], ['pool.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['subset_id'], ['subset.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('labeling_export', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_labeling_export_pool_id'), ['pool_id'], unique=False)

    with op.batch_alter_table('pool', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.add_column(sa.Column('cost_per_label', sa.Float(), nullable=True))

    with op.batch_alter_table('probe', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.add_column(sa.Column('scores_revision', sa.Integer(), server_default='0', nullable=False))



def downgrade() -> None:
    with op.batch_alter_table('probe', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.drop_column('scores_revision')

    with op.batch_alter_table('pool', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.drop_column('cost_per_label')

    with op.batch_alter_table('labeling_export', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_labeling_export_pool_id'))

    op.drop_table('labeling_export')
    op.drop_table('label_job')
    with op.batch_alter_table('prompt_label', schema=None) as batch_op:
        batch_op.drop_index('ix_prompt_label_prompt')
        batch_op.drop_index(batch_op.f('ix_prompt_label_label_set_id'))

    op.drop_table('prompt_label')
    with op.batch_alter_table('label_set', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_label_set_pool_id'))

    op.drop_table('label_set')
    op.drop_table('label_studio_connection')
