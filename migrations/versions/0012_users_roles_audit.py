"""users, roles, sessions and the audit trail: tokens belong to users and carry a role, expiry, last use and
revocation; pools, probes, subsets, runs, experiments, jobs and label sets record who created them; jobs record
the tokens they will generate (for quotas)

Existing tokens go to a new user 'admin', with no password here: the next start gives it
BUDGETLAB_ADMIN_PASSWORD or prints a generated one once. Admin tokens keep the admin role, the others get
manager, which is what they could do before.

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None

KEEP_AUTOINCREMENT = {"sqlite_autoincrement": True}
CREATED_BY = ("pool", "probe", "subset", "run", "experiment", "job", "label_set")


def upgrade() -> None:
    op.create_table('app_user',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('password_hash', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name'),
    sqlite_autoincrement=True
    )
    bind = op.get_bind()
    has_tokens = bind.execute(sa.text("SELECT COUNT(*) FROM api_token")).scalar() > 0
    if has_tokens:
        bind.execute(sa.text("INSERT INTO app_user (name, role, disabled, created_at) "
                             "VALUES ('admin', 'admin', :no, CURRENT_TIMESTAMP)"), {"no": False})
    with op.batch_alter_table('api_token', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.add_column(sa.Column('user_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('role', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(sa.Column('expires_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column('last_used_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column('revoked_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
    if has_tokens:
        bind.execute(sa.text("UPDATE api_token SET user_id = (SELECT id FROM app_user WHERE name = 'admin'), "
                             "role = CASE WHEN is_admin THEN 'admin' ELSE 'manager' END"))
    with op.batch_alter_table('api_token', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.alter_column('user_id', existing_type=sa.Integer(), nullable=False)
        batch_op.alter_column('role', existing_type=sqlmodel.sql.sqltypes.AutoString(), nullable=False)
        batch_op.drop_column('is_admin')
        batch_op.create_foreign_key('fk_api_token_user_id_app_user', 'app_user', ['user_id'], ['id'],
                                    ondelete='CASCADE')
        batch_op.create_index(batch_op.f('ix_api_token_user_id'), ['user_id'], unique=False)
    op.create_table('user_session',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('csrf_token', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('expires_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['app_user.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token_hash'),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_user_session_user_id'), 'user_session', ['user_id'], unique=False)
    op.create_table('audit_event',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('actor', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('via', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('operation', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('target', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('address', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('outcome', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('status', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['app_user.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id'),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_audit_event_at'), 'audit_event', ['at'], unique=False)
    op.create_index(op.f('ix_audit_event_kind'), 'audit_event', ['kind'], unique=False)
    op.create_index(op.f('ix_audit_event_user_id'), 'audit_event', ['user_id'], unique=False)
    _append_only()
    with op.batch_alter_table('job', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.add_column(sa.Column('work_tokens', sa.BigInteger(), server_default='0', nullable=False))
    for table in CREATED_BY:
        with op.batch_alter_table(table, table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
            batch_op.add_column(sa.Column('created_by_id', sa.Integer(), nullable=True))
            batch_op.create_foreign_key(f'fk_{table}_created_by_id_app_user', 'app_user', ['created_by_id'], ['id'],
                                        ondelete='SET NULL')
            batch_op.create_index(batch_op.f(f'ix_{table}_created_by_id'), ['created_by_id'], unique=False)


def _append_only() -> None:
    """The database itself refuses to change or delete an audit row (users are disabled, never deleted, so the
    user_id foreign key never nulls one either)."""
    if op.get_bind().dialect.name == "sqlite":
        for action in ("UPDATE", "DELETE"):
            op.execute(f"CREATE TRIGGER audit_event_no_{action.lower()} BEFORE {action} ON audit_event "
                       f"BEGIN SELECT RAISE(ABORT, 'audit_event is append-only'); END")
        return
    op.execute("CREATE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS "
               "$$ BEGIN RAISE EXCEPTION 'audit_event is append-only'; END $$")
    op.execute("CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON audit_event "
               "FOR EACH ROW EXECUTE FUNCTION audit_event_append_only()")


def downgrade() -> None:
    for table in reversed(CREATED_BY):
        with op.batch_alter_table(table, table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
            batch_op.drop_index(batch_op.f(f'ix_{table}_created_by_id'))
            batch_op.drop_constraint(f'fk_{table}_created_by_id_app_user', type_='foreignkey')
            batch_op.drop_column('created_by_id')
    with op.batch_alter_table('job', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.drop_column('work_tokens')
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP TRIGGER audit_event_append_only ON audit_event")
        op.execute("DROP FUNCTION audit_event_append_only()")
    op.drop_index(op.f('ix_audit_event_user_id'), table_name='audit_event')
    op.drop_index(op.f('ix_audit_event_kind'), table_name='audit_event')
    op.drop_index(op.f('ix_audit_event_at'), table_name='audit_event')
    op.drop_table('audit_event')
    op.drop_index(op.f('ix_user_session_user_id'), table_name='user_session')
    op.drop_table('user_session')
    # Without roles, expiry and revocation a token could do everything: drop those that must not work.
    op.execute("DELETE FROM api_token WHERE revoked_at IS NOT NULL OR expires_at IS NOT NULL OR role = 'viewer' "
               "OR user_id IN (SELECT id FROM app_user WHERE disabled = " + ("1" if op.get_bind().dialect.name ==
                                                                            "sqlite" else "true") + ")")
    with op.batch_alter_table('api_token', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.add_column(sa.Column('is_admin', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute("UPDATE api_token SET is_admin = (role = 'admin')")
    with op.batch_alter_table('api_token', table_kwargs=KEEP_AUTOINCREMENT) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_token_user_id'))
        batch_op.drop_constraint('fk_api_token_user_id_app_user', type_='foreignkey')
        for column in ('revoked_at', 'last_used_at', 'expires_at', 'role', 'user_id'):
            batch_op.drop_column(column)
    op.drop_table('app_user')
