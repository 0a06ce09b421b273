"""The bundled example: the diabetes table under a GDP budget, one demo analyst."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from dpsieve.accounting.events import GDP
from dpsieve.ledger.base import BudgetNotFoundError, BudgetStore
from dpsieve.service.auth import hash_key, new_key
from dpsieve.session import filter_for_budget

__all__ = ["EXAMPLE_BUDGET", "EXAMPLE_DATASET", "example_path", "setup_example", "usage"]

EXAMPLE_DATASET = "diabetes"
#: mu = 1 GDP: about (eps = 4.9, delta = 1e-6), the tradeoff of telling apart N(0,1), N(1,1).
EXAMPLE_BUDGET = GDP(1.0)
#: The example's declared column types (a CSV file's are text until declared).
EXAMPLE_TYPES = {"age": "integer", "sex": "integer", "bmi": "float", "bp": "float",
                 "s1": "float", "s2": "float", "s3": "float", "s4": "float", "s5": "float",
                 "s6": "float", "target": "float"}


def example_path() -> Path:
    """The bundled CSV (442 rows; see src/dpsieve/data/README.md)."""
    return Path(str(resources.files("dpsieve").joinpath("data/diabetes.csv")))


def setup_example(store: BudgetStore) -> dict[str, Any]:
    """Register the example data set (once), and a fresh key for analyst ``demo``."""
    src = store.dataset(EXAMPLE_DATASET) or {}
    store.register_dataset(EXAMPLE_DATASET, {
        **src, "path": str(example_path()), "neighbouring": "add_remove",
        "columns": list(EXAMPLE_TYPES), "column_types": dict(EXAMPLE_TYPES),
        "budget": EXAMPLE_BUDGET.to_dict()})
    try:
        store.load_filter(EXAMPLE_DATASET)
    except BudgetNotFoundError:
        store.create_budget(EXAMPLE_DATASET, filter_for_budget(EXAMPLE_BUDGET))
    key = new_key()
    store.add_principal("demo", "analyst", hash_key(key))
    store.grant("demo", EXAMPLE_DATASET)
    return {"dataset": EXAMPLE_DATASET, "analyst": "demo", "api_key": key}


def usage(base: str, key: str, dataset: str = EXAMPLE_DATASET) -> str:
    """How to query the example with curl, as text to print."""
    q = ('{"type": "mean", "column": "bmi", "lower": 15, "upper": 45,'
         ' "privacy": {"type": "pure", "eps": 0.2}}')
    h = ('{"type": "histogram", "column": "sex", "categories": [1, 2],'
         ' "privacy": {"type": "pure", "eps": 0.1}}')
    auth = f'-H "Authorization: Bearer {key}"'
    post = f'curl -s -X POST {auth} -H "Content-Type: application/json"'
    return "\n".join([
        f"Analyst key (shown once): {key}",
        "",
        "Data sets you may query, with the budget left:",
        f"  curl -s {auth} {base}/v1/datasets",
        "A private mean (clipped to [15, 45], Laplace noise, eps = 0.2):",
        f"  {post} -d '{q}' {base}/v1/datasets/{dataset}/queries",
        "A private histogram:",
        f"  {post} -d '{h}' {base}/v1/datasets/{dataset}/queries",
        "Budget and history:",
        f"  curl -s {auth} {base}/v1/datasets/{dataset}/budget",
        f"The budget page: {base}/ui#dataset={dataset}&key={key}",
        f"OpenAPI: {base}/docs",
    ])
