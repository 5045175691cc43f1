"""Summarize a JUnit XML report of the YAML tests per directory and per file (markdown).

    pytest tests/yaml --junitxml=/tmp/yaml.xml ; python tests/yaml/summarize.py /tmp/yaml.xml
"""
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def main(path):
    per_dir = defaultdict(lambda: {"passed": 0, "failed": 0, "skipped": 0})
    per_file = defaultdict(lambda: {"passed": 0, "failed": 0, "skipped": 0})
    for tc in ET.parse(path).getroot().iter("testcase"):
        m = re.search(r"\[(.+?\.ya?ml)::", tc.get("name", ""))
        if not m:
            continue
        file = m.group(1)
        d = file.split("/")[0]
        outcome = "passed"
        if tc.find("failure") is not None or tc.find("error") is not None:
            outcome = "failed"
        elif tc.find("skipped") is not None:
            outcome = "skipped"
        per_dir[d][outcome] += 1
        per_file[file][outcome] += 1
    print("| directory | passed | failed | skipped |\n|---|---:|---:|---:|")
    tot = {"passed": 0, "failed": 0, "skipped": 0}
    for d in sorted(per_dir):
        c = per_dir[d]
        for k in tot:
            tot[k] += c[k]
        print(f"| {d} | {c['passed']} | {c['failed']} | {c['skipped']} |")
    print(f"| **total** | {tot['passed']} | {tot['failed']} | {tot['skipped']} |")
    full = sorted(f for f, c in per_file.items() if c["failed"] == 0 and c["passed"] > 0)
    print(f"\nFiles with every non-skipped test passing ({len(full)}):\n")
    for d in sorted(per_dir):
        files = [f.split("/", 1)[1] for f in full if f.startswith(d + "/")]
        print(f"- {d}: " + (", ".join(files) if files else "(none)"))


if __name__ == "__main__":
    main(sys.argv[1])
