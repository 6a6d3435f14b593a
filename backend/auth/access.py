"""Who may do what: one rule per API operation, the table the middleware enforces and the tests walk.

Every route under /api must have a rule here (``check_coverage`` runs when the app is built), so a new route
cannot ship without a decision. ``own`` names the path parameter whose row a non-admin must have created (their
own pools, jobs, experiments, label imports, tokens); ``changes`` says whether the operation changes state and
so writes an audit row (previews and exports of a selection are POSTs that only read).
"""

from dataclasses import dataclass

from backend.auth.roles import check_role

PUBLIC = "public"  # no sign-in: health and the sign-in itself


@dataclass(frozen=True)
class Rule:
    role: str
    own: str | None = None
    changes: bool = True
    identifies: bool = False  # public, but names the caller when credentials come along


def _rule(role: str, *, own: str | None = None, changes: bool = True, identifies: bool = False) -> Rule:
    return Rule(role if role == PUBLIC else check_role(role), own, changes, identifies)


READ = _rule("viewer", changes=False)
MANAGE = _rule("manager")
ADMIN = _rule("admin")
ADMIN_READ = _rule("admin", changes=False)

ACCESS: dict[tuple[str, str], Rule] = {
    ("GET", "/api/health"): _rule(PUBLIC, changes=False),
    # Sign-in, the session and tokens: everyone signs in and out and manages their own tokens.
    ("POST", "/api/session"): _rule(PUBLIC),
    ("GET", "/api/session"): _rule(PUBLIC, changes=False, identifies=True),  # who am I: anonymous is an answer
    ("DELETE", "/api/session"): _rule("viewer"),
    ("GET", "/api/tokens"): READ,
    ("POST", "/api/tokens"): _rule("viewer"),
    ("DELETE", "/api/tokens/{token_id}"): _rule("viewer", own="token_id"),
    ("GET", "/api/users"): ADMIN_READ,
    ("POST", "/api/users"): ADMIN,
    ("PATCH", "/api/users/{user_id}"): ADMIN,
    ("GET", "/api/audit"): ADMIN_READ,
    ("GET", "/api/audit.csv"): ADMIN_READ,
    # Pools and labels
    ("GET", "/api/pools"): READ,
    ("POST", "/api/pools"): MANAGE,
    ("POST", "/api/pools/demo"): MANAGE,
    ("GET", "/api/pools/presets"): READ,
    ("GET", "/api/pools/{pool_id}"): READ,
    ("DELETE", "/api/pools/{pool_id}"): _rule("manager", own="pool_id"),
    ("GET", "/api/pools/{pool_id}/prompts"): READ,
    ("PUT", "/api/pools/{pool_id}/labeling"): MANAGE,
    ("GET", "/api/pools/{pool_id}/labels"): READ,
    ("POST", "/api/pools/{pool_id}/labels"): MANAGE,
    ("POST", "/api/pools/{pool_id}/regrade"): MANAGE,
    ("GET", "/api/label-sets/{label_set_id}"): READ,
    ("POST", "/api/label-sets/{label_set_id}/undo"): _rule("manager", own="label_set_id"),
    ("GET", "/api/label-studio"): READ,
    ("PUT", "/api/label-studio"): ADMIN,  # the server's one connection, with its API key
    ("DELETE", "/api/label-studio"): ADMIN,
    # Probes, selections and subsets
    ("GET", "/api/probes"): READ,
    ("POST", "/api/probes"): MANAGE,
    ("GET", "/api/probes/presets"): READ,
    ("GET", "/api/probes/{probe_id}"): READ,
    ("GET", "/api/probes/{probe_id}/difficulty"): READ,
    ("GET", "/api/probes/{probe_id}/failures"): READ,
    ("GET", "/api/probes/{probe_id}/prompts/{prompt_id}/samples"): READ,
    ("GET", "/api/probes/{probe_id}/trust"): READ,
    ("POST", "/api/selections/preview"): _rule("viewer", changes=False),
    ("POST", "/api/selections/labeling-export"): _rule("viewer"),  # records the export (labels come back to it)
    ("GET", "/api/subsets"): READ,
    ("POST", "/api/subsets"): MANAGE,
    ("GET", "/api/subsets/{subset_id}"): READ,
    ("GET", "/api/subsets/{subset_id}/export"): READ,
    ("GET", "/api/subsets/{subset_id}/labeling-export"): _rule("viewer"),  # records the export, as above
    ("POST", "/api/subsets/{subset_id}/label-studio/push"): MANAGE,
    ("POST", "/api/subsets/{subset_id}/label-studio/pull"): MANAGE,
    # Jobs, models, runs and experiments
    ("GET", "/api/jobs"): READ,
    ("GET", "/api/jobs/{job_id}"): READ,
    ("GET", "/api/jobs/{job_id}/events"): READ,
    ("POST", "/api/jobs/{job_id}/cancel"): _rule("manager", own="job_id"),
    ("GET", "/api/models"): READ,
    ("GET", "/api/training/presets"): READ,
    ("GET", "/api/runs"): READ,
    ("POST", "/api/runs"): MANAGE,
    ("GET", "/api/runs/{run_id}"): READ,
    ("GET", "/api/runs/{run_id}/adapter"): READ,
    ("GET", "/api/runs/{run_id}/config"): READ,
    ("GET", "/api/runs/{run_id}/figures"): READ,
    ("GET", "/api/runs/{run_id}/metrics"): READ,
    ("GET", "/api/runs/{run_id}/metrics.csv"): READ,
    ("GET", "/api/runs/{run_id}/moved"): READ,
    ("POST", "/api/runs/{run_id}/reprobe"): MANAGE,
    ("GET", "/api/experiments"): READ,
    ("POST", "/api/experiments"): MANAGE,
    ("POST", "/api/experiments/demo"): MANAGE,
    ("GET", "/api/experiments/{experiment_id}"): READ,
    ("POST", "/api/experiments/{experiment_id}/cancel"): _rule("manager", own="experiment_id"),
    ("GET", "/api/experiments/{experiment_id}/capacity"): READ,
    ("GET", "/api/experiments/{experiment_id}/compare"): READ,
    ("POST", "/api/experiments/{experiment_id}/reprobe"): MANAGE,
}


def check_coverage(operations: set[tuple[str, str]]) -> None:
    """Raise unless every API operation has exactly one rule and every rule an operation."""
    missing, stale = operations - ACCESS.keys(), ACCESS.keys() - operations
    if missing or stale:
        raise RuntimeError(f"backend/auth/access.py is out of date: no rule for {sorted(missing)}; "
                           f"rules without a route: {sorted(stale)}")
