"""The structured-output suite (schema_suite.py: 100+ JSON schemas, 30 regexes) on the default
model, two seeded samples each at temperature 1.0: every grammar either constrains every completed
output to validate (jsonschema with its format checker, re.fullmatch) or is refused with a 4xx in
TGI's error shape before generation. scripts/bench/schema_suite.py runs the same with many
samples each and commits the counts."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from schema_suite import REGEXES, SCHEMAS, run_case

SEEDS = (11, 12)


def _post(server):
    def post(body):
        r = server.post("/generate", body, timeout=300)
        return r.status_code, r.json()
    return post


@pytest.fixture(scope="module")
def outcomes(server):
    cases = [("json", n, s) for n, s in SCHEMAS.items()] + [("regex", n, r) for n, r in REGEXES.items()]
    with ThreadPoolExecutor(8) as pool:  # the engine batches them
        results = pool.map(lambda c: run_case(_post(server), *c, seeds=SEEDS), cases)
        return {(kind, name): out for (kind, name, _), out in zip(cases, results)}


def test_no_completed_output_violates_its_grammar(outcomes):
    violations = {k: v["invalid"] for k, v in outcomes.items() if v["invalid"]}
    assert not violations, violations


def test_most_grammars_are_enforced_not_refused(outcomes):
    # Refusing everything would pass the test above; the engine must enforce the common shapes.
    for kind, total in (("json", len(SCHEMAS)), ("regex", len(REGEXES))):
        refused = {n: v["refused"] for (k, n), v in outcomes.items() if k == kind and v["refused"]}
        assert len(refused) <= total // 10, refused
        enforced = [v for (k, _), v in outcomes.items() if k == kind and not v["refused"]]
        assert sum(v["valid"] for v in enforced) >= len(enforced), "most samples must complete"
