"""probe prompting and grading: chat-template options and grading policy on the probe; a run keeps the
training prompt its worker rendered

A probe's template and chat-template options are what training and evaluation render prompts with, and
its grading policy (strict: the last \\boxed{} only; lenient: also unboxed answers) is what rewards and
evaluation grade with. Probes made before this revision were graded leniently, hence the server default.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs (no table rebuild), so 0004's AUTOINCREMENT stays on SQLite.
    with op.batch_alter_table('probe', schema=None) as batch_op:
        batch_op.add_column(sa.Column('chat_template_options', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('grading_policy', sa.String(), nullable=False,
                                      server_default='lenient'))

    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('prompt_example', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.drop_column('prompt_example')

    with op.batch_alter_table('probe', schema=None) as batch_op:
        batch_op.drop_column('grading_policy')
        batch_op.drop_column('chat_template_options')
