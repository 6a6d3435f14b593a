"""Password hashes: argon2id with argon2-cffi's defaults (RFC 9106 low-memory profile)."""

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
MIN_LENGTH = 10
# Verified against when the name is unknown, so a wrong name takes as long as a wrong password.
_DUMMY = _hasher.hash("budgetlab-no-such-user")


def check_password_rules(password: str) -> str:
    if len(password) < MIN_LENGTH:
        raise ValueError(f"the password must have at least {MIN_LENGTH} characters")
    return password


def hash_password(password: str) -> str:
    return _hasher.hash(check_password_rules(password))


def verify_password(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(password_hash or _DUMMY, password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False
