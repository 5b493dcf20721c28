"""Reads a metrics scrape on stdin and checks it with the Prometheus Python client's parser
(Debian's python3-prometheus-client), an implementation of the text format that is not ours:
every line parses, every family is fabric_*, counters are named *_total, samples sit under their
family's TYPE line, no series repeats, the values are numbers. Exit 0 when it holds; prints why
and exits 1 otherwise."""
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    problems = []
    if not text.endswith("\n"):
        problems.append("text does not end with a newline")
    sample_lines = [l for l in text.splitlines() if l and not l.startswith("#")]
    # The parser renames counter samples to *_total, so names are checked on the raw text: each
    # TYPE line's family, and each sample under the family its TYPE line named.
    family = None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ")
            if kind == "counter" and not family.endswith("_total"):
                problems.append(f"{family}: counter not named *_total")
        elif line and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            if name != family:
                problems.append(f"{name}: sample outside its family ({family})")
    seen = set()
    samples = 0
    families = 0
    for parsed in text_string_to_metric_families(text):
        families += 1
        if parsed.type not in ("gauge", "counter"):
            problems.append(f"{parsed.name}: type {parsed.type}")
        for s in parsed.samples:
            samples += 1
            if not s.name.startswith("fabric_"):
                problems.append(f"{s.name}: not fabric_*")
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in seen:
                problems.append(f"series twice: {key}")
            seen.add(key)
            if not isinstance(s.value, float) or (math.isnan(s.value) and "NaN" not in text):
                problems.append(f"{s.name}: value {s.value!r}")
    if samples != len(sample_lines):
        problems.append(f"parsed {samples} samples of {len(sample_lines)} sample lines")
    if families == 0:
        problems.append("no families")
    for p in problems[:20]:
        print(p)
    print(f"{families} families, {samples} samples, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
