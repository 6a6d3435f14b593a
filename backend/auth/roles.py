"""Roles, narrowest first: each can do what the ones before it can."""

ROLES = ("viewer", "manager", "admin")


class RoleError(ValueError):
    pass


def check_role(role: str) -> str:
    if role not in ROLES:
        raise RoleError(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
    return role


def allows(role: str, required: str) -> bool:
    """Whether ``role`` may do what ``required`` may."""
    return ROLES.index(role) >= ROLES.index(required)


def narrower(a: str, b: str) -> str:
    return a if ROLES.index(a) <= ROLES.index(b) else b
