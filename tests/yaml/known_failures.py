"""Regenerates shoal_known_failures.txt from a pytest run of the YAML tests against Shoal.

    .venv/bin/pytest tests/yaml -q -rfE --tb=line -p no:cacheprovider > /tmp/yaml.out
    python tests/yaml/known_failures.py /tmp/yaml.out

Each failing test is listed with the first words of its failure as the reason.
"""
import re
import sys
from pathlib import Path

out = Path(sys.argv[1]).read_text()
failures = {}
for m in re.finditer(r"Failed: (?P<id>[^\n]+?\.yml::[^\n]+?): (?P<why>[^\n]*)", out):
    why = re.sub(r"\s+", " ", m.group("why"))
    for pattern, short in [(r"No handler for type \[(\w+)\]", "field type [{}] not supported"),
                           (r"\[(\w+)\] query is not supported", "[{}] query not supported"),
                           (r"\[(\w+)\] is not supported by Shoal", "[{}] not supported")]:
        hit = re.search(pattern, why)
        if hit:
            why = short.format(hit.group(1))
            break
    failures[m.group("id")] = why[:140]
header = ("# Shoal's known failures among the allowlisted OpenSearch REST YAML tests (xfail on Shoal).\n"
          "# Regenerate: see tests/yaml/known_failures.py. Remove a line when its test passes.\n")
lines = [f"{case}  # {why}" for case, why in sorted(failures.items())]
(Path(__file__).parent / "shoal_known_failures.txt").write_text(header + "\n".join(lines) + "\n")
print(f"{len(lines)} known failures written")
