"""ids are never reused on SQLite: AUTOINCREMENT on every table with an id

Without AUTOINCREMENT SQLite hands out max(id) + 1, so a pool, probe or run created after a delete
got the deleted one's id, and caches, exports and bookmarks naming that id pointed at the new row.
Postgres ids come from sequences, which never go back; nothing changes there.

Each table is rebuilt by copy (rows and ids kept); env.py runs this with foreign keys off, so the
drop of the old table cannot cascade, and checks the foreign keys before committing.

Revision ID: 0004
Revises: 0003
"""
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

# Parents before children, as they were created.
TABLES = ("api_token", "job", "job_event", "pool", "prompt", "probe", "sample", "subset", "run", "experiment")


def _rebuild(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}):
            pass


def upgrade() -> None:
    _rebuild(True)


def downgrade() -> None:
    _rebuild(False)
